"""Judging asks only for scores that can be had, and the plan counts exactly what is sent."""

from __future__ import annotations

from collections.abc import Sequence

from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.judging import Budget, Examples, JudgeStats, Scores, Subject, planned, score_subjects
from tests.describe.judge_script import answer


class Counting:
    """A judge that says yes to texts about cats and keeps the prompts it was sent."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def complete(self, prompts: Sequence[str], max_tokens: int) -> list[str]:
        self.prompts += prompts
        return [answer(p, lambda kind, description, text: text.startswith("cat")) for p in prompts]


def _subject(key: int, positive: list[str], negative: list[str]) -> Subject:
    examples = Examples(positive=positive, negative=negative)
    return Subject((key,), ["texts about cats", "texts about dogs"], examples, examples, ["llm", "label"])


def test_a_subject_without_held_out_rows_of_its_own_costs_no_judge_request() -> None:
    config = ExplainConfig.model_validate({"endpoint": "http://127.0.0.1:9/v1", "model": "m", "judge_batch": 5})
    seen = _subject(1, [f"cat {i}" for i in range(4)], [f"car {i}" for i in range(4)])
    unseen = _subject(2, [], [f"car {i}" for i in range(4)])  # no held-out row with the concept
    judge = Counting()
    stats = JudgeStats()
    n_planned, _, _ = planned([seen, unseen], config)
    first = lambda s, scores: 0  # noqa: E731 - the first candidate wins
    selected, heldout = score_subjects([seen, unseen], judge, config, Budget(None), first, stats)
    # 2 candidates on the select half + the winner on the report half, 8 examples each in batches of 5
    assert n_planned == stats.requests == len(judge.prompts) == 3 * 2 and stats.fallback_requests == 0
    assert not any("car 0" in p and "cat" not in p for p in judge.prompts)  # nothing of the negatives-only subject
    assert all(s.detection is not None for s in selected[0]) and heldout[0] is not None
    assert selected[1] == [Scores(), Scores()] and heldout[1] == (0, Scores())  # no score, nothing asked
