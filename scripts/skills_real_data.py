"""Build the issue-15 real matrices from ../shared/data and run `cg-ray skills` / `cg-ray estimate` on them.

Nothing from ../shared/data is copied into the repository: the per-row score tables this script builds are
written under OUT (default runs/skills-real, git-ignored) and read back by the CLI.

AlpacaEval preferences hold two pools that must not be mixed: 58 models judged against gpt4_1106_preview
(weighted GPT-4-turbo annotator, AlpacaEval 2.0) and 52 against text_davinci_003 (GPT-4 annotator,
AlpacaEval 1.0); 94 distinct models in all. Each pool is a models × 805 instructions table; tasks are its
source subsets (metadata.dataset). MT-Bench: GPT-4 single grades / 10, both turns averaged per question,
tasks = mt_bench.jsonl metadata.category.

The concept level: the 805 instructions (their texts are in arena/alpaca_eval_battles.jsonl) are read once
through the default reader (`cg-ray extract`, cached as OUT/alpaca_concepts.parquet, re-read when the shipped
SAE's weights_sha256 changes); `cg-ray skills --concepts` factors each pool's models × top-30 concepts
χ_model matrix and `cg-ray estimate --lomo --concepts` adds the per-concept RMSE. skills.json / estimate.json
record the SAE's weights_sha256.

    PYTHONPATH=$PWD flock /tmp/cg_heavy.lock nice -n 19 python scripts/skills_real_data.py [--out DIR] [--skip-lomo]
        [--skip-concepts] [--refresh-concepts] [--sweep-components 2,5,20,40]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
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


def alpaca_concept_rows(out: Path, *, refresh: bool = False) -> Path:
    """The 805 AlpacaEval instructions read once through the default reader (prompt text, raw, as the CG
    pipeline reads by default) → OUT/alpaca_concepts.parquet + its manifest (which records the SAE's
    weights_sha256). Cached: re-read only with --refresh-concepts or when the shipped SAE changed."""
    from cg_ray.activations.saes.base import file_fingerprint
    from cg_ray.activations.saes.spec import default_sae_dir

    rows, manifest = out / "alpaca_concepts.parquet", out / "alpaca_concepts.manifest.json"
    shipped = file_fingerprint(default_sae_dir() / "sae_weights.safetensors")
    if rows.exists() and manifest.exists() and not refresh:
        cached = json.loads(manifest.read_text())["reader"]["sae"].get("weights_sha256")
        if cached == shipped:
            print(f"alpaca concepts: cached {rows} (SAE {cached})")
            return rows
        print(f"alpaca concepts: cache is from SAE {cached}, the shipped SAE is {shipped}: re-reading")
    texts: dict[str, dict[str, object]] = {}
    with (SHARED / "arena" / "alpaca_eval_battles.jsonl").open() as fh:
        for line in fh:
            battle = json.loads(line)
            row_id = battle["question_id"].replace("alpaca_eval-", "alpacaeval-")  # the preferences' ids
            texts.setdefault(
                row_id,
                {
                    "id": row_id,
                    "benchmark": "alpaca_eval",
                    "score": None,
                    "prompt": battle["conversation_a"][0]["content"],
                    "metadata": {"dataset": battle["dataset"]},
                },
            )
    source = out / "alpaca_instructions.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in texts.values()))
    print(f"alpaca concepts: reading {len(texts)} instructions with the default reader")
    argv = ["extract", "--input", str(source), "--out", str(rows), "--allow-missing-scores", "--text", "prompt"]
    subprocess.run([sys.executable, "-m", "cg_ray.cli", *argv], check=True)
    return rows


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


def _cli(argv: list[str]) -> None:
    code = cli.main(argv)
    if code:
        print(f"cg-ray {argv[0]} exited {code}")


def concept_labels(out: Path, pool: str, suffix: str = "") -> None:
    """The top concepts' labels (the shipped SAE's labels.jsonl) beside each concept's main skill."""
    from cg_ray.activations.saes.spec import default_sae_dir
    from cg_ray.labels import load_labels

    skills = out / f"skills-{pool}-concepts{suffix}"
    if not (skills / "loadings.csv").exists():
        return
    labels = load_labels(default_sae_dir() / "labels.jsonl")
    loadings = pd.read_csv(skills / "loadings.csv", index_col="task")
    print(f"{pool} concepts{suffix} (label, main skill, communality):")
    for task, row in loadings.iterrows():
        label = labels.get(int(str(task).removeprefix("c"))) or "?"
        print(f"  {task:>6} {label[:60]:60} {row.get('main_skill')} {row.get('communality', float('nan')):.2f}")


