"""The OpenAI-compatible endpoint client against a real HTTP server on loopback: retries, malformed bodies,
timeouts, bounded concurrency, and clear errors before any work on a wrong key, URL or model."""

from __future__ import annotations

import functools
import logging
import socket
from collections import deque

import pytest

from cg_ray.describe.completers import check_model
from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.endpoint import EndpointCompleter, EndpointError, usage_line
from cg_ray.errors import ConfigError
from tests.describe.endpoint_server import Script, serve

KEY = "sk-test-Zq81-never-written"


def echo(prompt: str) -> str:
    return f"echo {prompt}"


def client(url: str, **kw: object) -> EndpointCompleter:
    settings: dict[str, object] = {"endpoint": url, "model": "scripted-model", "retries": 3, "timeout_s": 5.0}
    return EndpointCompleter(ExplainConfig.model_validate(settings | kw), backoff_s=0.01, max_backoff_s=0.05)


def test_answers_in_order_with_the_key_and_greedy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CGRAY_TEST_KEY", KEY)
    script = Script(echo, key=KEY)
    with serve(script) as url:
        c = client(url, api_key_env="CGRAY_TEST_KEY", seed=7)
        c.check()
        prompts = [f"p{i} a b" for i in range(20)]
        assert c.complete(prompts, 12) == [f"echo {p}" for p in prompts]
    posts = [r for r in script.requests if r["path"] == "/v1/chat/completions"]
    assert len(posts) == 20 and all(r["auth"] == f"Bearer {KEY}" for r in script.requests)
    body = posts[0]["body"]
    assert body["temperature"] == 0.0 and body["seed"] == 7 and body["max_tokens"] == 12
    assert body["model"] == "scripted-model" and body["messages"] == [
        {"role": "user", "content": body["messages"][0]["content"]}
    ]
    report = c.report()
    assert report["answered"] == 20 and report["requests"] == 21 and report["failed"] == 0  # 20 + GET /models
    assert report["prompt_tokens"] == 60 and report["completion_tokens"] == 80
    assert "cost not priced" in usage_line(report)


def test_429_and_503_are_retried_with_backoff_then_succeed() -> None:
    script = Script(echo, faults=deque([[("retry_after", 0), ("status", 429)], [("status", 503)], [("status", 502)]]))
    with serve(script) as url:
        c = client(url)
        assert c.complete(["hello"], 8) == ["echo hello"]
    assert c.usage.retries == 3 and c.usage.answered == 1 and c.usage.failed == 0
    assert len(script.requests) == 4


def test_a_malformed_body_is_retried_and_a_persistently_malformed_one_counts_as_unreadable() -> None:
    script = Script(
        echo,
        faults=deque([[("malformed", None)]]),
        fault_for=lambda p: [("malformed", None)] if "broken" in p else [],
    )
    with serve(script) as url:
        c = client(url, retries=2, concurrency=1)
        assert c.complete(["fine", "broken one"], 8) == ["echo fine", ""]
        assert c.usage.failed == 1 and c.usage.answered == 1 and c.usage.retries == 1 + 2
        with pytest.raises(EndpointError, match=rf"{url}: all 1 requests failed"):
            c.complete(["broken again"], 8)


def test_a_slow_answer_times_out_and_is_retried() -> None:
    script = Script(echo, faults=deque([[("sleep", 1.5)]]))
    with serve(script) as url:
        c = client(url, timeout_s=0.3)
        assert c.complete(["slow"], 8) == ["echo slow"]
    assert c.usage.retries == 1


def test_a_refused_prompt_is_not_retried() -> None:
    script = Script(echo, fault_for=lambda p: [("status", 400)] if "too long" in p else [])
    with serve(script) as url:
        c = client(url)
        assert c.complete(["too long", "ok"], 8) == ["", "echo ok"]
    assert c.usage.failed == 1 and c.usage.retries == 0


