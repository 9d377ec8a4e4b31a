"""`cg-ray run CONFIG`: the whole CG suite as one resumable Ray Data job.

load (driver) → generate (vLLM actors; rows with a score or response skip it) → judge → score (tasks) →
read activations (reader actors) → the driver collects finished shards → rows.parquet → metrics, manifest,
report → the run directory is published atomically. Killed half-way, `--resume` recomputes only the shards
that were not finished; the published artifacts equal those of an uninterrupted run.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.activations.saes.labels import shipped_labels
from cg_ray.artifacts.contract import RunManifest, write_document
from cg_ray.artifacts.layout import RunDir
from cg_ray.artifacts.publish import atomic_directory
from cg_ray.generation.local_ray import start_local_ray
from cg_ray.generation.vllm import cpu_engine_env, generation_dtype
from cg_ray.hardware import hardware_info
from cg_ray.pipeline.config import RunConfig
from cg_ray.pipeline.describe_step import check_explainer, describe_published_run
from cg_ray.pipeline.manifest import StageTimer, build_manifest
from cg_ray.pipeline.reader_stage import (
    ACTOR_COLUMN,
    D_SAE_COLUMN,
    DEFAULT_READER_FACTORY,
    NODE_COLUMN,
    ReaderStage,
)
from cg_ray.pipeline.shards import (
    ORDER_COLUMN,
    SHARD_COLUMN,
    ShardCollector,
    ShardPlan,
    ShardStore,
    ensure_free,
    fingerprint,
    shard_assignment,
    work_dir_for,
)

log = logging.getLogger(__name__)

READER_TEXT = "_reader_text"
TEXT_COLUMNS = ("prompt", "response")


@dataclass(frozen=True)
class RunOptions:
    resume: bool = False
    overwrite: bool = False
    shard_rows: int = 64
    reader_factory: str = DEFAULT_READER_FACTORY  # tests swap in a fast fake behind the same interface
    report: bool = True


def output_schema(d_sae: int) -> pa.Schema:
    schema = S.rows_schema_with_d_sae(d_sae)
    for name in TEXT_COLUMNS:  # kept for example rows in the report and the explorer
        schema = schema.append(pa.field(name, pa.string()))
    schema = schema.append(pa.field("score_status", pa.string()))
    return schema.append(S.METADATA_FIELD)  # the loaders' metadata (JSON object string), for `cg-ray describe`


def reader_text(mode: str) -> Any:
    """Batch function composing the text the reader reads, as the config says."""

    def compose(batch: pa.Table) -> pa.Table:
        prompts = batch.column("prompt").to_pylist()
        responses = batch.column("response").to_pylist() if "response" in batch.column_names else [None] * len(prompts)
        if mode == "prompt":
            texts = prompts
        elif mode == "response":
            texts = [r or "" for r in responses]
        else:  # prompt_response
            texts = ["\n\n".join(t for t in (p, r) if t) for p, r in zip(prompts, responses, strict=True)]
        return batch.append_column(READER_TEXT, pa.array(texts, pa.string()))

    return compose


def init_ray(config: RunConfig) -> None:
    import ray

    if ray.is_initialized():
        return
    if config.ray_address or os.environ.get("RAY_ADDRESS"):
        ray.init(address=config.ray_address or os.environ["RAY_ADDRESS"], log_to_driver=True)
        return
    start_local_ray(config.generation)


def _pending_dataset(table: pa.Table, plan: ShardPlan, positions: list[int]) -> Any:
    import ray.data

    sub = table.take(pa.array(positions, pa.int64()))
    blocks = max(1, min(len(positions) // max(plan.shard_rows, 1), 64))
    return ray.data.from_arrow(sub).repartition(blocks)


def _locator(table: pa.Table, plan: ShardPlan) -> Any:
    """Tags output rows with their input position and shard. Stages keep `row_id` (unique in a suite) but
    may drop other columns, so the position is looked up here rather than carried through the graph."""
    position_of = {row_id: i for i, row_id in enumerate(table["row_id"].to_pylist())}

    def locate(batch: pa.Table) -> pa.Table:
        positions = [position_of[r] for r in batch["row_id"].to_pylist()]
        batch = batch.append_column(ORDER_COLUMN, pa.array(positions, pa.int64()))
        return batch.append_column(SHARD_COLUMN, pa.array([plan.shard_of(i) for i in positions], pa.int32()))

    return locate


def _graph(ds: Any, config: RunConfig, options: RunOptions, needs_judge: bool) -> Any:
    import ray.data

    from cg_ray.generation import generate_responses
    from cg_ray.pipeline.judge_pass import _no_judge, judge_dataset
    from cg_ray.scoring.apply import score_dataset

    ds = generate_responses(ds, config.generation)
    if needs_judge:
        # judge_dataset counts its judge rows, which executes the generation above: keep that result.
        ds = judge_dataset(ds.materialize(), config.judge_config())
    else:
        ds = ds.map_batches(_no_judge, batch_format="pyarrow")
    # Small scoring batches keep blocks small downstream, so finished shards stream back (and persist) early.
    ds = score_dataset(
        ds, {b.benchmark: b.scorer_options for b in config.benchmarks if b.benchmark}, batch_size=options.shard_rows
    )
    ds = ds.map_batches(reader_text(config.reader.text), batch_format="pyarrow")
    res = config.reader.resources
    reader_config = config.reader.model_dump(mode="json", exclude={"text", "resources"})
    return ds.map_batches(
        ReaderStage,
        fn_constructor_kwargs={
            "reader_config": reader_config,
            "text_column": READER_TEXT,
            "factory": options.reader_factory,
        },
        compute=ray.data.ActorPoolStrategy(min_size=res.min_actors, max_size=res.max_actors),
        num_cpus=res.num_cpus,
        num_gpus=res.num_gpus,
        batch_size=res.batch_size,
        batch_format="pyarrow",
    )


def run(config: RunConfig, options: RunOptions = RunOptions(), config_source: str | None = None) -> Path:
    from cg_ray.benchmarks import load_benchmarks
    from cg_ray.benchmarks.rows import rows_table
    from cg_ray.scoring.apply import check_parsed, stats_from_rows

    out = Path(config.output_dir) / config.name
    ensure_free(out, options.overwrite)
    check_explainer(config.explain)
    timer = StageTimer()

    timer.start("load")
    table = rows_table(load_benchmarks(config.benchmarks))
    timer.stop("load", table.num_rows)

    keys = (f"{b}\0{r}" for b, r in zip(table["benchmark"].to_pylist(), table["row_id"].to_pylist(), strict=True))
    resolved = config.model_dump(mode="json")
    plan = ShardPlan(table.num_rows, options.shard_rows, fingerprint(resolved, keys))
    store = ShardStore.open(work_dir_for(out), plan, resume=options.resume)
    done = store.done()
    positions = shard_assignment(plan, done)
    log.info(
        "%d rows in %d shards; %d finished earlier, %d rows to compute",
        plan.n_rows,
        plan.n_shards,
        len(done),
        len(positions),
    )

    timer.start("generate+score+read")
    ray_data_stats = _compute_shards(table, plan, store, positions, config, options)
    timer.stop("generate+score+read", len(positions))

    facts = ShardFacts.read(store)  # one pass over the shards' small columns; the rows are read by assemble
    assembled = store.assemble(output_schema(facts.d_sae))
    scoring = stats_from_rows(facts.scoring_rows)
    check_parsed(scoring)  # a scorer that parsed nothing fails the run before anything is published

    timer.start("metrics")
    with atomic_directory(out, overwrite=options.overwrite) as tmp:
        pq.write_table(assembled, tmp / S.ROWS_FILE)
        summary = _metrics(tmp, config, options.reader_factory)
        timer.stop("metrics", assembled.num_rows)
        manifest = build_manifest(
            config=resolved,
            reader={"factory": options.reader_factory, "d_sae": facts.d_sae, "actors": facts.reader_actors()},
            timer=timer,
            counts={
                "rows": assembled.num_rows,
                "shards": plan.n_shards,
                "shards_resumed": len(done),
                "scoring": {k: v.as_dict() for k, v in scoring.items()},
                "rows_per_reader_node": facts.rows_per_node(),
                "rows_without_tokens": int(pc.sum(pc.equal(assembled[S.N_TOKENS], 0)).as_py() or 0),
            },
            extra=_manifest_extra(config, plan, ray_data_stats, config_source),
        )
        write_document(RunDir(tmp).manifest, RunManifest, manifest, default=str)
        if options.report:
            from cg_ray.report.html import build_report

            build_report(tmp)
    store.remove()
    timer.start("describe")  # after publishing: not in the manifest's stages, printed below
    describe_published_run(out, config.describe, config.explain, config.seed)
    timer.stop("describe", assembled.num_rows)
    print(timer.table())
    median = summary["suite"]["median_X_model"]
    print(
        f"{summary['n_rows']:,} rows, {summary['suite']['n_benchmarks']} benchmarks -> {out} "
        f"(median X_model {'—' if median is None else f'{median:.3f}'}, {summary['suite']['n_model_gaps']} model gaps)"
    )
    return out


def _compute_shards(
    table: pa.Table, plan: ShardPlan, store: ShardStore, positions: list[int], config: RunConfig, options: RunOptions
) -> str:
    """Stream the unfinished shards through the Ray Data graph into the store; Ray Data's per-stage stats."""
    if not positions:
        return "(nothing to compute: every shard was finished earlier)"
    init_ray(config)
    collector = ShardCollector(store)
    locate = _locator(table, plan)
    needs_judge = "judge" in set(table["scorer"].to_pylist())
    output = _graph(_pending_dataset(table, plan, positions), config, options, needs_judge)
    for batch in output.iter_batches(batch_format="pyarrow", batch_size=None):
        for shard in collector.add(locate(batch)):
            log.info("shard %d/%d finished", shard + 1, plan.n_shards)
    if collector.pending:
        raise RuntimeError(f"the stream ended with unfinished shards {collector.pending}")
    stats: str = output.stats()  # per-operator wall time and rows: the per-stage view of a streamed run
    log.info("Ray Data stages:\n%s", stats)
    return stats


