"""Concept labels: Neuronpedia exports, merged label files, simple CSV/JSONL; real labels from ../shared."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from cg_ray.errors import InputError
from cg_ray.labels import load_labels

GEMMA_20 = "gemma-2-2b/20-gemmascope-res-16k"


def test_real_merged_labels(shared_data: Path) -> None:
    path = shared_data / "sae_labels" / "feature_labels_merged.jsonl"
    labels = load_labels(path, GEMMA_20, d_sae=16384)
    assert labels.source == GEMMA_20
    expected = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if f"{rec['model']}/{rec['sae_id']}" == GEMMA_20 and rec["labels"]:
            expected.setdefault(rec["feature_index"], rec["labels"][0])
    assert len(labels) == len(expected) > 2000
    assert all(labels.get(k) == v.strip() for k, v in expected.items())
    with pytest.raises(InputError, match="choose one with --labels-source"):
        load_labels(path)
    with pytest.raises(InputError, match="≥ d_sae 1000"):
        load_labels(path, GEMMA_20, d_sae=1000)


def test_neuronpedia_export_gz_first_explanation_wins(tmp_path: Path) -> None:
    records = [
        {"modelId": "gemma-2-2b", "layer": "20-gemmascope-res-16k", "index": "7", "description": " sports teams"},
        {"modelId": "gemma-2-2b", "layer": "20-gemmascope-res-16k", "index": "7", "description": "football"},
        {"modelId": "gemma-2-2b", "layer": "20-gemmascope-res-16k", "index": "9", "description": "dates"},
        {"modelId": "gemma-2-2b", "layer": "12-gemmascope-res-16k", "index": "7", "description": "other layer"},
    ]
    path = tmp_path / "export.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)
    labels = load_labels(path, GEMMA_20)
    assert labels.labels == {7: "sports teams", 9: "dates"}
    with pytest.raises(InputError, match=r"no labels for source 'x/y'.*12-gemmascope"):
        load_labels(path, "x/y")


def test_simple_csv_and_jsonl(tmp_path: Path) -> None:
    csv_path = tmp_path / "l.csv"
    csv_path.write_text("concept_id,label\n0,zero\n3,three\n")
    assert load_labels(csv_path).labels == {0: "zero", 3: "three"}
    jsonl = tmp_path / "l.jsonl"
    jsonl.write_text('{"concept_id": 1, "label": "one"}\n\n{"concept_id": 2, "label": null}\n')
    assert load_labels(jsonl).labels == {1: "one"}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"concept_id": 1, "label": "a"}\n{not json\n', "line 2: invalid JSON"),
        ('{"concept_id": "x", "label": "a"}\n', "line 1: 'x' is not an integer"),
        ('{"concept_id": -4, "label": "a"}\n', "negative concept id"),
        ('{"feature": 1}\n', "unknown label record"),
        ("[1, 2]\n", "expected a JSON object"),
    ],
)
def test_bad_label_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(InputError, match=message) as info:
        load_labels(path)
    assert str(path) in str(info.value)


def test_missing_and_binary_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such labels file"):
        load_labels(tmp_path / "none.jsonl")
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(InputError, match="not valid UTF-8"):
        load_labels(binary)


def test_real_axbench_metadata(shared_data: Path) -> None:
    path = shared_data / "sae_labels" / "axbench" / "concept500_prod_2b_l20_v1_metadata.jsonl"
    labels = load_labels(path, d_sae=16384)
    assert labels.source == GEMMA_20
    first = json.loads(path.read_text().splitlines()[0])
    index = int(first["ref"].rsplit("/", 1)[1])
    assert labels.get(index) == first["concept"].strip()
    assert 400 < len(labels) <= 500
