"""How one finding of a run is compared with another reader's findings (cg_ray.sensitivity.compare), on
findings made by hand: the overlap chance gives (checked against random draws), the status, the near miss of a
finding not found, and slices matched only by slices."""

from __future__ import annotations

import numpy as np
import pytest

from cg_ray import schemas as S
from cg_ray.profile.decision import GREATER, LESS
from cg_ray.sensitivity.compare import compare_finding, jaccard_by_chance
from cg_ray.sensitivity.findings import Finding, ReaderFindings

N = 1000


def _finding(kind: str, key: str, rows: range, q: float | None = 0.01, confirmed: bool = True, direction=LESS):
    return Finding(kind, key, key, direction, np.asarray(rows, np.int64), q, confirmed)


def _other(*findings: Finding) -> ReaderFindings:
    return ReaderFindings(list(findings), plan=None, n_rows=N)  # type: ignore[arg-type]  # compare reads no splits


@pytest.mark.parametrize(("n", "a", "b"), [(1000, 80, 120), (300, 150, 200), (50, 5, 45)])
def test_the_chance_jaccard_is_the_mean_over_random_sets_of_that_size(n: int, a: int, b: int) -> None:
    rng = np.random.default_rng(0)
    mine = np.zeros(n, bool)
    mine[:a] = True
    draws = []
    for _ in range(20_000):
        theirs = np.zeros(n, bool)
        theirs[rng.choice(n, b, replace=False)] = True
        draws.append((mine & theirs).sum() / (mine | theirs).sum())
    sd = np.std(draws) / np.sqrt(len(draws))
    assert abs(jaccard_by_chance(n, a, b) - np.mean(draws)) < 4 * sd + 1e-12
    assert jaccard_by_chance(n, 0, 0) is None and jaccard_by_chance(n, n, n) == 1.0


def test_two_random_sets_of_two_thirds_overlap_half_by_chance() -> None:
    """docs/sensitivity.md: enough for "found" (Jaccard >= 0.5) with nothing in common but their size."""
    assert jaccard_by_chance(1800, 1200, 1200) == pytest.approx(0.5, abs=0.001)


def test_found_partly_and_not_found_with_chance_beside() -> None:
    mine = _finding("failure_mode", "mode:1", range(0, 100))
    found = compare_finding(mine, "r", _other(_finding("concept", "concept:5", range(10, 110))), -0.2)
    assert found["status"] == S.FOUND and found["match"] == "concept:5" and found["own_estimate"] == -0.2
    assert found["jaccard"] == pytest.approx(90 / 110) and found["jaccard_by_chance"] == pytest.approx(
        jaccard_by_chance(N, 100, 100)
    )
    assert found["jaccard_by_chance"] < 0.1 < found["jaccard"]  # type: ignore[operator]
    partly = compare_finding(mine, "r", _other(_finding("concept", "concept:6", range(40, 400))), None)
    assert partly["status"] == S.PARTLY and partly["covered"] == pytest.approx(0.6)
    other_way = _finding("concept", "concept:7", range(0, 100), direction=GREATER)  # a strength: not a match
    assert compare_finding(mine, "r", _other(other_way), None)["status"] == S.NOT_FOUND


def test_a_finding_not_found_shows_the_best_q_of_candidates_flagging_rows_like_these() -> None:
    mine = _finding("concept", "concept:1", range(0, 100))
    near = _finding("failure_mode", "mode:4", range(5, 105), q=0.13, confirmed=False)  # just missed
    nearer = _finding("concept", "concept:9", range(0, 60), q=0.11, confirmed=False)  # covers 60%
    elsewhere = _finding("concept", "concept:2", range(500, 600), q=0.001)  # confirmed, other rows
    few = _finding("concept", "concept:3", range(0, 20), q=0.0001, confirmed=False)  # 20% of them: not alike
    row = compare_finding(mine, "r", _other(near, nearer, elsewhere, few), None)
    assert row["status"] == S.NOT_FOUND and row["match"] is None  # no confirmed finding overlaps them
    assert (row["best_q"], row["best_q_finding"]) == (0.11, "concept:9")
    alone = compare_finding(mine, "r", _other(elsewhere), None)
    assert alone["best_q"] is None and alone["match"] is None and alone["jaccard_by_chance"] is None


def test_slices_are_matched_by_slices_only() -> None:
    rows = range(0, 200)
    a_slice = _finding("slice", "slice:1", rows)
    a_mode = _finding("failure_mode", "mode:1", rows)
    assert compare_finding(a_mode, "r", _other(_finding("slice", "slice:3", rows)), None)["status"] == S.NOT_FOUND
    assert compare_finding(a_slice, "r", _other(_finding("concept", "concept:3", rows)), None)["status"] == S.NOT_FOUND
    assert compare_finding(a_slice, "r", _other(_finding("slice", "slice:2", rows)), None)["status"] == S.FOUND
