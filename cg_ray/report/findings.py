"""How the findings beyond the metadata (failure modes, slices) are said, in words shared by the CLI and the
explorer's views (cg_ray.report.documents puts them into the run's documents).

Both are judged held out (docs/findings.md): each of R grouped splits chooses findings on one half and tests
them, as the same rule, on the other; confirmed ⇔ the splits' aggregated q-value ≤ the run's FDR. The confirmed
ones come first; the other candidates sit apart, each with the smallest effect the run could have confirmed
(its minimum detectable effect at 80% power), since "not confirmed" often means "too few rows to tell".
"""

from __future__ import annotations

import shlex
from collections.abc import Sized
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.artifacts.layout import RunDir
from cg_ray.profile.decision import MEASURED

# ---- plain text, shared with `cg-ray metrics` and `cg-ray validate`


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def percent(fraction: float) -> str:
    return f"{fraction * 100:.3g}%"


def judged_text(judged: dict[str, Any] | None) -> str:
    """'chosen on one half of the rows and tested on the other, over 10 grouped splits (identical prompts, 1,834
    groups); confirmed when the splits' q ≤ 10% (their median q × 2; measured: …)' ('' for a run made before held-out
    checks)."""
    if not judged:
        return ""
    if judged.get("skipped"):
        return str(judged["skipped"])
    groups = judged.get("groups") or {}
    grouped = ""
    if groups.get("rule") and groups.get("n_groups") is not None:
        grouped = f" ({groups['rule']}, {groups['n_groups']:,} groups)"
    if "splits" not in judged:  # a run of the folds version (format 2)
        return f"chosen on some folds of grouped rows{grouped}, measured on the others"
    return (
        f"chosen on one half of the rows and tested on the other, over {int(judged['splits'])} grouped "
        f"splits{grouped}; confirmed when the splits' q ≤ {percent(judged['fdr'])} (their median q × 2; {MEASURED})"
    )


def q_text(q: float | None) -> str:
    if q is None:
        return "q —"
    return "q<0.001" if q < 0.001 else f"q={q:.3f}"


def measured_text(entry: dict[str, Any], splits: int | None) -> str:
    """'tested on 412 held-out rows (380 groups), chosen by 9 of 10 splits'."""
    if entry.get("n_heldout") is None:
        return ""
    groups = f" ({entry['n_clusters']:,} groups)" if entry.get("n_clusters") is not None else ""
    chosen = entry.get("splits_selected", entry.get("folds_selected"))
    of = f" of {splits}" if splits else ""
    return f"tested on {entry['n_heldout']:,} held-out rows{groups}, chosen by {chosen}{of} splits"


def power_text(entry: dict[str, Any], kind: str) -> str:
    """For an unconfirmed candidate, what the run could have confirmed: 'too few rows to settle below a residual
    of -0.172 (its minimum detectable effect at 80% power)', or, when its whole held-out interval lies the other
    way, that there is no weakness (or strength) here to settle. '' when confirmed or untestable. `kind`: the
    file it comes from (failure_modes, slices, or a concept list; strengths lean above their cells)."""
    mde = entry.get("mde")
    if entry.get("confirmed") or mde is None:
        return ""
    above = kind == "strengths"
    unit = "difference from the other rows" if kind == "slices" else "residual"
    side, sign = ("above", "+") if above else ("below", "-")
    if lies_other_way(entry, kind):
        return (
            f"held out it lies the other way, its whole interval too: no {'strength' if above else 'weakness'} here "
            f"(the smallest this run could confirm: {sign}{mde:.3f})"
        )
    return f"too few rows to settle {side} a {unit} of {sign}{mde:.3f} (its minimum detectable effect at 80% power)"


def lies_other_way(entry: dict[str, Any], kind: str) -> bool:
    """Whether its whole held-out interval lies on the far side of 0 from the finding's direction."""
    low, high = heldout_interval(entry, kind)
    return (high is not None and high < 0) if kind == "strengths" else (low is not None and low > 0)


def probe_gap(entries: list[dict[str, Any]]) -> str:
    """The failure mode to probe next: 'mode:R' for the first unconfirmed one the rows could not settle (not
    lying the other way); '' when every candidate is settled, or for a run made before held-out checks."""
    for e in entries:
        if e.get("confirmed") is False and e.get("mde") is not None and not lies_other_way(e, "failure_modes"):
            return f"mode:{int(e['rank'])}"
    return ""


