"""Scorers: a registry of pure functions ``score(response, reference, choices, **options) -> float | None``.

Lazy entries: configs validate scorer names without importing anything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cg_ray.registry import Registry

Scorer = Callable[..., float | None]
"""``(response: str | None, reference: Sequence[str], choices: Sequence[str] | None, **options)``"""

SCORERS: Registry[Scorer] = Registry("scorer")
SCORERS.add("exact", "cg_ray.scoring.scorers:exact_match")
SCORERS.add("numeric", "cg_ray.scoring.scorers:numeric")
SCORERS.add("multiple_choice", "cg_ray.scoring.scorers:multiple_choice")
SCORERS.add("any_of", "cg_ray.scoring.scorers:any_of")
SCORERS.add("precomputed", "cg_ray.scoring.scorers:precomputed")
SCORERS.add("judge", "cg_ray.scoring.judge:judge")


def score_one(
    name: str, response: str | None, reference: Sequence[str], choices: Sequence[str] | None = None, **options: object
) -> float | None:
    return SCORERS.get(name)(response, reference, choices, **options)


__all__ = ["SCORERS", "Scorer", "score_one"]
