"""Every JSON artifact carries `format_version` and is read through a model that refuses newer versions
(issue #24): robustness.json, ratings.json, head_to_head.json, the extract manifest, training.json, eval.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cg_ray import cli
from cg_ray.activations.extract import manifest_path, read_manifest
from cg_ray.artifacts.contract import (
    FORMAT_VERSION,
    ExtractManifest,
    HeadToHeadSummary,
    RatingsSummary,
    RobustnessReport,
    SaeEvaluation,
    TrainingStats,
    read_document,
    read_mapping,
    write_document,
)
from cg_ray.compare.identity import reader_identity
from cg_ray.errors import InputError
from cg_ray.synthetic import SyntheticSpec, write_synthetic_rows

from ..arena.arena_builders import record, write_jsonl

DOCUMENTS: list[tuple[str, Any, dict[str, Any]]] = [
    (
        "robustness.json",
        RobustnessReport,
        {"rows_file": "r.parquet", "config": {}, "robustness": {}, "subsampling": {}, "adversarial_ablation": {}},
    ),
    ("ratings.json", RatingsSummary, {"config": {}, "n_battles": 3, "n_counted": 2, "models": [], "pairwise": []}),
    ("head_to_head.json", HeadToHeadSummary, {"pairs": [{"model_a": "A", "model_b": "B"}]}),
    ("rows.manifest.json", ExtractManifest, {"reader": {"sae": {"spec": "default"}}, "d_sae": 8, "text": "prompt"}),
    ("training.json", TrainingStats, {"config": {"k": 32}, "trained_tokens": 1000, "seconds": 2.5}),
    ("eval.json", SaeEvaluation, {"explained_variance": 0.81, "l0": 32.0, "dead_latents": 3}),
]


def _bump(path: Path, version: int = FORMAT_VERSION) -> None:
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "format_version": version + 1}))


@pytest.mark.parametrize(("name", "model", "doc"), DOCUMENTS, ids=[d[0] for d in DOCUMENTS])
def test_each_document_is_versioned_and_a_newer_version_is_refused(
    tmp_path: Path, name: str, model: Any, doc: dict[str, Any]
) -> None:
    path = tmp_path / name
    write_document(path, model, doc)
    assert next(iter(json.loads(path.read_text()))) == "format_version"
    assert read_mapping(path, model) == {"format_version": model.version, **doc}  # each document's own
    path.write_text(json.dumps(doc))  # written before the version existed: read as version 0
    assert read_document(path, model).format_version == 0
    _bump(path, model.version)
    with pytest.raises(InputError, match=rf"{name}.*format_version {model.version + 1} is newer") as err:
        read_document(path, model)
    assert err.value.path == str(path) and err.value.field == "format_version"


def test_cg_ray_robustness_writes_a_versioned_report(tmp_path: Path) -> None:
    rows = write_synthetic_rows(tmp_path / "rows.parquet", SyntheticSpec(rows_per_benchmark=60, d_sae=64))
    out = tmp_path / "rob"
    assert cli.main(["robustness", "--rows", str(rows), "--out", str(out), "--repeats", "2"]) == 0
    report = read_document(out / "robustness.json", RobustnessReport)
    assert report.format_version == FORMAT_VERSION and report.subsampling["repeats"] == 2


def test_cg_ray_arena_ratings_writes_a_versioned_document(tmp_path: Path) -> None:
    battles = write_jsonl(tmp_path / "b.jsonl", [record("w"), record("l", winner="model_b"), record("x")])
    out = tmp_path / "ratings"
    assert cli.main(["arena-ratings", "--battles", str(battles), "--out", str(out), "--bootstrap", "0"]) == 0
    ratings = read_document(out / "ratings.json", RatingsSummary)
    assert ratings.format_version == FORMAT_VERSION and ratings.n_battles == 3


def test_the_readers_of_an_extract_manifest_refuse_a_newer_one(tmp_path: Path) -> None:
    rows = tmp_path / "rows.parquet"
    assert read_manifest(rows) is None  # none beside it
    write_document(manifest_path(rows), ExtractManifest, {"reader": {"sae": {"spec": "default"}}, "d_sae": 8})
    manifest = read_manifest(rows)
    assert manifest is not None and manifest.reader["sae"]["spec"] == "default"
    _bump(manifest_path(rows))
    with pytest.raises(InputError, match=r"rows\.manifest\.json.*newer"):
        read_manifest(rows)
    with pytest.raises(InputError, match=r"rows\.manifest\.json.*newer"):  # `cg-ray diff` reads it too
        reader_identity(tmp_path / "run", {"d_sae": 8, "rows_file": str(rows)})
