"""An OpenAI-compatible chat-completions API as the explainer and judge of `cg-ray explain`.

`EndpointCompleter` has the `complete(prompts, max_tokens)` interface of the generation backend, so the
explanation, detection and fuzzing prompts, their parsing and the choice of a description are the same
whichever model answers. It speaks `POST {endpoint}/chat/completions` (a `vllm serve`, a hosted API) with
httpx, at most `concurrency` requests in flight, a timeout per request and tenacity's retries with
exponential backoff (and the server's `Retry-After`) on 429, 5xx, timeouts, dropped connections and
unreadable bodies. `check()` (`GET {endpoint}/models`) names the endpoint in a clear error on a wrong key,
a wrong URL or an unreachable host before any work. Greedy decoding (temperature 0) and a fixed `seed`.

The key is read from the environment variable `api_key_env` names and sent only as an `Authorization:
Bearer` header: it is never part of an error, a log line, a config dump or an artifact (tested).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.saved import Saved, SavedAnswers, request_key
from cg_ray.errors import ConfigError

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
MAX_RETRY_AFTER_S = 60.0


class EndpointError(ConfigError):
    """The endpoint cannot be used (wrong key, wrong URL or model, unreachable, every request failed)."""


class _Retryable(Exception):
    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


class _Failed(Exception):
    """One request that cannot succeed (e.g. HTTP 400 for a prompt over the context): its answer is ''."""

    def __init__(self, reason: str, status: int = 0) -> None:
        super().__init__(reason)
        self.status = status


@dataclass
class Usage:
    requests: int = 0  # sent, retries included
    answered: int = 0
    failed: int = 0  # given up after retries, or refused (4xx): answered with ''
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    reused: int = 0  # answers an earlier, killed attempt saved (paid then, counted above as then; not asked now)


# What a key or a token looks like in an error body: a bearer token, an "sk-…"-style key, a `key=…` /
# `"api_key": "…"` pair, or any long run of key characters (ids and hashes are masked too: a log loses little).
_SECRET = re.compile(
    r"(?i)(bearer\s+)[^\s\"',;]+"
    r"|((?:api[_-]?key|token|secret|password|authorization)[\"']?\s*[:=]\s*[\"']?)[^\s\"',;}]+"
    r"|\b(?:sk|pk|rk|hf|ghp|gho|xox[abp])[-_][A-Za-z0-9_\-]{8,}"
    r"|\b[A-Za-z0-9_\-]{32,}\b"
)


def redact(text: str, secrets: Sequence[str] = ()) -> str:
    """`text` with the known `secrets` and anything that looks like a key or a bearer token replaced by ***."""
    for s in secrets:
        text = text.replace(s, "***")
    return _SECRET.sub(lambda m: (m.group(1) or m.group(2) or "") + "***", text)


def read_key(config: ExplainConfig) -> str | None:
    if config.api_key_env is None:
        return None
    key = os.environ.get(config.api_key_env)
    if not key:
        raise ConfigError(f"explainer endpoint {config.endpoint}: environment variable {config.api_key_env} is not set")
    return key


def _retry_after(headers: Any) -> float | None:
    value = headers.get("retry-after")
    try:
        return None if value is None else max(0.0, min(float(value), MAX_RETRY_AFTER_S))
    except ValueError:
        return None  # an HTTP date: fall back to the backoff


class BatchProgress:
    """A log line every `every_s` seconds while a batch runs: done / total, rate and time left.

    A judge pass against a slow endpoint is thousands of requests and can take hours; without this the
    command is silent from the first request to the last."""

    def __init__(self, who: str, total: int, every_s: float = 30.0) -> None:
        self.who, self.total, self.every_s = who, total, every_s
        self.done = 0
        self.started = self.last = time.perf_counter()
        self._lock = threading.Lock()

    def tick(self) -> None:
        with self._lock:
            self.done += 1
            now = time.perf_counter()
            if now - self.last < self.every_s or self.done == self.total:
                return
            self.last = now
            rate = self.done / max(now - self.started, 1e-9)
            left_s = (self.total - self.done) / rate
        log.info(
            "%s: %d / %d requests answered (%.2f/s, about %s left)",
            self.who,
            self.done,
            self.total,
            rate,
            duration(left_s),
        )


def duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{seconds:.0f} s" if seconds < 90 else f"{minutes} min" if minutes < 90 else f"{minutes / 60:.1f} h"


class EndpointCompleter:
    def __init__(
        self, config: ExplainConfig, *, role: str = "explainer", backoff_s: float = 0.5, max_backoff_s: float = 20.0
    ) -> None:
        import httpx

        if config.endpoint is None:
            raise ConfigError("EndpointCompleter needs explain.endpoint")
        if logging.getLogger("httpx").level == logging.NOTSET:  # one INFO line per request otherwise
            logging.getLogger("httpx").setLevel(logging.WARNING)
        self.config = config
        self.role = role
        self.url = config.endpoint
        self.usage = Usage()
        self.saved: SavedAnswers | None = None  # answers taken from it when there, saved to it as they arrive
        self._lock = threading.Lock()
        self._backoff = (backoff_s, max_backoff_s)
        # Structured answers (response_format) are asked while this holds; `auto` clears it for the run when
        # the server refuses them.
        self.structured = config.judge_structured != "off"
        key = read_key(config)
        self._secrets = [key] if key else []
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(config.timeout_s, connect=min(10.0, config.timeout_s)),
            limits=httpx.Limits(max_connections=config.concurrency, max_keepalive_connections=config.concurrency),
            follow_redirects=False,
        )

    def close(self) -> None:
        self._client.close()

    def _who(self) -> str:
        return f"{self.role} endpoint {self.url}"

    def _fatal(self, status: int, what: str) -> EndpointError:
        if status in (401, 403):
            how = f"the key in ${self.config.api_key_env}" if self.config.api_key_env else "no key (--api-key-env)"
            return EndpointError(f"{self._who()} refused {what} with HTTP {status}: check {how}")
        return EndpointError(
            f"{self._who()}: {what} answered HTTP 404 (an OpenAI-compatible base URL usually ends in /v1; "
            f"is model {self.config.model!r} served there?)"
        )

    def _send(self, method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        """One attempt: the JSON body, or _Retryable / _Failed / EndpointError."""
        import httpx

        with self._lock:
            self.usage.requests += 1
        try:
            r = self._client.request(method, self.url + path, json=body)
        except httpx.TimeoutException:
            raise _Retryable(f"timed out after {self.config.timeout_s:g} s") from None
        except httpx.TransportError as exc:
            raise _Retryable(f"cannot connect ({type(exc).__name__})") from None
        if r.status_code in (401, 403, 404):
            raise self._fatal(r.status_code, f"{method} {path}")
        if r.status_code in RETRY_STATUS or r.status_code >= 500:
            raise _Retryable(f"HTTP {r.status_code}", _retry_after(r.headers))
        if r.status_code != 200:
            raise _Failed(f"HTTP {r.status_code}: {redact(r.text, self._secrets)[:200]!r}", r.status_code)
        try:
            data = r.json()
        except ValueError:
            raise _Retryable("the body is not JSON") from None
        if not isinstance(data, dict):
            raise _Retryable("the body is not a JSON object")
        return data

    def _retrying(self, method: str, path: str, body: dict[str, Any] | None, parse: Any) -> tuple[Any, int]:
        from tenacity import (
            RetryCallState,
            Retrying,
            retry_if_exception_type,
            stop_after_attempt,
            wait_exponential,
            wait_random,
        )

        first, most = self._backoff
        backoff = wait_exponential(multiplier=first, max=most) + wait_random(0, first)  # 1, 2, 4… × first

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            if isinstance(exc, _Retryable) and exc.retry_after is not None:
                return exc.retry_after
            return float(backoff(state))

        def count(state: RetryCallState) -> None:
            with self._lock:
                self.usage.retries += 1
            exc = state.outcome.exception() if state.outcome else None
            log.info("%s: %s %s: %s; retrying", self._who(), method, path, exc)

        result: Any = None
        attempts = 0
        for attempt in Retrying(
            stop=stop_after_attempt(self.config.retries + 1),
            wait=wait,
            retry=retry_if_exception_type(_Retryable),
            before_sleep=count,
            reraise=True,
        ):
            with attempt:
                attempts = attempt.retry_state.attempt_number
                result = parse(self._send(method, path, body))
        return result, attempts

    def check(self) -> None:
        """`GET {endpoint}/models`: reachable, the key accepted, the model served (when the list says)."""
        try:
            data, _ = self._retrying("GET", "/models", None, lambda d: d)
        except _Retryable as exc:
            raise EndpointError(f"{self._who()} is unreachable or failing: GET /models: {exc}") from None
        except _Failed as exc:
            raise EndpointError(f"{self._who()}: GET /models: {exc}") from None
        served = [str(m.get("id")) for m in data.get("data") or [] if isinstance(m, dict)]
        if served and self.config.model not in served:
            listed = ", ".join(served[:10]) + (" …" if len(served) > 10 else "")
            raise EndpointError(f"{self._who()} does not serve model {self.config.model!r} (it lists: {listed})")

    def _one(self, prompt: str, max_tokens: int, stop: threading.Event, fmt: dict[str, Any] | None = None) -> str:
        if stop.is_set():
            return ""
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "seed": self.config.seed,
        }
        structured = fmt is not None and self.structured
        if structured:
            body["response_format"] = fmt
        try:
            try:
                return self._chat(body)
            except _Failed as exc:
                if not (structured and exc.status in (400, 422)):
                    raise
                refused = exc
            # the schema or the prompt? The same request without the schema tells.
            if self.config.judge_structured == "on":
                raise EndpointError(
                    f"{self._who()} refused a structured answer (response_format json_schema, --judge-structured "
                    f"on): {refused}; use --judge-structured auto to judge on without it"
                )
            body.pop("response_format")
            content = self._chat(body)
            self._structured_refused(refused)
            return content
        except (_Retryable, _Failed) as exc:
            log.warning("%s: a request failed (%s); its answer counts as unreadable", self._who(), exc)
            with self._lock:
                self.usage.failed += 1
            return ""
        except EndpointError:
            stop.set()
            raise

    def _chat(self, body: dict[str, Any]) -> str:
        """One chat completion (retried, or saved earlier), its tokens counted; _Retryable / _Failed if none."""
        key = request_key(self.url, body) if self.saved is not None else ""
        kept = self.saved.take(key) if self.saved is not None else None
        if kept is not None:
            self._count(kept, reused=True)
            return kept.content

        def parse(data: dict[str, Any]) -> tuple[str, int, int]:
            try:
                content = data["choices"][0]["message"].get("content") or ""
            except (KeyError, IndexError, TypeError, AttributeError):
                raise _Retryable("no choices[0].message in the answer") from None
            got = data.get("usage")
            usage: dict[str, Any] = got if isinstance(got, dict) else {}
            return str(content), int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)

        (content, p_tok, c_tok), attempts = self._retrying("POST", "/chat/completions", body, parse)
        answer = Saved(content, p_tok, c_tok, attempts)
        if self.saved is not None:
            self.saved.add(key, answer)
        self._count(answer, reused=False)
        return answer.content

    def _count(self, answer: Saved, *, reused: bool) -> None:
        """An answer's tokens; a reused one's requests and retries too, as paid (`_send` counts the others')."""
        with self._lock:
            self.usage.answered += 1
            self.usage.prompt_tokens += answer.prompt_tokens
            self.usage.completion_tokens += answer.completion_tokens
            if reused:
                self.usage.reused += 1
                self.usage.requests += answer.requests
                self.usage.retries += answer.requests - 1

    def _structured_refused(self, exc: _Failed) -> None:
        with self._lock:
            if not self.structured:
                return
            self.structured = False
        log.warning(
            "%s refused structured answers (response_format json_schema: %s); judging on without them for this run "
            "(--judge-structured off does not ask)",
            self._who(),
            exc,
        )

    def complete(
        self, prompts: Sequence[str], max_tokens: int, formats: Sequence[dict[str, Any] | None] | None = None
    ) -> list[str]:
        """One chat completion per prompt, answers in the prompts' order; `formats`: a `response_format` per
        prompt (None: free text), sent while `structured` holds."""
        if not prompts:
            return []
        started, failed_before = time.perf_counter(), self.usage.failed
        stop = threading.Event()
        progress = BatchProgress(self._who(), len(prompts))
        fmts = formats if formats is not None else [None] * len(prompts)
        with ThreadPoolExecutor(max_workers=self.config.concurrency, thread_name_prefix="cgray-endpoint") as pool:
            futures = [pool.submit(self._one, p, max_tokens, stop, f) for p, f in zip(prompts, fmts, strict=True)]
            for fut in futures:
                fut.add_done_callback(lambda _f: progress.tick())
            answers = [fut.result() for fut in futures]
        self.usage.seconds += time.perf_counter() - started
        failed = self.usage.failed - failed_before
        if failed == len(prompts):
            raise EndpointError(f"{self._who()}: all {failed} requests failed (see the log for why)")
        log.info("%s: %d requests answered, %d failed", self._who(), len(prompts) - failed, failed)
        return answers

    def report(self) -> dict[str, Any]:
        """Requests, tokens and cost (USD where prices are given): for the output and themes.json."""
        out: dict[str, Any] = {
            "role": self.role,
            "endpoint": self.url,
            "model": self.config.model,
            **asdict(self.usage),
        }
        out["seconds"] = round(self.usage.seconds, 2)
        price_in, price_out = self.config.price_in, self.config.price_out
        if price_in is not None or price_out is not None:
            out["cost_usd"] = round(
                (self.usage.prompt_tokens * (price_in or 0.0) + self.usage.completion_tokens * (price_out or 0.0))
                / 1e6,
                6,
            )
        return out


def usage_line(report: dict[str, Any]) -> str:
    tokens = report["prompt_tokens"] + report["completion_tokens"]
    cost = (
        f"cost ${report['cost_usd']:.4f}"
        if "cost_usd" in report
        else "cost not priced (--price-in / --price-out USD per million tokens)"
    )
    return (
        f"{report.get('role', 'explainer')} {report['model']} at {report['endpoint']}: {report['answered']} answers, "
        f"{report['requests']} requests ({report['retries']} retries, {report['failed']} failed), "
        f"{tokens:,} tokens ({report['prompt_tokens']:,} prompt + {report['completion_tokens']:,} completion) "
        f"in {report['seconds']:.1f} s; {cost}"
    )
