"""`cg-ray sensitivity` as a library call: plan it (rows × readers, the time it will take), re-read the run's
rows with each other reader (resumable: a reader whose run is already there is kept), compare, and publish
sensitivity/ through the run directory's one writer (`RunDir.update`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.activations.config import DEFAULT_READER_FACTORY
from cg_ray.activations.recorded import reader_of_run
from cg_ray.artifacts.layout import SENSITIVITY_FINDINGS, SENSITIVITY_PAIRS, SENSITIVITY_SUMMARY, RunDir
from cg_ray.artifacts.rows import open_rows
from cg_ray.config import MetricsConfig
from cg_ray.describe.rundir import ReadSettings, open_run, read_settings
from cg_ray.errors import ConfigError, InputError
from cg_ray.sensitivity.compare import RULE, compare_finding, findings_table, own_estimate
from cg_ray.sensitivity.config import SensitivityConfig
from cg_ray.sensitivity.findings import SLICE, ReaderFindings, read_findings
from cg_ray.sensitivity.pairs import ReaderSide, pair_row, side_rows
from cg_ray.sensitivity.reread import OtherRun, reread, sae_layer

log = logging.getLogger(__name__)

# Tokens a second the reader reads on a CPU when the run does not say (2-core AMD EPYC with native bf16,
# `cg-ray extract` of BBH / BBQ / GSM8K rows: 1,288-1,571 tokens/s).
FALLBACK_TOKENS_PER_S = 1300.0


@dataclass(frozen=True)
class SensitivityPlan:
    run: RunDir
    settings: ReadSettings
    own: str  # the run's reader: a shipped name or its SAE spec
    readers: dict[str, str]  # other reader name -> its SAE spec
    metrics: MetricsConfig
    model: str | None  # the evaluated model the run keeps, when its rows hold several
    rows: int
    tokens: int
    tokens_per_s: float
    done: list[str]  # readers whose run is already there (resumed, not re-read)

    def describe(self) -> str:
        todo = [r for r in self.readers if r not in self.done]
        eta = self.tokens * len(todo) / self.tokens_per_s
        kept = f"; kept from before: {', '.join(self.done)}" if self.done else ""
        return (
            f"{self.rows:,} rows ({self.tokens:,} tokens) x {len(todo)} reader(s) to read "
            f"({', '.join(todo) or 'none'}){kept}: about {eta / 60:.1f} min of reading at {self.tokens_per_s:,.0f} "
            f"tokens/s, then judging and comparing (seconds); the run's own reader: {self.own}"
        )


def plan_sensitivity(config: SensitivityConfig) -> SensitivityPlan:
    """Everything checked before any reading: the run, its reader, each other reader."""
    run = RunDir(config.run)
    run.require(S.ROWS_FILE, S.SUMMARY_FILE, hint="run `cg-ray run` or `cg-ray metrics` first")
    summary = run.read_summary()
    if config.reader_factory == DEFAULT_READER_FACTORY:
        from cg_ray.activations.saes.shipped import shipped_reader

        for name in config.readers:
            shipped_reader(name)  # unknown or not installed: a clear error naming the known ones
    settings = _settings(run, config)
    own = str(settings.reader.get("sae", "default"))
    readers = {name: _sae_of(name, settings, config) for name in config.readers}
    if own in readers:
        raise ConfigError(f"reader {own!r} is the run's own reader: name another (cg-ray sae list)")
    rows = open_rows(run.rows)
    if rows.n_rows == 0:
        raise InputError("has no rows to re-read", path=str(run.rows))
    tokens = int(pc.sum(pq.read_table(run.rows, columns=[S.N_TOKENS])[S.N_TOKENS]).as_py() or 0)
    done = [name for name, sae in readers.items() if not config.fresh and _is_done(run, name, sae)]
    return SensitivityPlan(
        run,
        settings,
        own,
        readers,
        MetricsConfig.model_validate(summary.get("config") or {}),
        summary.get("evaluated_model") or summary.get("model_filter"),
        rows.n_rows,
        tokens,
        _tokens_per_s(run),
        done,
    )


def _settings(run: RunDir, config: SensitivityConfig) -> ReadSettings:
    if config.reader_factory == DEFAULT_READER_FACTORY:
        found = read_settings(open_run(run))
        if isinstance(found, str):
            raise InputError(f"cannot re-read its rows: {found}", path=str(run.path))
        return found
    recorded = reader_of_run(run.path, run.read_summary().get("rows_file"))  # a stand-in reader (tests)
    if recorded.unknown is not None or recorded.config is None:
        raise InputError(f"cannot re-read its rows: {recorded.unknown or 'no reader settings'}", path=str(run.path))
    return ReadSettings(dict(recorded.config), recorded.text or "prompt", recorded.chat_template, str(recorded.source))


def _sae_of(name: str, settings: ReadSettings, config: SensitivityConfig) -> str:
    """A reader name's SAE spec; a shipped reader must read the run's own model."""
    if config.reader_factory != DEFAULT_READER_FACTORY:
        return name  # a stand-in reader: the name is its spec
    from cg_ray.catalog import DEFAULT_MODEL

    model = str(settings.reader.get("model") or DEFAULT_MODEL)
    if model != DEFAULT_MODEL and not model.rstrip("/").endswith(DEFAULT_MODEL):
        raise ConfigError(f"reader {name!r} reads {DEFAULT_MODEL}; this run's rows were read by {model}")
    return name


def _is_done(run: RunDir, name: str, sae: str) -> bool:
    other = run.sensitivity_reader(name)
    manifest = other.read_json_if_present(S.MANIFEST_FILE) if other.has(S.SUMMARY_FILE) else None
    return bool(manifest) and ((manifest or {}).get("config") or {}).get("reader", {}).get("sae") == sae


def _tokens_per_s(run: RunDir) -> float:
    """The run's own reading rate when its manifest has it (tokens read / reading seconds), else the fallback."""
    manifest = run.read_json_if_present(S.MANIFEST_FILE) or {}
    reader = manifest.get("reader") or {}
    tokens, seconds = reader.get("tokens_read"), reader.get("seconds")
    if isinstance(tokens, int | float) and isinstance(seconds, int | float) and seconds > 0:
        return float(tokens) / float(seconds)
    return FALLBACK_TOKENS_PER_S


