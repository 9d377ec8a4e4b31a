"""The 2,415 real AlpacaEval battles in the Arena layout (three FuseChat models vs gpt4_1106_preview)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from cg_ray.arena.config import RatingsConfig, TiePolicy
from cg_ray.arena.outcomes import BattleArrays
from cg_ray.arena.ratings import rate
from cg_ray.arena.rows import RowCounts, iter_model_rows
from cg_ray.benchmarks.arena import BattleSet, load_battles

from .arena_builders import REAL_BATTLES

REFERENCE = "gpt4_1106_preview"


@pytest.fixture(scope="module")
def path(shared_data: Path) -> Path:
    p = shared_data / REAL_BATTLES
    if not p.is_file():
        pytest.skip(f"real battles not found at {p}")
    return p


@pytest.fixture(scope="module")
def battles(path: Path) -> BattleSet:
    return load_battles(path)


@pytest.fixture(scope="module")
def raw_counts(path: Path) -> dict[str, Counter[str]]:
    """Outcomes per FuseChat model counted straight from the JSON, independently of the loader."""
    out: dict[str, Counter[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        other = rec["model_b"] if rec["model_a"] == REFERENCE else rec["model_a"]
        won = {"model_a": rec["model_a"], "model_b": rec["model_b"]}.get(rec["winner"])
        out.setdefault(other, Counter())["win" if won == other else "loss" if won else "tie"] += 1
    return out


def test_loads_every_battle(battles: BattleSet) -> None:
    assert len(battles) == battles.n_records == 2415 and battles.skipped == {}
    assert battles.battle_counts()[REFERENCE] == 2415
    assert all(n == 805 for m, n in battles.battle_counts().items() if m != REFERENCE)


def test_ratings_match_the_raw_win_counts(battles: BattleSet, raw_counts: dict[str, Counter[str]]) -> None:
    ratings = rate(BattleArrays.from_battles(battles.battles), RatingsConfig(bootstrap=200, seed=0))
    assert sorted(ratings.models) == sorted([REFERENCE, *raw_counts])
    ref = ratings.models.index(REFERENCE)
    for model, c in raw_counts.items():
        i = ratings.models.index(model)
        assert ratings.counts[model] == {
            "battles": 805,
            "wins": c["win"],
            "losses": c["loss"],
            "ties": c["tie"],
            "bothbad": 0,
        }
        # Each FuseChat model met only the reference, so the BT fit reproduces each pair's win share exactly.
        share = (c["win"] + c["tie"] / 2) / 805
        assert ratings.predicted_win(i, ref) == pytest.approx(share, abs=1e-9)
        assert ratings.bt[i] - ratings.bt[ref] == pytest.approx(400 * np.log10(share / (1 - share)), abs=1e-6)
    assert list(np.argsort(ratings.elo)) == list(np.argsort(ratings.bt))
    assert np.all(ratings.bt_lower < ratings.bt) and np.all(ratings.bt < ratings.bt_upper)


def test_rows_scores_are_the_win_shares(battles: BattleSet, raw_counts: dict[str, Counter[str]]) -> None:
    for policy, tie_value in ((TiePolicy(), 0.5), (TiePolicy(tie="drop"), None)):
        counts = RowCounts()
        for _ in iter_model_rows(battles.battles, list(raw_counts), policy, counts=counts):
            pass
        for model, c in raw_counts.items():
            kept = 805 - (c["tie"] if tie_value is None else 0)
            assert counts.rows[model] == kept
            assert counts.score_sum[model] == c["win"] + (tie_value or 0) * c["tie"]
