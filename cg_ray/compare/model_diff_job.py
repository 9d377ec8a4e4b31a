"""`cg-ray diff-models`: pair two models' answers, read each response with its prompt as context (the
caller supplies the reading: the Ray Data reader pool in the CLI, anything with the same shape in tests),
then per-concept fractions, intervals and the hypotheses judged over repeated splits (`cg_ray.compare.model_diff`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import sparse

from cg_ray.compare.model_diff import (
    ConceptStats,
    Confirmation,
    active_matrix,
    as_active,
    concept_stats,
    confirm,
)
from cg_ray.compare.model_diff_config import DiffModelsConfig
from cg_ray.compare.pairs import (
    Pair,
    PairedAnswers,
    load_answers,
    load_prompts,
    match_length,
    pair_answers,
    reader_texts,
)
from cg_ray.errors import InputError

log = logging.getLogger(__name__)


@dataclass
class ReadResult:
    """What reading the texts gave, in input order: sparse s̃ per text, counted tokens, the reader."""

    concept_ids: list[npt.NDArray[np.int32]]
    concept_acts: list[npt.NDArray[np.float32]]
    n_tokens: list[int]
    d_sae: int
    reader: dict[str, Any] = field(default_factory=dict)


# (texts, character offset of each response) -> ReadResult; the prompt before the offset is context only.
ReadFn = Callable[[list[str], list[int]], ReadResult]
# concept id -> (label, description); either may be None. Made once d_sae is known (`NamesFor`).
ConceptNames = Callable[[int], tuple[str | None, str | None]]
NamesFor = Callable[[int], ConceptNames]


@dataclass
class ModelDiffResult:
    config: DiffModelsConfig
    names: tuple[str, str]
    paired: PairedAnswers
    pairs: list[Pair]  # the pairs that were read and compared
    acts_a: sparse.csr_matrix  # pooled s̃ above the threshold, prompts × d_sae
    acts_b: sparse.csr_matrix
    stats: ConceptStats  # on all compared prompts
    confirmation: Confirmation  # the hypotheses judged over repeated splits of the prompts
    n_tokens_a: npt.NDArray[np.int64]
    n_tokens_b: npt.NDArray[np.int64]
    reader: dict[str, Any]
    concept_names: ConceptNames
    seconds: dict[str, float] = field(default_factory=dict)


def load_pairs(config: DiffModelsConfig) -> PairedAnswers:
    """The paired answers the config names (every skip counted), limited to the first `limit` pairs."""
    if config.answers is not None:
        a = load_answers(config.answers, config.model_a, turn=config.turn)
        b = load_answers(config.answers, config.model_b, turn=config.turn)
    else:
        a = load_answers(str(config.a), turn=config.turn)
        b = load_answers(str(config.b), turn=config.turn)
    prompts = load_prompts(config.prompts, turn=config.turn) if config.prompts else None
    return trim_pairs(pair_answers(a, b, prompts), config.limit, config.match_length)


def trim_pairs(paired: PairedAnswers, limit: int | None, cut_to_shorter: bool) -> PairedAnswers:
    """The first `limit` pairs (the rest counted as beyond_limit), each cut to its shorter answer if asked."""
    if limit is not None and len(paired.pairs) > limit:
        paired.counts["beyond_limit"] = len(paired.pairs) - limit
        paired.pairs = paired.pairs[:limit]
        paired.counts["paired"] = len(paired.pairs)
    if cut_to_shorter:
        paired.pairs = [match_length(p) for p in paired.pairs]
    return paired


def _drop_unread(paired: PairedAnswers, n_a: np.ndarray, n_b: np.ndarray) -> np.ndarray:
    """Pairs where a response had no token read (its prompt filled max_tokens): counted, then dropped."""
    keep = (n_a > 0) & (n_b > 0)
    for i in np.flatnonzero(~keep):
        paired.skip("no_response_tokens_read", paired.pairs[i].id)
    paired.counts.setdefault("no_response_tokens_read", 0)
    return keep


def diff_models(config: DiffModelsConfig, read: ReadFn, names_for: NamesFor) -> ModelDiffResult:
    started = time.perf_counter()
    return compare_pairs(config, load_pairs(config), read, names_for, started=started)


def compare_pairs(
    config: DiffModelsConfig,
    paired: PairedAnswers,
    read: ReadFn,
    names_for: NamesFor,
    *,
    names: tuple[str, str] | None = None,
    started: float | None = None,
) -> ModelDiffResult:
    """Read the paired answers and compare them (`names`: the models' names; default the config's)."""
    started = time.perf_counter() if started is None else started
    texts, offsets, _ = reader_texts(paired.pairs)
    log.info("%d paired prompts (skips: %s): reading %d responses", len(paired.pairs), paired.counts, len(texts))
    loaded = time.perf_counter()
    result = read(texts, offsets)
    read_done = time.perf_counter()
    n = len(paired.pairs)
    if len(result.concept_ids) != 2 * n:
        raise RuntimeError(f"the reader returned {len(result.concept_ids)} rows for {2 * n} texts")
    n_tok = np.asarray(result.n_tokens, dtype=np.int64)
    keep = _drop_unread(paired, n_tok[:n], n_tok[n:])
    rows = np.flatnonzero(keep)
    if len(rows) < 2:
        raise InputError(f"fewer than 2 prompts left to compare (skipped: {paired.counts})")
    acts = active_matrix(result.concept_ids, result.concept_acts, result.d_sae, config.threshold)
    acts_a, acts_b = acts[rows], acts[n + rows]
    active_a, active_b = as_active(acts_a), as_active(acts_b)
    all_rows = np.arange(len(rows), dtype=np.int64)
    stats = concept_stats(active_a, active_b, all_rows, config.confidence)
    judging = config.model_dump(include={"seed", "splits", "fdr", "confidence", "min_rows", "top"})
    confirmation = confirm(active_a, active_b, **judging)
    return ModelDiffResult(
        config=config,
        names=names or config.names(),
        paired=paired,
        pairs=[paired.pairs[i] for i in rows],
        acts_a=acts_a,
        acts_b=acts_b,
        stats=stats,
        confirmation=confirmation,
        n_tokens_a=n_tok[:n][rows],
        n_tokens_b=n_tok[n:][rows],
        reader=result.reader,
        concept_names=names_for(result.d_sae),
        seconds={
            "load": loaded - started,
            "read": read_done - loaded,
            "stats": time.perf_counter() - read_done,
        },
    )
