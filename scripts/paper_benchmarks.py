"""The paper's benchmarks at hand (nine of its ten; WinoGrande is not in ../shared/data), as one reading-only
suite, and the real-use reference prompts, for `cg-ray extract` (docs/results.md, "The paper's benchmarks").

    python scripts/paper_benchmarks.py prepare DATA_DIR WORK_DIR
    python scripts/paper_benchmarks.py table RUN_DIR [REFERENCE]  # after `cg-ray scope`: markdown beside the paper
    python scripts/paper_benchmarks.py containment RUN_DIR [BENCHMARK ...]  # which benchmark covers which

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


def _pct(share: float) -> str:
    return f"{100 * share:.1f}"


def containment(run: Path, names: list[str]) -> dict[tuple[str, str], dict[str, float]]:
    """Per ordered pair (A, B) of the run's benchmarks: the share of A's rows that B covers — scope's row view
    with A as the reference and B as the benchmark, 1 − A's uncovered share, interval by cluster — and, per
    concept as Qwen-Scope counts features, the share of the concepts in A's use that are no gap of B by
    scope's excess rule. Prints both as markdown (rows A, columns B) and returns the figures."""
    import time

    import numpy as np

    from cg_ray.scope.clustered import grouped_shares
    from cg_ray.scope.reference import ScopeRule, compare
    from cg_ray.scope.run import read_fired
    from cg_ray.scope.uncovered import UncoveredRule, coverage_of_fired

    started = time.monotonic()
    read = read_fired(run / "rows.parquet", [])
    groups, fired, clusters = read.acts.groups, read.fired, read.clusters
    benches = names or read.acts.group_names()
    have = read.acts.group_names()
    unknown = sorted(set(benches) - set(have))
    if unknown:
        raise SystemExit(f"{run / 'rows.parquet'}: no benchmark {', '.join(unknown)} (it has {have})")
    rule = ScopeRule()
    shares = {b: grouped_shares(fired[np.flatnonzero(groups == b)], clusters[groups == b]) for b in benches}
    out: dict[tuple[str, str], dict[str, float]] = {}
    for a in benches:
        a_fires, a_n = read.counts.pooled([a])
        used = a_fires / a_n >= rule.min_share  # the concepts A uses, by A's own rows
        for b in (b for b in benches if b != a):
            view = coverage_of_fired(fired, groups == b, groups == a, clusters, UncoveredRule.of(rule))
            u = view.uncovered_share
            b_fires, b_n = read.counts.pooled([b])
            cmp = compare(b_fires, b_n, a_fires, a_n, rule, bench_shares=shares[b], ref_shares=shares[a])
            gaps = cmp.table["gap"].to_numpy(bool) & used
            out[a, b] = {"rows": 1 - u.share, "low": 1 - u.high, "high": 1 - u.low,
                         "concepts": 1 - gaps.sum() / max(int(used.sum()), 1), "used": int(used.sum())}  # fmt: skip
    header = f"| A \\ B | {' | '.join(benches)} |\n" + "|---" * (len(benches) + 1) + "|"
    print(f"\nrows of A that B covers (95% interval by cluster)\n\n{header}")
    for a in benches:
        cells = ["—" if a == b else f"{_pct(out[a, b]['rows'])}% [{_pct(out[a, b]['low'])}, {_pct(out[a, b]['high'])}]"
                 for b in benches]  # fmt: skip
        print(f"| {a} | {' | '.join(cells)} |")
    print(f"\nconcepts A uses (≥ 2% of its rows) that are no gap of B\n\n{header}")
    for a in benches:
        cells = ["—" if a == b else f"{_pct(out[a, b]['concepts'])}% of {out[a, b]['used']:,}" for b in benches]
        print(f"| {a} | {' | '.join(cells)} |")
    print(f"\n{len(benches)} benchmarks, {len(groups):,} rows: {time.monotonic() - started:.0f} s")
    return out


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
    elif len(sys.argv) >= 3 and sys.argv[1] == "containment":
        containment(Path(sys.argv[2]), sys.argv[3:])
    else:
        sys.exit(__doc__)
