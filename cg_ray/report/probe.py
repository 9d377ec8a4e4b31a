"""A run's probe (`cg-ray probe`, docs/probe.md) as the explorer and report.html show it: each gap probed once,
at its standing verdict (confirmed once any probe confirmed it, else its latest probe's), with what the run
said of it, that attempt's figures, what the checks kept, its other attempts, two example pairs, and for a gap
standing unsettled the command that writes enough new pairs for the run's next probe.

Read from the run's probe/ files through `RunDir` and the probe's typed records (`cg_ray.artifacts.probe`): the
report sits below cg_ray.probe in the layers, so the probe's own modules are never imported here (the decision
rule comes as summary.json stores it)."""

from __future__ import annotations

import dataclasses
import math
import shlex
from typing import Any

import pyarrow.compute as pc

from cg_ray.artifacts.layout import RunDir
from cg_ray.artifacts.probe import (
    ProbeResult,
    ProbeSummary,
    probe_summary,
    read_probe_items,
    read_probe_results,
    read_probe_summary,
)
from cg_ray.report.findings import percent, q_text

EXAMPLE_PAIRS = 2  # kept pairs shown per gap (each a target and its matched control)
EXAMPLE_CHARS = 600  # a prompt or response longer than this is cut in the view
ITEM_COLUMNS = ["gap_id", "pair_id", "role", "generator", "prompt", "response", "score", "dropped"]


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= EXAMPLE_CHARS:
        return text
    return text[:EXAMPLE_CHARS] + "…"


def example_pairs(run: RunDir) -> dict[str, list[dict[str, Any]]]:
    """gap id -> its first EXAMPLE_PAIRS answered pairs in the order they were written (never chosen by how
    the model answered them), each {pair_id, generator, target: {prompt, response, score}, control: …}."""
    items = read_probe_items(run)
    if items is None:
        return {}
    table = items.select(ITEM_COLUMNS)
    kept = table.filter(pc.is_null(table["dropped"]))  # dropped pairs were never answered
    pairs: dict[str, dict[str, dict[str, Any]]] = {}
    for item in kept.to_pylist():
        mine = pairs.setdefault(item["gap_id"], {})
        if item["pair_id"] not in mine and len(mine) >= EXAMPLE_PAIRS:
            continue
        pair = mine.setdefault(item["pair_id"], {"pair_id": item["pair_id"], "generator": item["generator"]})
        texts = {"prompt": _cut(item["prompt"]), "response": _cut(item["response"])}
        pair[item["role"]] = {**texts, "score": item["score"]}
    return {gap: [p for p in found.values() if "target" in p and "control" in p] for gap, found in pairs.items()}


def run_said_text(gap: ProbeResult) -> str:
    """'confirmed by the run: residual −0.200 over 60 rows' / 'a candidate of the run: …'."""
    state = "confirmed by the run" if gap.run_confirmed else "a candidate of the run"
    said = "no effect reported" if gap.run_effect is None else f"effect {gap.run_effect:+.3f}"
    return f"{state}: {said} over {gap.run_rows or 0:,} rows"


def checks_text(gap: ProbeResult) -> str:
    """'31 pairs kept of 40 written; reader passed 31 of 37 (84%); dropped: 3 malformed, …'."""
    written, kept = gap.pairs_written or 0, gap.n_pairs
    checked, passed, rate = gap.reader_checked or 0, gap.reader_passed or 0, gap.reader_pass_rate
    reader = f"reader passed {passed} of {checked} ({percent(rate)})" if checked and rate is not None else "none read"
    dropped = [
        f"{gap.malformed or 0} malformed",
        f"{gap.wrong_reference or 0} wrong references",
        f"{gap.near_copies or 0} near copies",
        f"{checked - passed} by the reader",
    ]
    return f"{kept:,} pairs kept of {written:,} written; {reader}; dropped: {', '.join(dropped)}"


def verdict_text(gap: ProbeResult) -> str:
    """'target 0.412 vs control 0.788: −0.376 [−0.55, −0.20], q=0.001' ('' when it was not tested)."""
    if gap.difference is None:
        return ""
    tested = gap.ci_low is not None and gap.ci_high is not None
    interval = f"[{gap.ci_low:+.3f}, {gap.ci_high:+.3f}]" if tested else ""
    return (
        f"target {gap.target_mean:.3f} vs control {gap.control_mean:.3f}: "
        f"{gap.difference:+.3f} {interval}, {q_text(gap.q_value)}"
    )


