"""Benchmark loaders: every source kind yields normalized rows (see ``rows.py``).

``load_benchmarks(sources)`` reads a whole suite on the driver (benchmark files are small next to the
model work) and checks that row ids are unique; ``to_dataset`` hands the rows to Ray Data with a fixed
Arrow schema.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from cg_ray.benchmarks.rows import BENCHMARK_ROW_SCHEMA, BenchmarkRow, rows_table
from cg_ray.benchmarks.sources import BenchmarkSource, ScorerOptions, source_label
from cg_ray.errors import InputError
from cg_ray.registry import Registry

if TYPE_CHECKING:
    import ray.data

log = logging.getLogger(__name__)

Loader = Callable[[Any], Iterator[BenchmarkRow]]

# A source kind's loader is `load_<kind>`: the file kinds' in local.py, each other kind's in its own module.
LOCAL_KINDS = ("local", "normalized", "model_outputs")
MODULE_KINDS = ("hf", "lm_eval", "leaderboard", "lighteval", "inspect", "probes")
LOADERS: Registry[Loader] = Registry("benchmark loader")
for _kind in LOCAL_KINDS:
    LOADERS.add(_kind, f"cg_ray.benchmarks.local:load_{_kind}")
for _kind in MODULE_KINDS:
    LOADERS.add(_kind, f"cg_ray.benchmarks.{_kind}:load_{_kind}")
# Arena battles are not a source kind: `cg-ray arena` reads them with `cg_ray.benchmarks.arena.load_battles`
# and turns each model's side into rows itself (cg_ray.arena.rows).


def load_source(source: BenchmarkSource) -> list[BenchmarkRow]:
    rows = list(LOADERS.get(source.kind)(source))
    if not rows:
        raise InputError(f"no rows in {source_label(source)}", path=getattr(source, "path", None))
    return rows


def load_benchmarks(sources: Sequence[BenchmarkSource]) -> list[BenchmarkRow]:
    """All rows of a suite, in source order; row ids must be unique across the suite."""
    return load_suite(sources)[0]


def record_scorer_options(options: dict[str, ScorerOptions], source: BenchmarkSource, benchmarks: set[str]) -> None:
    """Record `source`'s scorer_options for each of its benchmarks; a benchmark given different options by
    two sources is refused (one scorer configuration per benchmark)."""
    for name in sorted(benchmarks):
        wanted = dict(source.scorer_options)
        if options.setdefault(name, wanted) != wanted:
            raise InputError(
                f"benchmark {name!r} gets different scorer_options from two sources",
                path=getattr(source, "path", None),
                field="scorer_options",
            )


def load_suite(sources: Sequence[BenchmarkSource]) -> tuple[list[BenchmarkRow], dict[str, ScorerOptions]]:
    """All rows of a suite (ids unique across it) and each benchmark's scorer options, the second input
    of ``cg_ray.scoring.apply.score_dataset``."""
    seen: dict[str, str] = {}
    out: list[BenchmarkRow] = []
    options: dict[str, ScorerOptions] = {}
    for source in sources:
        label = source_label(source)
        rows = load_source(source)
        for i, row in enumerate(rows):
            if row["row_id"] in seen:
                raise InputError(
                    f"duplicate row id {row['row_id']!r} (first seen in {seen[row['row_id']]})",
                    path=getattr(source, "path", None),
                    row=i,
                    field="id",
                )
            seen[row["row_id"]] = label
        record_scorer_options(options, source, {r["benchmark"] for r in rows})
        log.info("loaded %d rows from %s", len(rows), label)
        out.extend(rows)
    return out, options


def to_dataset(rows: Sequence[BenchmarkRow], *, blocks: int | None = None) -> ray.data.Dataset:
    """Rows as a Ray Dataset with the fixed row schema, split into ``blocks`` blocks for parallelism."""
    from cg_ray.io.blocks import arrow_dataset

    return arrow_dataset(rows_table(rows), blocks or 1)


__all__ = [
    "BENCHMARK_ROW_SCHEMA",
    "LOADERS",
    "load_benchmarks",
    "load_source",
    "load_suite",
    "record_scorer_options",
    "to_dataset",
]
