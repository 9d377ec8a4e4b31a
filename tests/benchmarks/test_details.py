"""lighteval details and Open LLM Leaderboard details (Parquet) as sources: small fixtures in their
documented schemas, made here, read to the right rows; bad files refused naming file, row and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import TypeAdapter

from cg_ray.benchmarks import load_source
from cg_ray.benchmarks.lighteval import task_name
from cg_ray.benchmarks.sources import BenchmarkSource
from cg_ray.errors import InputError

SOURCE = TypeAdapter(BenchmarkSource)


def source(**kw: Any) -> Any:
    return SOURCE.validate_python(kw)


def lighteval_detail(i: int, *, query: str, choices: list[str], gold: int, text: str, metric: dict[str, Any]) -> dict:
    """One record as lighteval's DetailsLogger saves it: asdict(Detail(doc, model_response, metric))."""
    return {
        "doc": {
            "query": query,
            "choices": choices,
            "gold_index": gold,
            "instruction": "",
            "specific": {"level": str(i % 2)},
            "id": str(i),
            "task_name": "lighteval|gsm8k",
            "fewshot_samples": [],
            "generation_size": 32,
            "stop_sequences": ["Question:"],
        },
        "model_response": {
            "input": f"Question: {query}\nAnswer:",
            "input_tokens": [1, 2, 3],
            "text": [text],
            "output_tokens": [[4, 5]],
            "text_post_processed": None,
            "logprobs": [],
            "argmax_logits_eq_gold": [],
            "truncated_tokens_count": 0,
            "padded_tokens_count": 0,
        },
        "metric": metric,
    }


def write_parquet(path: Path, records: list[dict]) -> Path:
    pq.write_table(pa.Table.from_pylist(records), path)
    return path


LIGHTEVAL_NAME = "details_lighteval|gsm8k|0_2025-05-01T10-00-00.123456.parquet"


def test_lighteval_details_read_to_rows(tmp_path: Path) -> None:
    records = [
        lighteval_detail(0, query="2 + 2?", choices=["4"], gold=0, text=" 4", metric={"em": 1.0, "f1": 1.0}),
        lighteval_detail(1, query="3 + 5?", choices=["8"], gold=0, text=" 9", metric={"em": 0.0, "f1": 0.0}),
    ]
    path = write_parquet(tmp_path / LIGHTEVAL_NAME, records)
    rows = load_source(source(kind="lighteval", path=str(path)))
    assert [(r["row_id"], r["benchmark"], r["score"], r["response"], r["reference"]) for r in rows] == [
        ("gsm8k-0", "gsm8k", 1.0, " 4", ["4"]),
        ("gsm8k-1", "gsm8k", 0.0, " 9", ["8"]),
    ]
    assert rows[0]["prompt"] == "Question: 2 + 2?\nAnswer:"  # the input sent to the model
    assert json.loads(rows[1]["metadata"]) == {"doc_id": "1", "task": "lighteval|gsm8k", "specific": {"level": "1"}}
    by_f1 = load_source(source(kind="lighteval", path=str(path), metric="f1", prompt_field="doc.query"))
    assert [r["prompt"] for r in by_f1] == ["2 + 2?", "3 + 5?"] and by_f1[0]["score"] == 1.0
    assert task_name("details_custom|my_task|5_2025-01-01T00-00-00.parquet") == "my_task"


def test_lighteval_multiple_choice_and_post_processed_text(tmp_path: Path) -> None:
    mc = lighteval_detail(7, query="Sky colour?", choices=[" red", " blue"], gold=1, text="", metric={"acc": True})
    mc["model_response"]["text"] = []  # a loglikelihood task logs no generation
    gen = lighteval_detail(8, query="Say hi", choices=["hi"], gold=0, text="hi!!", metric={"acc": False})
    gen["model_response"]["text_post_processed"] = ["hi"]
    path = write_parquet(tmp_path / "details_lighteval|arc|0_2025-05-01T10-00-00.parquet", [mc, gen])
    rows = load_source(source(kind="lighteval", path=str(path)))
    assert [(r["score"], r["response"], r["reference"], r["choices"]) for r in rows] == [
        (1.0, None, [" blue"], [" red", " blue"]),
        (0.0, "hi", ["hi"], ["hi"]),
    ]


def test_lighteval_bad_files(tmp_path: Path) -> None:
    two = write_parquet(
        tmp_path / LIGHTEVAL_NAME,
        [lighteval_detail(0, query="q", choices=["a"], gold=0, text="a", metric={"rouge1": 0.5, "bleu": 0.2})],
    )
    with pytest.raises(InputError) as err:
        load_source(source(kind="lighteval", path=str(two)))
    assert err.value.path == str(two) and err.value.row == 0 and err.value.field == "metric"
    assert "metrics: rouge1, bleu" in str(err.value)
    with pytest.raises(InputError) as err:
        load_source(source(kind="lighteval", path=str(two), metric="em"))
    assert err.value.field == "metric.em"
    other = write_parquet(tmp_path / "other.parquet", [{"question": "q", "answer": "a"}])
    with pytest.raises(InputError, match="not a lighteval details record") as err:
        load_source(source(kind="lighteval", path=str(other)))
    assert err.value.field == "doc" and err.value.row == 0
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(two.read_bytes()[:100])
    with pytest.raises(InputError, match="cannot read as Parquet") as err:
        load_source(source(kind="lighteval", path=str(cut)))
    assert err.value.path == str(cut)


