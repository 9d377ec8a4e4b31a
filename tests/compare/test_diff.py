"""`cg_ray.compare.diff`: planted regressions are found with the right sign, identical runs give zeros,
mismatched readers are refused, and rows that cannot be paired are counted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.artifacts.layout import RunDir
from cg_ray.compare.config import DiffConfig
from cg_ray.compare.diff import compute_diff
from cg_ray.compare.identity import ReaderMismatch
from cg_ray.errors import InputError
from tests.compare.conftest import READER, planted, write_run

FAST = DiffConfig(resamples=300, seed=1)


def test_planted_flips_are_found_with_the_right_sign_and_a_confident_interval(planted_runs) -> None:
    a, b = planted_runs()
    result = compute_diff(RunDir(a), RunDir(b), FAST)
    d = result.delta
    c9, c10 = result.column(9), result.column(10)
    assert result.concept_ids[c9] == 9 and result.concept_ids[c10] == 10
    # concept 9: right in A about 70% of the time, always wrong in B
    assert d.x_b[c9] == 0.0 and d.x_delta[c9] < -0.5 and d.x_high[c9] < 0
    assert d.x_low[c9] <= d.x_delta[c9] <= d.x_high[c9]
    assert d.x_delta[c10] > 0.2 and d.x_low[c10] > 0
    assert result.regressed[0] == c9 and result.improved[0] == c10
    # per benchmark too, and the changed rows of concept 9 all went right -> wrong
    assert (d.chi_high[:, c9] < 0).all()
    flips = result.examples[9]
    assert flips["right_in_a_wrong_in_b"] and not flips["wrong_in_a_right_in_b"]
    worse = flips["right_in_a_wrong_in_b"]
    assert all(e["score_a"] == 1.0 and e["score_b"] == 0.0 and e["s_tilde_a"] > 0 for e in worse)
    assert len(flips["right_in_a_wrong_in_b"]) == FAST.examples
    # held out: the same two changes are the findings, confirmed on rows that did not choose them
    judged = result.heldout
    assert [(c, v.confirmed) for c, v in judged.regressed[:1]] == [(c9, True)]
    assert [(c, v.confirmed) for c, v in judged.improved[:1]] == [(c10, True)]
    assert judged.regressed[0][1].high is not None and judged.regressed[0][1].high < 0


def test_paired_point_estimates_equal_the_runs_own_metrics_when_all_rows_are_shared(planted_runs) -> None:
    a, b = planted_runs()
    result = compute_diff(RunDir(a), RunDir(b), DiffConfig(resamples=0))
    for run, x in ((a, result.delta.x_a), (b, result.delta.x_b)):
        table = pq.read_table(run / S.CONCEPTS_FILE)
        ours = table.column("X_model").to_numpy(zero_copy_only=False)[result.concept_ids]
        np.testing.assert_allclose(x, ours.astype(float), rtol=1e-9)
    assert np.isnan(result.delta.x_low).all()  # no resamples, no interval


def test_identical_runs_give_zero_deltas_and_intervals_covering_zero(tmp_path: Path) -> None:
    p = planted()
    a = write_run(tmp_path / "A", p["row_ids"], p["benchmarks"], p["a"], p["concepts"])
    b = write_run(tmp_path / "B", p["row_ids"], p["benchmarks"], p["a"], p["concepts"])
    result = compute_diff(RunDir(a), RunDir(b), FAST)
    d = result.delta
    assert np.all(d.x_delta == 0) and np.all(d.rel_delta == 0)
    assert np.all(d.x_low <= 0) and np.all(d.x_high >= 0)
    defined = ~np.isnan(d.chi_delta)
    assert np.all(d.chi_delta[defined] == 0) and np.all(d.chi_low[defined] <= 0) and np.all(d.chi_high[defined] >= 0)
    assert result.regressed == [] and result.improved == []
    assert not any(v.confirmed for _, v in (*result.heldout.regressed, *result.heldout.improved))


def test_runs_read_with_different_saes_are_refused_naming_both_runs_and_the_field(planted_runs) -> None:
    a, b = planted_runs(reader_b={**READER, "sae": "npz:other.npz"})
    with pytest.raises(ReaderMismatch) as err:
        compute_diff(RunDir(a), RunDir(b), FAST)
    message = str(err.value)
    assert err.value.field == "sae" and str(a) in message and str(b) in message
    assert "'default'" in message and "'npz:other.npz'" in message


def test_an_sae_retrained_in_place_is_refused_by_its_weights_fingerprint(tmp_path: Path) -> None:
    p = planted(n=40)
    args = (p["row_ids"], p["benchmarks"])
    a = write_run(tmp_path / "A", *args, p["a"], p["concepts"], sae_weights="0123456789abcdef")
    b = write_run(tmp_path / "B", *args, p["b"], p["concepts"], sae_weights="fedcba9876543210")
    with pytest.raises(ReaderMismatch, match="sae_weights is '0123456789abcdef' in run A"):
        compute_diff(RunDir(a), RunDir(b), FAST)
    same = write_run(tmp_path / "C", *args, p["b"], p["concepts"], sae_weights="0123456789abcdef")
    assert "sae_weights" in compute_diff(RunDir(a), RunDir(same), FAST).checked_fields


def test_different_sae_widths_are_refused(tmp_path: Path) -> None:
    p = planted(n=40)
    a = write_run(tmp_path / "A", p["row_ids"], p["benchmarks"], p["a"], p["concepts"], d_sae=12)
    b = write_run(tmp_path / "B", p["row_ids"], p["benchmarks"], p["b"], p["concepts"], d_sae=16)
    with pytest.raises(ReaderMismatch, match="d_sae is 12 in run A"):
        compute_diff(RunDir(a), RunDir(b), FAST)


def test_an_unrecorded_reader_is_refused_unless_assumed(planted_runs) -> None:
    a, b = planted_runs(reader_b=None)
    with pytest.raises(ReaderMismatch, match="--assume-same-reader") as err:
        compute_diff(RunDir(a), RunDir(b), FAST)
    assert str(b) in str(err.value) and err.value.field == "reader"
    result = compute_diff(RunDir(a), RunDir(b), FAST.model_copy(update={"assume_same_reader": True}))
    assert result.checked_fields == ["d_sae"]


def test_rows_only_in_one_run_and_unscored_rows_are_counted(tmp_path: Path) -> None:
    p = planted(n=120)
    ids, bench, concepts = p["row_ids"], p["benchmarks"], p["concepts"]
    a = write_run(tmp_path / "A", ids[:100], bench[:100], p["a"][:100], concepts[:100])
    b_scores: list[float | None] = list(p["b"][30:120])
    b_scores[0] = None  # r30: shared, unscored in B
    b = write_run(tmp_path / "B", ids[30:120], bench[30:120], b_scores, concepts[30:120])
    counts = compute_diff(RunDir(a), RunDir(b), FAST).pairing.counts
    assert (counts["rows_a"], counts["rows_b"], counts["shared"]) == (100, 90, 70)
    assert (counts["only_a"], counts["only_b"], counts["shared_unscored"], counts["paired"]) == (30, 20, 1, 69)
    assert sum(v["paired"] for v in counts["per_benchmark"].values()) == 69


def test_benchmarks_only_in_one_run_are_reported(tmp_path: Path) -> None:
    p = planted(n=60)
    a = write_run(tmp_path / "A", p["row_ids"], p["benchmarks"], p["a"], p["concepts"])
    gamma = ["gamma" if i >= 50 else name for i, name in enumerate(p["benchmarks"])]
    b = write_run(tmp_path / "B", p["row_ids"], gamma, p["b"], p["concepts"])
    counts = compute_diff(RunDir(a), RunDir(b), FAST).pairing.counts
    assert counts["benchmarks_only_b"] == ["gamma"] and counts["only_a"] == 10 and counts["only_b"] == 10


def test_no_shared_rows_is_a_clear_error(tmp_path: Path) -> None:
    p = planted(n=40)
    a = write_run(tmp_path / "A", p["row_ids"][:20], p["benchmarks"][:20], p["a"][:20], p["concepts"][:20])
    b = write_run(tmp_path / "B", p["row_ids"][20:], p["benchmarks"][20:], p["b"][20:], p["concepts"][20:])
    with pytest.raises(InputError, match="share no rows") as err:
        compute_diff(RunDir(a), RunDir(b), FAST)
    assert str(a) in str(err.value) and str(b) in str(err.value)


def test_a_missing_file_names_the_run_and_the_file(planted_runs) -> None:
    a, b = planted_runs()
    (b / S.CONCEPTS_FILE).unlink()
    with pytest.raises(InputError, match=r"run B: missing concepts.parquet"):
        compute_diff(RunDir(a), RunDir(b), FAST)
    with pytest.raises(InputError, match="run A: not a run directory"):
        compute_diff(RunDir(a.parent / "nope"), RunDir(b), FAST)


def test_a_broken_manifest_is_a_clear_error(planted_runs) -> None:
    a, b = planted_runs()
    (b / S.MANIFEST_FILE).write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match="invalid JSON") as err:
        compute_diff(RunDir(a), RunDir(b), FAST)
    assert err.value.path == str(b / S.MANIFEST_FILE)
