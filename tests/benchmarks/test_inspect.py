"""inspect_ai logs as a source (`kind: inspect`): real logs made here by inspect_ai itself (its mock model, a
`match()` scorer, 2 epochs; in .eval and .json), read to rows whose scores are inspect's own per-sample values;
`cg-ray extract` + `cg-ray metrics` and `cg-ray run` on them to the end; bad logs refused with clear errors."""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pydantic import TypeAdapter

from cg_ray import cli
from cg_ray import schemas as S
from cg_ray.benchmarks import load_source
from cg_ray.benchmarks.sources import BenchmarkSource
from cg_ray.errors import InputError

inspect_ai = pytest.importorskip("inspect_ai")

SOURCE = TypeAdapter(BenchmarkSource)
QUESTIONS = {  # sample id -> (input, target, the mock model's answer, metadata)
    "q1": ("What is 2 + 2?", "4", "4", {"topic": "math"}),
    "q2": (None, "Paris", "Lyon", {"topic": "geo"}),  # chat messages: a system and a user turn
    "q3": ("How many legs has a cat?", "4", "four", {"topic": "animals"}),
    7: ("What is 3 + 4?", "7", "7", {}),
}


def answer(input: list[Any], tools: Any, tool_choice: Any, config: Any) -> Any:
    """The mock model's answer, with its token usage given: mockllm would otherwise count tokens with a
    tiktoken encoding it downloads (no network here)."""
    from inspect_ai.model import ModelOutput, ModelUsage

    text = input[-1].text
    reply = next((a for q, _, a, _ in QUESTIONS.values() if q == text), "Lyon")
    out = ModelOutput.from_content(model="mockllm", content=reply)
    out.usage = ModelUsage(input_tokens=len(text.split()), output_tokens=1, total_tokens=len(text.split()) + 1)
    return out


def make_logs(root: Path) -> dict[str, Path]:
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser, get_model
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    samples = []
    for sid, (text, target, _, meta) in QUESTIONS.items():
        chat = [ChatMessageSystem(content="Answer in one word."), ChatMessageUser(content="Capital of France?")]
        samples.append(Sample(id=sid, input=text if text else chat, target=target, metadata=meta))
    task = Task(name="toy_qa", dataset=samples, solver=generate(), scorer=match(), epochs=2)
    model = get_model("mockllm/model", custom_outputs=answer)
    out = {}
    for fmt in ("eval", "json"):
        (log,) = inspect_eval(task, model=model, log_dir=str(root / fmt), log_format=fmt, display="none")
        assert log.status == "success"
        out[fmt] = Path(log.location)
    return out


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    root = tmp_path_factory.mktemp("inspect-logs")
    old = os.environ.get("XDG_DATA_HOME")
    os.environ["XDG_DATA_HOME"] = str(root / "xdg")  # inspect keeps its own data under the user's data dir
    try:
        yield make_logs(root)
    finally:
        if old is None:
            os.environ.pop("XDG_DATA_HOME", None)
        else:
            os.environ["XDG_DATA_HOME"] = old


def inspect_source(path: Path, **kw: Any) -> Any:
    return SOURCE.validate_python({"kind": "inspect", "path": str(path), **kw})


def inspects_own_scores(path: Path) -> dict[str, float]:
    """Row id -> inspect's own float value of each sample's `match` score (its value_to_float)."""
    from inspect_ai.log import read_eval_log
    from inspect_ai.scorer import value_to_float

    log = read_eval_log(str(path))
    to_float = value_to_float()
    return {f"toy_qa-{s.id}#{s.epoch}": to_float(s.scores["match"].value) for s in log.samples or []}


