"""Per-model rows: scores under each tie policy, the text the reader reads, stable ids, model selection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cg_ray.arena.config import SelectionConfig, TiePolicy
from cg_ray.arena.rows import RowCounts, iter_model_rows, row_id, select_models, write_rows_jsonl
from cg_ray.benchmarks.arena import BattleSet, load_battles
from cg_ray.errors import InputError

from .arena_builders import record, write_jsonl


@pytest.fixture
def battles(tmp_path: Path) -> BattleSet:
    recs = [
        record("q1", winner="model_a"),  # alpha wins
        record("q2", model_a="beta", model_b="alpha", winner="model_a"),  # beta (side a) wins
        record("q3", winner="tie"),
        record("q4", winner="tie (bothbad)"),
        record("q5", model_b="gamma", winner="model_b"),  # gamma beats alpha
    ]
    return load_battles(write_jsonl(tmp_path / "b.jsonl", recs))


def scores(battles: BattleSet, model: str, policy: TiePolicy) -> dict[str, float]:
    return {r.metadata["question_id"]: r.score for r in iter_model_rows(battles.battles, [model], policy)}


def test_scores_under_each_tie_policy(battles: BattleSet) -> None:
    assert scores(battles, "alpha", TiePolicy()) == {"q1": 1.0, "q2": 0.0, "q3": 0.5, "q5": 0.0}
    assert scores(battles, "beta", TiePolicy()) == {"q1": 0.0, "q2": 1.0, "q3": 0.5}
    assert scores(battles, "alpha", TiePolicy(tie="drop")) == {"q1": 1.0, "q2": 0.0, "q5": 0.0}
    assert scores(battles, "alpha", TiePolicy(bothbad="zero")) == {
        "q1": 1.0,
        "q2": 0.0,
        "q3": 0.5,
        "q4": 0.0,
        "q5": 0.0,
    }
    assert scores(battles, "beta", TiePolicy(tie="drop", bothbad="zero")) == {"q1": 0.0, "q2": 1.0, "q4": 0.0}
    assert scores(battles, "beta", TiePolicy(bothbad="half"))["q4"] == 0.5


def test_counts_follow_the_policy(battles: BattleSet) -> None:
    counts = RowCounts()
    rows = list(iter_model_rows(battles.battles, ["alpha", "beta"], TiePolicy(tie="drop"), counts=counts))
    assert len(rows) == 3 + 2
    assert counts.as_dict() == {
        "alpha": {"rows": 3, "score_sum": 1.0, "dropped": 2},
        "beta": {"rows": 2, "score_sum": 1.0, "dropped": 2},
    }


def test_row_text_is_the_prompts_and_this_models_responses(tmp_path: Path) -> None:
    conv_b = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "beta r1"},
        {"role": "user", "content": "u2"},
        {"role": "assistant", "content": "beta r2"},
    ]
    battles = load_battles(write_jsonl(tmp_path / "b.jsonl", [record("q9", conversation_b=conv_b, turn=2)]))
    (row,) = iter_model_rows(battles.battles, ["beta"], benchmark="chatbot_arena")
    assert row.row_id == "q9:b:alpha" == row_id(battles.battles[0], "b")
    assert (row.benchmark, row.model, row.score) == ("chatbot_arena", "beta", 0.0)
    assert row.prompt == "u1\n\nu2" and row.response == "beta r1\n\nbeta r2"
    assert row.text == "u1\n\nbeta r1\n\nu2\n\nbeta r2"  # system turns stay in `messages` only
    assert row.messages == conv_b
    assert row.metadata == {
        "question_id": "q9",
        "side": "b",
        "opponent": "alpha",
        "winner": "model_a",
        "judge": "human",
        "language": "English",
        "turn": 2,
    }
    assert "alpha answers" not in row.text  # never the opponent's answer


def test_row_ids_are_unique_when_a_question_is_played_by_several_pairs(battles: BattleSet, tmp_path: Path) -> None:
    recs = [record("q1"), record("q1", model_b="gamma"), record("q1", model_a="gamma", model_b="alpha")]
    many = load_battles(write_jsonl(tmp_path / "m.jsonl", recs))
    ids = [r.row_id for r in iter_model_rows(many.battles, ["alpha"])]
    assert ids == ["q1:a:beta", "q1:a:gamma", "q1:b:gamma"]


def test_select_models(battles: BattleSet) -> None:
    assert battles.battle_counts() == {"alpha": 5, "beta": 4, "gamma": 1}
    assert select_models(battles, min_battles=4) == ["alpha", "beta"]
    assert select_models(battles, ["gamma", "alpha", "gamma"]) == ["gamma", "alpha"]
    with pytest.raises(InputError, match=r"did you mean \['alpha'\]"):
        select_models(battles, ["alpah"])
    with pytest.raises(InputError, match="no model has ≥ 6 battles"):
        select_models(battles, min_battles=6)
    with pytest.raises(ValueError, match="exactly one"):
        SelectionConfig(models=("a",), min_battles=3)


def test_write_rows_jsonl_is_atomic(battles: BattleSet, tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    n = write_rows_jsonl(iter_model_rows(battles.battles, ["alpha"]), out)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert n == len(lines) == 4 and [x["score"] for x in lines] == [1.0, 0.0, 0.5, 0.0]

    def failing():
        yield from iter_model_rows(battles.battles, ["beta"])
        raise RuntimeError("reader crashed")

    with pytest.raises(RuntimeError):
        write_rows_jsonl(failing(), out)
    assert len(out.read_text().splitlines()) == 4  # the old file is untouched, no temporary left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.jsonl", "rows.jsonl"]


def test_arena_config_from_yaml_values() -> None:
    from pydantic import ValidationError

    from cg_ray.arena.config import ArenaConfig

    cfg = ArenaConfig.model_validate(
        {
            "battles": "hf:lmsys/chatbot_arena_conversations",
            "selection": {"min_battles": 500},
            "tie_policy": {"tie": "drop"},
        }
    )
    assert cfg.tie_policy == TiePolicy(tie="drop", bothbad="drop") and cfg.ratings.bootstrap == 1000
    with pytest.raises(ValidationError, match="extra"):
        ArenaConfig.model_validate({"battles": "b.jsonl", "selection": {"models": ["a"]}, "ties": "half"})
    with pytest.raises(ValidationError, match="bothbad"):
        ArenaConfig.model_validate(
            {"battles": "b.jsonl", "selection": {"models": ["a"]}, "tie_policy": {"bothbad": "x"}}
        )
