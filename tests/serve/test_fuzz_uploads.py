"""Property-based fuzzing of the upload parsers (hypothesis): whatever the bytes or JSON body, the answer is a
stored upload or a typed input error (a 4xx with a message) — never another exception, a 500 or a partial
write. Example counts are bounded so the module runs in well under a minute."""

from __future__ import annotations

import io
import json
import string

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, example, given
from hypothesis import settings as fuzz_settings
from hypothesis import strategies as st

from cg_ray.serve.errors import UPLOAD_STATUS
from cg_ray.serve.settings import Limits
from cg_ray.serve.uploads import UploadError, parse_file, parse_rows

LIMITS = Limits(max_upload_bytes=50_000, max_line_bytes=4_000, max_rows=200, max_tokens_per_row=64, max_benchmarks=5)
FUZZ = fuzz_settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
NAMES = st.sampled_from(["id", "prompt", "response", "score", "benchmark", "reference", "x", "doc", ""])

hostile_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["=cmd|' /C calc'!A0", "1" + "0" * 400, "-0.5", "NaN", "\x00", "\ud7ff"]),
)
json_values = st.recursive(
    hostile_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(NAMES, inner, max_size=5)),
    max_leaves=8,
)
rows = st.lists(st.dictionaries(NAMES, json_values, max_size=6), max_size=12)


def _outcome(call) -> str:
    try:
        parsed = call()
    except UploadError as exc:
        assert exc.kind in UPLOAD_STATUS and str(exc), exc
        return "refused"
    assert parsed.table.num_rows >= 1
    return "stored"


def _jsonl_line(value: object) -> bytes:
    try:
        return json.dumps(value).encode()
    except (ValueError, TypeError):
        return b"{"


special_lines = st.sampled_from(
    [
        b'{"prompt": "a", "score": 1' + b"0" * 400 + b"}",
        b'{"prompt": "a", "id": ' + b"9" * 3000 + b"}",
        b"[" * 1500 + b"]" * 1500,
        b'{"prompt": "a", "score": true}',
        b'{"prompt": "a", "score": NaN}',
        b'{"prompt": "a", "score": -Infinity}',
        b"\xff\xfe\x00",
        b"",
    ]
)
jsonl_bytes = st.lists(st.one_of(json_values.map(_jsonl_line), special_lines, st.binary(max_size=40)), max_size=10).map(
    lambda lines: b"\n".join(lines)
)


@FUZZ
@given(data=jsonl_bytes, mapping=st.none() | st.just({"prompt": "x"}) | st.just({"score": "response"}))
def test_jsonl_bytes(data: bytes, mapping: dict | None) -> None:
    from cg_ray.benchmarks.sources import FieldMapping

    given_mapping = FieldMapping.model_validate(mapping) if mapping else None
    _outcome(lambda: parse_file(data, "f.jsonl", None, given_mapping, "bench", LIMITS))


csv_text = st.text(alphabet=string.printable + "é\u2028", max_size=400)


@FUZZ
@given(header=st.lists(NAMES, min_size=1, max_size=5), body=csv_text, big=st.integers(0, 6000))
def test_csv_bytes(header: list[str], body: str, big: int) -> None:
    data = (",".join(header) + "\n" + body + ('\n1,"' + "a" * big + '"' if big else "")).encode()
    _outcome(lambda: parse_file(data, "f.csv", "text/csv", None, "bench", LIMITS))


@st.composite
def parquet_bytes(draw: st.DrawFn) -> bytes:
    n = draw(st.integers(0, 8))
    columns: dict[str, pa.Array] = {}
    for name in draw(st.lists(NAMES.filter(bool), unique=True, max_size=5)):
        kind = draw(st.sampled_from(["str", "int", "float", "bool", "ts", "list"]))
        if kind == "ts":
            ints = draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=n, max_size=n))
            columns[name] = pa.array(ints, pa.int64()).cast(pa.timestamp("us"))
        elif kind == "list":
            columns[name] = pa.array(draw(st.lists(st.lists(st.integers(0, 9), max_size=3), min_size=n, max_size=n)))
        else:
            strategy = {"str": st.text(max_size=20), "int": st.integers(-(2**63), 2**63 - 1), "float": st.floats(),
                        "bool": st.booleans()}[kind]  # fmt: skip
            columns[name] = pa.array(draw(st.lists(strategy | st.none(), min_size=n, max_size=n)))
    buf = io.BytesIO()
    pq.write_table(pa.table(columns) if columns else pa.table({"prompt": pa.array([], pa.string())}), buf)
    data = bytearray(buf.getvalue())
    for _ in range(draw(st.integers(0, 3))):  # and corrupted bytes
        if data:
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data)


@FUZZ
@given(data=parquet_bytes())
def test_parquet_bytes(data: bytes) -> None:
    _outcome(lambda: parse_file(data, "f.parquet", None, None, "bench", LIMITS))


@FUZZ
@given(body=rows)
def test_json_rows(body: list) -> None:
    _outcome(lambda: parse_rows(body, None, "bench", LIMITS))


def test_through_the_api_nothing_partial(client, key, settings) -> None:
    """The same inputs through the routes: 201 or a 4xx with a message, and the stored files are exactly
    those of the listed uploads (no temporary or orphan file is left by a refusal)."""

    seen: set[int] = set()

    @fuzz_settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(
        case=st.one_of(
            jsonl_bytes.map(lambda d: ("f.jsonl", d)),
            parquet_bytes().map(lambda d: ("f.parquet", d)),
            csv_text.map(lambda t: ("f.csv", ("id,prompt,score\n" + t).encode())),
        ),
        body=rows,
    )
    @example(case=("f.jsonl", b'{"prompt": "a", "score": 1}\n'), body=[{"prompt": "b", "score": 0.5}])
    @example(case=("f.csv", b"id,prompt,score\n1,hi,0\n"), body=[{"prompt": "=cmd", "id": "x"}])
    def check(case: tuple[str, bytes], body: list) -> None:
        name, data = case
        r = client.post("/v1/uploads", headers=key, files={"file": (name, data, "application/octet-stream")})
        payload = json.dumps({"name": "j", "rows": body}).encode()  # NaN / Infinity too, as Python writes them
        j = client.post("/v1/uploads/json", headers={**key, "Content-Type": "application/json"}, content=payload)
        for resp in (r, j):
            assert resp.status_code == 201 or (400 <= resp.status_code < 500 and resp.json()["detail"]["error"])
            seen.add(resp.status_code)
        stored = {u["id"] for u in client.get("/v1/uploads", headers=key).json()}
        files = {p.name.split(".")[0] for p in settings.uploads_dir.iterdir()}
        assert files == stored, (files, stored)

    check()
    assert 201 in seen and any(400 <= s < 500 for s in seen)
