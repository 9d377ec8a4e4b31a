"""`cg-ray keys`: create, list (never the key itself), revoke; bad input fails clearly."""

from __future__ import annotations

import json
from pathlib import Path

from cg_ray.cli import main
from cg_ray.serve.db import Store
from cg_ray.serve.keys import verify_key
from cg_ray.serve.settings import ServiceSettings


def test_keys_lifecycle(tmp_path: Path, capsys) -> None:
    data = ["keys", "--data-dir", str(tmp_path)]
    assert main([*data, "create", "--name", "ci"]) == 0
    out = capsys.readouterr().out
    key_id, key = out.split()[1], out.strip().splitlines()[-1]
    store = Store(ServiceSettings(data_dir=tmp_path).db_url)
    assert verify_key(store, key) == key_id
    assert main([*data, "list"]) == 0
    listed = capsys.readouterr().out
    assert json.loads(listed)[0]["id"] == key_id and key not in listed
    assert main([*data, "revoke", key_id]) == 0
    assert verify_key(store, key) is None
    assert main([*data, "revoke", "key_nope"]) == 2
    assert "no API key 'key_nope'" in capsys.readouterr().err


def test_keys_with_a_config_that_has_no_service(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "serve.yaml"
    bad.write_text("applications: []\n")
    assert main(["keys", "--config", str(bad), "list"]) == 2
    assert "no cg_ray application" in capsys.readouterr().err


def test_example_rejects_non_positive_sizes(tmp_path: Path, capsys) -> None:
    import pytest

    with pytest.raises(SystemExit) as exc:
        main(["example", "--out", str(tmp_path / "r.parquet"), "--rows-per-benchmark", "0"])
    assert exc.value.code == 2 and "must be a positive integer" in capsys.readouterr().err
    assert not (tmp_path / "r.parquet").exists()
