"""Read a table of texts with the reader on Ray Data (an actor pool), keeping the input order.

For jobs whose rows need no generation or scoring (the arena variant): the same `ReaderStage` the main
pipeline uses, without the rest of its graph.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from cg_ray.activations.config import DEFAULT_READER_FACTORY, ReaderConfig
from cg_ray.generation.config import StageResources
from cg_ray.io.blocks import arrow_dataset
from cg_ray.pipeline.cluster_fit import Cluster, fit_reader_pool
from cg_ray.pipeline.reader_stage import ReadOptions, map_reader_stage, planned_tokens

ORDER = "_order"


def read_texts(
    table: pa.Table,
    text_column: str,
    reader_config: ReaderConfig,
    resources: StageResources,
    factory: str = DEFAULT_READER_FACTORY,
    count_from_column: str | None = None,
    read_options: ReadOptions | None = None,
) -> pa.Table:
    """`table` plus n_tokens / concept_ids / concept_acts (and the reader's bookkeeping columns).
    `count_from_column` and `read_options` are passed to `ReaderStage` (response-span reading). Each actor
    plans for its share of the texts' tokens (estimated from their characters, context included: the
    model reads it too)."""
    import ray

    if ray.is_initialized():  # the pool as it fits the cluster; a cluster too small is refused here
        resources = fit_reader_pool(resources, Cluster.of_ray())
    characters = pc.sum(pc.utf8_length(table[text_column])).as_py() or 0
    indexed = table.append_column(ORDER, pa.array(range(table.num_rows), pa.int64()))
    blocks = max(1, min(table.num_rows // max(resources.batch_size, 1), 64))
    ds = arrow_dataset(indexed, blocks)
    out = map_reader_stage(
        ds,
        resources,
        {
            "reader_config": reader_config,
            "text_column": text_column,
            "factory": factory,
            "count_from_column": count_from_column,
            "read_options": read_options,
            "planned_tokens": planned_tokens(characters, resources.max_actors),
        },
    )
    parts = list(out.iter_batches(batch_format="pyarrow", batch_size=None))
    result = pa.concat_tables(parts).sort_by(ORDER)
    if (
        result.num_rows != table.num_rows
        or not pc.all(pc.equal(result[ORDER], pa.array(range(table.num_rows), pa.int64()))).as_py()
    ):
        raise RuntimeError(f"the reader returned {result.num_rows} rows for {table.num_rows}")
    return result.drop_columns([ORDER])
