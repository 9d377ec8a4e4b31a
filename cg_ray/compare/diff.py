"""`cg-ray diff RUN_A RUN_B`: per concept, how performance changed from run A to run B on the rows both
runs share (Δ = B − A), with paired-bootstrap intervals; the concepts that regressed and improved most
confidently, with descriptions and the rows that flipped.

Ranking rule. A concept is *confident* when it is active (s̃ > 0, in A or in B) in at least `min_rows`
paired rows and the interval of ΔX_model excludes 0. Regressions are ordered by the interval's upper bound
(the bound nearest 0; most negative first), improvements by its lower bound (largest first): the change we
are confident of at least, so a large but noisy change ranks below a smaller, well-supported one — the same
rule as the weakness profile's default `upper_bound` order. The intervals are per concept: among N eligible
concepts with no change at all, about N·(1 − confidence)/2 per direction would still exclude 0, so diff.json
reports that number beside the counts (concepts also share rows, so their intervals are not independent).

With `rank_by="relative"` the same rule applies to the change beyond the benchmarks' mean-score change
(`cg_ray.compare.bootstrap`, "Relative change"): when B is better everywhere, that is what finds the
concepts B improved least.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

import numpy as np
from scipy import sparse

from cg_ray.arrays import BoolArray, FloatArray, IntArray
from cg_ray.artifacts.layout import RunDir
from cg_ray.compare.bootstrap import PairedDelta, PairedSample, paired_bootstrap
from cg_ray.compare.config import DiffConfig
from cg_ray.compare.heldout_diff import HeldOutChanges, judge_changes
from cg_ray.compare.identity import check_same_reader
from cg_ray.compare.runs import DiffRun, Pairing, open_diff_run, pair_rows, row_texts
from cg_ray.describe.outputs import read_sentences


class ChangedRow(TypedDict):
    """One row of a concept that flipped (diff.json's `examples`): the positions are swapped for the texts
    once they are read."""

    benchmark: str
    row_id: str
    score_a: float
    score_b: float
    s_tilde_a: float
    s_tilde_b: float
    position_a: NotRequired[int]
    position_b: NotRequired[int]
    prompt: NotRequired[str | None]
    response_a: NotRequired[str | None]
    response_b: NotRequired[str | None]


@dataclass
class DiffResult:
    a: DiffRun
    b: DiffRun
    pairing: Pairing
    config: DiffConfig
    checked_fields: list[str]
    concept_ids: IntArray  # k: the concepts active in the paired rows (columns of `delta`)
    delta: PairedDelta
    n_active: IntArray  # k: paired rows where the concept is active in A or B
    n_active_a: IntArray  # k
    n_active_b: IntArray  # k
    n_active_bench: IntArray  # B × k
    regressed: list[int]  # columns into concept_ids of every confident regression, in rank order
    improved: list[int]  # the same for improvements; the first `config.top` of each are listed
    heldout: HeldOutChanges  # the changes beyond their benchmark, judged on rows that did not choose them
    examples: dict[int, dict[str, list[ChangedRow]]]  # concept id → direction → rows
    descriptions: dict[int, str]
    labels: dict[int, str]
    seconds: dict[str, float] = field(default_factory=dict)

    def column(self, concept_id: int) -> int:
        return int(np.searchsorted(self.concept_ids, concept_id))


def paired_sample(a: DiffRun, b: DiffRun, pairing: Pairing) -> tuple[PairedSample, IntArray]:
    """The paired rows' s̃ restricted to the concepts active in them (A or B), and those concept ids."""
    sub_a, sub_b = a.acts[pairing.pos_a], b.acts[pairing.pos_b]
    sub_a.eliminate_zeros()
    sub_b.eliminate_zeros()
    concepts = np.unique(np.concatenate([sub_a.indices, sub_b.indices])).astype(np.int64)
    sample = PairedSample(
        acts_a=sub_a[:, concepts].tocsr(),
        acts_b=sub_b[:, concepts].tocsr(),
        scores_a=a.scores[pairing.pos_a],
        scores_b=b.scores[pairing.pos_b],
        codes=pairing.codes,
        n_benchmarks=len(pairing.benchmarks),
    )
    return sample, concepts


def _active_counts(sample: PairedSample) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    on_a, on_b = (sample.acts_a > 0).astype(np.int64), (sample.acts_b > 0).astype(np.int64)
    either = on_a.maximum(on_b)
    onehot = sparse.csr_matrix(
        (np.ones(sample.codes.size), (sample.codes, np.arange(sample.codes.size))),
        shape=(sample.n_benchmarks, sample.codes.size),
    )
    per_bench = np.asarray((onehot @ either).todense()).astype(np.int64)
    flat = [np.asarray(m.sum(axis=0)).ravel().astype(np.int64) for m in (either, on_a, on_b)]
    return flat[0], flat[1], flat[2], per_bench


def ranked_values(delta: PairedDelta, rank_by: str) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(value, low, high) of the quantity concepts are ranked by."""
    if rank_by == "relative":
        return delta.rel_delta, delta.rel_low, delta.rel_high
    return delta.x_delta, delta.x_low, delta.x_high


def eligible(delta: PairedDelta, n_active: IntArray, min_rows: int, rank_by: str = "delta") -> BoolArray:
    """Concepts that may be listed: active in ≥ min_rows paired rows, with an interval."""
    _, low, high = ranked_values(delta, rank_by)
    ok: BoolArray = (n_active >= min_rows) & ~np.isnan(low) & ~np.isnan(high)
    return ok


def rank_confident(
    delta: PairedDelta, n_active: IntArray, min_rows: int, rank_by: str = "delta"
) -> tuple[list[int], list[int]]:
    """Columns of all confidently regressed / improved concepts, in rank order (module doc: the rule)."""
    value, low, high = ranked_values(delta, rank_by)
    ok = eligible(delta, n_active, min_rows, rank_by)
    regressed = np.flatnonzero(ok & (high < 0))
    improved = np.flatnonzero(ok & (low > 0))
    regressed = regressed[np.lexsort((value[regressed], high[regressed]))]
    improved = improved[np.lexsort((-value[improved], -low[improved]))]
    return [int(c) for c in regressed], [int(c) for c in improved]


def changed_rows(
    pairing: Pairing, sample: PairedSample, column: int, config: DiffConfig
) -> dict[str, list[ChangedRow]]:
    """Rows of one concept that went right → wrong and wrong → right, most salient (max s̃ of A, B) first."""
    act_a = sample.acts_a[:, column].toarray().ravel()
    act_b = sample.acts_b[:, column].toarray().ravel()
    right_a = sample.scores_a >= config.right_threshold
    right_b = sample.scores_b >= config.right_threshold
    active = (act_a > 0) | (act_b > 0)
    salience = np.maximum(act_a, act_b)
    out: dict[str, list[ChangedRow]] = {}
    for key, mask in (("right_in_a_wrong_in_b", right_a & ~right_b), ("wrong_in_a_right_in_b", ~right_a & right_b)):
        rows = np.flatnonzero(active & mask)
        rows = rows[np.argsort(-salience[rows], kind="stable")[: config.examples]]
        out[key] = [
            {
                "benchmark": pairing.benchmarks[int(pairing.codes[r])],
                "row_id": pairing.row_ids[int(r)],
                "score_a": float(sample.scores_a[r]),
                "score_b": float(sample.scores_b[r]),
                "s_tilde_a": float(act_a[r]),
                "s_tilde_b": float(act_b[r]),
                "position_a": int(pairing.pos_a[r]),
                "position_b": int(pairing.pos_b[r]),
            }
            for r in rows
        ]
    return out


def _attach_texts(a: DiffRun, b: DiffRun, examples: dict[int, dict[str, list[ChangedRow]]]) -> None:
    rows = [e for per in examples.values() for group in per.values() for e in group]
    texts_a = row_texts(a, sorted({e["position_a"] for e in rows}))
    texts_b = row_texts(b, sorted({e["position_b"] for e in rows}))
    for e in rows:
        ta, tb = texts_a.get(e.pop("position_a"), {}), texts_b.get(e.pop("position_b"), {})
        e["prompt"] = tb.get("prompt") or ta.get("prompt") or tb.get("text") or ta.get("text")
        e["response_a"], e["response_b"] = ta.get("response"), tb.get("response")


def concept_labels(a: DiffRun, b: DiffRun) -> dict[int, str]:
    out: dict[int, str] = {}
    for run in (a, b):  # B's label wins where both have one (the same SAE: normally the same label)
        if "label" in run.concepts.column_names:
            ids = run.concepts.column("concept_id").to_pylist()
            out |= {int(c): str(x) for c, x in zip(ids, run.concepts.column("label").to_pylist(), strict=True) if x}
    return out


def compute_diff(run_a: RunDir, run_b: RunDir, config: DiffConfig | None = None) -> DiffResult:
    """Everything `cg-ray diff` writes, computed from the two run directories (nothing is written here)."""
    config = config or DiffConfig()
    started = time.perf_counter()
    a, b = open_diff_run(run_a, "A"), open_diff_run(run_b, "B")
    checked = check_same_reader(
        a.identity, b.identity, (str(a.path), str(b.path)), assume_same=config.assume_same_reader
    )
    pairing = pair_rows(a, b)
    sample, concepts = paired_sample(a, b, pairing)
    loaded = time.perf_counter()
    delta = paired_bootstrap(sample, resamples=config.resamples, seed=config.seed, confidence=config.confidence)
    booted = time.perf_counter()
    n_active, n_a, n_b, per_bench = _active_counts(sample)
    regressed, improved = rank_confident(delta, n_active, config.min_rows, config.rank_by)
    heldout = judge_changes(
        sample,
        min_rows=config.min_rows,
        tried=config.tested_per_split,
        splits=config.splits,
        fdr=config.fdr,
        seed=config.seed,
    )
    judged = time.perf_counter()
    listed = [*regressed[: config.top], *improved[: config.top]]
    listed += [c for c, _ in (*heldout.regressed[: config.top], *heldout.improved[: config.top]) if c not in listed]
    examples = {int(concepts[c]): changed_rows(pairing, sample, c, config) for c in listed}
    _attach_texts(a, b, examples)
    return DiffResult(
        a=a,
        b=b,
        pairing=pairing,
        config=config,
        checked_fields=checked,
        concept_ids=concepts,
        delta=delta,
        n_active=n_active,
        n_active_a=n_a,
        n_active_b=n_b,
        n_active_bench=per_bench,
        regressed=regressed,
        improved=improved,
        heldout=heldout,
        examples=examples,
        descriptions={**read_sentences(a.run), **read_sentences(b.run)},
        labels=concept_labels(a, b),
        seconds={
            "load": round(loaded - started, 3),
            "bootstrap": round(booted - loaded, 3),
            "held_out": round(judged - booted, 3),
        },
    )
