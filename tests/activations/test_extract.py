"""`cg-ray extract` end to end on the tiny model: output contract, exactness, and bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from transformers import AutoModelForCausalLM

from cg_ray import cli
from cg_ray import schemas as S
from cg_ray.activations.reader import ConceptReader
from cg_ray.activations.reference import reference_row

from .conftest import reader_config

pytestmark = pytest.mark.usefixtures("reader_commands")

ROWS = [
    {
        "id": "q1",
        "benchmark": "toy",
        "model": "m",
        "score": 1.0,
        "prompt": "how many eggs",
        "output": "two eggs",
    },
    {
        "id": "q2",
        "benchmark": "toy",
        "model": "m",
        "score": 0.0,
        "prompt": "what is the price",
        "output": "ten",
    },
    {
        "id": "q3",
        "benchmark": "toy2",
        "model": "m",
        "score": 0.5,
        "prompt": "how many eggs",
        "output": "three",
    },
]


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


@pytest.fixture
def run(tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path]) -> Callable[..., int]:
    sae = f"saelens-disk:{tiny_sae_dir('topk')}"

    def _run(*args: str | Path) -> int:
        argv = [str(a) for a in args]
        base = ["--reader-model", str(tiny_model_dir), "--sae", sae, "--dtype", "float32", "--device", "cpu"]
        return cli.main(["extract", *argv, *base])

    return _run


def test_extract_keeps_metadata_and_joins_the_benchmark_files(tmp_path: Path, run: Callable[..., int]) -> None:
    bench = write_jsonl(
        tmp_path / "bench.jsonl",
        [
            {"id": "q1", "benchmark": "toy", "prompt": "how many eggs", "metadata": {"task": "count", "level": 2}},
            {"id": "q2", "benchmark": "toy", "prompt": "what is the price", "metadata": {"task": "price"}},
        ],
    )
    rows = [
        {"id": "q1", "benchmark": "toy", "score": 1.0, "output": "two", "metadata": {"level": 3, "ok": True}},
        {"id": "q2", "benchmark": "toy", "score": 0.0, "output": "ten", "metadata": {"nested": {"a": 1}}},
    ]
    inp = write_jsonl(tmp_path / "rows.jsonl", rows)
    out = tmp_path / "rows.parquet"
    assert run("--input", inp, "--out", out, "--join-benchmarks", bench) == 0
    got = [json.loads(m) for m in pq.read_table(out).column(S.METADATA).to_pylist()]
    # the row's own keys win over the benchmark file's; nested values are kept (describe skips them)
    assert got == [{"task": "count", "level": 3, "ok": True}, {"task": "price", "nested": {"a": 1}}]


def test_extract_rejects_metadata_that_is_not_an_object(
    tmp_path: Path, run: Callable[..., int], capsys: pytest.CaptureFixture[str]
) -> None:
    bad = {**ROWS[0], "metadata": ["task", "x"]}
    inp = write_jsonl(tmp_path / "rows.jsonl", [ROWS[1], bad])
    assert run("--input", inp, "--out", tmp_path / "rows.parquet") == 2
    err = capsys.readouterr().err
    assert "line 2: metadata must be a JSON object" in err and "'metadata'" in err
    assert not (tmp_path / "rows.parquet").exists()


def test_extract_writes_contract_and_matches_float32_recomputation(
    tmp_path: Path, run: Callable[..., int], tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path]
) -> None:
    inp = write_jsonl(tmp_path / "rows.jsonl", ROWS)
    out = tmp_path / "out" / "rows.parquet"
    assert run("--input", inp, "--out", out, "--text", "both", "--token-budget", "16") == 0
    table = pq.read_table(out)
    want = S.rows_schema_with_d_sae(96)
    # the contract's columns first, then the optional texts and metadata
    assert table.schema.names == [*want.names, "prompt", "response", S.METADATA]
    assert table.schema.metadata == want.metadata
    assert table.column("prompt").to_pylist()[0] == "how many eggs"
    assert table.column(S.METADATA).to_pylist() == [None, None, None]
    contract = table.select(want.names)
    for got_f, want_f in zip(contract.schema, want, strict=True):  # Parquet renames list items: compare types
        assert got_f.nullable == want_f.nullable
        assert contract.cast(want).schema.field(got_f.name).type == want_f.type
    assert table.column(S.ROW_ID).to_pylist() == ["q1", "q2", "q3"]
    assert table.column(S.SCORE).to_pylist() == [1.0, 0.0, 0.5]
    manifest = json.loads((tmp_path / "out" / "rows.manifest.json").read_text())
    assert manifest["text"] == "prompt_response" and manifest["chat_template"] is False  # `both`: the alias
    assert manifest["reader"]["layer"] == 2 and manifest["reader"]["tokens"]["exclude_bos"] is True
    assert manifest["counts"]["rows"] == 3 and manifest["d_sae"] == 96

    # independent float32 recomputation: full model, every token through the SAE, dense
    reader = ConceptReader.from_config(
        reader_config(model=str(tiny_model_dir), sae=f"saelens-disk:{tiny_sae_dir('topk')}")
    )
    full = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    for rec, ids, acts, n in zip(
        ROWS,
        table.column(S.CONCEPT_IDS).to_pylist(),
        table.column(S.CONCEPT_ACTS).to_pylist(),
        table.column(S.N_TOKENS).to_pylist(),
        strict=True,
    ):
        seq = reader.tokenize([f"{rec['prompt']}\n\n{rec['output']}"])[0]
        ref, n_ref = reference_row(full, reader.sae, seq, reader.layer, reader.policy)
        got = np.zeros(96)
        got[ids] = acts
        assert n == n_ref
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["rows.manifest.json", "rows.parquet"]


def test_extract_joins_benchmark_prompts_and_filters_model(tmp_path: Path, run: Callable[..., int]) -> None:
    bench = tmp_path / "benchmarks"
    bench.mkdir()
    write_jsonl(bench / "toy.jsonl", [{"id": "q1", "benchmark": "toy", "prompt": "how many eggs", "reference": "2"}])
    outputs = [
        {"id": "q1", "benchmark": "toy", "model": "a", "output": "two", "score": 1.0},
        {"id": "q1", "benchmark": "toy", "model": "b", "output": "three", "score": 0.0},
    ]
    inp = write_jsonl(tmp_path / "outputs.jsonl", outputs)
    out = tmp_path / "rows.parquet"
    assert run("--input", inp, "--out", out, "--join-benchmarks", bench, "--model", "b", "--chat-template") == 0
    table = pq.read_table(out).to_pylist()
    assert [(r["row_id"], r["model"], r["score"]) for r in table] == [("q1", "b", 0.0)]
    manifest = json.loads((tmp_path / "rows.manifest.json").read_text())
    assert manifest["chat_template"] is True and manifest["model_filter"] == "b"
    # both models in one file without --model: the duplicate key is refused
    assert run("--input", inp, "--out", tmp_path / "dup.parquet", "--join-benchmarks", bench) == 2


def test_identical_texts_are_read_once(tmp_path: Path, run: Callable[..., int]) -> None:
    inp = write_jsonl(tmp_path / "rows.jsonl", ROWS)
    out = tmp_path / "rows.parquet"
    assert run("--input", inp, "--out", out, "--text", "prompt") == 0
    rows = pq.read_table(out).to_pylist()
    assert rows[0]["concept_ids"] == rows[2]["concept_ids"] and rows[0]["concept_acts"] == rows[2]["concept_acts"]
    assert json.loads((tmp_path / "rows.manifest.json").read_text())["counts"]["unique_texts"] == 2


BAD_CASES = {
    "bad json": (
        ['{"id": "q1", "benchmark": "toy", "score": 1, "prompt": "a"}', "{not json"],
        "line 2",
        None,
    ),
    "missing score": ([{**ROWS[0], "score": None}], "line 1", "score"),
    "score out of range": ([{**ROWS[0], "score": 1.5}], "line 1", "score"),
    "score not a number": ([{**ROWS[0], "score": "1"}], "line 1", "score"),
    "empty text": ([ROWS[0], {**ROWS[1], "prompt": "  "}], "line 2", "prompt"),
    "no id": ([{k: v for k, v in ROWS[0].items() if k != "id"}], "line 1", "id"),
    "no benchmark": ([{k: v for k, v in ROWS[0].items() if k != "benchmark"}], "line 1", "benchmark"),
    "prompt not text": ([{**ROWS[0], "prompt": 3}], "line 1", "prompt"),
}


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_bad_input_fails_clearly_without_output(
    tmp_path: Path, run: Callable[..., int], capsys: pytest.CaptureFixture[str], case: str
) -> None:
    rows, where, field = BAD_CASES[case]
    inp = write_jsonl(tmp_path / "rows.jsonl", rows)
    out = tmp_path / "out" / "rows.parquet"
    assert run("--input", inp, "--out", out) == 2
    err = capsys.readouterr().err
    assert str(inp) in err and where in err, err
    if field:
        assert f"field {field!r}" in err, err
    assert not out.parent.exists() or not any(out.parent.iterdir())


def test_missing_scores_allowed_on_request(tmp_path: Path, run: Callable[..., int]) -> None:
    inp = write_jsonl(tmp_path / "rows.jsonl", [{**ROWS[0], "score": None}])
    out = tmp_path / "rows.parquet"
    assert run("--input", inp, "--out", out, "--allow-missing-scores") == 0
    assert pq.read_table(out).column(S.SCORE).to_pylist() == [None]


def test_bad_reader_fails_before_output(
    tmp_path: Path, tiny_sae_dir: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    inp = write_jsonl(tmp_path / "rows.jsonl", ROWS)
    out = tmp_path / "o" / "rows.parquet"
    sae = f"saelens-disk:{tiny_sae_dir('topk')}"
    argv = ["extract", "--input", str(inp), "--out", str(out), "--sae", sae]
    assert cli.main([*argv, "--reader-model", str(tmp_path / "nope")]) == 2
    assert "model path not found" in capsys.readouterr().err
    assert cli.main([*argv, "--reader-model", str(tmp_path)]) == 2
    assert "no config.json" in capsys.readouterr().err
    assert cli.main(["extract", "--input", str(tmp_path / "missing.jsonl"), "--out", str(out)]) == 2
    assert "input file not found" in capsys.readouterr().err
    assert cli.main([*argv, "--reader-model", "x", "--sink-positions", "many"]) == 2
    assert "--sink-positions" in capsys.readouterr().err
    assert not out.parent.exists() or not any(out.parent.iterdir())


def test_sae_not_fitting_model_fails(
    tmp_path: Path,
    tiny_model_dir: Path,
    tiny_sae_dir: Callable[..., Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    inp = write_jsonl(tmp_path / "rows.jsonl", ROWS)
    out = tmp_path / "rows.parquet"
    argv = ["extract", "--input", str(inp), "--out", str(out), "--reader-model", str(tiny_model_dir)]
    assert cli.main([*argv, "--sae", f"saelens-disk:{tiny_sae_dir('topk', d_in=32)}"]) == 2
    assert "d_in=32" in capsys.readouterr().err
    assert cli.main([*argv, "--sae", "zip:whatever"]) == 2
    assert "cannot tell the kind of SAE" in capsys.readouterr().err
    assert not out.exists()


def test_metrics_on_extracted_rows_use_the_labels_shipped_beside_the_sae(
    tmp_path: Path, tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`cg-ray extract` then `cg-ray metrics`: the manifest names the SAE, whose labels ship beside it (#24)."""
    sae_dir = tiny_sae_dir("topk")
    (sae_dir / "labels.jsonl").write_text(
        "".join(json.dumps({"concept_id": c, "label": f"c{c}"}) + "\n" for c in range(96))
    )
    out = tmp_path / "rows.parquet"
    reader = ["--reader-model", str(tiny_model_dir), "--sae", f"saelens-disk:{sae_dir}", "--dtype", "float32"]
    assert (
        cli.main(["extract", "--input", str(write_jsonl(tmp_path / "in.jsonl", ROWS)), "--out", str(out), *reader]) == 0
    )
    assert cli.main(["metrics", "--rows", str(out), "--out", str(tmp_path / "run"), "--min-rows", "1"]) == 0
    concepts = pq.read_table(tmp_path / "run" / S.CONCEPTS_FILE).to_pylist()
    active = [c for c in concepts if c["n_active_rows"] > 0]
    assert active and all(c["label"] == f"c{c['concept_id']}" for c in active)
    assert "labels: the labels shipped with SAE" in capsys.readouterr().out
