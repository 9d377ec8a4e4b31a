"""`cg-ray estimate --observed`: the loop a user runs for a really new model, and its bad-input errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cg_ray import cli
from cg_ray.errors import InputError
from cg_ray.skills.config import EstimateConfig
from cg_ray.skills.evaluate import holdout_trace
from cg_ray.skills.matrix import read_long, rows_matrix
from cg_ray.skills.observed import read_observed

from .planted import suite_file

ROW_IDS = [f"r{j}" for j in range(90)]


def _population(tmp_path: Path) -> tuple[np.ndarray, np.ndarray, Path]:
    """Models 1.. as the suite's per-row scores (written to a file); model 0 plays the new model."""
    return suite_file(tmp_path)


def _loop(suite: Path, truth: np.ndarray, tmp_path: Path, extra: list[str]) -> tuple[list[str], dict[str, object]]:
    """Score each next batch with the new model's true scores, append, call again until done."""
    observed = tmp_path / "observed.csv"
    observed.write_text("row_id,score\n")  # nothing scored yet
    out = tmp_path / "step"
    scored: list[str] = []
    for _ in range(50):
        argv = ["estimate", "--scores", str(suite), "--observed", str(observed), "--out", str(out), "--overwrite"]
        assert cli.main([*argv, "--components", "2", "--batch", "6", *extra]) == 0
        meta = json.loads((out / "estimate.json").read_text())
        batch = pd.read_csv(out / "next_batch.csv", dtype={"row_id": str})
        assert list(batch["row_id"]) == meta["next_batch"]
        if meta["done"]:
            assert batch.empty
            return scored, meta
        with observed.open("a") as fh:
            for row_id in batch["row_id"]:
                fh.write(f"{row_id},{truth[ROW_IDS.index(row_id)]}\n")
        scored += list(batch["row_id"])
    raise AssertionError("the loop never finished")


def test_observed_loop_reproduces_holdout(tmp_path: Path) -> None:
    scores, tasks, suite = _population(tmp_path)
    scored, meta = _loop(suite, scores[0], tmp_path, ["--budgets", "0.3"])
    config = EstimateConfig(budgets=(0.3,), batch=6, n_components=2)
    # --holdout on the same suite with model 0 added: the prior from models 1.., model 0's rows revealed
    # (read through the same parser, so rows tied in easiness are ordered alike)
    new = pd.DataFrame({"model": "m0", "row_id": ROW_IDS, "score": scores[0], "task": [f"task{t}" for t in tasks]})
    both = tmp_path / "suite_and_new.csv"
    pd.concat([pd.read_csv(suite), new]).to_csv(both, index=False)
    data = rows_matrix(read_long(both), str(both))
    trace = holdout_trace(data.scores, data.tasks, data.models.index("m0"), config)
    assert scored == [data.row_ids[i] for i in trace.attrs["order"]]  # the same rows in the same order
    assert meta["n_observed"] == 27 and meta["stop"] == "budget"
    estimate = meta["estimate"]
    assert isinstance(estimate, dict)
    assert estimate["overall"] == pytest.approx(trace["overall"].iloc[-1], abs=1e-9)
    assert estimate["overall_se"] == pytest.approx(trace["overall_se"].iloc[-1], abs=1e-9)
    assert abs(estimate["overall"] - scores[0].mean()) < 3 * estimate["overall_se"] + 0.02


def test_observed_loop_stops_at_the_target_se(tmp_path: Path) -> None:
    scores, _, suite = _population(tmp_path)
    scored, meta = _loop(suite, scores[0], tmp_path, ["--budgets", "1.0", "--target-se", "0.05"])
    estimate = meta["estimate"]
    assert isinstance(estimate, dict)
    assert meta["stop"] == "target_se" and estimate["overall_se"] < 0.05 and len(scored) < 90


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("name", "text", "line", "field", "message"),
    [
        ("o.csv", "row_id,score\nr1,0.5\nr2,high\n", 3, "score", "finite number"),
        ("o.csv", "row_id,score\nr1,0.5\nr999,1\n", 3, "row_id", "'r999' is not a row"),
        ("o.csv", "row_id,score\nr1,0.5\nr2,1\nr1,0\n", 4, "row_id", r"twice \(first at line 2\)"),
        ("o.csv", "row_id,score\nr1,\n", 2, "score", "finite number"),
        ("o.jsonl", '{"row_id": "r1", "score": 1}\n\n{"id": "r1", "score": 0}\n', 3, "id", "twice"),
        ("o.jsonl", '{"row_id": "r1", "score": 1}\n{"score": 0}\n', 2, "row_id", "missing"),
        ("o.jsonl", '{"row_id": "r1", "score": NaN}\n', 1, "score", "finite number"),
    ],
)
def test_bad_observed_rows_are_refused_by_file_line_and_field(
    tmp_path: Path, name: str, text: str, line: int, field: str, message: str
) -> None:
    path = _write(tmp_path, name, text)
    with pytest.raises(InputError, match=message) as err:
        read_observed(path, ROW_IDS)
    assert err.value.line == line and err.value.field == field and err.value.path == str(path)


def test_observed_files_are_read_in_order(tmp_path: Path) -> None:
    got = read_observed(_write(tmp_path, "o.csv", "score,row_id\n1,r5\n0.25,r0\n"), ROW_IDS)
    assert got.rows.tolist() == [5, 0] and got.values.tolist() == [1.0, 0.25]
    assert read_observed(_write(tmp_path, "e.jsonl", ""), ROW_IDS).rows.size == 0
    pd.DataFrame({"row_id": ["r1", "r1"], "score": [1.0, 0.0]}).to_parquet(tmp_path / "o.parquet")
    with pytest.raises(InputError) as err:
        read_observed(tmp_path / "o.parquet", ROW_IDS)
    assert err.value.row == 1 and err.value.line is None


def test_observed_unknown_row_exits_with_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, _, suite = _population(tmp_path)
    observed = _write(tmp_path, "o.csv", "row_id,score\nnope,1\n")
    argv = ["estimate", "--scores", str(suite), "--observed", str(observed), "--out", str(tmp_path / "x")]
    assert cli.main(argv) == 2
    assert "line 2" in capsys.readouterr().err and not (tmp_path / "x").exists()