def probe_command(run_name: str, entries: list[dict[str, Any]]) -> str:
    """The next step for failure modes the rows could not settle: `cg-ray probe RUN --gap mode:R` for
    `probe_gap` (docs/probe.md: new items with matched controls, judged on fresh answers); '' when none."""
    gap = probe_gap(entries)
    return f"cg-ray probe {shlex.quote(run_name)} --gap {gap}" if gap else ""


def heldout_interval(entry: dict[str, Any], kind: str) -> tuple[float | None, float | None]:
    """The held-out interval on the scale the decision rule tests (0: no difference)."""
    if kind == "slices":
        base = entry.get("suite_mean")
        if base is None or entry.get("low") is None or entry.get("high") is None:
            return None, None
        return float(entry["low"]) - base, float(entry["high"]) - base
    return entry.get("heldout_residual_low"), entry.get("heldout_residual_high")


def term_shares_text(entry: dict[str, Any]) -> str:
    """'“draw” in 62% of its rows vs 8% of the same cells; “pawn” 40% vs 3%' ('' without shares)."""
    terms, shares, background = entry.get("terms") or [], entry.get("term_shares"), entry.get("background_shares")
    if not terms or not shares or not background:
        return ""
    parts = [
        f"“{t}” in {s:.0%} of its rows vs {b:.0%} of the same cells" if i == 0 else f"“{t}” {s:.0%} vs {b:.0%}"
        for i, (t, s, b) in enumerate(zip(terms, shares, background, strict=False))
    ]
    return "; ".join(parts)


def split_verdicts(entries: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
    """(confirmed, candidates), each in rank order; None for a run made before held-out checks."""
    if not entries or "confirmed" not in entries[0]:
        return None
    return [e for e in entries if e["confirmed"]], [e for e in entries if not e["confirmed"]]


def tried(judged: dict[str, Any] | None, kind: str, entries: Sized) -> str:
    """'61 candidates tried': the summary's count, else the file's rows."""
    n = int(((judged or {}).get("candidates") or {}).get(kind, len(entries)))
    return f"{n:,} candidate{'' if n == 1 else 's'} tried"


def null_check_text(check: dict[str, Any] | None) -> str:
    """'Null check: whole groups' scores permuted within task cells, 3 seeds: 0, 0, 0 confirmed findings
    beyond task (failure modes, concepts, slices on other fields)' ('' without one). Counted: what
    `nullcheck.FALSE_KINDS` counts, as `cg-ray validate` prints it; slices on the permuted-within fields
    alone keep their real means, so confirming them there is no false discovery. A validate.json before
    format 4 permuted single rows and counted failure modes and concepts only: said so."""
    if not check or not check.get("confirmed"):
        return ""
    fields = list(check.get("permuted_within") or [])
    within = " × ".join(fields)
    grouped = check.get("unit") == "group"
    what = "whole groups' scores" if grouped else "scores"
    where = f"within {within} cells" if within else "across the suite"
    if grouped:
        counts = [int(c.get("false_findings", 0)) for c in check["confirmed"]]
        beyond = f" beyond {', '.join(fields)}" if fields else ""
        counted = "failure modes, concepts, slices on other fields" if fields else "failure modes, concepts, slices"
    else:
        counts = [int(c.get("failure_modes", 0)) + int(c.get("concepts", 0)) for c in check["confirmed"]]
        beyond, counted = "", "failure modes and concepts"
    per_seed = ", ".join(map(str, counts))
    return (
        f"Null check: {what} permuted {where}, {len(check['confirmed'])} seeds: {per_seed} confirmed findings"
        f"{beyond} ({counted})"
    )


# ---- the rows behind the examples


def row_texts(run: RunDir, row_ids: set[str]) -> dict[str, dict[str, Any]]:
    """row_id → {benchmark, score, text} for the wanted rows (one pass over the light columns)."""
    path = run.rows
    if not row_ids or not path.is_file():
        return {}
    names = pq.read_schema(path).names
    text_cols = [c for c in ("prompt", "response") if c in names]
    table = pq.read_table(path, columns=[S.ROW_ID, S.BENCHMARK, S.SCORE, *text_cols])
    table = table.filter(pc.is_in(table.column(S.ROW_ID), value_set=pa.array(sorted(row_ids))))
    out: dict[str, dict[str, Any]] = {}
    for r in table.to_pylist():
        text = "\n\n".join(str(r[c]) for c in text_cols if r.get(c))
        out.setdefault(str(r[S.ROW_ID]), {"benchmark": r[S.BENCHMARK], "score": r[S.SCORE], "text": text})
    return out