@pytest.mark.parametrize("fmt", ["eval", "json"])
def test_a_log_reads_to_one_row_per_sample_and_epoch_with_inspects_scores(logs: dict[str, Path], fmt: str) -> None:
    rows = load_source(inspect_source(logs[fmt]))
    assert len(rows) == 8  # 4 samples x 2 epochs
    expected = inspects_own_scores(logs[fmt])
    assert {r["row_id"]: r["score"] for r in rows} == expected
    assert sorted(set(expected.values())) == [0.0, 1.0]  # q2 and q3 are wrong, the others right
    by_id = {r["row_id"]: r for r in rows}
    # Epochs of a sample share the id up to '#': one group, never split over cross-fitting folds.
    assert {rid.rsplit("#", 1)[0] for rid in by_id} == {"toy_qa-q1", "toy_qa-q2", "toy_qa-q3", "toy_qa-7"}
    q1 = by_id["toy_qa-q1#2"]
    assert q1["prompt"] == "What is 2 + 2?" and q1["response"] == "4" and q1["reference"] == ["4"]
    assert q1["benchmark"] == "toy_qa" and q1["model"] == "mockllm/model" and q1["scorer"] == "precomputed"
    assert json.loads(q1["metadata"]) == {
        "sample_id": "q1",
        "epoch": 2,
        "target": "4",
        "task": "toy_qa",
        "topic": "math",
    }
    q2 = by_id["toy_qa-q2#1"]
    assert q2["prompt"] == "system:\nAnswer in one word.\n\nuser:\nCapital of France?"
    assert q2["response"] == "Lyon" and q2["score"] == 0.0


def test_a_folder_of_logs_and_the_limit(logs: dict[str, Path]) -> None:
    rows = load_source(inspect_source(logs["eval"].parent, limit=3))
    assert [r["row_id"] for r in rows] == ["toy_qa-q1#1", "toy_qa-q1#2", "toy_qa-q2#1"]
    # Two logs of the same task in one folder: the second one's rows clash with the first's.
    both = logs["eval"].parent.parent / "both"
    both.mkdir()
    for p in logs.values():
        (both / p.name).write_bytes(p.read_bytes())
    with pytest.raises(InputError, match=r"row id 'toy_qa-q1#1' again"):
        load_source(inspect_source(both))


def test_a_scorer_the_log_does_not_have_is_refused(logs: dict[str, Path]) -> None:
    with pytest.raises(InputError) as err:
        load_source(inspect_source(logs["eval"], scorer_name="includes"))
    assert err.value.path == str(logs["eval"]) and err.value.field == "scorer_name"
    assert "no scorer 'includes' in the log (scorers: match)" in str(err.value)


def rewritten(path: Path, dest: Path, edit: Any) -> Path:
    """The log at `path` with `edit(log)` applied, written by inspect as `dest`."""
    from inspect_ai.log import read_eval_log, write_eval_log

    log = read_eval_log(str(path))
    edit(log)
    write_eval_log(log, str(dest))
    return dest


@pytest.mark.parametrize("fmt", ["eval", "json"])
def test_a_sample_without_the_score_is_refused_or_skipped_with_a_count(
    logs: dict[str, Path], tmp_path: Path, fmt: str, caplog: pytest.LogCaptureFixture
) -> None:
    def drop_first_score(log: Any) -> None:
        (q1,) = [s for s in log.samples if s.id == "q1" and s.epoch == 1]
        q1.scores = {}

    name = f"2026-01-01T00-00-00+00-00_toy-qa_x.{fmt}"
    path = rewritten(logs[fmt], tmp_path / name, drop_first_score)
    with pytest.raises(InputError) as err:
        load_source(inspect_source(path))
    assert err.value.path == str(path) and err.value.field == "scores.match" and err.value.row is not None
    assert "sample 'q1', epoch 1: no 'match' score (the sample has no scores)" in str(err.value)
    with caplog.at_level(logging.WARNING, logger="cg_ray.benchmarks.inspect"):
        rows = load_source(inspect_source(path, missing_score="skip"))
    assert len(rows) == 7 and "toy_qa-q1#1" not in {r["row_id"] for r in rows}
    assert "skipped 1 samples without a 'match' score" in caplog.text


