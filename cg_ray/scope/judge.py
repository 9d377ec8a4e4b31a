"""The paper's way to a benchmark's scope: an LLM judge keeps, of the concepts a benchmark tests less than
its reference, those within what the benchmark intends to test (competency-gaps, Appendix E.2;
`cg-ray scope --judge-model`).

The candidates of a benchmark are the reference method's gaps (`ReferenceComparison.gaps`) and, with
`include_missing`, the concepts in the reference's use that it never fires on at all. Each is shown to the
judge with its label (or `cg-ray describe`'s description) and up to three reference texts where it fires most,
beside the benchmark's name and a one-paragraph statement of what it intends to test, which the user gives:
a judge told only a benchmark's name would judge its idea of that name. `batch` concepts go into one request
(as `cg-ray explain` batches its judge), and the answer is one verdict per concept, `{"concept": id,
"in_scope": true | false, "reason": "..."}`, asked as a JSON-schema `response_format` where the completer
takes one. An answer is read strictly (a ```json fence and text around the JSON aside): a concept without
exactly one readable verdict in its request's answer — unparsable JSON, `in_scope` not a JSON boolean, the
concept left out or answered twice differently — has a null verdict, counted as unreadable, never guessed.

The client is the one of `cg-ray explain`: an OpenAI-compatible endpoint (`describe.endpoint`: retries,
concurrency, usage, the key only in a header), or — without an endpoint — the project's generation backend,
which the caller builds (`describe.completers.make_completer`; the CLI does), since this layer may not reach
Ray or a model runtime (pyproject.toml, "metrics and profile stay pure"). For the same reason the two
completer protocols are restated here rather than imported from `describe.judging`: they are structural, so
the same objects satisfy both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cg_ray.describe.config import ExplainConfig
from cg_ray.errors import ConfigError
from cg_ray.generation.completer import Completer, StructuredCompleter
from cg_ray.scope.judge_prompt import Candidate, Verdict, answer_tokens, parse_verdicts, scope_prompt, verdict_format
from cg_ray.scope.reference import ReferenceComparison

JUDGE_BATCH = 5  # concepts per request


class ScopeJudge(BaseModel):
    """Who judges scope and against what: the model (at `endpoint`, else on the generation backend), the
    key's environment variable, and per benchmark what it intends to test."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    model: str = Field(min_length=1)
    endpoint: str | None = Field(None, description="OpenAI-compatible base URL; None: the generation backend")
    api_key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    descriptions: dict[str, str] = Field(default_factory=dict, description="benchmark -> what it intends to test")
    batch: int = Field(JUDGE_BATCH, ge=1, le=20, description="concepts per request")
    include_missing: bool = Field(False, description="also judge concepts in the reference's use it never fires")
    concurrency: int = Field(8, ge=1, le=256)
    timeout_s: float = Field(60.0, gt=0)
    retries: int = Field(5, ge=0, le=20)
    seed: int = 0
    structured: Literal["auto", "on", "off"] = "auto"
    backend: str = Field("vllm", description="generation backend without an endpoint (vllm | hf | fake)")

    @model_validator(mode="after")
    def _valid(self) -> ScopeJudge:
        if self.api_key_env is not None and self.endpoint is None:
            raise ValueError("an API key variable (--judge-api-key-env) needs an endpoint (--judge-endpoint)")
        for bench, text in self.descriptions.items():
            if not text.strip():
                raise ValueError(f"the description of {bench!r} is empty")
        try:
            self.explain_config()  # the endpoint URL checked as `cg-ray explain` checks it
        except ValidationError as exc:
            raise ValueError(str(exc.errors()[0]["msg"]).removeprefix("Value error, ")) from None
        return self

    def explain_config(self) -> ExplainConfig:
        """The client's settings, as `cg-ray explain`'s completers take them."""
        return ExplainConfig(
            model=self.model,
            endpoint=self.endpoint,
            api_key_env=self.api_key_env,
            backend=self.backend,
            concurrency=self.concurrency,
            timeout_s=self.timeout_s,
            retries=self.retries,
            seed=self.seed,
            judge_structured=self.structured,
        )

    def require_descriptions(self, benchmarks: Sequence[str]) -> None:
        """Refuse, before any request, benchmarks the judge would have to judge without their intended scope."""
        missing = [b for b in benchmarks if b not in self.descriptions]
        if missing:
            raise ConfigError(
                f"the scope judge needs what each benchmark intends to test: no description of "
                f"{', '.join(repr(b) for b in missing)} (--description BENCH=TEXT or --descriptions FILE)"
            )

    def who(self) -> dict[str, Any]:
        """The judge as the summary records it: names and URL, never a key."""
        return {
            "model": self.model,
            "endpoint": self.endpoint,
            "backend": None if self.endpoint else self.backend,
            "api_key_env": self.api_key_env,
            "batch": self.batch,
            "candidates": "gaps + missing in the reference's use" if self.include_missing else "gaps",
        }


@dataclass
class JudgeCounts:
    """Per benchmark: concepts asked about and their verdicts, requests sent, tokens where the client counts."""

    asked: int = 0
    in_scope: int = 0
    out_of_scope: int = 0
    unreadable: int = 0
    requests: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    structured: str = "off"  # used | refused (by the server, then asked without) | off (not asked)


@dataclass
class BenchmarkJudgement:
    benchmark: str
    description: str
    verdicts: dict[int, Verdict] = field(default_factory=dict)
    counts: JudgeCounts = field(default_factory=JudgeCounts)
    answers: list[str] = field(default_factory=list)  # raw, one per request

    def as_dict(self) -> dict[str, Any]:
        return {"description": self.description, **asdict(self.counts)}


