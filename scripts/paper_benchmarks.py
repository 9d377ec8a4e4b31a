"""The paper's benchmarks at hand (nine of its ten; WinoGrande is not in ../shared/data), as one reading-only
suite, and the real-use reference prompts, for `cg-ray extract` (docs/results.md, "The paper's benchmarks").

    python scripts/paper_benchmarks.py prepare DATA_DIR WORK_DIR
    python scripts/paper_benchmarks.py table RUN_DIR [REFERENCE]  # after `cg-ray scope`: markdown beside the paper

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


# The paper's missing shares (its project website's data: DeepSeek-R1-Distill-Llama-8B, 32,086 concepts;
# ../shared/design/paper-benchmark-gaps.md), by the names above.
PAPER_MISSING = {
    "agieval": 0.130,
    "logicbench": 0.200,
    "gsm8k": 0.253,
    "nq_open": 0.542,
    "bbq": 0.670,
    "social_iqa": 0.427,
    "math": 0.123,
    "vectara": 0.064,
    "crows_pairs": 0.353,
}


def table(run: Path, reference: str = "ref:real_use") -> None:
    import pyarrow.parquet as pq

    rows = pq.read_table(run / "scope" / "coverage.parquet").to_pylist()
    cov = {r["benchmark"]: r for r in rows if r["reference"] == reference}
    summary = json.loads((run / "scope" / "summary.json").read_text(encoding="utf-8"))
    print(
        "| benchmark | rows | missing (χ_bench < ε) | of live concepts | no firing row | 0 rows ⇒ share below | paper |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in [n for n, _ in NINE.values()]:
        c = cov.get(name)
        if c is None:
            continue
        print(
            f"| {name} | {c['rows']:,} | {100 * c['missing_share']:.1f}% | {100 * c['missing_share_of_live']:.1f}% "
            f"| {100 * c['never_fires_share']:.1f}% | {100 * c['missing_bound']:.2f}% "
            f"| {100 * PAPER_MISSING[name]:.1f}% |"
        )
    suite = summary["suite"]
    print(
        f"\nsuite: {100 * suite['missing_share']:.2f}% missing ({suite['missing_concepts']} of {suite['d_sae']}; "
        f"{suite['live_concepts']} live); most over-represented (X_bench):"
    )
    for o in suite["over_represented"]:
        print(f"  {o['concept_id']}: X_bench {o['x_bench']:.1f}  {o.get('label')}")


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
    if len(sys.argv) == 4 and sys.argv[1] == "prepare":
        prepare(Path(sys.argv[2]), Path(sys.argv[3]))
    elif len(sys.argv) in (3, 4) and sys.argv[1] == "table":
        table(Path(sys.argv[2]), *sys.argv[3:])
    else:
        sys.exit(__doc__)
