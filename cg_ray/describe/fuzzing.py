"""Fuzzing, the second score of `cg-ray explain` (as in Delphi, Paulo et al. 2024): held-out rows that
exhibit the concept are shown with a span marked `[[…]]` — their activating span (read token by token with
the run's reader, as `cg-ray describe` reads its top rows) or, as the wrong answer, as many words elsewhere
in the same snippet — and the judge says whether the marked words match the description. Detection asks
whether a text has the concept; fuzzing asks whether the description names the right part of it, and
breaks ties in detection.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from cg_ray.describe.spans import activating_span, marked, snippet

if TYPE_CHECKING:
    from cg_ray.describe.run import Analysis, DescribeOptions

log = logging.getLogger(__name__)

# (snippet, span start, span end) of a row's activating span, per (concept, row)
SpanTexts = dict[tuple[int, int], tuple[str, int, int]]
SpanReader = Callable[["Analysis", Mapping[int, Sequence[int]]], SpanTexts]

_WORD = re.compile(r"\S+")


def wrong_marking(text: str, start: int, end: int, rng: np.random.Generator) -> str | None:
    """`text` with as many words as the true span covers marked elsewhere (not overlapping it); None when the
    snippet has no room for that."""
    words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    inside = [i for i, (a, b) in enumerate(words) if a < end and b > start]
    n = max(1, len(inside))
    starts = [
        i for i in range(len(words) - n + 1) if words[i + n - 1][1] <= start or words[i][0] >= end
    ]  # runs of n words entirely before or after the span
    if not starts:
        return None
    i = int(rng.choice(starts))
    return marked(text, words[i][0], words[i + n - 1][1])


def fuzz_pairs(spans: SpanTexts, concept: int, rows: Sequence[int], seed: int) -> tuple[list[str], list[str]]:
    """Correctly and wrongly marked snippets of the concept's held-out active rows (seeded)."""
    right, wrong = [], []
    for r in rows:
        got = spans.get((concept, r))
        if got is None:
            continue
        text, start, end = got
        w = wrong_marking(text, start, end, np.random.default_rng([seed, concept, r]))
        if w is None:
            continue
        right.append(marked(text, start, end))
        wrong.append(w)
    return right, wrong


def reader_spans(options: DescribeOptions) -> SpanReader:
    """Activating spans of held-out rows, re-read with the run's reader; {} where that is not possible."""

    def read(a: Analysis, rows: Mapping[int, Sequence[int]]) -> SpanTexts:
        if not options.tokens or not any(rows.values()):
            return {}
        from cg_ray.describe.rundir import read_settings, row_text

        settings = read_settings(a.run)
        if isinstance(settings, str):
            log.info("no fuzzing: %s", settings)
            return {}
        from cg_ray.activations.config import ReaderConfig
        from cg_ray.activations.reader import ConceptReader
        from cg_ray.activations.token_detail import read_tokens

        config = dict(settings.reader, **options.reader_overrides)
        if options.dtype:
            config["dtype"] = options.dtype
        reader = ConceptReader.from_config(ReaderConfig.model_validate(config))
        if reader.d_sae != a.run.rows.d_sae:
            log.info("no fuzzing: the reader's d_sae is not the run's")
            return {}
        concepts = list(rows)
        out: SpanTexts = {}
        for r in sorted({r for rs in rows.values() for r in rs}):
            composed = row_text(a.records[r], settings, reader.tokenizer)
            if composed is None:
                continue
            detail = read_tokens(reader, [composed[0]], concepts, add_special_tokens=composed[1])[0]
            for j, c in enumerate(concepts):
                if r not in rows[c]:
                    continue
                span = activating_span(detail, j)
                if span is not None:
                    text, start, end = snippet(detail.text, span)
                    if start is not None and end is not None:
                        out[(c, r)] = (text, start, end)
        return out

    return read
