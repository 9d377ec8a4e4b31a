"""Per-concept head-to-head win rates ("where model A beats model B") and the cross-model wins/losses table.

Inputs are each model's rows.parquet (its arena rows, scored and read by the reader; row ids from
`cg_ray.arena.rows.row_id`) and the battles. For an ordered pair (A, B) and concept c, over the battles
between A and B that the tie policy keeps and whose two rows are both present:

    win_rate(A, B, c) = Σ_k w_{c,k} · s_A(k) / Σ_k w_{c,k}

where s_A(k) is A's row score in battle k (1 win, 0 loss, ties per policy) and the weight w_{c,k} is, with
`weighting="mean"` (default), the mean of the two rows' s̃_{c}: the concept's presence in the shared prompt
and in both responses, so that win_rate(A,B,c) + win_rate(B,A,c) = 1 when ties score 0.5; with
`weighting="own"`, A's row's s̃_c alone (concepts in A's own answer). Undefined (null, never 0 or NaN)
when no such battle activates c; the Parquet table holds the defined (pair, concept) cells only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from scipy import sparse

from cg_ray import schemas as S
from cg_ray.arena.config import TiePolicy
from cg_ray.arena.outcomes import side_scores
from cg_ray.arena.rows import row_id
from cg_ray.artifacts.layout import ArenaDir, RunDir
from cg_ray.artifacts.rows import RowsFile, iter_row_batches, open_rows
from cg_ray.benchmarks.arena import WINNERS, Battle
from cg_ray.errors import InputError
from cg_ray.labels import ConceptLabels

Weighting = Literal["mean", "own"]

HEAD_TO_HEAD_SCHEMA = pa.schema(
    [
        pa.field("model_a", pa.string(), nullable=False),
        pa.field("model_b", pa.string(), nullable=False),
        pa.field("concept_id", pa.int32(), nullable=False),
        pa.field("label", pa.string(), nullable=True),
        pa.field("win_rate", pa.float64(), nullable=False),  # of model_a over model_b
        pa.field("weight_sum", pa.float64(), nullable=False),  # Σ w_c over the active battles
        pa.field("n_active", pa.int64(), nullable=False),  # battles with w_c > 0
        pa.field("n_wins", pa.int64(), nullable=False),  # … that model_a won (score 1)
        pa.field("n_losses", pa.int64(), nullable=False),  # … that model_a lost (score 0)
        pa.field("n_battles", pa.int64(), nullable=False),  # battles of the pair counted at all
    ]
)

# Per model, what it wins on (its strengths profile) and loses on (its weaknesses profile), judged as every
# run's findings are: chosen on one half of each grouped split, tested as that rule on the other half.
MODEL_CONCEPTS_SCHEMA = pa.schema(
    [
        pa.field("model", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),  # "wins" (strengths.parquet) or "losses" (weaknesses)
        pa.field("rank", pa.int32(), nullable=False),  # confirmed, tested candidates by q, untested (profile order)
        pa.field("concept_id", pa.int32(), nullable=False),
        pa.field("label", pa.string(), nullable=True),
        pa.field("description", pa.string(), nullable=True),
        *S.floats("X_model", "X_model_low", "X_model_high"),  # over all its rows (in sample)
        pa.field("n_active_rows", pa.int64(), nullable=False),
        # held out: the score gap to its cells on rows that did not choose it, its interval and verdict
        *S.with_interval("heldout_residual"),
        pa.field("confirmed", pa.bool_(), nullable=False),
        *S.floats("q_value", "mde"),
        *S.counts("n_heldout"),
    ]
)
PROFILE_OF_KIND: dict[str, str] = {"wins": S.STRENGTHS_FILE, "losses": S.WEAKNESSES_FILE}
_COPIED = ("concept_id", "label", "description", "X_model", "X_model_low", "X_model_high", "heldout_residual",
           "heldout_residual_low", "heldout_residual_high", "confirmed", "q_value", "mde", "n_heldout")  # fmt: skip


@dataclass(frozen=True)
class ModelActivations:
    """One model's rows as a sparse (rows × d_sae) matrix of s̃, and its row ids."""

    model: str
    d_sae: int
    index: dict[str, int]  # row_id -> matrix row
    acts: sparse.csr_matrix


