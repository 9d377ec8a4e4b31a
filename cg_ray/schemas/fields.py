"""Column builders the schema modules share (`cg_ray.schemas` re-exports them)."""

from __future__ import annotations

from typing import Final

import pyarrow as pa

LABEL_FIELD: Final = pa.field("label", pa.string(), nullable=True)


def floats(*names: str) -> list[pa.Field]:
    """Nullable float64 columns: an estimate is null where it is undefined."""
    return [pa.field(name, pa.float64(), nullable=True) for name in names]
