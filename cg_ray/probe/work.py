"""A probe's work directory (RUN_DIR/probe.work): what a killed probe resumes from. Each step's results are
saved as they are made: the pairs written for a gap (one file per gap, written whole), the reader's verdicts,
and the model's answers (appended a batch at a time, fsynced). A resumed probe with the same settings
repeats none of them; with other settings it refuses, naming the file, rather than mixing two probes."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cg_ray.artifacts.publish import atomic_file
from cg_ray.errors import CgRayError
from cg_ray.probe.answer import Answer
from cg_ray.probe.items import GenerationOutcome, ItemPair

SETTINGS = "settings.json"
ANSWERS = "answers.jsonl"


class Work:
    """`what`: whose work directory it is, in its messages (a probe's; `cg-ray augment` keeps one too)."""

    def __init__(self, path: Path, what: str = "probe") -> None:
        self.path, self.what = path, what

    def resumes(self, settings: dict[str, Any], *, fresh: bool) -> bool:
        """Whether an earlier attempt with these settings is here to resume (read only); an unfinished probe
        with other settings is refused, naming its file, unless `fresh` discards it."""
        saved = self.path / SETTINGS
        if fresh or not saved.exists():
            return False
        if json.loads(saved.read_text(encoding="utf-8")) != json.loads(json.dumps(settings, default=str)):
            raise CgRayError(
                f"{saved}: an unfinished {self.what} with other settings is here; rerun it with the same settings "
                "to resume it, or pass --fresh to discard it"
            )
        return True

    def begin(self, settings: dict[str, Any], *, fresh: bool) -> None:
        """Create the work directory for `settings` (emptied first with `fresh`)."""
        if fresh and self.path.exists():
            shutil.rmtree(self.path)
        self.path.mkdir(parents=True, exist_ok=True)
        if not (self.path / SETTINGS).exists():
            with atomic_file(self.path / SETTINGS) as tmp:
                tmp.write_text(json.dumps(settings, sort_keys=True, default=str), encoding="utf-8")

    def _file(self, folder: str, key: str) -> Path:
        return self.path / folder / (re.sub(r"[^A-Za-z0-9_.-]", "_", key) + ".json")

    def load(self, folder: str, key: str) -> dict[str, Any] | None:
        """A JSON document an earlier attempt saved under `folder`/`key` (each written whole), or None."""
        path = self._file(folder, key)
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

    def save(self, folder: str, key: str, body: dict[str, Any]) -> None:
        with atomic_file(self._file(folder, key)) as tmp:
            tmp.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")

    def written(self, gap_id: str) -> tuple[GenerationOutcome, str] | None:
        """The pairs an earlier attempt wrote for the gap, and by which generator."""
        data = self.load("pairs", gap_id)
        if data is None:
            return None
        pairs = [ItemPair(**p) for p in data.pop("pairs")]
        generator = data.pop("generator")
        return GenerationOutcome(pairs=pairs, **data), generator

    def save_written(self, gap_id: str, outcome: GenerationOutcome, generator: str) -> None:
        self.save("pairs", gap_id, asdict(outcome) | {"generator": generator})

    def answers(self) -> dict[str, Answer]:
        """The answers saved so far (a torn last line, from a kill mid-write, is ignored: asked again)."""
        out: dict[str, Answer] = {}
        path = self.path / ANSWERS
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    a = Answer(**json.loads(line))
                except (json.JSONDecodeError, TypeError):
                    continue
                out[a.item_id] = a
        return out

    def save_answers(self, answers: Iterable[Answer]) -> None:
        with (self.path / ANSWERS).open("a", encoding="utf-8") as fh:
            fh.writelines(json.dumps(asdict(a), ensure_ascii=False) + "\n" for a in answers)
            fh.flush()
            os.fsync(fh.fileno())

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