def test_concurrency_is_bounded() -> None:
    # each answer takes long enough that requests overlap even on a loaded machine (0.05 s did not, once)
    script = Script(echo, delay_s=0.3)
    with serve(script) as url:
        # a long timeout: on a machine loaded enough to stall the server thread past 5 s, the client's timeout
        # and retry put a 4th request on the server while the abandoned one still ran (seen once in a full run)
        c = client(url, concurrency=3, timeout_s=60.0)
        c.complete([f"p{i}" for i in range(12)], 8)
    assert 2 <= script.max_in_flight <= 3


def test_a_wrong_key_fails_before_any_work_naming_the_endpoint(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("CGRAY_TEST_KEY", KEY)
    script = Script(echo, key="sk-the-right-one")
    with serve(script) as url:
        config = ExplainConfig(endpoint=url, model="scripted-model", api_key_env="CGRAY_TEST_KEY")
        with pytest.raises(
            EndpointError, match=rf"{url} refused GET /models with HTTP 401: check the key in \$CGRAY_TEST_KEY"
        ) as err:
            check_model(config)
        assert KEY not in str(err.value) and KEY not in caplog.text
        assert [r["path"] for r in script.requests] == ["/v1/models"]  # nothing else was asked
        monkeypatch.delenv("CGRAY_TEST_KEY")
        with pytest.raises(ConfigError, match="environment variable CGRAY_TEST_KEY is not set"):
            check_model(config)


def test_a_wrong_url_or_model_fails_with_a_clear_error() -> None:
    script = Script(echo)
    with serve(script) as url:
        root = url.removesuffix("/v1")
        with pytest.raises(EndpointError, match=rf"{root}: GET /models answered HTTP 404 .*ends in /v1"):
            check_model(ExplainConfig(endpoint=root, model="scripted-model"))
        with pytest.raises(EndpointError, match=r"does not serve model 'llama' \(it lists: scripted-model\)"):
            check_model(ExplainConfig(endpoint=url, model="llama"))


def test_an_unreachable_endpoint_fails_quickly() -> None:
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    c = client(url, retries=1)
    with pytest.raises(EndpointError, match=rf"{url} is unreachable or failing: GET /models: cannot connect"):
        c.check()


def test_settings_reject_credentials_in_the_url_and_count_20_held_out_rows() -> None:
    with pytest.raises(ValueError, match="must not carry credentials") as err:
        ExplainConfig(endpoint="https://user:sk-secret@host/v1", model="m")
    assert "sk-secret" not in str(err.value)
    with pytest.raises(ValueError, match="http"):
        ExplainConfig(endpoint="ftp://host/v1", model="m")
    assert ExplainConfig(endpoint="http://h:8000/v1/", model="m").endpoint == "http://h:8000/v1"
    assert ExplainConfig(endpoint="http://h/v1", model="m").detect_rows == 20
    assert ExplainConfig().detect_rows == 6 and ExplainConfig(n_detect=3, endpoint="http://h/v1").detect_rows == 3
    priced = client("http://h/v1", price_in=0.5, price_out=1.5)
    priced.usage.prompt_tokens, priced.usage.completion_tokens = 2_000_000, 1_000_000
    assert priced.report()["cost_usd"] == pytest.approx(2.5) and "cost $2.5000" in usage_line(priced.report())


def test_a_long_batch_reports_its_progress(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    from cg_ray.describe import endpoint

    # every answer but the last gets a line: done / total, a rate and the time left
    monkeypatch.setattr(endpoint, "BatchProgress", functools.partial(endpoint.BatchProgress, every_s=0.0))
    with serve(Script(echo)) as url, caplog.at_level(logging.INFO, logger=endpoint.__name__):
        client(url, concurrency=2).complete([f"p{i}" for i in range(6)], 4)
    lines = [r.getMessage() for r in caplog.records if "requests answered (" in r.getMessage()]
    assert [int(line.split(": ")[1].split(" / ")[0]) for line in lines] == [1, 2, 3, 4, 5]
    assert all(" / 6 requests answered" in line and "left)" in line and url in line for line in lines)
