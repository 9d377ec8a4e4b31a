"""Markdown tables of a described run (`cg-ray describe`), for the README and docs/readable.md.

    python scripts/readable_table.py RUN_DIR [--reason worst_X_model|least_covered] [--n 8]

One row per described concept with that reason, in the run's order (worst X_model first, or lowest
X_bench first): X_model, X_bench, active rows, the description, the enrichment and the top example with
its activating span in «» and the row's score.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pyarrow.parquet as pq


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def _example(example: dict, width: int = 60) -> str:
    snippet, start, end = example["snippet"], example.get("span_start"), example.get("span_end")
    if start is None or end is None:
        return f"{_cell(snippet[:width])} ({example['score']:g})"
    span = snippet[start:end]
    left = snippet[max(0, start - width // 2) : start] + span[: len(span) - len(span.lstrip())]
    right = snippet[end : end + width // 2]
    left, span, right = (t.replace("*", "\\*").replace("\n", " ") for t in (left, span, right))
    text = f"{left}«{span.strip() or '␣'}»{right}"  # «» rather than bold: spans are often "*" or "**" themselves
    return f"…{text}… ({example['score']:g})".replace("|", "\\|")


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("run_dir", type=Path)
    p.add_argument("--reason", default="worst_X_model", choices=("worst_X_model", "least_covered"))
    p.add_argument("--n", type=int, default=8)
    args = p.parse_args()
    rows = [r for r in pq.read_table(args.run_dir / "descriptions.parquet").to_pylist() if args.reason in r["reasons"]]
    key = "X_model" if args.reason == "worst_X_model" else "X_bench"
    rows.sort(key=lambda r: (r[key] is None, r[key] if r[key] is not None else 0.0, r["concept_id"]))
    print("| concept | X_model | X_bench | rows | description | enrichment | example (span in «»; score) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows[: args.n]:
        examples = json.loads(r["examples"])
        print(
            f"| {r['concept_id']} | {_num(r['X_model'])} | {_num(r['X_bench'])} | {r['n_active_rows']} "
            f"| {_cell(r['description'])} | {_cell('; '.join(r['metadata_enrichment'][:2])) or '—'} "
            f"| {_example(examples[0]) if examples else '—'} |"
        )


if __name__ == "__main__":
    main()
