"""An OpenAI-compatible endpoint (vLLM, TGI, SGLang, a hosted API) as the evaluated model, through Ray Data's
HTTP request processor (``ray.data.llm.HttpRequestProcessorConfig`` + ``build_processor``).

Each pending row becomes one ``POST {url}/chat/completions`` (``api: chat``: the prompt as a user message,
after the system prompt) or ``POST {url}/completions`` (``api: completions``: the prompt as it is), with the
run's sampling settings. Ray's stage runs a pool of ``concurrency`` actors, each sending its batch's requests
one after another (so at most ``concurrency`` are in flight, as the tests measure; ``qps`` caps their rate),
and retries 408 / 429 / 502 / 503 / 504, timeouts and dropped connections with exponential backoff; any other
refusal (a wrong key or model, a prompt over the context, a
500) fails the run naming the row and what the endpoint said, and nothing is published.

``check_endpoint`` asks ``GET {url}/models`` on the driver before any row is sent: a wrong URL, an
unreachable host, a refused key or a model the endpoint does not serve is a ConfigError at once.

The key: read from the environment variable ``api_key_env`` names and sent only as an ``Authorization:
Bearer`` header. It is not part of the config (only the variable's name is), so never of the manifest; it
reaches the HTTP actors inside their session factory, whose repr hides it, and no error or log line shows it.

Rows that already have an answer ride through untouched, as in the vLLM backend: `pre` marks them with
``__inference_error__``, which Ray's stage skips and its postprocess returns as is; `conform` drops the mark.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from cg_ray.errors import CgRayError, ConfigError
from cg_ray.generation.base import (
    CHARS_PER_TOKEN,
    N_OUTPUT_TOKENS,
    ConfiguredGenerator,
    conform,
    estimated_tokens,
    messages,
    output_row,
    token_counter,
)

if TYPE_CHECKING:
    import aiohttp
    import ray.data

    from cg_ray.benchmarks.rows import BenchmarkRow
    from cg_ray.generation.config import EndpointConfig, GenerationConfig

_SKIP: Final = "__inference_error__"  # Ray's HTTP stage passes a row on untouched where this is set
_PASSED: Final = "cg_ray: answered already, passed through"
# The HTTP actors and the pre/post maps wait on the network: they hold no CPU, so the pools the cluster fit
# counts (cg_ray.pipeline.cluster_fit: none for this backend) are all that competes for CPUs.
IO_STAGE_CPUS: Final = 0.0


class EndpointRefused(CgRayError):
    """The endpoint answered a row's request with an error (after the retries Ray's stage makes)."""


def endpoint_of(config: GenerationConfig) -> EndpointConfig:
    if config.endpoint is None:  # GenerationConfig refuses backend: endpoint without it; this is for mypy
        raise ConfigError("generation.endpoint is not set")
    return config.endpoint


def request_url(endpoint: EndpointConfig) -> str:
    return f"{endpoint.url.rstrip('/')}/{'chat/completions' if endpoint.api == 'chat' else 'completions'}"


def api_key(endpoint: EndpointConfig) -> str | None:
    """The key from the environment (None: no key configured); a configured variable that is unset is an error."""
    if endpoint.api_key_env is None:
        return None
    key = os.environ.get(endpoint.api_key_env)
    if not key:
        raise ConfigError(
            f"generation.endpoint.api_key_env: the environment variable {endpoint.api_key_env} is not set"
        )
    return key


def payload(prompt: str, config: GenerationConfig) -> dict[str, Any]:
    """The JSON body of one row's request."""
    endpoint = endpoint_of(config)
    body: dict[str, Any] = {"model": config.model, **config.sampling.vllm_params()}
    if endpoint.api == "chat":
        body["messages"] = messages(prompt, config.system_prompt)
    else:
        body["prompt"] = prompt
    return body


