"""A run's scope (`cg-ray scope`, docs/method.md "Benchmark gaps in scope") as the explorer and report.html
show it: per benchmark, the concepts its reference uses that it confidently tests less, in words first
(label or description, a reference example), then the evidence (both shares with their intervals, the
ratio, q) and, where a judge was asked, its verdict.

Read from the run's scope/ files through `RunDir` only, as the probe view reads probe/."""

from __future__ import annotations

import math
from typing import Any

import pyarrow.compute as pc

from cg_ray.artifacts import layout as L
from cg_ray.artifacts.layout import RunDir

GAPS_SHOWN = 12  # per benchmark, most confident first (all are in scope/gaps.parquet)
EXAMPLE_CHARS = 400  # of an augment item shown


def pct(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{100 * x:.1f}%" if x >= 0.001 or x == 0 else f"{100 * x:.2f}%"


def evidence_text(g: dict[str, Any], bound: float) -> str:
    """'fires on 6.1% [4.9%, 7.5%] of the reference vs 0 of 1,319 rows here (< 0.23%, 95%); ×0.00 [0.00, 0.04]'.
    `bound`: the benchmark's one-sided 95% bound on a share seen on none of its rows (summary.json's)."""
    ref = f"{pct(g['reference_share'])} [{pct(g['reference_low'])}, {pct(g['reference_high'])}] of the reference"
    if g["missing"]:
        here = f"0 of {int(g['bench_n']):,} rows here (< {pct(bound)}, 95%)"
    else:
        here = f"{pct(g['bench_share'])} [{pct(g['bench_low'])}, {pct(g['bench_high'])}] here"
    ratio = f"×{g['ratio']:.2f} [{g['ratio_low']:.2f}, {g['ratio_high']:.2f}]"
    return f"fires on {ref} vs {here}; {ratio}"


def theme_text(t: dict[str, Any], b: dict[str, Any]) -> str:
    """'with 5 more concepts firing on the same rows: any fires on 338 of the reference's 500 rows, 102 of
    1,319 here' (descriptive: the theme's rows were not chosen on other rows)."""
    return (
        f"with {len(t['members']) - 1} more concepts firing on the same rows: any fires on "
        f"{t['reference_rows']:,} of the reference's {b['reference_rows']:,} rows, "
        f"{t['bench_rows']:,} of {b['rows']:,} here"
    )


def judge_text(g: dict[str, Any]) -> str | None:
    verdict = g.get("in_scope_judge")
    if verdict is None:
        return None
    reason = f": {g['judge_reason']}" if g.get("judge_reason") else ""
    return ("in scope" if verdict else "out of scope") + reason


def _times(x: float | None) -> str:
    return "–" if x is None else f"×{x:.2f}"


def row_view_text(b: dict[str, Any]) -> dict[str, Any] | None:
    """The row-level headline of one benchmark (summary.json's `row_view`) in words, and its confirmed themes:
    what the CLI prints and the report shows first. None for a scope written before the row view."""
    view = b.get("row_view")
    if not view:
        return None
    u, rule, name = view["uncovered"], view["rule"], b["benchmark"]
    ref, bench = u["reference"], u["benchmark"]
    high = "" if u["ratio_high"] is None else f", ≤ ×{u['ratio_high']:.2f}"
    headline = (
        f"{pct(ref['share'])} [{pct(ref['low'])}, {pct(ref['high'])}] of the reference's rows lie where {name} has "
        f"at most {rule['density']:g} × its density; held out, {name} has {pct(bench['share'])} of its rows there "
        f"({_times(u['ratio'])}{high})"
    )
    verdict = "confirmed" if view["confirmed"] else "not confirmed: no region the benchmark confidently lacks"
    themes = []
    for t in view["themes"]:
        if not t["confirmed"]:
            continue
        m = t["measured_on_half"]
        r, here = m["reference"], m["benchmark"]
        themes.append(
            {
                "concept_id": t["concept"],
                "label": t["label"] or f"concept {t['concept']}",
                "members": len(t["members"]),
                "format": t["kind"] == "format",
                "evidence": f"{pct(r['share'])} [{pct(r['low'])}, {pct(r['high'])}] of the reference vs "
                f"{pct(here['share'])} of {name} ({_times(m['ratio'])}), on the half that did not choose it",
                "q_value": t["q_value"],
                "example": (t["examples"] or [None])[0],
            }
        )
    return {
        "headline": headline,
        "confirmed": view["confirmed"],
        "verdict": verdict,
        "themes": themes,
        "scores": reweighted_lines(b),
    }


def _signed(x: float) -> str:
    return f"{x:+.3f}"


def reweighted_lines(b: dict[str, Any]) -> list[str]:
    """Each model's score on the reference's mix (summary.json's `reweighted`), and any change of order."""
    rw = b.get("reweighted")
    if not rw or not rw["models"]:
        return []
    name, supported = b["benchmark"], rw["supported_share"]
    lines = [
        f"scores as the reference's mix would weigh them, on its {pct(supported)} where {name} has rows to weigh "
        f"(the other {pct(1 - supported)} is not measured: {name} has at most {rw['density']:g} × its density there)"
    ]
    for m in rw["models"]:
        if m["reweighted"] is None:
            lines.append(f"{m['model']}: {m['plain']:.3f}; fewer than 2 of its rows where the reference has rows")
            continue
        interval = "" if m["low"] is None else f" [{m['low']:.3f}, {m['high']:.3f}]"
        lines.append(
            f"{m['model']}: {m['plain']:.3f} → {m['reweighted']:.3f}{interval} "
            f"(effective rows {m['n_eff']:.0f} of {m['weighed_rows']:,})"
        )
    for s in rw["swaps"]:
        sure = "" if s["confident"] else ", not confidently"
        lines.append(
            f"order changes: {s['above']} above {s['below']} on the reference's mix, by {_signed(s['difference'])} "
            f"[{_signed(s['low'])}, {_signed(s['high'])}]{sure}"
        )
    return lines


DROP_REASONS = ("format", "wrong_reference", "near_copy", "reader")


def augment_rows_text(summary: dict[str, Any]) -> str | None:
    """augment/summary.json's row view in words: the uncovered share of the reference and the confirmed themes,
    before → after the items (or why there is no row view; None for an augment written before it)."""
    view = summary.get("row_view")
    if view is None:
        note = summary.get("row_view_note")
        return f"row view: {note}" if note else None
    b, a = view["before"], view["after"]

    def share(side: dict[str, Any]) -> str:
        u = side["uncovered"]["reference"]
        unconfirmed = "" if side["confirmed"] else " (not confirmed)"
        return f"{pct(u['share'])} [{pct(u['low'])}, {pct(u['high'])}]{unconfirmed}"

    gone = [str(c) for c in b["themes"] if c not in a["themes"]]
    return (
        f"uncovered share of {summary['reference']}: {share(b)} → {share(a)}; confirmed themes {len(b['themes'])} → "
        f"{len(a['themes'])}" + (f" (no longer: concept {', '.join(gone)})" if gone else "")
    )


def augment_view(run: RunDir) -> dict[str, Any] | None:
    """The run's `cg-ray augment` (docs/augment.md), for the benchmark it filled: in-scope coverage before →
    after, and per targeted gap its state before → after, what the checks kept and dropped, and the first
    kept item written (never chosen by anything but the checks)."""
    summary = run.read_json_if_present(L.AUGMENT_SUMMARY)
    if summary is None:
        return None
    items = run.read_table(L.AUGMENT_ITEMS, columns=["concept_id", "prompt", "dropped"])
    first: dict[int, str] = {}
    for item in items.to_pylist() if items is not None else []:
        if item["dropped"] is None:
            first.setdefault(item["concept_id"], item["prompt"][:EXAMPLE_CHARS])
    cov = summary["coverage"]
    gaps = []
    for g in summary["gaps"]:
        concept = int(str(g["gap_id"]).split(":")[-1])
        dropped = ", ".join(f"{g[r]} {r.replace('_', ' ')}" for r in DROP_REASONS if g.get(r))
        gaps.append(
            {
                "gap_id": g["gap_id"],
                "label": g.get("label") or g["gap_id"],
                "states": f"{g['state_before']} → {g['state_after']}",
                "shares": f"{pct(g['bench_share'][0])} → {pct(g['bench_share'][1])} of its rows "
                f"(the reference: {pct(g['reference_share'])})",
                "checks": f"{g['kept']} kept of {g['written']} written" + (f"; dropped: {dropped}" if dropped else ""),
                "example": first.get(concept),
            }
        )
    before, after = cov["in_scope_coverage"]
    return {
        "benchmark": summary["benchmark"],
        "reference": summary["reference"],
        "coverage": f"in-scope coverage {pct(before)} → {pct(after)} with {cov['items_added']:,} items added "
        f"({cov['gaps'][0]:,} → {cov['gaps'][1]:,} gaps of {cov['in_reference_use']:,} concepts the reference uses)",
        "over_represented": len(summary.get("over_represented") or []),
        "rows": augment_rows_text(summary),
        "gaps": gaps,
    }


def scope_view(run: RunDir) -> dict[str, Any] | None:
    """{decision, suite, benchmarks: [{benchmark, reference, rows, figures, gaps: [...]}]}; None without scope/."""
    summary = run.read_json_if_present(L.SCOPE_SUMMARY)
    table = run.read_table(L.SCOPE_GAPS)
    if summary is None or table is None:
        return None
    gaps = table.filter(pc.equal(table["gap"], True)).to_pylist()
    out = []
    for b in summary["benchmarks"]:
        mine = {
            g["concept_id"]: g for g in gaps if g["benchmark"] == b["benchmark"] and g["reference"] == b["reference"]
        }
        order = sorted(mine.values(), key=lambda g: (g["q_value"], -g["reference_share"]))
        # Themes lead (summary.json's, most confident first); a scope written before themes shows its gaps.
        themes = b.get("themes") or [{"representative": g["concept_id"], "members": [g["concept_id"]]} for g in order]
        shown = []
        for t in themes[:GAPS_SHOWN]:
            g = mine[t["representative"]]
            shown.append(
                {
                    "concept_id": g["concept_id"],
                    "label": g["label"] or f"concept {g['concept_id']}",
                    "evidence": evidence_text(g, b["missing_bound"]),
                    "q_value": g["q_value"],
                    "missing": g["missing"],
                    "judge": judge_text(g),
                    "example": (g["examples"] or [None])[0],
                    "members": len(t["members"]),
                    "theme_rows": theme_text(t, b) if len(t["members"]) > 1 else None,
                }
            )
        out.append({**b, "gaps_shown": shown, "rows_shown": row_view_text(b)})
    return {"decision": summary["decision"], "suite": summary["suite"], "benchmarks": out, "augment": augment_view(run)}
