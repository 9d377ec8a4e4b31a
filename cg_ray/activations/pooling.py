"""On-device pooling: SAE-encode the tokens that count, sum per row, divide by the count, sparsify
(or, with `pool="max"`, the largest activation over the tokens that count).

Only tokens that count are encoded (padding and sinks never reach the SAE), sums are kept in float32,
and only the non-zero (row, concept, value) triples leave the device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch

from cg_ray.activations.saes.base import SaeEncoder
from cg_ray.activations.tokens import TokenPolicy, counted_tokens

if TYPE_CHECKING:
    from cg_ray.activations.varlen import PackedBatch


@dataclass(frozen=True)
class RowActs:
    concept_ids: np.ndarray  # int32, ascending
    concept_acts: np.ndarray  # float32, s̃ (mean over counted tokens; the max with pool="max")
    n_tokens: int


@torch.inference_mode()
def pool_batch(
    hidden: torch.Tensor,
    counted: torch.Tensor,
    sae: SaeEncoder,
    chunk_tokens: int,
    pool: Literal["mean", "max"] = "mean",
) -> list[RowActs]:
    """Padded batch: hidden (rows, width, d), counted (rows, width)."""
    rows, cols = counted.nonzero(as_tuple=True)
    pair_token = torch.arange(rows.shape[0], device=hidden.device)
    return pool_tokens(hidden[rows, cols], pair_token, rows, hidden.shape[0], sae, chunk_tokens, pool)


@torch.inference_mode()
def pool_tokens(
    tokens: torch.Tensor,
    pair_token: torch.Tensor,
    pair_row: torch.Tensor,
    n_rows: int,
    sae: SaeEncoder,
    chunk_tokens: int,
    pool: Literal["mean", "max"] = "mean",
) -> list[RowActs]:
    """tokens (n, d) each encoded once; (pair_token[i], pair_row[i]) says token pair_token[i] counts for
    row pair_row[i] (a token of a shared prefix counts for every row of its group); pair_token ascending.
    A TopK SAE takes the sparse path: only its k (value, feature) pairs per token are scattered into the
    row sums — no dense (tokens, d_sae) matrix is built."""
    if pool not in ("mean", "max"):
        raise ValueError(f"unknown pooling {pool!r} (mean or max)")
    d_sae = sae.info.d_sae
    device = tokens.device
    k = sae.topk_k
    # Activations are ≥ 0, so a max starts from 0 on the sparse path; the dense path keeps -inf so that
    # an SAE with negative outputs still pools right.
    fill = float("-inf") if pool == "max" and k is None else 0.0
    sums = torch.full((n_rows * d_sae,), fill, dtype=torch.float32, device=device)
    bounds = torch.searchsorted(
        pair_token, torch.arange(0, tokens.shape[0] + chunk_tokens, chunk_tokens, device=device)
    )
    bounds_list = bounds.cpu().tolist()
    for c, start in enumerate(range(0, tokens.shape[0], chunk_tokens)):
        x = tokens[start : start + chunk_tokens]
        lo, hi = bounds_list[c], bounds_list[c + 1]
        which = pair_token[lo:hi] - start
        identity = hi - lo == x.shape[0]  # every token counts for one row only: no gather needed
        if k is not None:
            values, indices = sae.encode_topk(x)
            if not identity:
                values, indices = values[which], indices[which]
            flat = (pair_row[lo:hi].unsqueeze(1) * d_sae + indices).flatten()
            vals = values.float().flatten()
            if pool == "max":
                sums.scatter_reduce_(0, flat, vals, "amax")
            else:
                sums.index_add_(0, flat, vals)
            continue
        acts = sae.encode(x).float()
        if not identity:
            acts = acts[which]
        table = sums.view(n_rows, d_sae)
        if pool == "max":
            table.scatter_reduce_(0, pair_row[lo:hi].unsqueeze(1).expand_as(acts), acts, "amax")
        else:
            table.index_add_(0, pair_row[lo:hi], acts)
    table = sums.view(n_rows, d_sae)
    counts = torch.bincount(pair_row, minlength=n_rows)
    if pool == "max":  # a row without a counted token has no maximum: 0, as its mean would be
        means = torch.where(torch.isneginf(table), torch.zeros_like(table), table)
    else:
        means = table / counts.clamp(min=1).unsqueeze(1).to(table.dtype)
    return _sparse_rows(means, counts)


def _sparse_rows(means: torch.Tensor, counts: torch.Tensor) -> list[RowActs]:
    n_rows = means.shape[0]
    nz_rows, nz_cols = means.nonzero(as_tuple=True)  # row-major: concept ids ascend within a row
    values = means[nz_rows, nz_cols]
    per_row = torch.bincount(nz_rows, minlength=n_rows).cpu().tolist()
    ids_np = nz_cols.to(torch.int32).cpu().numpy()
    vals_np = values.cpu().numpy().astype(np.float32, copy=False)
    counts_list = counts.cpu().tolist()
    out: list[RowActs] = []
    offset = 0
    for r in range(n_rows):
        end = offset + per_row[r]
        out.append(RowActs(ids_np[offset:end], vals_np[offset:end], int(counts_list[r])))
        offset = end
    return out


def pool_packed(
    hidden: torch.Tensor,
    ids: torch.Tensor,
    packed: PackedBatch,
    count_from: Sequence[int] | None,
    policy: TokenPolicy,
    sae: SaeEncoder,
    chunk_tokens: int,
    pool: Literal["mean", "max"],
) -> tuple[list[RowActs], int]:
    """One packed batch's rows pooled from its hidden states (`ids`: its packed input ids on the device), and
    how many tokens were counted. Each packed token is encoded once; a shared prefix token counts for every row
    of its group."""
    device = hidden.device
    lengths = torch.as_tensor([len(t) for t in packed.row_tokens])
    index = torch.cat(packed.row_tokens).to(device)  # packed position of each row's tokens
    row = torch.repeat_interleave(torch.arange(len(packed.rows)), lengths).to(device)
    position = torch.cat([torch.arange(n) for n in lengths.tolist()]).to(device)
    first = None
    if count_from is not None:
        first = torch.as_tensor([count_from[r] for r in packed.rows], dtype=torch.long, device=device)[row]
    keep = counted_tokens(ids[0, index], position, policy, first)
    tokens, pair_token = torch.unique(index[keep], return_inverse=True)
    order = torch.argsort(pair_token, stable=True)
    pooled = pool_tokens(hidden[tokens], pair_token[order], row[keep][order], len(packed.rows), sae, chunk_tokens, pool)
    return pooled, int(keep.sum())
