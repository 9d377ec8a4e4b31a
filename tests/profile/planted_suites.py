"""Seeded suites for the held-out judgement (tests/profile/test_verdicts.py), written with pyarrow in one go.

Rows carry `type` × `level` metadata; concepts 20..63 fire at random (4 a row), concept 10 on the `geo` rows
(it tracks metadata); the hidden property, when planted, is carried by concepts 5, 6 (and 7) and its rows'
prompts hold a figure ("[asy] draw …"). Every cell's success rate is set by `cell_rates`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cg_ray import schemas as S

D_SAE = 64
TYPES = ("alg", "geo", "num")
WORDS = np.array(["solve", "compute", "find", "value", "number", "total", "sum", "given", "each", "what"])


def write_suite(
    path: Path,
    seed: int,
    n: int = 6000,
    *,
    cell_effects: bool = True,
    hidden_share: float = 0.0,
    hidden_drop: float = 0.0,
    spread: bool = False,
    answers_per_question: int = 1,
    four_answer_share: float = 0.0,
) -> np.ndarray:
    """Write rows.parquet; return the hidden property's rows (bool per row).

    `cell_effects`: cells differ in success rate (else every row has the same); `hidden_share` of the rows
    carry the hidden property, which lowers their success rate by `hidden_drop` in every cell; `spread`: three
    concepts share the property's rows (5 on the first third, 6 on the middle, 7 on the last, overlapping a
    little), else 5 and 6 both fire on all of them. `answers_per_question` rows share one prompt (a group); with
    `four_answer_share`, that share of the rows are questions answered 4 times (the rest once)."""
    rng = np.random.default_rng(seed)
    if four_answer_share:
        many = round(n * four_answer_share / 4)
        per = np.r_[np.full(many, 4), np.ones(n - 4 * many, np.int64)]
    else:
        per = np.full(n // answers_per_question, answers_per_question)
    q = per.size
    question = np.repeat(np.arange(q), per)
    types = rng.integers(0, 3, q)[question]
    levels = rng.integers(1, 6, q)[question]
    hidden = (rng.random(q) < hidden_share)[question]
    p = 0.85 - 0.06 * levels if cell_effects else np.full(n, 0.6)
    if cell_effects:
        p = np.where((types == 1) & (levels == 5), 0.15, p)
    p = np.clip(np.where(hidden, p - hidden_drop, p), 0.02, 1.0)
    scores = (rng.random(n) < p).astype(float)
    ids: list[list[int]] = []
    acts: list[list[float]] = []
    hidden_rows = np.flatnonzero(hidden)
    thirds = np.array_split(hidden_rows, 3)
    for i in range(n):
        row_ids = [int(c) for c in rng.choice(np.arange(20, D_SAE), size=4, replace=False)]
        if hidden[i]:
            if spread:
                pos = int(np.searchsorted(hidden_rows, i))
                part = min(pos * 3 // max(hidden_rows.size, 1), 2)
                row_ids.append(5 + part)
                if rng.random() < 0.15:  # a little overlap between the three
                    row_ids.append(5 + (part + 1) % 3)
            else:
                row_ids += [5, 6]
        if types[i] == 1:
            row_ids.append(10)
        ids.append(sorted(set(row_ids)))
        acts.append([float(0.5 + rng.random()) for _ in ids[-1]])
    del thirds
    words = rng.choice(WORDS, size=(q, 6))
    prompts = []
    for i in range(n):
        text = f"Problem {question[i]}: {' '.join(words[question[i]])} the answer."
        if hidden[i]:
            text += ' [asy] draw((0,0)--(1,1)); label("A", (0,0)); [/asy] as shown.'
        prompts.append(text)
    _write(path, [f"r{i}" for i in range(n)], scores, ids, acts, types, levels, prompts)
    return hidden


EFFECTS_D_SAE = 128
EFFECT_CONCEPT = 20  # effect k is carried by concept 20 + k (k < 20); 40..127 fire at random, 4 a row
BROAD_CONCEPT = 11  # `write_effects_suite(broad=…)`: fires on effect 0's rows and as many others again


def write_effects_suite(
    path: Path,
    seed: int,
    effects: list[tuple[float, float]],
    n: int = 4000,
    *,
    four_answer_share: float = 0.2,
    broad: float = 0.0,
) -> list[np.ndarray]:
    """Write a suite with several real effects: effect k (share, drop) holds a random `share` of the questions,
    lowers their success rate by `drop` inside every `type` × `level` cell, is carried by concept 20 + k
    alone and marked in its prompts by words of its own ("shape{k} figure{k}"), so each is one failure mode
    of its own. Rows may carry several effects (the drops add). Cells differ as in `write_suite`; a share
    `four_answer_share` of the rows are questions answered four times. `broad`: concept `BROAD_CONCEPT` fires on
    effect 0's rows (strongly: s̃ 2–3) and, weakly (s̃ 0.375–0.525, above its firing threshold), on that share
    of the other questions, whose prompts hold effect 0's word "figure0" too: a broad concept sharing the
    effect's words, whose s̃-weighted residual can rank it before the effect's own concept while half its rows
    score as their cells predict. Returns each effect's rows (bool)."""
    if len(effects) > 20:
        raise ValueError("at most 20 effects")
    rng = np.random.default_rng(seed)
    many = round(n * four_answer_share / 4)
    per = np.r_[np.full(many, 4), np.ones(n - 4 * many, np.int64)]
    question = np.repeat(np.arange(per.size), per)
    types = rng.integers(0, 3, per.size)[question]
    levels = rng.integers(1, 6, per.size)[question]
    p = np.where((types == 1) & (levels == 5), 0.15, 0.85 - 0.06 * levels)
    carried = [(rng.random(per.size) < share)[question] for share, _ in effects]
    for rows, (_, drop) in zip(carried, effects, strict=True):
        p = np.where(rows, p - drop, p)
    scores = (rng.random(n) < np.clip(p, 0.02, 1.0)).astype(float)
    noise = np.argsort(rng.random((n, EFFECTS_D_SAE - 40)), axis=1)[:, :4] + 40
    # Drawn only when asked, after every other draw but the activations: suites without it are unchanged.
    wide = carried[0] | (rng.random(per.size) < broad)[question] if broad else np.zeros(n, bool)
    ids = []
    for i in range(n):
        own = [EFFECT_CONCEPT + k for k, rows in enumerate(carried) if rows[i]] + [BROAD_CONCEPT] * bool(wide[i])
        ids.append(sorted({*noise[i].tolist(), *own, *([10] if types[i] == 1 else [])}))
    acts = [(0.5 + rng.random(len(row))).tolist() for row in ids]
    for i in np.flatnonzero(wide):  # strong on the effect's rows, a weak tail (still firing) on the others
        at = ids[i].index(BROAD_CONCEPT)
        acts[i][at] = 1.5 + acts[i][at] if carried[0][i] else 0.3 + 0.15 * acts[i][at]
    words = rng.choice(WORDS, size=(per.size, 6))
    prompts = [
        f"Problem {question[i]}: {' '.join(words[question[i]])} the answer."
        + "".join(f" shape{k} figure{k}" for k, rows in enumerate(carried) if rows[i])
        + (" figure0" if wide[i] and not carried[0][i] else "")
        for i in range(n)
    ]
    _write(path, [f"r{i}" for i in range(n)], scores, ids, acts, types, levels, prompts, EFFECTS_D_SAE)
    return carried


