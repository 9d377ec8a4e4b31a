"""The upload parser on the product's rows: nested metadata kept as JSON with a note, metadata given as JSON
text, `row_id`, and bad values refused naming the file, the line (Parquet: row) and the field."""

from __future__ import annotations

import datetime as dt
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cg_ray.serve.settings import Limits
from cg_ray.serve.uploads import UploadError, parse_file, parse_rows

LIMITS = Limits()
FACTS = {"a": 118, "b": 967, "op": "+", "chain": ["x", "y"]}


def jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def refused(data: bytes, name: str) -> UploadError:
    with pytest.raises(UploadError) as info:
        parse_file(data, name, None, None, "b", LIMITS)
    return info.value


def test_nested_metadata_is_stored_as_json_with_a_note() -> None:
    rows = [
        {"id": "1", "prompt": "p", "metadata": {"kind": "arithmetic", "seed": 0}},
        {"id": "2", "prompt": "q", "metadata": {"kind": "logic", "facts": FACTS, "tags": ["a", 1]}},
    ]
    parsed = parse_file(jsonl(rows), "b.jsonl", None, None, "b", LIMITS)
    stored = parsed.table.column("metadata").to_pylist()
    assert json.loads(stored[1]) == rows[1]["metadata"]
    # as the pipeline writes rows (keys sorted, text unescaped), so both read the same in the metrics
    assert stored[1] == json.dumps(rows[1]["metadata"], sort_keys=True, ensure_ascii=False)
    assert parsed.notes == [
        "metadata 'facts' holds nested values (first on line 2): stored as JSON, not used by slices or adjustment",
        "metadata 'tags' holds nested values (first on line 2): stored as JSON, not used by slices or adjustment",
    ]
    flat = parse_rows([{"prompt": "p", "metadata": {"kind": "x"}}], None, "b", LIMITS)
    assert flat.notes == []


def test_metadata_as_json_text_reads_as_the_object() -> None:
    meta = {"kind": "logic", "facts": FACTS}
    as_text = parse_file(jsonl([{"prompt": "p", "metadata": json.dumps(meta)}]), "b.jsonl", None, None, "b", LIMITS)
    as_object = parse_file(jsonl([{"prompt": "p", "metadata": meta}]), "b.jsonl", None, None, "b", LIMITS)
    assert as_text.table.equals(as_object.table)
    empty = parse_rows([{"prompt": "p", "metadata": ""}, {"prompt": "q", "metadata": "null"}], None, "b", LIMITS)
    assert empty.table.column("metadata").to_pylist() == [None, None]


def test_nested_metadata_is_skipped_by_the_metrics_with_a_note() -> None:
    """What the analysis reads back: the CLI's metadata coder skips the stored nested field and says why."""
    from cg_ray.profile.metadata import MetadataCoder

    rows = [{"prompt": f"p{i}", "metadata": {"kind": "k" + str(i % 2), "facts": {"a": i}}} for i in range(4)]
    stored = parse_rows(rows, None, "b", LIMITS).table.column("metadata").to_pylist()
    coder = MetadataCoder("rows.parquet")
    codes = coder.encode(stored, first_row=0)
    assert list(codes) == ["kind"] and coder.analysed() == {"kind": ["k0", "k1"]}
    assert coder.skipped() == {"facts": "nested value (first at row 0)"}


@pytest.mark.parametrize(
    ("metadata", "field", "message"),
    [
        ({"facts": {"a": float("nan")}}, "facts.a", "finite"),
        ({"tags": ["a", float("inf")]}, "tags.1", "finite"),
        ({"deep": json.loads("[" * 20 + "]" * 20)}, "deep" + ".0" * 16, "nested deeper"),
        ("[1, 2]", "metadata", "expected an object"),
        ('{"kind": ', "metadata", "invalid JSON"),
        (7, "metadata", "expected an object"),
    ],
)
def test_bad_metadata_is_refused_naming_file_line_and_field(metadata, field, message) -> None:
    data = jsonl([{"prompt": "ok", "metadata": {"kind": "a"}}, {"prompt": "p", "metadata": metadata}])
    exc = refused(data, "bench.jsonl")
    assert exc.kind == "invalid" and exc.line == 2 and exc.field == field, exc
    assert str(exc).startswith(f"bench.jsonl, line 2, field {field!r}: ") and message in str(exc), exc


def test_a_value_json_cannot_hold_is_refused_in_parquet_naming_the_row() -> None:
    """A Parquet `metadata` struct holding a timestamp: not JSON, refused with the file, row and field."""
    when = [None, None, dt.datetime(2024, 5, 1)]
    metadata = pa.array([{"kind": "a", "facts": {"when": w}} for w in when])
    table = pa.table({"row_id": ["r1", "r2", "r3"], "prompt": ["a", "b", "c"], "metadata": metadata})
    exc = refused(parquet(table), "rows.parquet")
    assert (exc.line, exc.field) == (3, "facts.when"), exc
    assert str(exc).startswith("rows.parquet, row 3, field 'facts.when': ") and "datetime" in str(exc), exc


def test_parquet_errors_name_file_row_and_field() -> None:
    table = pa.table({"row_id": ["a", "b", "c"], "prompt": ["x", "y", "z"], "score": [1.0, 0.0, 1.5]})
    exc = refused(parquet(table), "rows.parquet")
    assert str(exc).startswith("rows.parquet, row 3, field 'score': ") and exc.line == 3, exc
    dup = pa.table({"row_id": ["a", "a"], "prompt": ["x", "y"]})
    exc = refused(parquet(dup), "rows.parquet")
    assert str(exc).startswith("rows.parquet, row 2, field 'row_id': duplicate id"), exc


def test_row_id_is_the_id_unless_the_client_names_one() -> None:
    rows = [{"row_id": "probes-0", "id": None, "prompt": "a"}, {"row_id": "probes-1", "prompt": "b"}]
    parsed = parse_rows(rows, None, "b", LIMITS)
    assert parsed.table.column("row_id").to_pylist() == ["probes-0", "probes-1"]
    both = parse_rows([{"id": "x", "row_id": "y", "prompt": "a"}], None, "b", LIMITS)
    assert both.table.column("row_id").to_pylist() == ["x"]  # the mapping's `id`; row_id only in its absence
    from cg_ray.benchmarks.sources import FieldMapping

    named = parse_rows([{**r, "n": None} for r in rows], FieldMapping.model_validate({"id": "n"}), "b", LIMITS)
    assert named.table.column("row_id").to_pylist() == ["1", "2"]  # a named id field is the only one read


def test_a_csv_record_is_located_where_it_starts() -> None:
    """An exported list or a long answer spans lines in CSV: the error names the line the record starts on."""
    data = b'row_id,prompt,score\nr0,a,1\nr1,"one\ntwo\nthree",2\n'
    exc = refused(data, "rows.csv")
    assert exc.line == 3 and str(exc).startswith("rows.csv, line 3, field 'score'"), exc
