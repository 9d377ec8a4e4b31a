"""The concept level: models × concepts χ_model as the CG method defines it, factored and estimated."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import sparse

from cg_ray import cli
from cg_ray import schemas as S
from cg_ray.errors import InputError
from cg_ray.skills.concepts import (
    chi_model_matrix,
    concept_frame,
    concept_weights,
    read_concept_rows,
    shipped_concept_labels,
    top_concepts,
)
from cg_ray.skills.estimate import fit_prior, posterior_estimate
from cg_ray.skills.matrix import read_long, rows_matrix

from .planted import irt_population

Suite = tuple[np.ndarray, np.ndarray, sparse.csr_matrix, Path, Path]
D_SAE = 40
N_MODELS, N_ROWS = 24, 90
SHA = "0123456789abcdef"


def _acts(tasks: np.ndarray, seed: int = 0) -> sparse.csr_matrix:
    """Each row activates 3 random concepts among 10–39; concept 7 is on exactly the rows of task 0 (equal s̃,
    so its χ_model is the task-0 mean) and concept 3 on 5 rows only."""
    rng = np.random.default_rng(seed)
    dense = np.zeros((tasks.size, D_SAE))
    for i in range(tasks.size):
        dense[i, rng.choice(np.arange(10, D_SAE), 3, replace=False)] = rng.gamma(2.0, 0.5, 3)
    dense[tasks == 0, 7] = 2.0
    dense[:5, 3] = 50.0
    return sparse.csr_matrix(dense)


def _write_concept_rows(path: Path, row_ids: list[str], acts: sparse.csr_matrix) -> None:
    table = pa.table(
        {
            S.ROW_ID: row_ids,
            S.BENCHMARK: ["suite"] * len(row_ids),
            S.MODEL: [None] * len(row_ids),
            S.SCORE: pa.array([None] * len(row_ids), pa.float64()),
            S.N_TOKENS: [10] * len(row_ids),
            S.CONCEPT_IDS: [acts[i].indices.tolist() for i in range(len(row_ids))],
            S.CONCEPT_ACTS: [acts[i].data.tolist() for i in range(len(row_ids))],
        },
        schema=S.rows_schema_with_d_sae(D_SAE),
    )
    pq.write_table(table, path)
    manifest = {"reader": {"sae": {"spec": "default", "weights_sha256": SHA}}}
    path.with_name(path.name.removesuffix(".parquet") + ".manifest.json").write_text(json.dumps(manifest))


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    scores, tasks = irt_population(n_models=N_MODELS, n_items=N_ROWS, seed=11)
    scores[2, :6] = np.nan  # a model not scored on six rows
    row_ids = [f"r{j}" for j in range(N_ROWS)]
    long = pd.DataFrame(
        [
            {"model": f"m{i:02d}", "row_id": row_ids[j], "score": scores[i, j], "task": f"t{tasks[j]}"}
            for i in range(N_MODELS)
            for j in range(N_ROWS)
        ]
    )
    long.to_csv(tmp_path / "rows.csv", index=False)
    acts = _acts(tasks)
    _write_concept_rows(tmp_path / "concepts.parquet", row_ids[::-1], sparse.csr_matrix(acts[::-1]))  # any order
    return scores, tasks, acts, tmp_path / "rows.csv", tmp_path / "concepts.parquet"


def test_chi_model_matrix_is_the_cg_definition_and_the_estimators_target(suite: Suite) -> None:
    scores, tasks, acts, _, concept_path = suite
    chi = chi_model_matrix(scores, acts, [f"m{i:02d}" for i in range(N_MODELS)])
    dense = acts.toarray()
    for m in (0, 2):
        scored = ~np.isnan(scores[m])
        with np.errstate(invalid="ignore"):
            by_hand = dense[scored].T @ scores[m][scored] / dense[scored].sum(axis=0)
        active = dense[scored].sum(axis=0) > 0
        assert np.allclose(chi.iloc[m].to_numpy()[active], by_hand[active])
        assert np.isnan(chi.iloc[m].to_numpy()[~active]).all()  # concepts 0–6, 8, 9 are never active
    assert chi.iloc[0, 7] == pytest.approx(scores[0][tasks == 0].mean())
    # with every row observed, the estimator returns exactly these χ_model values
    prior = fit_prior(scores[1:], 3)
    every = np.arange(N_ROWS)
    concepts = dense.T
    est = posterior_estimate(prior, np.ones(N_ROWS, dtype=bool), every, scores[0], tasks.astype(str), concepts)
    defined = ~np.isnan(chi.iloc[0].to_numpy())
    assert np.allclose(est.per_concept[defined], chi.iloc[0].to_numpy()[defined])
    assert np.nanmax(est.per_concept_se) < 1e-3
    rows = read_concept_rows(concept_path)
    assert rows.sae["weights_sha256"] == SHA
    assert np.allclose(rows.aligned([f"r{j}" for j in range(N_ROWS)]).toarray(), dense)
    with pytest.raises(InputError, match="'r999'"):
        rows.aligned(["r1", "r999"])


def test_top_concepts_are_the_most_covered_with_enough_rows(suite: Suite) -> None:
    _, _, acts, _, _ = suite
    top = top_concepts(acts, 5, min_rows=10)
    assert 7 in top and 3 not in top  # concept 3 has the largest total s̃ but only 5 rows
    assert 3 in top_concepts(acts, 5, min_rows=5)
    share_7 = (acts[:, 7] > 0).sum() / acts.shape[0]
    assert 7 not in top_concepts(acts, 5, min_rows=5, max_share=share_7 - 0.01)  # on too many rows
    assert 7 in top_concepts(acts, 5, min_rows=5, max_share=share_7)
    coverage = np.asarray(acts.sum(axis=0)).ravel()
    assert (np.diff(coverage[top]) <= 0).all()


def test_skills_on_the_concept_matrix_records_the_sae(suite: Suite, tmp_path: Path) -> None:
    _, _, _, rows_csv, concept_path = suite
    out = tmp_path / "skills"
    argv = ["skills", "--scores", str(rows_csv), "--concepts", str(concept_path), "--out", str(out)]
    assert cli.main([*argv, "--top-concepts", "12", "--min-concept-rows", "8", "--max-concept-share", "1"]) == 0
    summary = json.loads((out / "skills.json").read_text())
    assert summary["concepts"]["sae"]["weights_sha256"] == SHA and len(summary["concepts"]["top_concepts"]) == 12
    loadings = pd.read_csv(out / "loadings.csv", index_col="task")
    assert sorted(loadings.index) == sorted(f"c{c}" for c in summary["concepts"]["top_concepts"])
    assert cli.main(["skills", "--matrix", str(rows_csv), "--concepts", str(concept_path), "--out", str(out)]) != 0


def test_lomo_and_observed_estimate_concepts(suite: Suite, tmp_path: Path) -> None:
    scores, _, acts, rows_csv, concept_path = suite
    base = ["estimate", "--scores", str(rows_csv), "--concepts", str(concept_path), "--components", "2"]
    base += ["--top-concepts", "6", "--min-concept-rows", "8", "--max-concept-share", "0.5"]
    out = tmp_path / "lomo"
    argv = [*base, "--lomo", "--oracle", "--budgets", "0.2,1.0", "--random-repeats", "1", "--out", str(out)]
    assert cli.main(argv) == 0
    table = pd.read_csv(out / "lomo_summary.csv")
    assert set(table["method"]) == {"active", "oracle_active", "random_mean", "random_prior", "span_floor"}
    every = table[table["budget"] == 1.0].set_index("method")
    assert (every["rmse"] < 1e-9).all()  # all rows: exact, every method (and nothing left for the span floor)
    estimators = ["active", "oracle_active", "random_mean", "random_prior"]  # the floor has no per-concept figure
    assert (every.loc[estimators, "concept_rmse"] < 1e-9).all()
    partial = table[table["budget"] == 0.2].set_index("method")
    assert (partial.loc[estimators, "concept_rmse"] > 1e-3).all()
    # the weakness profile's order: exact with every row, and ordered better than chance from 20% of them
    assert (every.loc[estimators, "concept_rank_r"] > 1 - 1e-9).all()
    assert (partial.loc[["active", "random_prior"], "concept_rank_r"] > 0.2).all()
    meta = json.loads((out / "estimate.json").read_text())
    assert meta["concepts"]["sae"]["weights_sha256"] == SHA
    # a new model that has scored every row: its χ_model per concept, exact
    observed = tmp_path / "observed.csv"
    pd.DataFrame({"row_id": [f"r{j}" for j in range(N_ROWS)], "score": scores[0]}).to_csv(observed, index=False)
    step = tmp_path / "step"
    assert cli.main([*base, "--observed", str(observed), "--out", str(step), "--budgets", "1.0"]) == 0
    got = pd.read_csv(step / "concepts.csv").set_index("concept_id")
    chi = chi_model_matrix(scores[:1], acts, ["m00"]).iloc[0]
    assert np.allclose(got["chi_model"].to_numpy(), chi[got.index].to_numpy())
    assert (np.diff(pd.read_csv(step / "concepts.csv")["chi_model"]) >= 0).all()  # weakest first


def test_relative_concept_profile_is_chi_model_minus_the_overall_score(suite: Suite, tmp_path: Path) -> None:
    _, _, _, rows_csv, concept_path = suite
    data = rows_matrix(read_long(rows_csv), str(rows_csv))
    acts = read_concept_rows(concept_path).aligned(data.row_ids)
    chosen = top_concepts(acts, 6, min_rows=8)
    weights, info = concept_weights(acts, chosen), {"top_concepts": chosen.tolist()}
    absolute = concept_frame(data, weights, info)
    relative = concept_frame(data, weights, info, relative=True)
    overall = np.nanmean(data.scores, axis=1)
    assert np.allclose(absolute.to_numpy() - relative.to_numpy(), overall[:, None])
    out = tmp_path / "relative"
    argv = ["skills", "--scores", str(rows_csv), "--concepts", str(concept_path), "--relative", "--out", str(out)]
    assert cli.main([*argv, "--top-concepts", "6", "--min-concept-rows", "8", "--max-concept-share", "1"]) == 0
    summary = json.loads((out / "skills.json").read_text())
    assert summary["concepts"]["relative"] is True and "relative to the overall score" in summary["source"]
    # --relative means nothing without concepts: refused before anything is written
    bad = tmp_path / "bad"
    assert cli.main(["skills", "--scores", str(rows_csv), "--relative", "--out", str(bad)]) != 0
    assert not bad.exists()


def test_concepts_are_named_by_the_sae_they_were_read_with_and_only_that_one() -> None:
    from cg_ray.activations.saes.base import file_fingerprint
    from cg_ray.activations.saes.spec import default_sae_dir
    from cg_ray.labels import load_labels

    sha = file_fingerprint(default_sae_dir() / "sae_weights.safetensors")
    shipped = load_labels(default_sae_dir() / "labels.jsonl")
    ids = [c for c in range(200) if shipped.get(c)][:5]
    sae = {"spec": "default", "d_sae": 4608, "weights_sha256": sha}
    assert shipped_concept_labels(sae, ids) == {c: shipped.get(c) for c in ids}
    # read with another SAE (a retrained default, say): its ids name other concepts, so no labels
    assert shipped_concept_labels(sae | {"weights_sha256": "0000000000000000"}, ids) == {}
    assert shipped_concept_labels({"weights_sha256": sha}, ids) == {}  # no spec recorded
