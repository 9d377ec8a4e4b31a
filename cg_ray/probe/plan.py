"""What a probe will do, decided and printed before its first request: the gaps, who writes each gap's items,
and the requests and tokens that will take (`cg-ray probe --dry-run` prints only this)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cg_ray import schemas as S
from cg_ray.activations.config import ReaderConfig
from cg_ray.artifacts.layout import RunDir
from cg_ray.errors import ConfigError
from cg_ray.generation.config import GenerationConfig
from cg_ray.probe.config import ProbeConfig
from cg_ray.probe.families import FamilyGenerator, match_family
from cg_ray.probe.gaps import RunGaps, read_gaps
from cg_ray.probe.items import Gap

CHARS_PER_TOKEN = 4  # for the plan's token estimate only
WRITER_OVERDRAW = 1.5  # LLMGenerator's default: requests per pair wanted, at most
PAIR_PROMPT_CHARS = 1800  # a pair request: instructions, the gap's words and three examples
PAIR_ANSWER_TOKENS = 200


@dataclass(frozen=True)
class GapWriter:
    """Who writes a gap's pairs, decided once by the plan (`writer_of`) and followed by the run."""

    llm: bool  # the LLM writer writes them
    # The family that writes them (no LLM writer, or --families only), or takes over where the LLM writer wrote
    # no pairs or (--families fallback) could not express the gap; None: no family fits, or --families never.
    family: FamilyGenerator | None = None

    @property
    def name(self) -> str:
        """As the plan prints it: "writer" (the LLM), the family's generator name, or "" (nothing can)."""
        return "writer" if self.llm else (self.family.name if self.family else "")


@dataclass(frozen=True)
class ProbePlan:
    run: Path
    gaps: list[Gap]
    writers: dict[str, GapWriter]  # gap id -> who writes its pairs
    rules: dict[str, dict[int, float]]  # gap id -> the reader's firing rule
    reader: ReaderConfig
    model: GenerationConfig
    config: ProbeConfig
    ledger_dir: Path | None = None  # the probe ledger's folder; None: $CG_RAY_LEDGER or the default (ledger.py)

    def estimate(self) -> dict[str, int]:
        """Requests and tokens at most (before checks drop anything)."""
        written = sum(w.llm for w in self.writers.values())
        pairs = self.config.pairs
        writer_requests = int(written * pairs * WRITER_OVERDRAW)
        checks = writer_requests * 2 if self.config.reference_check == "answer" else 0
        answered = 2 * pairs * sum(bool(w.name) for w in self.writers.values())
        return {
            "writer_requests": writer_requests,
            "checker_requests": checks,
            "model_requests": answered,
            "writer_tokens": writer_requests * (PAIR_PROMPT_CHARS // CHARS_PER_TOKEN + PAIR_ANSWER_TOKENS),
            "model_tokens": answered * (self.model.sampling.max_tokens + 40),
        }


def _manifest_config(run: Path) -> dict[str, Any]:
    manifest = RunDir(run).read_json_if_present(S.MANIFEST_FILE) or {}
    return dict(manifest.get("config") or {})


def run_reader(run: Path, config: ProbeConfig | ReaderConfig | None) -> ReaderConfig:
    """The reader named in the config (a probe's, or a reader's own config), else the one the run read its rows
    with, else the default."""
    named = config.reader if isinstance(config, ProbeConfig) else config
    if named is not None:
        return named
    saved = _manifest_config(run).get("reader")
    if not saved:
        return ReaderConfig()
    return ReaderConfig.model_validate({k: v for k, v in saved.items() if k in ReaderConfig.model_fields})


class NoAnsweringModel(ConfigError):
    """The run records no model that answered it (its scores came with its rows) and the probe names none: the
    CLI asks for its flags, the REST service for the request's `model`."""

    def __init__(self, run: Path) -> None:
        self.run = run
        super().__init__(
            f"{run}: the run does not record the model that answered it (made by `cg-ray metrics`?); "
            "name the model that answers the items: --model NAME with --model-endpoint URL"
        )


def run_model(run: Path, config: ProbeConfig) -> GenerationConfig:
    """The model that answers: the config's, else the run's evaluated model."""
    if config.model is not None:
        return config.model
    saved = _manifest_config(run).get("generation")
    if not saved:
        raise NoAnsweringModel(run)
    return GenerationConfig.model_validate(saved)


def writer_of(gap: Gap, config: ProbeConfig) -> GapWriter:
    """Who writes the gap's items: the LLM writer, else (or with families: only) a matching family, which also
    takes over where the LLM writer wrote none (families: fallback)."""
    family = match_family(gap) if config.families != "never" else None
    return GapWriter(llm=config.writer is not None and config.families != "only", family=family)


def _rules(chosen: list[Gap], gaps: RunGaps) -> dict[str, dict[int, float]]:
    """The reader's firing rule per gap: its concepts' thresholds as the run recorded them (failure_modes.parquet's
    `firing_thresholds`, weaknesses.parquet's `firing_threshold`; `gaps.read_gaps`)."""
    return {g.gap_id: dict(gaps.thresholds[g.gap_id]) for g in chosen}


def make_plan(run: Path, config: ProbeConfig, gaps: RunGaps | None = None, ledger_dir: Path | None = None) -> ProbePlan:
    gaps = gaps or read_gaps(run)
    chosen = gaps.select(config.gaps, config.top)
    if config.writer is None and config.families == "never":
        raise ConfigError(
            "nothing can write items: name a writer (--writer-endpoint / --writer-model) or allow families"
        )
    return ProbePlan(
        run=run,
        gaps=chosen,
        writers={g.gap_id: writer_of(g, config) for g in chosen},
        rules=_rules(chosen, gaps),
        reader=run_reader(run, config),
        model=run_model(run, config),
        config=config,
        ledger_dir=ledger_dir,
    )


def plan_text(plan: ProbePlan) -> str:
    cfg, est = plan.config, plan.estimate()
    writer = cfg.writer.endpoint or cfg.writer.backend if cfg.writer else "none"
    lines = [
        f"probe of {plan.run}: {len(plan.gaps)} gaps × {cfg.pairs} pairs (target + matched control), seed {cfg.seed}",
        f"  writer: {cfg.writer.model + ' at ' + writer if cfg.writer else 'programmatic families only'}"
        f"; families: {cfg.families}; reference check: {cfg.reference_check}",
        f"  reader check: {'on' if cfg.reader_check else 'off'} ({plan.reader.model}, SAE {plan.reader.sae})",
        f"  model answering: {plan.model.model} ({plan.model.backend}); confirmed at q ≤ {cfg.fdr} "
        "(BH at this probe's share of it)",
    ]
    for g in plan.gaps:
        effect = "—" if g.effect is None else f"{g.effect:+.3f}"
        state = "confirmed by the run" if g.confirmed else "a candidate"
        who = plan.writers[g.gap_id].name or "NOTHING can write it (no writer, no family fits)"
        lines.append(f"  {g.gap_id:<14} {g.description[:60]:<60} {g.n_rows:>5} rows, effect {effect}, {state}; {who}")
    lines.append(
        "  requests at most: writer {writer_requests}, checks {checker_requests}, model {model_requests}; "
        "tokens about: writer {writer_tokens}, model {model_tokens}".format(**est)
    )
    return "\n".join(lines)
