"""The reader as the pipeline and the service see it: one Protocol that the real `ConceptReader` and the test fakes
satisfy, so the seam is typed and no caller asks `hasattr`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from cg_ray.activations.packing import SparseConcepts


@runtime_checkable
class Reader(Protocol):
    """Texts in, one sparse concept vector per text out."""

    @property
    def d_sae(self) -> int: ...

    def read(
        self,
        texts: Sequence[str],
        *,
        count_from: Sequence[int] | None = None,
        pool: Literal["mean", "max"] = "mean",
        span_tokens: int | None = None,
    ) -> Sequence[SparseConcepts]:
        """With `count_from` (a character offset per text), text[:offset] is context only; `span_tokens`
        caps the counted tokens; `pool` is how a row's token activations are summarised."""
        ...

    def describe(self) -> dict[str, Any]:
        """What the reader resolved to (model, SAE, dtype, device): recorded in the run's manifest."""
        ...

    def plan(self, total_tokens: int) -> None:
        """The tokens the whole job will read (for `compile: auto`); a reader with nothing to plan ignores it."""
        ...
