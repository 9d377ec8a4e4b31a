"""`cg-ray arena-ratings`, `arena-rows` and `arena-head-to-head` end to end, and their errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cg_ray import cli

from .arena_builders import record, write_jsonl

ARENA = "cg_ray.cli.arena"


@pytest.fixture(autouse=True)
def arena_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    if ARENA not in cli.COMMAND_MODULES:  # until cg_ray/cli.py lists it
        monkeypatch.setattr(cli, "COMMAND_MODULES", (*cli.COMMAND_MODULES, ARENA))


def run(*argv: str | Path) -> int:
    return cli.main([str(a) for a in argv])


@pytest.fixture
def battles_file(tmp_path: Path) -> Path:
    recs = [record(f"w{k}") for k in range(6)] + [record(f"l{k}", winner="model_b") for k in range(3)]
    recs += [record("t", winner="tie"), record("bb", winner="tie (bothbad)")]
    recs += [record(f"g{k}", model_b="gamma", winner=w) for k, w in enumerate(["model_a", "model_b", "model_b"])]
    return write_jsonl(tmp_path / "battles.jsonl", recs)


def test_ratings(battles_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ratings"
    assert run("arena-ratings", "--battles", battles_file, "--out", out, "--bootstrap", 50, "--seed", 1) == 0
    assert sorted(p.name for p in out.iterdir()) == ["pairwise.parquet", "ratings.json", "ratings.parquet"]
    result = json.loads((out / "ratings.json").read_text())
    assert result["n_battles"] == 14 and result["n_counted"] == 13  # the bothbad battle is dropped
    by_model = {r["model"]: r for r in result["models"]}
    assert by_model["alpha"]["battles"] == 14 and by_model["beta"]["wins"] == 3
    assert by_model["alpha"]["bt"] > by_model["beta"]["bt"]
    pairs = {(r["model_a"], r["model_b"]): r for r in pq.read_table(out / "pairwise.parquet").to_pylist()}
    assert pairs[("alpha", "beta")]["score_a"] == pytest.approx(6.5 / 10)
    assert "alpha" in capsys.readouterr().out
    # Existing output needs --overwrite; a tie policy flag changes the counted battles.
    assert run("arena-ratings", "--battles", battles_file, "--out", out, "--bootstrap", 0) == 2
    argv = ("--battles", battles_file, "--out", out, "--bootstrap", 0, "--tie-policy", "drop", "--overwrite")
    assert run("arena-ratings", *argv) == 0
    assert json.loads((out / "ratings.json").read_text())["n_counted"] == 12


def test_ratings_errors(battles_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write_jsonl(
        tmp_path / "bad.jsonl", [record("q1"), record("q2", winner="draw"), record("q3", winner="model_b")]
    )
    assert run("arena-ratings", "--battles", bad, "--out", tmp_path / "r") == 2
    err = capsys.readouterr().err
    # A JSONL record is located by its 1-based line; its 0-based record index stays in the message.
    assert "bad.jsonl, line 2, field 'winner'" in err and "'draw'" in err and "record 1" in err
    assert not (tmp_path / "r").exists()
    assert run("arena-ratings", "--battles", bad, "--out", tmp_path / "r", "--skip-invalid", "--bootstrap", 0) == 0
    assert "skipped {'unknown_winner': 1}" in capsys.readouterr().out
    assert run("arena-ratings", "--battles", battles_file, "--out", tmp_path / "x", "--confidence", 2) == 2
    assert "--confidence" in capsys.readouterr().err
    one_sided = write_jsonl(tmp_path / "one.jsonl", [record("q1"), record("q2")])
    assert run("arena-ratings", "--battles", one_sided, "--out", tmp_path / "y") == 2
    assert "prior" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "battles.jsonl", "one.jsonl", "r"]


def test_rows(battles_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.jsonl"
    argv = ("--battles", battles_file, "--out", out, "--bothbad-policy", "zero")
    assert run("arena-rows", *argv, "--model", "beta", "--model", "gamma") == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["model"] for r in rows] == ["beta"] * 11 + ["gamma"] * 3
    assert sum(r["score"] for r in rows if r["model"] == "beta") == 3 + 0.5 + 0
    assert rows[0]["row_id"] == "w0:b:alpha" and rows[0]["text"] == "prompt w0\n\nbeta answers w0"
    assert run("arena-rows", *argv, "--all-min-battles", 4, "--overwrite") == 0
    assert {json.loads(x)["model"] for x in out.read_text().splitlines()} == {"alpha", "beta"}
    capsys.readouterr()
    assert run("arena-rows", "--battles", battles_file, "--out", tmp_path / "o.jsonl", "--model", "delta") == 2
    assert "'delta' played no battle" in capsys.readouterr().err


def test_head_to_head(write_rows: Callable[..., Path], tmp_path: Path) -> None:
    battles = write_jsonl(tmp_path / "b.jsonl", [record("q1"), record("q2", winner="model_b")])

    def row(rid: str, model: str, score: float, acts: list[float]) -> dict:
        ids = [0, 1][: len(acts)]
        return {
            "row_id": rid,
            "benchmark": "arena",
            "model": model,
            "score": score,
            "concept_ids": ids,
            "concept_acts": acts,
        }

    alpha_rows = [row("q1:a:beta", "alpha", 1.0, [1.0]), row("q2:a:beta", "alpha", 0.0, [1.0, 2.0])]
    alpha = write_rows(alpha_rows, 2, "a.parquet")
    beta = write_rows([row("q1:b:alpha", "beta", 0.0, [3.0]), row("q2:b:alpha", "beta", 1.0, [1.0])], 2, "b.parquet")
    out = tmp_path / "h2h"
    argv = ("--battles", battles, "--rows", f"alpha={alpha}", "--rows", f"beta={beta}", "--out", out)
    assert run("arena-head-to-head", *argv, "--min-rows", 1) == 0
    written = pq.read_table(out / "head_to_head.parquet").to_pylist()
    table = {(r["model_a"], r["concept_id"]): r["win_rate"] for r in written}
    # c0: q1 weight (1+3)/2 = 2 (alpha won), q2 (1+1)/2 = 1 (lost) -> 2/3; c1: only q2 -> 0.
    assert table[("alpha", 0)] == pytest.approx(2 / 3) and table[("alpha", 1)] == 0.0
    assert table[("beta", 0)] == pytest.approx(1 / 3)
    assert (out / "model_concepts.parquet").is_file() and (out / "head_to_head.json").is_file()
    assert run("arena-head-to-head", "--battles", battles, "--rows", "alpha", "--out", tmp_path / "z") == 2
