from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import TypeAdapter

from cg_ray.benchmarks import LOADERS, load_benchmarks, load_source
from cg_ray.benchmarks.rows import BENCHMARK_ROW_SCHEMA, rows_table
from cg_ray.benchmarks.sources import BenchmarkSource
from cg_ray.errors import InputError

SOURCE = TypeAdapter(BenchmarkSource)
RECORDS = [
    {"qid": "q1", "question": "What is 2 + 2?", "gold": 4, "opts": ["3", "4"], "topic": "math"},
    {"qid": "q2", "question": "Capital of France?", "gold": "Paris", "opts": ["Paris", "Rome"], "topic": "geo"},
]
FIELDS = {"id": "qid", "prompt": "question", "reference": "gold", "choices": "opts"}


def source(**kw: Any) -> Any:
    return SOURCE.validate_python(kw)


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_local_jsonl_csv_parquet_give_the_same_rows(tmp_path: Path) -> None:
    jsonl = write_jsonl(tmp_path / "b.jsonl", RECORDS)
    csv = tmp_path / "b.csv"
    csv.write_text("qid,question,gold,topic\nq1,What is 2 + 2?,4,math\nq2,Capital of France?,Paris,geo\n")
    parquet = tmp_path / "b.parquet"
    pq.write_table(pa.Table.from_pylist([{**r, "gold": str(r["gold"])} for r in RECORDS]), parquet)

    from_jsonl = load_source(source(kind="local", path=str(jsonl), benchmark="toy", fields=FIELDS))
    from_parquet = load_source(source(kind="local", path=str(parquet), benchmark="toy", fields=FIELDS))
    csv_fields = {k: v for k, v in FIELDS.items() if k != "choices"}
    from_csv = load_source(source(kind="local", path=str(csv), benchmark="toy", fields=csv_fields))

    assert from_jsonl == from_parquet
    assert [r["row_id"] for r in from_csv] == ["q1", "q2"]
    assert from_jsonl[0]["reference"] == ["4"] and from_csv[0]["reference"] == ["4"]
    assert from_jsonl[1]["choices"] == ["Paris", "Rome"]
    assert json.loads(from_jsonl[0]["metadata"]) == {"topic": "math"}  # unmapped fields are kept
    assert rows_table(from_jsonl).schema.equals(BENCHMARK_ROW_SCHEMA)


def test_prompt_template_multi_field_prompt_and_index_reference(tmp_path: Path) -> None:
    rec = {"ctx": "Tom had 3 apples.", "q": "Who had apples?", "a": "Tom", "b": "Ann", "label": "1"}
    path = write_jsonl(tmp_path / "siqa.jsonl", [rec])
    fields = {
        "id": None,
        "prompt": ["ctx", "q"],
        "choices": ["a", "b"],
        "reference": "label",
        "reference_index_base": 1,
    }
    (row,) = load_source(
        source(kind="local", path=str(path), fields=fields, prompt_template="{prompt}\n{choices}\nAnswer:")
    )
    assert row["prompt"] == "Tom had 3 apples.\n\nWho had apples?\n(A) Tom\n(B) Ann\nAnswer:"
    assert row["reference"] == ["(A)"] and row["benchmark"] == "siqa" and row["row_id"] == "siqa-siqa-0"


def test_limit_keeps_the_first_rows(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "b.jsonl", RECORDS)
    rows = load_source(source(kind="local", path=str(path), fields=FIELDS, limit=1))
    assert [r["row_id"] for r in rows] == ["q1"]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        load_source(source(kind="local", path=str(tmp_path / "absent.jsonl"), fields=FIELDS))
    assert err.value.path == str(tmp_path / "absent.jsonl") and "file not found" in str(err.value)


def test_invalid_json_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(RECORDS[0]) + "\n\n{not json\n")
    with pytest.raises(InputError) as err:
        load_source(source(kind="local", path=str(path), fields=FIELDS))
    assert err.value.path == str(path) and err.value.line == 3  # the line an editor shows, blank lines counted
    assert f"{path}, line 3: invalid JSON" in str(err.value)


def test_row_missing_a_mapped_field(tmp_path: Path) -> None:
    broken = {k: v for k, v in RECORDS[1].items() if k != "gold"}
    path = write_jsonl(tmp_path / "b.jsonl", [RECORDS[0], broken])
    with pytest.raises(InputError) as err:
        load_source(source(kind="local", path=str(path), fields=FIELDS))
    assert (err.value.path, err.value.line, err.value.field) == (str(path), 2, "gold")
    assert f"{path}, line 2, field 'gold': missing field" in str(err.value)


def test_wrong_encoding_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(json.dumps(RECORDS[0]).encode() + b'\n{"qid": "q2", "question": "caf\xe9?", "gold": "x"}\n')
    with pytest.raises(InputError, match="line 2: not valid UTF-8") as err:
        load_source(source(kind="local", path=str(path), fields=FIELDS))
    assert err.value.line == 2


