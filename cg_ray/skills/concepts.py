"""The concept level: each model's χ_model per SAE concept over a suite's rows, from one reading of the rows.

The rows are read once (`cg-ray extract` → rows.parquet with s̃ per row, and its manifest naming the SAE);
every model's per-row scores are then put through the CG accumulator with the model as the "benchmark",
so the models × concepts matrix is χ_model exactly as the CG method computes it (Σ m·s̃ / Σ s̃ over the
rows the model was scored on). With one benchmark, a model's X_model of a concept is its χ_model.

χ_model of one model is a weighted mean of its row scores (weights s̃_c,i / Σ s̃_c over its scored rows),
so `cg-ray estimate` can estimate it from few rows with the same Gaussian posterior as the overall score.
The "top concepts" are the K with the largest coverage (Σ_i s̃_c,i, i.e. χ_bench) among those active on at
least `min_rows` rows (fewer make χ_model a handful of rows' average) and on at most `max_share` of the rows
(more make it the overall score again)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import sparse

from cg_ray.activations.recorded import SaeRecordDict
from cg_ray.errors import InputError
from cg_ray.metrics.accumulator import CGAccumulator
from cg_ray.metrics.compute import chi_model
from cg_ray.skills.matrix import RowScores


@dataclass
class ConceptRows:
    """s̃ of each row of the suite (rows × d_sae, sparse) and the reader that produced it."""

    row_ids: list[str]
    acts: sparse.csr_matrix
    sae: SaeRecordDict = field(default_factory=SaeRecordDict)  # the extract manifest's SAE (`SaeRecord.as_dict()`)

    def aligned(self, row_ids: list[str], source: str = "concepts") -> sparse.csr_matrix:
        """s̃ in the order of `row_ids`; a row the concept file lacks is refused by id."""
        index = {r: k for k, r in enumerate(self.row_ids)}
        missing = [r for r in row_ids if r not in index]
        if missing:
            raise InputError(
                f"{len(missing)} scored row(s) were not read, e.g. {missing[0]!r}", path=source, field="row_id"
            )
        return sparse.csr_matrix(self.acts[[index[r] for r in row_ids]])


def read_concept_rows(path: Path) -> ConceptRows:
    """rows.parquet written by `cg-ray extract` (scores may be null), with its manifest if beside it."""
    from cg_ray.activations.recorded import reader_of_extract
    from cg_ray.artifacts.rows import iter_row_batches, open_rows

    rows = open_rows(path)
    ids: list[str] = []
    parts = []
    for batch in iter_row_batches(rows):
        ids += [str(r) for r in batch.row_ids.to_pylist()]
        parts.append(
            sparse.csr_matrix((batch.concept_acts, batch.concept_ids, batch.offsets), (len(batch), rows.d_sae))
        )
    if len(set(ids)) != len(ids):
        raise InputError("a row id appears twice (read each row once)", path=str(path), field="row_id")
    reader = reader_of_extract(Path(path))  # a newer format_version is refused, naming the file
    return ConceptRows(ids, sparse.vstack(parts, format="csr").astype(np.float64), reader.sae.as_dict())


def top_concepts(acts: sparse.csr_matrix, k: int, min_rows: int, max_share: float = 1.0) -> np.ndarray:
    """The k concepts of largest total s̃ among those active on ≥ min_rows rows and on ≤ max_share of the
    rows (largest first). Without the upper bound the top of AlpacaEval's list is function-word and
    punctuation concepts active on nearly every row, whose χ_model is the overall score again."""
    support = np.asarray((acts > 0).sum(axis=0)).ravel()
    coverage = np.asarray(acts.sum(axis=0)).ravel()
    eligible = np.flatnonzero((support >= min_rows) & (support <= max_share * acts.shape[0]))
    return np.asarray(eligible[np.argsort(-coverage[eligible], kind="stable")][:k])


def chi_model_matrix(scores: np.ndarray, acts: sparse.csr_matrix, models: list[str]) -> pd.DataFrame:
    """models × concepts χ_model through the CG accumulator (one model = one benchmark); NaN scores are rows
    the model was not scored on, and a concept none of its scored rows activates is NaN."""
    acc = CGAccumulator(acts.shape[1])
    offsets, ids, values = acts.indptr, acts.indices, acts.data
    for m, model in enumerate(models):
        acc.add_batch(np.zeros(acts.shape[0], dtype=np.int64), [model], scores[m], offsets, ids, values)
    names, sums = acc.stacked()
    chi = chi_model(sums["weighted_sum"], sums["scored_act_sum"])
    return pd.DataFrame(chi, index=names).reindex(models)


def concept_weights(acts: sparse.csr_matrix, concepts: np.ndarray) -> np.ndarray:
    """concepts × rows: s̃_c,i (dense), to be normalised over the rows a model has — χ_model = w·y / Σ w."""
    return np.asarray(acts[:, concepts].T.toarray(), dtype=float)


def concept_frame(
    data: RowScores, weights: np.ndarray, concepts: Mapping[str, object], relative: bool = False
) -> pd.DataFrame:
    """The models × top concepts χ_model matrix (columns `c<id>`) for `cg-ray skills`, through the CG
    accumulator; `weights` are the top concepts' s̃ (concepts × the suite's rows). `relative`: minus each
    model's overall score (its mean over the rows it was scored on) — the model's own concept profile, where
    a concept-specific skill can show once the general strength that dominates χ_model is taken out."""
    acts = sparse.csr_matrix(weights.T)
    matrix = chi_model_matrix(data.scores, acts, data.models)
    top = concepts["top_concepts"]  # the concept ids, in the weights' order
    if not isinstance(top, Iterable):
        raise TypeError(f"'{type(top).__name__}' object is not iterable")
    matrix.columns = [f"c{c}" for c in top]
    if relative:
        matrix = matrix.sub(np.nanmean(data.scores, axis=1), axis=0)
    return matrix


def shipped_concept_labels(sae: Mapping[str, object], ids: list[int]) -> dict[int, str]:
    """Labels of `ids` from the labels shipped beside the SAE the concept rows were read with, if that SAE is
    still the one on disk (its weights' fingerprint equals the recorded `weights_sha256`); {} otherwise — a
    retrained default SAE's labels would name other concepts."""
    from cg_ray.activations.recorded import SaeRecord
    from cg_ray.activations.saes.labels import verified_shipped_labels

    labels, _ = verified_shipped_labels(SaeRecord.from_mapping(sae))
    if labels is None:
        return {}
    return {c: label for c in ids if (label := labels.get(int(c)))}
