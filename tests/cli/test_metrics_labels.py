"""`cg-ray metrics` names concepts with the labels shipped with the reader the rows' manifest names (checked
by the SAE's weights fingerprint); `--labels` overrides (issue #24)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.activations.extract import manifest_path
from cg_ray.activations.saes.base import file_fingerprint
from cg_ray.activations.saes.spec import default_sae_dir
from cg_ray.artifacts.contract import ExtractManifest, RunManifest, write_document
from cg_ray.cli import main
from cg_ray.labels import load_labels

D_SAE = 4608  # the default SAE's width
ROWS = [
    {"row_id": "1", "benchmark": "a", "score": 1.0, "concept_ids": [0, 2], "concept_acts": [1.0, 0.5]},
    {"row_id": "2", "benchmark": "a", "score": 0.0, "concept_ids": [2, 7], "concept_acts": [2.0, 1.0]},
    {"row_id": "1", "benchmark": "b", "score": 0.5, "concept_ids": [1, 2], "concept_acts": [1.0, 1.0]},
    {"row_id": "2", "benchmark": "b", "score": 0.0, "concept_ids": [3, 7], "concept_acts": [4.0, 0.5]},
]
ACTIVE = [0, 1, 2, 3, 7]


@pytest.fixture(scope="module")
def shipped() -> tuple[str, dict[int, str]]:
    """The default SAE's weights fingerprint and its shipped labels."""
    folder = default_sae_dir()
    return file_fingerprint(folder / "sae_weights.safetensors"), load_labels(folder / "labels.jsonl").labels


def _extract_manifest(rows: Path, sae: dict[str, Any]) -> None:
    reader = {"model": "smollm2-135m-instruct", "layer": 20, "sae": sae}
    write_document(manifest_path(rows), ExtractManifest, {"reader": reader, "d_sae": D_SAE, "text": "prompt"})


def _metrics(rows: Path, out: Path, *extra: str | Path) -> tuple[dict[int, str | None], dict[str, Any]]:
    assert main(["metrics", "--rows", str(rows), "--out", str(out), "--min-rows", "1", *map(str, extra)]) == 0
    concepts = pq.read_table(out / S.CONCEPTS_FILE, columns=["concept_id", "label"]).to_pylist()
    summary = json.loads((out / S.SUMMARY_FILE).read_text())
    return {c["concept_id"]: c["label"] for c in concepts}, summary


def test_an_extract_manifest_naming_the_default_reader_gives_labelled_concepts(
    write_rows, tmp_path: Path, shipped, capsys
) -> None:
    sha, labels = shipped
    rows = write_rows(ROWS, d_sae=D_SAE)
    _extract_manifest(rows, {"spec": "default", "d_sae": D_SAE, "weights_sha256": sha})
    got, summary = _metrics(rows, tmp_path / "run")
    assert [got[c] for c in ACTIVE] == [labels[c] for c in ACTIVE]
    assert summary["labels"]["path"] == str(default_sae_dir() / "labels.jsonl")
    out = capsys.readouterr().out
    assert "labels: the labels shipped with SAE 'default'" in out and "(no label)" not in out


def test_a_run_manifest_names_the_reader_too(write_rows, tmp_path: Path, shipped) -> None:
    sha, labels = shipped
    run = tmp_path / "published"
    run.mkdir()
    rows = write_rows(ROWS, d_sae=D_SAE, name="published/rows.parquet")
    reader = {"factory": "cg_ray.activations.reader:ConceptReader.from_config", "d_sae": D_SAE}
    reader["actors"] = [{"node": "n", "sae_weights": sha}]
    manifest = {"cg_ray_version": "t", "config": {"reader": {"sae": "default"}}, "counts": {}, "stages": {}}
    write_document(run / S.MANIFEST_FILE, RunManifest, manifest | {"reader": reader})
    got, _ = _metrics(rows, tmp_path / "again")
    assert got[2] == labels[2]


def test_labels_are_not_used_when_the_sae_on_disk_is_another(write_rows, tmp_path: Path, capsys) -> None:
    rows = write_rows(ROWS, d_sae=D_SAE)
    _extract_manifest(rows, {"spec": "default", "d_sae": D_SAE, "weights_sha256": "0123456789abcdef"})
    got, summary = _metrics(rows, tmp_path / "run")
    assert all(label is None for label in got.values()) and summary["labels"] is None
    assert "no labels: SAE 'default' on disk is not the one that read the rows" in capsys.readouterr().out


def test_without_a_manifest_the_reader_is_unknown(write_rows, tmp_path: Path, capsys) -> None:
    got, _ = _metrics(write_rows(ROWS, d_sae=D_SAE), tmp_path / "run")
    assert got[2] is None
    assert "its reader is unknown" in capsys.readouterr().out


def test_labels_option_overrides_the_shipped_labels(write_rows, tmp_path: Path, shipped) -> None:
    sha, _ = shipped
    rows = write_rows(ROWS, d_sae=D_SAE)
    _extract_manifest(rows, {"spec": "default", "d_sae": D_SAE, "weights_sha256": sha})
    mine = tmp_path / "mine.csv"
    mine.write_text("concept_id,label\n2,my own name\n")
    got, summary = _metrics(rows, tmp_path / "run", "--labels", mine)
    assert got[2] == "my own name" and got[0] is None and summary["labels"]["path"] == str(mine)
