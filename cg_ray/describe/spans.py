"""From per-token activations to what a reader sees: the activating span of an example (character offsets
for highlighting), a snippet around it, and the concept's top tokens and spans in the suite."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from cg_ray.activations.token_detail import TokenDetail

SPAN_FRACTION = 0.3  # tokens at ≥ 30% of the row's maximum activation, next to the maximum, form the span
MAX_SPAN_TOKENS = 6
SNIPPET_CHARS = 240


@dataclass(frozen=True)
class Span:
    start: int  # character offsets in the text
    end: int
    max_act: float
    text: str


def activating_span(detail: TokenDetail, column: int) -> Span | None:
    acts = detail.acts[:, column]
    if not (acts > 0).any():
        return None
    peak = int(np.argmax(acts))
    cut = SPAN_FRACTION * float(acts[peak])
    lo = hi = peak
    while lo > 0 and acts[lo - 1] >= cut and hi - lo + 1 < MAX_SPAN_TOKENS:
        lo -= 1
    while hi + 1 < acts.size and acts[hi + 1] >= cut and hi - lo + 1 < MAX_SPAN_TOKENS:
        hi += 1
    start, end = detail.offsets[lo][0], detail.offsets[hi][1]
    return Span(start, end, float(acts[peak]), detail.text[start:end])


def snippet(text: str, span: Span | None, width: int = SNIPPET_CHARS) -> tuple[str, int | None, int | None]:
    """A window of `text` around the span, and the span's offsets within the window (None without a span)."""
    if span is None:
        cut = text[:width]
        return cut + ("…" if len(text) > width else ""), None, None
    half = max(0, (width - (span.end - span.start)) // 2)
    lo = max(0, span.start - half)
    hi = min(len(text), max(span.end + half, lo + width))
    prefix = "…" if lo > 0 else ""
    window = prefix + text[lo:hi] + ("…" if hi < len(text) else "")
    return window, span.start - lo + len(prefix), span.end - lo + len(prefix)


def marked(text: str, start: int | None, end: int | None, left: str = "[[", right: str = "]]") -> str:
    if start is None or end is None:
        return text
    return f"{text[:start]}{left}{text[start:end]}{right}{text[end:]}"


def top_tokens(details: list[TokenDetail], column: int, n: int = 5) -> list[str]:
    """Tokens carrying most of the concept's activation over these rows (raw token text)."""
    mass: dict[str, float] = defaultdict(float)
    for d in details:
        acts = d.acts[:, column]
        for j in np.flatnonzero(acts > 0):
            mass[d.tokens[j]] += float(acts[j])
    return [t for t, _ in sorted(mass.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def top_spans(details: list[TokenDetail], column: int, n: int = 5) -> list[str]:
    """The activating spans, most activation first (identical spans merged, whitespace-normalised)."""
    mass: dict[str, float] = defaultdict(float)
    for d in details:
        span = activating_span(d, column)
        if span is not None and span.text.strip():
            mass[" ".join(span.text.split())] += span.max_act
    return [t for t, _ in sorted(mass.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]