def _manifest_extra(
    config: RunConfig, plan: ShardPlan, ray_data_stats: str, config_source: str | None
) -> dict[str, Any]:
    return {
        "config_source": config_source,
        "seed": config.seed,
        "fingerprint": plan.fingerprint,
        "ray_data_stats": ray_data_stats,
        "hardware": hardware_info().as_dict(),  # the driver's; each reader actor's is under reader
        "generation_engine": {
            "dtype": generation_dtype(config.generation),
            "env": {k: os.environ.get(k) for k in cpu_engine_env(config.generation)},
        },
    }


@dataclass(frozen=True)
class ShardFacts:
    """The finished shards' bookkeeping columns (SAE width, scoring status, reader node and actor)."""

    table: pa.Table

    @classmethod
    def read(cls, store: ShardStore) -> ShardFacts:
        columns = ["benchmark", "scorer", "score_status", D_SAE_COLUMN, NODE_COLUMN, ACTOR_COLUMN]
        shards = (pq.read_table(store.path(s), columns=columns) for s in range(store.plan.n_shards))
        return cls(pa.concat_tables(shards))

    @property
    def d_sae(self) -> int:
        return int(self.table.column(D_SAE_COLUMN)[0].as_py())

    @property
    def scoring_rows(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self.table.select(["benchmark", "scorer", "score_status"]).to_pylist()
        return rows

    def rows_per_node(self) -> dict[str, int]:
        counts = pc.value_counts(self.table.column(NODE_COLUMN)).to_pylist()
        return {c["values"]: int(c["counts"]) for c in counts}

    def reader_actors(self) -> list[dict[str, Any]]:
        """The distinct reader actors of the run (resolved dtype, device, hardware)."""
        values = pc.unique(self.table.column(ACTOR_COLUMN)).to_pylist()
        return [json.loads(v) for v in sorted(v for v in values if v)]


def _metrics(run_dir: Path, config: RunConfig, factory: str) -> dict[str, Any]:
    from cg_ray.artifacts.rows import open_rows
    from cg_ray.artifacts.run_dir import publish_metrics

    rows = open_rows(run_dir / S.ROWS_FILE)
    labels = shipped_labels(config.reader.sae, rows.d_sae, factory)
    extra = {"rows_file": S.ROWS_FILE, "evaluated_model": config.generation.model}
    return publish_metrics(run_dir, config.metrics, labels, extra, rows=rows).summary


__all__ = ["RunOptions", "run"]