def load_model_activations(model: str, source: str | os.PathLike[str] | RowsFile) -> ModelActivations:
    rows = source if isinstance(source, RowsFile) else open_rows(source)
    path = rows.path
    index: dict[str, int] = {}
    parts = []
    for batch in iter_row_batches(rows, model=model if rows.has_model_column else None):
        for k, rid in enumerate(batch.row_ids.to_pylist()):
            if rid in index:  # the head-to-head joins on row_id alone, whatever the benchmark
                raise InputError(f"duplicate row_id {rid!r}", path=str(path), row=batch.first_row + k, field="row_id")
            index[rid] = len(index)
        parts.append(
            sparse.csr_matrix(
                (batch.concept_acts.astype(np.float64), batch.concept_ids, batch.offsets),
                shape=(len(batch), rows.d_sae),
            )
        )
    return ModelActivations(model, rows.d_sae, index, sparse.vstack(parts, format="csr"))


@dataclass
class PairSummary:
    model_a: str
    model_b: str
    n_battles: int  # battles between the two, any order of sides
    n_counted: int  # kept by the tie policy with both rows present
    n_dropped: int  # dropped by the tie policy
    n_missing_rows: int  # kept, but a row was not in the rows files
    win_rate: float | None  # model_a's mean score over the counted battles


@dataclass
class HeadToHead:
    table: pa.Table  # HEAD_TO_HEAD_SCHEMA, both orders of every pair
    pairs: list[PairSummary] = field(default_factory=list)

    def win_rate(self, model_a: str, model_b: str, concept: int) -> float | None:
        """The win rate of one cell; None where undefined (no counted battle activates the concept)."""
        t = self.table
        mask = pc.and_(
            pc.and_(pc.equal(t["model_a"], model_a), pc.equal(t["model_b"], model_b)),
            pc.equal(t["concept_id"], concept),
        )
        hit = t.filter(mask)["win_rate"].to_pylist()
        return hit[0] if hit else None


def _direction(
    model_a: str,
    model_b: str,
    weights: sparse.csr_matrix,
    scores: npt.NDArray[np.float64],
    n_counted: int,
    labels: ConceptLabels | None,
) -> pa.Table:
    """The defined concepts of one ordered pair, as a HEAD_TO_HEAD_SCHEMA table."""
    w = weights.tocsc()
    weight_sum = np.asarray(w.sum(axis=0)).ravel()
    weighted = np.asarray(w.T @ scores).ravel()
    active = (w > 0).astype(np.float64)
    n_active = np.asarray(active.sum(axis=0)).ravel()
    n_wins = active.T @ (scores == 1.0).astype(np.float64)
    n_losses = active.T @ (scores == 0.0).astype(np.float64)
    defined = np.flatnonzero(weight_sum > 0)
    rate = np.clip(weighted[defined] / weight_sum[defined], 0.0, 1.0)
    columns = {
        "model_a": [model_a] * defined.size,
        "model_b": [model_b] * defined.size,
        "concept_id": defined.astype(np.int32),
        "label": [labels.get(int(c)) if labels else None for c in defined],
        "win_rate": rate,
        "weight_sum": weight_sum[defined],
        "n_active": np.rint(n_active[defined]).astype(np.int64),
        "n_wins": np.rint(np.asarray(n_wins).ravel()[defined]).astype(np.int64),
        "n_losses": np.rint(np.asarray(n_losses).ravel()[defined]).astype(np.int64),
        "n_battles": np.full(defined.size, n_counted, dtype=np.int64),
    }
    return pa.Table.from_pydict(columns, schema=HEAD_TO_HEAD_SCHEMA)


def head_to_head(
    battles: Sequence[Battle],
    activations: Mapping[str, ModelActivations],
    policy: TiePolicy | None = None,
    *,
    weighting: Weighting = "mean",
    labels: ConceptLabels | None = None,
) -> HeadToHead:
    """Per-concept win rates of every ordered pair of models in `activations` that met in `battles`."""
    if weighting not in ("mean", "own"):
        raise ValueError(f"weighting must be 'mean' or 'own', got {weighting!r}")
    widths = {a.d_sae for a in activations.values()}
    if len(widths) > 1:
        raise InputError(f"rows files of different SAE widths {sorted(widths)}: they must share one SAE")
    table = side_scores(policy or TiePolicy())
    code = {w: i for i, w in enumerate(WINNERS)}
    by_pair: dict[tuple[str, str], list[Battle]] = {}
    for battle in battles:
        if battle.model_a in activations and battle.model_b in activations:
            pair = (min(battle.model_a, battle.model_b), max(battle.model_a, battle.model_b))
            by_pair.setdefault(pair, []).append(battle)

    tables = [HEAD_TO_HEAD_SCHEMA.empty_table()]
    summaries = []
    for (first, second), pair_battles in sorted(by_pair.items()):
        acts_1, acts_2 = activations[first], activations[second]
        rows_1, rows_2, scores_1, scores_2 = [], [], [], []
        dropped = missing = 0
        for battle in pair_battles:
            side_1, side_2 = battle.side_of(first), battle.side_of(second)
            s1, s2 = table[side_1][code[battle.winner]], table[side_2][code[battle.winner]]
            if np.isnan(s1):
                dropped += 1
                continue
            r1, r2 = acts_1.index.get(row_id(battle, side_1)), acts_2.index.get(row_id(battle, side_2))
            if r1 is None or r2 is None:
                missing += 1
                continue
            rows_1.append(r1)
            rows_2.append(r2)
            scores_1.append(s1)
            scores_2.append(s2)
        n = len(rows_1)
        for a_name, b_name, scores in ((first, second, scores_1), (second, first, scores_2)):
            summaries.append(
                PairSummary(
                    a_name, b_name, len(pair_battles), n, dropped, missing, float(np.mean(scores)) if n else None
                )
            )
        if n == 0:
            continue
        m1, m2 = acts_1.acts[rows_1], acts_2.acts[rows_2]
        if weighting == "mean":
            w1 = w2 = (m1 + m2) * 0.5
        else:
            w1, w2 = m1, m2
        for a_name, b_name, w, scores in ((first, second, w1, scores_1), (second, first, w2, scores_2)):
            tables.append(_direction(a_name, b_name, w, np.asarray(scores), n, labels))
    return HeadToHead(pa.concat_tables(tables).combine_chunks(), summaries)


