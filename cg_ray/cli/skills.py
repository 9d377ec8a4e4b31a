"""`cg-ray skills` and `cg-ray estimate` (cg_ray.skills); heavy imports happen in the handlers."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cg_ray.cli.options import add_command, comma_list, validated


def _add_concept_selection(p: argparse.ArgumentParser) -> None:
    """Which concepts are the columns (skills) or the estimated scores (estimate): shared by both commands."""
    p.add_argument("--top-concepts", type=int, default=30, help="with --concepts: the K concepts of largest coverage")
    p.add_argument("--min-concept-rows", type=int, default=20, help="with --concepts: rows a top concept is active on")
    p.add_argument(
        "--max-concept-share", type=float, default=0.25, help="with --concepts: most rows (share) a top concept is on"
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "skills", _skills)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--matrix", type=Path, help="wide CSV/parquet: a `model` column, one column per task")
    src.add_argument("--runs", type=Path, nargs="+", help="run directories: per-benchmark mean scores")
    src.add_argument("--scores", type=Path, help="per-row scores (model,row_id,score,task): task means")
    p.add_argument("--task-field", default=None, help="with --scores: the column or JSONL metadata key naming the task")
    p.add_argument(
        "--concepts",
        type=Path,
        default=None,
        help="with --scores: rows.parquet of the suite read by `cg-ray extract`: factor the models × top concepts "
        "χ_model matrix instead of task means",
    )
    _add_concept_selection(p)
    p.add_argument(
        "--relative",
        action="store_true",
        help="with --concepts: factor χ_model minus each model's overall score (its own concept profile)",
    )
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--n-factors", type=int, default=None, help="force K factors")
    p.add_argument("--max-missing", type=float, default=0.2, help="largest missing share per task / model")
    p.add_argument("--bootstrap", type=int, default=0, help="bootstrap resamples over models for stability")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--overwrite", action="store_true")

    e = add_command(subparsers, "estimate", _estimate)
    e.add_argument("--scores", type=Path, required=True, help="per-row scores: model,row_id,score[,task]")
    e.add_argument("--task-field", default=None, help="the column or JSONL metadata key naming the task")
    mode = e.add_mutually_exclusive_group(required=True)
    mode.add_argument("--holdout", metavar="MODEL", help="treat MODEL as new: reveal its rows only as chosen")
    mode.add_argument("--lomo", action="store_true", help="leave-one-model-out, active vs random, at --budgets")
    mode.add_argument(
        "--observed",
        type=Path,
        metavar="FILE",
        help="a new model's scores so far (row_id,score; .csv/.jsonl/.parquet, may be empty): the estimate and "
        "the next batch to score (next_batch.csv); budget = the largest --budgets",
    )
    e.add_argument("--out", type=Path, required=True)
    e.add_argument("--budgets", type=comma_list(float, "fractions"), default=(0.01, 0.02, 0.05, 0.10, 0.25, 0.50))
    e.add_argument("--batch", type=int, default=8, help="rows per batch (--holdout)")
    e.add_argument("--components", type=int, default=10, help="latent dimensions of the row prior")
    e.add_argument("--target-se", type=float, default=None, help="--holdout: stop once the overall SE is below")
    e.add_argument("--random-repeats", type=int, default=5)
    e.add_argument(
        "--noise",
        choices=("mle", "sample"),
        default="sample",
        help="per-row noise of the prior: sklearn's (default; overstated with fewer models than rows, but more "
        "accurate on AlpacaEval) or the Tipping–Bishop MLE",
    )
    e.add_argument(
        "--design",
        choices=("balanced", "greedy"),
        default="balanced",
        help="row order: spread evenly over row easiness (default; robust when the prior misjudges a new model) "
        "or greedy variance reduction of the overall score (ACE; best when the prior is right)",
    )
    e.add_argument(
        "--calibrate-models",
        type=int,
        default=20,
        help="--holdout/--observed: reference models held out in turn to calibrate the overall SE (0: the "
        "prior's own SE, ~3x too wide on AlpacaEval)",
    )
    e.add_argument("--oracle", action="store_true", help="--lomo: add the bound with the held-out model in the prior")
    e.add_argument(
        "--concepts", type=Path, default=None, help="rows.parquet of the suite (cg-ray extract): estimate χ_model too"
    )
    _add_concept_selection(e)
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--overwrite", action="store_true")


def _skills(args: argparse.Namespace) -> int:
    """latent skills behind a models × tasks score matrix (PAF + varimax), redundancy, model profiles

    Standardise a models × tasks matrix, choose the number of factors (parallel analysis; scree, Kaiser and the
    IQ-test paper's rule reported), fit principal axis factoring + varimax, and write loadings.csv,
    profiles.csv, redundancy.csv, profile_from_k.csv, skills.json and report.html to --out."""
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.errors import ConfigError
    from cg_ray.report.skills import skills_page
    from cg_ray.skills.analysis import run_skills
    from cg_ray.skills.concepts import concept_frame
    from cg_ray.skills.config import SkillsConfig
    from cg_ray.skills.matrix import matrix_from_long, matrix_from_runs, read_long, read_matrix, rows_matrix
    from cg_ray.skills.outputs import write_skills

    config = validated(SkillsConfig, {k: getattr(args, k) for k in ("n_factors", "max_missing", "bootstrap", "seed")})
    concepts: dict[str, Any] | None = None
    if args.concepts is not None and args.scores is None:
        raise ConfigError("--concepts needs --scores (the per-row scores of the rows it read)")
    if args.relative and args.concepts is None:
        raise ConfigError("--relative needs --concepts (it is χ_model minus the overall score)")
    if args.matrix is not None:
        matrix, source = read_matrix(args.matrix), str(args.matrix)
    elif args.concepts is not None:
        data = rows_matrix(read_long(args.scores, args.task_field), str(args.scores))
        weights, concepts = _concepts(args, data)
        concepts["relative"] = args.relative
        matrix = concept_frame(data, weights, concepts, relative=args.relative)
        source = f"{args.scores} × {args.concepts}" + (" (relative to the overall score)" if args.relative else "")
    elif args.scores is not None:
        matrix, source = matrix_from_long(read_long(args.scores, args.task_field)), str(args.scores)
    else:
        matrix, source = matrix_from_runs([RunDir(r) for r in args.runs]), ", ".join(str(r) for r in args.runs)
    result = run_skills(matrix, config, source)
    if concepts is not None:
        result.summary["concepts"] = concepts
        names = concepts["labels"]
        result.loadings.insert(0, "label", [names.get(str(t).removeprefix("c"), "") for t in result.loadings.index])
    html = skills_page(result.summary, result.loadings, result.profiles, result.redundancy, args.out.name)
    write_skills(result, args.out, overwrite=args.overwrite, page=html)
    s = result.summary
    print(
        f"{s['n_models']} models × {s['n_tasks']} tasks: {s['n_factors']['n_factors']} skill(s) "
        f"({s['n_factors']['criteria']})"
    )
    for skill in s["skills"]:
        tops = ", ".join(f"{t['task']} {t['loading']:+.2f}" for t in skill["top_tasks"][:3])
        print(f"  {skill['skill']}: {tops}")
    for warning in s["input"]["warnings"]:
        print(f"warning: {warning}")
    if s["input"]["dropped_constant_tasks"]:
        print(f"dropped constant task(s): {', '.join(s['input']['dropped_constant_tasks'])}")
    if s["redundant_tasks"]:
        print(f"redundant task(s): {', '.join(s['redundant_tasks'])}")
    print(f"wrote {args.out}")
    return 0


def _estimate(args: argparse.Namespace) -> int:
    """estimate a model's scores from a budget of actively chosen rows (vs random sampling)

    With other models' per-row scores as a Gaussian prior over rows, pick rows batch by batch to estimate a
    held-out model's overall and per-task scores (--holdout MODEL), or evaluate that against random sampling
    for every model in turn (--lomo), or for a really new model scored so far on the rows of --observed FILE:
    its estimate and the next batch of rows to score (score them, append them to FILE, call again)."""
    from cg_ray.errors import InputError
    from cg_ray.report.skills import estimate_page
    from cg_ray.skills.config import EstimateConfig
    from cg_ray.skills.evaluate import holdout_trace, lomo, summarise
    from cg_ray.skills.matrix import read_long, rows_matrix
    from cg_ray.skills.outputs import write_estimate

    same = ["budgets", "batch", "target_se", "random_repeats", "seed", "oracle", "noise", "design"]  # named like flags
    same += ["calibrate_models"]
    same += ["top_concepts", "min_concept_rows", "max_concept_share"]
    values = {k: getattr(args, k) for k in same} | {"n_components": args.components}
    config = validated(EstimateConfig, values, flags={"n_components": "--components"})
    data = rows_matrix(read_long(args.scores, args.task_field), str(args.scores))
    meta: dict[str, Any] = {"format_version": 1, "scores": str(args.scores), "config": config.model_dump()}
    weights = None
    if args.concepts is not None:
        weights, meta["concepts"] = _concepts(args, data)
    if args.observed is not None:
        return _observed(args, data, config, meta, weights)
    if args.lomo:
        detail = lomo(data.scores, data.tasks, data.models, config, weights)
        table = summarise(detail, seed=config.seed)
        meta["description"] = (
            f"{len(data.models)} models × {len(data.row_ids)} rows; leave-one-model-out; "
            f"active = the {config.design} design; span_floor = the held-out model's residual outside the "
            "other models' span, sampled at random (a reference, not an estimator)"
        )
        meta["summary"] = table.to_dict(orient="records")
        html = estimate_page(table, meta, args.out.name)
        tables = {"lomo_summary": table, "lomo_detail": detail}
        write_estimate(args.out, meta, tables, overwrite=args.overwrite, page=html)
        print(table.to_string(index=False))
    else:
        if args.holdout not in data.models:
            raise InputError(f"model {args.holdout!r} is not in the scores", path=str(args.scores), field="model")
        trace = holdout_trace(data.scores, data.tasks, data.models.index(args.holdout), config)
        meta["holdout"] = args.holdout
        meta["exhaustive"] = trace.attrs["exhaustive"]
        meta["final"] = trace.iloc[-1].to_dict()
        chosen = [data.row_ids[i] for i in trace.attrs["order"]]
        write_estimate(args.out, meta, {"trace": trace, "chosen_rows": _rows_frame(chosen)}, overwrite=args.overwrite)
        last = trace.iloc[-1]
        print(
            f"{args.holdout}: {last['overall']:.4f} ± {1.96 * last['overall_se']:.4f} from {int(last['n_rows'])} rows "
            f"(exhaustive {trace.attrs['exhaustive']:.4f})"
        )
    print(f"wrote {args.out}")
    return 0


def _concepts(args: argparse.Namespace, data: Any) -> tuple[Any, dict[str, Any]]:
    """s̃ of the top concepts (concepts × the suite's rows) and what skills.json / estimate.json record:
    the concept ids, the concept file and the SAE it was read with (weights_sha256)."""
    from cg_ray.skills.concepts import concept_weights, read_concept_rows, shipped_concept_labels, top_concepts

    rows = read_concept_rows(args.concepts)
    acts = rows.aligned(data.row_ids, str(args.concepts))
    chosen = top_concepts(acts, args.top_concepts, args.min_concept_rows, args.max_concept_share)
    if chosen.size == 0:
        from cg_ray.errors import InputError

        raise InputError(f"no concept is active on {args.min_concept_rows} or more rows", path=str(args.concepts))
    record = {
        "path": str(args.concepts),
        "sae": rows.sae,
        "top_concepts": chosen.tolist(),
        "min_concept_rows": args.min_concept_rows,
        "max_concept_share": args.max_concept_share,
        # the SAE's own labels, so that tables and plots name concepts (none when that SAE is gone or changed)
        "labels": {str(c): label for c, label in shipped_concept_labels(rows.sae, chosen.tolist()).items()},
    }
    return concept_weights(acts, chosen), record


def _rows_frame(rows: list[str], tasks: list[str] | None = None) -> Any:
    import pandas as pd

    frame = pd.DataFrame({"order": range(1, len(rows) + 1), "row_id": rows})
    if tasks is not None:
        frame["task"] = tasks
    return frame


def _observed(args: argparse.Namespace, data: Any, config: Any, meta: dict[str, Any], weights: Any) -> int:
    import pandas as pd

    from cg_ray.artifacts.layout import EstimateDir
    from cg_ray.skills.observed import next_step, read_observed
    from cg_ray.skills.outputs import write_estimate

    observed = read_observed(args.observed, data.row_ids)
    step = next_step(data, observed, config, weights)
    est = step.estimate
    meta |= {
        "observed": str(args.observed),
        "n_observed": int(observed.rows.size),
        "n_rows": step.n_rows,
        "budget_rows": step.limit,
        "estimate": {"overall": est.overall, "overall_se": est.overall_se, "per_task": est.per_task}
        | {"per_task_se": est.per_task_se, "overall_se_model": est.overall_se_model}
        | {"se_scale": est.se_scale, "task_se_scale": est.task_se_scale, "concept_se_scale": est.concept_se_scale},
        "next_batch": [data.row_ids[i] for i in step.next_rows],
        "done": step.stop is not None,
        "stop": step.stop,
    }
    rows = [data.row_ids[i] for i in step.next_rows]
    tables = {"next_batch": _rows_frame(rows, [str(data.tasks[i]) for i in step.next_rows])}
    if weights is not None:  # the new model's χ_model of each top concept, lowest first (its weak spots)
        ids = meta["concepts"]["top_concepts"]
        labels = [meta["concepts"]["labels"].get(str(c), "") for c in ids]
        tables["concepts"] = pd.DataFrame(
            {"concept_id": ids, "label": labels, "chi_model": est.per_concept, "se": est.per_concept_se}
        ).sort_values("chi_model")
    write_estimate(args.out, meta, tables, overwrite=args.overwrite)
    print(
        f"estimate {est.overall:.4f} ± {1.96 * est.overall_se:.4f} (95%) from {observed.rows.size} of "
        f"{step.n_rows} rows (budget {step.limit})"
    )
    if step.stop is None:
        next_batch = EstimateDir(args.out).file("next_batch.csv")
        print(f"next: score the {len(rows)} rows of {next_batch}, append them to {args.observed}")
    else:
        print(f"done ({step.stop}): no further rows to score")
    print(f"wrote {args.out}")
    return 0
