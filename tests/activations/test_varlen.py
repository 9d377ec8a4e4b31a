"""Packed batches (no padding, shared prefixes computed once) against the padded path, on a random tiny
Llama in float32; the sparse TopK encode; the `compile: auto` decision (never compiling here)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from cg_ray.activations import compile_plan
from cg_ray.activations.reader import ConceptReader
from cg_ray.activations.varlen import plan_groups, plan_packed_batches

from .conftest import reader_config

QUESTION = "how many eggs does the cat sell at the market every morning and what is the total cost"
TEXTS = [
    QUESTION + " two dollars",
    "red",
    QUESTION + " the answer is five eggs and ten dollars",
    "two big trees by the river in the old city and a small house with a green door " * 3,
    QUESTION,  # a row that is exactly the shared prefix
    "what is the total cost of five muffins",
    QUESTION + " two dollars",  # a duplicate row
    "fast",
]


def dense(rows: list[Any], d_sae: int) -> np.ndarray:
    out = np.zeros((len(rows), d_sae))
    for i, row in enumerate(rows):
        out[i, row.concept_ids] = row.concept_acts
    return out


def read(model: Path, sae: str, texts: list[str], **kw: Any) -> tuple[ConceptReader, list[Any]]:
    reader = ConceptReader.from_config(reader_config(model=str(model), sae=sae, **kw))
    return reader, reader.read(texts)


@pytest.mark.parametrize("arch", ["topk", "jumprelu"])
@pytest.mark.parametrize(
    "policy",
    [{"padding_side": "right"}, {"padding_side": "left"}, {"exclude_bos": False}, {"sink_positions": 3}],
    ids=["right", "left", "bos-kept", "sinks"],
)
@pytest.mark.parametrize("share", [False, True])
def test_packed_equals_padded(
    tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path], arch: str, policy: dict[str, Any], share: bool
) -> None:
    sae = f"saelens-disk:{tiny_sae_dir(arch)}"
    padded, want = read(tiny_model_dir, sae, TEXTS, packing=False, token_budget=64, **policy)
    packed, got = read(tiny_model_dir, sae, TEXTS, share_prefixes=share, min_shared_tokens=4, token_budget=64, **policy)
    assert not padded.packed and packed.packed
    assert [r.n_tokens for r in got] == [r.n_tokens for r in want]
    np.testing.assert_allclose(dense(got, packed.d_sae), dense(want, padded.d_sae), rtol=1e-5, atol=1e-5)
    assert dense(want, padded.d_sae).any()
    read_tokens = sum(len(s) for s in packed.tokenize(TEXTS))
    assert packed.stats["tokens_read"] == read_tokens
    if share:  # the question is computed once for its four rows (one of them a duplicate)
        assert packed.stats["tokens_forward"] < read_tokens
    else:
        assert packed.stats["tokens_forward"] == read_tokens == padded.stats["tokens_forward"]


@pytest.mark.parametrize("pool", ["mean", "max"])
def test_packed_context_and_pooling(tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path], pool: str) -> None:
    sae = f"saelens-disk:{tiny_sae_dir('topk')}"
    offsets = [len(QUESTION) if t.startswith(QUESTION) else 0 for t in TEXTS]
    out = {}
    for packing in (False, True):
        reader = ConceptReader.from_config(
            reader_config(model=str(tiny_model_dir), sae=sae, packing=packing, min_shared_tokens=4)
        )
        out[packing] = reader.read(TEXTS, count_from=offsets, pool=pool)  # type: ignore[arg-type]
    assert [r.n_tokens for r in out[True]] == [r.n_tokens for r in out[False]]
    assert out[True][4].n_tokens == 0  # the bare question: context only
    np.testing.assert_allclose(dense(out[True], 96), dense(out[False], 96), rtol=1e-5, atol=1e-5)


def test_gqa_and_sliding_window_attention() -> None:
    """The packed attention function against SDPA on each row alone, with GQA and a sliding window."""
    from cg_ray.activations.varlen import Block, packed_blocks, varlen_attention

    torch.manual_seed(0)
    rows = [torch.randn(1, 4, n, 8) for n in (7, 5)]  # 4 query heads
    kv = [(torch.randn(1, 2, n, 8), torch.randn(1, 2, n, 8)) for n in (7, 5)]  # 2 key/value heads
    shared = 3  # row 1 = row 0's first 3 tokens + 2 own tokens
    kv[1] = (
        torch.cat([kv[0][0][:, :, :shared], kv[1][0][:, :, :2]], 2),
        torch.cat([kv[0][1][:, :, :shared], kv[1][1][:, :, :2]], 2),
    )
    rows[1] = torch.cat([rows[0][:, :, :shared], rows[1][:, :, :2]], 2)
    q = torch.cat([rows[0], rows[1][:, :, shared:]], 2)
    k = torch.cat([kv[0][0], kv[1][0][:, :, shared:]], 2)
    v = torch.cat([kv[0][1], kv[1][1][:, :, shared:]], 2)
    blocks = [Block(0, 7), Block(7, 2, 0, shared)]
    module = torch.nn.Module()
    module.num_key_value_groups = 2  # what transformers' SDPA path reads from an attention module
    for window in (None, 2):
        with packed_blocks(blocks):
            out, _ = varlen_attention(module, q, k, v, None, scaling=0.3, sliding_window=window)
        for r, (qr, (kr, vr)) in enumerate(zip(rows, kv, strict=True)):
            n = qr.shape[2]
            mask = torch.ones(n, n).tril().bool()
            if window is not None:
                mask &= torch.ones(n, n).triu(-(window - 1)).bool()
            ref = torch.nn.functional.scaled_dot_product_attention(
                qr, kr.repeat_interleave(2, 1), vr.repeat_interleave(2, 1), attn_mask=mask, scale=0.3
            ).transpose(1, 2)
            got = out[:, :7] if r == 0 else torch.cat([out[:, :shared], out[:, 7:]], 1)
            torch.testing.assert_close(got, ref, rtol=0, atol=1e-6)
    # outside a packed forward it is transformers' SDPA (a padded forward of the same model)
    plain, _ = varlen_attention(module, q[:, :, :7], k[:, :, :7], v[:, :, :7], None, scaling=0.3)
    full = torch.ones(7, 7).tril().bool()
    ref = torch.nn.functional.scaled_dot_product_attention(
        rows[0], kv[0][0].repeat_interleave(2, 1), kv[0][1].repeat_interleave(2, 1), attn_mask=full, scale=0.3
    ).transpose(1, 2)
    torch.testing.assert_close(plain, ref, rtol=0, atol=1e-6)


def test_plan_groups_shares_only_what_pays() -> None:
    a = [1, *range(10, 30)]
    seqs = [[*a, 5, 6], [7, 8, 9], [*a, 4], a[:5] + [99] * 20, a]
    groups = plan_groups(seqs, min_shared=8, max_size=1000)
    by_rows = {g.rows: g for g in groups}
    shared = next(g for g in groups if len(g.rows) > 1)
    assert sorted(shared.rows) == [0, 2, 4] and shared.prefix == len(a)
    assert shared.size == len(a) + 2 + 1  # the prefix once, then each row's own tokens
    assert (1,) in by_rows and (3,) in by_rows  # 5 shared tokens < min_shared
    assert sorted(r for g in groups for r in g.rows) == list(range(5))
    assert all(len(g.rows) == 1 for g in plan_groups(seqs, None, 1000))
    capped = plan_groups(seqs, 8, max_size=22)  # room for the prefix and one more token: two rows
    assert sorted(len(g.rows) for g in capped) == [1, 1, 1, 2] and all(g.size <= 22 for g in capped if len(g.rows) > 1)
    batches = plan_packed_batches(plan_groups(seqs, None, 1000), token_budget=30)
    assert all(sum(g.size for g in b) <= 30 for b in batches if len(b) > 1)
    assert sorted(r for b in batches for g in b for r in g.rows) == list(range(5))


@pytest.mark.parametrize("backend", ["saelens", "dense"])
def test_sparse_topk_encode_matches_dense(backend: str) -> None:
    from cg_ray.activations.saes.base import SaeInfo
    from cg_ray.activations.saes.dense import DenseSae
    from cg_ray.activations.saes.saelens import SaeLensSae

    from .conftest import tiny_saelens_sae

    raw = tiny_saelens_sae("topk")
    raw.cfg.rescale_acts_by_decoder_norm = True
    sae: Any
    if backend == "saelens":
        sae = SaeLensSae(raw, backend="saelens-disk", source="tiny")
    else:
        info = SaeInfo("npz", "tiny", "topk", 64, 96)
        sae = DenseSae(
            W_enc=raw.W_enc.detach(), b_enc=raw.b_enc.detach(), b_dec=raw.b_dec.detach(), architecture="topk",
            info=info, k=8, W_dec=raw.W_dec.detach(), rescale_by_decoder_norm=True,
        )  # fmt: skip
    x = torch.randn(50, 64)
    values, indices = sae.encode_topk(x)
    assert sae.topk_k == 8 and values.shape == indices.shape == (50, 8)
    rebuilt = torch.zeros(50, 96).scatter_(-1, indices, values)
    torch.testing.assert_close(rebuilt, raw.encode(x), rtol=0, atol=0)
    torch.testing.assert_close(sae.encode(x), raw.encode(x), rtol=0, atol=0)


def test_compile_decision() -> None:
    cost = compile_plan.CompileCost(compile_s=100.0, speedup=2.0, source="test")
    # 1M tokens at 1k tokens/s = 1000 s eager; compiled saves 500 s > 100 s
    assert compile_plan.decide(1_000_000, 1000.0, cost).compile
    # 100k tokens: 100 s eager, saves 50 s < 100 s
    small = compile_plan.decide(100_000, 1000.0, cost)
    assert not small.compile and "stay eager" in small.reason
    assert not compile_plan.decide(10**9, 1000.0, compile_plan.CompileCost(1.0, 1.0, "no gain")).compile


def test_compile_costs_are_recorded(tmp_path: Path) -> None:
    path = tmp_path / "costs.json"
    assert compile_plan.recorded_cost("cpu", "m", path) == compile_plan.BUILTIN["cpu"]
    mine = compile_plan.CompileCost(12.0, 1.3, "measured")
    compile_plan.record_compile("cpu", "m", mine, path)
    assert compile_plan.recorded_cost("cpu", "m", path) == mine
    assert compile_plan.recorded_cost("cuda", "m", path) == compile_plan.BUILTIN["cuda"]
    path.write_text("not json")
    assert compile_plan.recorded_cost("cpu", "m", path) == compile_plan.BUILTIN["cpu"]


def test_compile_auto_stays_eager_on_a_small_job(
    tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_compile(*_a: Any, **_k: Any) -> None:
        raise AssertionError("a test must never compile")

    monkeypatch.setattr(torch, "compile", no_compile)
    reader = ConceptReader.from_config(
        reader_config(model=str(tiny_model_dir), sae=f"saelens-disk:{tiny_sae_dir('topk')}", compile="auto")
    )
    assert reader.compile_decision is None  # decided on the first batch, from its measured rate
    reader.read(TEXTS)
    decision = reader.describe()["compile_decision"]
    assert decision["compile"] is False and decision["planned_tokens"] > 0
    assert decision["eager_tokens_per_s"] > 0 and not reader.compiled
    reader.plan(10**6)  # already decided: a later plan does not change it
    reader.read(TEXTS[:2])
    assert not reader.compiled


def test_a_compiled_run_records_its_cost(
    tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The decision and the recording, driven with batch timings; compilation itself is stubbed out."""
    from cg_ray.hardware import hardware_info

    monkeypatch.setenv("CG_RAY_CACHE", str(tmp_path))
    monkeypatch.setattr(ConceptReader, "_compile", lambda self: setattr(self, "compiled", True))
    reader = ConceptReader.from_config(
        reader_config(model=str(tiny_model_dir), sae=f"saelens-disk:{tiny_sae_dir('topk')}", compile="auto")
    )
    reader.plan(10**9)  # ~11 days of eager reading at 1,000 tokens/s: compiling pays
    reader._after_batch(100, 100, 0.1)  # first eager batch: 1,000 tokens/s
    assert reader.compiled and reader.compile_decision is not None and reader.compile_decision.compile
    reader._after_batch(100, 100, 5.1)  # the first compiled batch: 5 s of compilation
    reader._after_batch(100, 10_000, 5.0)
    reader._after_batch(100, 10_000, 5.0)  # 2,000 tokens/s compiled over 10 s
    cost = compile_plan.recorded_cost("cpu", hardware_info().line())
    assert cost.compile_s == pytest.approx(5.0) and cost.speedup == pytest.approx(2.0)
    assert "measured by the reader" in cost.source
