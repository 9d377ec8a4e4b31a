"""On-device pooling: SAE-encode the tokens that count, sum per row, divide by the count, sparsify
(or, with `pool="max"`, the largest activation over the tokens that count).

Only tokens that count are encoded (padding and sinks never reach the SAE), sums are kept in float32,
and only the non-zero (row, concept, value) triples leave the device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from cg_ray.activations.saes.base import SaeEncoder


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
    if pool not in ("mean", "max"):
        raise ValueError(f"unknown pooling {pool!r} (mean or max)")
    n_rows = hidden.shape[0]
    rows, cols = counted.nonzero(as_tuple=True)
    tokens = hidden[rows, cols]
    sums: torch.Tensor | None = None
    for start in range(0, tokens.shape[0], chunk_tokens):
        acts = sae.encode(tokens[start : start + chunk_tokens]).float()
        if sums is None:
            fill = float("-inf") if pool == "max" else 0.0
            sums = torch.full((n_rows, acts.shape[-1]), fill, dtype=torch.float32, device=acts.device)
        if pool == "max":
            index = rows[start : start + chunk_tokens].unsqueeze(1).expand_as(acts)
            sums.scatter_reduce_(0, index, acts, "amax")
        else:
            sums.index_add_(0, rows[start : start + chunk_tokens], acts)
    counts = counted.sum(dim=1)
    if sums is None:  # no token counted in the whole batch
        empty = RowActs(np.zeros(0, np.int32), np.zeros(0, np.float32), 0)
        return [empty] * n_rows
    if pool == "max":  # a row without a counted token has no maximum: 0, as its mean would be
        means = torch.where(torch.isneginf(sums), torch.zeros_like(sums), sums)
    else:
        means = sums / counts.clamp(min=1).unsqueeze(1).to(sums.dtype)
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
