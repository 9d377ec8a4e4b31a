"""The held-out test of a rule and the decision rule (issues #31, #38): each finding is chosen on one half of
a grouped split and tested, as the same rule, on the other, with a cluster contrast; the splits are combined
by the median rule (profile/decision.py). The calibration at realistic sizes is tests/profile/test_calibration.py.

The 20-seed checks run the whole judgement (`judgement.judge_rows`) on seeded suites
(tests/profile/planted_suites.py) and are marked slow; the unit checks of the held-out test are quick.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cg_ray.artifacts.rows import open_rows
from cg_ray.config import MetricsConfig
from cg_ray.profile.decision import SplitTest, SplitTry, aggregate, judge
from cg_ray.profile.findings import ResidualPass
from cg_ray.profile.heldout import HeldOut
from cg_ray.profile.judgement import judge_rows
from cg_ray.profile.nullcheck import confirmed_counts, null_check

from .planted_suites import write_suite

# slow ones here are numbers only: they run beside other tests (Makefile, pytest-all)
pytestmark = pytest.mark.cpu_only

SEEDS = range(20)
CFG = MetricsConfig(top_k=10)


def _judge(path: Path, cfg: MetricsConfig = CFG, scores: np.ndarray | None = None) -> dict[str, int]:
    return confirmed_counts(judge_rows(open_rows(path), cfg, scores=scores))


# --- the held-out test ----------------------------------------------------------------------------------------


def _half(scores: np.ndarray, groups: np.ndarray, cells: np.ndarray | None = None) -> HeldOut:
    n = scores.size
    return HeldOut.of(np.arange(n), scores, np.zeros(n, np.int64) if cells is None else cells, groups)


def test_four_answers_to_one_question_count_as_one_cluster() -> None:
    rng = np.random.default_rng(0)
    scores = (rng.random(200) < 0.5).astype(float)
    finding = np.arange(60)  # the first 60 questions
    once = _half(scores, np.arange(200)).contrast(finding)
    four = _half(np.repeat(scores, 4), np.repeat(np.arange(200), 4)).contrast(np.arange(240))
    # The same evidence four times over is no more certain: same estimate, same standard error (to CR1's factor).
    assert four.estimate == pytest.approx(once.estimate)
    assert four.se == pytest.approx(once.se, rel=0.02)
    as_rows = _half(np.repeat(scores, 4), np.arange(800)).contrast(np.arange(240))
    assert as_rows.se < 0.6 * four.se


def test_the_contrast_is_within_cells_and_exact_under_a_cell_shift() -> None:
    """A finding is compared with the other rows of its own cells: a cell that is simply harder than the
    rest (every row of it, the finding's or not) gives no effect."""
    rng = np.random.default_rng(1)
    cells = rng.integers(0, 3, 900)
    scores = (rng.random(900) < np.where(cells == 2, 0.2, 0.8)).astype(float)
    hard_heavy = np.sort(np.array(np.flatnonzero(cells == 2)[:150].tolist() + np.flatnonzero(cells == 0)[:20].tolist()))
    t = _half(scores, np.arange(900), cells).contrast(hard_heavy)
    assert abs(t.estimate) < 2 * t.se and t.p_value > 0.05
    pooled = _half(scores, np.arange(900)).contrast(hard_heavy)  # one cell: it looks weak
    assert pooled.p_value < 1e-6


def test_a_group_whose_rows_all_fail_is_never_certain() -> None:
    scores = np.array([0.0] * 12 + [1.0] * 12)
    t = _half(scores, np.arange(24)).contrast(np.arange(12))
    assert t.estimate == pytest.approx(-1.0)
    assert t.se > 0.1 and t.p_value > 1e-6
    few = _half(scores, np.arange(24) // 3).contrast(np.arange(12))  # 4 clusters: no test
    assert few.p_value == 1.0 and not few.testable


def test_rows_of_a_cell_the_finding_fills_are_left_out_and_counted() -> None:
    cells = np.r_[np.zeros(40, np.int64), np.ones(10, np.int64)]
    scores = np.r_[np.tile([0.0, 1.0], 20), np.zeros(10)]
    finding = np.r_[np.arange(10), np.arange(40, 50)]  # all of cell 1: nothing to compare those with
    t = _half(scores, np.arange(50), cells).contrast(finding)
    assert t.n_dropped == 10 and t.n_rows == 10


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("layout", ["spanning", "nested", "mixed"])
def test_the_cluster_contrast_equals_statsmodels_cluster_robust_ols(seed: int, layout: str) -> None:
    """θ and its CR1 variance are those of the OLS of the score on the cell × finding means, with
    cluster-robust covariance by group (statsmodels), whether groups span cells (summed explicitly), sit in
    one cell each (summed in closed form per cell) or both."""
    import statsmodels.api as sm

    rng = np.random.default_rng(seed)
    n, n_cells = 600, 4
    cells = rng.integers(0, n_cells, n)
    groups = rng.integers(0, 150, n)  # a group's rows fall in several cells
    if layout == "nested":
        groups = cells * 1000 + rng.integers(0, 40, n)
    elif layout == "mixed":
        groups = np.where(rng.random(n) < 0.7, cells * 1000 + rng.integers(0, 40, n), groups)
    inside = np.zeros(n, bool)
    inside[rng.choice(n, 120, replace=False)] = True
    scores = (rng.random(n) < 0.6 - 0.1 * inside).astype(float)
    t = _half(scores, groups, cells).contrast(np.flatnonzero(inside))
    design = np.zeros((n, 2 * n_cells))
    design[np.arange(n), 2 * cells + inside] = 1.0
    fit = sm.OLS(scores, design).fit(cov_type="cluster", cov_kwds={"groups": groups, "use_correction": False})
    share = np.bincount(cells[inside], minlength=n_cells) / inside.sum()
    contrast = np.zeros(2 * n_cells)
    contrast[1::2], contrast[0::2] = share, -share
    g = np.unique(groups).size
    assert t.estimate == pytest.approx(float(contrast @ fit.params), abs=1e-12)
    # CR1 = statsmodels' sandwich × G / (G − 1) (its own small-sample factor also has (N − 1) / (N − K)).
    variance = float(contrast @ fit.cov_params() @ contrast) * g / (g - 1)
    assert t.se_cluster == pytest.approx(np.sqrt(variance), rel=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_the_half_as_one_cell_shares_its_rows_and_tests_as_a_half_built_so(seed: int) -> None:
    """A slice is tested against the half's other rows: `one_cell()` reuses the half's row arrays (ten splits
    keep two halves each) and gives the contrast of a half whose rows all sit in one cell."""
    rng = np.random.default_rng(seed)
    n = 600
    cells, groups = rng.integers(0, 4, n), rng.integers(0, 150, n)
    scores = (rng.random(n) < 0.5).astype(float)
    half = _half(scores, groups, cells)
    whole = half.one_cell()
    built = _half(scores, groups, np.zeros(n, np.int64))
    assert all(np.shares_memory(getattr(whole, f), getattr(half, f)) for f in ("rows", "scores", "group"))
    rule = np.sort(rng.choice(n, 90, replace=False))
    weights = rng.random(90)
    for got, want in (
        (whole.contrast(rule), built.contrast(rule)),
        (whole.contrast(rule, weights), built.contrast(rule, weights)),
    ):
        assert got == want


# --- the decision rule ----------------------------------------------------------------------------------------


def _test(estimate: float, se: float, n: int = 100) -> SplitTest:
    from scipy import stats

    return SplitTest(estimate, se, n - 1, float(stats.t.cdf(estimate / se, n - 1)), n, n)


def test_a_finding_fewer_than_half_the_splits_chose_is_never_confirmed_however_small_its_p_values() -> None:
    sure = SplitTry(_test(-0.3, 0.02), 1.0)
    four = aggregate({s: sure for s in range(4)}, splits=10, fdr=0.1)
    assert not four.confirmed and four.q_value == 1.0 and four.splits_selected == 4
    assert four.high is None  # the rule turned around rejects nothing: no bound to show
    five = aggregate({s: sure for s in range(5)}, splits=10, fdr=0.1)
    assert five.confirmed and five.high is not None and five.high < 0


def test_q_is_twice_the_median_splits_q_and_the_fdr_alone_decides() -> None:
    tests = {s: SplitTry(_test(-0.1, 0.05), 2.0) for s in range(10)}  # p ≈ 0.024, q ≈ 0.048 in every split
    q = tests[0].q_value
    for fdr in (0.05, 0.1, 0.2, 0.3):
        v = aggregate(tests, splits=10, fdr=fdr)
        assert v.q_value == pytest.approx(2 * q)
        assert v.confirmed == (2 * q <= fdr)


def test_a_rule_a_split_chose_twice_pays_for_both() -> None:
    t = _test(-0.15, 0.05)
    once = judge([[("m", t, 1), ("x", _test(0.0, 0.05), 2)]] * 10, splits=10, fdr=0.1, bounds=(-1.0, 1.0))
    twice = judge([[("m", t, 1), ("m", t, 2)]] * 10, splits=10, fdr=0.1, bounds=(-1.0, 1.0))
    assert twice["m"].q_value > once["m"].q_value


def test_rows_of_one_question_never_straddle_a_split(tmp_path: Path) -> None:
    path = tmp_path / "rows.parquet"
    write_suite(path, 0, n=800, answers_per_question=4)
    rows = open_rows(path)
    plan = ResidualPass(rows, None, CFG).plan
    assert plan.rule == "identical prompts" and plan.n_groups == 200 and len(plan.splits) == CFG.splits
    for g in range(plan.n_groups):
        assert np.unique(plan.part[plan.clusters == g]).size == 1
        for split in plan.splits:
            assert np.unique(split.choosing[plan.clusters == g]).size == 1
    sizes = np.bincount(plan.part, minlength=plan.n_parts)
    assert sizes.max() - sizes.min() <= 4
    assert all(abs(int(split.choosing.sum()) - 400) <= 40 for split in plan.splits)  # halves


def test_a_tiny_suite_of_three_questions_is_split_and_confirms_nothing(tmp_path: Path) -> None:
    path = tmp_path / "rows.parquet"
    write_suite(path, 0, n=12, answers_per_question=4)  # 3 questions
    beyond = judge_rows(open_rows(path), CFG)
    assert beyond.plan.n_parts == 3 and not beyond.plan.skipped  # 3 groups: halves of 1 and 2 groups
    assert sum(confirmed_counts(beyond).values()) == 0


# --- nulls and power, 20 seeds each -----------------------------------------------------------------------


@pytest.mark.slow
def test_the_null_check_reports_no_false_finding_on_a_realistic_suite(tmp_path: Path) -> None:
    path = tmp_path / "rows.parquet"
    write_suite(path, 3, hidden_share=0.25, hidden_drop=0.4)
    check = null_check(open_rows(path), CFG, seeds=(0, 1))
    assert check["seeds"] == [0, 1] and check["false_findings"] == 0
    assert set(check["permuted_within"]) <= {"type", "level"} and check["permuted_within"]
    # The real scores do have a failure mode beyond the metadata: the check is not blind.
    assert _judge(path)["failure_modes"] >= 1


def test_a_group_field_is_used_for_splits_never_as_a_slice(tmp_path: Path) -> None:
    path = tmp_path / "rows.parquet"
    write_suite(path, 0, n=400)
    table = pq.read_table(path)
    meta = [
        json.dumps({**json.loads(m), "group": f"t{i // 8 % 10}"}) for i, m in enumerate(table["metadata"].to_pylist())
    ]
    pq.write_table(table.set_column(table.schema.get_field_index("metadata"), "metadata", pa.array(meta)), path)
    residuals = ResidualPass(open_rows(path), None, CFG)
    assert residuals.plan.rule == "the metadata field 'group'" and residuals.plan.n_groups == 10
    assert "group" not in residuals.frame.codes and "cross-fitting" in residuals.frame.skipped["group"]


@pytest.mark.parametrize("value", ["-1", "two"])
def test_validate_refuses_a_bad_null_seed_count_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    from cg_ray.cli import main

    path = tmp_path / "rows.parquet"
    write_suite(path, 0, n=200)
    with pytest.raises(SystemExit):
        main(["validate", "--rows", str(path), "--out", str(tmp_path / "val"), "--null-seeds", value])
    assert "--null-seeds" in capsys.readouterr().err
    assert not (tmp_path / "val").exists()


def test_no_mode_tested_in_any_split_is_no_finding() -> None:
    """A suite whose every candidate group covers most rows (the arena's few rows do this) tests no mode."""
    from cg_ray.profile.split_modes import _identities

    assert _identities({}, 10) == []


def test_findings_that_fill_their_cells_are_named_in_a_note() -> None:
    from cg_ray.profile.decision import Verdict
    from cg_ray.profile.findings import dropped_note

    full = Verdict(-0.1, -0.2, 0.0, 0.3, 0.5, False, 6, 40, 40, n_dropped=12)
    clean = Verdict(-0.1, -0.2, 0.0, 0.3, 0.5, False, 6, 40, 40)
    assert dropped_note([clean, clean], "failure modes") is None
    note = dropped_note([full, clean, full], "failure modes")
    assert note is not None and note.startswith("2 of the 3 failure modes shown fill some of their cells")
    assert "their 24 rows there" in note
