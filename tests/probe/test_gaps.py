"""What a probe reads of a run: its gaps in the run's order, and each gap's firing rule for the reader check
(a mode's as failure_modes.parquet records it; a weak concept's computed over the run's rows the same way)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.metrics.firing import FIRING_QUANTILE, FIRING_SHARE
from cg_ray.probe.config import ProbeConfig
from cg_ray.probe.confirm import DEFAULT_EFFECT, confirm_gaps
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


def test_the_effect_a_probe_plans_for_is_the_held_out_one_never_the_in_sample(run_dir: Path, tmp_path: Path) -> None:
    """A failure mode without a held-out residual, or a weak concept without a cross-fitted one, gets no effect
    (the verdict then uses the stated default), even when the run holds an in-sample figure: selection
    inflates that one, which would make "refuted" easier."""
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    modes = pq.read_table(run / S.FAILURE_MODES_FILE).to_pylist()
    modes[0] |= {"heldout_residual": None, "in_sample_residual": -0.3}
    modes[1] |= {"heldout_residual": -0.07, "in_sample_residual": -0.3}
    pq.write_table(pa.Table.from_pylist(modes, schema=S.FAILURE_MODES_SCHEMA), run / S.FAILURE_MODES_FILE)
    weak = pq.read_table(run / S.WEAKNESSES_FILE).to_pylist()
    assert len(weak) >= 2
    weak[0] |= {"in_sample_residual": -0.25, "heldout_residual": None}
    weak[1] |= {"in_sample_residual": -0.25, "heldout_residual": -0.05}
    pq.write_table(pa.Table.from_pylist(weak, schema=S.PROFILE_SCHEMA), run / S.WEAKNESSES_FILE)
    effects = {g.gap_id: g.effect for g in read_gaps(run).gaps}
    assert effects["mode:1"] is None and effects["mode:2"] == -0.07
    assert effects[f"concept:{weak[0]['concept_id']}"] is None
    assert effects[f"concept:{weak[1]['concept_id']}"] == -0.05
    # and judged so: with no held-out effect the note names the default, not the in-sample −0.3
    ids = [f"p{i}" for i in range(40)]
    pairs = pd.DataFrame({"gap_id": "mode:1", "pair_id": ids, "request_id": ids, "target_score": 1.0,
                          "control_score": 1.0})  # fmt: skip
    (gap,) = confirm_gaps(pairs, {"mode:1": effects["mode:1"]})
    assert gap.run_effect is None and f"the default effect {DEFAULT_EFFECT:+.3f} (run gave none)" in gap.note
