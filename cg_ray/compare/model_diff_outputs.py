"""What `cg-ray diff-models` writes, published atomically into one directory: diff_models.parquet (one row
per concept active in either model's answers), hypotheses.json (versioned: inputs, skips, settings, the
confirmation counts and the hypotheses with their verdicts and examples) and diff_models.html."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import pyarrow as pa
from scipy import sparse

from cg_ray import __version__
from cg_ray.artifacts.layout import MODEL_DIFF_HTML, MODEL_DIFF_JSON, MODEL_DIFF_TABLE, ModelDiffDir
from cg_ray.artifacts.publish import atomic_directory
from cg_ray.compare.model_diff import DIRECTIONS, ConceptStats
from cg_ray.compare.model_diff_job import ModelDiffResult
from cg_ray.compare.pairs import Pair
from cg_ray.profile.decision import Verdict

KIND = "cg_ray.diff_models"
TABLE_FILE, JSON_FILE, HTML_FILE = MODEL_DIFF_TABLE, MODEL_DIFF_JSON, MODEL_DIFF_HTML  # named in layout.py
SNIPPET_CHARS = 400
METHOD = (
    "per concept: fraction of each model's answers where it is active (pooled s̃ over the response tokens > "
    "threshold); delta = B - A with Newcombe's hybrid score interval for paired proportions (method 10, "
    "Wilson score intervals, continuity-corrected phi); hypotheses formed on one half of each of R seeded "
    "splits of the prompts and tested on the other (mean of b - a per prompt, one-sided t), confirmed when the "
    "splits' median Benjamini-Hochberg q-value x 2 is at most fdr"
)


def _num(x: Any) -> float | None:
    f = float(x)
    return f if math.isfinite(f) else None


class SideStats(TypedDict):
    """A concept's presence in either model's answers over some prompts, and the change (B − A) with its
    interval (None where undefined)."""

    n: int
    active_a: int
    active_b: int
    frac_a: float | None
    frac_b: float | None
    delta: float | None
    low: float | None
    high: float | None


class PairedExample(TypedDict):
    """A prompt where the concept is in the favoured model's answer, with both answers (snippets)."""

    id: str
    s_tilde_a: float
    s_tilde_b: float
    prompt: str
    response_a: str
    response_b: str


class HypothesisVerdict(TypedDict):
    """A hypothesis judged over the splits: Δ on the prompts that did not form it (the median split's), the
    interval at the level it would pay if confirmed (it excludes 0 whenever confirmed), q and the MDE."""

    estimate: float | None
    low: float | None
    high: float | None
    q_value: float
    splits_selected: int
    n_heldout: int
    mde: float | None


class Hypothesis(TypedDict):
    """One hypothesis of hypotheses.json: formed by some splits, judged on the prompts that did not form it."""

    direction: str
    rank: int
    concept_id: int
    label: str | None
    description: str | None
    statement: str
    all: SideStats  # on every compared prompt: descriptive
    heldout: HypothesisVerdict
    confirmed: bool
    examples: list[PairedExample]


def _side(stats: ConceptStats, c: int) -> SideStats:
    return {
        "n": stats.n,
        "active_a": int(stats.active_a[c]),
        "active_b": int(stats.active_b[c]),
        "frac_a": _num(stats.frac_a[c]),
        "frac_b": _num(stats.frac_b[c]),
        "delta": _num(stats.delta[c]),
        "low": _num(stats.low[c]),
        "high": _num(stats.high[c]),
    }


def _snippet(text: str) -> str:
    return text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS] + "…"


def examples(result: ModelDiffResult, c: int, direction: str) -> list[PairedExample]:
    return paired_examples(result.acts_a, result.acts_b, result.pairs, c, direction, result.config.examples)


def paired_examples(
    acts_a: sparse.csr_matrix, acts_b: sparse.csr_matrix, pairs: list[Pair], c: int, direction: str, k: int
) -> list[PairedExample]:
    """Up to k prompts where the concept is in the favoured model's answer and not in the other's, by s̃
    (then any prompt where it is in the favoured answer), with both answers."""
    fav, other = (acts_a, acts_b) if direction == "a_more" else (acts_b, acts_a)
    s_fav = np.asarray(fav[:, c].todense()).ravel()
    s_other = np.asarray(other[:, c].todense()).ravel()
    present = np.flatnonzero(s_fav > 0)
    order = present[np.lexsort((present, -s_fav[present], s_other[present] > 0))]
    out: list[PairedExample] = []
    for i in order[:k]:
        pair = pairs[i]
        s_a, s_b = (s_fav[i], s_other[i]) if direction == "a_more" else (s_other[i], s_fav[i])
        out.append(
            {
                "id": pair.id,
                "s_tilde_a": float(s_a),
                "s_tilde_b": float(s_b),
                "prompt": _snippet(pair.prompt),
                "response_a": _snippet(pair.response_a),
                "response_b": _snippet(pair.response_b),
            }
        )
    return out


def statement(direction: str, names: tuple[str, str], text: str) -> str:
    more, less = names if direction == "a_more" else names[::-1]
    return f"{more}'s answers more often contain {text} (than {less}'s)"


def _verdict(v: Verdict) -> HypothesisVerdict:
    return {
        "estimate": v.estimate,
        "low": v.low,
        "high": v.high,
        "q_value": v.q_value,
        "splits_selected": v.splits_selected,
        "n_heldout": v.n_heldout,
        "mde": v.mde,
    }


