"""The endpoint answers of `cg-ray explain`, saved as they arrive (RUN_DIR/explain.work/answers.jsonl), so that
a killed explain loses only the requests in flight: a rerun of the same command takes the saved answers and
asks only the rest. Each answer is one line appended and fsynced, keyed by a hash of the endpoint URL and the
whole request body (model, prompt, max_tokens, temperature, seed, response_format): a rerun with other
settings finds none of its requests there and asks them all. The folder is removed once the explain
publishes; `--fresh` discards it first."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

WORK_DIR = "explain.work"  # in the run directory; removed once the explain is published
ANSWERS = "answers.jsonl"


@dataclass(frozen=True)
class Saved:
    """One answered request as it was paid: its content, tokens and attempts (retries included)."""

    content: str
    prompt_tokens: int
    completion_tokens: int
    requests: int


def request_key(url: str, body: dict[str, Any]) -> str:
    """What determines an answer: the endpoint and the request body (never the key: it is a header)."""
    text = json.dumps({"url": url, "body": body}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class SavedAnswers:
    """The answers an earlier, unfinished explain of the run saved, and the ones this one saves."""

    def __init__(self, path: Path, *, fresh: bool = False) -> None:
        self.path = path
        if fresh:
            self.remove()
        self._lock = threading.Lock()
        self._torn = False  # the file ends in a torn line: the next answer starts a line of its own
        # Each answer an earlier attempt saved is reused once: a prompt asked twice (the judge's fallback may) is
        # asked again as often as a clean run asks it, and an answer saved by this attempt is not reused by it.
        self._answers = self._read()
        self.found = sum(map(len, self._answers.values()))  # saved by an earlier attempt

    def _read(self) -> dict[str, list[Saved]]:
        """Every whole line of answers.jsonl (a torn last line, from a kill mid-write, is skipped: asked again)."""
        out: dict[str, list[Saved]] = {}
        path = self.path / ANSWERS
        if not path.exists():
            return out
        text = path.read_text(encoding="utf-8")
        self._torn = bool(text) and not text.endswith("\n")
        for line in text.splitlines():
            try:
                data = json.loads(line)
                key = data.pop("key")
                out.setdefault(key, []).append(Saved(**data))
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
                continue
        return out

    def take(self, key: str) -> Saved | None:
        """An answer an earlier attempt saved for this request and not yet reused, or None (ask it)."""
        with self._lock:
            kept = self._answers.get(key)
            return kept.pop() if kept else None

    def add(self, key: str, answer: Saved) -> None:
        line = json.dumps({"key": key, **asdict(answer)}, ensure_ascii=False) + "\n"
        with self._lock:
            line, self._torn = ("\n" if self._torn else "") + line, False
            self.path.mkdir(parents=True, exist_ok=True)
            with (self.path / ANSWERS).open("a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
