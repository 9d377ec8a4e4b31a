"""The /v1/score answer: each text's top concepts, and χ_bench / χ_model over the batch as one 'benchmark'.
The formulas are the metrics package's (`CGAccumulator`, `compute_metrics`); this module only shapes the
service's response from them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cg_ray.activations.packing import SparseConcepts
from cg_ray.labels import ConceptLabels
from cg_ray.metrics.accumulator import CGAccumulator
from cg_ray.metrics.compute import compute_metrics
from cg_ray.serve.api_types import (
    CoveredConcept,
    ScoredRow,
    ScoreResponse,
    ScoreSummary,
    TopConcept,
    WeakConcept,
)


def score_batch(
    encoded: Sequence[SparseConcepts],
    scores: list[float | None] | None,
    top_k: int,
    d_sae: int,
    labels: ConceptLabels | None,
) -> ScoreResponse:
    """Per-row top concepts, and the batch's χ_bench / χ_model over its own rows (one 'benchmark')."""

    def label(c: int) -> str | None:
        return labels.get(c) if labels else None

    rows = []
    for e in encoded:
        order = np.argsort(-e.concept_acts, kind="stable")[:top_k]
        top = [
            TopConcept(
                concept_id=int(e.concept_ids[i]),
                label=label(int(e.concept_ids[i])),
                activation=float(e.concept_acts[i]),
            )
            for i in order
        ]
        rows.append(ScoredRow(n_tokens=int(e.n_tokens), top_concepts=top))
    acc = CGAccumulator(d_sae)
    lengths = [len(e.concept_ids) for e in encoded]
    acc.add_batch(
        np.zeros(len(encoded), dtype=np.int32),
        ["batch"],
        np.array([np.nan if s is None else s for s in (scores or [None] * len(encoded))], dtype=np.float64),
        np.concatenate([[0], np.cumsum(lengths)]),
        np.concatenate([e.concept_ids for e in encoded]).astype(np.int32),
        np.concatenate([e.concept_acts for e in encoded]).astype(np.float32),
    )
    result = compute_metrics(acc)
    chi_b = result.chi_bench[0]
    covered = np.argsort(-chi_b, kind="stable")[:top_k]
    summary = ScoreSummary(
        n_rows=len(encoded),
        n_active_concepts=int((chi_b > 0).sum()),
        most_covered=[
            CoveredConcept(concept_id=int(c), label=label(int(c)), chi_bench=float(chi_b[c]))
            for c in covered
            if chi_b[c] > 0
        ],
    )
    # Left unset (so absent from the JSON, the route excludes unset fields) when no row has a score.
    if scores is not None and any(s is not None for s in scores):
        chi_m = result.chi_model[0]
        defined = np.flatnonzero(~np.isnan(chi_m))
        ranked = defined[np.lexsort((-result.act_sum[0][defined], chi_m[defined]))][:top_k]
        summary.lowest_chi_model = [
            WeakConcept(concept_id=int(c), label=label(int(c)), chi_model=float(chi_m[c]), chi_bench=float(chi_b[c]))
            for c in ranked
        ]
    return ScoreResponse(rows=rows, summary=summary)
