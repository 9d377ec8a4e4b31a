"""Per-concept head-to-head win rates on a tiny hand-computed example, and the cross-model table."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.arena.concepts import (
    HEAD_TO_HEAD_SCHEMA,
    head_to_head,
    load_model_activations,
    model_concepts_table,
    write_head_to_head,
)
from cg_ray.arena.config import TiePolicy
from cg_ray.artifacts.layout import ArenaDir
from cg_ray.benchmarks.arena import Battle, load_battles
from cg_ray.config import MetricsConfig
from cg_ray.errors import InputError
from cg_ray.run_outputs import judged_profiles
from tests.report.judged_run import weakness

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


def _profile(entries: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(entries, schema=S.PROFILE_SCHEMA)


def test_model_concepts_are_the_models_judged_profiles_confirmed_first() -> None:
    # the profile's order: an untested concept, a candidate, a confirmed one, another untested one
    weak = [weakness(1, 5, None), weakness(2, 7, False), weakness(3, 9, True), weakness(4, 11, None)]
    strong = [weakness(1, 4, None)]
    profiles = {"A": {S.STRENGTHS_FILE: _profile(strong), S.WEAKNESSES_FILE: _profile(weak)}}
    table = model_concepts_table(profiles).to_pylist()
    losses = [r for r in table if r["kind"] == "losses"]
    # confirmed first, then the candidate a split tested, then those no split chose in the profile's order
    ranked = [(r["rank"], r["concept_id"], r["confirmed"]) for r in losses]
    assert ranked == [(1, 9, True), (2, 7, False), (3, 5, False), (4, 11, False)]
    assert losses[0]["heldout_residual_low"] == -0.25 and losses[0]["q_value"] == 0.002  # its held-out figures
    assert losses[2]["heldout_residual"] is None and losses[0]["description"] == "concept 9"
    assert [r["concept_id"] for r in table if r["kind"] == "wins"] == [4]
    assert [r["concept_id"] for r in model_concepts_table(profiles, top_k=1).to_pylist()] == [4, 9]


def _arena_rows(rng: np.random.Generator, n: int, effect: float) -> list[dict]:
    """n rows of one model: concept 0 on half of them, scoring `effect` above the others' 0.4 win rate;
    concept 1 on a random half, unrelated to the score."""
    rows = []
    for i in range(n):
        has0, has1 = i % 2 == 0, bool(rng.random() < 0.5)
        won = rng.random() < 0.4 + (effect if has0 else 0.0)
        ids = [c for c, on in ((0, has0), (1, has1), (2, True)) if on]
        rows.append({"row_id": f"q{i}:a:B", "benchmark": "arena", "model": "A", "score": float(won),
                     "concept_ids": ids, "concept_acts": [1.0] * len(ids)})  # fmt: skip
    return rows


@pytest.mark.parametrize("effect", [0.0, 0.3])
def test_a_concept_a_model_wins_on_is_confirmed_only_when_it_does(
    write_rows: Callable[..., Path], effect: float
) -> None:
    """`arena-head-to-head` judges each model's rows as a run does: a concept whose rows win 30 points more
    often is confirmed among its wins with a held-out interval above 0; with no effect nothing is."""
    path = write_rows(_arena_rows(np.random.default_rng(3), 600, effect), d_sae=4, name=f"A{effect}.parquet")
    table = model_concepts_table({"A": judged_profiles(path, "A", MetricsConfig(min_rows=5))}).to_pylist()
    confirmed = [(r["kind"], r["concept_id"]) for r in table if r["confirmed"]]
    if effect:
        assert confirmed == [("wins", 0)]
        win = next(r for r in table if r["kind"] == "wins" and r["concept_id"] == 0)
        assert win["rank"] == 1 and 0 < win["heldout_residual_low"] < win["heldout_residual_high"]
    else:
        assert confirmed == []


def test_writes_parquet_and_json(
    battles: list[Battle], rows_files: Callable[..., dict[str, Path]], tmp_path: Path
) -> None:
    files = rows_files()
    h2h = head_to_head(battles, {m: load_model_activations(m, p) for m, p in files.items()})
    out = tmp_path / "out"
    out.mkdir()
    profiles = {m: judged_profiles(p, m, MetricsConfig(min_rows=1)) for m, p in files.items()}
    write_head_to_head(ArenaDir(out), h2h, model_concepts_table(profiles), min_active=2)
    assert pq.read_table(out / "head_to_head.parquet").equals(h2h.table)
    summary = json.loads((out / "head_to_head.json").read_text())
    top = summary["top_20_by_pair (n_active >= 2)"]
    assert [c["concept_id"] for c in top["A vs B"]] == [1, 0]  # c2 is active in 1 battle only
    assert len(summary["pairs"]) == 2
    assert summary["model_concepts"] == pq.read_table(out / "model_concepts.parquet").to_pylist()
    # A's rows activate concepts 0 and 1, B's 0, 1 and 2: each is listed once per side
    listed = {(m, k): sorted(r["concept_id"] for r in summary["model_concepts"] if (r["model"], r["kind"]) == (m, k))
              for m in "AB" for k in ("wins", "losses")}  # fmt: skip
    assert listed[("A", "wins")] == [0, 1] and listed[("B", "losses")] == [0, 1, 2]


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
