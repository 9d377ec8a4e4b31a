"""A small published run with two failure modes, and a scripted OpenAI-compatible server that plays the
probe's writer (minimal pairs as JSON), its reference checker and the evaluated model.

- gap `mode:1` is the word "zorblat": the model fails items holding it 60% of the time, others 20%;
- gap `mode:2` is the word "quintal", as frequent in the suite, with no effect: 20% either way;
- the writer returns malformed JSON on every 9th request, a wrong target reference on every 11th, and a
  target without the gap's word on every 6th (the reader must drop those pairs).

The reader is the hashing fake (one concept per lowercased word), so a gap's concept is its word's hash.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.cli import main as cli_main
from cg_ray.testing.fakes import HashingReader, word_concept
from tests.describe.endpoint_server import Script

D_SAE = 4096  # wide enough that no other word of these items hashes to a gap's concept
WORDS = {"mode:1": "zorblat", "mode:2": "quintal"}
FAIL = {"zorblat": 0.6}  # the model's failure rate on items holding the word; 0.2 otherwise
BASE_FAIL = 0.2
READER_FACTORY = "tests.probe.scripted_probe:wide_reader"


def wide_reader(config: object) -> HashingReader:
    """The hashing reader at this suite's width (its own `from_config` gives 256 concepts)."""
    del config
    return HashingReader(d_sae=D_SAE)


def _unit(*parts: object) -> float:
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") / 2**64


def question(a: int, b: int, word: str | None) -> str:
    thing = f"{word} coins" if word else "coins"
    return f"Sam has {a} {thing} and finds {b} more . How many coins does Sam have now ?"


NAMES = ("Ana", "Bo", "Cy", "Dee", "Eli", "Fay", "Gus", "Hal", "Ivy", "Jo", "Kai", "Lu")
OBJECTS = ("stickers", "marbles", "stamps", "shells", "beads", "cards", "pins", "rings", "cups", "keys", "nuts")
VERBS = ("bought", "found", "won", "made", "packed", "kept")
GIVES = ("gave away", "lost", "sold", "traded", "used")
DAYS = ("Monday", "Tuesday", "Friday", "Sunday", "noon", "dawn", "dusk")
ADVERBS = (
    "quickly",
    "slowly",
    "happily",
    "quietly",
    "proudly",
    "calmly",
    "gladly",
    "boldly",
    "eagerly",
    "gently",
    "kindly",
    "loudly",
    "neatly",
    "oddly",
    "rarely",
    "safely",
    "shyly",
    "softly",
    "wisely",
    "warmly",
)
ADJECTIVES = ("red", "blue", "tiny", "huge", "shiny", "dull", "round", "flat", "soft", "hard", "warm", "cold",
              "green", "plain", "fancy", "light", "heavy", "smooth", "rough", "bright")  # fmt: skip
PLACES = ("lake", "market", "school", "garden", "bridge", "station", "library", "harbor", "forest", "bakery",
          "museum", "stadium", "village", "castle", "farm", "beach", "river", "tower", "square", "mill")  # fmt: skip


def written(a: int, b: int, word: str, seed: int, i: int, gap_word: str) -> str:
    """A writer's question: a word that varies with the request in nearly every 5-word window, so two
    requests are not near copies of each other (cg_ray.probe.dedupe), and none of the suite's template."""
    pick = lambda xs, k: xs[int(_unit(seed, gap_word, i, k) * len(xs))]  # noqa: E731
    obj = pick(OBJECTS, "o")
    return (f"{pick(NAMES, 'n')} {pick(ADVERBS, 'a1')} {pick(VERBS, 'v')} {a} {word} {pick(ADJECTIVES, 'j1')} {obj} "
            f"near the {pick(PLACES, 'p')} on {pick(DAYS, 'd')} , then {pick(ADVERBS, 'a2')} {pick(GIVES, 'g')} "
            f"{b} of those {pick(ADJECTIVES, 'j2')} {obj} . How many {obj} are left ?")  # fmt: skip


