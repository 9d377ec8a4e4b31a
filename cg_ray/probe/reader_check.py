"""The reader's check of an item pair, before the model answers anything: the target must show the gap's
concepts and the control must not. The rule is the run's own (`metrics.firing.fires`): a concept fires when
its activation reaches the threshold the run recorded for it (failure_modes.parquet's `firing_thresholds`,
weaknesses.parquet's `firing_threshold`; weak tails do not count). A pair failing
it is dropped and counted per gap, so a gap the writer cannot express shows as a low pass rate, not as a
quiet null."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cg_ray.activations.protocol import Reader
from cg_ray.metrics.firing import fires
from cg_ray.probe.items import ItemPair


@dataclass(frozen=True)
class ReaderVerdict:
    target_strength: float  # the gap's strongest concept on the target, over its firing threshold (shown)
    control_strength: float
    passed: bool


def strength(ids: np.ndarray, acts: np.ndarray, rule: Mapping[int, float]) -> float:
    """The largest activation / threshold among the rule's concepts on one text (∞ for an active concept
    with threshold 0; 0 when none is active)."""
    best = 0.0
    for c, a in zip(np.asarray(ids).tolist(), np.asarray(acts).tolist(), strict=True):
        limit = rule.get(int(c))
        if limit is None or a <= 0:
            continue
        best = max(best, float("inf") if limit <= 0 else a / limit)
    return best


def any_fires(ids: np.ndarray, acts: np.ndarray, rule: Mapping[int, float]) -> bool:
    """Whether one of the rule's concepts fires on one text."""
    ids, acts = np.asarray(ids, dtype=np.int64), np.asarray(acts)
    mine = np.isin(ids, np.fromiter(rule, dtype=np.int64, count=len(rule)))
    limits = np.array([rule[int(c)] for c in ids[mine]], dtype=np.float64)
    return bool(fires(acts[mine], limits).any())


def check_pairs(
    pairs: Sequence[ItemPair], rules: Mapping[str, Mapping[int, float]], reader: Reader
) -> list[ReaderVerdict]:
    """Each pair read once per side (one batch of texts for the reader); `rules`: gap id -> concept -> threshold."""
    texts = [p.target_prompt for p in pairs] + [p.control_prompt for p in pairs]
    read = reader.read(texts) if texts else []
    out = []
    for i, p in enumerate(pairs):
        rule = rules[p.gap_id]
        target, control = read[i], read[len(pairs) + i]
        passed = any_fires(target.concept_ids, target.concept_acts, rule) and not any_fires(
            control.concept_ids, control.concept_acts, rule
        )
        t = strength(target.concept_ids, target.concept_acts, rule)
        c = strength(control.concept_ids, control.concept_acts, rule)
        out.append(ReaderVerdict(t, c, passed=passed))
    return out
