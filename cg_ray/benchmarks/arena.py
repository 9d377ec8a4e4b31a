"""Pairwise battles in the LMSYS Chatbot Arena conversations layout, validated.

A record has `question_id, model_a, model_b, winner ∈ {model_a, model_b, tie, tie (bothbad)},
conversation_a, conversation_b` (lists of `{role, content}` turns) and optionally `turn, language, judge`.
Sources: JSONL, a JSON list, Parquet, a `datasets.save_to_disk` directory, or `hf:NAME` for
`datasets.load_dataset(NAME)` (e.g. `hf:lmsys/chatbot_arena_conversations`, gated: needs a token).

A bad record raises `BattleError` naming the source, the record (0-based; JSONL also gives the line) and
the field; with `skip_invalid=True` it is skipped and counted under its reason code instead.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from cg_ray.errors import InputError, LimitExceeded
from cg_ray.io.records import NO_LIMITS, ReadLimits, iter_json_lines, iter_records

WINNERS: Final = ("model_a", "model_b", "tie", "tie (bothbad)")
Side = Literal["a", "b"]
ROLES: Final = ("user", "assistant", "system")

# Reason codes of invalid records (the keys of `BattleSet.skipped`).
MALFORMED_JSON: Final = "malformed_json"
MISSING_QUESTION_ID: Final = "missing_question_id"
MISSING_MODEL: Final = "missing_model"
SAME_MODEL: Final = "same_model"
UNKNOWN_WINNER: Final = "unknown_winner"
EMPTY_CONVERSATION: Final = "empty_conversation"
MALFORMED_TURN: Final = "malformed_turn"
RESPONSE_WITHOUT_PROMPT: Final = "response_without_prompt"
MISSING_RESPONSE: Final = "missing_response"
BAD_TURN: Final = "bad_turn"
DUPLICATE_BATTLE: Final = "duplicate_battle"


class BattleError(InputError):
    """An invalid battle record; `code` is its reason code."""

    def __init__(
        self, message: str, *, code: str, path: str, row: int, field: str | None, line: int | None = None
    ) -> None:
        super().__init__(message, path=path, row=row, field=field, line=line)
        self.code = code


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    content: str


@dataclass(frozen=True, slots=True)
class Battle:
    question_id: str
    model_a: str
    model_b: str
    winner: str  # one of WINNERS
    conversation_a: tuple[Message, ...]
    conversation_b: tuple[Message, ...]
    turn: int  # user turns (the record's `turn`, else counted)
    language: str | None
    judge: str | None
    record: int  # 0-based index of the record in its source

    def model(self, side: Side) -> str:
        return self.model_a if side == "a" else self.model_b

    def conversation(self, side: Side) -> tuple[Message, ...]:
        return self.conversation_a if side == "a" else self.conversation_b

    def side_of(self, model: str) -> Side:
        if model == self.model_a:
            return "a"
        if model == self.model_b:
            return "b"
        raise KeyError(f"{model!r} did not play battle {self.question_id!r}")


@dataclass
class BattleSet:
    """The valid battles of a source, in source order, and what was skipped (reason code → count)."""

    battles: list[Battle]
    source: str
    n_records: int
    skipped: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.battles)

    def models(self) -> list[str]:
        return sorted({m for b in self.battles for m in (b.model_a, b.model_b)})

    def battle_counts(self) -> dict[str, int]:
        """Battles each model played (either side, every outcome), most first."""
        counts = Counter(m for b in self.battles for m in (b.model_a, b.model_b))
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


class _Invalid(Exception):
    def __init__(self, code: str, field: str | None, message: str) -> None:
        super().__init__(message)
        self.code, self.field, self.message = code, field, message


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One record as read from a source, before validation."""

    index: int  # 0-based record index
    line: int | None  # 1-based line (JSONL only)
    value: object  # the decoded record, or an _Invalid for undecodable input


def _text(rec: dict[str, Any], key: str, code: str) -> str:
    value = rec.get(key)
    if isinstance(value, bool) or not isinstance(value, str | int) or not str(value).strip():
        raise _Invalid(code, key, f"is missing or empty (got {value!r})")
    return str(value)


