"""Structured judge answers against the scripted server: the batch requests carry a JSON schema of exactly n
yes / no, so a judge that cannot write a list on its own is still read; a server that refuses the schema is
named once and the run judges on without it; `off` never asks, `on` fails clearly."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cg_ray import cli
from cg_ray.artifacts.layout import RunDir
from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.endpoint import EndpointCompleter
from cg_ray.describe.explain import explain_run
from cg_ray.describe.judging import answer_format
from cg_ray.describe.run import DescribeOptions
from tests.describe.endpoint_server import Script, serve
from tests.describe.judge_script import read_judge_prompt
from tests.describe.test_endpoint_explain import explainer, faithful, marker_spans

REFUSED = "refused structured answers"


def weak(prompt: str) -> str:
    """A judge that explains well but answers a batch in prose (as SmolLM2 did: parse rate 0)."""
    judged = read_judge_prompt(prompt)
    if judged is not None and judged.batched:
        return "The first example looks right, the others less so."
    return explainer(good=True)(prompt)


def constrained(prompt: str, fmt: dict[str, Any]) -> str:
    """What a constrained decoder makes the weak judge write: the schema's shape, the faithful answers."""
    judged = read_judge_prompt(prompt)
    assert judged is not None, "only judge prompts carry a schema"
    said = ["yes" if faithful(judged.kind, judged.description, t) else "no" for t in judged.texts]
    props = fmt["json_schema"]["schema"]["properties"]
    return json.dumps({"answers": said} if "answers" in props else {"answer": said[0]})


def _judging(run: Path) -> dict[str, Any]:
    info = json.loads((run / "themes.json").read_text())["summary"]["explainer"]
    assert isinstance(info["judging"], dict)
    return info["judging"]


def _posts(script: Script) -> list[dict[str, Any]]:
    return [r["body"] for r in script.requests if "body" in r]


def _args(run: Path, url: str, *flags: str) -> list[str]:
    return [
        "explain",
        str(run),
        "--concepts",
        "0",
        "--no-tokens",
        "--endpoint",
        url,
        "--model",
        "scripted-model",
        *flags,
    ]


def test_batch_requests_carry_a_schema_and_a_weak_judge_is_read(run: Path) -> None:
    script = Script(weak, structured=constrained)
    with serve(script) as url:
        config = ExplainConfig(endpoint=url, model="scripted-model")
        explain_run(RunDir(run), DescribeOptions(concepts=(0,), tokens=False), config, span_reader=marker_spans)
    judged = [b for b in _posts(script) if read_judge_prompt(b["messages"][0]["content"]) is not None]
    assert judged and all(b["response_format"]["type"] == "json_schema" for b in judged)
    for b in judged:  # exactly as many answers as the prompt has examples
        n = len(read_judge_prompt(b["messages"][0]["content"]).texts)  # type: ignore[union-attr]
        props = b["response_format"]["json_schema"]["schema"]["properties"]
        if n == 1:
            assert props["answer"]["enum"] == ["yes", "no"]
        else:
            answers = props["answers"]
            assert (answers["minItems"], answers["maxItems"], answers["items"]["enum"]) == (n, n, ["yes", "no"])
    explained = [b for b in _posts(script) if read_judge_prompt(b["messages"][0]["content"]) is None]
    assert explained and all("response_format" not in b for b in explained)  # explanations stay free text
    judging = _judging(run)
    assert judging["structured"] == "used" and judging["parse_rate"] == 1.0 and judging["fallback_requests"] == 0


def test_a_server_that_refuses_the_schema_is_named_once_and_the_run_completes(
    run: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO)
    script = Script(explainer(good=True), refuse_format=400)  # lists on its own, no structured outputs
    with serve(script) as url:
        assert cli.main(_args(run, url)) == 0
    assert caplog.text.count(REFUSED) == 1
    refused = [b for b in _posts(script) if "response_format" in b]
    assert 1 <= len(refused) <= 8  # only those in flight when the first refusal came back (concurrency 8)
    judging = _judging(run)
    assert judging["structured"] == "refused" and judging["parse_rate"] == 1.0 and judging["fallback_requests"] == 0
    assert "structured answers: refused" in capsys.readouterr().out
    usage = json.loads((run / "themes.json").read_text())["summary"]["explainer"]["usage"]
    assert usage["failed"] == 0  # every refused request was sent again without the schema and answered


def test_off_sends_no_schema(run: Path) -> None:
    script = Script(explainer(good=True), structured=constrained)
    with serve(script) as url:
        assert cli.main(_args(run, url, "--judge-structured", "off")) == 0
    assert _posts(script) and all("response_format" not in b for b in _posts(script))
    assert _judging(run)["structured"] == "off"


def test_on_fails_clearly_when_the_server_refuses_the_schema(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with serve(Script(explainer(good=True), refuse_format=422)) as url:
        assert cli.main(_args(run, url, "--judge-structured", "on")) == 2
    err = capsys.readouterr().err
    assert "refused a structured answer" in err and "HTTP 422" in err and "--judge-structured auto" in err
    assert not (run / "explanations.parquet").exists()


def test_a_refused_prompt_does_not_turn_the_schema_off() -> None:
    """A 400 that the same request without the schema meets too (a prompt over the context) is the prompt's."""
    script = Script(
        lambda p: '{"answers": ["yes", "no"]}', fault_for=lambda p: [("status", 400)] if "long" in p else []
    )
    with serve(script) as url:
        completer = EndpointCompleter(ExplainConfig(endpoint=url, model="scripted-model"), role="judge")
        answers = completer.complete(["a long prompt", "short"], 16, [answer_format(2)] * 2)
        completer.close()
    assert answers == ["", '{"answers": ["yes", "no"]}'] and completer.structured
    assert completer.usage.failed == 1
    assert [("response_format" in b) for b in _posts(script) if "long" in b["messages"][0]["content"]] == [True, False]


@pytest.fixture
def run(make_run: Callable[..., Path]) -> Path:
    return make_run(labels={0: "',' | '.'", 6: "'books' | 'house'"})
