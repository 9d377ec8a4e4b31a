"""The probe as one library call (docs/probe.md): `probe_run(RUN_DIR, config)` plans it, runs it, says its
verdict lines and refreshes the run's report, as `cg-ray probe` and the service's probe job both do. Errors are
`cg_ray.errors.CgRayError`s carrying their message, never printed text; what the probe says goes to `say`
line by line as it happens (the CLI prints it, the service's job writes it to its log)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cg_ray.artifacts.probe import ProbeResult, probe_summary
from cg_ray.errors import ConfigError
from cg_ray.probe.config import ProbeConfig

TOO_FEW_AIM = 20  # checked pairs to ask for when suggesting --pairs (MIN_PAIRS is the floor, not a good test)


@dataclass(frozen=True)
class ProbeOutcome:
    """What a probe did: its published summary (None for a dry run), the lines it said after its steps' own
    (the plan and the earlier probes for a dry run; else the verdicts, requests and what it wrote), and the
    report it refreshed, if the run has one."""

    summary: dict[str, Any] | None
    lines: list[str] = field(default_factory=list)
    report: Path | None = None


def probe_settings(data: dict[str, Any]) -> ProbeConfig:
    """The ProbeConfig of `data`, validated once; a bad value is a ConfigError naming its field."""
    from pydantic import ValidationError

    try:
        return ProbeConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"]))
        raise ConfigError(f"probe setting {where}: {first['msg']}") from None


def settings_file(path: Path) -> ProbeConfig:
    """The ProbeConfig of a YAML (or JSON) file of probe settings, as `cg-ray probe --config` reads it."""
    import yaml

    return probe_settings(yaml.safe_load(path.read_text(encoding="utf-8")) or {})


def probe_run(
    run: Path,
    config: ProbeConfig,
    *,
    fresh: bool = False,
    replace: bool = False,
    dry_run: bool = False,
    ledger: Path | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> ProbeOutcome:
    """Plan the probe of `run` and run it: every step (cg_ray.probe.run), then each gap's verdict, the requests
    and seconds spent, what it wrote, and the report refreshed. `dry_run` plans only (the plan and where the
    probe stands among the run's probes). `ledger`: the probe ledger's folder (None: $CG_RAY_LEDGER, else
    ~/.cache/cg_ray/probe_ledger; cg_ray.probe.ledger). Each line goes to `say` as it is made."""
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.probe import plan as planning
    from cg_ray.probe import run as running
    from cg_ray.report.refresh import refresh_report

    lines: list[str] = []

    def tell(line: str) -> None:
        lines.append(line)
        say(line)

    plan = planning.make_plan(run, config, ledger_dir=ledger)
    if dry_run:
        tell(planning.plan_text(plan))
        tell(earlier_text(plan, replace=replace))
        return ProbeOutcome(None, lines)
    summary = running.run_probe(plan, fresh=fresh, replace=replace, say=say)
    tell("")
    for line in attempt_lines(summary):
        tell(line)
    record = probe_summary(summary)
    if record.probes and (this := record.probes[-1]).share is not None:
        tell(f"probe {this.probe}, share {this.share:.3g} of fdr {this.fdr:g}; numbered by the probe ledger "
             f"{this.ledger}: the bound holds per ledger (a gap's probes there share one fdr)")  # fmt: skip
    tell(f"requests: {json.dumps(record.requests)}; seconds: {json.dumps(record.seconds)}")
    tell(f"wrote {run / 'probe'} (items.parquet, results.parquet, summary.json, export/)")
    if (report := refresh_report(RunDir(run))) is not None:  # the report shows "Gaps tested on new items"
        tell(f"updated {report}")
    return ProbeOutcome(summary, lines, report)


def _attempt_text(g: ProbeResult) -> str:
    """'unsettled  target − control -0.100 [-0.300, +0.100] on 30 pairs; NOTE'."""
    diff = "—" if g.difference is None else f"{g.difference:+.3f}"
    if g.ci_low is not None and g.ci_high is not None:  # a too_few gap may have a difference but no interval
        diff += f" [{g.ci_low:+.3f}, {g.ci_high:+.3f}]"
    q = "" if g.q_value is None else f", q={g.q_value:.3g}"
    note = f"; {g.note}" if g.note else ""
    return f"{g.verdict:<10} target − control {diff} on {g.n_pairs} pairs{q}{note}"


def attempt_lines(summary: dict[str, Any]) -> list[str]:
    """Each gap this probe tested with its verdict, then its earlier attempts and standing verdict where it has
    them; then the gaps only earlier probes tested, at their standing verdict (cg_ray.probe.history). `summary`:
    the published summary.json, read as its typed record."""
    record = probe_summary(summary)
    this = record.probes[-1].probe if record.probes else None
    by_gap: dict[str, list[ProbeResult]] = {}
    for g in record.gaps:  # this probe's rows first, then every earlier attempt, newest first
        by_gap.setdefault(g.gap_id, []).append(g)
    lines, heading = [], False
    for gap_id, attempts in by_gap.items():
        latest, earlier = attempts[0], attempts[1:]
        if latest.probe != this and not heading:
            lines.append("  gaps of earlier probes only (their verdicts are final):")
            heading = True
        lines.append(f"  {gap_id:<14} {_attempt_text(latest)}")
        if latest.verdict == "too_few" and latest.probe == this and (hint := too_few_hint(latest)):
            lines.append(f"  {'':<14} next: {hint}")
        lines += [f"  {'':<14} probe {g.probe}: {_attempt_text(g)}" for g in earlier]
        standing = latest.standing or latest.verdict
        if earlier or standing != latest.verdict:
            by = next((g.probe for g in reversed(attempts) if g.verdict == "confirmed"), latest.probe)
            lines.append(f"  {'':<14} standing: {standing} (probe {by}, of {len(attempts)} attempts)")
    return lines


def earlier_text(plan: Any, *, replace: bool) -> str:
    """What the probe will be among its gaps' probes: its number (the probe ledger's, above the run's own and
    each gap's earlier ones), the share of fdr it spends, and the earlier probes' gaps (their verdicts final;
    --replace forgets their attempts, not their numbers). A different fdr than the ledger's is refused."""
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.probe.history import read_earlier, standing
    from cg_ray.probe.ledger import open_ledger
    from cg_ray.probe.power import share

    earlier = read_earlier(RunDir(plan.run), replace=replace)
    ledger = open_ledger(RunDir(plan.run).rows, plan.gaps, plan.rules, plan.ledger_dir)
    fdr = plan.config.fdr
    ledger.check_fdr(fdr)
    number = ledger.next_number(earlier.next_probe())
    text = (
        f"  probe {number}: Benjamini–Hochberg at level {share(number) * fdr:.3g} "
        f"(share {share(number):.3g} of fdr {fdr:g}) over the {len(plan.gaps)} gap{'s' * (len(plan.gaps) != 1)} "
        f"above, on their new pairs only; numbered by the {ledger.text()}"
    )
    if earlier.results:
        held = ", ".join(f"{gap} ({verdict}, probe {k})" for gap, (verdict, k) in standing(earlier.results).items())
        text += f"\n  earlier probes' gaps, verdicts final (--replace forgets their attempts): {held}"
    return text


def too_few_hint(gap: ProbeResult) -> str:
    """What to do when a gap got too few pairs, from where they were lost: the reader check (the items did not
    carry the gap's concepts) or before it (near copies, malformed, wrong references); '' when unknown."""
    written, checked, passed = gap.pairs_written or 0, gap.reader_checked or 0, gap.reader_passed or 0
    if checked and passed < checked / 2:
        more = f"--pairs {-(-TOO_FEW_AIM * written // passed)} aims at about {TOO_FEW_AIM}; " if passed else ""
        return (
            f"the reader saw the gap in {passed} of {checked} checked pairs ({passed / checked:.0%}) written by "
            f"{gap.generator}: {more}a writer whose items carry it (--writer-endpoint) may do better"
        )
    lost = (gap.near_copies or 0) + (gap.malformed or 0) + (gap.wrong_reference or 0)
    if lost:
        return (
            f"{lost} of {written} written pairs were dropped before the reader check (near copies, malformed, "
            "wrong references): raise --pairs"
        )
    return ""
