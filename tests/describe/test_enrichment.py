"""Enrichment statistics against scipy (Fisher's exact test) and statsmodels (BH), on small tables."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import fisher_exact
from statsmodels.stats.multitest import multipletests

from cg_ray.describe.enrichment import enrich, format_q, p_value
from cg_ray.describe.evidence import Evidence


def evidence(
    value_rows: dict[str, dict[str, int]], active: dict[str, dict[str, list[int]]], ids: list[int]
) -> Evidence:
    return Evidence(
        concept_ids=ids,
        top={},
        sample={},
        background=[],
        n_active={},
        mean_score_active={},
        co_active=np.zeros((len(ids), len(ids)), np.int64),
        value_rows=value_rows,
        value_active={f: {v: np.array(k) for v, k in vals.items()} for f, vals in active.items()},
        skipped_fields={},
        n_rows=sum(next(iter(value_rows.values())).values()),
        mean_score=None,
        state_size=0,
    )


@pytest.mark.parametrize(("k", "m_total", "n_value", "n_drawn"), [(8, 40, 10, 12), (1, 30, 5, 3), (0, 20, 4, 6)])
def test_p_value_is_the_one_sided_fisher_exact_test(k: int, m_total: int, n_value: int, n_drawn: int) -> None:
    table = [[k, n_drawn - k], [n_value - k, m_total - n_value - (n_drawn - k)]]
    want = fisher_exact(table, alternative="greater").pvalue
    assert p_value(k, m_total, n_value, n_drawn) == pytest.approx(want, rel=1e-9)


def test_lift_p_and_bh_across_the_suite() -> None:
    # 100 rows: type A 20, B 30, C 50. Concept 7 is active in 20 rows, 15 of them A. Concept 9: no pattern.
    value_rows = {"type": {"A": 20, "B": 30, "C": 50}}
    active = {"type": {"A": [15, 4], "B": [3, 6], "C": [2, 10]}}
    got = enrich(evidence(value_rows, active, [7, 9]), min_rows=1)
    (hit,) = got[7]
    assert (hit.field, hit.value, hit.k, hit.n_active, hit.n_value, hit.n_field) == ("type", "A", 15, 20, 20, 100)
    assert hit.lift == pytest.approx((15 / 20) / (20 / 100))
    tests = [(15, 20, 20), (3, 30, 20), (2, 50, 20), (4, 20, 20), (6, 30, 20), (10, 50, 20)]
    ps = [fisher_exact([[k, n - k], [nv - k, 100 - nv - (n - k)]], alternative="greater").pvalue for k, nv, n in tests]
    qs = multipletests(ps, method="fdr_bh")[1]
    assert hit.p == pytest.approx(ps[0], rel=1e-9) and hit.q == pytest.approx(qs[0], rel=1e-9)
    assert got[9] == []  # nothing over-represented for concept 9
    assert hit.text() == f"type=A (×3.8, q={format_q(qs[0])})"


def test_bh_makes_a_marginal_value_insignificant_among_many_tests() -> None:
    # one weakly enriched value (p ≈ 0.011) is significant alone, not among 40 null concepts
    value_rows = {"f": {"x": 50, "y": 50}}
    alone = enrich(evidence(value_rows, {"f": {"x": [15], "y": [5]}}, [0]), min_rows=1)
    assert alone[0] and alone[0][0].p < 0.05
    many_active = {"f": {"x": [15] + [10] * 40, "y": [5] + [10] * 40}}
    many = enrich(evidence(value_rows, many_active, list(range(41))), min_rows=1)
    assert many[0] == []


def test_format_q() -> None:
    assert format_q(1.2e-6) == "1e-6" and format_q(0.0123) == "0.012" and format_q(3.6e-4) == "4e-4"
