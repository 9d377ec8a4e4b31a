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

from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.judging import Examples
from cg_ray.describe.prompts import MAX_TEXT_CHARS
from cg_ray.describe.spans import marked
from cg_ray.describe.windows import Window, char_window, token_window, window_chars

if TYPE_CHECKING:
    from cg_ray.describe.run import Analysis, DescribeOptions

log = logging.getLogger(__name__)

# (window, span start, span end) around a row's strongest activation of the concept, per (concept, row)
SpanTexts = dict[tuple[int, int], Window]
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


def held_out_examples(
    a: Analysis,
    pos: Sequence[int],
    neg: Sequence[int],
    windows: Mapping[int, Window],
    config: ExplainConfig,
    seed: Sequence[int],
) -> Examples:
    """Detection examples (windows of rows with the subject, unmarked; windows of as many characters at a
    seeded place of rows without it) and fuzzing examples (the activating span marked, or as many words
    elsewhere). Without any window (no reader) every row is shown from its start, as far as a prompt allows."""
    rng = np.random.default_rng(list(seed))
    read = [windows[r] for r in pos if r in windows]
    if not read:
        return Examples([a.text_of(r)[:MAX_TEXT_CHARS] for r in pos], [a.text_of(r)[:MAX_TEXT_CHARS] for r in neg])
    chars = window_chars([w[0] for w in read], config.window_tokens)
    positive = [windows[r][0] if r in windows else char_window(a.text_of(r), chars, rng) for r in pos]
    negative = [char_window(a.text_of(r), chars, rng) for r in neg]
    right, wrong = [], []
    if config.fuzz:
        for r in pos:
            if r not in windows:
                continue
            text, start, end = windows[r]
            w = wrong_marking(text, start, end, np.random.default_rng([*seed, r]))
            if w is not None:
                right.append(marked(text, start, end))
                wrong.append(w)
    return Examples(positive, negative, right, wrong)


def reader_spans(options: DescribeOptions, window_tokens: int = 32) -> SpanReader:
    """Windows of `window_tokens` around the strongest activation of rows (their activating span marked by
    offsets), re-read with the run's reader; {} where that is not possible."""

    def read(a: Analysis, rows: Mapping[int, Sequence[int]]) -> SpanTexts:
        if not options.tokens or not any(rows.values()):
            return {}
        from cg_ray.describe.rundir import read_settings, row_text

        settings = read_settings(a.run)
        if isinstance(settings, str):
            log.info("no windows and no fuzzing: %s", settings)
            return {}
        from cg_ray.activations.config import ReaderConfig
        from cg_ray.activations.reader import ConceptReader
        from cg_ray.activations.token_detail import read_tokens

        config = dict(settings.reader, **options.reader_overrides)
        if options.dtype:
            config["dtype"] = options.dtype
        reader = ConceptReader.from_config(ReaderConfig.model_validate(config))
        if reader.d_sae != a.run.rows.d_sae:
            log.info("no windows and no fuzzing: the reader's d_sae is not the run's")
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
                window = token_window(detail, j, window_tokens)
                if window is not None:
                    out[(c, r)] = window
        return out

    return read
