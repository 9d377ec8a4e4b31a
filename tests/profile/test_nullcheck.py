"""The null check (cg_ray/profile/nullcheck.py): whole groups' scores permuted within cells, and what it counts.

The permutation is checked as a property (hypothesis): a group's scored rows in a cell move together as one
block, each cell keeps its multiset of scores, unscored rows stay unscored. The clustered null — templates of
four rows spread over `type` × `level` cells, sharing one random effect on the score
(tests/profile/planted_suites.py `write_clustered_null`) — is judged whole on 20 seeds (slow, ~3 s a seed).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cg_ray.artifacts.rows import open_rows
from cg_ray.config import MetricsConfig
from cg_ray.profile.judgement import judge_rows
from cg_ray.profile.nullcheck import (
    FALSE_KINDS,
    confirmed_counts,
    false_findings,
    null_check,
    permute_blocks,
    permuted_within,
)
from cg_ray.profile.strata import cell_keys

from .planted_suites import write_clustered_null, write_suite

# slow ones here are numbers only: they run beside other tests (Makefile, pytest-all)
pytestmark = pytest.mark.cpu_only

CFG = MetricsConfig(top_k=10)


def _blocks(values: np.ndarray, cells: np.ndarray, groups: np.ndarray) -> dict[tuple[int, int], tuple[float, ...]]:
    """(cell, group) → the ordered scores of the group's scored rows in that cell."""
    out: dict[tuple[int, int], list[float]] = {}
    for i in np.flatnonzero(~np.isnan(values)):
        out.setdefault((int(cells[i]), int(groups[i])), []).append(float(values[i]))
    return {k: tuple(v) for k, v in out.items()}


@st.composite
def suites(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    n = draw(st.integers(0, 60))
    cells = np.array(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), dtype=np.int64)
    groups = np.array(draw(st.lists(st.integers(0, 9), min_size=n, max_size=n)), dtype=np.int64)
    unscored = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    scores = np.arange(n, dtype=np.float64)  # distinct: every score's source row can be traced
    scores[unscored] = np.nan
    return scores, cells, groups, draw(st.integers(0, 2**32 - 1))


@settings(max_examples=300, deadline=None)
@given(suites())
def test_whole_blocks_move_within_their_cell_and_each_cell_keeps_its_scores(
    suite: tuple[np.ndarray, np.ndarray, np.ndarray, int],
) -> None:
    scores, cells, groups, seed = suite
    out = permute_blocks(scores, cells, groups, seed)
    assert np.array_equal(np.isnan(out), np.isnan(scores))  # unscored rows stay unscored, scored ones scored
    for c in np.unique(cells):
        here = (cells == c) & ~np.isnan(scores)
        assert sorted(out[here]) == sorted(scores[here])  # the cell's multiset of scores
    before, after = _blocks(scores, cells, groups), _blocks(out, cells, groups)
    assert after.keys() == before.keys()
    # Each block now holds, in order, the scores of one block of its own cell and size: all of them, once.
    for c in {cell for cell, _ in before}:
        mine = [key for key in before if key[0] == c]
        assert Counter(after[k] for k in mine) == Counter(before[k] for k in mine)
        assert all(len(after[k]) == len(before[k]) for k in mine)
    assert np.array_equal(out, permute_blocks(scores, cells, groups, seed), equal_nan=True)  # seeded


def test_groups_of_one_row_are_a_plain_permutation_within_cells_and_groups_are_kept_together() -> None:
    rng = np.random.default_rng(0)
    cells = rng.integers(0, 3, 400)
    scores = rng.random(400)
    rows = permute_blocks(scores, cells, np.arange(400), seed=1)
    assert not np.array_equal(rows, scores)
    for c in range(3):
        assert sorted(rows[cells == c]) == sorted(scores[cells == c])
    # Groups of 4 rows, each group inside one cell: every group gets one other group's 4 scores, in order.
    cells4 = np.repeat(rng.integers(0, 3, 100), 4)
    groups4 = np.repeat(np.arange(100), 4)
    out = permute_blocks(scores, cells4, groups4, seed=1)
    blocks = {tuple(scores[groups4 == g]) for g in range(100)}
    moved = [tuple(out[groups4 == g]) for g in range(100)]
    assert set(moved) == blocks and sum(m != tuple(scores[groups4 == g]) for g, m in enumerate(moved)) > 50


def test_false_findings_count_modes_concepts_and_slices_beyond_the_adjusted_fields() -> None:
    assert FALSE_KINDS == ("failure_modes", "concepts", "slices_beyond_adjusted")
    counts = {"failure_modes": 1, "slices": 6, "slices_beyond_adjusted": 2, "concepts": 3}
    assert false_findings(counts) == 6  # the 4 slices on the adjusted fields alone are the metadata's own


def test_the_null_check_permutes_the_runs_groups_and_counts_every_kind(tmp_path: Path) -> None:
    path = tmp_path / "rows.parquet"
    write_suite(path, 3, n=2000, hidden_share=0.15, hidden_drop=0.3, answers_per_question=4)
    rows = open_rows(path)
    real = judge_rows(rows, CFG)
    assert confirmed_counts(real)["failure_modes"] >= 1  # the real scores have a mode: the check is not blind
    check = null_check(rows, CFG, seeds=(0,), real=real)
    assert check["unit"] == "group" and check["groups"] == {"rule": "identical prompts", "n_groups": 500}
    assert check["permuted_within"] == real.adjusted_for and check["permuted_within"]
    (only,) = check["confirmed"]
    assert set(only) == {"seed", "failure_modes", "slices", "slices_beyond_adjusted", "concepts", "false_findings"}
    assert only["false_findings"] == false_findings(only) == check["false_findings"] == 0
    assert check == null_check(rows, CFG, seeds=(0,))  # the same, whether the real judgement is given or made
    # The scores it judged: a question's 4 rows (one cell: a question has one type and level) moved together,
    # onto another question of the same cell.
    scores = permuted_within(real.frame, real.adjusted_for, 0, real.plan.clusters)
    cells = cell_keys(real.frame, real.adjusted_for)
    groups = real.plan.clusters
    assert all(np.unique(cells[groups == g]).size == 1 for g in range(500))
    before, after = _blocks(real.frame.scores, cells, groups), _blocks(scores, cells, groups)
    for c in np.unique(cells):
        assert Counter(v for k, v in after.items() if k[0] == c) == Counter(v for k, v in before.items() if k[0] == c)
    assert not np.array_equal(scores, real.frame.scores, equal_nan=True)


@pytest.mark.slow
@pytest.mark.parametrize("shared_concepts", [0, 3])
def test_a_clustered_null_confirms_nothing_beyond_the_adjusted_fields_in_19_of_20_seeds(
    tmp_path: Path, shared_concepts: int
) -> None:
    """Templates of 4 rows in different type × level cells share a random effect on the success rate (sd 0.25,
    an intraclass correlation of about 0.25): nothing lies beyond the cells, but a template's rows are one
    cluster wherever they sit; with `shared_concepts`, its rows also share 3 of their 4 concepts, as rows written
    from one template share words. Counted: confirmed failure modes, concepts and slices not on type, level
    alone."""
    cfg = CFG.model_copy(update={"adjust_for": "type,level"})
    clean = 0
    for seed in range(20):
        path = tmp_path / f"clustered{seed}.parquet"
        write_clustered_null(path, seed, shared_concepts=shared_concepts)
        beyond = judge_rows(open_rows(path), cfg)
        assert beyond.plan.rule == "row ids up to their last '#'" and beyond.plan.n_groups == 1000
        clean += false_findings(confirmed_counts(beyond)) == 0
    assert clean >= 19