def write_run(run: Path, n_rows: int = 240, seed: int = 0) -> Path:
    """rows.parquet (prompts with the two words, scores, hashing-reader concepts) through `cg-ray metrics`,
    then failure_modes.parquet replaced by the two gaps."""
    rng = np.random.default_rng(seed)
    prompts, scores = [], []
    for i in range(n_rows):
        word = ("zorblat", "quintal", None, None)[i % 4]
        prompts.append(question(int(rng.integers(2, 90)), int(rng.integers(2, 90)), word))
        scores.append(float(rng.random() > FAIL.get(word or "", BASE_FAIL)))
    ids, acts = [], []
    for p in prompts:
        words = p.lower().split()
        counts: dict[int, int] = {}
        for w in words:
            counts[word_concept(w, D_SAE)] = counts.get(word_concept(w, D_SAE), 0) + 1
        ids.append(sorted(counts))
        acts.append([counts[c] / len(words) for c in sorted(counts)])
    schema = S.rows_schema_with_d_sae(D_SAE).append(S.METADATA_FIELD).append(pa.field("prompt", pa.string()))
    rows = run.parent / f"{run.name}.rows.parquet"
    table = pa.Table.from_pydict(
        {"row_id": [f"r{i}" for i in range(n_rows)], "benchmark": ["coins"] * n_rows, "score": scores,
         "concept_ids": ids, "concept_acts": acts, "model": [None] * n_rows, "n_tokens": [16] * n_rows,
         "metadata": ["{}"] * n_rows, "prompt": prompts},
        schema=schema,
    )  # fmt: skip
    pq.write_table(table, rows)
    assert cli_main(["metrics", "--rows", str(rows), "--out", str(run), "--overwrite"]) == 0
    modes = []
    for rank, word in enumerate(WORDS.values(), start=1):
        mine = [f"r{i}" for i, p in enumerate(prompts) if word in p]
        modes.append(
            {"rank": rank, "description": f"Rows with “{word}”", "terms": [word], "term_shares": [1.0],
             "background_shares": [0.0], "concept_ids": [word_concept(word, D_SAE)], "firing_thresholds": [0.0],
             "n_rows": len(mine), "n_scored": len(mine), "mean_score": None, "expected_score": None,
             "heldout_residual": -0.2 if word in FAIL else -0.1, "heldout_residual_low": None,
             "heldout_residual_high": None,
             "in_sample_residual": None, "p_value": 1.0, "q_value": 1.0, "confirmed": False, "splits_selected": 1,
             "n_heldout": 0, "n_clusters": 0, "mde": None, "adjusted_for": [], "example_row_ids": mine[:3]}
        )  # fmt: skip
    pq.write_table(pa.Table.from_pylist(modes, schema=S.FAILURE_MODES_SCHEMA), run / S.FAILURE_MODES_FILE)
    return run


def _pair(prompt: str) -> str:
    variant = re.search(r"variant (\d+)-(\d+)", prompt)
    assert variant, prompt
    seed, i = int(variant.group(1)), int(variant.group(2))
    word = next(w for w in WORDS.values() if f"“{w}”" in prompt)
    if i % 9 == 4:
        return '{"target": {"question": "Sam has 3 coins", "answer": 3'  # cut off: malformed
    b = 2 + int(_unit(seed, word, i, "b") * 300)
    a = b + 2 + int(_unit(seed, word, i, "a") * 300)
    target = written(a, b, "shiny" if i % 6 == 5 else word, seed, i, word)  # every 6th: the gap's word missing
    wrong = 1 if i % 11 == 7 else 0
    pair = {"target": {"question": target, "answer": str(a - b + wrong)},
            "control": {"question": written(a, b, "old", seed, i, word), "answer": str(a - b)}}  # fmt: skip
    return json.dumps(pair)


def _solve(text: str) -> int:
    a, b = (int(x) for x in re.findall(r"\d+", text)[:2])
    return a - b if "left" in text else a + b


def answer(prompt: str) -> str:
    if "minimal pair" in prompt:
        return _pair(prompt)
    if prompt.startswith("Answer this question"):
        return str(_solve(prompt))
    right = _solve(prompt)
    word = next((w for w in FAIL if w in prompt), None)
    fails = _unit("model", prompt) < FAIL.get(word or "", BASE_FAIL)
    return f"The answer is {right + 1 if fails else right}."


def script() -> Script:
    return Script(answer, structured=lambda prompt, _fmt: answer(prompt))


def probe_config(url: str, seed: int, pairs: int) -> dict[str, object]:
    return {
        "pairs": pairs,
        "seed": seed,
        "top": 2,
        "writer": {"endpoint": url, "model": "scripted-model", "concurrency": 8, "retries": 0},
        "families": "never",
        "reader_factory": READER_FACTORY,
        "model": {"backend": "endpoint", "model": "scripted-model",
                  "endpoint": {"url": url, "concurrency": 4, "retry_wait_s": 0.01},
                  "sampling": {"max_tokens": 16, "temperature": 0.0}, "resources": {"batch_size": 16}},
    }  # fmt: skip
