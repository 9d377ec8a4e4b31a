"""Two readers of the same rows compared at the level of their concepts (the paper's open question 2, and
Paulo & Belrose 2026 on seeds): which latents correspond, whether matched concepts rank alike on X_model and
X_bench, and whether the rows of each reader's weakest concepts are the same rows.

Latents are matched one to one by the Hungarian method (scipy's `linear_sum_assignment`): on the cosine of
their decoder directions when both SAEs read the same layer (same residual space), else on the Pearson
correlation of their activations over the run's rows (the only common ground of two layers).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from scipy import optimize, sparse, stats

from cg_ray import schemas as S
from cg_ray.artifacts.layout import RunDir
from cg_ray.artifacts.rows import RowsFile, iter_row_batches, open_rows
from cg_ray.profile.pool import PoolRows

FloatMatrix = npt.NDArray[np.float64]
DECODER = "decoder cosine"
ACTIVATIONS = "activation correlation"
THRESHOLDS = (0.5, 0.7, 0.9)


@dataclass(frozen=True)
class ReaderSide:
    """One reader of the rows: its name, SAE folder (None: no decoder at hand), layer, run directory."""

    name: str
    folder: Path | None
    layer: int | None
    run: RunDir


@dataclass(frozen=True)
class Matching:
    method: str
    a: npt.NDArray[np.int64]  # A's live latents, matched
    b: npt.NDArray[np.int64]  # their partners in B
    similarity: FloatMatrix  # of each pair
    n_live: int  # A's latents active on some row


def decoder(folder: Path) -> FloatMatrix:
    """Unit decoder directions (d_sae × d_in) of an sae-lens SAE folder."""
    from safetensors.numpy import load_file

    w = load_file(str(folder / "sae_weights.safetensors"))["W_dec"].astype(np.float64)
    norms = np.linalg.norm(w, axis=1, keepdims=True)
    out: FloatMatrix = w / np.where(norms > 0, norms, 1.0)
    return out


def activations(rows: RowsFile, model: str | None) -> sparse.csr_matrix:
    """rows × d_sae of s̃."""
    parts = []
    for batch in iter_row_batches(rows, model=model):
        n = len(batch.offsets) - 1
        parts.append(
            sparse.csr_matrix(
                (np.asarray(batch.concept_acts, np.float64), np.asarray(batch.concept_ids), batch.offsets),
                shape=(n, rows.d_sae),
            )
        )
    return sparse.vstack(parts).tocsr() if parts else sparse.csr_matrix((0, rows.d_sae))


CHUNK_ROWS = 2048  # rows made dense at a time: 2,048 × 4,608 float64 is 75 MB


def correlation(a: sparse.csr_matrix, b: sparse.csr_matrix) -> FloatMatrix:
    """Pearson correlation of every column of `a` with every column of `b` over the rows (0 where one is
    constant). The cross products accumulate over row chunks made dense (one BLAS product each: a mean-pooled
    row holds about a fifth of the latents, too dense for sparse products to win), so memory stays
    O(chunk × latents + latents²) however many rows there are (benchmarks/bench_sensitivity.py)."""
    n = a.shape[0]
    cross = np.zeros((a.shape[1], b.shape[1]))
    for lo in range(0, n, CHUNK_ROWS):
        cross += a[lo : lo + CHUNK_ROWS].toarray().T @ b[lo : lo + CHUNK_ROWS].toarray()
    mean_a = np.asarray(a.mean(axis=0)).ravel()
    mean_b = np.asarray(b.mean(axis=0)).ravel()
    cov = cross / n - np.outer(mean_a, mean_b)
    sd_a = np.sqrt(np.maximum(np.asarray(a.multiply(a).mean(axis=0)).ravel() - mean_a**2, 0.0))
    sd_b = np.sqrt(np.maximum(np.asarray(b.multiply(b).mean(axis=0)).ravel() - mean_b**2, 0.0))
    denom = np.outer(sd_a, sd_b)
    out: FloatMatrix = np.divide(cov, denom, out=np.zeros_like(cov), where=denom > 0)
    return out


def match(a: ReaderSide, b: ReaderSide, acts_a: sparse.csr_matrix, acts_b: sparse.csr_matrix) -> Matching:
    live = np.flatnonzero(np.diff(acts_a.tocsc().indptr) > 0)
    same_space = a.layer is not None and a.layer == b.layer and a.folder is not None and b.folder is not None
    if same_space:
        assert a.folder is not None and b.folder is not None
        sim = decoder(a.folder)[live] @ decoder(b.folder).T
        method = DECODER
    else:
        sim = correlation(acts_a[:, live], acts_b)
        method = ACTIVATIONS
    rows, cols = optimize.linear_sum_assignment(sim, maximize=True)
    return Matching(method, live[rows].astype(np.int64), cols.astype(np.int64), sim[rows, cols], int(live.size))


def rank_correlations(m: Matching, a: RunDir, b: RunDir) -> tuple[int, float | None, float | None]:
    """(pairs matched at ≥ 0.5 with X_model defined under both, Spearman of X_model, of X_bench) over them."""
    ca, cb = a.read_table(S.CONCEPTS_FILE), b.read_table(S.CONCEPTS_FILE)
    if ca is None or cb is None:
        return 0, None, None
    keep = m.similarity >= THRESHOLDS[0]
    xa = {k: ca.column(k).to_numpy(zero_copy_only=False).astype(np.float64) for k in ("X_model", "X_bench")}
    xb = {k: cb.column(k).to_numpy(zero_copy_only=False).astype(np.float64) for k in ("X_model", "X_bench")}
    ia, ib = m.a[keep], m.b[keep]
    defined = ~np.isnan(xa["X_model"][ia]) & ~np.isnan(xb["X_model"][ib])
    out: list[float | None] = []
    for key in ("X_model", "X_bench"):
        ok = defined if key == "X_model" else np.ones(ia.size, bool)  # X_bench is defined for every concept
        x, y = xa[key][ia][ok], xb[key][ib][ok]
        rho = stats.spearmanr(x, y).statistic if x.size >= 3 and np.ptp(x) > 0 and np.ptp(y) > 0 else None
        out.append(None if rho is None or not np.isfinite(rho) else float(rho))
    return int(defined.sum()), out[0], out[1]


def weakest_rows(run: RunDir, rows: RowsFile, model: str | None, top: int) -> npt.NDArray[np.int64]:
    """Rows where any of the run's `top` weakest concepts (weaknesses.parquet, in rank order) fires."""
    table = run.read_table(S.WEAKNESSES_FILE, ["concept_id"])
    concepts = [int(c) for c in (table.column("concept_id").to_pylist() if table is not None else [])[:top]]
    if not concepts:
        return np.zeros(0, np.int64)
    pool = PoolRows(concepts, rows.d_sae)
    for batch in iter_row_batches(rows, model=model):
        pool.add(batch.offsets, batch.concept_ids, batch.concept_acts)
    return pool.finish().members(concepts)[0]


