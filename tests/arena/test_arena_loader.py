"""Battle loader: every source kind, and each bad record → an error naming file, record and field, or a count."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cg_ray.benchmarks import arena as A
from cg_ray.benchmarks.arena import BattleError, load_battles
from cg_ray.errors import InputError

from .arena_builders import record, write_jsonl

USER_ONLY = [{"role": "user", "content": "hi"}]
ASSISTANT_FIRST = [{"role": "assistant", "content": "hello"}, {"role": "user", "content": "hi"}]

# (overrides, reason code, field named in the error)
BAD_RECORDS: list[tuple[dict[str, Any], str, str]] = [
    ({"winner": "model_c"}, A.UNKNOWN_WINNER, "winner"),
    ({"winner": None}, A.UNKNOWN_WINNER, "winner"),
    ({"model_a": ""}, A.MISSING_MODEL, "model_a"),
    ({"model_b": None}, A.MISSING_MODEL, "model_b"),
    ({"model_b": "alpha"}, A.SAME_MODEL, "model_b"),
    ({"question_id": ""}, A.MISSING_QUESTION_ID, "question_id"),
    ({"conversation_a": []}, A.EMPTY_CONVERSATION, "conversation_a"),
    ({"conversation_b": None}, A.EMPTY_CONVERSATION, "conversation_b"),
    ({"conversation_a": ASSISTANT_FIRST}, A.RESPONSE_WITHOUT_PROMPT, "conversation_a"),
    ({"conversation_b": [{"role": "assistant", "content": "x"}]}, A.RESPONSE_WITHOUT_PROMPT, "conversation_b"),
    ({"conversation_a": USER_ONLY}, A.MISSING_RESPONSE, "conversation_a"),
    ({"conversation_a": [{"role": "bot", "content": "x"}]}, A.MALFORMED_TURN, "conversation_a"),
    ({"conversation_b": [{"role": "user", "content": None}]}, A.MALFORMED_TURN, "conversation_b"),
    ({"turn": 0}, A.BAD_TURN, "turn"),
]


def test_loads_a_valid_file(tmp_path: Path) -> None:
    multi = [
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "r1"},
        {"role": "user", "content": "u2"},
        {"role": "assistant", "content": "r2"},
    ]
    path = write_jsonl(
        tmp_path / "b.jsonl",
        [record("q1"), "", record("q2", winner="tie (bothbad)", conversation_a=multi, turn=None, judge=None)],
    )
    battles = load_battles(path)
    assert len(battles) == 2 and battles.n_records == 2 and battles.skipped == {}
    first, second = battles.battles
    assert (first.question_id, first.model_a, first.model_b, first.winner) == ("q1", "alpha", "beta", "model_a")
    assert first.conversation_b[1] == A.Message("assistant", "beta answers q1")
    assert second.turn == 2 and second.judge is None and second.record == 1  # turn counted from the user turns
    assert battles.models() == ["alpha", "beta"]
    assert battles.battle_counts() == {"alpha": 2, "beta": 2}


@pytest.mark.parametrize(("overrides", "code", "field"), BAD_RECORDS, ids=[f"{c}-{f}" for _, c, f in BAD_RECORDS])
def test_bad_record_names_file_record_and_field(tmp_path: Path, overrides: dict, code: str, field: str) -> None:
    path = write_jsonl(tmp_path / "b.jsonl", [record("q1"), record("q2"), record("bad", **overrides)])
    with pytest.raises(BattleError) as info:
        load_battles(path)
    err = info.value
    assert err.code == code and err.field == field and err.row == 2 and err.path == str(path)
    message = str(err)
    assert str(path) in message and "line 3" in message and f"field {field!r}" in message and code in message


def test_malformed_json_names_the_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "b.jsonl", [record("q1"), '{"question_id": "q2", "model_a": ', record("q3")])
    with pytest.raises(BattleError) as info:
        load_battles(path)
    assert info.value.code == A.MALFORMED_JSON and info.value.row == 1 and info.value.line == 2
    assert "line 2" in str(info.value)
    path = write_jsonl(tmp_path / "c.jsonl", ["[1, 2]"])
    with pytest.raises(BattleError, match="expected a JSON object"):
        load_battles(path)


def test_duplicate_battle(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "b.jsonl", [record("q1"), record("q1", model_a="beta", model_b="alpha"), record("q1")]
    )
    with pytest.raises(BattleError) as info:
        load_battles(path)  # the swapped pair is another battle; the exact repeat is not
    assert info.value.code == A.DUPLICATE_BATTLE and info.value.row == 2 and "record 0" in str(info.value)


def test_skip_invalid_counts_each_reason(tmp_path: Path) -> None:
    records: list[dict[str, Any] | str] = [record("good1")]
    records += [record(f"bad{k}", **o) for k, (o, _, _) in enumerate(BAD_RECORDS)]
    records += ["not json", record("good2"), record("good2")]
    battles = load_battles(write_jsonl(tmp_path / "b.jsonl", records), skip_invalid=True)
    assert [b.question_id for b in battles.battles] == ["good1", "good2"]
    expected: dict[str, int] = {}
    for _, code, _ in BAD_RECORDS:
        expected[code] = expected.get(code, 0) + 1
    expected[A.MALFORMED_JSON] = 1
    expected[A.DUPLICATE_BATTLE] = 1
    assert battles.skipped == dict(sorted(expected.items()))
    assert battles.n_records == len(records) and sum(battles.skipped.values()) == len(records) - 2


def test_json_list_and_parquet_sources(tmp_path: Path) -> None:
    recs = [record("q1"), record("q2", winner="tie"), record("q3", winner="model_c")]
    json_path = tmp_path / "b.json"
    json_path.write_text(json.dumps(recs), encoding="utf-8")
    parquet_path = tmp_path / "b.parquet"
    pq.write_table(pa.Table.from_pylist(recs), parquet_path)  # conversations become list<struct<role, content>>
    for path in (json_path, parquet_path):
        with pytest.raises(BattleError) as info:
            load_battles(path)
        assert info.value.row == 2 and info.value.field == "winner"
        battles = load_battles(path, skip_invalid=True)
        assert [b.winner for b in battles.battles] == ["model_a", "tie"] and battles.skipped == {A.UNKNOWN_WINNER: 1}
        assert battles.battles[0].conversation_a[0] == A.Message("user", "prompt q1")
    # Conversations stored as JSON strings (some exports) are accepted too.
    as_text = record("q1", conversation_a=json.dumps(record()["conversation_a"]))
    assert len(load_battles(write_jsonl(tmp_path / "t.jsonl", [as_text]))) == 1


def test_hugging_face_saved_dataset(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    recs = [record("q1"), record("q2", winner="model_b", conversation_b=[])]
    datasets.Dataset.from_list(recs).save_to_disk(str(tmp_path / "ds"))
    with pytest.raises(BattleError) as info:
        load_battles(tmp_path / "ds")
    assert info.value.row == 1 and info.value.field == "conversation_b"
    assert len(load_battles(tmp_path / "ds", skip_invalid=True)) == 1
    datasets.DatasetDict({"test": datasets.Dataset.from_list(recs[:1])}).save_to_disk(str(tmp_path / "dd"))
    assert len(load_battles(tmp_path / "dd", split="test")) == 1
    with pytest.raises(InputError, match="no split 'train'"):
        load_battles(tmp_path / "dd")


def test_hub_source_calls_load_dataset(monkeypatch: pytest.MonkeyPatch) -> None:
    """`hf:NAME` goes through datasets.load_dataset (faked here: tests never touch the network)."""
    datasets = pytest.importorskip("datasets")
    calls = []

    def fake_load_dataset(name: str, split: str) -> Any:
        calls.append((name, split))
        return datasets.Dataset.from_list([record("q1"), record("q2")])

    monkeypatch.setattr(sys.modules["datasets"], "load_dataset", fake_load_dataset)
    battles = load_battles("hf:lmsys/chatbot_arena_conversations")
    assert calls == [("lmsys/chatbot_arena_conversations", "train")] and len(battles) == 2


def test_unusable_sources(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_battles(tmp_path / "missing.jsonl")
    (tmp_path / "b.csv").write_text("x\n")
    with pytest.raises(InputError, match="unknown battle file type"):
        load_battles(tmp_path / "b.csv")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(InputError, match="no battle records"):
        load_battles(tmp_path / "empty.jsonl")
