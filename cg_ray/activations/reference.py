"""The naive reference: one row at a time, full causal-LM forward with `output_hidden_states=True`,
the SAE on every token, dense vectors on the CPU, tokens that count chosen by a plain Python loop.

Deliberately shares nothing with the fast path beyond the token policy's settings, so tests and
`benchmarks/bench_reader.py` can use it as an independent recomputation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from cg_ray.activations.saes.base import SaeEncoder
from cg_ray.activations.tokens import TokenPolicy

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def counted_positions(ids: Sequence[int], policy: TokenPolicy) -> list[int]:
    keep = []
    for pos, tok in enumerate(ids):
        if pos < policy.sink_positions:
            continue
        if policy.exclude_bos and pos == 0 and tok == policy.bos_id:
            continue
        if policy.exclude_special_tokens and tok in policy.special_ids:
            continue
        keep.append(pos)
    return keep


@torch.inference_mode()
def reference_row(
    causal_lm: PreTrainedModel, sae: SaeEncoder, ids: Sequence[int], layer: int, policy: TokenPolicy
) -> tuple[np.ndarray, int]:
    """Dense s̃ (d_sae,) float64 on the CPU, and the number of tokens that counted."""
    input_ids = torch.as_tensor([list(ids)], dtype=torch.long)
    out = causal_lm(input_ids=input_ids, output_hidden_states=True, use_cache=False)
    hidden = out.hidden_states[layer + 1][0]  # hidden_states[0] is the embedding output
    acts = sae.encode(hidden).float().cpu().numpy().astype(np.float64)  # every token, dense
    keep = counted_positions(ids, policy)
    if not keep:
        return np.zeros(acts.shape[-1]), 0
    return acts[keep].sum(axis=0) / len(keep), len(keep)
