"""The reader as the pipeline and the service see it: one Protocol that the real `ConceptReader` and the test fakes
satisfy, so the seam is typed and no caller asks `hasattr`."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from cg_ray.activations.config import DEFAULT_READER_FACTORY, ReaderConfig
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
        add_special_tokens: bool = True,
    ) -> Sequence[SparseConcepts]:
        """With `count_from` (a character offset per text), text[:offset] is context only; `span_tokens`
        caps the counted tokens; `pool` is how a row's token activations are summarised; `add_special_tokens`
        False for texts that hold them already (a chat template's)."""
        ...

    def describe(self) -> dict[str, Any]:
        """What the reader resolved to (model, SAE, dtype, device): recorded in the run's manifest."""
        ...

    def plan(self, total_tokens: int) -> None:
        """The tokens the whole job will read (for `compile: auto`); a reader with nothing to plan ignores it."""
        ...


def resolve(spec: str) -> Callable[..., object]:
    """Import "package.module:attr.attr" lazily (inside the actor, where the heavy imports belong)."""
    module_name, _, attr_path = spec.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr_path.split("."):
        obj = getattr(obj, part)
    factory: Callable[..., object] = obj  # what it builds is checked by the caller (reader_from_config)
    return factory


def reader_from_config(reader_config: ReaderConfig, factory: str = DEFAULT_READER_FACTORY) -> Reader:
    """The reader `factory` builds from a validated config (a plain mapping is refused: the config is
    validated once, where it is read, and travels typed). A factory whose product is not a `Reader` is
    named here, at the seam, rather than failing later inside a batch."""
    if not isinstance(reader_config, ReaderConfig):
        raise TypeError(f"reader_config must be a ReaderConfig, not {type(reader_config).__name__}")
    reader = resolve(factory)(reader_config)
    if not isinstance(reader, Reader):
        missing = [name for name in ("d_sae", "read", "describe", "plan") if not hasattr(reader, name)]
        raise TypeError(f"reader factory {factory!r} built a {type(reader).__name__}, not a Reader (lacks {missing})")
    return reader
