"""The reader stage's typed seam: a validated ReaderConfig in (never a dict), and the job's planned tokens
passed to a reader that plans (`compile: auto`); the run config's reader part built without a dict."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pytest
from pydantic import TypeAdapter

from cg_ray import schemas as S
from cg_ray.activations.config import ReaderConfig
from cg_ray.benchmarks.sources import BenchmarkSource
from cg_ray.pipeline.config import ReaderStageConfig, reader_settings
from cg_ray.pipeline.inputs import stage_inputs
from cg_ray.pipeline.reader_stage import ReaderStage, planned_tokens, reader_from_config
from cg_ray.pipeline.runner import reader_characters
from cg_ray.testing.fakes import HashingReader

HERE = "tests.pipeline.test_reader_stage"


class PlanningReader(HashingReader):
    """The hashing fake with the real reader's `plan`; records what it was built from and planned."""

    built: ClassVar[list[Any]] = []
    planned: ClassVar[list[int]] = []

    @classmethod
    def from_config(cls, config: Any) -> PlanningReader:
        cls.built.append(config)
        return cls()

    def plan(self, total_tokens: int) -> None:
        self.planned.append(total_tokens)


class _Context:
    def get_node_id(self) -> str:
        return "node-1"


@pytest.fixture(autouse=True)
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stage asks Ray for its node id; outside an actor that would start a cluster."""
    import ray

    monkeypatch.setattr(ray, "get_runtime_context", lambda: _Context())
    PlanningReader.built.clear()
    PlanningReader.planned.clear()


def test_the_stage_refuses_a_dict_config() -> None:
    with pytest.raises(TypeError, match="ReaderConfig, not dict"):
        ReaderStage({"model": "m"}, "text", factory=f"{HERE}:PlanningReader.from_config")  # type: ignore[arg-type]
    assert PlanningReader.built == []


def test_the_stage_builds_the_reader_from_the_config_it_was_given_and_plans() -> None:
    config = ReaderConfig(model="m", compile="auto")
    stage = ReaderStage(config, "text", factory=f"{HERE}:PlanningReader.from_config", planned_tokens=12_345)
    assert PlanningReader.built == [config] and type(PlanningReader.built[0]) is ReaderConfig
    assert PlanningReader.planned == [12_345]
    out = stage(pa.table({"text": ["a b a", "c"]}))
    assert out[S.N_TOKENS].to_pylist() == [3, 1]
    assert json.loads(out["_reader_actor"][0].as_py())["node"] == "node-1"


def test_no_plan_without_planned_tokens() -> None:
    ReaderStage(ReaderConfig(), "text", factory=f"{HERE}:PlanningReader.from_config")
    assert PlanningReader.planned == []


class NotAReader:
    """Reads, but has no `plan` or `describe`: not the Reader Protocol."""

    d_sae = 8

    @classmethod
    def from_config(cls, config: Any) -> NotAReader:
        return cls()

    def read(self, texts: Any, **_: Any) -> list[Any]:
        return []


def test_a_factory_that_builds_no_reader_is_named_at_the_seam() -> None:
    factory = f"{HERE}:NotAReader.from_config"
    with pytest.raises(TypeError, match=r"reader factory '.*NotAReader.from_config' built a NotAReader, not a Reader"):
        ReaderStage(ReaderConfig(), "text", factory=factory, planned_tokens=10)
    with pytest.raises(TypeError, match=r"lacks \['describe', 'plan'\]"):
        reader_from_config(ReaderConfig(), factory)


def test_planned_tokens_are_one_actors_share_at_four_characters_a_token() -> None:
    assert planned_tokens(4_000, 1) == 1_000
    assert planned_tokens(4_000, 4) == 250
    assert planned_tokens(3, 1) == 0


def test_reader_config_of_a_stage_config_is_a_plain_reader_config_with_the_same_set_fields() -> None:
    stage = ReaderStageConfig.model_validate({"model": "m", "compile": True, "text": "response"})
    reader = stage.reader_config()
    assert type(reader) is ReaderConfig
    assert reader == ReaderConfig(model="m", compile=True)
    assert reader.model_fields_set == {"model", "compile"}
    assert reader.model_dump(mode="json") == stage.model_dump(mode="json", exclude={"text", "resources"})
    assert pickle.loads(pickle.dumps(reader)) == reader  # what Ray ships to the actors
    assert reader_settings(reader) is reader


def test_a_stage_config_extends_a_reader_config_keeping_its_set_fields() -> None:
    stage = ReaderStageConfig.extending(ReaderConfig(model="m", token_budget=64), text="both")  # type: ignore[arg-type]
    assert stage.text == "prompt_response" and stage.model_fields_set == {"model", "token_budget", "text"}
    assert stage.reader_config() == ReaderConfig(model="m", token_budget=64)


def test_reader_characters_count_the_texts_the_reader_reads(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    rows = [
        {"id": 1, "prompt": "abcd", "response": "xy", "reference": "1"},
        {"id": 2, "prompt": "éé", "reference": "1", "response": None},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    source = TypeAdapter(BenchmarkSource).validate_python(
        {"kind": "local", "path": str(path), "benchmark": "b", "fields": {"response": "response"}}
    )
    staged = stage_inputs([source], tmp_path / "in", shard_rows=1)
    assert reader_characters(staged, [0, 1], "prompt") == 6  # characters, not bytes
    assert reader_characters(staged, [0, 1], "response") == 2  # a response still to generate counts nothing
    assert reader_characters(staged, [0, 1], "prompt_response") == 8
    assert reader_characters(staged, [1], "prompt") == 2  # only the shards still to compute