def run_sensitivity(config: SensitivityConfig) -> dict[str, Any]:
    """Re-read, judge, compare and publish; returns sensitivity/summary.json as written."""
    started = time.perf_counter()
    plan = plan_sensitivity(config)
    log.info("sensitivity: %s", plan.describe())
    if any(name not in plan.done for name in plan.readers):
        _init_ray(config)
    others = [_other_run(plan, name, sae, config) for name, sae in plan.readers.items()]
    run, model = plan.run, plan.model
    rows = open_rows(run.rows)
    mine, own_plan = read_findings(run, rows, model, plan.metrics)
    estimates = [own_estimate(f, own_plan) for f in mine]  # the run's own, whichever reader
    own_side = ReaderSide(plan.own, _folder(plan.own, config), sae_layer(plan.own, config), run)
    own_rows = side_rows(own_side, model, config.top_concepts)  # read once for every pair
    found: list[dict[str, object]] = []
    pairs: list[dict[str, object]] = []
    entries = []
    for other in others:
        theirs = ReaderFindings.open(other.dir, model, plan.metrics, candidates=True)
        here = [compare_finding(f, other.name, theirs, e) for f, e in zip(mine, estimates, strict=True)]
        found += here
        side = ReaderSide(other.name, _folder(other.sae, config), other.layer, other.dir)
        read = side_rows(side, model, config.top_concepts)
        pairs.append(pair_row(own_side, side, own_rows, read, (len(mine), len(theirs.confirmed))))
        statuses = _counts(r for r in here if r["kind"] != SLICE)  # slices: metadata, found by any reader
        entries.append(
            {
                "name": other.name,
                "sae": other.sae,
                "layer": other.layer,
                "d_sae": other.d_sae,
                "rows": plan.rows,
                "seconds": round(other.seconds, 3),
                "resumed": other.resumed,
                "statuses": statuses,
                "slices": _counts(r for r in here if r["kind"] == SLICE),
            }
        )
        counted = ", ".join(f"{n} {s}" for s, n in statuses.items())
        log.info("reader %s: failure modes and concepts %s (on the same rows: not replication)", other.name, counted)
    from cg_ray.sensitivity.tables import PAIRS_SCHEMA

    summary = {
        "run": str(run.path),
        "reader": {"name": plan.own, "sae": plan.own, "layer": own_side.layer, "d_sae": rows.d_sae},
        "readers": entries,
        "rule": RULE,
        "seconds": round(time.perf_counter() - started, 3),
    }
    run.update(
        "sensitivity",
        {
            SENSITIVITY_FINDINGS: findings_table(found),
            SENSITIVITY_PAIRS: pa.Table.from_pylist(pairs, schema=PAIRS_SCHEMA),
            SENSITIVITY_SUMMARY: summary,
        },
        {"readers": list(plan.readers)},
    )
    return summary


def _counts(rows: Iterable[dict[str, object]]) -> dict[str, int]:
    """How many findings have each status (found / partly / not found)."""
    statuses = [r["status"] for r in rows]
    return {s: statuses.count(s) for s in S.READER_STATUSES}


def _other_run(plan: SensitivityPlan, name: str, sae: str, config: SensitivityConfig) -> OtherRun:
    if name in plan.done:
        other = plan.run.sensitivity_reader(name)
        manifest = other.read_json(S.MANIFEST_FILE)
        d_sae = int((manifest.get("reader") or {}).get("d_sae") or open_rows(other.rows).d_sae)
        seconds = float(manifest.get("seconds") or 0.0)
        log.info("reader %s: its run is already there (pass --fresh to read again)", name)
        return OtherRun(name, other, sae, sae_layer(sae, config), d_sae, seconds, resumed=True)
    return reread(plan.run, name, sae, plan.settings, plan.metrics, plan.model, config)


def _folder(sae: str, config: SensitivityConfig) -> Any:
    """The SAE's folder (its decoder) for a shipped reader; None otherwise."""
    from cg_ray.activations.saes.shipped import SHIPPED_READERS

    if config.reader_factory != DEFAULT_READER_FACTORY or sae not in SHIPPED_READERS:
        return None
    return SHIPPED_READERS[sae].directory


def _init_ray(config: SensitivityConfig) -> None:
    from cg_ray.generation.config import GenerationConfig
    from cg_ray.generation.local_ray import join_or_start_ray

    join_or_start_ray(GenerationConfig(), config.ray_address)
