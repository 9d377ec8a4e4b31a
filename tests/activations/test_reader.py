"""s̃ from the fast path against brute force, batching/padding invariance, BOS handling, errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from cg_ray.activations.pooling import RowActs
from cg_ray.activations.reader import ConceptReader
from cg_ray.activations.reference import reference_row
from cg_ray.errors import ConfigError, InputError

from .conftest import LAYER, reader_config

TEXTS = [
    "the cat eats eggs every morning and the dog sells fish at the market",
    "how many ducks",
    "red",
    "two big trees by the river in the old city and a small house with a green door " * 3,
    "what is the total cost of five muffins",
    "fast",
]


def dense(row: RowActs, d_sae: int) -> np.ndarray:
    out = np.zeros(d_sae)
    out[row.concept_ids] = row.concept_acts
    return out


def check_sparse_form(row: RowActs) -> None:
    assert row.concept_ids.dtype == np.int32 and row.concept_acts.dtype == np.float32
    assert np.all(np.diff(row.concept_ids) > 0)  # ascending, unique
    assert np.all(row.concept_acts != 0)


@pytest.mark.parametrize("arch", ["topk", "jumprelu"])
@pytest.mark.parametrize("side", ["right", "left"])
def test_s_tilde_equals_brute_force(
    tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path], arch: str, side: str
) -> None:
    sae_dir = tiny_sae_dir(arch)
    reader = ConceptReader.from_config(
        reader_config(model=str(tiny_model_dir), sae=f"saelens-disk:{sae_dir}", padding_side=side, token_budget=64)
    )
    assert reader.layer == LAYER  # from the SAE's hook name
    full = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    seqs = reader.tokenize(TEXTS)
    rows = reader.read_ids(seqs)
    assert len(rows) == len(TEXTS)
    any_active = False
    for row, seq in zip(rows, seqs, strict=True):
        check_sparse_form(row)
        ref, n = reference_row(full, reader.sae, seq, reader.layer, reader.policy)
        assert row.n_tokens == n == len(seq) - 1  # everything but the BOS
        np.testing.assert_allclose(dense(row, reader.d_sae), ref, rtol=1e-4, atol=1e-5)
        any_active |= row.concept_ids.size > 0
    assert any_active


def test_batched_equals_one_at_a_time(tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path]) -> None:
    sae = f"saelens-disk:{tiny_sae_dir('topk')}"
    results = {}
    for side in ("left", "right"):
        for budget in (1, 40, 10_000):  # 1: every row alone; 10k: all rows in one padded batch
            reader = ConceptReader.from_config(
                reader_config(model=str(tiny_model_dir), sae=sae, padding_side=side, token_budget=budget)
            )
            results[(side, budget)] = [dense(r, reader.d_sae) for r in reader.read(TEXTS)]
    alone = results[("right", 1)]
    for key, rows in results.items():
        for got, want in zip(rows, alone, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=str(key))


def test_bos_exclusion_and_sinks(tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path]) -> None:
    sae = f"saelens-disk:{tiny_sae_dir('topk')}"
    full = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    text = ["the cat eats eggs every morning"]
    by = {}
    for keep_bos, sinks in ((False, 0), (True, 0), (True, 2)):
        reader = ConceptReader.from_config(
            reader_config(model=str(tiny_model_dir), sae=sae, exclude_bos=not keep_bos, sink_positions=sinks)
        )
        seq = reader.tokenize(text)[0]
        assert seq[0] == reader.tokenizer.bos_token_id
        row = reader.read_ids([seq])[0]
        # independent: mean of the SAE over the chosen positions of the full model's hidden states
        with torch.no_grad():
            h = full(input_ids=torch.tensor([seq]), output_hidden_states=True).hidden_states[LAYER + 1][0]
        start = max(sinks, 0 if keep_bos else 1)
        want = reader.sae.encode(h[start:]).double().mean(0).numpy()
        assert row.n_tokens == len(seq) - start
        np.testing.assert_allclose(dense(row, reader.d_sae), want, rtol=1e-4, atol=1e-5)
        by[(keep_bos, sinks)] = dense(row, reader.d_sae)
    assert not np.allclose(by[(False, 0)], by[(True, 0)])  # the BOS token changes s̃


def test_rows_with_no_counted_tokens(tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path]) -> None:
    reader = ConceptReader.from_config(
        reader_config(model=str(tiny_model_dir), sae=f"saelens-disk:{tiny_sae_dir('topk')}", sink_positions=3)
    )
    rows = reader.read(["red", "the cat eats eggs"])
    assert rows[0].n_tokens == 0 and rows[0].concept_ids.size == 0
    assert rows[1].n_tokens == 2 and rows[1].concept_ids.size > 0


def test_bfloat16_close_to_float32(tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path]) -> None:
    sae = f"saelens-disk:{tiny_sae_dir('jumprelu')}"
    out = {}
    for dtype in ("float32", "bfloat16"):
        reader = ConceptReader.from_config(reader_config(model=str(tiny_model_dir), sae=sae, dtype=dtype))
        assert reader.describe()["dtype"] == dtype
        out[dtype] = np.stack([dense(r, reader.d_sae) for r in reader.read(TEXTS)])
    scale = np.abs(out["float32"]).max()
    assert np.abs(out["bfloat16"] - out["float32"]).max() < 0.1 * scale


def test_reader_errors(tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path], tmp_path: Path) -> None:
    wrong_width = tiny_sae_dir("topk", d_in=32)
    with pytest.raises(InputError, match="d_in=32") as err:
        ConceptReader.from_config(reader_config(model=str(tiny_model_dir), sae=f"saelens-disk:{wrong_width}"))
    assert str(wrong_width) in str(err.value)
    sae = f"saelens-disk:{tiny_sae_dir('topk')}"
    with pytest.raises(ConfigError, match="trained on layer 2"):
        ConceptReader.from_config(reader_config(model=str(tiny_model_dir), sae=sae, layer=1))
    with pytest.raises(InputError, match="model path not found"):
        ConceptReader.from_config(reader_config(model=str(tmp_path / "no-model"), sae=sae))
    no_layer = tiny_sae_dir("jumprelu", hook_name="")
    with pytest.raises(ConfigError, match="does not say its layer"):
        ConceptReader.from_config(reader_config(model=str(tiny_model_dir), sae=f"saelens-disk:{no_layer}"))
    reader = ConceptReader.from_config(
        reader_config(model=str(tiny_model_dir), sae=f"saelens-disk:{no_layer}", layer=3)
    )
    assert reader.layer == 3 and reader.describe()["sae"]["d_sae"] == 96


@pytest.mark.parametrize(("flags", "expected"), [({"avx2"}, "float32"), ({"avx2", "avx512_bf16"}, "bfloat16")])
def test_auto_dtype_follows_the_cpu(
    tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, flags, expected
) -> None:
    from cg_ray import hardware

    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset(flags))
    monkeypatch.setattr(hardware, "cpu_capability", lambda: "AVX2")
    sae = f"saelens-disk:{tiny_sae_dir('topk')}"
    reader = ConceptReader.from_config(reader_config(model=str(tiny_model_dir), sae=sae, dtype="auto"))
    described = reader.describe()
    assert described["dtype"] == expected
    assert described["hardware"]["native_bf16"] is (expected == "bfloat16")
