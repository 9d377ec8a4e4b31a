"""The judge pass streams: each generated row is generated once and graded at most once, nothing runs
until the stream is consumed, and `cg-ray run` grades without materializing the generated rows."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import cg_ray.generation
from cg_ray.benchmarks import to_dataset
from cg_ray.benchmarks.rows import make_row
from cg_ray.generation import generate_responses
from cg_ray.generation.base import pending_mask
from cg_ray.generation.config import GenerationConfig
from cg_ray.generation.fake import JUDGE_MARKER, FakeGenerator, fake_answer
from cg_ray.pipeline.judge_pass import judge_dataset
from cg_ray.scoring.apply import score_dataset
from cg_ray.scoring.judge import parse_verdict

FAKE = GenerationConfig(backend="fake", model="answerer", sampling={"max_tokens": 32, "seed": 1})
JUDGE = GenerationConfig(backend="fake", model="grader", sampling={"max_tokens": 32, "seed": 1})


def _logger(log: Path) -> Callable[[pa.Table], pa.Table]:
    """Logs each row that the backend after it will answer (``judge`` or ``answer``, row id) to ``log``. A
    closure, so Ray ships it to its workers by value; the workers append to one file on this machine."""

    def record(batch: pa.Table) -> pa.Table:
        todo = batch.filter(pending_mask(batch))
        with log.open("a") as f:
            for prompt, row_id in zip(todo["prompt"].to_pylist(), todo["row_id"].to_pylist(), strict=True):
                f.write(f"{'judge' if prompt.startswith(JUDGE_MARKER) else 'answer'} {row_id}\n")
        return batch

    return record


class _CountingGenerator(FakeGenerator):
    """The fake backend, logging what it answers."""

    log: Path

    def generate(self, ds: Any) -> Any:
        return super().generate(ds.map_batches(_logger(self.log), batch_format="pyarrow", batch_size=3))


@pytest.fixture
def answered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[], Counter[tuple[str, str]]]:
    """Every generator the pipeline makes logs what it answers; the fixture reads back (kind, row id) counts."""
    log = tmp_path / "answered.log"
    log.touch()

    def make(config: GenerationConfig) -> _CountingGenerator:
        gen = _CountingGenerator(config)
        gen.log = log
        return gen

    monkeypatch.setattr(cg_ray.generation, "make_generator", make)
    return lambda: Counter(tuple(line.split(" ", 1)) for line in log.read_text().splitlines())  # type: ignore[misc]


def _rows() -> list[Any]:
    rows = [make_row(row_id=f"j{i}", benchmark="chat", prompt=f"Write line {i}", scorer="judge") for i in range(7)]
    rows += [
        make_row(row_id=f"e{i}", benchmark="sums", prompt=f"{i}+1?", reference=[str(i + 1)], scorer="exact")
        for i in range(5)
    ]
    # Answered already: judged (not generated); scored already: neither generated nor judged.
    rows.append(make_row(row_id="given", benchmark="chat", prompt="Say hi", scorer="judge", response="Hi!"))
    rows.append(make_row(row_id="pre", benchmark="chat", prompt="q", scorer="judge", score=0.5))
    return rows


@pytest.mark.usefixtures("ray_local")
def test_each_row_is_generated_once_and_graded_once(answered: Callable[[], Counter[tuple[str, str]]]) -> None:
    rows = _rows()
    graph = judge_dataset(generate_responses(to_dataset(rows, blocks=4), FAKE), JUDGE)
    assert not answered()  # building the graph ran nothing: no count() or materialize() of generated rows

    out = {r["row_id"]: r for r in score_dataset(graph).take_all()}
    assert set(out) == {r["row_id"] for r in rows}
    generated = {f"j{i}" for i in range(7)} | {f"e{i}" for i in range(5)}
    graded = {f"j{i}" for i in range(7)} | {"given"}
    assert answered() == Counter({("answer", r): 1 for r in generated} | {("judge", r): 1 for r in graded})

    for row_id in graded:
        row = out[row_id]
        # The verdict is the grader's; the row keeps its own prompt, answer and model.
        assert row["judge_output"] == fake_answer(row_id, [], 1, JUDGE_MARKER)
        assert row["score"] == parse_verdict(row["judge_output"]) and row["score_status"] == "scored"
        assert row["prompt"] != "" and not row["prompt"].startswith(JUDGE_MARKER)
    assert out["j3"]["response"] == fake_answer("j3", [], 1) and out["j3"]["model"] == "fake:answerer"  # not grader
    assert out["given"]["response"] == "Hi!" and out["given"]["model"] is None
    assert out["given"]["n_output_tokens"] is None
    assert out["pre"]["score"] == 0.5 and out["pre"]["judge_output"] is None and out["pre"]["response"] is None
    assert out["e2"]["judge_output"] is None and out["e2"]["response"] == fake_answer("e2", ["3"], 1)
    assert json.loads(out["e2"]["metadata"]) == {}


def test_cg_ray_run_grades_without_materializing(
    ray_local: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answered: Callable[[], Counter[tuple[str, str]]]
) -> None:
    import ray.data

    from cg_ray.pipeline.config import parse_run_config
    from cg_ray.pipeline.runner import RunOptions, run

    def refuse(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the run materialized a dataset")

    monkeypatch.setattr(ray.data.Dataset, "materialize", refuse)
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps({"id": f"c{i}", "prompt": f"Tell me about {i}"}) + "\n" for i in range(10)))
    config = parse_run_config(
        {
            "name": "judged",
            "output_dir": str(tmp_path),
            "benchmarks": [
                {
                    "kind": "local",
                    "path": str(chat),
                    "benchmark": "chat",
                    "scorer": "judge",
                    "fields": {"reference": None},
                },
                {"kind": "probes", "per_kind": 4, "seed": 0, "kinds": ["arithmetic"]},
            ],
            "generation": {"backend": "fake", "resources": {"num_cpus": 0.5, "batch_size": 4}},
            "reader": {"resources": {"num_cpus": 0.5, "min_actors": 1, "max_actors": 1, "batch_size": 8}},
            "metrics": {"min_rows": 1},
            "describe": {"enabled": False},
        }
    )
    out = run(
        config, RunOptions(shard_rows=5, reader_factory="cg_ray.testing.fakes:HashingReader.from_config", report=False)
    )
    counts = answered()
    assert sorted(counts.values()) == [1] * 24  # 14 rows answered once, the 10 chat rows graded once
    assert sum(kind == "judge" for kind, _ in counts) == 10

    import pyarrow.parquet as pq

    rows = {r["row_id"]: r for r in pq.read_table(out / "rows.parquet").to_pylist()}
    assert len(rows) == 14
    for i in range(10):
        assert rows[f"c{i}"]["score"] == parse_verdict(fake_answer(f"c{i}", [], 0, JUDGE_MARKER))
