"""The endpoint answers `cg-ray explain` saves as they arrive (`describe/saved.py`): a second completer on the
same folder asks only what was not saved and counts the saved answers as they were paid; other settings
(max_tokens, model, response format) are other requests; a torn last line is asked again; `fresh` discards."""

from __future__ import annotations

from pathlib import Path

from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.endpoint import EndpointCompleter
from cg_ray.describe.saved import ANSWERS, Saved, SavedAnswers, request_key
from tests.describe.endpoint_server import Script, serve

PROMPTS = [f"prompt {i}" for i in range(6)]


def echo(prompt: str) -> str:
    return f"answer to {prompt}"


def _completer(url: str, saved: SavedAnswers, **kw: object) -> EndpointCompleter:
    config = ExplainConfig.model_validate({"endpoint": url, "model": "scripted-model", "concurrency": 2, **kw})
    completer = EndpointCompleter(config, backoff_s=0.0)
    completer.saved = saved
    return completer


def _posts(script: Script) -> list[str]:
    return [r["body"]["messages"][0]["content"] for r in script.requests if "body" in r]


def test_a_second_attempt_asks_only_what_was_not_saved_and_counts_the_rest_as_paid(tmp_path: Path) -> None:
    script = Script(echo)
    script.faults.append([("status", 503)])  # the first request is retried once: 2 requests for one answer
    with serve(script) as url:
        first = _completer(url, SavedAnswers(tmp_path))
        assert first.complete(PROMPTS[:4], 8) == [echo(p) for p in PROMPTS[:4]]
        again = _completer(url, SavedAnswers(tmp_path))
        assert again.complete(PROMPTS, 8) == [echo(p) for p in PROMPTS]
    assert sorted(_posts(script)[5:]) == PROMPTS[4:]  # 4 answers (5 requests) first; then only the 2 not saved
    one_go, resumed = first.report(), again.report()
    assert resumed["reused"] == 4 and resumed["answered"] == 6
    assert (resumed["requests"], resumed["retries"]) == (7, 1)  # 5 paid before + 2 now, the retry included
    assert resumed["prompt_tokens"] == one_go["prompt_tokens"] + 4  # "prompt 4" / "prompt 5": 2 words each


def test_other_settings_are_other_requests(tmp_path: Path) -> None:
    script = Script(echo)
    with serve(script) as url:
        _completer(url, SavedAnswers(tmp_path)).complete(PROMPTS[:2], 8)
        _completer(url, SavedAnswers(tmp_path)).complete(PROMPTS[:2], 16)  # max_tokens
        _completer(url, SavedAnswers(tmp_path), seed=1).complete(PROMPTS[:2], 8)
        _completer(url, SavedAnswers(tmp_path)).complete(PROMPTS[:2], 8, [{"type": "json_object"}] * 2)
        _completer(url, SavedAnswers(tmp_path)).complete(PROMPTS[:2], 8)  # the first settings again: saved
    assert len(_posts(script)) == 8


def test_a_torn_last_line_is_asked_again_and_fresh_discards(tmp_path: Path) -> None:
    saved = SavedAnswers(tmp_path)
    saved.add("a", Saved("kept", 1, 1, 1))
    with (tmp_path / ANSWERS).open("a") as fh:
        fh.write('{"key": "b", "content": "to')  # a kill mid-write
    again = SavedAnswers(tmp_path)
    assert again.found == 1 and again.take("b") is None
    assert again.take("a") == Saved("kept", 1, 1, 1) and again.take("a") is None  # each saved answer used once
    again.add("b", Saved("whole", 1, 1, 1))  # starts a line of its own
    assert again.take("b") is None  # saved by this attempt: not reused by it
    assert SavedAnswers(tmp_path).take("b") == Saved("whole", 1, 1, 1)
    assert SavedAnswers(tmp_path, fresh=True).found == 0 and not tmp_path.exists()
    assert request_key("http://h/v1", {"model": "m"}) != request_key("http://other/v1", {"model": "m"})
