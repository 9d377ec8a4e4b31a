"""Two models' answers to the same prompts, paired by prompt id, with every skip counted.

Inputs: one JSONL file with a `model` field per row (`--answers FILE --model-a X --model-b Y`, e.g.
MT-Bench's answers of 53 models) or one JSONL file per model (`--a FILE --b FILE`). A row holds an id
(`id` or `question_id`), a response (`response` or `output`; a list is a conversation: `turn` picks one)
and optionally its prompt (`prompt`, a string or a list of turns). Prompts missing from the answers come
from `--prompts FILE` (a benchmark file: `id`, `prompt`, and `metadata.turns` for later turns).

Refused (InputError naming file, line and field): a row without an id or response, an id twice for one
model, and an id whose prompt differs between the two models. Counted and skipped: ids answered by only
one model, empty responses, ids without any prompt.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cg_ray.errors import InputError
from cg_ray.io.records import existing_file, iter_jsonl

ID_FIELDS = ("id", "question_id")
RESPONSE_FIELDS = ("response", "output")
SEPARATOR = "\n\n"  # prompt and response joined as the pipeline's `prompt_response` text


@dataclass(frozen=True)
class Answer:
    id: str
    prompt: str | None
    response: str
    where: tuple[str, int]  # (file, 1-based line)


@dataclass(frozen=True)
class Pair:
    id: str
    prompt: str
    response_a: str
    response_b: str


@dataclass
class PairedAnswers:
    pairs: list[Pair]
    counts: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, list[str]] = field(default_factory=dict)  # reason -> ids (first few, for the report)

    def skip(self, reason: str, rid: str) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + 1
        ids = self.skipped.setdefault(reason, [])
        if len(ids) < 20:
            ids.append(rid)


def _first(rec: dict[str, Any], names: Iterable[str]) -> tuple[str | None, Any]:
    for name in names:
        if name in rec and rec[name] is not None:
            return name, rec[name]
    return None, None


def _turn(value: Any, turn: int, path: Path, line: int, name: str) -> str | None:
    """The text of a field: a string (turn 1 only), or the `turn`-th element of a list of strings."""
    if isinstance(value, str):
        if turn != 1:
            raise InputError(f"turn {turn} asked but the field is a single text", path=str(path), line=line, field=name)
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value[turn - 1] if turn <= len(value) else None
    raise InputError(
        f"expected a string or a list of strings, not {type(value).__name__}", path=str(path), line=line, field=name
    )


def load_answers(path: str | Path, model: str | None = None, *, turn: int = 1) -> dict[str, Answer]:
    """id -> Answer for one model (rows whose `model` is `model`, or every row when None), in file order."""
    p = existing_file(path)
    out: dict[str, Answer] = {}
    models: set[str] = set()
    for line, rec in iter_jsonl(p):
        if model is not None:
            models.add(str(rec.get("model")))
            if rec.get("model") != model:
                continue
        id_name, rid = _first(rec, ID_FIELDS)
        if id_name is None or not isinstance(rid, (str, int)):
            raise InputError("no prompt id (id or question_id)", path=str(p), line=line, field="id")
        rid = str(rid)
        if rid in out:
            first = out[rid].where[1]
            who = f" for model {model!r}" if model else ""
            raise InputError(f"id {rid!r} twice{who} (first on line {first})", path=str(p), line=line, field=id_name)
        resp_name, resp = _first(rec, RESPONSE_FIELDS)
        if resp_name is None:
            raise InputError("no response (response or output)", path=str(p), line=line, field="response")
        response = _turn(resp, turn, p, line, resp_name) or ""
        prompt = None if rec.get("prompt") is None else _turn(rec["prompt"], turn, p, line, "prompt")
        out[rid] = Answer(rid, prompt, response, (str(p), line))
    if not out:
        known = ", ".join(sorted(models)[:60])
        raise InputError(
            f"no rows for model {model!r} (models in the file: {known})" if model else "no rows",
            path=str(p),
            field="model" if model else None,
        )
    return out


def load_prompts(path: str | Path, *, turn: int = 1) -> dict[str, str]:
    """id -> prompt text of a benchmark file (`prompt`; for turn > 1, `metadata.turns`)."""
    p = existing_file(path)
    out: dict[str, str] = {}
    for line, rec in iter_jsonl(p):
        id_name, rid = _first(rec, ID_FIELDS)
        if id_name is None:
            raise InputError("no prompt id (id or question_id)", path=str(p), line=line, field="id")
        value, metadata = rec.get("prompt"), rec.get("metadata")
        if turn > 1 and isinstance(metadata, dict) and "turns" in metadata:
            value = metadata["turns"]
            text = _turn(value, turn, p, line, "metadata.turns")
        elif value is None:
            raise InputError("no prompt", path=str(p), line=line, field="prompt")
        else:
            text = _turn(value, turn, p, line, "prompt")
        if text is not None:
            out[str(rid)] = text
    return out


def _prompt_of(rid: str, a: Answer, b: Answer, prompts: dict[str, str] | None) -> str | None:
    if a.prompt is not None and b.prompt is not None and a.prompt.strip() != b.prompt.strip():
        raise InputError(
            f"the prompt of id {rid!r} differs between model A ({a.where[0]} line {a.where[1]}) and model B "
            f"({b.where[0]} line {b.where[1]}): the answers do not respond to the same prompt",
            path=b.where[0],
            line=b.where[1],
            field="prompt",
        )
    own = a.prompt if a.prompt is not None else b.prompt
    return own if own is not None else (prompts or {}).get(rid)


def pair_answers(a: dict[str, Answer], b: dict[str, Answer], prompts: dict[str, str] | None = None) -> PairedAnswers:
    """Pairs in A's order. Skips (counted): only_a, only_b, empty_a, empty_b, empty_both, no_prompt."""
    out = PairedAnswers([], {k: 0 for k in ("only_a", "only_b", "empty_a", "empty_b", "empty_both", "no_prompt")})
    for rid, ans_a in a.items():
        ans_b = b.get(rid)
        if ans_b is None:
            out.skip("only_a", rid)
            continue
        prompt = _prompt_of(rid, ans_a, ans_b, prompts)
        empty_a, empty_b = not ans_a.response.strip(), not ans_b.response.strip()
        if empty_a or empty_b:
            out.skip("empty_both" if empty_a and empty_b else "empty_a" if empty_a else "empty_b", rid)
        elif prompt is None or not prompt.strip():
            out.skip("no_prompt", rid)
        else:
            out.pairs.append(Pair(rid, prompt, ans_a.response, ans_b.response))
    for rid in b:
        if rid not in a:
            out.skip("only_b", rid)
    out.counts["paired"] = len(out.pairs)
    if not out.pairs:
        raise InputError(f"no prompt answered by both models (skipped: {out.counts})")
    return out


def match_length(pair: Pair) -> Pair:
    """Both responses cut to the shorter one's length in characters (at a space where there is one), so
    that a longer model does not contain more concepts merely by saying more."""
    limit = min(len(pair.response_a), len(pair.response_b))

    def cut(text: str) -> str:
        if len(text) <= limit:
            return text
        head = text[:limit]
        space = head.rfind(" ")
        return head[:space] if space > limit // 2 else head

    return Pair(pair.id, pair.prompt, cut(pair.response_a), cut(pair.response_b))


def reader_texts(pairs: list[Pair]) -> tuple[list[str], list[int], list[str]]:
    """The texts the reader reads (prompt, separator, response: A's answers then B's), the character offset
    where each response starts (the prompt is context only), and the side of each text."""
    texts: list[str] = []
    offsets: list[int] = []
    sides: list[str] = []
    for side in ("a", "b"):
        for pair in pairs:
            head = pair.prompt + SEPARATOR
            texts.append(head + (pair.response_a if side == "a" else pair.response_b))
            offsets.append(len(head))
            sides.append(side)
    return texts, offsets, sides
