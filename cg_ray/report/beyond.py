"""The report's first sections: failure modes beyond the metadata, then the weakest slices."""

from __future__ import annotations

import html
import json
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


def _esc(text: object) -> str:
    return html.escape(str(text))


def _num(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _ci(value: float | None, low: float | None, high: float | None, signed: bool = False) -> str:
    return f"{_num(value, signed)} <span class='ci'>[{_num(low, signed)}, {_num(high, signed)}]</span>"


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


def _variants(variants: list[dict[str, Any]]) -> str:
    """Other groups of concepts whose rows read the same: one line, so the table lists distinct failures."""
    if not variants:
        return ""
    parts = [
        f"concepts {', '.join(map(str, v['concept_ids'][:3]))}{' …' if len(v['concept_ids']) > 3 else ''} "
        f"({v['n_rows']:,} rows, residual {_num(v['residual'])})"
        for v in variants
    ]
    return f"<div class='variants'>Other concept groups whose rows read the same: {'; '.join(parts)}</div>"


def failure_modes_section(run: Path, top: int) -> str:
    modes = read_table(run, S.FAILURE_MODES_FILE)[:top]
    if not modes:
        return ""
    adjusted = ", ".join(modes[0]["adjusted_for"]) or "nothing (the suite mean)"
    texts = row_texts(run, {rid for m in modes for rid in m["example_row_ids"][:EXAMPLES]})
    head = (
        "<tr><th>#</th><th>failure mode</th><th>residual [95% CI]</th><th>score: actual vs expected</th>"
        "<th>rows</th><th>concepts</th></tr>"
    )
    body = "".join(
        f"<tr><td class='num rank'>{m['rank']}</td><td><b>{_esc(m['description'])}</b>"
        f"{_examples(m['example_row_ids'], texts, m['terms'])}{_variants(m.get('variants') or [])}</td>"
        f"<td class='num'>{_ci(m['residual'], m['residual_low'], m['residual_high'], True)}</td>"
        f"<td class='num'>{_num(m['mean_score'])} vs {_num(m['expected_score'])}</td>"
        f"<td class='num'>{m['n_rows']:,}</td><td>{', '.join(map(str, m['concept_ids'][:6]))}"
        f"{' …' if len(m['concept_ids']) > 6 else ''}</td></tr>"
        for m in modes
    )
    note = (
        f"<p>Groups of concepts that fire on the same rows, ranked by how far those rows score below what their "
        f"own metadata cell predicts (adjusted for <b>{_esc(adjusted)}</b>; most confidently below first). "
        "Residual = mean of (score − the row's cell mean) over the mode's scored rows. Each is described by "
        "the terms its rows share and the rest of the suite does not (marked in the examples); groups whose rows "
        "read the same are listed under the better one, with their own figures.</p>"
    )
    return f"<section><h2>Failure modes beyond the metadata</h2>{note}<table>{head}{body}</table></section>"


def slices_section(run: Path, top: int) -> str:
    slices = read_table(run, S.SLICES_FILE)[:top]
    if not slices:
        return ""
    head = "<tr><th>#</th><th>slice</th><th>mean score [95% CI]</th><th>scored rows</th><th>examples</th></tr>"
    body = "".join(
        f"<tr><td class='num rank'>{s['rank']}</td><td>{_esc(s['slice'])}</td>"
        f"<td class='num'>{_ci(s['mean_score'], s['low'], s['high'])}</td><td class='num'>{s['n_rows']:,}</td>"
        f"<td class='ex'>{_esc(', '.join(s['example_row_ids']))}</td></tr>"
        for s in slices
    )
    fields = sorted({k for s in slices for k in json.loads(s["conditions"])})
    note = (
        f"<p>Conjunctions of metadata values (fields: {_esc(', '.join(fields))}) whose mean score is confidently "
        "low, ranked by the upper end of its 95% interval; a slice holding nearly the same rows as a better one "
        "is left out. What the metadata already says — the failure modes above are what it does not.</p>"
    )
    return f"<section><h2>Weakest slices</h2>{note}<table>{head}{body}</table></section>"
