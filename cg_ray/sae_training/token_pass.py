"""A token-level pass of the reader over documents, for SAE evaluation and labelling.

Documents are cut into windows of `context` tokens (BOS first, as in training); each batch yields the
hidden states and SAE activations of the tokens that count under the reader's token policy.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from cg_ray.activations.model import forward_to_layer
from cg_ray.activations.reader import ConceptReader
from cg_ray.activations.tokens import counted_mask, pad, plan_batches

log = logging.getLogger(__name__)


@dataclass
class TokenBatch:
    window: torch.Tensor  # (n,) index into `windows`
    position: torch.Tensor  # (n,) position within the window
    token: torch.Tensor  # (n,) token id
    hidden: torch.Tensor  # (n, d_in) layer output
    acts: torch.Tensor  # (n, d_sae) SAE feature activations


def make_windows(reader: ConceptReader, docs: Sequence[str], context: int) -> list[list[int]]:
    bos = reader.policy.bos_id
    windows: list[list[int]] = []
    for ids in reader.tokenizer(list(docs), add_special_tokens=False)["input_ids"]:
        step = context - 1 if bos is not None else context
        for start in range(0, len(ids), step):
            chunk = list(ids[start : start + step])
            windows.append(([bos] if bos is not None else []) + chunk)
    return windows


@torch.inference_mode()
def iter_token_batches(reader: ConceptReader, windows: Sequence[Sequence[int]]) -> Iterator[TokenBatch]:
    batches = plan_batches([len(w) for w in windows], reader.token_budget)
    started = last = time.perf_counter()
    for n, batch in enumerate(batches, start=1):
        if time.perf_counter() - last > 30:
            last = time.perf_counter()
            log.info("batch %d/%d (%.0f s)", n, len(batches), last - started)
        ids, mask = pad([windows[i] for i in batch], reader.policy.pad_id, "right")
        ids, mask = ids.to(reader.device), mask.to(reader.device)
        hidden = forward_to_layer(reader.model.base, reader.capture, ids, mask)
        rows, cols = counted_mask(ids, mask, reader.policy).nonzero(as_tuple=True)
        h = hidden[rows, cols]
        yield TokenBatch(
            window=torch.as_tensor(batch, device=rows.device)[rows],
            position=cols,
            token=ids[rows, cols],
            hidden=h,
            acts=reader.sae.encode(h),
        )
