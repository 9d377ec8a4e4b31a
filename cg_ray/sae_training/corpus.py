"""The SAE training corpus: model-written answers from the shared data, never benchmark questions.

Documents come from answer fields only (Arena-Hard answers, MT-Bench answers, the assistant turns of
AlpacaEval battles), so the SAE never sees the benchmark rows that the reader later evaluates. A stable
hash of each document splits it into train / held-out, so the held-out evaluation is reproducible.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cg_ray.errors import InputError
from cg_ray.io.records import iter_jsonl


@dataclass(frozen=True)
class CorpusSource:
    filename: str
    kind: str  # "output" (a string or list of strings) or "battle" (assistant turns of conversations)


DEFAULT_SOURCES: tuple[CorpusSource, ...] = (
    CorpusSource("model_outputs/arena_hard_answers.jsonl", "output"),
    CorpusSource("model_outputs/mt_bench_model_answers.jsonl", "output"),
    CorpusSource("arena/alpaca_eval_battles.jsonl", "battle"),
)
MIN_CHARS = 40


def _texts_of(record: dict[str, object], kind: str) -> list[str]:
    if kind == "output":
        out = record.get("output")
        if isinstance(out, str):
            return [out]
        if isinstance(out, list):
            return [t for t in out if isinstance(t, str)]
        return []
    texts: list[str] = []
    for side in ("conversation_a", "conversation_b"):
        turns = record.get(side)
        if isinstance(turns, list):
            texts += [
                t["content"]
                for t in turns
                if isinstance(t, dict) and t.get("role") == "assistant" and isinstance(t.get("content"), str)
            ]
    return texts


def iter_documents(data_dir: Path, sources: tuple[CorpusSource, ...] = DEFAULT_SOURCES) -> Iterator[str]:
    """Unique answer texts, in file order (duplicates, e.g. the same answer in two battles, dropped)."""
    seen: set[str] = set()
    for source in sources:
        path = data_dir / source.filename
        if not path.is_file():
            raise InputError("corpus file not found", path=str(path))
        for _line, record in iter_jsonl(path):
            for text in _texts_of(record, source.kind):
                text = text.strip()
                digest = hashlib.sha1(text.encode()).hexdigest()
                if len(text) >= MIN_CHARS and digest not in seen:
                    seen.add(digest)
                    yield text


def is_heldout(text: str, fraction: float) -> bool:
    bucket = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") / 2**32
    return bucket < fraction


def split_corpus(data_dir: Path, heldout_fraction: float) -> tuple[list[str], list[str]]:
    train: list[str] = []
    heldout: list[str] = []
    for text in iter_documents(data_dir):
        (heldout if is_heldout(text, heldout_fraction) else train).append(text)
    return train, heldout