def check_endpoint(config: GenerationConfig) -> None:
    """`GET {url}/models` with the key: the endpoint answers, takes the key and serves `config.model`."""
    endpoint = endpoint_of(config)
    url = f"{endpoint.url.rstrip('/')}/models"
    key = api_key(endpoint)
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    where = f"generation endpoint {endpoint.url}"
    try:
        with urllib.request.urlopen(request, timeout=endpoint.timeout_s) as response:
            listed = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        hint = f" (the key from ${endpoint.api_key_env})" if exc.code in (401, 403) and key else ""
        raise ConfigError(f"{where} refused GET /models: HTTP {exc.code} {exc.reason}{hint}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConfigError(f"{where} cannot be reached: {reason}") from None
    except ValueError:
        raise ConfigError(f"{where}: GET /models did not answer JSON (is this an OpenAI-compatible URL?)") from None
    served = [str(m.get("id")) for m in listed.get("data", []) if isinstance(m, Mapping)]
    if served and config.model not in served:
        raise ConfigError(f"{where} does not serve model {config.model!r} (it serves: {', '.join(served)})")


class _Session:
    """Ray's session factory: an aiohttp session with the key as a default header and the request timeout.
    Built in each HTTP actor; its repr never shows the key."""

    def __init__(self, key: str | None, timeout_s: float) -> None:
        self._key = key
        self.timeout_s = timeout_s

    def __repr__(self) -> str:
        return f"_Session(key={'<hidden>' if self._key else None}, timeout_s={self.timeout_s})"

    def __call__(self) -> aiohttp.ClientSession:
        import aiohttp

        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        return aiohttp.ClientSession(headers=headers, timeout=aiohttp.ClientTimeout(total=self.timeout_s))


def _preprocess(config: GenerationConfig) -> Any:
    def pre(row: BenchmarkRow) -> dict[str, object]:
        if row["score"] is not None or row["response"] is not None:
            tokens: Any = row.get(N_OUTPUT_TOKENS)  # a judge pass's row carries its generation's count
            return {**output_row(row, None, tokens), _SKIP: _PASSED}
        # Set, empty: in a block beside marked rows an absent key comes back null, which marks the row too.
        return {"payload": payload(row["prompt"], config), _SKIP: ""}

    return pre


@dataclass(frozen=True)
class _Answer:
    text: str
    tokens: int | None


def parse_answer(body: object, api: str) -> _Answer:
    """The text and completion-token count of a response body; ValueError saying what the endpoint said."""
    if not isinstance(body, Mapping):
        raise ValueError(f"the answer is not a JSON object: {str(body)[:200]}")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        error = body.get("error", body.get("detail", body))
        message = error.get("message", error) if isinstance(error, Mapping) else error
        raise ValueError(f"the endpoint refused the request: {str(message)[:300]}")
    first = choices[0]
    text = (first.get("message") or {}).get("content") if api == "chat" else first.get("text")
    if not isinstance(text, str):
        text = ""  # e.g. a chat answer that is only a tool call, or content: null
    usage = body.get("usage")
    tokens = usage.get("completion_tokens") if isinstance(usage, Mapping) else None
    return _Answer(text, int(tokens) if isinstance(tokens, int) else None)


def _postprocess(config: GenerationConfig) -> Any:
    endpoint = endpoint_of(config)
    url = request_url(endpoint)

    def post(row: dict[str, Any]) -> dict[str, object]:
        try:
            answer = parse_answer(row.get("http_response"), endpoint.api)
        except ValueError as exc:
            raise EndpointRefused(
                f"{url}, row {row.get('row_id')!r} (benchmark {row.get('benchmark')!r}): {exc}"
            ) from None
        return output_row(row, answer.text, answer.tokens, config.model)

    return post


class EndpointGenerator(ConfiguredGenerator):
    def generate(self, ds: ray.data.Dataset) -> ray.data.Dataset:
        from ray.data.llm import HttpRequestProcessorConfig, build_processor

        endpoint = endpoint_of(self.config)
        check_endpoint(self.config)  # on the driver, before any row is sent
        res = self.config.resources
        processor = build_processor(
            HttpRequestProcessorConfig(
                url=request_url(endpoint),
                qps=endpoint.qps,
                max_retries=endpoint.retries,
                base_retry_wait_time_in_s=endpoint.retry_wait_s,
                session_factory=_Session(api_key(endpoint), endpoint.timeout_s),
                batch_size=res.batch_size,
                concurrency=(endpoint.concurrency, endpoint.concurrency),  # a fixed pool: they hold no CPU
                http_request_stage={"num_cpus": IO_STAGE_CPUS},
            ),
            preprocess=_preprocess(self.config),
            postprocess=_postprocess(self.config),
            preprocess_map_kwargs={"num_cpus": IO_STAGE_CPUS},
            postprocess_map_kwargs={"num_cpus": IO_STAGE_CPUS},
        )
        # One batch a block: each block's answers leave the stage (and reach the run's shard files) as its
        # batch returns, and the stage answers the blocks about in input order, so a kill loses the shards
        # in flight, not the whole input (tests/pipeline/test_run_kill.py). Ray's own actor pool is kept: one
        # with a task an actor at most stalled a run whose request was refused, once other runs had gone before.
        ds = ds.repartition(target_num_rows_per_block=res.batch_size)
        return processor(ds).map_batches(conform, batch_format="pyarrow", num_cpus=IO_STAGE_CPUS)


def _token_counter(config: GenerationConfig) -> tuple[Any, str]:
    """(prompt -> tokens of its request, how they were counted)."""
    endpoint = endpoint_of(config)
    if endpoint.tokenizer is None:
        system = config.system_prompt or ""
        return (lambda prompt: estimated_tokens(system + prompt)), (
            f"estimated at {CHARS_PER_TOKEN} characters per token; set generation.endpoint.tokenizer to count them"
        )
    count = token_counter(
        endpoint.tokenizer, config.system_prompt, chat=endpoint.api == "chat", setting="generation.endpoint.tokenizer"
    )
    return count, f"counted with the tokenizer of {endpoint.tokenizer}"


def dry_run(rows: Sequence[BenchmarkRow], config: GenerationConfig, *, examples: int = 2) -> str:
    """What `cg-ray run --dry-run` prints: the requests the pending rows would make and their tokens. Nothing
    is sent and no key is read (whether its variable is set is said)."""
    endpoint = endpoint_of(config)
    pending = [r for r in rows if r["score"] is None and r["response"] is None]
    count, how = _token_counter(config)
    prompt_tokens = sum(count(r["prompt"]) for r in pending)
    max_out = config.sampling.max_tokens
    key = "none"
    if endpoint.api_key_env is not None:
        state = "set" if os.environ.get(endpoint.api_key_env) else "NOT SET"
        key = f"Bearer <from ${endpoint.api_key_env}, {state}>"
    lines = [
        f"dry run: nothing sent. {len(pending):,} requests (of {len(rows):,} rows; the others have an answer) "
        f"to POST {request_url(endpoint)}, model {config.model!r}, {endpoint.concurrency} in flight at most",
        f"  prompt tokens: {prompt_tokens:,} ({how})",
        f"  output tokens: at most {len(pending):,} x {max_out} = {len(pending) * max_out:,} (sampling.max_tokens)",
        f"  Authorization: {key}",
    ]
    for row in pending[:examples]:
        lines.append(f"request for row {row['row_id']}:")
        lines.append(json.dumps(payload(row["prompt"], config), indent=2, ensure_ascii=False))
    return "\n".join(lines)
