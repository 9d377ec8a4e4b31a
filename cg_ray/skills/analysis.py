"""`cg-ray skills` as a function: a models × tasks matrix in, every table and skills.json out."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

import numpy as np
import pandas as pd

from cg_ray import __version__
from cg_ray.skills.config import SkillsConfig
from cg_ray.skills.factors import FactorChoice, choose_n_factors, fit_factors, loadings_table, standardise
from cg_ray.skills.matrix import InputNotes, Prepared, prepare
from cg_ray.skills.profile import profile_from_k
from cg_ray.skills.redundancy import redundancy_table
from cg_ray.skills.stability import Stability, bootstrap_stability

FORMAT_VERSION = 1


class TaskLoading(TypedDict):
    task: str
    loading: float


class SkillEntry(TypedDict):
    """One skill of skills.json: its strongest tasks and the tasks it is the main skill of."""

    skill: str
    top_tasks: list[TaskLoading]
    main_for: list[str]
    ss_loadings: float


class SkillsSummary(TypedDict):
    """skills.json."""

    format_version: int
    cg_ray_version: str
    source: str
    n_models: int
    n_tasks: int
    method: str
    n_factors: FactorChoice
    variance: dict[str, list[float]]
    skills: list[SkillEntry]
    input: InputNotes
    redundant_tasks: list[str]
    profile_from_k: list[dict[Hashable, Any]]  # profile_from_k.csv's rows, as pandas gives them
    stability: NotRequired[Stability]
    concepts: NotRequired[dict[str, object]]  # `--concepts`: the concepts the tasks are (set by the CLI)


@dataclass
class SkillsResult:
    loadings: pd.DataFrame  # one row per task
    profiles: pd.DataFrame  # one row per model: regression factor scores
    redundancy: pd.DataFrame  # one row per task
    profile_from_k: pd.DataFrame  # one row per k
    summary: SkillsSummary  # skills.json


def _skills_summary(loadings: pd.DataFrame, n_factors: int) -> list[SkillEntry]:
    out: list[SkillEntry] = []
    for k in range(n_factors):
        name = f"skill_{k + 1}"
        column = loadings[name].sort_values(key=np.abs, ascending=False)
        out.append(
            {
                "skill": name,
                "top_tasks": [{"task": str(t), "loading": float(v)} for t, v in column.head(5).items()],
                "main_for": [str(t) for t in loadings.index[loadings["main_skill"] == name]],
                "ss_loadings": float((loadings[name] ** 2).sum()),
            }
        )
    return out


def run_skills(matrix: pd.DataFrame, config: SkillsConfig, source: str = "matrix") -> SkillsResult:
    prepared: Prepared = prepare(matrix, config.max_missing, source)
    values = prepared.values
    z = standardise(values)
    choice = choose_n_factors(
        z,
        forced=config.n_factors,
        iterations=config.parallel_iterations,
        quantile=config.parallel_quantile,
        seed=config.seed,
    )
    n_factors = choice["n_factors"]
    solution = fit_factors(z.to_numpy(), n_factors)
    tasks = [str(t) for t in values.columns]
    loadings = loadings_table(tasks, solution)
    names = [f"skill_{k + 1}" for k in range(n_factors)]
    profiles = pd.DataFrame(
        solution.scores, index=pd.Index([str(m) for m in values.index], name="model"), columns=names
    )
    profiles["mean_score"] = values.mean(axis=1).to_numpy()
    redundancy = redundancy_table(z, solution.loadings)
    from_k = profile_from_k(values, n_factors, solution.communalities)
    summary: SkillsSummary = {
        "format_version": FORMAT_VERSION,
        "cg_ray_version": __version__,
        "source": source,
        "n_models": int(values.shape[0]),
        "n_tasks": len(tasks),
        "method": "principal axis factoring (factor_analyzer minres) + varimax; regression factor scores",
        "n_factors": choice,
        "variance": {
            "ss_loadings": solution.variance[0].tolist(),
            "proportion": solution.variance[1].tolist(),
            "cumulative": solution.variance[2].tolist(),
        },
        "skills": _skills_summary(loadings, n_factors),
        "input": prepared.notes(),
        "redundant_tasks": [str(t) for t in redundancy.index[redundancy["redundant"]]],
        "profile_from_k": from_k.to_dict(orient="records"),
    }
    if config.bootstrap:
        summary["stability"] = bootstrap_stability(
            values, solution.loadings, n_factors, resamples=config.bootstrap, seed=config.seed
        )
    return SkillsResult(loadings, profiles, redundancy, from_k, summary)
