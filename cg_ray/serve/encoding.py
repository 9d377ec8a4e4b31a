"""What the service needs from the reader, as a small interface, and the in-process implementation.

The Ray Serve app wraps a remote encoder deployment behind the same interface
(`cg_ray.serve.app.RemoteEncoder`);
tests inject the in-process one with a fast reader.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from typing import Any, Literal, Protocol, TypeAlias, TypedDict

from cg_ray.activations.packing import SparseConcepts

# One text's sparse s̃, read-only: the reader's RowActs in process, the deployment's SparseRow over Serve.
Encoded: TypeAlias = SparseConcepts


class SpanOptions(TypedDict, total=False):
    """The reader's options of a span reading: pooling over the span, and at most this many span tokens."""

    pool: Literal["mean", "max"]
    span_tokens: int | None


class Encoder(Protocol):
    d_sae: int

    async def encode(self, texts: Sequence[str]) -> list[Encoded]: ...

    async def encode_spans(
        self, texts: Sequence[str], count_from: Sequence[int], options: SpanOptions
    ) -> list[Encoded]:
        """s̃ of text[offset:] only, text[:offset] read as context (diff-models: the response after its prompt)."""
        ...

    def describe(self) -> dict[str, Any]: ...


class LocalEncoder:
    """Runs a reader (anything with `read(texts)`, `d_sae`, `describe()`) in a worker thread. `reader_factory`:
    the "module:attr" that built it, when known; an analysis' manifest records it (`analyses.reader_record`)."""

    def __init__(self, reader: Any, reader_factory: str | None = None) -> None:
        self.reader = reader
        self.reader_factory = reader_factory
        self.d_sae = int(reader.d_sae)
        self._lock = asyncio.Lock()  # one forward pass at a time: the model is not re-entrant

    async def encode(self, texts: Sequence[str]) -> list[Encoded]:
        async with self._lock:
            return list(await asyncio.to_thread(self.reader.read, list(texts)))

    async def encode_spans(
        self, texts: Sequence[str], count_from: Sequence[int], options: SpanOptions
    ) -> list[Encoded]:
        async with self._lock:
            read = functools.partial(self.reader.read, count_from=list(count_from), **options)
            return list(await asyncio.to_thread(read, list(texts)))

    def describe(self) -> dict[str, Any]:
        return dict(self.reader.describe())