def next_step(gap: ProbeResult, run_name: str, seed: int) -> dict[str, Any] | None:
    """For a gap standing unsettled: the pairs to write so that about `pairs_needed` fresh ones survive the
    checks at its latest probe's keep rate (its `pairs_to_write`), and the command (a new seed, so the writer does
    not write the same pairs again). The pairs are planned for the run's next probe at its share of fdr, in a
    family as large as its latest probe's (its note says the level)."""
    needed = gap.pairs_needed
    if gap.verdict != "unsettled" or not needed:
        return None
    written, kept = gap.pairs_written or 0, gap.n_pairs
    write = gap.pairs_to_write  # planned with the drops' spread (cg_ray.probe.power.pairs_to_write) …
    if write is None:  # … else (written before it was) at the latest probe's keep rate
        write = math.ceil(needed * written / kept) if kept and written else needed
    gap_id = shlex.quote(gap.gap_id)
    command = f"cg-ray probe {shlex.quote(run_name)} --gap {gap_id} --pairs {write} --seed {seed + 1}"
    return {
        "pairs": write,
        "seed": seed + 1,
        "command": command,
        "text": f"write {write:,} pairs (about {needed:,} kept: new pairs for 80% power in the run's next "
        "probe, at its share of fdr; this gap's earlier attempts stay, their verdicts final)",
    }


def _from_probe(gap: ProbeResult, summary: ProbeSummary) -> str:
    """'probe 1 of 2 (2026-11-26): ' where the run was probed more than once (cg_ray.probe.history)."""
    if len(summary.probes) < 2 or gap.probe is None:
        return ""
    when = (gap.probed_at or "")[:10]
    last = max(p.probe for p in summary.probes)  # ledger numbers (cg_ray.probe.ledger) may start above 1
    return f"probe {gap.probe} of {last}" + (f" ({when})" if when else "") + ": "


def attempt_text(gap: ProbeResult) -> str:
    """One attempt in a line: 'probe 1 (2026-11-26): unsettled, −0.100 [−0.30, +0.10], q=0.4, 30 pairs'."""
    when = (gap.probed_at or "")[:10]
    figures = f", {verdict_text(gap)}" if gap.difference is not None else ""
    where = f"probe {gap.probe or 1}" + (f" ({when})" if when else "")
    return f"{where}: {gap.verdict}{figures}, {gap.n_pairs} pairs"


def standing_attempts(rows: list[ProbeResult]) -> list[tuple[ProbeResult, list[ProbeResult]]]:
    """Each gap once, in the order of its first row: (the attempt its standing verdict comes from, every
    attempt oldest first). The standing attempt is the first that confirmed the gap, else its latest
    (cg_ray.probe.history.standing; rows without a probe number are probe 1's)."""
    by_gap: dict[str, list[ProbeResult]] = {}
    for r in rows:
        by_gap.setdefault(r.gap_id, []).append(r)
    out = []
    for attempts in by_gap.values():
        attempts = sorted(attempts, key=lambda r: r.probe or 1)
        held = next((r for r in attempts if r.verdict == "confirmed"), attempts[-1])
        out.append((held, attempts))
    return out


def pairs_asked(summary: ProbeSummary, gaps: list[ProbeResult]) -> list[int]:
    """The pairs asked per gap by the probes whose gaps are shown, one number each: probes kept from earlier
    may have asked for another count than the latest (cg_ray.probe.history)."""
    shown = {g.probe for g in gaps}
    asked = {p.pairs for p in summary.probes if p.probe in shown and p.pairs is not None}
    if not asked and summary.config.get("pairs") is not None:  # written before probes were kept
        asked = {int(summary.config["pairs"])}
    return sorted(asked)


def _finite(result: ProbeResult) -> ProbeResult:
    """The attempt with NaN and infinite figures read as missing (the views draw none)."""
    bad: dict[str, Any] = {k: None for k, v in result.row().items() if isinstance(v, float) and not math.isfinite(v)}
    return dataclasses.replace(result, **bad) if bad else result


def probe_view(run: RunDir) -> dict[str, Any] | None:
    """The run's probe as the views draw it; None when the run has none."""
    results = read_probe_results(run)
    if results is None:
        return None
    summary = read_probe_summary(run) or probe_summary({})
    examples = example_pairs(run)
    gaps = []
    standing = standing_attempts([_finite(r) for r in results])
    for held, attempts in standing:
        others = [attempt_text(a) for a in attempts if a is not held]
        seed = next(s for s in (held.probe_seed, summary.config.get("seed"), 0) if s is not None)
        gap = held.row()
        gap.update(
            run_said=run_said_text(held),
            checks=_from_probe(held, summary)
            + checks_text(held)
            + (f"; other attempts: {'; '.join(others)}" if others else ""),
            measured=verdict_text(held),
            next_step=next_step(held, run.path.name, int(seed)),
            examples=examples.get(held.gap_id, []),
            attempts=[attempt_text(a) for a in attempts],
        )
        gaps.append(gap)
    return {
        "decision": summary.decision,
        "fdr": summary.config.get("fdr"),
        "pairs": pairs_asked(summary, [held for held, _ in standing]),
        "requests": summary.requests,
        "probes": [p.document() for p in summary.probes],
        "gaps": gaps,
    }
