"""Batched judging against the scripted server: windows around the activation, the fallback when a judge
cannot answer lists, a separate judge endpoint, the plan's cap, refused settings and redacted error bodies."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cg_ray import cli
from cg_ray.artifacts.layout import RunDir
from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.endpoint import EndpointCompleter, redact
from cg_ray.describe.explain import explain_run
from cg_ray.describe.run import DescribeOptions
from cg_ray.errors import ConfigError
from tests.describe.conftest import planted_rows
from tests.describe.endpoint_server import Script, serve
from tests.describe.judge_script import read_judge_prompt
from tests.describe.test_endpoint_explain import explainer, faithful_judge, marker_spans

JUDGE_KEY = "sk-judge-7Hq2-never-written-anywhere"


def _by(run: Path) -> dict[tuple[int, str], dict[str, object]]:
    return {(r["concept_id"], r["source"]): r for r in pq.read_table(run / "explanations.parquet").to_pylist()}


def _config(url: str, **kw: object) -> ExplainConfig:
    return ExplainConfig.model_validate({"endpoint": url, "model": "scripted-model", **kw})


def test_a_late_firing_concept_is_detected_through_its_window(make_run: Callable[..., Path]) -> None:
    """Every row opens with ~900 characters of preamble; the concept's marker comes after it. The judge sees
    the window around the activation and detects it; the first 400 characters would show only preamble."""
    rows = planted_rows()
    for r in rows:
        r["prompt"] = "Read the task below with care. " * 30 + r["prompt"]
    run = make_run(rows=rows)
    options = DescribeOptions(concepts=(0,), tokens=False)

    def answer(prompt: str) -> str:  # the explainer is shown the span in a real run (describe's snippets)
        if read_judge_prompt(prompt) is None:
            return '{"description": "Texts containing the marker w0"}'
        return faithful_judge(prompt)

    with serve(Script(answer)) as url:
        explain_run(RunDir(run), options, _config(url), span_reader=marker_spans)
        windowed = _by(run)[(0, "llm")]
        explain_run(RunDir(run), options, _config(url), span_reader=lambda a, rows: {})  # no windows: the row's start
        headed = _by(run)[(0, "llm")]
    assert windowed["detection_score"] == 1.0 and windowed["heldout_detection_score"] == 1.0
    assert headed["detection_score"] == 0.5 and headed["fuzzing_score"] is None


def test_a_judge_that_cannot_answer_lists_falls_back_to_one_example_per_request(run: Path) -> None:
    def answer(prompt: str) -> str:
        judged = read_judge_prompt(prompt)
        if judged is not None and judged.batched:
            return "The first example looks right, the others less so."
        return explainer(good=True)(prompt)

    script = Script(answer)
    with serve(script) as url:
        explain_run(RunDir(run), DescribeOptions(concepts=(0,), tokens=False), _config(url), span_reader=marker_spans)
    info = json.loads((run / "themes.json").read_text())["summary"]["explainer"]
    judging = info["judging"]
    assert judging["batches"] > 0 and judging["parsed"] == 0 and judging["parse_rate"] == 0.0
    singles = [r for r in script.requests if "body" in r and "Text: " in r["body"]["messages"][0]["content"]]
    assert judging["fallback_requests"] == len(singles) == judging["requests"] - judging["batches"] > 0
    llm = _by(run)[(0, "llm")]  # every example was still judged, one per request
    assert llm["detection_score"] == 1.0 and llm["heldout_detection_score"] == 1.0 and llm["n_unparsed"] == 0


def test_the_judge_endpoint_is_the_one_called_for_judging(
    run: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("CGRAY_JUDGE_KEY", JUDGE_KEY)
    explaining = Script(explainer(good=True), models=("big-explainer",))
    judging = Script(faithful_judge, models=("small-judge",), key=JUDGE_KEY)
    with serve(explaining) as url, serve(judging) as judge_url:
        args = ["explain", str(run), "--concepts", "0", "--no-tokens", "--endpoint", url, "--model", "big-explainer"]
        args += [
            "--judge-endpoint",
            judge_url,
            "--judge-model",
            "small-judge",
            "--judge-api-key-env",
            "CGRAY_JUDGE_KEY",
        ]
        assert cli.main(args) == 0
    asked = [r["body"]["messages"][0]["content"] for r in explaining.requests if "body" in r]
    judged = [r["body"]["messages"][0]["content"] for r in judging.requests if "body" in r]
    assert asked and all(read_judge_prompt(p) is None for p in asked)  # explanations only
    assert judged and all(read_judge_prompt(p) is not None for p in judged)  # judgements only
    assert all(r["auth"] is None for r in explaining.requests)  # the judge's key stays with the judge
    assert all(r["auth"] == f"Bearer {JUDGE_KEY}" for r in judging.requests)
    step = json.loads((run / "manifest.json").read_text())["steps"][-1]
    assert step["step"] == "explain" and step["judge"] == {
        "model": "small-judge",
        "endpoint": judge_url,
        "api_key_env": "CGRAY_JUDGE_KEY",
    }
    assert step["explainer"]["model"] == "big-explainer"
    for path in run.rglob("*"):
        if path.is_file():
            assert JUDGE_KEY.encode() not in path.read_bytes(), path
    assert JUDGE_KEY not in caplog.text


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--judge-model", "m"], "--judge-model needs an endpoint"),
        (["--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--max-requests", "0"], "--max-requests 0"),
        (["--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--judge-batch", "60"], "above the window budget"),
    ],
)
def test_bad_settings_are_refused_with_a_clear_message(
    run: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert cli.main(["explain", str(run), "--concepts", "0", "--no-tokens", *flags]) == 2
    assert message in capsys.readouterr().err
    assert not (run / "explanations.parquet").exists()


def test_a_tokenizer_that_cannot_be_loaded_is_refused_naming_the_flag_before_any_request(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = Script(explainer(good=True))
    with serve(script) as url:
        args = ["explain", str(run), "--concepts", "0", "--no-tokens", "--endpoint", url, "--model", "scripted-model"]
        assert cli.main([*args, "--tokenizer", str(run / "no-such-tokenizer")]) == 2
    err = capsys.readouterr().err
    assert "explain.tokenizer (--tokenizer)" in err and "no tokenizer could be loaded" in err
    assert not [r for r in script.requests if "body" in r]  # only GET /models
    assert not (run / "explanations.parquet").exists()


def test_a_plan_over_max_requests_sends_nothing(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = Script(explainer(good=True))
    with serve(script) as url:
        args = ["explain", str(run), "--concepts", "0,6", "--no-tokens", "--endpoint", url, "--model", "scripted-model"]
        assert cli.main([*args, "--max-requests", "5"]) == 2
    out = capsys.readouterr()
    assert out.out.startswith("plan: 2 concepts") and "over --max-requests 5" in out.err
    assert not [r for r in script.requests if "body" in r]  # only GET /models


def test_error_bodies_are_logged_redacted(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused request's body is logged, but not a key or token it may echo (the client's own included)."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("CGRAY_JUDGE_KEY", JUDGE_KEY)
    other = "ghp_" + "A1b2" * 9
    body = f'{{"error": "bad key {JUDGE_KEY}", "auth": "Bearer abc.def", "api_key": "abc123xyz", "t": "{other}"}}'
    script = Script(lambda p: "x", key=JUDGE_KEY, fault_for=lambda p: [("body", (400, body))])
    with serve(script) as url:
        completer = EndpointCompleter(_config(url, api_key_env="CGRAY_JUDGE_KEY"))
        with pytest.raises(ConfigError, match="all 1 requests failed"):
            completer.complete(["p"], 4)
        completer.close()
    assert "HTTP 400" in caplog.text and "bad key ***" in caplog.text
    for secret in (JUDGE_KEY, other, "abc123xyz", "abc.def"):
        assert secret not in caplog.text and secret not in redact(body, [JUDGE_KEY])
    assert redact("row 12 of 40: model not found") == "row 12 of 40: model not found"


@pytest.fixture
def run(make_run: Callable[..., Path]) -> Path:
    return make_run(labels={0: "',' | '.'", 6: "'books' | 'house'"})
