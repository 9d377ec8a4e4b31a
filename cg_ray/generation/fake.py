"""A deterministic fake model behind the generator interface, for fast tests (no model, no engine).

It answers a row correctly when a hash of (seed, row id) says so (about 2 rows in 3), else with a fixed
wrong answer; so scores are reproducible, neither all 0 nor all 1, and scorers see realistic phrasing.
Asked to judge (a prompt built by ``cg_ray.scoring.judge.judge_prompt``) it gives a hash-derived rating
in the MT-Bench format, so the judge pass can be tested without a model.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from cg_ray.generation.base import GENERATED_SCHEMA, ConfiguredGenerator, answer_pending, output_row

if TYPE_CHECKING:
    import ray.data


WRONG_ANSWER = "I am not sure. The answer is 0."
JUDGE_MARKER = "[Instruction]\nPlease act as an impartial judge"


def fake_answer(row_id: str, reference: list[str], seed: int, prompt: str = "") -> str:
    digest = hashlib.sha256(f"{seed}:{row_id}".encode()).digest()
    if prompt.startswith(JUDGE_MARKER):
        return f"The answer is adequate. Rating: [[{1 + digest[1] % 10}]]"
    if reference and digest[0] % 3 != 0:
        return f"Let me think. The answer is {reference[0]}."
    return WRONG_ANSWER


class _FakeBatch:
    def __init__(self, seed: int, max_tokens: int, model: str) -> None:
        self.seed = seed
        self.max_tokens = max_tokens
        self.model = model

    def __call__(self, batch: pa.Table) -> pa.Table:
        return answer_pending(batch, self.answer)

    def answer(self, batch: pa.Table) -> pa.Table:
        out: list[dict[str, Any]] = []
        for row in batch.to_pylist():
            answer = fake_answer(row["row_id"], row["reference"] or [], self.seed, row["prompt"])
            words = answer.split(" ")[: self.max_tokens]
            out.append(output_row(row, " ".join(words), len(words), self.model))
        return pa.Table.from_pylist(out, schema=GENERATED_SCHEMA)


class FakeGenerator(ConfiguredGenerator):
    def generate(self, ds: ray.data.Dataset) -> ray.data.Dataset:
        sampling = self.config.sampling
        return ds.map_batches(
            _FakeBatch(sampling.seed, sampling.max_tokens, f"fake:{self.config.model}"),
            batch_format="pyarrow",
            batch_size=self.config.resources.batch_size,
        )
