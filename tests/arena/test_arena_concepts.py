"""Per-concept head-to-head win rates on a tiny hand-computed example, and the cross-model table."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cg_ray.arena.concepts import (
    HEAD_TO_HEAD_SCHEMA,
    head_to_head,
    load_model_activations,
    model_concepts_table,
    model_results,
    write_head_to_head,
)
from cg_ray.arena.config import TiePolicy
from cg_ray.artifacts.layout import ArenaDir
from cg_ray.benchmarks.arena import Battle, load_battles
from cg_ray.config import MetricsConfig
from cg_ray.errors import InputError
from cg_ray.labels import ConceptLabels

from .arena_builders import record, write_jsonl

# Models A and B, d_sae 3. A's rows (its text: prompt + A's answer) and B's rows, s̃ per concept.
A_ROWS = {"q1:a:B": ({0: 1.0, 1: 2.0}, 1.0), "q2:b:B": ({0: 3.0}, 0.0), "q3:a:B": ({1: 1.0}, 0.5)}
B_ROWS = {"q1:b:A": ({0: 1.0}, 0.0), "q2:a:A": ({0: 1.0, 2: 4.0}, 1.0), "q3:b:A": ({1: 3.0}, 0.5)}
Q4 = ({"q4:a:B": ({0: 5.0}, 0.5)}, {"q4:b:A": ({2: 1.0}, 0.5)})  # the bothbad battle, when it is kept


@pytest.fixture
def battles(tmp_path: Path) -> list[Battle]:
    recs = [
        record("q1", model_a="A", model_b="B", winner="model_a"),  # A wins
        record("q2", model_a="B", model_b="A", winner="model_a"),  # B wins
        record("q3", model_a="A", model_b="B", winner="tie"),
        record("q4", model_a="A", model_b="B", winner="tie (bothbad)"),
        record("q5", model_a="A", model_b="C", winner="model_b"),  # C has no rows: not a pair
    ]
    return load_battles(write_jsonl(tmp_path / "battles.jsonl", recs)).battles


@pytest.fixture
def rows_files(write_rows: Callable[..., Path]) -> Callable[..., dict[str, Path]]:
    def _files(with_q4: bool = False, drop: str | None = None) -> dict[str, Path]:
        out = {}
        for model, rows, extra in (("A", A_ROWS, Q4[0]), ("B", B_ROWS, Q4[1])):
            table = rows | extra if with_q4 else rows
            out[model] = write_rows(
                [
                    {
                        "row_id": rid,
                        "benchmark": "arena",
                        "model": model,
                        "score": score,
                        "concept_ids": sorted(acts),
                        "concept_acts": [acts[c] for c in sorted(acts)],
                    }
                    for rid, (acts, score) in table.items()
                    if rid != drop
                ],
                d_sae=3,
                name=f"{model}-{with_q4}-{drop}.parquet",
            )
        return out

    return _files


def cells(h2h, a: str, b: str) -> dict[int, tuple[float, int, int, int]]:
    return {
        r["concept_id"]: (r["win_rate"], r["n_active"], r["n_wins"], r["n_losses"])
        for r in h2h.table.to_pylist()
        if r["model_a"] == a and r["model_b"] == b
    }


def test_mean_weighting_by_hand(battles: list[Battle], rows_files: Callable[..., dict[str, Path]]) -> None:
    acts = {m: load_model_activations(m, p) for m, p in rows_files().items()}
    h2h = head_to_head(battles, acts)  # ties 0.5, bothbad dropped
    assert h2h.table.schema.equals(HEAD_TO_HEAD_SCHEMA)
    # Weights = mean of the two rows' s̃. c0: q1 (1+1)/2 = 1 (A won), q2 (3+1)/2 = 2 (A lost) -> 1/3.
    # c1: q1 (2+0)/2 = 1 (won), q3 (1+3)/2 = 2 (tie, 0.5) -> (1 + 1)/3. c2: q2 (0+4)/2 = 2 (lost) -> 0.
    assert cells(h2h, "A", "B") == {
        0: (pytest.approx(1 / 3), 2, 1, 1),
        1: (pytest.approx(2 / 3), 2, 1, 0),
        2: (0.0, 1, 0, 1),
    }
    # Ties score 0.5 for both, so B over A is the complement.
    assert cells(h2h, "B", "A") == {
        0: (pytest.approx(2 / 3), 2, 1, 1),
        1: (pytest.approx(1 / 3), 2, 0, 1),
        2: (1.0, 1, 1, 0),
    }
    assert h2h.win_rate("A", "B", 1) == pytest.approx(2 / 3)
    assert {r["weight_sum"] for r in h2h.table.to_pylist() if r["concept_id"] == 0} == {3.0}
    (ab, ba) = h2h.pairs
    assert (ab.model_a, ab.model_b, ab.n_battles, ab.n_counted, ab.n_dropped, ab.n_missing_rows) == (
        "A",
        "B",
        4,
        3,
        1,
        0,
    )
    assert ab.win_rate == pytest.approx(0.5) and ba.win_rate == pytest.approx(0.5)


def test_own_weighting_by_hand(battles: list[Battle], rows_files: Callable[..., dict[str, Path]]) -> None:
    acts = {m: load_model_activations(m, p) for m, p in rows_files().items()}
    h2h = head_to_head(battles, acts, weighting="own")
    # A's own s̃: c0: q1 1 (won), q2 3 (lost) -> 1/4; c1: q1 2 (won), q3 1 (0.5) -> 2.5/3; c2 never in A's rows.
    assert cells(h2h, "A", "B") == {0: (pytest.approx(1 / 4), 2, 1, 1), 1: (pytest.approx(5 / 6), 2, 1, 0)}
    assert h2h.win_rate("A", "B", 2) is None  # undefined, not 0
    # B's own s̃: c0: q1 1 (lost), q2 1 (won) -> 1/2; c1: q3 3 (0.5); c2: q2 4 (won) -> 1.
    assert cells(h2h, "B", "A") == {0: (0.5, 2, 1, 1), 1: (0.5, 1, 0, 0), 2: (1.0, 1, 1, 0)}


def test_tie_policy_and_missing_rows(battles: list[Battle], rows_files: Callable[..., dict[str, Path]]) -> None:
    acts = {m: load_model_activations(m, p) for m, p in rows_files(with_q4=True).items()}
    h2h = head_to_head(battles, acts, TiePolicy(bothbad="half"))
    # q4 now counts as a tie: c0 gains weight (5+0)/2 = 2.5 at 0.5 -> (1 + 0 + 1.25) / 5.5.
    assert cells(h2h, "A", "B")[0][0] == pytest.approx(2.25 / 5.5)
    assert h2h.pairs[0].n_counted == 4 and h2h.pairs[0].n_dropped == 0
    dropped_ties = head_to_head(battles, acts, TiePolicy(tie="drop"))
    assert cells(dropped_ties, "A", "B")[1] == (1.0, 1, 1, 0)  # only q1 is left for c1
    acts = {m: load_model_activations(m, p) for m, p in rows_files(drop="q3:b:A").items()}
    missing = head_to_head(battles, acts)
    assert missing.pairs[0].n_missing_rows == 1 and missing.pairs[0].n_counted == 2
    assert 1 in cells(missing, "A", "B") and cells(missing, "A", "B")[1][0] == 1.0


def test_model_concepts_table(rows_files: Callable[..., dict[str, Path]]) -> None:
    results = model_results(rows_files(), MetricsConfig(min_rows=1))
    labels = ConceptLabels({0: "zero", 1: "one", 2: "two"}, None, "labels.csv")
    table = model_concepts_table(results, top_k=2, labels=labels).to_pylist()
    rows: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for r in table:
        rows.setdefault((r["model"], r["kind"]), []).append((r["concept_id"], r["X_model"]))
    # A: X_model(c0) = (1·1 + 0·3)/4 = 0.25, X_model(c1) = (1·2 + 0.5·1)/3; c2 is never active in A's rows.
    assert rows[("A", "wins")] == [(1, pytest.approx(2.5 / 3)), (0, 0.25)]
    assert rows[("A", "losses")] == [(0, 0.25), (1, pytest.approx(2.5 / 3))]
    # B: c0 (0·1 + 1·1)/2 = 0.5, c1 0.5, c2 1.0; equal values are ordered by concept id.
    assert rows[("B", "wins")] == [(2, 1.0), (0, 0.5)]
    assert rows[("B", "losses")] == [(0, 0.5), (1, 0.5)]  # top_k = 2
    assert [r["label"] for r in table if r["model"] == "B" and r["kind"] == "wins"] == ["two", "zero"]
    assert [r["rank"] for r in table if r["model"] == "B" and r["kind"] == "losses"] == [1, 2]


def test_writes_parquet_and_json(
    battles: list[Battle], rows_files: Callable[..., dict[str, Path]], tmp_path: Path
) -> None:
    files = rows_files()
    h2h = head_to_head(battles, {m: load_model_activations(m, p) for m, p in files.items()})
    out = tmp_path / "out"
    out.mkdir()
    write_head_to_head(
        ArenaDir(out), h2h, model_concepts_table(model_results(files, MetricsConfig(min_rows=1))), min_active=2
    )
    assert pq.read_table(out / "head_to_head.parquet").equals(h2h.table)
    summary = json.loads((out / "head_to_head.json").read_text())
    top = summary["top_20_by_pair (n_active >= 2)"]
    assert [c["concept_id"] for c in top["A vs B"]] == [1, 0]  # c2 is active in 1 battle only
    assert len(summary["pairs"]) == 2 and len(summary["model_concepts"]) == 4 + 6  # A ranks 2 concepts, B 3


def test_inputs_that_cannot_be_joined(
    battles: list[Battle], write_rows: Callable[..., Path], rows_files: Callable[..., dict[str, Path]]
) -> None:
    row = {"benchmark": "arena", "model": "A", "score": 1.0, "concept_ids": [0], "concept_acts": [1.0]}
    dup = write_rows(
        [{"row_id": "x", **row}, {**row, "row_id": "x", "benchmark": "other"}], d_sae=3, name="dup.parquet"
    )
    with pytest.raises(InputError, match="duplicate row_id 'x'"):
        load_model_activations("A", dup)
    wide = write_rows([{"row_id": "q1:b:A", **row, "model": "B"}], d_sae=5, name="wide.parquet")
    acts = {"A": load_model_activations("A", rows_files()["A"]), "B": load_model_activations("B", wide)}
    with pytest.raises(InputError, match="different SAE widths"):
        head_to_head(battles, acts)
