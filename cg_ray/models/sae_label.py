"""`cg-ray sae label`: one label per latent from its top-activating contexts.

For every latent we collect, over a labelling corpus, the activation mass per token and per
(previous token, token) bigram, and the single strongest context. The label names the top tokens (or
the top bigram when it carries most of the mass) and the record keeps an example snippet with the
activating token marked «like this». Dead latents get a label that says so.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from cg_ray.activations.reader import ConceptReader
from cg_ray.models.token_pass import iter_token_batches, make_windows

log = logging.getLogger(__name__)

DEAD_LABEL = "(inactive on the labelling corpus)"


def _tok(tokenizer: Any, token_id: int) -> str:
    return str(tokenizer.decode([int(token_id)]))


@torch.inference_mode()
def label_latents(
    reader: ConceptReader, docs: Sequence[str], *, context: int = 128, top_tokens: int = 3
) -> list[dict[str, Any]]:
    windows = make_windows(reader, docs, context)
    lat: list[np.ndarray] = []
    tok: list[np.ndarray] = []
    prev: list[np.ndarray] = []
    act: list[np.ndarray] = []
    win: list[np.ndarray] = []
    pos: list[np.ndarray] = []
    n_tokens = 0
    for tb in iter_token_batches(reader, windows):
        rows, latents = tb.acts.nonzero(as_tuple=True)  # TopK/JumpReLU: few non-zeros per token
        lat.append(latents.cpu().numpy())
        act.append(tb.acts[rows, latents].float().cpu().numpy())
        w, p = tb.window[rows].cpu().numpy(), tb.position[rows].cpu().numpy()
        win.append(w)
        pos.append(p)
        tok.append(tb.token[rows].cpu().numpy())
        prev.append(np.array([windows[wi][pi - 1] if pi > 0 else -1 for wi, pi in zip(w, p, strict=True)]))
        n_tokens += tb.hidden.shape[0]
    log.info("labelling from %d tokens in %d windows", n_tokens, len(windows))
    L, T, P, A, W, Q = (np.concatenate(x) for x in (lat, tok, prev, act, win, pos))
    d_sae = reader.d_sae
    tokenizer = reader.tokenizer
    out: list[dict[str, Any]] = []
    order = np.lexsort((-A, L))  # by latent, strongest first
    starts = np.searchsorted(L[order], np.arange(d_sae + 1))
    for c in range(d_sae):
        idx = order[starts[c] : starts[c + 1]]
        if idx.size == 0:
            out.append({"concept_id": c, "label": DEAD_LABEL, "n_active_tokens": 0})
            continue
        total = float(A[idx].sum())
        tok_ids, inv = np.unique(T[idx], return_inverse=True)
        mass = np.bincount(inv, weights=A[idx])
        top = np.argsort(-mass)[:top_tokens]
        tokens = [(_tok(tokenizer, tok_ids[i]), round(float(mass[i] / total), 3)) for i in top]
        bigram_keys = P[idx].astype(np.int64) * (1 << 32) + T[idx].astype(np.int64)
        bg_ids, bg_inv = np.unique(bigram_keys, return_inverse=True)
        bg_mass = np.bincount(bg_inv, weights=A[idx])
        b = int(np.argmax(bg_mass))
        b_prev, b_tok = int(bg_ids[b] >> 32), int(bg_ids[b] & 0xFFFFFFFF)
        bigram = (_tok(tokenizer, b_prev) if b_prev >= 0 else "") + _tok(tokenizer, b_tok)
        best = idx[0]
        window = windows[int(W[best])]
        at = int(Q[best])
        snippet = (
            tokenizer.decode(window[max(1, at - 12) : at])
            + "«"
            + _tok(tokenizer, window[at])
            + "»"
            + tokenizer.decode(window[at + 1 : at + 5])
        )
        bigram_share = float(bg_mass[b] / total)
        names = " | ".join(repr(t.strip() or t) for t, _ in tokens)
        label = f"{bigram.strip()!r} ({names})" if bigram_share > 0.5 else names
        out.append(
            {
                "concept_id": c,
                "label": label,
                "top_tokens": tokens,
                "top_bigram": [bigram, round(bigram_share, 3)],
                "example": " ".join(snippet.split()),
                "max_act": round(float(A[best]), 4),
                "n_active_tokens": int(idx.size),
                "frequency": round(idx.size / max(n_tokens, 1), 6),
            }
        )
    return out
