"""A scope of an analysis' run (`cg-ray scope`, docs/method.md "Benchmark gaps in scope") made over REST.

The request is checked once, before anything is read or sent: the rule's values (`ScopeRule`), the judge's
endpoint and key variable against the service's `scope:` settings, and the judge's settings (`ScopeJudge`,
with the service's concurrency, timeout and retries). Then `run_scope` runs in the request: sibling
references are seconds of numpy; a judge is at most `scope.max_judge_requests` requests. Its own errors (an
unknown benchmark, no reference, a benchmark named as both, a benchmark without a description) are the
request's 422 with the scope's message, nothing written; an endpoint that fails is a 502. One scope of an
analysis runs at a time (a second is a 409), since a scope merges with the run's earlier ones.
"""

from __future__ import annotations

import contextlib
import fcntl
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cg_ray.artifacts.layout import RunDir
from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.endpoint import EndpointError
from cg_ray.errors import ConfigError, InputError
from cg_ray.report.documents import clean
from cg_ray.report.refresh import refresh_report
from cg_ray.report.scope import scope_view
from cg_ray.scope.judge import Completer, CompleterFactory, ScopeJudge, endpoint_completer
from cg_ray.scope.publish import run_scope
from cg_ray.scope.reference import ScopeRule
from cg_ray.scope.run import ScopeRequest
from cg_ray.serve.api_types import ScopeRequestBody
from cg_ray.serve.errors import api_error
from cg_ray.serve.redact import MAX_CHARS, scrub_paths
from cg_ray.serve.settings import ScopeSettings

LOCK = ".scope.lock"  # in the analysis' folder: held while one scope of it runs
_CLI_HINT = re.compile(r"\s*\(--[^)]*\)")  # "(--reference)", "(--description BENCH=TEXT or …)": the CLI's words


class JudgeOverLimit(Exception):
    """The judge would send more requests than the service allows one scope."""


def allowed(url: str, endpoints: Sequence[str]) -> bool:
    return any(url == a or url.startswith(a.rstrip("/") + "/") for a in endpoints)


def scope_rule(body: ScopeRequestBody) -> ScopeRule:
    fields = ("method", "min_share", "margin", "ratio", "density", "fdr")
    given = {k: getattr(body, k) for k in fields if getattr(body, k) is not None}
    try:
        return ScopeRule(**given)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"]))
        raise api_error(422, f"{where}: {first['msg']}", field=where) from None


def scope_judge(body: ScopeRequestBody, settings: ScopeSettings) -> ScopeJudge | None:
    """The request's judge, refused (422, before any request is sent) unless its endpoint and key variable are
    the service's to allow; its concurrency, timeout and retries are the service's."""
    if body.judge is None:
        return None
    j = body.judge
    if not allowed(j.endpoint, settings.endpoints):
        said = ", ".join(settings.endpoints) or "none: this service allows no scope judge (its scope.endpoints)"
        raise api_error(422, f"judge.endpoint: not an endpoint this service allows ({said})", field="judge.endpoint")
    if j.api_key_env is not None and j.api_key_env not in settings.key_envs:
        raise api_error(
            422,
            f"judge.api_key_env: {j.api_key_env!r} is not a key variable this service allows",
            field="judge.api_key_env",
        )
    try:
        return ScopeJudge(
            model=j.model,
            endpoint=j.endpoint,
            api_key_env=j.api_key_env,
            descriptions=j.descriptions,
            batch=j.batch,
            include_missing=j.include_missing,
            concurrency=settings.concurrency,
            timeout_s=settings.timeout_s,
            retries=settings.retries,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(["judge", *map(str, first["loc"])])
        said = str(first["msg"]).removeprefix("Value error, ")
        raise api_error(422, f"{where}: {_CLI_HINT.sub('', said)}", field=where) from None


class CappedJudge:
    """The endpoint's client, refusing a benchmark's batch of requests that would take the scope past `cap`
    (before any of that batch is sent); everything else is the client's own (structured outputs, usage)."""

    def __init__(self, inner: Completer, cap: int) -> None:
        self.inner = inner
        self.cap = cap
        self.sent = 0

    @property
    def structured(self) -> bool:
        return bool(getattr(self.inner, "structured", False))

    def __getattr__(self, name: str) -> Any:  # config, usage, report, close
        return getattr(self.inner, name)

    def complete(
        self, prompts: Sequence[str], max_tokens: int, formats: Sequence[dict[str, Any] | None] | None = None
    ) -> list[str]:
        if self.sent + len(prompts) > self.cap:
            raise JudgeOverLimit(
                f"judge.batch: the judge would send {self.sent + len(prompts)} or more requests, over this "
                f"service's {self.cap} per scope (scope.max_judge_requests): raise judge.batch, or scope fewer "
                "benchmarks at once"
            )
        self.sent += len(prompts)
        if formats is None:
            return self.inner.complete(prompts, max_tokens)
        return self.inner.complete(prompts, max_tokens, formats)  # type: ignore[call-arg]


def capped_client(cap: int) -> CompleterFactory:
    def make(config: ExplainConfig) -> Completer:
        return CappedJudge(endpoint_completer(config), cap)

    return make


def _field(message: str, body: ScopeRequestBody) -> str | None:
    """The body's field a scope error is about."""
    if message.startswith("no benchmark '"):
        name = message.removeprefix("no benchmark '").split("'", 1)[0]
        return "benchmarks" if name in body.benchmarks else "references"
    if "reference" in message:
        return "references"
    if "description" in message:
        return "judge.descriptions"
    return None


@contextlib.contextmanager
def one_at_a_time(folder: Path) -> Iterator[None]:
    """Held while this analysis' scope runs; a second scope of it meanwhile is a 409 (an advisory flock)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK, "a", encoding="utf-8") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise api_error(409, "a scope of this analysis is running: retry when it has finished") from None
        yield


def make_scope(
    run: RunDir, folder: Path, body: ScopeRequestBody, rule: ScopeRule, judge: ScopeJudge | None, cap: int
) -> dict[str, Any]:
    """Run the scope (nothing written unless every step succeeds), refresh the run's report, and return the
    view; the scope's own errors become the request's, with no server path in them."""
    req = ScopeRequest(
        run=run.path,
        benchmarks=tuple(body.benchmarks),
        references=tuple(body.references),
        rule=rule,
        judge=judge,
        suite=body.suite,
    )
    with one_at_a_time(folder):
        try:
            run_scope(req, capped_client(cap))
        except JudgeOverLimit as exc:
            raise api_error(422, str(exc), field="judge.batch") from None
        except EndpointError as exc:
            raise api_error(502, f"the scope judge: {scrub_paths(str(exc))[:MAX_CHARS]}") from None
        except (InputError, ConfigError) as exc:
            said = exc.reason if isinstance(exc, InputError) else str(exc)
            said = scrub_paths(_CLI_HINT.sub("", said))[:MAX_CHARS]
            raise api_error(422, said, field=_field(said, body)) from None
        refresh_report(run)
    view = scope_view(run)
    assert view is not None  # just written
    return clean(view)


def view_of(run: RunDir) -> dict[str, Any] | None:
    view = scope_view(run)
    return None if view is None else clean(view)
