"""Calibration of the decision rule at realistic sizes (issue #38): seeded suites of N = 4,000 rows with
`type` × `level` cells, a fifth of the rows being questions answered four times (one group each), judged with
the defaults (10 grouped splits, FDR 10%). A hidden property lowers the success rate of its rows inside every
cell (tests/profile/planted_suites.py): it must be confirmed as one failure mode holding exactly its rows; a
null must confirm nothing beyond the metadata; the split seed must not change what is confirmed.

Each check runs the whole judgement (`judgement.judge_rows`) on 20 (or 10) seeds: ~1–4 s each, marked slow.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from cg_ray.artifacts.rows import open_rows
from cg_ray.config import MetricsConfig
from cg_ray.profile.judgement import Judgement, judge_rows
from cg_ray.profile.nullcheck import confirmed_counts, permuted_within
from cg_ray.profile.strata import read_frame

from .planted_suites import BROAD_CONCEPT, EFFECT_CONCEPT, write_effects_suite, write_suite

# slow ones here are numbers only: they run beside other tests (Makefile, pytest-all)
pytestmark = pytest.mark.cpu_only

SEEDS = range(20)
N = 4000
FOUR_ANSWERS = 0.2  # share of rows that are questions answered four times
CFG = MetricsConfig()  # the defaults a user gets


def _suite(tmp_path: Path, seed: int, **kw: object) -> tuple[Path, np.ndarray]:
    path = tmp_path / f"suite{seed}.parquet"
    hidden = write_suite(path, seed, n=N, four_answer_share=FOUR_ANSWERS, **kw)  # type: ignore[arg-type]
    return path, hidden


def _found_as_one_mode(beyond: Judgement, hidden: np.ndarray) -> bool:
    """The first confirmed mode is the property's concepts with exactly its rows, and no other confirmed mode
    shares its rows (one effect, one mode)."""
    confirmed = [m for m in beyond.modes.to_pylist() if m["confirmed"]]
    if not confirmed or set(confirmed[0]["concept_ids"]) != {5, 6} or confirmed[0]["n_rows"] != int(hidden.sum()):
        return False
    return all(not ({5, 6} & set(m["concept_ids"])) for m in confirmed[1:])


def _false_findings(beyond: Judgement) -> int:
    """Confirmed findings beyond the metadata: failure modes, concepts, slices not wholly on adjusted fields."""
    c = confirmed_counts(beyond)
    return c["failure_modes"] + c["concepts"] + c["slices_beyond_adjusted"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("share", "drop", "at_least"),
    [(0.08, 0.20, 19), (0.05, 0.15, 16)],  # the larger realistic effect nearly always; the smaller at 80% power
    ids=["8pc_of_rows_020_below_in_19_of_20", "5pc_of_rows_015_below_in_16_of_20"],
)
def test_a_realistic_effect_is_confirmed_as_one_mode(tmp_path: Path, share: float, drop: float, at_least: int) -> None:
    found = 0
    for seed in SEEDS:
        path, hidden = _suite(tmp_path, seed, hidden_share=share, hidden_drop=drop)
        found += _found_as_one_mode(judge_rows(open_rows(path), CFG), hidden)
    assert found >= at_least


@pytest.mark.slow
def test_a_global_null_confirms_nothing_beyond_the_metadata_in_19_of_20_seeds(tmp_path: Path) -> None:
    """Every score drawn at one rate: any confirmed mode, concept or slice off the adjusted fields is false."""
    clean = 0
    for seed in SEEDS:
        path, _ = _suite(tmp_path, seed, cell_effects=False)
        clean += _false_findings(judge_rows(open_rows(path), CFG)) == 0
    assert clean >= 19


@pytest.mark.slow
def test_scores_shuffled_within_cells_confirm_nothing_beyond_them_in_19_of_20_seeds(tmp_path: Path) -> None:
    """A realistic suite (weak cells; a hidden property lowering scores by 0.4 on a quarter of the rows) with
    its scores permuted within the type × level cells: nothing is left beyond the metadata, while the weak
    cells' own slices stay confirmed (the permutation keeps them)."""
    clean = slices_found = 0
    cfg = CFG.model_copy(update={"adjust_for": "type,level"})
    for seed in SEEDS:
        path, _ = _suite(tmp_path, seed, hidden_share=0.25, hidden_drop=0.4)
        beyond = judge_rows(
            open_rows(path), cfg, scores=permuted_within(read_frame(open_rows(path)), ["type", "level"], seed)
        )
        clean += _false_findings(beyond) == 0
        slices_found += confirmed_counts(beyond)["slices"] > 0
    assert clean >= 19
    assert slices_found >= 19


