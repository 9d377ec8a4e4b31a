"""`sae train` (real sae-lens run on the tiny model), then `eval` and `label` on what it wrote."""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import pytest

from cg_ray.activations.reader import ConceptReader
from cg_ray.errors import ConfigError
from cg_ray.sae_training.corpus import iter_documents, split_corpus
from cg_ray.sae_training.sae_eval import evaluate
from cg_ray.sae_training.sae_label import DEAD_LABEL, label_latents
from cg_ray.sae_training.sae_train import SaeTrainConfig, train

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
            "lr_decay_steps": 5,  # sae-lens' linear decay to 0 over the last steps
            "heldout_fraction": 0.2,
        }
    )
    out = train(cfg, data_dir, tmp_path / "sae", work_dir=tmp_path / "work")
    sae = SAE.load_from_disk(str(out))
    assert (sae.cfg.d_in, sae.cfg.d_sae) == (64, 96)
    assert sae.cfg.metadata.hook_name == "model.layers.2" and list(sae.cfg.metadata.seqpos_slice) == [3, None]
    stats = json.loads((out / "training.json").read_text())
    assert stats["trained_tokens"] == 47 * 256 and not stats["stopped_early"]  # whole batches past 12,000

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

    # Continue that run on documents it has not seen (a time limit cut it short): warm start + skip.
    more = cfg.model_copy(update={"init_from": out, "skip_tokens": 1_000, "training_tokens": 2_048})
    continued = train(more, data_dir, tmp_path / "sae2", work_dir=tmp_path / "work2")
    stats2 = json.loads((continued / "training.json").read_text())
    assert stats2["warm_start_from"] == str(out) and stats2["trained_tokens"] == 2_048
    reader2 = ConceptReader.from_config(reader_config(model=str(tiny_model_dir), sae=f"saelens-disk:{continued}"))
    # 2k more tokens from the warm start keep most of what was learnt (a cold start would be near 0)
    assert evaluate(reader2, heldout, context=32)["explained_variance"] > 0.5 * result["explained_variance"]


def test_warm_start_undoes_the_norm_fold_exactly() -> None:
    """Saving folds the norm scaling factor and (TopK with decoder-norm rescaling) the decoder norms into
    the weights; the warm start must give back the same function of the scaled activations."""
    import copy

    import torch
    from sae_lens import TopKTrainingSAE, TopKTrainingSAEConfig

    from cg_ray.sae_training.sae_train import _load_unfolded

    torch.manual_seed(0)
    config = TopKTrainingSAEConfig(
        d_in=16, d_sae=32, k=4, normalize_activations="expected_average_only_in", rescale_acts_by_decoder_norm=True
    )
    trained = TopKTrainingSAE(config)
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(0.3 * torch.randn_like(p))
    original = copy.deepcopy(trained)
    trained.fold_activation_norm_scaling_factor(0.37)  # what sae-lens does before saving
    with tempfile.TemporaryDirectory() as tmp:
        trained.save_inference_model(tmp)
        fresh = TopKTrainingSAE(config)
        _load_unfolded(fresh, Path(tmp), 0.37)
    scaled = 0.37 * torch.randn(64, 16) * 10  # activations as the trainer feeds them (scaled)
    with torch.no_grad():
        torch.testing.assert_close(fresh.encode(scaled), original.encode(scaled))
        torch.testing.assert_close(fresh.decode(fresh.encode(scaled)), original.decode(original.encode(scaled)))


def test_warm_start_rejects_an_sae_of_another_shape(tmp_path: Path) -> None:
    import torch
    from sae_lens import TopKTrainingSAE, TopKTrainingSAEConfig

    from cg_ray.sae_training.sae_train import _load_unfolded

    TopKTrainingSAE(TopKTrainingSAEConfig(d_in=16, d_sae=32, k=4)).save_inference_model(str(tmp_path))
    other = TopKTrainingSAE(TopKTrainingSAEConfig(d_in=16, d_sae=48, k=4))
    before = {k: v.clone() for k, v in other.state_dict().items()}
    with pytest.raises(ConfigError, match="W_enc missing or not of this SAE's shape"):
        _load_unfolded(other, tmp_path, 1.0)
    for name, value in other.state_dict().items():  # nothing half-loaded
        assert torch.equal(value, before[name]), name


def test_skipping_documents_passes_the_requested_tokens(tiny_model_dir: Path) -> None:
    import datasets
    from transformers import AutoTokenizer

    from cg_ray.sae_training.sae_train import _skip_documents

    docs = [_doc(i) for i in range(10)]
    lengths = [
        len(AutoTokenizer.from_pretrained(str(tiny_model_dir))(d, add_special_tokens=False).input_ids) for d in docs
    ]
    dataset = datasets.Dataset.from_dict({"text": docs})
    kept = _skip_documents(dataset, str(tiny_model_dir), lengths[0] + 1)  # past the first, into the second
    assert list(kept["text"]) == docs[2:]
    with pytest.raises(ConfigError, match="passes all"):
        _skip_documents(dataset, str(tiny_model_dir), sum(lengths) + 1)


def test_train_config_validation(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a saved SAE directory"):
        SaeTrainConfig.model_validate({"init_from": tmp_path})  # refused before any model loads
    with pytest.raises(ValueError, match="n_batches_in_buffer"):
        SaeTrainConfig.model_validate({"n_batches_in_buffer": 2})
    with pytest.raises(ValueError, match="exceeds the run's 24 steps"):
        SaeTrainConfig.model_validate({"training_tokens": 100_000, "lr_warm_up_steps": 20, "lr_decay_steps": 5})
    with pytest.raises(ValueError):
        SaeTrainConfig.model_validate({"unknown": 1})
