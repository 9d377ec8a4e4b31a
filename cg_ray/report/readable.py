"""The report's "Readable gaps" section: per described concept its description, metadata
enrichment and a highlighted in-suite example (from `cg-ray describe`; empty when it has not run)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from cg_ray.describe.outputs import read_descriptions, read_themes


def _esc(text: object) -> str:
    return html.escape(str(text))


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def highlighted(example: dict[str, Any]) -> str:
    """The example's snippet, HTML-escaped, with the activating span in <mark>."""
    text, start, end = example.get("snippet") or "", example.get("span_start"), example.get("span_end")
    if start is None or end is None:
        return _esc(text)
    return f"{_esc(text[:start])}<mark>{_esc(text[start:end])}</mark>{_esc(text[end:])}"


def _concept_rows(descriptions: list[dict[str, Any]]) -> str:
    head = (
        "<tr><th>concept</th><th>description</th><th>source</th><th>X_model</th><th>rows</th>"
        "<th>over-represented</th><th>example (score)</th></tr>"
    )
    body = []
    for d in descriptions:
        examples = d.get("examples") or []
        example = (
            f'<span class="ex">{highlighted(examples[0])} <b>({_fmt(examples[0].get("score"), 2)})</b></span>'
            if examples
            else ""
        )
        score = "" if d.get("detection_score") is None else f" (detection {d['detection_score']:.2f})"
        body.append(
            f"<tr><td>{d['concept_id']}</td><td>{_esc(d['description'])}</td><td>{_esc(d['source'])}{score}</td>"
            f'<td class="num">{_fmt(d.get("X_model"))}</td><td class="num">{d["n_active_rows"]}</td>'
            f"<td>{'<br>'.join(_esc(e) for e in d['metadata_enrichment'])}</td><td>{example}</td></tr>"
        )
    return f"<table>{head}{''.join(body)}</table>"


def readable_html(run_dir: Path) -> str:
    """The section, or "" when the run has no descriptions.parquet."""
    descriptions = read_descriptions(run_dir)
    if not descriptions:
        return ""
    themes = read_themes(run_dir) or {}
    skipped = (themes.get("summary") or {}).get("metadata_fields", {}).get("skipped") or {}
    note = (
        '<p class="ex">Metadata fields not analysed: '
        + "; ".join(f"{_esc(k)} ({_esc(v)})" for k, v in skipped.items())
        + "</p>"
        if skipped
        else ""
    )
    # The themes stay in themes.json; the report's groups of concepts are the failure modes at its top.
    return (
        "<section><h2>Readable gaps</h2><h3>Described concepts</h3>" + _concept_rows(descriptions) + note + "</section>"
    )
