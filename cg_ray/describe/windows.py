"""The text a judge sees of a row: a window of about `window_tokens` tokens around the row's strongest
activation (as Delphi cuts its 32-token examples), not the row's first characters — a concept that fires
late in a long prompt is only visible around where it fires, and a task preamble would fill the rest.

A row without a re-read (no reader, `--no-tokens`, a row where the concept is not active) is shown as a
window of the same length in characters at a seeded place of its text, so that the judge cannot tell the
classes apart by length or by where the text starts.
"""

from __future__ import annotations

import re

import numpy as np

from cg_ray.activations.token_detail import TokenDetail
from cg_ray.describe.spans import activating_span

# (window text, span start, span end) of a row's activating span, per (concept, row)
Window = tuple[str, int, int]
ELLIPSIS = "…"
CHARS_PER_TOKEN = 4  # the usual English BPE figure, for a window without a tokenizer
_WORD = re.compile(r"\S+")


def token_window(detail: TokenDetail, column: int, tokens: int) -> Window | None:
    """About `tokens` tokens around the concept's peak in the row, its activating span's offsets in the window."""
    span = activating_span(detail, column)
    if span is None:
        return None
    n = len(detail.offsets)
    peak = int(np.argmax(detail.acts[:, column]))
    lo = max(0, min(peak - tokens // 2, n - tokens))
    hi = min(n, lo + tokens)
    start, end = detail.offsets[lo][0], detail.offsets[hi - 1][1]
    start, end = min(start, span.start), max(end, span.end)  # the whole span, even at a window's edge
    prefix = ELLIPSIS if start > 0 else ""
    text = prefix + detail.text[start:end] + (ELLIPSIS if end < len(detail.text) else "")
    return text, span.start - start + len(prefix), span.end - start + len(prefix)


def char_window(text: str, chars: int, rng: np.random.Generator) -> str:
    """A window of about `chars` characters at a seeded place of `text`, cut at word boundaries."""
    words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    if not words or len(text) <= chars:
        return text
    last = max(0, len(words) - 1)
    first = int(rng.integers(0, last + 1))
    while first > 0 and words[-1][1] - words[first][0] < chars:  # room to the end
        first -= 1
    end = first
    while end + 1 < len(words) and words[end + 1][1] - words[first][0] <= chars:
        end += 1
    lo, hi = words[first][0], words[end][1]
    return (ELLIPSIS if lo > 0 else "") + text[lo:hi] + (ELLIPSIS if hi < len(text) else "")


def window_chars(windows: list[str], tokens: int) -> int:
    """How long (characters) an unread row's window should be: the median of the read windows, else
    `tokens` × CHARS_PER_TOKEN."""
    if windows:
        return int(np.median([len(w) for w in windows]))
    return tokens * CHARS_PER_TOKEN