def _conversation(rec: dict[str, Any], key: str) -> tuple[Message, ...]:
    value = rec.get(key)
    if isinstance(value, str):  # some exports store the turns as a JSON string
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise _Invalid(MALFORMED_TURN, key, "is a string that is not a JSON list of turns") from None
    if value is None or (isinstance(value, list | tuple) and len(value) == 0):
        raise _Invalid(EMPTY_CONVERSATION, key, "is empty: no turns")
    if not isinstance(value, list | tuple):
        raise _Invalid(MALFORMED_TURN, key, f"must be a list of {{role, content}} turns, got {type(value).__name__}")
    turns = []
    for k, turn in enumerate(value):
        role = turn.get("role") if isinstance(turn, dict) else None
        content = turn.get("content") if isinstance(turn, dict) else None
        if role not in ROLES or not isinstance(content, str):
            raise _Invalid(
                MALFORMED_TURN, key, f"turn {k} must be {{role: user|assistant|system, content: str}}, got {turn!r:.80}"
            )
        turns.append(Message(role, content))
    if all(t.role == "system" for t in turns):
        raise _Invalid(EMPTY_CONVERSATION, key, "has no user or assistant turn")
    # Every response must answer a prompt: a user turn since the previous assistant turn.
    prompted = False
    for k, t in enumerate(turns):
        if t.role == "user":
            prompted = True
        elif t.role == "assistant":
            if not prompted:
                raise _Invalid(RESPONSE_WITHOUT_PROMPT, key, f"turn {k} is a response with no user prompt before it")
            prompted = False
    if not any(t.role == "assistant" for t in turns):
        raise _Invalid(MISSING_RESPONSE, key, "has no assistant response")
    return tuple(turns)


def _optional_text(rec: dict[str, Any], key: str) -> str | None:
    value = rec.get(key)
    return None if value is None else str(value)


def _parse_battle(rec: object, index: int) -> Battle:
    """One record → Battle; raises _Invalid (code, field, message)."""
    if isinstance(rec, _Invalid):
        raise rec
    if not isinstance(rec, dict):
        raise _Invalid(MALFORMED_JSON, None, f"expected a JSON object, got {type(rec).__name__}")
    question_id = _text(rec, "question_id", MISSING_QUESTION_ID)
    model_a = _text(rec, "model_a", MISSING_MODEL)
    model_b = _text(rec, "model_b", MISSING_MODEL)
    if model_a == model_b:
        raise _Invalid(SAME_MODEL, "model_b", f"equals model_a ({model_a!r}): a battle needs two models")
    winner = rec.get("winner")
    if winner not in WINNERS:
        raise _Invalid(UNKNOWN_WINNER, "winner", f"{winner!r} is not one of {list(WINNERS)}")
    conv_a = _conversation(rec, "conversation_a")
    conv_b = _conversation(rec, "conversation_b")
    n_user = sum(t.role == "user" for t in conv_a)
    turn = rec.get("turn", n_user)
    if turn is None:
        turn = n_user
    if isinstance(turn, bool) or not isinstance(turn, int) or turn < 1:
        raise _Invalid(BAD_TURN, "turn", f"must be a positive integer, got {turn!r}")
    return Battle(
        question_id=question_id,
        model_a=model_a,
        model_b=model_b,
        winner=str(winner),
        conversation_a=conv_a,
        conversation_b=conv_b,
        turn=turn,
        language=_optional_text(rec, "language"),
        judge=_optional_text(rec, "judge"),
        record=index,
    )


def _where(raw: RawRecord) -> str:
    parts = [f"record {raw.index}"]  # the line, where there is one, is the error's own (InputError.line)
    qid = raw.value.get("question_id") if isinstance(raw.value, dict) else None
    if qid is not None:
        parts.append(f"question_id {str(qid)!r:.60}")
    return ", ".join(parts)


def parse_battles(records: Iterable[RawRecord], source: str, *, skip_invalid: bool = False) -> BattleSet:
    """Validate raw records in order (see `load_battles`); `source` names them in errors."""
    battles: list[Battle] = []
    skipped: Counter[str] = Counter()
    seen: dict[tuple[str, str, str], int] = {}
    n = 0
    for raw in records:
        n += 1
        try:
            battle = _parse_battle(raw.value, raw.index)
            key = (battle.question_id, battle.model_a, battle.model_b)
            if key in seen:
                raise _Invalid(
                    DUPLICATE_BATTLE, "question_id", f"repeats the battle of record {seen[key]} ({key[1]} vs {key[2]})"
                )
            seen[key] = raw.index
        except _Invalid as bad:
            if not skip_invalid:
                raise BattleError(
                    f"{_where(raw)}: {bad.message} [{bad.code}]",
                    code=bad.code,
                    path=source,
                    row=raw.index,
                    field=bad.field,
                    line=raw.line,
                ) from None
            skipped[bad.code] += 1
            continue
        battles.append(battle)
    if n == 0:
        raise InputError("no battle records", path=source)
    return BattleSet(battles, source, n, dict(sorted(skipped.items())))


