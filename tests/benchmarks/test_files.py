"""The one record reader: JSONL lines (files, gzip, uploaded bytes), CSV and Parquet records."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cg_ray.errors import InputError
from cg_ray.io.records import JsonLine, iter_json_lines, iter_jsonl, iter_records


def test_json_lines_from_bytes_and_gzip_count_lines_from_one(tmp_path: Path) -> None:
    data = b'\xef\xbb\xbf{"a": 1}\n\n[1, 2]\n{"a": \n  \n{"b": "\xe2\x80\xa8"}\n'
    got = list(iter_json_lines(data, name="up.jsonl"))
    assert got[0] == JsonLine(1, {"a": 1}, None)  # a BOM is dropped; blank lines are skipped, not renumbered
    assert got[1] == JsonLine(3, [1, 2], None)  # any JSON value: the caller judges it
    assert got[2].line == 4 and got[2].value is None and got[2].error.startswith("invalid JSON (")
    assert got[3] == JsonLine(6, {"b": "\u2028"}, None)  # only \n ends a line
    packed = tmp_path / "a.jsonl.gz"
    packed.write_bytes(gzip.compress(b'{"a": 1}\n\n{"a": 2}\n'))
    assert list(iter_jsonl(packed)) == [(1, {"a": 1}), (3, {"a": 2})]


def test_strict_reader_names_file_and_line() -> None:
    with pytest.raises(InputError) as info:
        list(iter_jsonl(b'{"a": 1}\n{"a": \n', name="x.jsonl"))
    assert (info.value.path, info.value.line) == ("x.jsonl", 2) and "x.jsonl, line 2: invalid JSON" in str(info.value)
    with pytest.raises(InputError, match="line 1: expected a JSON object, not a list"):
        list(iter_jsonl(b"[1]\n", name="x.jsonl"))
    with pytest.raises(InputError, match="line 2: not valid UTF-8") as info:
        list(iter_json_lines(b'{"a": 1}\n{"a": "\xff"}\n', name="x.jsonl"))
    assert info.value.line == 2


def test_records_of_uploaded_bytes() -> None:
    csv = list(iter_records(b"id,prompt\n1,a\n2,b\n", "csv", name="up.csv"))
    assert [(r.row, r.line, r.data) for r in csv] == [
        (0, 2, {"id": "1", "prompt": "a"}),
        (1, 3, {"id": "2", "prompt": "b"}),
    ]
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([{"id": i} for i in range(5)]), buf)
    parquet = list(iter_records(buf.getvalue(), name="up.parquet"))
    assert [(r.row, r.line, r.data["id"]) for r in parquet] == [(i, None, i) for i in range(5)]
    with pytest.raises(InputError, match="cannot read as Parquet"):
        list(iter_records(b"PAR1 not really", "parquet", name="up.parquet"))