def sweep_components(out: Path, pool: Path, ks: list[int]) -> None:
    """LOMO (5/10/25%) with each number of PPCA dimensions: does more or less structure in the prior help?"""
    rows = []
    for k in ks:
        target = out / f"sweep-components-{k}"
        argv = ["estimate", "--scores", str(pool), "--lomo", "--oracle", "--components", str(k)]
        _cli([*argv, "--budgets", "0.05,0.1,0.25", "--random-repeats", "1", "--out", str(target), "--overwrite"])
        table = pd.read_csv(target / "lomo_summary.csv")
        rows.append(table[table["method"].isin(["active", "oracle_active"])].assign(components=k))
    wide = pd.concat(rows).pivot_table(index="components", columns=["method", "budget"], values="rmse")
    print(wide.round(4).to_string())
    print(noise_floor(pool, ks).round(4).to_string())


def noise_floor(pool: Path, ks: list[int], budgets: tuple[float, ...] = (0.05, 0.1, 0.25)) -> pd.DataFrame:
    """A floor under a rank-K + independent-noise model of the rows: even knowing a model's K-dimensional
    part exactly, the per-row residual of the N − n unscored rows stays unknown, so any estimator of the mean
    over N rows from n rows has RMSE ≥ σ_K·√(N − n)/N, σ²_K the per-row variance K components leave
    unexplained (fitted on all models, spread over N − K rows). Optimistic in-sample; a larger K lowers σ_K."""
    from sklearn.decomposition import PCA

    from cg_ray.skills.matrix import read_long, rows_matrix

    data = rows_matrix(read_long(pool), str(pool))
    filled = pd.DataFrame(data.scores).fillna(pd.DataFrame(data.scores).mean()).to_numpy()
    n_rows = filled.shape[1]
    out = []
    total = float(filled.var(axis=0, ddof=1).sum())
    for k in ks:
        kept = float(PCA(n_components=k, svd_solver="full").fit(filled).explained_variance_.sum())
        sigma = ((total - kept) / (n_rows - k)) ** 0.5  # Tipping–Bishop: the rest spread over n_rows − k rows
        floor = {f"floor {b:.0%}": sigma * (n_rows - round(b * n_rows)) ** 0.5 / n_rows for b in budgets}
        out.append({"components": k, "sigma_row": sigma, **floor})
    return pd.DataFrame(out).set_index("components")


