"""The readers shipped with cg_ray for the default model: SAEs trained here (`cg-ray sae train`, each with its
MODEL_CARD.md, training.json, eval.json and labels.jsonl under cg_ray/assets/), named so that a job's `sae:`,
`--sae` and `cg-ray sensitivity --reader` can pick one. Concept ids belong to one SAE: ids of two readers do
not correspond (docs/sensitivity.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cg_ray.errors import ConfigError

ASSETS = Path(__file__).resolve().parents[2] / "assets"
DEFAULT_READER = "default"
# The floor a reader meets to ship (docs/reader.md, "Shipped readers"): held-out explained variance and the
# share of latents never active on the held-out tokens, both from its eval.json.
MIN_EXPLAINED_VARIANCE = 0.75
MAX_DEAD_SHARE = 0.02


@dataclass(frozen=True)
class ShippedReader:
    name: str
    folder: str  # under cg_ray/assets/
    layer: int
    d_sae: int
    seed: int
    summary: str  # one line: how it differs from the default

    @property
    def directory(self) -> Path:
        return ASSETS / self.folder


SHIPPED_READERS: dict[str, ShippedReader] = {
    r.name: r
    for r in (
        ShippedReader(
            DEFAULT_READER, "smollm2-135m-instruct-l20-topk4608", 20, 4608, 42, "the default: layer 20, seed 42"
        ),
        ShippedReader(
            "l20-seed7", "smollm2-135m-instruct-l20-topk4608-seed7", 20, 4608, 7, "layer 20, another seed (7)"
        ),
        ShippedReader(
            "l13", "smollm2-135m-instruct-l13-topk4608", 13, 4608, 0, "layer 13 of 30 (the default reads 20)"
        ),
    )
}


def shipped_reader(name: str) -> ShippedReader:
    """The shipped reader `name`, with its asset folder present; a clear error naming the known ones."""
    try:
        reader = SHIPPED_READERS[name]
    except KeyError:
        raise ConfigError(f"unknown reader {name!r}; shipped readers: {', '.join(SHIPPED_READERS)}") from None
    if not (reader.directory / "cfg.json").is_file():
        raise ConfigError(f"reader {name!r} is not installed: {reader.directory} has no cfg.json")
    return reader


def reader_facts(reader: ShippedReader) -> dict[str, Any]:
    """What `cg-ray sae list` prints of a shipped reader, read from its assets: cfg.json (k), training.json
    (tokens), eval.json (`SaeEvaluation`: explained variance, L0, dead latents) and labels.jsonl (records)."""
    from cg_ray.artifacts.contract import SaeEvaluation, read_document

    folder = reader.directory
    cfg = json.loads((folder / "cfg.json").read_text(encoding="utf-8"))
    training = json.loads((folder / "training.json").read_text(encoding="utf-8"))
    evaluation = read_document(folder / "eval.json", SaeEvaluation)
    labels = folder / "labels.jsonl"
    n_labels = sum(1 for line in labels.open(encoding="utf-8") if line.strip()) if labels.is_file() else 0
    return {
        "name": reader.name,
        "layer": reader.layer,
        "d_sae": reader.d_sae,
        "k": cfg.get("k"),
        "seed": reader.seed,
        "tokens": training.get("total_trained_tokens", training.get("trained_tokens")),
        "explained_variance": evaluation.explained_variance,
        "l0": evaluation.l0,
        "dead_latents": evaluation.dead_latents,
        "labels": n_labels,
        "folder": str(folder),
    }
