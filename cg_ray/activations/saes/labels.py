"""The labels shipped beside an SAE, and those of the reader that read a rows file, found from what the rows
record about it.

`cg-ray extract` writes `ROWS.manifest.json` beside the rows (its `reader.sae`: spec, d_sae, the weights'
fingerprint); `cg-ray run` writes `manifest.json` beside `rows.parquet` (the reader spec in its config, the
factory and each reader actor's `sae_weights`); both are read as one `cg_ray.activations.recorded`
`RecordedReader`. When such a record names an SAE whose labels ship beside it
(the default SAE's `labels.jsonl`, or an sae-lens directory's), and that SAE's weights on disk still have
the recorded fingerprint, those labels name the rows' concepts. A retrained SAE keeps its spec and folder
but not its fingerprint: its labels would name other concepts, so they are not used.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from cg_ray.activations.config import DEFAULT_READER_FACTORY
from cg_ray.activations.recorded import SaeRecord, reader_of_rows
from cg_ray.labels import ConceptLabels, load_labels

log = logging.getLogger(__name__)

WEIGHTS_FILE = "sae_weights.safetensors"
LABEL_FILES = ("labels.jsonl", "labels.csv")


def sae_folder(sae_spec: str) -> Path:
    """Where an SAE spec's files live: a shipped reader's folder, or the spec's own location."""
    from cg_ray.activations.saes.shipped import DEFAULT_READER, shipped_reader
    from cg_ray.activations.saes.spec import parse_sae_spec

    spec = parse_sae_spec(sae_spec)
    if spec.kind in ("default", "shipped"):
        return shipped_reader(spec.location or DEFAULT_READER).directory
    return Path(spec.location)


def shipped_labels(sae_spec: str, d_sae: int, factory: str = DEFAULT_READER_FACTORY) -> ConceptLabels | None:
    """Labels shipped beside the SAE (the default SAE's, or a sae-lens directory's), when there are any.
    Only for the real reader: a stand-in reader (tests) has its own concept space."""
    if factory != DEFAULT_READER_FACTORY:
        return None
    folder = sae_folder(sae_spec)
    for name in LABEL_FILES:
        if (folder / name).is_file():
            return load_labels(folder / name, d_sae=d_sae)
    return None


def verified_shipped_labels(sae: SaeRecord, factory: str = DEFAULT_READER_FACTORY) -> tuple[ConceptLabels | None, str]:
    """The labels shipped beside the SAE `sae` names, if its weights on disk match the recorded fingerprint,
    and a one-line reason either way."""
    from cg_ray.activations.saes.base import file_fingerprint

    spec, d_sae, recorded = sae.spec, sae.d_sae, sae.weights_sha256
    if factory != DEFAULT_READER_FACTORY:
        return None, f"read by a stand-in reader ({factory}), whose concepts have no shipped labels"
    if not spec or not d_sae:
        return None, "the manifest does not name the SAE and its width"
    folder = sae_folder(str(spec))
    weights = folder / WEIGHTS_FILE if folder.is_dir() else folder
    if not recorded:
        return None, f"the manifest records no fingerprint of SAE {spec!r}'s weights, so its labels cannot be checked"
    if not weights.is_file() or file_fingerprint(weights) != recorded:
        return None, f"SAE {spec!r} on disk is not the one that read the rows (its weights' fingerprint differs)"
    labels = shipped_labels(str(spec), int(d_sae))
    if labels is None:
        return None, f"no labels ship with SAE {spec!r}"
    return labels, f"the labels shipped with SAE {spec!r} ({labels.path}; weights fingerprint {recorded} matches)"


def labels_for_rows(rows: Path, d_sae: int) -> tuple[ConceptLabels | None, str]:
    """The shipped labels of the reader recorded for `rows` (see the module docstring), and why (not)."""
    reader = reader_of_rows(rows)
    if reader.unknown is not None:
        return None, reader.unknown
    if reader.d_sae not in (None, d_sae):
        return None, f"{reader.source} names an SAE of width {reader.d_sae}, the rows have d_sae {d_sae}"
    labels, reason = verified_shipped_labels(replace(reader.sae, d_sae=d_sae), reader.factory or DEFAULT_READER_FACTORY)
    return labels, f"{reason} (reader from {reader.source})"
