"""Read a finished diff-models analysis: hypotheses.json's counts and hypotheses, a sorted page of
diff_models.parquet, and any concept's paired examples from pairs.parquet."""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cg_ray.artifacts.layout import ModelDiffDir
from cg_ray.compare.model_diff import DIRECTIONS
from cg_ray.compare.model_diff_config import DiffModelsMethod
from cg_ray.compare.model_diff_outputs import JSON_FILE, TABLE_FILE, paired_examples
from cg_ray.report.comparisons import model_diff_view, with_judged_columns
from cg_ray.serve.comparison_types import DiffModelsConceptDetail, DiffModelsDocument, DiffModelsView
from cg_ray.serve.model_diffs import PAIRS_FILE, read_pairs

SortKey = Literal["abs_delta", "delta", "delta_low", "delta_high", "frac_a", "frac_b", "concept_id"]


def _clean(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _table(folder: ModelDiffDir) -> pa.Table:
    return _concepts_at(folder.file(TABLE_FILE))


@functools.lru_cache(maxsize=8)
def _concepts_at(path: Path) -> pa.Table:
    table = with_judged_columns(pq.read_table(path))  # an analysis made before judging: nulls
    return table.append_column("abs_delta", pc.abs(table.column("delta")))


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    return [{k: _clean(v) for k, v in row.items() if k != "abs_delta"} for row in table.to_pylist()]


def page(
    folder: ModelDiffDir,
    analysis_id: str,
    *,
    sort: SortKey = "abs_delta",
    order: Literal["asc", "desc"] = "desc",
    hypotheses_only: bool = False,
    q: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> DiffModelsView:
    """The analysis' counts, settings and hypotheses, and a page of its concepts (ties by concept id)."""
    table = _table(folder)
    if hypotheses_only:
        table = table.filter(pc.is_valid(table.column("hypothesis")))
    if q:
        needle = q.lower()
        text = pc.binary_join_element_wise(
            pc.fill_null(table.column("label"), ""), pc.fill_null(table.column("description"), ""), " "
        )
        table = table.filter(pc.match_substring(pc.utf8_lower(text), needle))
    keys = [(sort, "descending" if order == "desc" else "ascending"), ("concept_id", "ascending")]
    table = table.take(pc.sort_indices(table, sort_keys=keys))
    doc = folder.read_json(JSON_FILE)  # a newer format_version is refused, naming the file
    return DiffModelsView.model_validate(
        {
            "id": analysis_id,
            "models": doc["models"],
            "counts": doc["counts"],
            "confirmation": doc.get("confirmation"),  # None: made before hypotheses were judged over splits
            "config": {k: doc["config"].get(k) for k in DiffModelsMethod.model_fields},  # no reader or input paths
            "method": doc["method"],
            "hypotheses": doc["hypotheses"],
            "total": table.num_rows,
            "offset": offset,
            "limit": limit,
            "items": _rows(table.slice(offset, limit)),
        }
    )


def view(folder: ModelDiffDir) -> DiffModelsDocument:
    """The document the app draws (the one diff_models.html embeds), its settings without input paths."""
    doc = model_diff_view(folder)
    doc["config"] = {k: doc["config"].get(k) for k in DiffModelsMethod.model_fields}  # no reader or input paths
    return DiffModelsDocument.model_validate(doc)


def concept(folder: ModelDiffDir, concept_id: int, k: int) -> DiffModelsConceptDetail | None:
    """The concept's row with up to k paired examples per direction; None when it is active in no answer."""
    table = _table(folder)
    hit = table.filter(pc.equal(table.column("concept_id"), concept_id))
    if hit.num_rows == 0:
        return None
    pairs, acts_a, acts_b = read_pairs(str(folder.file(PAIRS_FILE)))
    examples = {d: paired_examples(acts_a, acts_b, pairs, concept_id, d, k) for d in DIRECTIONS}
    return DiffModelsConceptDetail.model_validate({**_rows(hit)[0], "examples": examples})