def test_bad_score_and_csv_with_extra_cells(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", [{"id": "a", "prompt": "p", "reference": "r", "s": 7}])
    with pytest.raises(InputError, match="outside"):
        load_source(source(kind="local", path=str(path), fields={"score": "s"}))
    csv = tmp_path / "x.csv"
    csv.write_text("id,prompt,reference\na,p,r,EXTRA\n")
    with pytest.raises(InputError, match="more cells than the header"):
        load_source(source(kind="local", path=str(csv)))


def test_duplicate_ids_across_the_suite(tmp_path: Path) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", RECORDS)
    b = write_jsonl(tmp_path / "b.jsonl", RECORDS[:1])
    sources = [source(kind="local", path=str(p), fields=FIELDS) for p in (a, b)]
    with pytest.raises(InputError, match="duplicate row id 'q1'") as err:
        load_benchmarks(sources)
    assert err.value.path == str(b)


def test_normalized_shared_benchmarks(shared_data: Path) -> None:
    rows = load_benchmarks(
        [
            source(kind="normalized", path=str(shared_data / "benchmarks/gsm8k.jsonl"), scorer="numeric", limit=5),
            source(kind="normalized", path=str(shared_data / "benchmarks/nq_open.jsonl"), scorer="any_of", limit=5),
            source(kind="normalized", path=str(shared_data / "benchmarks/agieval_en.jsonl"), limit=5),
        ]
    )
    assert len(rows) == 15
    gsm, nq, agi = rows[0], rows[5], rows[10]
    assert gsm["benchmark"] == "gsm8k" and gsm["reference"] == ["18"] and gsm["scorer"] == "numeric"
    assert "#### 18" in json.loads(gsm["metadata"])["solution"]  # the inner metadata object, unwrapped
    assert nq["reference"] == ["14 December 1972 UTC", "December 1972"]  # NQ-open: several acceptable answers
    assert agi["reference"] == ["A"] and agi["choices"] is not None and len(agi["choices"]) == 5


def test_model_outputs_join(shared_data: Path) -> None:
    bench = str(shared_data / "benchmarks/bbh.jsonl")
    outputs = str(shared_data / "model_outputs/bbh_codex.jsonl")
    with pytest.raises(InputError, match="several models") as err:
        load_source(source(kind="model_outputs", path=bench, outputs=outputs))
    assert err.value.field == "model"
    rows = load_source(source(kind="model_outputs", path=bench, outputs=outputs, model="code-davinci-002-direct"))
    # bbh.jsonl is a 75-per-task subset; every one of its rows has a Codex output.
    assert len(rows) == 2025
    first = rows[0]
    assert first["row_id"] == "bbh-boolean_expressions-0" and first["model"] == "code-davinci-002-direct"
    assert first["response"] == "False" and first["score"] == 1.0
    rescored = load_source(
        source(kind="model_outputs", path=bench, outputs=outputs, model="code-davinci-002-direct", scorer="exact")
    )
    assert rescored[0]["score"] is None and rescored[0]["response"] == "False"  # scored by us later
    with pytest.raises(InputError, match="no outputs for model 'nobody'"):
        load_source(source(kind="model_outputs", path=bench, outputs=outputs, model="nobody"))


def test_hf_load_from_disk(tmp_path: Path) -> None:
    import datasets

    ds = datasets.DatasetDict(
        {
            "validation": datasets.Dataset.from_list(
                [{"question": "who wrote hamlet", "answer": ["Shakespeare", "William Shakespeare"]}] * 3
            )
        }
    )
    ds.save_to_disk(str(tmp_path / "nq"))
    src = source(
        kind="hf",
        path=str(tmp_path / "nq"),
        split="validation",
        benchmark="nq",
        fields={"id": None, "prompt": "question", "reference": "answer"},
        scorer="any_of",
        limit=2,
    )
    rows = load_source(src)
    assert [r["row_id"] for r in rows] == ["nq-nq-validation-0", "nq-nq-validation-1"]
    assert rows[0]["reference"] == ["Shakespeare", "William Shakespeare"] and rows[0]["scorer"] == "any_of"
    with pytest.raises(InputError, match="no split 'test'"):
        load_source(src.model_copy(update={"split": "test"}))
    with pytest.raises(InputError, match="dataset directory not found"):
        load_source(src.model_copy(update={"path": str(tmp_path / "missing")}))


def _lm_eval_record(doc_id: int, flt: str, question: str, answer: str, resp: str, em: float) -> dict[str, Any]:
    # The shape lm-evaluation-harness 0.4 writes with --log_samples for a generate_until task (gsm8k).
    prompt = f"Question: {question}\nAnswer:"
    return {
        "doc_id": doc_id,
        "doc": {"question": question, "answer": f"Some reasoning.\n#### {answer}"},
        "target": f"Some reasoning.\n#### {answer}",
        "arguments": {"gen_args_0": {"arg_0": prompt, "arg_1": {"until": ["Question:"], "do_sample": False}}},
        "resps": [[f"Let me compute. {resp}"]],
        "filtered_resps": [resp if flt == "strict-match" else resp.replace("[invalid]", "")],
        "filter": flt,
        "metrics": ["exact_match"],
        "doc_hash": f"hash{doc_id}",
        "prompt_hash": f"p{doc_id}",
        "target_hash": f"t{doc_id}",
        "exact_match": em,
    }


def test_lm_eval_samples_deduplicated_by_filter(tmp_path: Path) -> None:
    records = []
    for i, (q, a, resp, strict, flex) in enumerate(
        [("2+2?", "4", "4", 1.0, 1.0), ("3*3?", "9", "[invalid]", 0.0, 0.0), ("10-1?", "9", "9", 1.0, 1.0)]
    ):
        records.append(_lm_eval_record(i, "strict-match", q, a, resp, strict))
        records.append(_lm_eval_record(i, "flexible-extract", q, a, resp, flex))
    path = write_jsonl(tmp_path / "samples_gsm8k_2024-05-01T12-00-00.123456.jsonl", records)

    with pytest.raises(InputError, match="several filters") as err:
        load_source(source(kind="lm_eval", path=str(path)))
    assert err.value.field == "filter"

    rows = load_source(source(kind="lm_eval", path=str(path), filter="strict-match"))
    assert [r["row_id"] for r in rows] == ["gsm8k-0", "gsm8k-1", "gsm8k-2"]  # one row per doc
    assert [r["score"] for r in rows] == [1.0, 0.0, 1.0]
    assert rows[0]["benchmark"] == "gsm8k" and rows[0]["prompt"] == "Question: 2+2?\nAnswer:"
    assert rows[1]["response"] == "[invalid]" and rows[0]["scorer"] == "precomputed"
    assert json.loads(rows[2]["metadata"]) == {"doc_id": "2", "filter": "strict-match", "doc_hash": "hash2"}

    by_doc = load_source(source(kind="lm_eval", path=str(path), filter="flexible-extract", prompt_field="doc.question"))
    assert by_doc[1]["prompt"] == "3*3?" and by_doc[1]["response"] == ""

    with pytest.raises(InputError, match="no per-sample metric 'acc'") as err2:
        load_source(source(kind="lm_eval", path=str(path), filter="strict-match", metric="acc"))
    assert err2.value.line == 1


def test_lm_eval_loglikelihood_task_has_no_text_response(tmp_path: Path) -> None:
    rec = {
        "doc_id": 0,
        "doc": {"question": "Sky colour?", "choices": ["blue", "green"], "answer": 0},
        "target": 0,
        "arguments": {
            "gen_args_0": {"arg_0": "Q: Sky colour?\nA:", "arg_1": " blue"},
            "gen_args_1": {"arg_0": "Q: Sky colour?\nA:", "arg_1": " green"},
        },
        "resps": [[["-0.5", "True"]], [["-3.1", "False"]]],
        "filtered_resps": [["-0.5", "True"], ["-3.1", "False"]],
        "filter": "none",
        "metrics": ["acc", "acc_norm"],
        "acc": 1.0,
        "acc_norm": 1.0,
    }
    path = write_jsonl(tmp_path / "samples_arc_easy_2024-05-01T12-00-00.jsonl", [rec])
    (row,) = load_source(source(kind="lm_eval", path=str(path)))
    assert row["benchmark"] == "arc_easy" and row["score"] == 1.0 and row["response"] is None


def test_load_suite_returns_scorer_options_per_benchmark(tmp_path: Path) -> None:
    from cg_ray.benchmarks import load_suite

    a = write_jsonl(tmp_path / "a.jsonl", RECORDS)
    b = write_jsonl(tmp_path / "b.jsonl", [{**r, "qid": r["qid"] + "b"} for r in RECORDS])
    tol = {"abs_tol": 0.5}
    rows, options = load_suite(
        [
            source(kind="local", path=str(a), fields=FIELDS, scorer="numeric", scorer_options=tol),
            source(kind="local", path=str(b), fields=FIELDS, benchmark="other"),
        ]
    )
    assert len(rows) == 4 and options == {"a": tol, "other": {}}
    with pytest.raises(InputError, match="different scorer_options") as err:
        load_suite(
            [
                source(kind="local", path=str(a), fields=FIELDS, benchmark="same", scorer_options=tol),
                source(kind="local", path=str(b), fields=FIELDS, benchmark="same"),
            ]
        )
    assert err.value.field == "scorer_options"


def test_benchmark_field_names_each_rows_benchmark(tmp_path: Path) -> None:
    records = [{**RECORDS[0], "suite": "arith"}, {**RECORDS[1], "suite": None}]
    path = write_jsonl(tmp_path / "b.jsonl", records)
    fields = {**FIELDS, "benchmark": "suite"}
    rows = list(load_source(source(kind="local", path=str(path), benchmark="misc", fields=fields)))
    assert [r["benchmark"] for r in rows] == ["arith", "misc"]  # null: the source's name
    assert "suite" not in json.loads(rows[0]["metadata"])  # a mapped field is not metadata


def test_every_source_kind_has_a_loader() -> None:
    union = get_args(get_args(BenchmarkSource)[0])
    kinds = {get_args(model.model_fields["kind"].annotation)[0] for model in union}
    assert kinds == set(LOADERS.names())
    for kind in kinds:
        assert callable(LOADERS.get(kind)), kind  # `load_<kind>` exists where the registry says