def run_profiles(run: RunDir) -> dict[str, pa.Table]:
    """The strengths and weaknesses profiles of a model's run directory (`model_concepts_table`'s input)."""
    tables = {name: run.read_table(name) for name in PROFILE_OF_KIND.values()}
    missing = [name for name, table in tables.items() if table is None]
    if missing:
        raise InputError(f"{run.path}: no {', '.join(missing)}; made before profiles were written?")
    return {name: table for name, table in tables.items() if table is not None}


def _judged_first(entry: dict[str, Any]) -> tuple[int, float, int]:
    """Confirmed first, then the candidates a split tested (by q-value), then those no split chose."""
    if entry["confirmed"]:
        return (0, 0.0, entry["rank"])
    if entry["heldout_residual"] is not None:
        return (1, entry["q_value"] if entry["q_value"] is not None else 1.0, entry["rank"])
    return (2, 0.0, entry["rank"])


def model_concepts_table(profiles: Mapping[str, Mapping[str, pa.Table]], top_k: int | None = None) -> pa.Table:
    """Per model, the concepts it wins on and loses on: the first `top_k` entries of its strengths and
    weaknesses profiles (model → file name → table, as `publish_metrics` writes them), those confirmed held
    out first, then the candidates a split tested, then those no split chose, each with its held-out interval
    where it has one — not the in-sample extremes of X_model, which rows that did not choose them need not
    repeat."""
    records: list[dict[str, Any]] = []
    for model, tables in profiles.items():
        for kind, name in PROFILE_OF_KIND.items():
            entries = sorted(tables[name].to_pylist(), key=_judged_first)
            for rank, e in enumerate(entries[:top_k], start=1):
                records.append(
                    {"model": model, "kind": kind, "rank": rank, "n_active_rows": e["n_rows"]}
                    | {k: e[k] for k in _COPIED}
                )
    return pa.Table.from_pylist(records, schema=MODEL_CONCEPTS_SCHEMA)


def _top(table: pa.Table, k: int, min_active: int) -> dict[str, list[dict[str, Any]]]:
    frame = table.to_pandas()
    frame = frame[frame.n_active >= min_active]
    out: dict[str, list[dict[str, Any]]] = {}
    for (a, b), group in frame.groupby(["model_a", "model_b"], sort=True):
        ordered = group.sort_values(["win_rate", "n_active", "concept_id"], ascending=[False, False, True])
        cols = ["concept_id", "label", "win_rate", "n_active"]
        out[f"{a} vs {b}"] = json.loads(ordered.head(k)[cols].to_json(orient="records"))
    return out


def write_head_to_head(
    out: ArenaDir,
    h2h: HeadToHead,
    models_table: pa.Table | None = None,
    *,
    top_k: int = 20,
    min_active: int = 5,
) -> None:
    """head_to_head.parquet (+ model_concepts.parquet) and a JSON summary into `out` (being built)."""
    out.write(S.HEAD_TO_HEAD_FILE, h2h.table)
    summary: dict[str, Any] = {
        "pairs": [vars(p) for p in h2h.pairs],
        f"top_{top_k}_by_pair (n_active >= {min_active})": _top(h2h.table, top_k, min_active),
    }
    if models_table is not None:
        out.write(S.MODEL_CONCEPTS_FILE, models_table)
        summary["model_concepts"] = models_table.to_pylist()
    out.write_json(S.HEAD_TO_HEAD_JSON, summary, ensure_ascii=False)
