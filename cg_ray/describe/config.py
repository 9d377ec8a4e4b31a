"""Settings of `cg-ray describe` / `cg-ray explain` that a run config can carry (`describe:`, `explain:`).

Kept apart from the heavy modules so that the run config validates them without importing them.
"""

from __future__ import annotations

from typing import Any, Final, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# Concepts per ranking table of the report; the run's describe step describes as many, so that every
# concept the report lists reads as a sentence.
REPORT_TOP: Final = 20
# Prompt tokens a batched judge prompt spends besides its examples (instructions, description, numbering),
# and each example besides its window (quotes, "Example i:"), for the check that a batch fits the context.
JUDGE_PROMPT_OVERHEAD: Final = 160
JUDGE_EXAMPLE_OVERHEAD: Final = 8


class DescribeStepConfig(BaseModel):
    """`cg-ray run` describes the run's weak / under-covered concepts after publishing it (on by default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    top: int = Field(REPORT_TOP, ge=1, description="worst-by-X_model and least-covered concepts, each")
    examples: int = Field(5, ge=1, description="top rows per concept")
    tokens: bool = Field(True, description="re-read the top rows token by token to mark the activating span")


class ExplainConfig(BaseModel):
    """The explainer and judge of `cg-ray explain`: a generation backend (`backend`, `model`) or, when
    `endpoint` is set, an OpenAI-compatible chat-completions API serving `model` (docs/explainer.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)  # a pasted key stays out

    model: str = "smollm2-135m-instruct"
    backend: str = Field("vllm", description="generation backend: vllm | hf | fake (unused with `endpoint`)")
    endpoint: str | None = Field(None, description="OpenAI-compatible base URL, e.g. http://host:8000/v1")
    api_key_env: str | None = Field(
        None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="environment variable holding the endpoint's key"
    )
    concurrency: int = Field(8, ge=1, le=256, description="requests in flight at once (endpoint)")
    timeout_s: float = Field(60.0, gt=0, description="per-request timeout (endpoint)")
    retries: int = Field(5, ge=0, le=20, description="retries of a request on 429 / 5xx / timeouts (endpoint)")
    price_in: float | None = Field(None, ge=0, description="USD per million prompt tokens, for the cost line")
    price_out: float | None = Field(None, ge=0, description="USD per million completion tokens")
    dtype: Literal["float32", "bfloat16", "auto"] = "auto"  # resolved from the hardware (cg_ray.hardware)
    engine: dict[str, Any] = Field(default_factory=dict, description="vLLM engine settings of the backend")
    resources: dict[str, Any] = Field(default_factory=dict, description="Ray resources of the backend's stage")
    n_examples: int = Field(5, ge=1)
    n_detect: int | None = Field(
        None,
        ge=1,
        description="held-out rows per class (with / without the concept); None: 20 with an endpoint, else 6",
    )
    seed: int = 0
    explain_tokens: int = Field(60, ge=8)
    detect_tokens: int = Field(24, ge=2, description="room for a fenced JSON answer")
    fuzz: bool = Field(True, description="score fuzzing too (activating span marked) where spans can be read")
    name_themes: bool = Field(False, description="let the model name the themes (else enrichment / descriptions)")
    judge_batch: int = Field(5, ge=1, description="examples per judge prompt (Delphi: 5); 1 = one per request")
    window_tokens: int = Field(32, ge=8, le=512, description="tokens of a judged example around its activation")
    judge_context: int = Field(2048, ge=256, description="the judge's context in tokens (a batch must fit)")
    judge_endpoint: str | None = Field(None, description="the judge's base URL (default: the explainer's)")
    judge_model: str | None = Field(None, description="the judge's model (default: the explainer's)")
    judge_api_key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    judge_structured: Literal["auto", "on", "off"] = Field(
        "auto",
        description="ask an endpoint judge for a JSON-schema answer (response_format); auto: unless refused",
    )
    max_requests: int | None = Field(None, ge=1, description="refuse a plan over this many chat requests")
    tokenizer: str | None = Field(
        None,
        description="known model, HF dir or hub id whose tokenizer and chat template count the plan's prompt "
        "tokens (the served model's, ideally); None: 4 characters a token, which runs low on most text",
    )
    expected_rate: float = Field(1.0, gt=0, description="requests/s assumed by the time estimate of the plan")

    @field_validator("endpoint", "judge_endpoint")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        if url is None:
            return None
        parts = urlsplit(url)
        if parts.username or parts.password or parts.query:  # checked first: such a URL is never echoed
            raise ValueError("endpoint must not carry credentials or a query: name the key with api_key_env")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"endpoint must be an http(s) URL such as http://host:8000/v1, not {url!r}")
        return url.rstrip("/")

    @model_validator(mode="after")
    def _judge_fits(self) -> ExplainConfig:
        if self.judge_model is not None and not (self.judge_endpoint or self.endpoint):
            raise ValueError(
                "judge_model (--judge-model) needs an endpoint that serves it: --judge-endpoint URL (or --endpoint)"
            )
        if self.judge_batch > self.max_judge_batch:
            raise ValueError(
                f"judge_batch {self.judge_batch} (--judge-batch) is above the window budget: {self.judge_batch} "
                f"examples of {self.window_tokens} tokens do not fit the judge's {self.judge_context}-token context "
                f"(at most {self.max_judge_batch}); lower --judge-batch or --window-tokens"
            )
        return self

    @property
    def max_judge_batch(self) -> int:
        """The most examples of `window_tokens` one judge prompt and its answer fit in `judge_context`."""
        room = self.judge_context - JUDGE_PROMPT_OVERHEAD - self.detect_tokens
        per_example = self.window_tokens + JUDGE_EXAMPLE_OVERHEAD + 4  # + 4 answer tokens each
        return max(1, room // per_example)

    @property
    def separate_judge(self) -> bool:
        return any(v is not None for v in (self.judge_endpoint, self.judge_model, self.judge_api_key_env))

    def judge(self) -> ExplainConfig:
        """The judge's settings: the explainer's, with `judge_*` in place of endpoint / model / key."""
        if not self.separate_judge:
            return self
        endpoint = self.judge_endpoint or self.endpoint
        same_place = endpoint == self.endpoint
        return self.model_copy(
            update={
                "endpoint": endpoint,
                "model": self.judge_model or self.model,
                "api_key_env": self.judge_api_key_env or (self.api_key_env if same_place else None),
                "judge_endpoint": None,
                "judge_model": None,
                "judge_api_key_env": None,
            }
        )

    def who(self) -> dict[str, Any]:
        """The explainer and the judge as the manifest records them: names and URLs, never a key."""
        judge = self.judge()
        return {
            "explainer": {"model": self.model, "endpoint": self.endpoint, "api_key_env": self.api_key_env},
            "judge": {"model": judge.model, "endpoint": judge.endpoint, "api_key_env": judge.api_key_env},
        }

    @property
    def detect_rows(self) -> int:
        """Held-out rows per class: `n_detect`, else 20 against an endpoint (Delphi's default) and 6 offline."""
        if self.n_detect is not None:
            return self.n_detect
        return 20 if self.endpoint else 6

    @property
    def explainer(self) -> str:
        """Who explained: the model, and the endpoint it was reached at (never a key)."""
        return f"{self.model}@{self.endpoint}" if self.endpoint else self.model
