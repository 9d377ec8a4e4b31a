"""CSV downloads that a spreadsheet cannot execute (OWASP's CSV-injection rule).

A cell, header included, that starts with `=`, `+`, `-`, `@`, a tab or a carriage return gets a leading `'`,
so Excel / LibreOffice / Sheets show it as text instead of evaluating it. Numbers are left alone (`-0.25`
is not a formula). Stored data is never changed: only the CSV a client downloads.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_FORMULA_REGEX = r"^[=+\-@\t\r]"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def neutralize(cell: str) -> str:
    """`cell`, prefixed with `'` when a spreadsheet would read it as a formula."""
    if cell.startswith(FORMULA_STARTS) and not _is_number(cell):
        return "'" + cell
    return cell


def _safe_column(column: pa.ChunkedArray) -> pa.ChunkedArray:
    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
        # CSV has no lists: one cell of values joined by "; " (e.g. a concept's `adjusted_for` fields).
        joined = [None if v is None else "; ".join(map(str, v)) for v in column.to_pylist()]
        column = pa.chunked_array([pa.array(joined, pa.string())])
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return column  # numbers, booleans: never a formula
    risky = pc.match_substring_regex(column, _FORMULA_REGEX)
    if not pc.any(risky).as_py():
        return column
    return pa.chunked_array([pa.array([None if v is None else neutralize(v) for v in column.to_pylist()], column.type)])


def parquet_as_safe_csv(path: Path) -> bytes:
    """A Parquet table as CSV, every header and text cell neutralised."""
    import pyarrow.csv as pacsv

    table = pq.read_table(path)
    safe = pa.table(
        [_safe_column(table.column(i)) for i in range(table.num_columns)],
        names=[neutralize(name) for name in table.column_names],
    )
    buf = io.BytesIO()
    pacsv.write_csv(safe, buf)
    return buf.getvalue()


def safe_csv_file(path: Path) -> bytes:
    """A CSV file as stored, every cell (the header row too) neutralised."""
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\n")
    with path.open(encoding="utf-8", newline="") as fh:
        for row in csv.reader(fh):
            writer.writerow([neutralize(cell) for cell in row])
    return out.getvalue().encode("utf-8")