def calibration_check(pool: Path, concepts: Path, budget: float = 0.1, every: int = 3) -> dict[str, float]:
    """Nested check of the calibrated SEs: every `every`-th model held out, calibrated on (up to 20 of) the
    others only, then the share of its overall, per-task and per-concept scores inside ±1.96 SE, as the prior
    claims them and calibrated."""
    import numpy as np

    from cg_ray.skills.calibrate import SeCalibration
    from cg_ray.skills.concepts import concept_weights, read_concept_rows, top_concepts
    from cg_ray.skills.config import EstimateConfig
    from cg_ray.skills.estimate import choose_rows, fit_prior, group_weights, posterior_estimate
    from cg_ray.skills.matrix import read_long, rows_matrix

    data = rows_matrix(read_long(pool), str(pool))
    acts = read_concept_rows(concepts).aligned(data.row_ids)
    weights = concept_weights(acts, top_concepts(acts, 30, 20, 0.25))
    config = EstimateConfig()
    inside: dict[str, list[bool]] = {f"{k}{s}": [] for k in ("overall", "tasks", "concepts") for s in ("", "_raw")}
    for m in range(0, data.scores.shape[0], every):
        y, others = data.scores[m], np.delete(data.scores, m, axis=0)
        available = ~np.isnan(y)
        n = round(budget * int(available.sum()))
        prior = fit_prior(others, config.n_components, config.seed)
        rows = choose_rows(prior, available, n, config.design, config.seed + m)
        raw = posterior_estimate(prior, available, rows, y[rows], data.tasks, weights)
        calibrated = SeCalibration(others, data.tasks, config, weights).apply(raw, n)
        names, w = group_weights(available, data.tasks, weights)
        truth = y[available] @ w
        for est, suffix in ((calibrated, ""), (raw, "_raw")):
            inside[f"overall{suffix}"].append(abs(est.overall - truth[0]) <= 1.96 * est.overall_se)
            for g, task in enumerate(names[1:], 1):
                inside[f"tasks{suffix}"].append(abs(est.per_task[task] - truth[g]) <= 1.96 * est.per_task_se[task])
            err = np.abs(est.per_concept - truth[len(names) :])
            ok = ~np.isnan(err)
            inside[f"concepts{suffix}"] += list(err[ok] <= 1.96 * est.per_concept_se[ok])
    return {k: float(np.mean(v)) for k, v in inside.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/skills-real"))
    parser.add_argument("--skip-lomo", action="store_true")
    parser.add_argument("--skip-concepts", action="store_true", help="no reading of the instructions, no concept step")
    parser.add_argument("--refresh-concepts", action="store_true", help="re-read the instructions (new SAE)")
    parser.add_argument("--sweep-components", default="", help="e.g. 2,5,20,40: LOMO per PPCA dimension count")
    parser.add_argument("--bootstrap", type=int, default=200)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tables = {**alpaca_tables(args.out), "mt_bench": mt_bench_table(args.out)}
    concepts = None if args.skip_concepts else alpaca_concept_rows(args.out, refresh=args.refresh_concepts)
    for name, path in tables.items():
        print(f"\n== cg-ray skills: {name}")
        argv = ["skills", "--scores", str(path), "--overwrite", "--bootstrap", str(args.bootstrap)]
        _cli([*argv, "--out", str(args.out / f"skills-{name}")])
        if concepts is not None and name in POOLS:
            print(f"\n== cg-ray skills --concepts: {name}")
            _cli([*argv, "--concepts", str(concepts), "--out", str(args.out / f"skills-{name}-concepts")])
            concept_labels(args.out, name)
            print(f"\n== cg-ray skills --concepts --relative: {name}")
            relative = args.out / f"skills-{name}-concepts-relative"
            _cli([*argv, "--concepts", str(concepts), "--relative", "--out", str(relative)])
            concept_labels(args.out, name, suffix="-relative")
    if not args.skip_lomo:
        for name in POOLS:
            print(f"\n== cg-ray estimate --lomo: {name}")
            argv = ["estimate", "--scores", str(tables[name]), "--lomo", "--oracle", "--random-repeats", "2"]
            argv += ["--concepts", str(concepts)] if concepts is not None else []
            _cli([*argv, "--out", str(args.out / f"estimate-{name}"), "--overwrite"])
    if concepts is not None and not args.skip_lomo:
        print("\n== calibrated SEs, nested check at 10% (95% coverage):")
        print(json.dumps(calibration_check(tables["alpaca_v2"], concepts), indent=1))
    if args.sweep_components:
        sweep_components(args.out, tables["alpaca_v2"], [int(k) for k in args.sweep_components.split(",")])
    summary = {
        name: json.loads((args.out / f"skills-{name}" / "skills.json").read_text()).get("n_factors")
        for name in tables
        if (args.out / f"skills-{name}" / "skills.json").exists()
    }
    print(json.dumps(summary, indent=1)[:3000])


if __name__ == "__main__":
    main()
