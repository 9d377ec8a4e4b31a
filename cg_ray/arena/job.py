"""`cg-ray arena CONFIG`: the arena variant end to end (locally or as a Ray job).

battles → ratings (BT, Elo, bootstrap CIs) → per model of interest: its battles as scored rows (win 1,
loss 0, ties by policy) whose text is the prompt AND that model's response → the reader on Ray Data →
a full CG run per model → per-concept head-to-head win rates and the cross-model table → one run
directory, published atomically.
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from cg_ray import schemas as S
from cg_ray.activations.config import DEFAULT_READER_FACTORY
from cg_ray.arena.config import ArenaConfig
from cg_ray.arena.rows import ArenaRow
from cg_ray.config import MetricsConfig, load_config
from cg_ray.pipeline.config import ReaderStageConfig

log = logging.getLogger(__name__)


class ArenaJobConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field("arena", pattern=r"^[A-Za-z0-9._-]+$")
    output_dir: str = "runs"
    arena: ArenaConfig
    max_battles_per_model: int | None = Field(
        None, ge=1, description="read only the first N battles of each model (file order): a quick look on a CPU"
    )
    reader: ReaderStageConfig = ReaderStageConfig()
    metrics: MetricsConfig = MetricsConfig()
    labels: str | None = Field(None, description="concept labels file; default: the ones shipped with the SAE")
    ray_address: str | None = None


def load_arena_config(path: str | Path) -> ArenaJobConfig:
    return load_config(ArenaJobConfig, path)


def safe_name(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model)


def run_arena(config: ArenaJobConfig, *, overwrite: bool = False, reader_factory: str = DEFAULT_READER_FACTORY) -> Path:
    from cg_ray.activations.saes.labels import shipped_labels
    from cg_ray.arena.concepts import (
        head_to_head,
        load_model_activations,
        model_concepts_table,
        run_profiles,
        write_head_to_head,
    )
    from cg_ray.arena.outcomes import BattleArrays
    from cg_ray.arena.outputs import write_ratings
    from cg_ray.arena.ratings import rate
    from cg_ray.arena.rows import RowCounts, iter_model_rows, select_models
    from cg_ray.artifacts.layout import ArenaDir
    from cg_ray.artifacts.publish import atomic_directory
    from cg_ray.artifacts.rows import open_rows
    from cg_ray.benchmarks.arena import load_battles
    from cg_ray.generation.config import GenerationConfig
    from cg_ray.generation.local_ray import join_or_start_ray
    from cg_ray.labels import load_labels
    from cg_ray.pipeline.shards import ensure_free
    from cg_ray.report.comparisons import arena_view
    from cg_ray.report.html import build_report, write_view
    from cg_ray.run_outputs import publish_metrics

    cfg = config.arena
    out = Path(config.output_dir) / config.name
    ensure_free(out, overwrite)
    started = time.perf_counter()
    battles = load_battles(cfg.battles, skip_invalid=cfg.skip_invalid, split=cfg.split)
    models = select_models(battles, cfg.selection.models, cfg.selection.min_battles)
    log.info("%d battles, models of interest: %s", len(battles.battles), models)
    ratings = rate(BattleArrays.from_battles(battles.battles), cfg.ratings, cfg.tie_policy)
    join_or_start_ray(GenerationConfig(), config.ray_address)  # the arena generates nothing: default engine env

    with atomic_directory(out, overwrite=overwrite) as tmp:
        arena_dir = ArenaDir(tmp)
        write_ratings(arena_dir.ratings_dir, ratings, {"source": cfg.battles, "skipped": dict(battles.skipped)})
        activations, profiles = {}, {}
        counts = RowCounts()
        labels = None
        for model in models:
            rows = list(
                iter_model_rows(battles.battles, [model], cfg.tie_policy, benchmark=cfg.benchmark, counts=counts)
            )
            if config.max_battles_per_model:
                rows = rows[: config.max_battles_per_model]
            log.info("reading %d rows of %s (prompt + its response)", len(rows), model)
            read, d_sae = _read_rows(rows, config, reader_factory)
            run_dir = arena_dir.model(safe_name(model))
            run_dir.write(S.ROWS_FILE, read)
            if labels is None and config.labels:
                labels = load_labels(config.labels, d_sae=d_sae)
            elif labels is None:
                labels = shipped_labels(config.reader.sae, d_sae, reader_factory)
            # One open rows file per model: its metrics are computed once, for its run directory and for
            # the model-concepts table, and the head-to-head takes its activations from the same file.
            rows_file = open_rows(run_dir.rows)
            extra = {"evaluated_model": model, "arena": True}
            publish_metrics(run_dir, config.metrics, labels, extra, rows=rows_file)
            profiles[model] = run_profiles(run_dir)
            build_report(run_dir)
            activations[model] = load_model_activations(model, rows_file)
        h2h = head_to_head(battles.battles, activations, cfg.tie_policy, weighting=cfg.weighting, labels=labels)
        table = model_concepts_table(profiles)
        write_head_to_head(arena_dir, h2h, table)
        summary = {
            "config": config.model_dump(mode="json"),
            "models": {m: safe_name(m) for m in models},
            "row_counts": counts.as_dict(),
            "seconds": round(time.perf_counter() - started, 1),
        }
        arena_dir.write_json(S.ARENA_FILE, summary)
        write_view(arena_dir, S.REPORT_FILE, arena_view(arena_dir), "arena")  # the explorer's app, embedded
        _print(table, ratings)
    return out


def _read_rows(rows: list[ArenaRow], config: ArenaJobConfig, reader_factory: str) -> tuple[pa.Table, int]:
    """A model's battle rows read by the reader on Ray Data, as a rows.parquet table (with the texts)."""
    from cg_ray.pipeline.reading import read_texts

    table = pa.table(
        {
            "row_id": [r.row_id for r in rows],
            "benchmark": [r.benchmark for r in rows],
            "model": [r.model for r in rows],
            "score": pa.array([r.score for r in rows], pa.float64()),
            "prompt": [r.prompt for r in rows],
            "response": [r.response for r in rows],
            "text": [r.text for r in rows],
        }
    )
    read = read_texts(table, "text", config.reader.reader_config(), config.reader.resources, reader_factory)
    d_sae = int(read["_d_sae"][0].as_py())
    schema = (
        S.rows_schema_with_d_sae(d_sae)
        .append(pa.field("prompt", pa.string()))
        .append(pa.field("response", pa.string()))
    )
    return read.select(schema.names).cast(schema), d_sae


