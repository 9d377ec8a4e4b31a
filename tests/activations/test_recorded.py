"""`RecordedReader`: the one typed reader identity, from a run manifest, from an extract manifest, or unknown
with the reason (issue #24)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cg_ray.activations.config import DEFAULT_READER_FACTORY
from cg_ray.activations.extract import manifest_path
from cg_ray.activations.recorded import (
    RecordedReader,
    SaeRecord,
    reader_of_extract,
    reader_of_rows,
    reader_of_run,
)
from cg_ray.artifacts.contract import FORMAT_VERSION
from cg_ray.errors import InputError

SHA = "0123456789abcdef"
EXTRACT = {
    "reader": {
        "model": "/models/smollm2-135m-instruct",
        "layer": 20,
        "dtype": "float32",
        "max_tokens": 2048,
        "sae": {
            "spec": "default",
            "source": "/saes/x",
            "architecture": "topk",
            "d_in": 576,
            "d_sae": 4608,
            "weights_sha256": SHA,
        },
        "tokens": {"exclude_bos": True, "prepend_bos": True, "sink_positions": 3, "exclude_special_tokens": True},
    },
    "text": "both",
    "chat_template": True,
    "d_sae": 4608,
}
RUN = {
    "cg_ray_version": "0",
    "config": {
        "reader": {"model": "tiny", "sae": "default", "layer": 4, "text": "response", "resources": {"num_gpus": 1}}
    },
    "reader": {"factory": "tests.fake:Reader", "d_sae": 64, "actors": [{"sae_weights": None}, {"sae_weights": SHA}]},
}


def _write(path: Path, doc: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def test_from_an_extract_manifest(tmp_path: Path) -> None:
    path = _write(manifest_path(tmp_path / "rows.parquet"), EXTRACT)
    got = reader_of_rows(tmp_path / "rows.parquet")
    assert got == reader_of_extract(tmp_path / "rows.parquet") == RecordedReader.from_file(path)
    assert got.known and got.kind == "extract" and got.source == path and got.unknown is None
    assert got.sae == SaeRecord("default", None, "/saes/x", "topk", 576, 4608, SHA) and got.d_sae == 4608
    assert (got.factory, got.real_reader) == (DEFAULT_READER_FACTORY, True)  # extract always uses the real reader
    assert (got.model, got.layer, got.dtype) == ("/models/smollm2-135m-instruct", 20, "float32")
    assert (got.text, got.chat_template) == ("prompt_response", True)  # `both`: the old name
    assert got.config is not None and got.config["sink_positions"] == 3 and got.config["sae"] == "default"
    assert got.sae.as_dict() == EXTRACT["reader"]["sae"]  # recorded fields only, none invented


def test_an_extract_manifest_lacking_a_setting_is_known_but_not_rebuildable(tmp_path: Path) -> None:
    reader = {k: v for k, v in EXTRACT["reader"].items() if k != "tokens"}
    path = _write(manifest_path(tmp_path / "rows.parquet"), {"reader": reader})
    got = RecordedReader.from_extract_manifest(path)
    assert got.known and got.sae.weights_sha256 == SHA and got.config is None
    assert got.config_missing == f"{path} lacks reader setting 'exclude_bos'"


def test_from_a_run_manifest(tmp_path: Path) -> None:
    path = _write(tmp_path / "run" / "manifest.json", RUN)
    got = reader_of_run(tmp_path / "run", None)
    assert got == reader_of_rows(tmp_path / "run" / "rows.parquet") == RecordedReader.from_file(path)
    assert got.kind == "run" and got.source == path
    assert got.sae == SaeRecord(spec="default", d_sae=64, weights_sha256=SHA)  # the first actor that recorded one
    assert (got.factory, got.real_reader) == ("tests.fake:Reader", False)
    assert (got.model, got.layer, got.text, got.chat_template) == ("tiny", 4, "response", False)
    assert got.config == {"model": "tiny", "sae": "default", "layer": 4}  # neither text nor where it ran


def test_a_run_manifest_of_steps_only_falls_back_to_the_extract_manifest(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _write(run / "manifest.json", {"cg_ray_version": "0", "steps": [{"step": "describe"}]})
    extract = _write(manifest_path(tmp_path / "rows.parquet"), EXTRACT)
    got = reader_of_run(run, str(tmp_path / "rows.parquet"))
    assert got.kind == "extract" and got.source == extract
    moved = _write(run / "rows.manifest.json", EXTRACT)  # the rows file moved, its manifest copied into the run
    extract.unlink()
    assert reader_of_run(run, "/gone/rows.parquet").source == moved


def test_from_neither_is_unknown_with_the_reason(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    got = reader_of_run(run, None)
    assert (
        not got.known
        and got.kind == "unknown"
        and got.unknown == "the run has no manifest saying how its rows were read"
    )
    assert got.sae == SaeRecord() and got.d_sae is None and got.config is None
    assert reader_of_run(run, "rows.parquet").unknown == "no extract manifest beside rows.parquet"
    assert "so its reader is unknown" in str(reader_of_rows(run / "rows.parquet").unknown)
    assert reader_of_extract(run / "rows.parquet").unknown == f"no extract manifest beside {run / 'rows.parquet'}"
    _write(run / "manifest.json", {"cg_ray_version": "0", "steps": []})
    assert reader_of_rows(run / "rows.parquet").unknown == f"{run / 'manifest.json'} has no reader settings"


def test_a_newer_manifest_is_refused_naming_the_file(tmp_path: Path) -> None:
    _write(manifest_path(tmp_path / "rows.parquet"), EXTRACT | {"format_version": FORMAT_VERSION + 1})
    with pytest.raises(InputError, match=r"rows\.manifest\.json.*newer"):
        reader_of_rows(tmp_path / "rows.parquet")
    _write(tmp_path / "run" / "manifest.json", RUN | {"format_version": FORMAT_VERSION + 1})
    with pytest.raises(InputError, match=r"manifest\.json.*newer"):
        reader_of_run(tmp_path / "run", None)
