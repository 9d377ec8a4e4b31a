"""An LLM that completes prompts, as the explainers (`cg_ray.describe`), the scope judge (`cg_ray.scope`) and
the probe's writers call one: the protocols live here, below all of them, so each states the same interface
instead of a copy of its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable


class Completer(Protocol):
    """Answers in the prompts' order."""

    def complete(self, prompts: Sequence[str], max_tokens: int) -> list[str]: ...


@runtime_checkable
class StructuredCompleter(Protocol):
    """A completer that can constrain answers to a JSON schema (the endpoint: a `response_format` per prompt),
    while `structured` holds."""

    structured: bool

    def complete(
        self, prompts: Sequence[str], max_tokens: int, formats: Sequence[dict[str, Any] | None] | None = None
    ) -> list[str]: ...
