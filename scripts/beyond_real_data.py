"""Inputs and tables for "beyond the metadata" on real scored data (docs/failure_modes.md, docs/trust.md).

    python scripts/beyond_real_data.py prepare DATA_DIR WORK_DIR    # JSONL inputs for `cg-ray extract`
    python scripts/beyond_real_data.py table NAME=DIR[,DIR…] ...     # validate table over seeds (markdown)

(`table` reads the residual-lift curves of validate.json formats 2-3; from format 4 the `beyond` block is the
run's own judgement of the findings, and those curves are gone.)

`prepare` writes
- bbh_meta.jsonl: the 2,025 BIG-Bench Hard questions as ONE benchmark `bbh` with the task as metadata
  (`{"task": …}`), scored by code-davinci-002 (CoT) exact match;
- bbq.jsonl: the 1,800 BBQ questions (context + question + the three choices) as one benchmark `bbq` with
  `category`, `context_condition` and `question_polarity` as metadata, scored by UnifiedQA-T5-11B (RACE
  format): 1 when its prediction matches the gold answer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from trust_real_data import _jsonl, _write  # the same JSONL reading / atomic writing (scripts/ is on sys.path)


def prepare(data: Path, work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    outputs = data / "model_outputs"
    bbh_q = {r["id"]: r for r in _jsonl(data / "benchmarks" / "bbh.jsonl")}
    bbh = [r for r in _jsonl(outputs / "bbh_codex.jsonl") if r["model"] == "code-davinci-002-cot" and r["id"] in bbh_q]
    _write(
        work / "bbh_meta.jsonl",
        [
            {
                "id": r["id"],
                "benchmark": "bbh",
                "model": r["model"],
                "score": r["score"],
                "prompt": bbh_q[r["id"]]["prompt"],
                "metadata": {"task": r["metadata"]["task"]},
            }
            for r in bbh
        ],
    )
    bbq_q = {r["id"]: r for r in _jsonl(data / "benchmarks" / "bbq.jsonl")}
    bbq = [
        r for r in _jsonl(outputs / "bbq_unifiedqa.jsonl") if r["model"] == "unifiedqa-t5-11b-race" and r["id"] in bbq_q
    ]
    rows = []
    for r in bbq:
        q = bbq_q[r["id"]]
        choices = "\n".join(f"({chr(65 + i)}) {c}" for i, c in enumerate(q["choices"] or []))
        meta = q["metadata"]
        rows.append(
            {
                "id": r["id"],
                "benchmark": "bbq",
                "model": r["model"],
                "score": r["score"],
                "prompt": f"{q['prompt']}\n{choices}",
                "metadata": {k: meta[k] for k in ("category", "context_condition", "question_polarity")},
            }
        )
    _write(work / "bbq.jsonl", rows)


def _fmt(entry: dict[str, Any] | None, key: str = "lift") -> str:
    if not entry or entry.get(key) is None:
        return "—"
    return f"{entry[key]:+.3f}"


def table(named: list[str]) -> None:
    """Mean over seeds of lift and residual lift at k = 5 and 20 per ranking (markdown)."""
    print("| data set | ranking | lift@5 | lift@20 | residual lift@5 | residual lift@20 |")
    print("|---|---|---|---|---|---|")
    for item in named:
        name, dirs = item.split("=", 1)
        docs = [json.loads((Path(d) / "validate.json").read_text()) for d in dirs.split(",")]
        if any("rankings" not in (doc.get("beyond") or {}) for doc in docs):  # format 4 reports the run's findings
            raise SystemExit(f"{name}: these residual-lift curves are in validate.json of format 2-3 only")
        rankings = docs[0]["beyond"]["rankings"]
        for ranking in rankings:
            cells = []
            for curve in ("lift", "residual_lift"):
                for k in (5, 20):
                    vals = []
                    for doc in docs:
                        entries = doc["beyond"]["rankings"][ranking][curve]
                        hit = [e for e in entries if e["k"] == k] or entries[-1:]
                        if hit and hit[0]["value"] is not None:
                            vals.append(hit[0]["value"])
                    cells.append(f"{sum(vals) / len(vals):+.3f}" if vals else "—")
            print(f"| {name} | {ranking} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    cmd, *rest = sys.argv[1:]
    if cmd == "prepare":
        prepare(Path(rest[0]), Path(rest[1]))
    elif cmd == "table":
        table(rest)
    else:
        raise SystemExit(__doc__)
