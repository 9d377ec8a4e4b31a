"""`cg-ray sae label`: one label per latent, built from its top-activating contexts.

For every latent we collect, over a labelling corpus, where it fires (window, position, token,
activation). Per latent the record keeps:
- the tokens and the bigram / trigram that carry most of its activation mass;
- several example contexts (strongest first, at most one per window) with the activating token «marked»;
- **context words**: words over-represented in the text around its strongest activations compared with
  the corpus, by a one-sided binomial test. They say what a punctuation or whitespace latent is about
  (`'\\n'` in Python code vs. in a poem), which single tokens cannot.

The label is a readable phrase: "line breaks, “```” in text about python, function, import" when context
words were found; otherwise the token list of the earlier labels (`',' | '.'`), which `cg-ray describe`
recognises as a weak, punctuation-only label. Dead latents get a label that says so.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Required, TypedDict

import numpy as np
import torch
from scipy.stats import binom

from cg_ray.activations.reader import ConceptReader
from cg_ray.describe.render import CONTEXT_MARKER, render_tokens
from cg_ray.sae_training.token_pass import iter_token_batches, make_windows

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

log = logging.getLogger(__name__)

DEAD_LABEL = "(inactive on the labelling corpus)"


@dataclass(frozen=True)
class LabelSettings:
    top_tokens: int = 3
    examples: int = 5  # contexts kept per latent, from distinct windows
    context_sites: int = 50  # strongest activations (distinct windows) whose surroundings are compared
    context_before: int = 24  # tokens before the activating one that count as its context
    context_after: int = 4
    context_words: int = 3
    min_context_share: float = 0.2  # a context word appears around at least this share of the sites
    min_lift: float = 4.0
    max_p_value: float = 1e-4
    common_words: int = 200  # the corpus's most frequent words are never context words


@dataclass(frozen=True)
class Firings:
    """Every (latent, token position) where a latent fired, with the corpus it fired on."""

    latent: np.ndarray
    token: np.ndarray
    activation: np.ndarray
    window: np.ndarray
    position: np.ndarray
    grams: np.ndarray  # (n, 3): the two tokens before and the token itself, -1 before the window's text
    windows: list[list[int]]
    n_tokens: int


def _tok(tokenizer: Any, token_id: int) -> str:
    return str(tokenizer.decode([int(token_id)]))


@torch.inference_mode()
def collect_firings(reader: ConceptReader, docs: Sequence[str], context: int) -> Firings:
    windows = make_windows(reader, docs, context)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("lat", "tok", "act", "win", "pos")}
    n_tokens = 0
    for tb in iter_token_batches(reader, windows):
        rows, latents = tb.acts.nonzero(as_tuple=True)  # TopK/JumpReLU: few non-zeros per token
        parts["lat"].append(latents.cpu().numpy())
        parts["act"].append(tb.acts[rows, latents].float().cpu().numpy())
        parts["win"].append(tb.window[rows].cpu().numpy())
        parts["pos"].append(tb.position[rows].cpu().numpy())
        parts["tok"].append(tb.token[rows].cpu().numpy())
        n_tokens += tb.hidden.shape[0]
    log.info("labelling from %d tokens in %d windows", n_tokens, len(windows))
    lat, tok, act, win, pos = (
        np.concatenate(parts[k]) if parts[k] else np.zeros(0, dtype=np.int64)
        for k in ("lat", "tok", "act", "win", "pos")
    )
    return Firings(lat, tok, act.astype(np.float64), win, pos, trigrams(windows, win, pos), windows, n_tokens)


def trigrams(windows: Sequence[Sequence[int]], window: np.ndarray, position: np.ndarray) -> np.ndarray:
    """(token − 2, token − 1, token) ids at each site; positions before 1 (the BOS) read as −1."""
    flat = np.concatenate([np.asarray(w, dtype=np.int64) for w in windows] or [np.zeros(0, np.int64)])
    offsets = np.concatenate([[0], np.cumsum([len(w) for w in windows])])[window.astype(np.int64)]
    out = np.full((len(window), 3), -1, dtype=np.int64)
    for back in (2, 1, 0):
        at = position.astype(np.int64) - back
        ok = at >= (1 if back else 0)
        out[ok, 2 - back] = flat[offsets[ok] + at[ok]]
    return out


def corpus_frequencies(windows: Sequence[Sequence[int]], vocab_size: int) -> np.ndarray:
    """Per token id, its share of the corpus tokens (the BOS each window starts with not counted)."""
    ids = np.concatenate([np.asarray(w[1:], dtype=np.int64) for w in windows if len(w) > 1] or [np.zeros(0, np.int64)])
    counts = np.bincount(ids, minlength=vocab_size).astype(np.float64)
    shares: np.ndarray = counts / max(counts.sum(), 1.0)
    return shares


def enriched_context_words(
    contexts: Sequence[np.ndarray],
    frequency: np.ndarray,
    candidate: np.ndarray,
    settings: LabelSettings,
) -> list[tuple[int, int, float, float]]:
    """Token ids over-represented around a latent's sites: (token, sites containing it, lift, p-value).

    A context of length m contains token t by chance with probability 1 − (1 − f_t)^m, f_t its corpus
    frequency; k of n sites containing it is tested one-sided with the binomial distribution. Written
    here because it is a few lines over scipy's binomial tail, not a library routine.
    """
    n = len(contexts)
    if n == 0:
        return []
    present = np.concatenate([np.unique(c) for c in contexts])
    ids, k = np.unique(present, return_counts=True)
    keep = candidate[ids] & (k >= max(3, settings.min_context_share * n))
    ids, k = ids[keep], k[keep]
    if ids.size == 0:
        return []
    length = float(np.mean([len(c) for c in contexts]))
    chance = 1.0 - np.power(1.0 - frequency[ids], length)
    chance = np.clip(chance, 1e-12, 1.0)
    lift = (k / n) / chance
    p = binom.sf(k - 1, n, chance)
    ok = (lift >= settings.min_lift) & (p <= settings.max_p_value)
    order = np.lexsort((-k[ok], p[ok]))
    return [
        (int(ids[ok][i]), int(k[ok][i]), float(lift[ok][i]), float(p[ok][i])) for i in order[: settings.context_words]
    ]


def word_tokens(tokenizer: PreTrainedTokenizerBase, frequency: np.ndarray, common: int) -> np.ndarray:
    """Which token ids are words worth naming: a word's start (a piece such as "heet" of " sheet" names
    nothing), letters only, at least 3 of them, and not among the `common` most frequent words of the
    corpus ("this", "you", "from" say nothing about a topic; ranking by the corpus itself stands in for a
    stop-word list in any language)."""
    words = np.zeros(len(frequency), dtype=bool)
    for token_id in range(len(frequency)):
        text = _tok(tokenizer, token_id)
        words[token_id] = _starts_word(tokenizer, token_id, text) and len(text.strip()) >= 3 and text.strip().isalpha()
    ranked = np.flatnonzero(words)[np.argsort(-frequency[words], kind="stable")]
    words[ranked[:common]] = False
    return words


# Byte-level BPE marks a leading space with "Ġ", SentencePiece with "▁"; decoding one id may drop it.
_WORD_START_MARKS = ("Ġ", "▁", " ")


def _starts_word(tokenizer: Any, token_id: int, text: str) -> bool:
    convert = getattr(tokenizer, "convert_ids_to_tokens", None)
    raw = convert(int(token_id)) if convert is not None else text
    return isinstance(raw, str) and raw.startswith(_WORD_START_MARKS)


def _snippet(tokenizer: Any, window: Sequence[int], at: int) -> str:
    text = (
        tokenizer.decode(window[max(1, at - 12) : at])
        + "«"
        + _tok(tokenizer, window[at])
        + "»"
        + tokenizer.decode(window[at + 1 : at + 5])
    )
    return " ".join(text.split())


def top_ngram(grams: np.ndarray, weights: np.ndarray) -> tuple[int, float]:
    """The site (row of `grams`) of the n-gram carrying most activation mass, and that mass's share."""
    _, first, inverse = np.unique(grams, axis=0, return_index=True, return_inverse=True)
    mass = np.bincount(inverse.ravel(), weights=weights)
    best = int(np.argmax(mass))
    return int(first[best]), float(mass[best] / mass.sum())


