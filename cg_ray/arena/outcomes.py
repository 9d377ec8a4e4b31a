"""Battles as integer arrays, and the score each side gets under a tie policy (NaN = battle dropped)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from cg_ray.arena.config import TiePolicy
from cg_ray.benchmarks.arena import WINNERS, Battle, Side

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Winner codes: index into WINNERS.
MODEL_A, MODEL_B, TIE, BOTHBAD = range(4)


def side_scores(policy: TiePolicy) -> dict[Side, FloatArray]:
    """Per winner code, the score of side a and side b for per-model rows (NaN: dropped)."""
    tie = 0.5 if policy.tie == "half" else np.nan
    bothbad = {"drop": np.nan, "zero": 0.0, "half": 0.5}[policy.bothbad]
    return {"a": np.array([1.0, 0.0, tie, bothbad]), "b": np.array([0.0, 1.0, tie, bothbad])}


def rating_scores(policy: TiePolicy) -> FloatArray:
    """Per winner code, side a's share of the win for ratings (NaN: dropped; "zero" drops, see TiePolicy)."""
    tie = 0.5 if policy.tie == "half" else np.nan
    bothbad = 0.5 if policy.bothbad == "half" else np.nan
    return np.array([1.0, 0.0, tie, bothbad])


@dataclass(frozen=True)
class BattleArrays:
    """Battles as codes: model_a[k], model_b[k] index `models`; winner[k] indexes WINNERS."""

    models: list[str]
    model_a: IntArray
    model_b: IntArray
    winner: IntArray

    def __len__(self) -> int:
        return len(self.winner)

    @classmethod
    def from_battles(cls, battles: Sequence[Battle]) -> BattleArrays:
        models = sorted({m for b in battles for m in (b.model_a, b.model_b)})
        index = {m: i for i, m in enumerate(models)}
        code = {w: i for i, w in enumerate(WINNERS)}
        return cls(
            models,
            np.array([index[b.model_a] for b in battles], dtype=np.int64),
            np.array([index[b.model_b] for b in battles], dtype=np.int64),
            np.array([code[b.winner] for b in battles], dtype=np.int64),
        )

    def counts(self) -> dict[str, dict[str, int]]:
        """Per model: battles, wins, losses, ties, bothbad (all battles, before any tie policy)."""
        m = len(self.models)
        played = np.bincount(self.model_a, minlength=m) + np.bincount(self.model_b, minlength=m)
        wins = np.bincount(self.model_a[self.winner == MODEL_A], minlength=m) + np.bincount(
            self.model_b[self.winner == MODEL_B], minlength=m
        )
        losses = np.bincount(self.model_a[self.winner == MODEL_B], minlength=m) + np.bincount(
            self.model_b[self.winner == MODEL_A], minlength=m
        )

        def both(code: int) -> IntArray:
            sel = self.winner == code
            return np.bincount(self.model_a[sel], minlength=m) + np.bincount(self.model_b[sel], minlength=m)

        ties, bothbad = both(TIE), both(BOTHBAD)
        return {
            name: {
                "battles": int(played[i]),
                "wins": int(wins[i]),
                "losses": int(losses[i]),
                "ties": int(ties[i]),
                "bothbad": int(bothbad[i]),
            }
            for i, name in enumerate(self.models)
        }
