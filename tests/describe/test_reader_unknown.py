"""`cg-ray describe` on a run whose reader it cannot establish: one clear line, `reader_unknown` in
themes.json, and `--reader` to name it (issue #24)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from cg_ray import cli
from cg_ray.activations.extract import manifest_path
from cg_ray.artifacts.contract import FORMAT_VERSION
from cg_ray.artifacts.layout import RunDir
from cg_ray.describe.outputs import read_themes
from cg_ray.describe.rundir import ReadSettings, named_reader
from cg_ray.errors import InputError

EXTRACT_READER = {
    "model": "smollm2-135m-instruct",
    "layer": 20,
    "dtype": "float32",
    "max_tokens": 2048,
    "sae": {"spec": "default", "d_sae": 4608},
    "tokens": {"exclude_bos": True, "prepend_bos": True, "sink_positions": 3, "exclude_special_tokens": True},
}


def test_an_unknown_reader_is_said_once_and_recorded(
    make_run: Callable[..., Path], caplog: pytest.LogCaptureFixture
) -> None:
    run = make_run()
    with caplog.at_level(logging.WARNING, logger="cg_ray.describe"):
        assert cli.main(["describe", str(run), "--no-tokens", "--concepts", "0,1"]) == 0
    lines = [r.getMessage() for r in caplog.records if "cannot establish the reader" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert "no extract manifest beside" in lines[0] and "--reader" in lines[0]
    themes = read_themes(RunDir(run))
    assert themes is not None and themes["reader_unknown"].startswith("no extract manifest beside")


def test_naming_the_reader_makes_it_known(make_run: Callable[..., Path], caplog: pytest.LogCaptureFixture) -> None:
    run = make_run()
    with caplog.at_level(logging.WARNING, logger="cg_ray.describe"):
        assert cli.main(["describe", str(run), "--no-tokens", "--concepts", "0,1", "--reader", "default"]) == 0
    assert not [r for r in caplog.records if "cannot establish the reader" in r.getMessage()]
    themes = read_themes(RunDir(run))
    assert themes is not None and themes["reader_unknown"] is None


def test_a_bad_reader_name_is_a_clear_error(make_run: Callable[..., Path], capsys) -> None:
    run = make_run()
    assert cli.main(["describe", str(run), "--no-tokens", "--reader", "nonsense"]) == 2
    assert "'nonsense' is not default, MODEL@SAE or a manifest file" in capsys.readouterr().err


def test_reader_names(tmp_path: Path) -> None:
    assert named_reader("default") == ReadSettings({}, "prompt", False, "--reader default")
    got = named_reader("my-model@saelens-disk:/x/sae")
    assert isinstance(got, ReadSettings) and got.reader == {"model": "my-model", "sae": "saelens-disk:/x/sae"}
    manifest = manifest_path(tmp_path / "rows.parquet")
    manifest.write_text(json.dumps({"reader": EXTRACT_READER, "text": "both", "chat_template": False}))
    got = named_reader(str(manifest))
    assert isinstance(got, ReadSettings) and got.text == "prompt_response" and got.reader["sae"] == "default"
    assert got.reader["sink_positions"] == 3 and got.source == str(manifest)
    manifest.write_text(json.dumps({"reader": EXTRACT_READER, "format_version": FORMAT_VERSION + 1}))
    with pytest.raises(InputError, match=r"rows\.manifest\.json.*newer"):
        named_reader(str(manifest))
    with pytest.raises(InputError, match="MODEL@SAE"):
        named_reader("@sae")
