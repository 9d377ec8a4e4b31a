"""A small run with two in-scope gaps of benchmark "narrow", a scripted writer that plays `cg-ray augment`'s
writer and reference checker, and a fake reader that maps a marker word to its concept.

- concept 7 ("zorblat") and concept 8 ("quintal") fire on 15% of the reference's rows and of "wide", never
  on "narrow": scope finds them narrow's gaps, both missing;
- the writer writes arithmetic word problems (`tests.probe.scripted_probe.written`, a different text per
  request) that carry the targeted concept's marker word (`carry`), or a neutral word instead (`miss`); its
  answer is malformed on every 9th request and its reference wrong on every 11th;
- the reader gives every distinct word of a text s̃ = 1 on its concept: a marker word on 7 or 8, any other
  word on a hashed concept in 10..63 (never 7 or 8).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.cli import main
from cg_ray.testing.fakes import FakeRowActs, word_concept
from tests.describe.endpoint_server import Script
from tests.probe.scripted_probe import _unit, written

D = 64
MARKERS = {"zorblat": 7, "quintal": 8}
CONCEPT_WORD = {c: w for w, c in MARKERS.items()}
READER_FACTORY = "tests.augment.scripted:marker_reader"
VOCAB = ("apple", "river", "train", "seven", "paint", "glass", "music", "stone", "cloud", "table", "green", "light")


class MarkerReader:
    d_sae = D

    def read(self, texts: Any, **_: Any) -> list[FakeRowActs]:
        out = []
        for text in texts:
            words = set(re.findall(r"[a-z]+", text.lower()))
            ids = sorted({MARKERS.get(w, 10 + word_concept(w, D - 10)) for w in words})
            out.append(FakeRowActs(np.array(ids, np.int32), np.ones(len(ids), np.float32), len(words)))
        return out

    def describe(self) -> dict[str, Any]:
        return {"model": "marker-fake", "d_sae": D}

    def plan(self, total_tokens: int) -> None:
        del total_tokens


def marker_reader(config: object) -> MarkerReader:
    del config
    return MarkerReader()


def _rows(benchmark: str, n: int, rng: np.random.Generator, share: float) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        ids = set(rng.choice(np.arange(10, D), size=6, replace=False).tolist())
        words = [str(w) for w in rng.choice(VOCAB, size=5)]
        for marker, concept in MARKERS.items():
            if rng.random() < share:
                ids.add(concept)
                words.append(marker)
        acts = rng.uniform(0.5, 1.5, size=len(ids)).astype(np.float32).tolist()
        prompt = f"{benchmark} question {i}: what do {' '.join(words)} have in common ?"
        out.append({"row_id": f"{benchmark}-{i}", "benchmark": benchmark, "score": float(rng.random() < 0.5),
                    "concept_ids": sorted(ids), "concept_acts": acts, "model": "m", "n_tokens": 10,
                    "prompt": prompt})  # fmt: skip
    return out


def _write(rows: list[dict[str, Any]], path: Path) -> Path:
    schema = S.rows_schema_with_d_sae(D).append(pa.field("prompt", pa.string()))
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def build_run(root: Path) -> Path:
    """RUN (narrow, wide) through `cg-ray metrics`, then `cg-ray scope` against the traffic rows."""
    rng = np.random.default_rng(0)
    rows = _write(_rows("narrow", 300, rng, 0.0) + _rows("wide", 300, rng, 0.15), root / "suite.rows.parquet")
    ref = _write(_rows("traffic", 400, rng, 0.15), root / "traffic.rows.parquet")
    run = root / "run"
    assert main(["metrics", "--rows", str(rows), "--out", str(run), "--min-rows", "5"]) == 0
    assert main(["scope", str(run), "--reference-rows", str(ref)]) == 0
    return run


def _solve(text: str) -> int:
    a, b = (int(x) for x in re.findall(r"\d+", text)[:2])
    return a - b


def writer_script(mode: str) -> Script:
    """`carry`: items with the targeted concept's marker word; `miss`: with a neutral word instead."""

    def answer(prompt: str) -> str:
        if prompt.startswith("Answer this question"):
            return str(_solve(prompt.split("Question:", 1)[1]))
        concept = int(re.search(r"Concept (\d+):", prompt).group(1))  # type: ignore[union-attr]
        seed, i = (int(x) for x in re.search(r"variant (\d+)-(\d+)", prompt).groups())  # type: ignore[union-attr]
        if i % 9 == 4:
            return '{"prompt": "Sam has 3 coins", "reference": '
        b = 2 + int(_unit(seed, concept, i, "b") * 300)
        a = b + 2 + int(_unit(seed, concept, i, "a") * 300)
        word = CONCEPT_WORD[concept] if mode == "carry" else "shiny"
        text = written(a, b, word, seed, i, f"c{concept}")
        return json.dumps({"prompt": text, "reference": str(a - b + (i % 11 == 7)), "choices": []})

    return Script(answer, structured=lambda prompt, _fmt: answer(prompt))


def item_requests(script: Script) -> list[str]:
    """The writer's item requests (not its reference checks), by prompt."""
    prompts = [r["body"]["messages"][-1]["content"] for r in script.requests if r.get("body")]
    return [p for p in prompts if not p.startswith("Answer this question")]
