"""Hugging Face datasets: ``load_dataset`` from the hub (where reachable) or ``load_from_disk`` offline."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cg_ray.benchmarks.mapping import map_record
from cg_ray.benchmarks.rows import BenchmarkRow
from cg_ray.benchmarks.sources import HFSource
from cg_ray.errors import InputError


def load_hf(source: HFSource) -> Iterator[BenchmarkRow]:
    data = _open(source)
    where = source.path or f"hf://{source.dataset}/{source.subset or ''}:{source.split}"
    name = source.benchmark or (source.dataset or Path(source.path or "dataset").name).split("/")[-1]
    n = len(data) if source.limit is None else min(source.limit, len(data))
    for row in range(n):
        yield map_record(
            data[row],
            source.fields,
            where=where,
            row=row,
            benchmark=name,
            scorer=source.scorer,
            prompt_template=source.prompt_template,
            id_prefix=f"{name}-{source.subset or where.rsplit('/', 1)[-1]}-{source.split}",
        )


def _open(source: HFSource) -> Any:
    import datasets

    if source.path is not None:
        path = Path(source.path).expanduser()
        if not path.exists():
            raise InputError("dataset directory not found", path=str(path))
        try:
            loaded = datasets.load_from_disk(str(path))
        except FileNotFoundError as exc:
            raise InputError(f"not a save_to_disk directory: {exc}", path=str(path)) from None
        if isinstance(loaded, datasets.DatasetDict):
            if source.split not in loaded:
                raise InputError(
                    f"no split {source.split!r} (splits: {', '.join(loaded)})", path=str(path), field="split"
                )
            return loaded[source.split]
        return loaded
    # Real hub path: only on machines with network access (never called in tests).
    return datasets.load_dataset(source.dataset, source.subset, split=source.split, revision=source.revision)
