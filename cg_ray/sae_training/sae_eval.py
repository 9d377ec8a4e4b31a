"""`cg-ray sae eval`: held-out quality of an SAE at the reader's layer (for the model card).

Explained variance = 1 − Σ‖x − x̂‖² / Σ‖x − mean(x)‖² over held-out tokens that count (sinks and
special tokens excluded, as in training); L0 = mean active latents per token; dead = latents never
active on the held-out tokens. Needs an SAE with a decoder (sae-lens backends).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import torch

from cg_ray.activations.reader import ConceptReader
from cg_ray.errors import ConfigError
from cg_ray.sae_training.token_pass import iter_token_batches, make_windows

log = logging.getLogger(__name__)


@torch.inference_mode()
def evaluate(reader: ConceptReader, docs: Sequence[str], context: int = 128) -> dict[str, float]:
    """eval.json's numbers (`SaeEvaluation`): held-out explained variance, L0, dead latents, counts, seconds."""
    sae = getattr(reader.sae, "sae", None)
    if sae is None or not hasattr(sae, "decode"):
        raise ConfigError("evaluation needs an SAE with a decoder (an sae-lens SAE)")
    windows = make_windows(reader, docs, context)
    started = time.perf_counter()
    n = 0
    sum_x = torch.zeros(reader.sae.info.d_in, dtype=torch.float64)
    sum_x2 = 0.0
    sq_err = 0.0
    l0 = 0.0
    fired = torch.zeros(reader.d_sae, dtype=torch.int64)
    for tb in iter_token_batches(reader, windows):
        x = tb.hidden.double().cpu()
        recon = sae.decode(tb.acts).double().cpu()
        active = (tb.acts > 0).cpu()
        n += x.shape[0]
        sum_x += x.sum(0)
        sum_x2 += float((x * x).sum())
        sq_err += float(((x - recon) ** 2).sum())
        l0 += float(active.sum())
        fired += active.sum(0)
    if n == 0:
        raise ConfigError("no held-out token counted")
    total_var = sum_x2 - float((sum_x * sum_x).sum()) / n  # Σ‖x − mean‖²
    return {
        "heldout_documents": len(docs),
        "heldout_tokens": n,
        "explained_variance": 1.0 - sq_err / total_var,
        "l0": l0 / n,
        "dead_fraction": float((fired == 0).double().mean()),
        "dead_latents": int((fired == 0).sum()),
        "seconds": round(time.perf_counter() - started, 1),
    }
