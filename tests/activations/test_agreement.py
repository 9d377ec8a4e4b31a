"""The agreement report of the benchmarks (issue #33): the reader's own per-token hidden states in its
own batches, and pre-TopK / latent-set differences beside max |Δs̃|."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from cg_ray.activations.agreement import compare, pre_activations, row_hidden
from cg_ray.activations.reader import ConceptReader
from cg_ray.activations.reference import counted_positions

from .conftest import reader_config
from .test_varlen import TEXTS, dense


def test_row_hidden_and_compare(tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path]) -> None:
    sae = f"saelens-disk:{tiny_sae_dir('topk')}"
    readers = {
        name: ConceptReader.from_config(
            reader_config(model=str(tiny_model_dir), sae=sae, token_budget=64, min_shared_tokens=4, **kw)
        )
        for name, kw in {
            "padded": {"packing": False},
            "sdpa": {"packing": True, "packed_attention": "sdpa"},
            "flex": {"packing": True, "packed_attention": "flex"},
        }.items()
    }
    seqs = readers["padded"].tokenize(TEXTS)
    hidden = {name: row_hidden(r, seqs) for name, r in readers.items()}
    assert [h.shape[0] for h in hidden["padded"]] == [len(s) for s in seqs]
    for name in ("sdpa", "flex"):  # each row's tokens, in order, whatever the batching (raw hidden states
        for a, b in zip(hidden[name], hidden["padded"], strict=True):  # of this large-weight model: 1e-4)
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    policy, enc = readers["padded"].policy, readers["padded"].sae
    counted = [h[counted_positions(s, policy)] for h, s in zip(hidden["padded"], seqs, strict=True)]
    s_dense = dense(readers["padded"].read_ids(seqs), 96)
    same = compare(s_dense, s_dense, counted, counted, enc, enc.topk_k)
    assert same.max_abs_s == same.max_abs_pre == same.rows_support_changed == same.tokens_topk_changed == 0
    # nudging every token a little swaps the latents that nearly tie: a small pre-TopK Δ,
    # some top-k sets changed; and a changed s̃ support is counted per row
    torch.manual_seed(0)
    nudged = [h + 3e-2 * torch.randn_like(h) for h in counted]
    other = s_dense.copy()
    other[0, np.flatnonzero(other[0])[0]] = 0.0
    report = compare(s_dense, other, counted, nudged, enc, enc.topk_k)
    assert 0 < report.max_abs_pre < 1 and 0 < report.tokens_topk_changed < 1  # type: ignore[operator]
    assert report.rows_support_changed == 1 / len(seqs) and report.max_abs_s > 0
    assert "pre-activations max |Δ|" in report.line()
    torch.testing.assert_close(
        pre_activations(enc, counted[0]).topk(8).values.relu(),
        enc.encode_topk(counted[0])[0].sort(descending=True).values,
    )
