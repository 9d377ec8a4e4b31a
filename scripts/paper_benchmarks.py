"""The paper's benchmarks at hand (nine of its ten; WinoGrande is not in ../shared/data), as one reading-only
suite, and the real-use reference prompts, for `cg-ray extract` (docs/results.md, "The paper's benchmarks").

    python scripts/paper_benchmarks.py prepare DATA_DIR WORK_DIR

writes
- WORK_DIR/paper_suite.jsonl: every row of the nine benchmarks as the model would see it (the prompt, and
  for multiple-choice benchmarks the lettered options, through the product's own loader and templates), no
  score (X_bench needs none: `cg-ray extract --allow-missing-scores`);
- WORK_DIR/real_use.jsonl: the prompts users wrote to chat models (Arena-Hard, MT-Bench first turns,
  AlpacaEval's instructions), one benchmark `real_use`: the reference of real use for `cg-ray scope`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from cg_ray.benchmarks.local import load_normalized
from cg_ray.benchmarks.sources import NormalizedSource

CHOICES = "{prompt}\n{choices}"
# benchmark file -> (the name the paper's figures use, the template its rows are shown with)
NINE = {
    "nq_open.jsonl": ("nq_open", None),
    "vectara_hallucination.jsonl": ("vectara", None),
    "gsm8k.jsonl": ("gsm8k", None),
    "math500.jsonl": ("math", None),
    "agieval_en.jsonl": ("agieval", CHOICES),
    "logicbench.jsonl": ("logicbench", CHOICES),
    "social_iqa.jsonl": ("social_iqa", CHOICES),
    "bbq.jsonl": ("bbq", CHOICES),
    "crows_pairs.jsonl": ("crows_pairs", CHOICES),
}


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, path)  # nothing half-written


def suite_rows(data: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for file, (name, template) in NINE.items():
        source = NormalizedSource(kind="normalized", path=str(data / "benchmarks" / file), benchmark=name)
        if template is not None:
            source = source.model_copy(update={"prompt_template": template})
        for r in load_normalized(source):
            rows.append(
                {"id": r["row_id"], "benchmark": name, "prompt": r["prompt"], "metadata": json.loads(r["metadata"])}
            )
    return rows


def real_use_rows(data: Path) -> list[dict[str, object]]:
    seen: set[str] = set()
    rows: list[dict[str, object]] = []

    def add(rid: str, text: str) -> None:
        if text and text not in seen:  # AlpacaEval repeats each instruction across battles
            seen.add(text)
            rows.append({"id": rid, "benchmark": "real_use", "prompt": text})

    for file in ("arena_hard.jsonl", "mt_bench.jsonl"):
        for line in (data / "benchmarks" / file).open(encoding="utf-8"):
            r = json.loads(line)
            add(r["id"], r["prompt"])
    for i, line in enumerate((data / "arena" / "alpaca_eval_battles.jsonl").open(encoding="utf-8")):
        r = json.loads(line)
        turns = r.get("conversation_a") or r.get("messages") or []
        first = next((t.get("content", "") for t in turns if t.get("role") == "user"), r.get("instruction", ""))
        add(str(r.get("question_id", f"alpaca-{i}")), first)
    return rows


def prepare(data: Path, work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    suite = suite_rows(data)
    _write(work / "paper_suite.jsonl", suite)
    real = real_use_rows(data)
    _write(work / "real_use.jsonl", real)
    counts: dict[str, int] = {}
    for r in suite:
        counts[str(r["benchmark"])] = counts.get(str(r["benchmark"]), 0) + 1
    print(f"paper_suite.jsonl: {len(suite)} rows {counts}; real_use.jsonl: {len(real)} prompts")


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "prepare":
        sys.exit(__doc__)
    prepare(Path(sys.argv[2]), Path(sys.argv[3]))
