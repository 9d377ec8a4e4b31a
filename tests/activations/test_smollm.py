"""The real default reader (SmolLM2-135M-Instruct from the packaged GGUF) with the shipped SAE."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from cg_ray.activations.reader import ConceptReader
from cg_ray.activations.reference import reference_row
from cg_ray.activations.saes.spec import default_sae_dir
from cg_ray.catalog import KNOWN_MODELS

from .conftest import reader_config

TEXTS = [
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning.",
    "def add(a, b):\n    return a + b",
    "The capital of France is Paris.",
]


def test_shipped_sae_loads_and_fits_the_budget() -> None:
    from sae_lens import SAE

    path = default_sae_dir()
    size = sum(f.stat().st_size for f in path.iterdir())
    assert size <= 25 * 2**20
    sae = SAE.load_from_disk(str(path))
    assert (sae.cfg.d_in, sae.cfg.d_sae) == (576, 4608)
    assert sae.cfg.metadata.hook_name == f"model.layers.{KNOWN_MODELS['smollm2-135m-instruct'].layer}"
    labels = [json.loads(line) for line in (path / "labels.jsonl").open()]
    assert [r["concept_id"] for r in labels] == list(range(4608))
    assert all(isinstance(r["label"], str) and r["label"] for r in labels)
    card = (path / "MODEL_CARD.md").read_text()
    for needed in ("explained variance", "L0", "dead", "cg-ray sae train"):
        assert needed in card


@pytest.mark.slow
def test_default_reader_matches_float32_reference(smollm_dir: Path) -> None:
    reader = ConceptReader.from_config(reader_config(model=str(smollm_dir), sae="default"))
    assert reader.layer == 20 and reader.n_layers == 30
    # the attention-sink trap: the shipped SAE was trained without positions 0-2 and special tokens
    assert reader.policy.sink_positions == 3 and reader.policy.exclude_special_tokens
    seqs = reader.tokenize(TEXTS)
    rows = reader.read_ids(seqs)
    full = AutoModelForCausalLM.from_pretrained(smollm_dir, dtype=torch.float32).eval()
    for row, seq in zip(rows, seqs, strict=True):
        ref, n = reference_row(full, reader.sae, seq, reader.layer, reader.policy)
        got = np.zeros(reader.d_sae)
        got[row.concept_ids] = row.concept_acts
        assert row.n_tokens == n > 0
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
        assert 32 <= row.concept_ids.size < reader.d_sae  # TopK k=32 per token, pooled: sparse
    # different texts, different concepts
    assert set(rows[0].concept_ids[np.argsort(-rows[0].concept_acts)[:5]]) != set(
        rows[1].concept_ids[np.argsort(-rows[1].concept_acts)[:5]]
    )


@pytest.mark.slow
def test_gguf_file_loads_like_the_prepared_dir(smollm_dir: Path) -> None:
    gguf = KNOWN_MODELS["smollm2-135m-instruct"].source.locate()
    a = ConceptReader.from_config(reader_config(model=str(gguf), sae="default"))
    b = ConceptReader.from_config(reader_config(model=str(smollm_dir), sae="default"))
    ra, rb = a.read(TEXTS[:1])[0], b.read(TEXTS[:1])[0]
    np.testing.assert_array_equal(ra.concept_ids, rb.concept_ids)
    np.testing.assert_allclose(ra.concept_acts, rb.concept_acts, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.usefixtures("reader_commands")
def test_models_prepare_cli_is_idempotent(smollm_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cg_ray import cli

    stamp = (smollm_dir / "model.safetensors").stat().st_mtime_ns
    assert cli.main(["models", "prepare", "smollm2-135m-instruct", "--cache", str(smollm_dir.parents[1])]) == 0
    assert capsys.readouterr().out.strip() == str(smollm_dir)
    assert (smollm_dir / "model.safetensors").stat().st_mtime_ns == stamp  # converted once, not again
    assert cli.main(["models", "prepare", "no-such-model"]) == 2
    assert "unknown model" in capsys.readouterr().err
