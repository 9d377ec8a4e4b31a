"""The report's first sections: failure modes beyond the metadata, then the weakest slices.

Both are judged held out (issue #31): chosen on K-1 folds of grouped rows, measured on the held-out fold. The
confirmed ones (q-value ≤ the run's FDR) come first; the other candidates sit apart, collapsed and greyed, since
most of them are noise. The plain-text pieces (`judged_text`, `q_text`, `term_shares_text`) are shared with the
CLI, so both say it in the same words.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.artifacts.layout import RunDir
from cg_ray.profile.terms import term_pattern

SNIPPET_CHARS = 260
EXAMPLES = 3
CANDIDATES_HEADING = "Candidates — not confirmed held out; likely noise"


def _esc(text: object) -> str:
    return html.escape(str(text))


def _num(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _ci(value: float | None, low: float | None, high: float | None, signed: bool = False) -> str:
    return f"{_num(value, signed)} <span class='ci'>[{_num(low, signed)}, {_num(high, signed)}]</span>"


# ---- plain text, shared with `cg-ray metrics`


def crossfit_of(summary: dict[str, Any] | None) -> dict[str, Any] | None:
    """summary["profile"]["beyond"]["crossfit"]: how the findings were judged; None for an older run."""
    return (((summary or {}).get("profile") or {}).get("beyond") or {}).get("crossfit")


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def percent(fraction: float) -> str:
    return f"{fraction * 100:.3g}%"


def judged_text(crossfit: dict[str, Any] | None) -> str:
    """'chosen on one half of the rows (identical prompts, 1,834 groups) and measured on the other, both ways;
    confirmed when both halves confirm at FDR 10%' ('' for a run made before held-out checks)."""
    if not crossfit:
        return ""
    k = int(crossfit["folds"])
    groups = crossfit.get("groups") or {}
    grouped = ""
    if groups.get("rule") and groups.get("n_groups") is not None:
        grouped = f" ({groups['rule']}, {groups['n_groups']:,} groups)"
    if crossfit.get("skipped"):
        return str(crossfit["skipped"])
    if k == 2:  # both halves must confirm (profile.heldout.confirming_share)
        return (
            f"chosen on one half of the rows{grouped} and measured on the other, both ways; confirmed when both "
            f"halves confirm at FDR {percent(crossfit['fdr'])}"
        )
    return (
        f"chosen on {k - 1} of {k} folds of grouped rows{grouped}, measured on the {_ordinal(k)}; "
        f"confirmed when the median fold confirms at FDR {percent(crossfit['fdr'])}"
    )


def q_text(q: float | None) -> str:
    if q is None:
        return "q —"
    return "q<0.001" if q < 0.001 else f"q={q:.3f}"


def measured_text(entry: dict[str, Any], folds: int | None) -> str:
    """'measured held out on 412 rows (380 groups) in 4 of 5 folds'."""
    if entry.get("n_heldout") is None:
        return ""
    groups = f" ({entry['n_clusters']:,} groups)" if entry.get("n_clusters") is not None else ""
    of = f" of {folds}" if folds else ""
    return f"measured held out on {entry['n_heldout']:,} rows{groups} in {entry['folds_selected']}{of} folds"


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


def tried(crossfit: dict[str, Any] | None, kind: str, entries: list[dict[str, Any]]) -> str:
    """'61 candidates tried': the summary's count, else the file's rows."""
    n = int(((crossfit or {}).get("candidates") or {}).get(kind, len(entries)))
    return f"{n:,} candidate{'' if n == 1 else 's'} tried"


# ---- HTML


def read_table(run: Path, name: str) -> list[dict[str, Any]]:
    table = RunDir(run).read_table(name)
    return table.to_pylist() if table is not None else []


def row_texts(run: Path, row_ids: set[str]) -> dict[str, dict[str, Any]]:
    """row_id → {benchmark, score, text} for the wanted rows (one pass over the light columns)."""
    path = RunDir(run).rows
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


