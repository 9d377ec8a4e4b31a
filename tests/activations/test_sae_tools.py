"""`sae train` (real sae-lens run on the tiny model), then `eval` and `label` on what it wrote."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from cg_ray.activations.reader import ConceptReader
from cg_ray.models.corpus import iter_documents, split_corpus
from cg_ray.models.sae_eval import evaluate
from cg_ray.models.sae_label import DEAD_LABEL, label_latents
from cg_ray.models.sae_train import SaeTrainConfig, train

from .conftest import WORDS, reader_config


def _doc(i: int) -> str:
    rng = random.Random(i)
    return " ".join(rng.choice(WORDS) for _ in range(60))


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A small corpus in the shared-data layout: answers only (plus a benchmark file that must be ignored)."""
    root = tmp_path / "data"
    (root / "model_outputs").mkdir(parents=True)
    (root / "arena").mkdir()
    (root / "benchmarks").mkdir()
    with (root / "model_outputs" / "arena_hard_answers.jsonl").open("w") as fh:
        for i in range(40):
            fh.write(json.dumps({"id": f"a{i}", "output": _doc(i)}) + "\n")
    with (root / "model_outputs" / "mt_bench_model_answers.jsonl").open("w") as fh:
        for i in range(40, 60):
            fh.write(json.dumps({"id": f"m{i}", "output": [_doc(i), _doc(i + 100)]}) + "\n")
    with (root / "arena" / "alpaca_eval_battles.jsonl").open("w") as fh:
        conv = [{"role": "user", "content": "QUESTION " * 20}, {"role": "assistant", "content": _doc(999)}]
        fh.write(json.dumps({"conversation_a": conv, "conversation_b": conv}) + "\n")
    (root / "benchmarks" / "toy.jsonl").write_text(json.dumps({"id": "b", "prompt": "BENCHMARK " * 20}) + "\n")
    return root


def test_corpus_is_answers_only_and_split_is_stable(data_dir: Path) -> None:
    docs = list(iter_documents(data_dir))
    assert len(docs) == 40 + 2 * 20 + 1  # the battle's two identical assistant turns count once
    assert not any("QUESTION" in d or "BENCHMARK" in d for d in docs)
    assert split_corpus(data_dir, 0.2) == split_corpus(data_dir, 0.2)
    train_docs, heldout = split_corpus(data_dir, 0.2)
    assert heldout and not set(train_docs) & set(heldout)


@pytest.mark.slow
def test_train_eval_label_roundtrip(tmp_path: Path, data_dir: Path, tiny_model_dir: Path) -> None:
    from sae_lens import SAE

    cfg = SaeTrainConfig.model_validate(
        {
            "model": str(tiny_model_dir),
            "layer": 2,
            "d_sae": 96,
            "k": 8,
            "training_tokens": 12_000,
            "context_size": 32,
            "train_batch_size_tokens": 256,
            "store_batch_size_prompts": 4,
            "n_batches_in_buffer": 16,
            "n_batches_for_norm_estimate": 2,
            "lr_warm_up_steps": 2,
            "heldout_fraction": 0.2,
        }
    )
    out = train(cfg, data_dir, tmp_path / "sae", work_dir=tmp_path / "work")
    sae = SAE.load_from_disk(str(out))
    assert (sae.cfg.d_in, sae.cfg.d_sae) == (64, 96)
    assert sae.cfg.metadata.hook_name == "model.layers.2" and list(sae.cfg.metadata.seqpos_slice) == [3, None]
    stats = json.loads((out / "training.json").read_text())
    assert stats["trained_tokens"] == 12_000 and not stats["stopped_early"]

    reader = ConceptReader.from_config(reader_config(model=str(tiny_model_dir), sae=f"saelens-disk:{out}"))
    assert reader.policy.sink_positions == 3 and reader.policy.exclude_special_tokens  # from the SAE
    _, heldout = split_corpus(data_dir, 0.2)
    result = evaluate(reader, heldout, context=32)
    assert result["heldout_tokens"] > 100
    assert result["l0"] == pytest.approx(8.0)  # TopK: exactly k active (ties aside)
    assert 0.0 < result["explained_variance"] <= 1.0  # trained: better than predicting the mean
    assert 0.0 <= result["dead_fraction"] < 1.0

    labels = label_latents(reader, heldout, context=32)
    assert [r["concept_id"] for r in labels] == list(range(96))
    live = [r for r in labels if r["n_active_tokens"] > 0]
    assert live and all(r["label"] != DEAD_LABEL and "«" in r["example"] for r in live)
    for r in live:  # the top token of a latent occurs in its labelled example context
        assert r["top_tokens"][0][1] > 0


def test_train_config_validation() -> None:
    with pytest.raises(ValueError, match="n_batches_in_buffer"):
        SaeTrainConfig.model_validate({"n_batches_in_buffer": 2})
    with pytest.raises(ValueError):
        SaeTrainConfig.model_validate({"unknown": 1})