def candidates_of(cmp: ReferenceComparison, include_missing: bool, only: set[int] | None = None) -> list[int]:
    """The concepts to judge for one benchmark: its gaps (`only` those, where given: one per theme), most
    confident first, then (`include_missing`) the concepts in the reference's use it never fires on that are
    not gaps, the reference's most used first."""
    out = [int(c) for c in cmp.gaps["concept"] if only is None or int(c) in only]
    if include_missing:
        t = cmp.table
        extra = t[t["in_reference"] & t["missing"] & ~t["gap"]].sort_values("reference_share", ascending=False)
        out += [int(c) for c in extra["concept"]]
    return out


def _usage(completer: object) -> tuple[int, int] | None:
    usage = getattr(completer, "usage", None)
    if usage is None or not hasattr(usage, "prompt_tokens"):
        return None
    return int(usage.prompt_tokens), int(usage.completion_tokens)


def _asks_structured(completer: object) -> bool:
    config = getattr(completer, "config", None)
    return isinstance(config, ExplainConfig) and config.judge_structured != "off"


def judge_benchmark(
    completer: Completer,
    benchmark: str,
    description: str,
    reference: str,
    candidates: Sequence[Candidate],
    batch: int = JUDGE_BATCH,
) -> BenchmarkJudgement:
    """One benchmark's candidates judged, `batch` per request, in their order."""
    out = BenchmarkJudgement(benchmark, description)
    out.counts.asked = len(candidates)
    if not candidates:
        return out
    batches = [list(candidates[i : i + batch]) for i in range(0, len(candidates), batch)]
    prompts = [scope_prompt(benchmark, description, reference, b) for b in batches]
    max_tokens = answer_tokens(max(len(b) for b in batches))
    before = _usage(completer)
    if isinstance(completer, StructuredCompleter) and completer.structured:
        formats: list[dict[str, Any] | None] = [verdict_format([c.concept for c in b]) for b in batches]
        answers = completer.complete(prompts, max_tokens, formats)
        out.counts.structured = "used" if completer.structured else "refused"
    else:
        answers = completer.complete(prompts, max_tokens)
        if isinstance(completer, StructuredCompleter) and _asks_structured(completer):
            out.counts.structured = "refused"  # by the server, for an earlier benchmark
    after = _usage(completer)
    if before is not None and after is not None:
        out.counts.prompt_tokens = after[0] - before[0]
        out.counts.completion_tokens = after[1] - before[1]
    out.counts.requests = len(prompts)
    out.answers = list(answers)
    for b, answer in zip(batches, answers, strict=True):
        got = parse_verdicts(answer, [c.concept for c in b])
        for c in b:
            out.verdicts[c.concept] = got.get(c.concept, Verdict(None))
    values = [v.in_scope for v in out.verdicts.values()]
    out.counts.in_scope = values.count(True)
    out.counts.out_of_scope = values.count(False)
    out.counts.unreadable = values.count(None)
    return out


def reference_words(reference: str) -> str:
    """How the prompt names the reference: real use, or sibling benchmarks of the same task."""
    parts = reference.split("+")
    if all(p.startswith("ref:") for p in parts):
        return "the prompts the model meets in real use"
    if not any(p.startswith("ref:") for p in parts):
        return "sibling benchmarks of the same task"
    return "sibling benchmarks and the prompts the model meets in real use"


def judge_scope(
    comparisons: Sequence[ReferenceComparison],
    labels: Mapping[int, str],
    examples: Mapping[int, Sequence[str]],
    settings: ScopeJudge,
    completer: Completer,
    only: Mapping[str, set[int]] | None = None,
) -> dict[str, BenchmarkJudgement]:
    """Every benchmark's candidates judged (one `complete` call per benchmark, its batches concurrent where
    the client is), so that each benchmark's requests and tokens are its own. `only`: per benchmark, the gaps
    to ask about (its themes' representatives: one question per omission)."""
    out: dict[str, BenchmarkJudgement] = {}
    for cmp in comparisons:
        mine = None if only is None else only.get(cmp.benchmark)
        cands = [
            Candidate(c, labels.get(c), tuple(examples.get(c, ())))
            for c in candidates_of(cmp, settings.include_missing, mine)
        ]
        out[cmp.benchmark] = judge_benchmark(
            completer,
            cmp.benchmark,
            settings.descriptions[cmp.benchmark],
            reference_words(cmp.reference),
            cands,
            settings.batch,
        )
    return out


CompleterFactory = Callable[[ExplainConfig], Completer]


def endpoint_completer(config: ExplainConfig) -> Completer:
    """The endpoint's client of `cg-ray explain`, checked (`GET /models`) before any judge request."""
    if config.endpoint is None:
        raise ConfigError(
            f"the scope judge {config.model!r} has no endpoint: name one (--judge-endpoint URL), or run it on the "
            "generation backend through `cg-ray scope`, which builds that client"
        )
    from cg_ray.describe.endpoint import EndpointCompleter

    completer = EndpointCompleter(config, role="scope judge")
    try:
        completer.check()
    except BaseException:
        completer.close()
        raise
    return completer


def open_judge(settings: ScopeJudge, factory: CompleterFactory | None = None) -> Completer:
    return (factory or endpoint_completer)(settings.explain_config())


def close(completer: object) -> None:
    fn = getattr(completer, "close", None)
    if callable(fn):
        fn()


def usage_report(completer: object) -> dict[str, Any] | None:
    """The endpoint's requests, retries, failures and tokens (`EndpointCompleter.report`: never a key)."""
    fn = getattr(completer, "report", None)
    return fn() if callable(fn) else None
