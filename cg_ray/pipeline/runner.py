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
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.activations.saes.labels import shipped_labels
from cg_ray.artifacts.layout import RunDir
from cg_ray.artifacts.publish import atomic_directory
from cg_ray.generation.local_ray import join_or_start_ray
from cg_ray.generation.vllm import cpu_engine_env, generation_dtype
from cg_ray.hardware import hardware_info
from cg_ray.pipeline.cluster_fit import Cluster, FitPlan, fit
from cg_ray.pipeline.config import RunConfig
from cg_ray.pipeline.describe_step import check_explainer, describe_published_run
from cg_ray.pipeline.inputs import INPUT_DIR, StagedInput
from cg_ray.pipeline.manifest import StageTimer, build_manifest
from cg_ray.pipeline.reader_stage import (
    ACTOR_COLUMN,
    D_SAE_COLUMN,
    DEFAULT_READER_FACTORY,
    NODE_COLUMN,
    map_reader_stage,
    planned_tokens,
)
from cg_ray.pipeline.shards import (
    ORDER_COLUMN,
    SHARD_COLUMN,
    ShardCollector,
    ShardPlan,
    ShardStore,
    ensure_free,
    fingerprint,
    pending_shards,
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
    join_or_start_ray(config.generation, config.ray_address)


def fit_to_cluster(config: RunConfig) -> FitPlan:
    """Connect (or start the private cluster) and fit the pools to it; refuses a cluster too small, before
    anything is written."""
    init_ray(config)
    plan = fit(config, Cluster.of_ray())
    log.info("cluster fit: %s", plan.as_dict())
    return plan


def _pending_dataset(staged: StagedInput, pending: list[int]) -> Any:
    """The pending shards' staged files, read by tasks pinned to the driver's node (whose disk holds them).
    Not `read_parquet`: since Ray 2.60 it lists files with footer-reader actors placed SPREAD over the
    cluster, which ignore the node selector, cannot see the driver's disk on another node, and died with
    their node when an autoscaler retired it. 0 CPUs: they fit a head kept free of tasks."""
    import ray
    import ray.data

    # A shard a block (up to 64 blocks), each read by its own task, so finished shards stream back early.
    # No repartition after the read: a split repartition is a barrier run inside Ray Data's scheduling loop
    # on tasks of one CPU each, and it hung a run whose CPUs the stages' actors held (cg_ray/io/blocks.py).
    blocks = max(1, min(len(pending), 64))
    paths = ray.data.from_items([{"path": str(staged.path(s).resolve())} for s in pending], override_num_blocks=blocks)
    return paths.map_batches(
        _read_staged_shards,
        batch_size=None,  # the whole block: its shards' rows leave as one block
        batch_format="pyarrow",
        num_cpus=0,
        label_selector={"ray.io/node-id": ray.get_runtime_context().get_node_id()},
    )


def _read_staged_shards(batch: pa.Table) -> pa.Table:
    return pa.concat_tables([pq.read_table(path) for path in batch["path"].to_pylist()])


def _locator(staged: StagedInput, plan: ShardPlan) -> Any:
    """Tags output rows with their input position and shard. Stages keep `row_id` (unique in a suite) but
    may drop other columns, so the position is looked up here rather than carried through the graph."""

    def locate(batch: pa.Table) -> pa.Table:
        positions = staged.index.locate(batch["row_id"].to_pylist())
        batch = batch.append_column(ORDER_COLUMN, pa.array(positions, pa.int64()))
        return batch.append_column(SHARD_COLUMN, pa.array(positions // plan.shard_rows, pa.int32()))

    return locate


def reader_characters(staged: StagedInput, shards: list[int], mode: str) -> int:
    """Characters of the text the reader will read in `shards`, as far as the staged input holds it: the
    prompts, and the responses given with the rows. Responses still to be generated are not known yet and
    count nothing, so the estimate errs low (toward not compiling, as before the estimate existed)."""
    columns = {"prompt": ["prompt"], "response": ["response"]}.get(mode, ["prompt", "response"])
    total = 0
    for shard in shards:
        table = pq.read_table(staged.path(shard), columns=columns)
        total += sum(pc.sum(pc.utf8_length(table[c])).as_py() or 0 for c in columns)
    return total


def _graph(ds: Any, config: RunConfig, options: RunOptions, needs_judge: bool, planned: int | None = None) -> Any:
    from cg_ray.generation import generate_responses
    from cg_ray.pipeline.judge_pass import judge_dataset, without_judge
    from cg_ray.scoring.apply import score_dataset

    ds = generate_responses(ds, config.generation)
    if needs_judge:  # from the input's scorers: the generated rows stream on, uncounted
        ds = judge_dataset(ds, config.judge_config())
    else:
        ds = ds.map_batches(without_judge, batch_format="pyarrow")
    # Small scoring batches keep blocks small downstream, so finished shards stream back (and persist) early.
    ds = score_dataset(
        ds, {b.benchmark: b.scorer_options for b in config.benchmarks if b.benchmark}, batch_size=options.shard_rows
    )
    ds = ds.map_batches(reader_text(config.reader.text), batch_format="pyarrow")
    return map_reader_stage(
        ds,
        config.reader.resources,
        {
            "reader_config": config.reader.reader_config(),
            "text_column": READER_TEXT,
            "factory": options.reader_factory,
            "planned_tokens": planned,
        },
    )


def run(config: RunConfig, options: RunOptions = RunOptions(), config_source: str | None = None) -> Path:
    from cg_ray.scoring.apply import check_parsed, stats_from_counts

    out = Path(config.output_dir) / config.name
    fitted = fit_to_cluster(config)  # a cluster too small is refused here, before anything is written
    ensure_free(out, options.overwrite)
    check_explainer(config.explain)
    timer = StageTimer()

    timer.start("load")
    staged = _stage(config, out, options.shard_rows)
    timer.stop("load", staged.n_rows)

    resolved = config.model_dump(mode="json")
    plan = ShardPlan(staged.n_rows, options.shard_rows, fingerprint(resolved, staged.keys()))
    try:
        store = ShardStore.open(work_dir_for(out), plan, resume=options.resume)
    except BaseException:
        shutil.rmtree(staged.dir, ignore_errors=True)
        raise
    staged.move_to(store.dir / INPUT_DIR)
    done = store.done()
    pending = pending_shards(plan, done)
    n_pending = sum(plan.shard_size(s) for s in pending)
    log.info(
        "%d rows in %d shards; %d finished earlier, %d rows to compute",
        plan.n_rows,
        plan.n_shards,
        len(done),
        n_pending,
    )

    timer.start("generate+score+read")
    # The pools as they fit this cluster; the fingerprint and the manifest's config stay the config's own.
    ray_data_stats = _compute_shards(staged, plan, store, pending, fitted.apply(config), options)
    timer.stop("generate+score+read", n_pending)

    d_sae = int(pq.read_table(store.path(0), columns=[D_SAE_COLUMN])[D_SAE_COLUMN][0].as_py())
    facts = ShardFacts(d_sae)
    timer.start("metrics")
    with atomic_directory(out, overwrite=options.overwrite) as tmp:
        # One pass over the shards, streaming: rows.parquet, and the counts below (facts.observe).
        n_rows = store.assemble(output_schema(d_sae), RunDir(tmp).rows, observe=facts.observe)
        scoring = stats_from_counts(facts.scoring_counts())
        check_parsed(scoring)  # a scorer that parsed nothing fails the run before anything is published
        summary = _metrics(tmp, config, options.reader_factory)
        timer.stop("metrics", n_rows)
        manifest = build_manifest(
            config=resolved,
            reader={"factory": options.reader_factory, "d_sae": facts.d_sae, "actors": facts.reader_actors()},
            timer=timer,
            counts={
                "rows": n_rows,
                "shards": plan.n_shards,
                "shards_resumed": len(done),
                "scoring": {k: v.as_dict() for k, v in scoring.items()},
                "rows_per_reader_node": dict(facts.nodes),
                "rows_without_tokens": facts.without_tokens,
            },
            extra={**_manifest_extra(config, plan, ray_data_stats, config_source), "cluster_fit": fitted.as_dict()},
        )
        RunDir(tmp).write_json(S.MANIFEST_FILE, manifest, default=str)
        if options.report:
            from cg_ray.report.html import build_report

            build_report(RunDir(tmp))
    store.remove()
    timer.start("describe")  # after publishing: not in the manifest's stages, printed below
    describe_published_run(out, config.describe, config.explain, config.seed)
    timer.stop("describe", n_rows)
    print(timer.table())
    median = summary["suite"]["median_X_model"]
    print(
        f"{summary['n_rows']:,} rows, {summary['suite']['n_benchmarks']} benchmarks -> {out} "
        f"(median X_model {'—' if median is None else f'{median:.3f}'}; {summary['suite']['n_model_gaps']} model gaps: "
        "X_model < ε in sample, untested)"
    )
    return out


def _stage(config: RunConfig, out: Path, shard_rows: int) -> StagedInput:
    """The input rows on disk beside the run (moved into the work directory once the plan is checked)."""
    from cg_ray.pipeline.inputs import stage_inputs

    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.input-", dir=out.parent))
    try:
        return stage_inputs(config.benchmarks, staging, shard_rows)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _compute_shards(
    staged: StagedInput, plan: ShardPlan, store: ShardStore, pending: list[int], config: RunConfig, options: RunOptions
) -> str:
    """Stream the unfinished shards through the Ray Data graph into the store; Ray Data's per-stage stats."""
    if not pending:
        return "(nothing to compute: every shard was finished earlier)"
    init_ray(config)
    collector = ShardCollector(store)
    locate = _locator(staged, plan)
    needs_judge = "judge" in staged.scorers
    # One reader actor's share of the pending rows' tokens, for `compile: auto` (reader_stage.planned_tokens).
    planned = planned_tokens(reader_characters(staged, pending, config.reader.text), config.reader.resources.max_actors)
    output = _graph(_pending_dataset(staged, pending), config, options, needs_judge, planned)
    for batch in output.iter_batches(batch_format="pyarrow", batch_size=None):
        for shard in collector.add(locate(batch)):
            log.info("shard %d/%d finished", shard + 1, plan.n_shards)
    if collector.pending:
        raise RuntimeError(f"the stream ended with unfinished shards {collector.pending}")
    stats: str = output.stats()  # per-operator wall time and rows: the per-stage view of a streamed run
    # 200-odd lines on a small run: kept in the manifest, printed with `cg-ray -v`
    log.info("Ray Data's per-operator stats: manifest.json -> ray_data_stats")
    log.debug("Ray Data stages:\n%s", stats)
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


class ShardFacts:
    """Counts over the finished shards' bookkeeping columns (scoring status, reader node and actor), taken
    shard by shard as rows.parquet is assembled. Dicts keep first-seen order, as a pass over all rows would."""

    def __init__(self, d_sae: int) -> None:
        self.d_sae = d_sae
        self.scoring: dict[tuple[str, str, str], int] = {}
        self.nodes: dict[str, int] = {}
        self.actors: set[str] = set()
        self.without_tokens = 0
        self.shards = 0

    def observe(self, shard: pa.Table) -> None:
        widths = pc.unique(shard[D_SAE_COLUMN]).to_pylist()
        if widths and widths != [self.d_sae]:
            raise RuntimeError(f"shard {self.shards} was read with SAE width {widths}, the run with {self.d_sae}")
        keys = ["benchmark", "scorer", "score_status"]
        for rec in shard.select(keys).group_by(keys, use_threads=False).aggregate([([], "count_all")]).to_pylist():
            key = (rec["benchmark"], rec["scorer"], rec["score_status"])
            self.scoring[key] = self.scoring.get(key, 0) + rec["count_all"]
        for c in pc.value_counts(shard[NODE_COLUMN]).to_pylist():
            self.nodes[c["values"]] = self.nodes.get(c["values"], 0) + int(c["counts"])
        self.actors.update(v for v in pc.unique(shard[ACTOR_COLUMN]).to_pylist() if v)
        self.without_tokens += int(pc.sum(pc.equal(shard[S.N_TOKENS], 0)).as_py() or 0)
        self.shards += 1

    def scoring_counts(self) -> list[dict[str, Any]]:
        return [{"benchmark": b, "scorer": s, "score_status": st, "count": n} for (b, s, st), n in self.scoring.items()]

    def reader_actors(self) -> list[dict[str, Any]]:
        """The distinct reader actors of the run (resolved dtype, device, hardware)."""
        return [json.loads(v) for v in sorted(self.actors)]


def _metrics(run_dir: Path, config: RunConfig, factory: str) -> dict[str, Any]:
    from cg_ray.artifacts.rows import open_rows
    from cg_ray.run_outputs import publish_metrics

    run = RunDir(run_dir)
    rows = open_rows(run.rows)
    labels = shipped_labels(config.reader.sae, rows.d_sae, factory)
    extra = {"rows_file": S.ROWS_FILE, "evaluated_model": config.generation.model}
    return publish_metrics(run, config.metrics, labels, extra, rows=rows).summary


__all__ = ["RunOptions", "run"]