def test_a_log_of_an_interrupted_eval_is_read_with_a_warning(
    logs: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def cancel(log: Any) -> None:
        log.status = "cancelled"
        log.samples = log.samples[:3]

    path = rewritten(logs["eval"], tmp_path / "2026-01-01T00-00-00+00-00_toy-qa_c.eval", cancel)
    with caplog.at_level(logging.WARNING, logger="cg_ray.benchmarks.inspect"):
        rows = load_source(inspect_source(path))
    assert len(rows) == 3
    assert f"{path}: the eval's status is 'cancelled'" in caplog.text


def test_a_score_value_without_a_float_value_is_refused(logs: dict[str, Path], tmp_path: Path) -> None:
    def odd(log: Any) -> None:
        (q1,) = [s for s in log.samples if s.id == "q1" and s.epoch == 2]
        q1.scores["match"].value = "maybe"

    path = rewritten(logs["json"], tmp_path / "2026-01-01T00-00-00+00-00_toy-qa_o.json", odd)
    with pytest.raises(InputError) as err:
        load_source(inspect_source(path))
    assert err.value.field == "scores.match.value" and err.value.path == str(path)
    assert "sample 'q1', epoch 2: a score of 'maybe' has no float value" in str(err.value)


def test_files_that_are_not_inspect_logs(logs: dict[str, Path], tmp_path: Path) -> None:
    jsonl = tmp_path / "rows.json"
    jsonl.write_text('{"id": 1, "prompt": "x"}\n{"id": 2, "prompt": "y"}\n')
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    cases = {jsonl: "not a readable inspect_ai log", text: "not an inspect_ai log: expected a .eval or .json file"}
    for fmt, log in logs.items():  # truncated: half of a real log
        cut = tmp_path / f"cut.{fmt}"
        cut.write_bytes(log.read_bytes()[: log.stat().st_size // 2])
        cases[cut] = "not a readable inspect_ai log"
    for path, message in cases.items():
        with pytest.raises(InputError) as err:
            load_source(inspect_source(path))
        assert err.value.path == str(path) and message in str(err.value), path
    with pytest.raises(InputError, match="no such log file or folder"):
        load_source(inspect_source(tmp_path / "absent.eval"))


def test_inspect_scores_match_value_to_float_on_every_value_kind() -> None:
    from inspect_ai.scorer import value_to_float

    from cg_ray.benchmarks.inspect import _score, _Where

    class Sample:
        def __init__(self, value: Any) -> None:
            from inspect_ai.scorer import Score

            self.scores = {"s": Score(value=value)}

    where = _Where("log.eval", 0, "q", 1)
    for value in ("C", "I", "P", "N", "yes", "False", 0.25, 1, True, "0.5"):
        assert _score(Sample(value), "s", where) == value_to_float()(value), value  # type: ignore[arg-type]
    assert _score(Sample(math.nan), "s", where) is None  # inspect's unscored sentinel: a missing score
    for bad in ([1, 0], {"a": 1}, "partly", 3.5):
        with pytest.raises(InputError):
            _score(Sample(bad), "s", where)  # type: ignore[arg-type]


# --- end to end: extract + metrics on the tiny reader, and `cg-ray run` on the fake one -----------------


@pytest.fixture(scope="module")
def tiny_reader(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The reader flags of the activations tests' tiny random Llama + sae-lens SAE (built offline)."""
    from tests.activations.conftest import save_tiny_llama, tiny_saelens_sae

    model_dir = save_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))
    sae_dir = tmp_path_factory.mktemp("tiny-sae") / "sae"
    tiny_saelens_sae().save_model(str(sae_dir))
    return ["--reader-model", str(model_dir), "--sae", f"saelens-disk:{sae_dir}", "--dtype", "float32"]


@pytest.mark.parametrize("fmt", ["eval", "json"])
def test_extract_then_metrics_on_an_inspect_log(
    logs: dict[str, Path], tiny_reader: list[str], tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "rows.parquet"
    argv = ["extract", "--input", str(logs[fmt]), "--out", str(out), "--scorer-name", "match", *tiny_reader]
    assert cli.main([*argv, "--device", "cpu"]) == 0
    rows = pq.read_table(out)
    assert dict(zip(rows[S.ROW_ID].to_pylist(), rows[S.SCORE].to_pylist(), strict=True)) == inspects_own_scores(
        logs[fmt]
    )
    assert json.loads(rows[S.METADATA][0].as_py())["topic"] == "math"
    converted = tmp_path / "rows.input.jsonl"  # the input the extract manifest names, kept beside it
    manifest = json.loads((tmp_path / "rows.manifest.json").read_text())
    assert manifest["input"] == str(converted) and len(converted.read_text().splitlines()) == 8
    assert cli.main(["metrics", "--rows", str(out), "--out", str(tmp_path / "run"), "--min-rows", "1"]) == 0
    summary = json.loads((tmp_path / "run" / S.SUMMARY_FILE).read_text())
    assert summary["n_rows"] == 8


def test_extract_refuses_a_bad_log_and_writes_nothing(
    logs: dict[str, Path], tiny_reader: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rows.parquet"
    assert cli.main(["extract", "--input", str(logs["eval"]), "--out", str(out), "--scorer-name", "f1"]) == 2
    assert "field 'scorer_name': no scorer 'f1' in the log (scorers: match)" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_cg_ray_run_on_an_inspect_log(logs: dict[str, Path], ray_module: None, tmp_path: Path) -> None:
    from cg_ray.pipeline.config import parse_run_config
    from cg_ray.pipeline.runner import RunOptions, run

    config = parse_run_config(
        {
            "name": "inspect",
            "output_dir": str(tmp_path),
            "benchmarks": [{"kind": "inspect", "path": str(logs["eval"]), "scorer_name": "match"}],
            "generation": {"backend": "fake", "resources": {"num_cpus": 0.5, "batch_size": 8}},
            "reader": {"resources": {"num_cpus": 0.5, "min_actors": 1, "max_actors": 1, "batch_size": 8}},
            "metrics": {"min_rows": 1},
            "describe": {"enabled": False},
        }
    )
    out = run(config, RunOptions(shard_rows=4, reader_factory="cg_ray.testing.fakes:HashingReader.from_config"))
    rows = pq.read_table(out / S.ROWS_FILE)
    assert dict(zip(rows[S.ROW_ID].to_pylist(), rows[S.SCORE].to_pylist(), strict=True)) == inspects_own_scores(
        logs["eval"]
    )
    assert rows["response"].to_pylist()[:2] == ["4", "4"]  # the log's answers, not regenerated


def test_an_uploaded_log_reads_as_the_file_does(logs: dict[str, Path]) -> None:
    from cg_ray.benchmarks.inspect import rows_from_bytes

    for path in logs.values():
        rows = rows_from_bytes(path.read_bytes(), path.name, scorer_name="match")
        assert {r["row_id"]: r["score"] for r in rows} == inspects_own_scores(path)
    with pytest.raises(InputError) as err:
        rows_from_bytes(logs["eval"].read_bytes()[:500], "mine.eval")
    assert err.value.path == "mine.eval" and "not a readable inspect_ai log" in str(err.value)
    with pytest.raises(InputError, match=r"expected a \.eval or \.json file"):
        rows_from_bytes(b"{}", "rows.jsonl")


def test_logs_of_several_models_and_rescoring_by_our_scorer(logs: dict[str, Path], tmp_path: Path) -> None:
    def other_model(log: Any) -> None:
        log.eval.model = "openai/other"

    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / logs["eval"].name).write_bytes(logs["eval"].read_bytes())
    rewritten(logs["eval"], folder / "2026-01-01T00-00-00+00-00_toy-qa_m.eval", other_model)
    with pytest.raises(InputError) as err:
        load_source(inspect_source(folder))
    assert err.value.field == "model" and "several models (mockllm/model, openai/other)" in str(err.value)
    rows = load_source(inspect_source(folder, model="openai/other"))
    assert len(rows) == 8 and {r["model"] for r in rows} == {"openai/other"}
    # Another scorer than precomputed: inspect's scores are not read, our scorer grades the responses.
    rescored = load_source(inspect_source(logs["json"], scorer="exact"))
    assert {r["score"] for r in rescored} == {None} and {r["scorer"] for r in rescored} == {"exact"}
    assert [r["response"] for r in rescored][:2] == ["4", "4"]