def jaccard(x: npt.NDArray[np.int64], y: npt.NDArray[np.int64]) -> float | None:
    union = np.union1d(x, y).size
    return float(np.intersect1d(x, y).size / union) if union else None


@dataclass(frozen=True)
class SideRows:
    """What a pair row reads of one reader's run: its rows file, s̃ per row, the rows of its weakest concepts
    (the run's own reader's, read once for all its pairs)."""

    rows: RowsFile
    acts: sparse.csr_matrix
    weakest: npt.NDArray[np.int64]


def side_rows(side: ReaderSide, model: str | None, top: int) -> SideRows:
    rows = open_rows(side.run.rows)
    return SideRows(rows, activations(rows, model), weakest_rows(side.run, rows, model, top))


def pair_row(
    a: ReaderSide, b: ReaderSide, read_a: SideRows, read_b: SideRows, confirmed: tuple[int, int]
) -> dict[str, object]:
    """One row of pairs.parquet."""
    rows_a, rows_b = read_a.rows, read_b.rows
    m = match(a, b, read_a.acts, read_b.acts)
    n_matched, rho_model, rho_bench = rank_correlations(m, a.run, b.run)
    shared = [float((m.similarity >= t).sum() / m.n_live) if m.n_live else None for t in THRESHOLDS]
    return {
        "reader_a": a.name,
        "reader_b": b.name,
        "method": m.method,
        "layer_a": a.layer if a.layer is not None else -1,
        "layer_b": b.layer if b.layer is not None else -1,
        "d_sae_a": rows_a.d_sae,
        "d_sae_b": rows_b.d_sae,
        "shared_05": shared[0],
        "shared_07": shared[1],
        "shared_09": shared[2],
        "median_similarity": float(np.median(m.similarity)) if m.similarity.size else None,
        "n_matched": n_matched,
        "spearman_X_model": rho_model,
        "spearman_X_bench": rho_bench,
        "top_rows_jaccard": jaccard(read_a.weakest, read_b.weakest),
        "confirmed_a": confirmed[0],
        "confirmed_b": confirmed[1],
    }
