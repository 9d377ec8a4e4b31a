"""Builders for arena tests: battle records, files of them, and battles drawn from known BT strengths."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cg_ray.arena.outcomes import BattleArrays

REAL_BATTLES = "arena/alpaca_eval_battles.jsonl"


def record(question_id: str = "q1", /, **overrides: Any) -> dict[str, Any]:
    """A valid battle record in the LMSYS layout; keyword arguments replace fields."""
    rec: dict[str, Any] = {
        "question_id": question_id,
        "model_a": "alpha",
        "model_b": "beta",
        "winner": "model_a",
        "judge": "human",
        "turn": 1,
        "language": "English",
        "conversation_a": [
            {"role": "user", "content": f"prompt {question_id}"},
            {"role": "assistant", "content": f"alpha answers {question_id}"},
        ],
        "conversation_b": [
            {"role": "user", "content": f"prompt {question_id}"},
            {"role": "assistant", "content": f"beta answers {question_id}"},
        ],
    }
    rec.update(overrides)
    return rec


def write_jsonl(path: Path, records: Sequence[dict[str, Any] | str]) -> Path:
    """Records as JSON lines; a str is written verbatim (for malformed lines)."""
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def bt_battles(theta: Sequence[float], n: int, seed: int, tie_prob: float = 0.0) -> tuple[BattleArrays, np.ndarray]:
    """n battles between random pairs; i beats j with probability σ(θ_i − θ_j) (natural log strengths).

    With tie_prob, that fraction of battles is a tie instead. Returns the battles and the true θ.
    """
    rng = np.random.default_rng(seed)
    th = np.asarray(theta, dtype=np.float64)
    m = th.size
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    p_a = 1.0 / (1.0 + np.exp(-(th[a] - th[b])))
    winner = np.where(rng.random(n) < p_a, 0, 1)
    winner[rng.random(n) < tie_prob] = 2
    return BattleArrays([f"m{i}" for i in range(m)], a, b, winner.astype(np.int64)), th