# --- sources -------------------------------------------------------------------------------------------------


def _jsonl(source: Path | bytes, name: str) -> Iterator[RawRecord]:
    for index, rec in enumerate(iter_json_lines(source, name=name)):
        value = rec.value if rec.error is None else _Invalid(MALFORMED_JSON, None, rec.error)
        yield RawRecord(index, rec.line, value)


def _json_list(path: Path) -> Iterator[RawRecord]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BattleError(
            f"invalid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}) [{MALFORMED_JSON}]",
            code=MALFORMED_JSON,
            path=str(path),
            row=0,
            field=None,
        ) from None
    if not isinstance(data, list):
        raise InputError(f"expected a JSON list of battle records, got {type(data).__name__}", path=str(path))
    for index, rec in enumerate(data):
        yield RawRecord(index, None, rec)


def _column_batches(batches: Iterable[dict[str, list[Any]]]) -> Iterator[RawRecord]:
    index = 0
    for batch in batches:
        names = list(batch)
        for values in zip(*(batch[n] for n in names), strict=True):
            yield RawRecord(index, None, dict(zip(names, values, strict=True)))
            index += 1


def _parquet(source: Path | bytes, name: str) -> Iterator[RawRecord]:
    for record in iter_records(source, "parquet", name=name):
        yield RawRecord(record.row, None, record.data)


def _hf_dataset(dataset: Any, split: str, source: str) -> Iterator[RawRecord]:
    if isinstance(dataset, dict):  # a DatasetDict: pick the split
        if split not in dataset:
            raise InputError(f"no split {split!r} (splits: {sorted(dataset)})", path=source)
        dataset = dataset[split]
    yield from _column_batches(dataset.iter(batch_size=4096))


def iter_battle_records(source: str | os.PathLike[str], *, split: str = "train") -> Iterator[RawRecord]:
    """Raw records of a source (see the module docstring for the kinds of source)."""
    text = str(source)
    if text.startswith("hf:"):
        from datasets import load_dataset

        yield from _hf_dataset(load_dataset(text[3:], split=split), split, text)
        return
    path = Path(source)
    if path.is_dir():
        from datasets import load_from_disk

        try:
            dataset = load_from_disk(str(path))
        except FileNotFoundError as exc:
            raise InputError(f"not a saved Hugging Face dataset ({exc})", path=text) from None
        yield from _hf_dataset(dataset, split, text)
    elif not path.exists():
        raise InputError("no such file", path=text)
    elif path.name.endswith(".jsonl"):
        yield from _jsonl(path, text)
    elif path.name.endswith(".json"):
        yield from _json_list(path)
    elif path.name.endswith(".parquet"):
        yield from _parquet(path, text)
    else:
        raise InputError(
            "unknown battle file type (expected .jsonl, .json, .parquet or a dataset directory)", path=text
        )


def parse_uploaded_battles(data: bytes, filename: str, limits: ReadLimits = NO_LIMITS) -> BattleSet:
    """Validate the battles of an uploaded JSONL or Parquet file (by its name) before anything is stored;
    more records than `limits.max_rows` is an InputError (Parquet: from its metadata, before decoding)."""
    if filename.lower().endswith(".parquet"):
        records = iter_records(data, "parquet", name=filename, limits=limits)
        return parse_battles((RawRecord(r.row, None, r.data) for r in records), filename)
    return parse_battles(_at_most(_jsonl(data, filename), limits.max_rows, filename), filename)


def _at_most(records: Iterator[RawRecord], limit: int | None, name: str) -> Iterator[RawRecord]:
    for n, record in enumerate(records, start=1):
        if limit is not None and n > limit:
            raise LimitExceeded(f"more than {limit:,} records, over the limit", path=name, line=record.line)
        yield record


def load_battles(source: str | os.PathLike[str], *, skip_invalid: bool = False, split: str = "train") -> BattleSet:
    """Load and validate every battle of `source`; see the module docstring."""
    return parse_battles(iter_battle_records(source, split=split), str(source), skip_invalid=skip_invalid)
