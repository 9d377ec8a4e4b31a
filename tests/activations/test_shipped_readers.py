"""The readers shipped for the default model (`cg_ray.activations.saes.shipped`): each one's assets load and
meet the quality floor of docs/reader.md, its labels fit its width, names resolve everywhere a spec is
taken, `cg-ray sae list` shows them; (slow) a second reader really reads through the real model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cg_ray.activations.saes.base import file_fingerprint
from cg_ray.activations.saes.labels import sae_folder, shipped_labels
from cg_ray.activations.saes.shipped import (
    DEFAULT_READER,
    MAX_DEAD_SHARE,
    MIN_EXPLAINED_VARIANCE,
    SHIPPED_READERS,
    ShippedReader,
    reader_facts,
    shipped_reader,
)
from cg_ray.activations.saes.spec import load_sae, parse_sae_spec
from cg_ray.artifacts.contract import SaeEvaluation, TrainingStats, read_document
from cg_ray.errors import ConfigError
from cg_ray.labels import load_labels

from .conftest import reader_config

READERS = list(SHIPPED_READERS.values())
ASSET_FILES = ("cfg.json", "sae_weights.safetensors", "training.json", "eval.json", "labels.jsonl", "MODEL_CARD.md")
TEXTS = [
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning.",
    "def add(a, b):\n    return a + b",
    "The capital of France is Paris.",
]


def by_name(reader: ShippedReader) -> str:
    return reader.name


def test_the_default_and_more_are_shipped() -> None:
    assert DEFAULT_READER in SHIPPED_READERS and len(SHIPPED_READERS) >= 2
    assert len({r.folder for r in READERS}) == len(READERS)  # one folder per reader


@pytest.mark.parametrize("reader", READERS, ids=by_name)
def test_assets_load_as_the_registry_says(reader: ShippedReader) -> None:
    folder = reader.directory
    assert sorted(p.name for p in folder.iterdir()) == sorted(ASSET_FILES)
    assert sum(p.stat().st_size for p in folder.iterdir()) <= 25 * 2**20
    sae = load_sae(reader.name)
    info = sae.info
    assert (info.d_in, info.d_sae, info.hook_layer) == (576, reader.d_sae, reader.layer)
    assert info.sink_positions == 3 and info.exclude_special_tokens  # trained like the default
    assert info.fingerprint == file_fingerprint(folder / "sae_weights.safetensors")
    cfg = json.loads((folder / "cfg.json").read_text())
    assert (cfg["d_sae"], cfg["metadata"]["hook_name"]) == (reader.d_sae, f"model.layers.{reader.layer}")
    # the spec resolves to the reader everywhere a spec is taken: parse, labels' folder, the registry
    assert str(parse_sae_spec(reader.name)) == reader.name
    assert sae_folder(reader.name) == folder == shipped_reader(reader.name).directory
    training = read_document(folder / "training.json", TrainingStats) if reader.name != DEFAULT_READER else None
    if training is not None:  # the default's training.json lists its stages (and the SAE it replaced)
        assert training.config["seed"] == reader.seed and training.config["layer"] == reader.layer
        assert training.config["d_sae"] == reader.d_sae


@pytest.mark.parametrize("reader", READERS, ids=by_name)
def test_held_out_quality_meets_the_floor(reader: ShippedReader) -> None:
    evaluation = read_document(reader.directory / "eval.json", SaeEvaluation)
    assert evaluation.explained_variance >= MIN_EXPLAINED_VARIANCE
    assert evaluation.dead_latents <= MAX_DEAD_SHARE * reader.d_sae
    assert evaluation.l0 == pytest.approx(json.loads((reader.directory / "cfg.json").read_text())["k"])


@pytest.mark.parametrize("reader", READERS, ids=by_name)
def test_labels_fit_the_reader(reader: ShippedReader) -> None:
    labels = load_labels(reader.directory / "labels.jsonl", d_sae=reader.d_sae)
    assert len(labels) == reader.d_sae  # one record per latent, inactive ones included
    assert all(isinstance(labels.get(c), str) and labels.get(c) for c in range(reader.d_sae))
    found = shipped_labels(reader.name, reader.d_sae)
    assert found is not None and Path(found.path) == reader.directory / "labels.jsonl"
    card = (reader.directory / "MODEL_CARD.md").read_text()
    for needed in ("explained variance", "L0", "dead", "cg-ray sae train", "Reproduce"):
        assert needed in card


def test_an_unknown_name_is_refused_naming_the_shipped_ones() -> None:
    with pytest.raises(ConfigError) as err:
        shipped_reader("l99-nope")
    for name in SHIPPED_READERS:
        assert name in str(err.value)
    with pytest.raises(ConfigError, match="shipped readers"):
        load_sae("shipped:l99-nope")


@pytest.mark.usefixtures("reader_commands")
def test_sae_list_names_each_reader(capsys: pytest.CaptureFixture[str]) -> None:
    from cg_ray import cli

    assert cli.main(["sae", "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["name", "layer", "width"]
    for reader, line in zip(READERS, out[1:], strict=True):
        facts = reader_facts(reader)
        assert line.split()[0] == reader.name and line.endswith(str(reader.directory))
        assert f"{facts['explained_variance']:.3f}" in line.split()
    assert cli.main(["sae", "list", "--json"]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [f["name"] for f in listed] == list(SHIPPED_READERS)
    assert all(f["labels"] == f["d_sae"] and f["k"] == 32 for f in listed)


@pytest.mark.slow
def test_a_second_reader_reads_through_its_own_sae(smollm_dir: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from cg_ray.activations.reader import ConceptReader
    from cg_ray.activations.reference import reference_row

    name = "l20-seed7"
    reader = ConceptReader.from_config(reader_config(model=str(smollm_dir), sae=name))
    assert (reader.layer, reader.d_sae) == (SHIPPED_READERS[name].layer, SHIPPED_READERS[name].d_sae)
    assert reader.sae.info.fingerprint == file_fingerprint(SHIPPED_READERS[name].directory / "sae_weights.safetensors")
    seqs = reader.tokenize(TEXTS)
    rows = reader.read_ids(seqs)
    # recomputed with the same weights loaded independently, from the folder (not through the name)
    own = load_sae(f"saelens-disk:{SHIPPED_READERS[name].directory}")
    full = AutoModelForCausalLM.from_pretrained(smollm_dir, dtype=torch.float32).eval()
    for row, seq in zip(rows, seqs, strict=True):
        ref, n = reference_row(full, own, seq, reader.layer, reader.policy)
        got = np.zeros(reader.d_sae)
        got[row.concept_ids] = row.concept_acts
        assert row.n_tokens == n > 0
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
        assert 32 <= row.concept_ids.size < reader.d_sae