def leaderboard_sample(doc_id: int, question: str, target: str, resp: str, em: float) -> dict:
    """One record of the harness's --log_samples, as the leaderboard's details store it (Parquet)."""
    return {
        "doc_id": doc_id,
        "doc": {"question": question, "answer": target},
        "target": target,
        "arguments": {"gen_args_0": {"arg_0": f"Question: {question}\nAnswer:", "arg_1": {"until": ["\n"]}}},
        "resps": [[resp]],
        "filtered_resps": [resp.strip()],
        "filter": "strict-match",
        "metrics": ["exact_match"],
        "doc_hash": f"h{doc_id}",
        "prompt_hash": f"p{doc_id}",
        "target_hash": f"t{doc_id}",
        "exact_match": em,
    }


def test_leaderboard_details_read_as_the_harness_samples(tmp_path: Path) -> None:
    records = [
        leaderboard_sample(0, "2 + 2?", "4", " 4", 1.0),
        leaderboard_sample(1, "Capital of France?", "Paris", " Lyon", 0.0),
    ]
    other_filter = {**leaderboard_sample(0, "2 + 2?", "4", " 4", 0.0), "filter": "flexible-extract"}
    path = write_parquet(
        tmp_path / "samples_leaderboard_gsm8k_2024-06-26T19-11-24.837588.parquet", [*records, other_filter]
    )
    with pytest.raises(InputError, match="several filters") as err:
        load_source(source(kind="leaderboard", path=str(path)))
    assert err.value.field == "filter"
    rows = load_source(source(kind="leaderboard", path=str(path), filter="strict-match"))
    assert [(r["row_id"], r["benchmark"], r["score"], r["response"], r["reference"]) for r in rows] == [
        ("leaderboard_gsm8k-0", "leaderboard_gsm8k", 1.0, "4", ["4"]),
        ("leaderboard_gsm8k-1", "leaderboard_gsm8k", 0.0, "Lyon", ["Paris"]),
    ]
    assert rows[1]["prompt"] == "Question: Capital of France?\nAnswer:"
    by_doc = load_source(
        source(kind="leaderboard", path=str(path), filter="strict-match", prompt_field="doc.question", benchmark="g")
    )
    assert [r["prompt"] for r in by_doc] == ["2 + 2?", "Capital of France?"] and by_doc[0]["row_id"] == "g-0"
    with pytest.raises(InputError) as err:
        load_source(source(kind="leaderboard", path=str(path), filter="strict-match", metric="acc"))
    assert err.value.path == str(path) and err.value.row == 0 and err.value.field == "acc"


def test_lighteval_older_flat_layout(tmp_path: Path) -> None:
    """lighteval up to 0.3 (the Open LLM Leaderboard's first details) saved flat records."""

    def flat(i: int, example: str, choices: list[str], gold: list[str], gold_index: list[int], pred: Any, acc: float):
        return {
            "example": example,
            "full_prompt": f"Q: {example}\nA:",
            "num_effective_few_shots": 0,
            "num_asked_few_shots": 0,
            "predictions": pred,
            "gold": gold,
            "choices": choices,
            "gold_index": gold_index,
            "metrics": {"acc": acc},
            "specifics": {"i": str(i)},
        }

    path = write_parquet(
        tmp_path / "details_harness|gsm8k|5_2023-10-01T00-00-00.parquet",
        [
            flat(0, "2 + 2?", [], ["4"], [], ["4"], 1.0),
            flat(1, "3 + 5?", [], ["8"], [], ["9"], 0.0),
        ],
    )
    rows = load_source(source(kind="lighteval", path=str(path)))
    assert [(r["row_id"], r["benchmark"], r["prompt"], r["response"], r["reference"], r["score"]) for r in rows] == [
        ("gsm8k-0", "gsm8k", "Q: 2 + 2?\nA:", "4", ["4"], 1.0),
        ("gsm8k-1", "gsm8k", "Q: 3 + 5?\nA:", "9", ["8"], 0.0),
    ]
    mc = write_parquet(
        tmp_path / "details_harness|arc:challenge|25_2023-10-01T00-00-00.parquet",
        [flat(0, "Sky?", [" red", " blue"], [" blue"], [1], [], 1.0)],
    )
    (row,) = load_source(source(kind="lighteval", path=str(mc)))
    assert row["benchmark"] == "arc:challenge" and row["reference"] == [" blue"] and row["response"] is None
