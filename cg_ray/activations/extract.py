"""`cg-ray extract`: scored rows → rows.parquet (+ a manifest beside it), published atomically."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.activations.config import ReaderConfig
from cg_ray.activations.inputs import load_benchmark_records, load_rows, row_text
from cg_ray.activations.packing import pack_concepts
from cg_ray.activations.pooling import RowActs
from cg_ray.activations.recorded import manifest_path
from cg_ray.artifacts.contract import ExtractManifest, read_document, write_document
from cg_ray.artifacts.publish import atomic_file
from cg_ray.config import TextMode, canonical_text_mode
from cg_ray.errors import InputError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExtractJob:
    input: Path
    out: Path
    text: TextMode = "prompt"
    chat_template: bool = False
    require_score: bool = True
    join_benchmarks: tuple[Path, ...] = ()
    model: str | None = None
    limit: int | None = None
    reader: ReaderConfig = field(default_factory=lambda: ReaderConfig.model_validate({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", canonical_text_mode(self.text))  # `both`: the deprecated alias


def read_manifest(rows: Path) -> ExtractManifest | None:
    """The extract manifest beside `rows` (None if there is none); a newer format_version is refused."""
    path = manifest_path(rows)
    return read_document(path, ExtractManifest) if path.is_file() else None


class _ProgressLog:
    def __init__(self, every_s: float = 15.0) -> None:
        self.every_s = every_s
        self.start = self.last = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        now = time.perf_counter()
        if now - self.last >= self.every_s or done == total:
            self.last = now
            log.info("%d/%d texts (%.1f texts/s)", done, total, done / max(now - self.start, 1e-9))


def run_extract(job: ExtractJob) -> dict[str, Any]:
    from cg_ray.activations.reader import ConceptReader

    t0 = time.perf_counter()
    joined = load_benchmark_records(job.join_benchmarks) if job.join_benchmarks else None
    rows = load_rows(
        job.input,
        text=job.text,
        require_score=job.require_score,
        benchmark_prompts=None if joined is None else {k: v[0] for k, v in joined.items()},
        benchmark_metadata=None if joined is None else {k: v[1] for k, v in joined.items()},
        model=job.model,
        limit=job.limit,
    )
    log.info("%d rows read from %s", len(rows), job.input)
    t_read = time.perf_counter()
    reader = ConceptReader.from_config(job.reader)
    t_load = time.perf_counter()

    texts: list[str] = []
    text_index: dict[str, int] = {}
    row_to_text: list[int] = []
    add_special = True
    for row in rows:
        text, add_special = row_text(row, job.text, reader.tokenizer if job.chat_template else None)
        row_to_text.append(text_index.setdefault(text, len(texts)))
        if row_to_text[-1] == len(texts):
            texts.append(text)
    seqs = reader.tokenize(texts, add_special_tokens=add_special)
    for row, t in zip(rows, row_to_text, strict=True):
        if not seqs[t]:
            raise InputError("the text has no tokens", path=row.where, field=job.text)
    log.info("reading %d unique texts (%d tokens) with %s", len(texts), sum(map(len, seqs)), reader.model.source)
    acts = reader.read_ids(seqs, progress=_ProgressLog())
    t_compute = time.perf_counter()

    table = _table([acts[t] for t in row_to_text], rows, reader.d_sae)
    manifest = {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "input": str(job.input),
        "join_benchmarks": [str(p) for p in job.join_benchmarks],
        "model_filter": job.model,
        "limit": job.limit,
        "text": job.text,
        "chat_template": job.chat_template,
        "require_score": job.require_score,
        "reader": reader.describe(),
        "counts": {
            "rows": len(rows),
            "unique_texts": len(texts),
            "rows_without_counted_tokens": sum(1 for t in row_to_text if acts[t].n_tokens == 0),
            "rows_without_score": sum(1 for r in rows if r.score is None),
            **{k: v for k, v in reader.stats.items() if k != "seconds"},
        },
        "timings_s": {
            "read_input": round(t_read - t0, 3),
            "load_reader": round(t_load - t_read, 3),
            "compute": round(t_compute - t_load, 3),
            "tokens_per_s": round(reader.stats["tokens_read"] / max(t_compute - t_load, 1e-9), 1),  # rows' tokens
            "rows_per_s": round(len(rows) / max(t_compute - t_load, 1e-9), 2),
        },
        "versions": _versions(),
        "d_sae": reader.d_sae,
        "output": str(job.out),
    }
    with atomic_file(job.out) as tmp_rows, atomic_file(manifest_path(job.out)) as tmp_manifest:
        pq.write_table(table, tmp_rows)
        manifest = write_document(tmp_manifest, ExtractManifest, manifest)
    log.info("wrote %s (%d rows) in %.1f s", job.out, len(rows), time.perf_counter() - t0)
    return manifest


def _table(acts: list[RowActs], rows: list[Any], d_sae: int) -> pa.Table:
    packed = pack_concepts(acts)
    columns = {
        S.ROW_ID: pa.array([r.row_id for r in rows], pa.string()),
        S.BENCHMARK: pa.array([r.benchmark for r in rows], pa.string()),
        S.MODEL: pa.array([r.model for r in rows], pa.string()),
        S.SCORE: pa.array([r.score for r in rows], pa.float64()),
        S.N_TOKENS: packed.n_tokens,
        S.CONCEPT_IDS: packed.concept_ids,
        S.CONCEPT_ACTS: packed.concept_acts,
        # Optional columns (as the pipeline writes them): the texts, for example rows and `cg-ray describe`,
        # and the row's metadata as a JSON object string.
        "prompt": pa.array([_joined(r.prompt) for r in rows], pa.string()),
        "response": pa.array([_joined(r.response) for r in rows], pa.string()),
        S.METADATA: pa.array([_metadata_json(r.metadata) for r in rows], pa.string()),
    }
    schema = S.rows_schema_with_d_sae(d_sae)
    schema = schema.append(pa.field("prompt", pa.string())).append(pa.field("response", pa.string()))
    return pa.table(columns, schema=schema.append(S.METADATA_FIELD))


def _joined(turns: tuple[str, ...]) -> str | None:
    return "\n\n".join(turns) if turns else None


def _metadata_json(metadata: dict[str, Any] | None) -> str | None:
    if metadata is None:
        return None
    return json.dumps(metadata, sort_keys=True, ensure_ascii=False, default=str)


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {}
    for pkg in ("torch", "transformers", "sae-lens"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "not installed"
    return out