def marked(text: str, terms: list[str]) -> str:
    """A snippet around the first term, HTML-escaped, every occurrence of the terms in <mark>."""
    pattern = term_pattern(terms)
    start = 0
    if pattern is not None and (m := pattern.search(text)):
        start = max(0, m.start() - SNIPPET_CHARS // 3)
    snippet = (
        ("…" if start else "")
        + text[start : start + SNIPPET_CHARS]
        + ("…" if start + SNIPPET_CHARS < len(text) else "")
    )
    if pattern is None:
        return _esc(snippet)
    out, last = [], 0
    for m in pattern.finditer(snippet):
        out.append(_esc(snippet[last : m.start()]) + f"<mark>{_esc(m.group(0))}</mark>")
        last = m.end()
    return "".join(out) + _esc(snippet[last:])


def _examples(ids: list[str], texts: dict[str, dict[str, Any]], terms: list[str]) -> str:
    items = []
    for rid in ids[:EXAMPLES]:
        row = texts.get(rid)
        if row is None:
            continue
        score = "unscored" if row["score"] is None else f"score {row['score']:.2f}"
        body = f" — {marked(row['text'], terms)}" if row["text"] else ""
        items.append(f"<div class='ex'><b>{_esc(row['benchmark'])}/{_esc(rid)}</b> {score}{body}</div>")
    return "".join(items)


def _verdict_cell(entry: dict[str, Any], folds: int | None) -> str:
    """Under the held-out figure: its q-value and what it was measured on."""
    if "confirmed" not in entry:
        return ""
    measured = measured_text(entry, folds)
    return f"<div class='ex'>{q_text(entry.get('q_value'))}</div>" + (
        f"<div class='ex'>{_esc(measured)}</div>" if measured else ""
    )


def verdict_tables(
    entries: list[dict[str, Any]],
    top: int,
    head: str,
    row: Callable[[dict[str, Any]], str],
    nothing: str,
    crossfit: dict[str, Any] | None,
) -> str:
    """The confirmed entries' table, then the candidates under their own collapsed, greyed sub-heading.
    `nothing`: what to say when none is confirmed."""
    split = split_verdicts(entries)
    if split is None:  # a run made before held-out checks: its table as it was, said so
        rows = "".join(row(e) for e in entries[:top])
        return f"<p class='ex'>This run was made before findings were checked held out.</p><table>{head}{rows}</table>"
    confirmed, candidates = split
    if confirmed:
        rows = "".join(row(e) for e in confirmed[:top])
        out = f"<h3>Confirmed held out ({len(confirmed)})</h3><table>{head}{rows}</table>"
    else:
        out = f"<p class='none'><b>{_esc(nothing)}</b></p>"
    if candidates:
        fdr = f" (q &gt; {(crossfit or {})['fdr']:g}, or an interval reaching no difference)" if crossfit else ""
        shown = f", the first {top} shown" if len(candidates) > top else ""
        out += (
            f"<details class='candidates'><summary><h3>{_esc(CANDIDATES_HEADING)}</h3> "
            f"<span class='ex'>{len(candidates):,}{fdr}{shown}</span></summary>"
            f"<table>{head}{''.join(row(e) for e in candidates[:top])}</table></details>"
        )
    return out


def failure_modes_section(run: Path, top: int, crossfit: dict[str, Any] | None = None) -> str:
    modes = read_table(run, S.FAILURE_MODES_FILE)
    if not modes:
        return ""
    folds = (crossfit or {}).get("folds")
    adjusted = ", ".join(modes[0]["adjusted_for"]) or "nothing (the suite mean)"
    split = split_verdicts(modes)
    shown = modes[:top] if split is None else split[0][:top] + split[1][:top]
    texts = row_texts(run, {rid for m in shown for rid in m["example_row_ids"][:EXAMPLES]})
    head = (
        "<tr><th>#</th><th>failure mode</th><th>held-out residual [95% CI]</th>"
        "<th>in sample: score vs expected</th><th>rows</th><th>concepts</th></tr>"
    )

    def row(m: dict[str, Any]) -> str:
        shares = term_shares_text(m)
        in_sample = m.get("residual_in_sample")
        return (
            f"<tr><td class='num rank'>{m['rank']}</td><td><b>{_esc(m['description'])}</b>"
            + (f"<div class='shares'>{_esc(shares)}</div>" if shares else "")
            + f"{_examples(m['example_row_ids'], texts, m['terms'])}</td>"
            f"<td class='num'>{_ci(m['residual'], m['residual_low'], m['residual_high'], True)}"
            f"{_verdict_cell(m, folds)}</td>"
            f"<td class='num'>{_num(m['mean_score'])} vs {_num(m['expected_score'])}"
            + (f"<div class='ex'>residual {_num(in_sample, True)}</div>" if in_sample is not None else "")
            + f"</td><td class='num'>{m['n_rows']:,}</td><td>{', '.join(map(str, m['concept_ids'][:6]))}"
            f"{' …' if len(m['concept_ids']) > 6 else ''}</td></tr>"
        )

    judged = judged_text(crossfit)
    note = (
        f"<p>Groups of concepts that fire on the same rows whose rows score below what their own metadata cell "
        f"predicts (adjusted for <b>{_esc(adjusted)}</b>). Residual = mean of (score − the row's cell mean) over the "
        "mode's scored rows, measured on rows the mode was not chosen on"
        + (f" ({_esc(judged)})" if judged else "")
        + "; confirmed ones first, by the upper end of that interval, then the candidates by q-value. Each mode is "
        "described by the terms its rows share and the rest of its cells do not (marked in the examples). "
        "Examples are a random draw of the mode's rows that score below their cell, not its most activating rows.</p>"
    )
    nothing = f"No failure mode confirmed held out ({tried(crossfit, 'failure_modes', modes)})."
    tables = verdict_tables(modes, top, head, row, nothing, crossfit)
    return f"<section><h2>Failure modes beyond the metadata</h2>{note}{tables}</section>"


def slices_section(run: Path, top: int, crossfit: dict[str, Any] | None = None) -> str:
    slices = read_table(run, S.SLICES_FILE)
    if not slices:
        return ""
    folds = (crossfit or {}).get("folds")
    head = (
        "<tr><th>#</th><th>slice</th><th>held-out mean score [95% CI]</th><th>in-sample mean</th>"
        "<th>scored rows</th><th>examples</th></tr>"
    )

    def row(s: dict[str, Any]) -> str:
        suite = s.get("suite_mean")
        return (
            f"<tr><td class='num rank'>{s['rank']}</td><td>{_esc(s['slice'])}</td>"
            f"<td class='num'>{_ci(s['mean_score'], s['low'], s['high'])}"
            + (f"<div class='ex'>other rows {_num(suite)}</div>" if suite is not None else "")
            + f"{_verdict_cell(s, folds)}</td><td class='num'>{_num(s.get('mean_in_sample'))}</td>"
            f"<td class='num'>{s['n_rows']:,}</td><td class='ex'>{_esc(', '.join(s['example_row_ids']))}</td></tr>"
        )

    fields = sorted({k for s in slices for k in json.loads(s["conditions"])})
    judged = judged_text(crossfit)
    note = (
        f"<p>Conjunctions of metadata values (fields: {_esc(', '.join(fields))}) whose mean score is low, measured "
        "on rows the slice was not chosen on and compared with the other rows of the same fold"
        + (f" ({_esc(judged)})" if judged else "")
        + "; confirmed ones first, by the upper end of the held-out interval, then the candidates by q-value. What "
        "the metadata already says — the failure modes above are what it does not.</p>"
    )
    nothing = f"No slice confirmed held out ({tried(crossfit, 'slices', slices)})."
    return (
        f"<section><h2>Weakest slices</h2>{note}{verdict_tables(slices, top, head, row, nothing, crossfit)}</section>"
    )
