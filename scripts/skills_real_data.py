"""Build the issue-15 real matrices from ../shared/data and run `cg-ray skills` / `cg-ray estimate` on them.

Nothing from ../shared/data is copied into the repository: the per-row score tables this script builds are
written under OUT (default runs/skills-real, git-ignored) and read back by the CLI.

AlpacaEval preferences hold two pools that must not be mixed: 58 models judged against gpt4_1106_preview
(weighted GPT-4-turbo annotator, AlpacaEval 2.0) and 52 against text_davinci_003 (GPT-4 annotator,
AlpacaEval 1.0); 94 distinct models in all. Each pool is a models × 805 instructions table; tasks are its
source subsets (metadata.dataset). MT-Bench: GPT-4 single grades / 10, both turns averaged per question,
tasks = mt_bench.jsonl metadata.category.

    PYTHONPATH=$PWD flock /tmp/cg_heavy.lock nice -n 19 python scripts/skills_real_data.py [--out DIR] [--skip-lomo]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from cg_ray import cli

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
POOLS = {
    "alpaca_v2": ("gpt4_1106_preview", "weighted_alpaca_eval_gpt4_turbo"),
    "alpaca_v1": ("text_davinci_003", "alpaca_eval_gpt4"),
}


def alpaca_tables(out: Path) -> dict[str, Path]:
    frame = pd.read_json(SHARED / "model_outputs" / "alpaca_eval_preferences.jsonl", lines=True)
    meta = pd.json_normalize(frame["metadata"].tolist())
    frame["task"], frame["opponent"], frame["annotator"] = meta["dataset"], meta["opponent"], meta["annotator"]
    paths = {}
    for name, (opponent, annotator) in POOLS.items():
        pool = frame[(frame["opponent"] == opponent) & (frame["annotator"] == annotator)]
        dup = pool.duplicated(["model", "id"], keep="first")
        if dup.any():  # two models (vicuna-*-v1.5) carry every row twice in the source: keep the first
            print(f"{name}: dropped {int(dup.sum())} repeated rows of {sorted(pool.loc[dup, 'model'].unique())}")
        pool = pool[~dup].rename(columns={"id": "row_id"})[["model", "row_id", "score", "task"]]
        paths[name] = out / f"{name}_rows.parquet"
        pool.to_parquet(paths[name], index=False)
        print(
            f"{name}: {pool['model'].nunique()} models × {pool['row_id'].nunique()} rows, "
            f"{pool['score'].isna().sum()} null scores"
        )
    return paths


def mt_bench_table(out: Path) -> Path:
    judged = pd.read_json(SHARED / "model_outputs" / "mt_bench_gpt4_single_judgments.jsonl", lines=True)
    questions = pd.read_json(SHARED / "benchmarks" / "mt_bench.jsonl", lines=True)
    category = {q["id"]: q["metadata"]["category"] for _, q in questions.iterrows()}
    judged["task"] = judged["id"].map(category)
    long = judged.groupby(["model", "id", "task"], as_index=False)["score"].mean().rename(columns={"id": "row_id"})
    path = out / "mt_bench_rows.parquet"
    long.to_parquet(path, index=False)
    print(
        f"mt_bench: {long['model'].nunique()} models × {long['row_id'].nunique()} questions, "
        f"{long['task'].nunique()} categories"
    )
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/skills-real"))
    parser.add_argument("--skip-lomo", action="store_true")
    parser.add_argument("--bootstrap", type=int, default=200)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tables = {**alpaca_tables(args.out), "mt_bench": mt_bench_table(args.out)}
    for name, path in tables.items():
        print(f"\n== cg-ray skills: {name}")
        code = cli.main(
            [
                "skills",
                "--scores",
                str(path),
                "--out",
                str(args.out / f"skills-{name}"),
                "--overwrite",
                "--bootstrap",
                str(args.bootstrap),
            ]
        )
        if code:
            print(f"{name}: skills exited {code}")
    if not args.skip_lomo:
        for name in POOLS:
            print(f"\n== cg-ray estimate --lomo: {name}")
            cli.main(
                [
                    "estimate",
                    "--scores",
                    str(tables[name]),
                    "--lomo",
                    "--out",
                    str(args.out / f"estimate-{name}"),
                    "--overwrite",
                ]
            )
    summary = {
        name: json.loads((args.out / f"skills-{name}" / "skills.json").read_text()).get("n_factors")
        for name in tables
        if (args.out / f"skills-{name}" / "skills.json").exists()
    }
    print(json.dumps(summary, indent=1)[:3000])


if __name__ == "__main__":
    main()
