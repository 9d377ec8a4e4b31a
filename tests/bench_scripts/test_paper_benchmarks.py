"""`scripts/paper_benchmarks.py containment`, whose tables docs/results.md quotes ("Which benchmark covers
which"): a benchmark drawn like another covers its rows; one that never asks a theme leaves the theme's
rows uncovered, and its interval says so; the concept-level figure is printed beside it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from cg_ray.cli import main
from tests.scope.synthetic import scope_rows
from tests.scripts import load_script

THEME = (0, 1, 2, 3)  # fire together on the theme's rows


def _theme_rows(benchmark: str, n: int, share: float, rng: np.random.Generator) -> list[dict[str, object]]:
    """Rows of `scope_rows`'s background; a `share` of them carry every THEME concept at once."""
    rows = scope_rows(benchmark, n, rng, 0.0, ())
    for r in rows:
        if rng.random() < share:
            ids = sorted({*r["concept_ids"], *THEME})
            r["concept_ids"], r["concept_acts"] = ids, [1.0] * len(ids)
    return rows


def test_a_sibling_drawn_alike_covers_the_rows_and_one_without_the_theme_leaves_them(
    tmp_path: Path, write_rows: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(0)
    rows = _theme_rows("a", 400, 0.3, rng) + _theme_rows("alike", 400, 0.3, rng) + _theme_rows("none", 400, 0.0, rng)
    path = write_rows(rows, d_sae=64)
    assert main(["metrics", "--rows", str(path), "--out", str(tmp_path / "run"), "--min-rows", "5"]) == 0
    out = load_script("paper_benchmarks").containment(tmp_path / "run", ["a", "alike", "none"])
    alike, none = out["a", "alike"], out["a", "none"]
    assert alike["high"] > 0.95  # drawn alike: nothing of a is confidently uncovered
    assert none["high"] < 0.8 and 0.6 < none["rows"] < 0.8  # a's ~30% theme rows lie where `none` has none
    assert none["low"] <= none["rows"] <= none["high"]
    # `none`'s rows are all in a's population: a covers them
    assert out["none", "a"]["high"] > 0.95
    printed = capsys.readouterr().out
    assert "rows of A that B covers" in printed and "| a | — |" in printed and "no gap of B" in printed


def test_a_benchmark_the_run_lacks_is_named(tmp_path: Path, write_rows: Callable[..., Path]) -> None:
    rng = np.random.default_rng(1)
    path = write_rows(_theme_rows("a", 60, 0.3, rng) + _theme_rows("b", 60, 0.0, rng), d_sae=64)
    assert main(["metrics", "--rows", str(path), "--out", str(tmp_path / "run"), "--min-rows", "5"]) == 0
    with pytest.raises(SystemExit, match=r"rows.parquet: no benchmark gsm8k \(it has \['a', 'b'\]\)"):
        load_script("paper_benchmarks").containment(tmp_path / "run", ["a", "gsm8k"])