def _ngram_text(tokenizer: Any, window: Sequence[int], at: int, n: int) -> str:
    return str(tokenizer.decode(window[max(1, at - n + 1) : at + 1]))


def label_phrase(tokens: Sequence[str], bigram: str, bigram_share: float, context: Sequence[str]) -> str:
    """The label: the readable tokens (or dominant bigram), plus the context words when there are any."""
    names = " | ".join(repr(t.strip() or t) for t in tokens)
    token_list = f"{bigram.strip()!r} ({names})" if bigram_share > 0.5 else names
    if not context:
        return token_list  # parseable by cg_ray.describe.render.label_tokens
    what = f"“{bigram.strip()}”" if bigram_share > 0.5 and bigram.strip() else render_tokens(list(tokens), limit=3)
    return f"{what}{CONTEXT_MARKER}{', '.join(context)}"


def _distinct_windows(idx: np.ndarray, window: np.ndarray, limit: int) -> np.ndarray:
    """The first `limit` of `idx` (strongest first) from different windows."""
    _, first = np.unique(window[idx], return_index=True)
    return idx[np.sort(first)][:limit]


class ContextWord(TypedDict):
    word: str
    sites: int
    lift: float
    p: float


class LabelExample(TypedDict):
    text: str
    act: float


class LatentLabel(TypedDict, total=False):
    """One line of the labels JSONL: a dead latent has only the first three keys."""

    concept_id: Required[int]
    label: Required[str]
    n_active_tokens: Required[int]
    top_tokens: list[tuple[str, float]]
    top_bigram: list[str | float]
    top_trigram: list[str | float]
    context_words: list[ContextWord]
    example: str
    examples: list[LabelExample]
    max_act: float
    frequency: float