def hypotheses(result: ModelDiffResult) -> list[Hypothesis]:
    """Per direction the first `top` hypotheses any split formed, confirmed first."""
    out: list[Hypothesis] = []
    for direction in DIRECTIONS:
        for rank, (c, verdict) in enumerate(result.confirmation.judged[direction][: result.config.top], 1):
            label, description = result.concept_names(c)
            text = description or label or f"concept {c}"
            out.append(
                {
                    "direction": direction,
                    "rank": rank,
                    "concept_id": c,
                    "label": label,
                    "description": description,
                    "statement": statement(direction, result.names, text),
                    "all": _side(result.stats, c),
                    "heldout": _verdict(verdict),
                    "confirmed": verdict.confirmed,
                    "examples": examples(result, c, direction),
                }
            )
    return out


def concept_table(result: ModelDiffResult) -> pa.Table:
    s = result.stats
    ids = np.flatnonzero(s.either() > 0)
    n = max(s.n, 1)
    mean_a = np.asarray(result.acts_a.sum(axis=0)).ravel() / n
    mean_b = np.asarray(result.acts_b.sum(axis=0)).ravel() / n
    direction = np.full(len(s.delta), None, dtype=object)
    verdicts: dict[int, Verdict] = {}
    for key in DIRECTIONS:  # a concept formed both ways keeps the better-judged direction (confirmed, lower q)
        for c, v in result.confirmation.judged[key]:
            best = verdicts.get(c)
            if best is None or (v.confirmed, -v.q_value) > (best.confirmed, -best.q_value):
                direction[c], verdicts[c] = key, v
    labels = [result.concept_names(int(c)) for c in ids]
    judged = [verdicts.get(int(c)) for c in ids]
    columns: dict[str, pa.Array] = {
        "concept_id": pa.array(ids.astype(np.int32)),
        "label": pa.array([lab for lab, _ in labels], pa.string()),
        "description": pa.array([d for _, d in labels], pa.string()),
        "n_active_a": pa.array(s.active_a[ids], pa.int64()),
        "n_active_b": pa.array(s.active_b[ids], pa.int64()),
        "n_active_both": pa.array(s.both[ids], pa.int64()),
        "frac_a": pa.array(s.frac_a[ids]),
        "frac_b": pa.array(s.frac_b[ids]),
        "delta": pa.array(s.delta[ids]),
        "delta_low": pa.array(s.low[ids]),
        "delta_high": pa.array(s.high[ids]),
        "mean_s_tilde_a": pa.array(mean_a[ids]),
        "mean_s_tilde_b": pa.array(mean_b[ids]),
    }
    for name, attr in (("heldout_delta", "estimate"), ("heldout_low", "low"), ("heldout_high", "high")):
        columns[name] = pa.array([None if v is None else getattr(v, attr) for v in judged], pa.float64())
    columns["q_value"] = pa.array([None if v is None else v.q_value for v in judged], pa.float64())
    columns["hypothesis"] = pa.array(direction[ids].tolist(), pa.string())
    columns["confirmed"] = pa.array([None if v is None else v.confirmed for v in judged], pa.bool_())
    return pa.table(columns)


def summary_dict(result: ModelDiffResult) -> dict[str, Any]:
    cfg, s = result.config, result.stats
    eligible = int((np.maximum(s.active_a, s.active_b) >= cfg.min_rows).sum())
    confident = {"a_more": int(((s.high < 0) & (np.maximum(s.active_a, s.active_b) >= cfg.min_rows)).sum())}
    confident["b_more"] = int(((s.low > 0) & (np.maximum(s.active_a, s.active_b) >= cfg.min_rows)).sum())
    return {
        "kind": KIND,
        "cg_ray_version": __version__,
        "models": {"a": result.names[0], "b": result.names[1]},
        "inputs": {k: getattr(cfg, k) for k in ("answers", "a", "b", "prompts", "turn", "limit")},
        "reader": result.reader,
        "config": cfg.model_dump(mode="json"),
        "method": METHOD,
        "counts": {
            **result.paired.counts,
            "compared": s.n,
            "skipped_ids": result.paired.skipped,
            "response_tokens_a": int(result.n_tokens_a.sum()),
            "response_tokens_b": int(result.n_tokens_b.sum()),
            "concepts_active": int((s.either() > 0).sum()),
            "eligible_all_prompts": eligible,
            "confident_all_prompts": confident,
            "expected_by_chance_per_direction": round(eligible * (1 - cfg.confidence) / 2, 1),
        },
        "confirmation": result.confirmation.counts(),
        "hypotheses": hypotheses(result),
        "seconds": result.seconds,
        "files": [TABLE_FILE, JSON_FILE, HTML_FILE],
    }


def write_diff_models(result: ModelDiffResult, out: Path, *, overwrite: bool = False) -> dict[str, Any]:
    """Publish into `out` (complete or absent); returns what hypotheses.json holds."""
    with atomic_directory(out, overwrite=overwrite) as tmp:
        written = write_files(result, ModelDiffDir(tmp))
    return written


def write_files(result: ModelDiffResult, files: ModelDiffDir) -> dict[str, Any]:
    """The three files into `files` (the caller publishes it); returns what hypotheses.json holds."""
    from cg_ray.report.comparisons import model_diff_view
    from cg_ray.report.html import write_view

    files.write_table(TABLE_FILE, concept_table(result))
    written = files.write_json(JSON_FILE, summary_dict(result), allow_nan=False)
    write_view(files, HTML_FILE, model_diff_view(files), "model_diff")  # the explorer's app, embedded
    return written
