"""The judgement's observer (`decision.Observer`, issue #59): every call of the decision rule a judgement makes,
seen as it was made, which scripts/fdr_simulation.py re-judges under other rules. A study that patched module
attributes instead saw no failure mode once the judgement imported `split_modes` by name; these checks fail
if a kind of finding goes unseen or what is seen is not what decided."""

from __future__ import annotations

from pathlib import Path

import pytest

from cg_ray.artifacts.rows import open_rows
from cg_ray.config import MetricsConfig
from cg_ray.profile.decision import Judged, combined_q, judge, split_tries
from cg_ray.profile.judgement import judge_rows

from .planted_suites import EFFECT_CONCEPT, write_effects_suite

CFG = MetricsConfig()


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("observed") / "rows.parquet"
    write_effects_suite(path, 7, [(0.06, 0.2), (0.06, 0.2), (0.05, 0.15)])
    return path


def test_the_observer_sees_every_kind_once_with_the_tests_that_decided(suite: Path) -> None:
    seen: list[Judged] = []
    judgement = judge_rows(open_rows(suite), CFG, observe=seen.append)
    by_kind = {j.kind: j for j in seen}
    assert sorted(j.kind for j in seen) == ["concepts", "failure_modes", "slices"]
    for j in seen:
        assert any(j.per_split), j.kind
        assert (j.splits, j.fdr) == (judgement.plan.n_splits, CFG.fdr)
        # What was seen decides: judged again it gives the verdicts the judgement used, and the product's own
        # steps without the intervals (what the study re-judges with) confirm the same findings.
        assert judge(j.per_split, j.splits, j.fdr, (-1.0, 1.0)) == j.verdicts
        tried = split_tries(j.per_split, j.fdr)
        assert {k for k, per in tried.items() if combined_q(per, j.splits) <= j.fdr} == {
            k for k, v in j.verdicts.items() if v.confirmed
        }
    assert dict(by_kind["concepts"].verdicts) == dict(judgement.concept_verdicts)
    assert len(by_kind["slices"].verdicts) == judgement.n_slice_candidates
    modes = by_kind["failure_modes"]
    assert len(modes.verdicts) == judgement.n_mode_candidates == len(modes.members)
    assert sum(v.confirmed for v in modes.verdicts.values()) == judgement.n_modes_confirmed > 0
    shown = {tuple(m) for m in judgement.modes.column("concept_ids").to_pylist()}
    assert shown <= set(modes.members.values())
    # The planted effects are there to be scored: a confirmed mode holding each one's concept.
    confirmed = [modes.members[k] for k, v in modes.verdicts.items() if v.confirmed]
    assert any(EFFECT_CONCEPT in m for m in confirmed)


def test_observing_changes_nothing(suite: Path) -> None:
    plain = judge_rows(open_rows(suite), CFG)
    observed = judge_rows(open_rows(suite), CFG, observe=lambda _: None)
    assert observed.summary() == plain.summary()
    assert observed.modes.equals(plain.modes)