@pytest.mark.slow
def test_one_suite_judged_with_10_split_seeds_confirms_the_same_findings_beyond_the_metadata(tmp_path: Path) -> None:
    """The confirmed failure modes and concepts do not hang on the seed of the splits (≥ 9 of 10 seeds give
    the same set). Slices on the metadata are left out: a weak cell whose q sits at the FDR can flip
    (docs/findings.md gives the spread)."""
    path, _ = _suite(tmp_path, 0, hidden_share=0.05, hidden_drop=0.15)
    sets = []
    for seed in range(10):
        beyond = judge_rows(open_rows(path), CFG.model_copy(update={"split_seed": seed}))
        modes = frozenset(frozenset(m["concept_ids"]) for m in beyond.modes.to_pylist() if m["confirmed"])
        concepts = frozenset(k for k, v in beyond.concept_verdicts.items() if v.confirmed)
        sets.append((modes, concepts))
    most, count = Counter(sets).most_common(1)[0]
    assert count >= 9
    assert frozenset({5, 6}) in most[0]  # and the set holds the planted mode


@pytest.mark.slow
def test_an_effect_spread_over_three_concepts_is_one_mode(tmp_path: Path) -> None:
    """Concepts 5, 6 and 7 each fire on a third of the figure rows (barely overlapping): one confirmed mode
    holds all three, described by the figure, and no other mode is confirmed."""
    for seed in range(5):
        path = tmp_path / f"spread{seed}.parquet"
        hidden = write_suite(path, seed, hidden_share=0.15, hidden_drop=0.3, spread=True)
        beyond = judge_rows(open_rows(path), CFG)
        confirmed = [m for m in beyond.modes.to_pylist() if m["confirmed"]]
        assert len(confirmed) == 1, [m["concept_ids"] for m in confirmed]
        assert set(confirmed[0]["concept_ids"]) == {5, 6, 7}
        assert confirmed[0]["n_rows"] == int(hidden.sum())
        assert "[asy]" in confirmed[0]["terms"]


def _rule_rows(path: Path, mode: dict[str, object]) -> np.ndarray:
    """The rows where one of a mode's concepts fires, at the thresholds failure_modes.parquet records."""
    threshold = dict(zip(mode["concept_ids"], mode["firing_thresholds"], strict=True))  # type: ignore[call-overload]
    table = pq.read_table(path, columns=["concept_ids", "concept_acts"])
    return np.array(
        [
            any(a > 0 and a >= threshold.get(c, np.inf) for c, a in zip(ids, acts, strict=True))
            for ids, acts in zip(table["concept_ids"].to_pylist(), table["concept_acts"].to_pylist(), strict=True)
        ]
    )


@pytest.mark.slow
def test_a_broad_concept_sharing_the_effects_words_leaves_its_mode_sharp(tmp_path: Path) -> None:
    """An effect on 6% of the questions, 0.18 below their cells, carried by its own concept, beside a broad
    concept that fires strongly on the same rows and weakly on as many others, whose prompts share the effect's
    word (planted_suites.write_effects_suite(broad=…)): the broad concept can rank first and take the effect's
    concept into its mode, whose other rows score as their cells. The confirmed mode's rows, on every split's
    test half, are at least 90% the effect's, so they carry at least 90% of its drop (before members had to
    carry the effect on the rows only they add, 2 of these 6 seeds confirmed the union, about half the
    effect's rows); and the same suites with their scores permuted within the cells confirm no mode."""
    found = 0
    for seed in range(6):
        path = tmp_path / f"broad{seed}.parquet"
        effect = write_effects_suite(path, seed, [(0.06, 0.18)], broad=0.06)[0]
        beyond = judge_rows(open_rows(path), CFG)
        scored, carried = beyond.frame.scored, False
        for mode in beyond.modes.to_pylist():
            if not mode["confirmed"] or not {EFFECT_CONCEPT, BROAD_CONCEPT} & set(mode["concept_ids"]):
                continue
            rule = _rule_rows(path, mode)
            for split in beyond.plan.splits:
                held = rule & scored & ~split.choosing
                assert effect[held].mean() >= 0.9, (seed, mode["concept_ids"], effect[held].mean())
            carried = True
        found += carried
        shuffled = permuted_within(read_frame(open_rows(path)), ["type", "level"], seed)
        null = judge_rows(open_rows(path), CFG.model_copy(update={"adjust_for": "type,level"}), scores=shuffled)
        assert confirmed_counts(null)["failure_modes"] == 0
    assert found >= 5