def write_clustered_null(
    path: Path,
    seed: int,
    n: int = 4000,
    *,
    group_size: int = 4,
    group_sd: float = 0.25,
    shared_concepts: int = 0,
    grouped_ids: bool = True,
) -> np.ndarray:
    """Write a clustered null: templates of `group_size` rows, each row in its own random `type` × `level` cell
    (templates span cells), all rows of a template sharing one random effect on the success rate (normal, sd
    `group_sd`) and `shared_concepts` of their 4 concepts (the template's own, from 20..63; the rest drawn for
    each row alone); concept 10 on the `geo` rows. Nothing lowers any rows beyond their cell and their
    template's draw, so no finding beyond `type` × `level` is real. Row ids "t<template>#<answer>" group the
    template's rows (`grouped_ids` False: ids without '#' and a prompt a row, so every row is its own group).
    Returns each row's template."""
    rng = np.random.default_rng(seed)
    n_groups = n // group_size
    template = np.repeat(np.arange(n_groups), group_size)
    types = rng.integers(0, 3, n)
    levels = rng.integers(1, 6, n)
    p = np.where((types == 1) & (levels == 5), 0.15, 0.85 - 0.06 * levels)
    p = np.clip(p + rng.normal(0.0, group_sd, n_groups)[template], 0.02, 0.98)
    scores = (rng.random(n) < p).astype(float)
    shared = [rng.choice(np.arange(20, D_SAE), size=shared_concepts, replace=False) for _ in range(n_groups)]
    own = [rng.choice(np.arange(20, D_SAE), size=4 - shared_concepts, replace=False) for _ in range(n)]
    ids = [
        sorted({*shared[template[i]].tolist(), *own[i].tolist(), *([10] if types[i] == 1 else [])}) for i in range(n)
    ]
    acts = [[float(0.5 + rng.random()) for _ in row] for row in ids]
    words = rng.choice(WORDS, size=(n_groups, 6))
    if grouped_ids:
        row_ids = [f"t{template[i]}#{i % group_size}" for i in range(n)]
        prompts = [f"Template {g}: {' '.join(words[g])} the answer." for g in template]
    else:
        row_ids = [f"r{i}" for i in range(n)]
        prompts = [f"Row {i} of template {g}: {' '.join(words[g])} the answer." for i, g in enumerate(template)]
    _write(path, row_ids, scores, ids, acts, types, levels, prompts)
    return template


def _write(
    path: Path,
    row_ids: list[str],
    scores: np.ndarray,
    ids: list[list[int]],
    acts: list[list[float]],
    types: np.ndarray,
    levels: np.ndarray,
    prompts: list[str],
    d_sae: int = D_SAE,
) -> None:
    """rows.parquet of one benchmark `math` with `type` × `level` metadata and a prompt a row, in one go."""
    meta = [json.dumps({"type": TYPES[t], "level": f"Level {lv}"}) for t, lv in zip(types, levels, strict=True)]
    schema = S.rows_schema_with_d_sae(d_sae).append(S.METADATA_FIELD).append(pa.field("prompt", pa.string()))
    n = len(row_ids)
    table = pa.Table.from_pydict(
        {
            "row_id": row_ids,
            "benchmark": ["math"] * n,
            "score": scores.tolist(),
            "concept_ids": ids,
            "concept_acts": acts,
            "model": [None] * n,
            "n_tokens": [10] * n,
            "metadata": meta,
            "prompt": prompts,
        },
        schema=schema,
    )
    pq.write_table(table, path)