def _print(table: pa.Table, ratings: Any) -> None:
    print(f"{'model':<34}{'BT':>8}  {'95% CI':<20}{'Elo':>8}")
    for m in ratings.as_dict()["models"]:
        ci = f"[{m['bt_lower']:.1f}, {m['bt_upper']:.1f}]" if m["bt_lower"] is not None else ""
        print(f"{m['model']:<34}{m['bt']:>8.1f}  {ci:<20}{m['elo']:>8.1f}")
    for model in dict.fromkeys(table["model"].to_pylist()):
        for kind in ("wins", "losses"):
            entries = [r for r in table.to_pylist() if r["model"] == model and r["kind"] == kind][:5]
            print(f"{model} {kind} on: " + ("; ".join(map(_concept_text, entries)) or "nothing"))


def _concept_text(e: dict[str, Any]) -> str:
    """'4077 dollar amounts (X_model 0.31; held out -0.20 [-0.29, -0.11], confirmed)'."""
    name = f"{e['concept_id']} {(e['description'] or e['label'] or '')[:40]}".strip()
    if e["heldout_residual"] is None:
        return f"{name} (X_model {e['X_model']:.2f}; not tested held out)"
    low, high = e["heldout_residual_low"], e["heldout_residual_high"]
    interval = "" if low is None or high is None else f" [{low:+.2f}, {high:+.2f}]"
    verdict = "confirmed" if e["confirmed"] else "not confirmed"
    return f"{name} (X_model {e['X_model']:.2f}; held out {e['heldout_residual']:+.2f}{interval}, {verdict})"
