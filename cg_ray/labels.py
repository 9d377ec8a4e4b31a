"""Concept labels: Neuronpedia explanation exports and simple `concept_id,label` files.

Formats (detected per record, so one loader reads them all):
- Neuronpedia exports, JSONL or JSONL.gz: `{"modelId", "layer", "index", "description", ...}`;
  several explanations per feature are possible — the first one in file order is the label.
- Merged label files: `{"model", "sae_id", "feature_index", "labels": [...]}` (first label wins).
- AxBench concept metadata: `{"concept", "ref": "https://www.neuronpedia.org/MODEL/SAE_ID/INDEX"}`.
- Simple JSONL `{"concept_id", "label"}` or CSV with header `concept_id,label`.
Exports that mix several SAEs need a `source` selector "MODEL/SAE_ID" (e.g. "gemma-2-2b/20-gemmascope-res-16k").
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cg_ray.errors import InputError
from cg_ray.io.records import iter_records


@dataclass(frozen=True)
class ConceptLabels:
    labels: dict[int, str]
    source: str | None  # "MODEL/SAE_ID" when the file said which SAE, else None
    path: str

    def get(self, concept_id: int) -> str | None:
        return self.labels.get(concept_id)

    def __len__(self) -> int:
        return len(self.labels)


def _records(path: Path) -> Iterator[tuple[int, dict[str, object]]]:
    """(1-based line, record) pairs of a JSONL or CSV file (gzip too), through the one record reader."""
    fmt: Literal["csv", "jsonl"] = "csv" if path.name.removesuffix(".gz").endswith(".csv") else "jsonl"
    try:
        for record in iter_records(path, fmt):
            assert record.line is not None  # JSONL and CSV records always have a line
            yield record.line, record.data
    except (OSError, EOFError) as exc:  # e.g. a truncated .gz
        raise InputError(f"cannot read labels ({exc})", path=str(path)) from None


def _as_index(value: object, path: Path, line: int, field: str) -> int:
    try:
        index = int(str(value))
    except (TypeError, ValueError):
        raise InputError(f"line {line}: {value!r} is not an integer", path=str(path), field=field) from None
    if index < 0:
        raise InputError(f"line {line}: negative concept id {index}", path=str(path), field=field)
    return index


def _parse(rec: dict[str, object], path: Path, line: int) -> tuple[str | None, int, str | None]:
    """(source, concept_id, label) of one record of any supported format."""
    if "description" in rec and "index" in rec:  # Neuronpedia export
        source = f"{rec.get('modelId')}/{rec.get('layer')}"
        desc = rec.get("description")
        return source, _as_index(rec["index"], path, line, "index"), str(desc).strip() if desc else None
    if "feature_index" in rec:  # merged label file
        labels = rec.get("labels") or []
        source = f"{rec.get('model')}/{rec.get('sae_id')}"
        first = labels[0] if isinstance(labels, list) and labels else None
        return source, _as_index(rec["feature_index"], path, line, "feature_index"), first and str(first).strip()
    if "ref" in rec and "concept" in rec:  # AxBench metadata: the Neuronpedia URL names the feature
        parts = str(rec["ref"]).rstrip("/").split("/")
        if len(parts) < 3:
            raise InputError(
                f"line {line}: cannot read MODEL/SAE_ID/INDEX from {rec['ref']!r}", path=str(path), field="ref"
            )
        concept = rec.get("concept")
        source = f"{parts[-3]}/{parts[-2]}"
        return source, _as_index(parts[-1], path, line, "ref"), str(concept).strip() if concept else None
    if "concept_id" in rec:
        label = rec.get("label")
        return None, _as_index(rec["concept_id"], path, line, "concept_id"), str(label).strip() if label else None
    raise InputError(
        f"line {line}: unknown label record (keys {sorted(rec)}); expected Neuronpedia "
        "{modelId, layer, index, description} or {concept_id, label}",
        path=str(path),
    )


def load_labels(path: str | os.PathLike[str], source: str | None = None, d_sae: int | None = None) -> ConceptLabels:
    """Load labels; `source` ("MODEL/SAE_ID") selects one SAE in multi-SAE files; ids ≥ d_sae are an error."""
    p = Path(path)
    if not p.is_file():
        raise InputError("no such labels file", path=str(p))
    per_source: dict[str | None, dict[int, str]] = {}
    seen_sources: set[str] = set()
    for line, rec in _records(p):
        src, index, label = _parse(rec, p, line)
        if src is not None:
            seen_sources.add(src)
            if source is not None and src != source:
                continue
        if label:
            per_source.setdefault(src, {}).setdefault(index, label)
    if source is not None and source not in per_source and None not in per_source:
        raise InputError(f"no labels for source {source!r} (sources in file: {sorted(seen_sources)})", path=str(p))
    if len(per_source) > 1:
        raise InputError(
            f"labels of several SAEs {sorted(s for s in per_source if s)}; choose one with --labels-source",
            path=str(p),
        )
    if not per_source:
        raise InputError("no labels found", path=str(p))
    ((src, labels),) = per_source.items()
    if d_sae is not None and labels and (too_big := max(labels)) >= d_sae:
        raise InputError(f"concept id {too_big} ≥ d_sae {d_sae}: these labels belong to another SAE", path=str(p))
    return ConceptLabels(labels=labels, source=src, path=str(p))