def summarize_latent(
    concept_id: int,
    idx: np.ndarray,
    f: Firings,
    tokenizer: PreTrainedTokenizerBase,
    frequency: np.ndarray,
    words: np.ndarray,
    settings: LabelSettings,
) -> LatentLabel:
    """The label record of one latent; `idx` are its firings, strongest first."""
    if idx.size == 0:
        return {"concept_id": concept_id, "label": DEAD_LABEL, "n_active_tokens": 0}
    weights = f.activation[idx]
    total = float(weights.sum())
    tok_ids, inverse = np.unique(f.token[idx], return_inverse=True)
    mass = np.bincount(inverse, weights=weights)
    top = np.argsort(-mass)[: settings.top_tokens]
    tokens = [(_tok(tokenizer, tok_ids[i]), round(float(mass[i] / total), 3)) for i in top]

    ngrams: dict[int, tuple[str, float]] = {}
    for n in (2, 3):
        site, share = top_ngram(f.grams[idx][:, 3 - n :], weights)
        i = idx[site]
        ngrams[n] = (_ngram_text(tokenizer, f.windows[int(f.window[i])], int(f.position[i]), n), round(share, 3))
    bigram, bigram_share = ngrams[2]

    sites = _distinct_windows(idx, f.window, settings.context_sites)
    contexts = []
    for i in sites:
        window, at = f.windows[int(f.window[i])], int(f.position[i])
        around = window[max(1, at - settings.context_before) : at] + window[at + 1 : at + 1 + settings.context_after]
        contexts.append(np.asarray(around, dtype=np.int64))
    candidate = words.copy()
    candidate[tok_ids[top]] = False  # the latent's own tokens say nothing about its context
    enriched = enriched_context_words(contexts, frequency, candidate, settings)
    context = [_tok(tokenizer, token_id).strip().lower() for token_id, *_ in enriched]
    examples: list[LabelExample] = [
        {
            "text": _snippet(tokenizer, f.windows[int(f.window[i])], int(f.position[i])),
            "act": round(float(f.activation[i]), 4),
        }
        for i in sites[: settings.examples]
    ]
    return {
        "concept_id": concept_id,
        "label": label_phrase([t for t, _ in tokens], bigram, bigram_share, list(dict.fromkeys(context))),
        "top_tokens": tokens,
        "top_bigram": list(ngrams[2]),
        "top_trigram": list(ngrams[3]),
        "context_words": [
            {"word": w, "sites": k, "lift": round(lift, 2), "p": float(f"{p:.2g}")}
            for w, (_, k, lift, p) in zip(context, enriched, strict=True)
        ],
        "example": examples[0]["text"],
        "examples": examples,
        "max_act": round(float(f.activation[idx[0]]), 4),
        "n_active_tokens": int(idx.size),
        "frequency": round(idx.size / max(f.n_tokens, 1), 6),
    }


def label_latents(
    reader: ConceptReader, docs: Sequence[str], *, context: int = 128, settings: LabelSettings | None = None
) -> list[LatentLabel]:
    settings = settings or LabelSettings()
    f = collect_firings(reader, docs, context)
    tokenizer = reader.tokenizer
    vocab_size = max(len(tokenizer), int(max((max(w) for w in f.windows if w), default=0)) + 1)
    frequency = corpus_frequencies(f.windows, vocab_size)
    words = word_tokens(tokenizer, frequency, settings.common_words)
    order = np.lexsort((-f.activation, f.latent))  # by latent, strongest first
    starts = np.searchsorted(f.latent[order], np.arange(reader.d_sae + 1))
    return [
        summarize_latent(c, order[starts[c] : starts[c + 1]], f, tokenizer, frequency, words, settings)
        for c in range(reader.d_sae)
    ]
