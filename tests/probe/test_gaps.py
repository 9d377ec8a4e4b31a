"""What a probe reads of a run: its gaps in the run's order, and each gap's firing rule for the reader check
(a mode's as failure_modes.parquet records it; a weak concept's computed over the run's rows the same way)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.metrics.firing import FIRING_QUANTILE, FIRING_SHARE
from cg_ray.probe.config import ProbeConfig
from cg_ray.probe.gaps import read_gaps
from cg_ray.probe.plan import make_plan
from cg_ray.probe.reader_check import strength
from tests.probe.scripted_probe import write_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run(tmp_path_factory.mktemp("gaps") / "run")


def test_gaps_come_in_the_runs_order_modes_first(run_dir: Path) -> None:
    gaps = read_gaps(run_dir).gaps
    kinds = [g.kind for g in gaps]
    assert kinds[:2] == ["mode", "mode"] and set(kinds[2:]) == {"concept"}
    assert [g.gap_id for g in gaps[:2]] == ["mode:1", "mode:2"] and gaps[0].terms == ("zorblat",)
    assert gaps[0].examples and all("zorblat" in e for e in gaps[0].examples)
    assert gaps[0].effect == -0.2 and gaps[0].benchmark == "coins"


def test_a_weak_concepts_rule_is_its_firing_threshold_over_the_runs_rows(run_dir: Path) -> None:
    concept = next(g for g in read_gaps(run_dir).gaps if g.kind == "concept")
    plan = make_plan(run_dir, ProbeConfig(gaps=[concept.gap_id, "mode:1"], families="only", model={"backend": "fake"}))
    rows = pq.read_table(run_dir / S.ROWS_FILE, columns=["concept_ids", "concept_acts"]).to_pylist()
    c = concept.concept_ids[0]
    acts = np.array([a for r in rows for i, a in zip(r["concept_ids"], r["concept_acts"], strict=True) if i == c])
    expected = FIRING_SHARE * np.percentile(acts[acts > 0], FIRING_QUANTILE)
    assert plan.rules[concept.gap_id] == {c: pytest.approx(expected)}
    assert plan.rules["mode:1"] == read_gaps(run_dir).thresholds["mode:1"]
    # Below its threshold a concept does not fire; just above it, it does.
    rule = plan.rules[concept.gap_id]
    assert strength(np.array([c]), np.array([0.5 * expected]), rule) < 1.0
    assert strength(np.array([c]), np.array([1.01 * expected]), rule) >= 1.0


def test_a_mixed_gap_shows_the_writer_only_rows_of_the_benchmark_whose_scorer_scores_its_items() -> None:
    from cg_ray.probe.gaps import _gap

    rows = {
        "a1": {"benchmark": "gsm8k", "prompt": "Sam has 3 apples and eats 1. How many are left?"},
        "b1": {"benchmark": "mmlu", "prompt": "Which is a fruit? (A) apple (B) brick"},
        "a2": {"benchmark": "gsm8k", "prompt": "An apple costs 2 dollars; 4 apples cost?"},
    }
    entry = {"description": "apples", "example_row_ids": ["a1", "b1", "a2"], "n_rows": 3}
    gap = _gap("mode:1", "mode", [7], entry, rows, {"gsm8k": "numeric", "mmlu": "choice"}, -0.2)
    assert gap.benchmark == "gsm8k" and gap.scorer == "numeric"
    assert gap.examples == (rows["a1"]["prompt"], rows["a2"]["prompt"])
