"""Write ratings artifacts: ratings.parquet (one row per model), pairwise.parquet and ratings.json."""

from __future__ import annotations

from typing import Any, TypedDict

import pyarrow as pa

from cg_ray import schemas as S
from cg_ray.arena.ratings import RATING_COLUMNS, Ratings
from cg_ray.artifacts.layout import RatingsDir

RATINGS_FILE = S.RATINGS_PARQUET
PAIRWISE_FILE = S.PAIRWISE_FILE
RATINGS_JSON = S.RATINGS_JSON


class PairwiseRow(TypedDict):
    """One row of pairwise.parquet (and of ratings.json's `pairwise`)."""

    model_a: str
    model_b: str
    battles_counted: float
    score_a: float
    bt_predicted: float


def pairwise_rows(ratings: Ratings) -> list[PairwiseRow]:
    """Every ordered pair that met: counted battles, model_a's observed score share and the BT prediction."""
    rows: list[PairwiseRow] = []
    for i, a in enumerate(ratings.models):
        for j, b in enumerate(ratings.models):
            games = float(ratings.wins[i, j] + ratings.wins[j, i])
            if i != j and games > 0:
                rows.append(
                    {
                        "model_a": a,
                        "model_b": b,
                        "battles_counted": games,
                        "score_a": float(ratings.wins[i, j]) / games,
                        "bt_predicted": ratings.predicted_win(i, j),
                    }
                )
    return rows


def write_ratings(out: RatingsDir, ratings: Ratings, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write the three files into `out` (being built); returns the JSON document written."""
    result = ratings.as_dict() | (extra or {})
    pairs = pairwise_rows(ratings)
    model_schema = pa.schema(
        [("model", pa.string())]
        + [(k, pa.float64()) for k in RATING_COLUMNS]
        + [(k, pa.int64()) for k in ("battles", "wins", "losses", "ties", "bothbad")]
    )
    out.write(RATINGS_FILE, pa.Table.from_pylist(result["models"], schema=model_schema))
    pair_schema = pa.schema(
        [("model_a", pa.string()), ("model_b", pa.string())]
        + [(k, pa.float64()) for k in ("battles_counted", "score_a", "bt_predicted")]
    )
    out.write(PAIRWISE_FILE, pa.Table.from_pylist(pairs, schema=pair_schema))
    result = result | {"pairwise": pairs}
    return out.write_json(RATINGS_JSON, result, ensure_ascii=False)
