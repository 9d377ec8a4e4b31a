"""Bad input is refused or reported by name; `cg-ray skills` / `cg-ray estimate` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cg_ray import cli
from cg_ray.artifacts.layout import RunDir
from cg_ray.errors import InputError
from cg_ray.skills.matrix import matrix_from_runs, prepare, read_long, read_matrix

from .planted import irt_population, two_factor_matrix


def test_constant_task_is_dropped_and_reported() -> None:
    frame, _ = two_factor_matrix(n_models=40)
    frame["flat"] = 0.7
    prepared = prepare(frame)
    assert prepared.dropped_constant == ["flat"] and "flat" not in prepared.values.columns
    assert prepared.notes()["dropped_constant_tasks"] == ["flat"]


def test_fewer_models_than_tasks_warns_about_identifiability() -> None:
    frame, _ = two_factor_matrix(n_models=6)
    prepared = prepare(frame)
    assert len(prepared.warnings) == 1 and "identified" in prepared.warnings[0]
    assert prepare(two_factor_matrix(n_models=40)[0]).warnings == []


def test_model_with_no_scored_cells_is_refused_by_name() -> None:
    frame, _ = two_factor_matrix(n_models=30)
    frame.loc["ghost-model"] = np.nan
    with pytest.raises(InputError, match="ghost-model"):
        prepare(frame, source="m.csv")


def test_missing_cells_imputed_or_refused_with_reason() -> None:
    frame, _ = two_factor_matrix(n_models=30)
    frame.iloc[3, 2] = np.nan
    prepared = prepare(frame)
    assert prepared.imputed_cells == [("model-3", "t2")]
    assert prepared.values.loc["model-3", "t2"] == pytest.approx(frame["t2"].mean())
    frame.iloc[:10, 5] = np.nan  # a third of the models lack t5
    with pytest.raises(InputError, match=r"task 't5' is missing for 33% of models"):
        prepare(frame, max_missing=0.2)


def test_read_matrix_names_the_bad_cell(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text("model,a,b,c\nm1,0.1,0.2,0.3\nm2,0.2,oops,0.1\n")
    with pytest.raises(InputError) as err:
        read_matrix(path)
    assert err.value.row == 1 and err.value.field == "b" and "oops" in str(err.value)


def test_skills_cli_on_a_matrix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frame, _ = two_factor_matrix(n_models=40, seed=5)
    frame["flat"] = 1.0
    frame.index.name = "model"
    frame.to_csv(tmp_path / "m.csv")
    out = tmp_path / "skills"
    assert cli.main(["skills", "--matrix", str(tmp_path / "m.csv"), "--out", str(out), "--bootstrap", "2"]) == 0
    summary = json.loads((out / "skills.json").read_text())
    assert summary["format_version"] == 1 and summary["n_factors"]["n_factors"] == 2
    assert summary["input"]["dropped_constant_tasks"] == ["flat"] and summary["stability"]["resamples"] == 2
    loadings = pd.read_csv(out / "loadings.csv", index_col="task")
    assert list(loadings.index) == [f"t{j}" for j in range(8)] and loadings["main_skill"].nunique() == 2
    assert len(pd.read_csv(out / "profiles.csv")) == 40
    page = (out / "report.html").read_text()
    assert "Loadings (varimax)" in page and "Model skill profiles" in page
    assert "dropped constant task(s): flat" in capsys.readouterr().out
    assert cli.main(["skills", "--matrix", str(tmp_path / "m.csv"), "--out", str(out)]) == 2  # exists


def test_skills_from_run_directories(tmp_path: Path) -> None:
    frame, _ = two_factor_matrix(n_models=5)
    runs = []
    for model, row in frame.iterrows():
        run = tmp_path / str(model)
        run.mkdir()
        if model == "model-0":  # a run with only summary.json
            meta = {"evaluated_model": model, "benchmarks": [{"benchmark": t, "mean_score": v} for t, v in row.items()]}
            (run / "summary.json").write_text(json.dumps(meta))
        else:
            rows = [{"model": model, "benchmark": t, "score": s} for t, v in row.items() for s in (v - 0.01, v + 0.01)]
            pd.DataFrame(rows).to_parquet(run / "rows.parquet")
        runs.append(RunDir(run))
    matrix = matrix_from_runs(runs)
    assert matrix.shape == (5, 8)
    assert np.allclose(matrix.loc[frame.index, frame.columns].to_numpy(), frame.to_numpy())
    with pytest.raises(InputError, match="not a run directory"):
        matrix_from_runs([RunDir(tmp_path / "nowhere")])


def test_estimate_cli_holdout_and_lomo(tmp_path: Path) -> None:
    scores, tasks = irt_population(n_models=12, n_items=80, seed=4)
    long = pd.DataFrame(
        [
            {"model": f"m{i}", "row_id": f"r{j}", "score": scores[i, j], "task": f"task{tasks[j]}"}
            for i in range(12)
            for j in range(80)
        ]
    )
    long.loc[(long["model"] == "m3") & (long["row_id"] == "r7"), "score"] = np.nan
    path = tmp_path / "rows.csv"
    long.to_csv(path, index=False)
    out = tmp_path / "est"
    argv = [
        "estimate",
        "--scores",
        str(path),
        "--holdout",
        "m3",
        "--out",
        str(out),
        "--budgets",
        "0.25",
        "--batch",
        "5",
    ]
    assert cli.main([*argv, "--components", "2"]) == 0
    meta = json.loads((out / "estimate.json").read_text())
    assert meta["exhaustive"] == pytest.approx(np.nanmean(np.delete(scores[3], 7)))
    chosen = pd.read_csv(out / "chosen_rows.csv")
    assert len(chosen) == 20 and "r7" not in set(chosen["row_id"])
    lomo_out = tmp_path / "lomo"
    argv = ["estimate", "--scores", str(path), "--lomo", "--out", str(lomo_out), "--budgets", "0.1,0.5"]
    assert cli.main([*argv, "--components", "2", "--random-repeats", "1"]) == 0
    table = pd.read_csv(lomo_out / "lomo_summary.csv")
    assert set(table["method"]) == {"active", "random_mean", "random_prior", "span_floor"} and set(table["budget"]) == {
        0.1,
        0.5,
    }
    assert "RMSE" in (lomo_out / "report.html").read_text()
    assert cli.main(["estimate", "--scores", str(path), "--holdout", "nobody", "--out", str(tmp_path / "x")]) == 2
    assert cli.main(["estimate", "--scores", str(path), "--lomo", "--out", str(tmp_path / "y"), "--budgets", "2"]) == 2


def test_read_long_refuses_duplicate_rows(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("model,row_id,score\na,r1,1\na,r1,0\n")
    with pytest.raises(InputError, match="twice"):
        read_long(path)
