"""Per-model rows of the arena variant: each battle of a model of interest becomes one scored row.

Score: 1 for a win, 0 for a loss, ties per `TiePolicy` (0.5 / dropped; "tie (bothbad)" dropped / 0 / 0.5).
The text the reader reads is the user prompt(s) **and** that model's response(s), all turns (paper
Appendix D): `messages` keeps the turns (for a chat template); `text` is their contents joined by a blank
line in conversation order (user and assistant turns only); `prompt` / `response` join the user /
assistant turns alone.

Row ids are stable: `question_id:side:opponent`, unique because the loader rejects repeated battles
(same question_id, model_a, model_b).
"""

from __future__ import annotations

import difflib
import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cg_ray.arena.config import TiePolicy
from cg_ray.arena.outcomes import side_scores
from cg_ray.artifacts.publish import atomic_file
from cg_ray.benchmarks.arena import WINNERS, Battle, BattleSet, Side
from cg_ray.errors import InputError

DEFAULT_BENCHMARK = "arena"


@dataclass(frozen=True)
class ArenaRow:
    row_id: str
    benchmark: str
    model: str
    score: float
    prompt: str
    response: str
    text: str
    messages: list[dict[str, str]]
    metadata: dict[str, Any]

    def as_dict(self) -> dict[str, object]:
        """One line of the arena's rows JSONL (the fields above)."""
        return asdict(self)


def row_id(battle: Battle, side: Side) -> str:
    """The stable id of `side`'s row of a battle (shared with the per-concept head-to-head join)."""
    opponent = battle.model_b if side == "a" else battle.model_a
    return f"{battle.question_id}:{side}:{opponent}"


def select_models(battles: BattleSet, models: Sequence[str] = (), min_battles: int | None = None) -> list[str]:
    """The models of interest: the named ones (each must have battles), or all with ≥ min_battles battles."""
    counts = battles.battle_counts()
    if models:
        for name in models:
            if name not in counts:
                close = difflib.get_close_matches(name, list(counts), n=3)
                hint = f"; did you mean {close}?" if close else f"; models: {list(counts)}"
                raise InputError(f"model {name!r} played no battle{hint}", path=battles.source, field="model")
        return list(dict.fromkeys(models))
    if min_battles is None:
        raise ValueError("give models or min_battles")
    chosen = [name for name, n in counts.items() if n >= min_battles]
    if not chosen:
        best = next(iter(counts.items()), ("-", 0))
        raise InputError(
            f"no model has ≥ {min_battles} battles (most: {best[0]!r} with {best[1]})",
            path=battles.source,
            field="model",
        )
    return chosen


def _row(battle: Battle, side: Side, score: float, benchmark: str) -> ArenaRow:
    turns = battle.conversation(side)
    dialogue = [t for t in turns if t.role in ("user", "assistant")]
    return ArenaRow(
        row_id=row_id(battle, side),
        benchmark=benchmark,
        model=battle.model(side),
        score=score,
        prompt="\n\n".join(t.content for t in dialogue if t.role == "user"),
        response="\n\n".join(t.content for t in dialogue if t.role == "assistant"),
        text="\n\n".join(t.content for t in dialogue),
        messages=[{"role": t.role, "content": t.content} for t in turns],
        metadata={
            "question_id": battle.question_id,
            "side": side,
            "opponent": battle.model_b if side == "a" else battle.model_a,
            "winner": battle.winner,
            "judge": battle.judge,
            "language": battle.language,
            "turn": battle.turn,
        },
    )


@dataclass
class RowCounts:
    """Per model: rows written, the sum of their scores, and battles dropped by the tie policy."""

    rows: Counter[str] = field(default_factory=Counter)
    score_sum: dict[str, float] = field(default_factory=dict)
    dropped: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {
            m: {"rows": self.rows[m], "score_sum": self.score_sum.get(m, 0.0), "dropped": self.dropped[m]}
            for m in sorted(set(self.rows) | set(self.dropped))
        }


def iter_model_rows(
    battles: Iterable[Battle],
    models: Sequence[str],
    policy: TiePolicy | None = None,
    *,
    benchmark: str = DEFAULT_BENCHMARK,
    counts: RowCounts | None = None,
) -> Iterator[ArenaRow]:
    """Rows of every model of interest, model by model, battles in source order within a model."""
    table = side_scores(policy or TiePolicy())
    code = {w: i for i, w in enumerate(WINNERS)}
    wanted = set(models)
    played: dict[str, list[Battle]] = {m: [] for m in models}
    for battle in battles:  # one pass: cost O(battles + rows), not O(models × battles)
        for name in (battle.model_a, battle.model_b):
            if name in wanted:
                played[name].append(battle)
    for model in models:
        for battle in played[model]:
            side = battle.side_of(model)
            score = float(table[side][code[battle.winner]])
            if np.isnan(score):
                if counts is not None:
                    counts.dropped[model] += 1
                continue
            if counts is not None:
                counts.rows[model] += 1
                counts.score_sum[model] = counts.score_sum.get(model, 0.0) + score
            yield _row(battle, side, score, benchmark)


def write_rows_jsonl(rows: Iterable[ArenaRow], path: str | os.PathLike[str]) -> int:
    """Write rows as JSONL, published atomically; returns the number written."""
    n = 0
    with atomic_file(Path(path)) as tmp, tmp.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row.as_dict(), ensure_ascii=False) + "\n")
            n += 1
    return n
