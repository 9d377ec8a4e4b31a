"""A real-text calibration suite for the findings (docs/trust.md, "Real text, planted"; issue 38).

    python scripts/beyond_real_data.py prepare DATA_DIR WORK_DIR                  # bbh_meta.jsonl, bbq.jsonl
    python scripts/real_text_calibration.py prepare DATA_DIR WORK_DIR           # real_text{,_new}.jsonl
    cg-ray extract --dtype float32 --text prompt --input WORK_DIR/X.jsonl --out WORK_DIR/X.rows.parquet
        # X = bbh_meta, bbq, and real_text_new (with --allow-missing-scores)
    python scripts/real_text_calibration.py assemble WORK_DIR                    # WORK_DIR/real_text.rows.parquet
    python scripts/real_text_calibration.py plant ROWS.parquet OUT.parquet --seed S [--shuffle]
    python scripts/real_text_calibration.py judge ROWS.parquet RUN_DIR          # its modes vs the property rows

The suite is 5,144 real prompts of three benchmarks from DATA_DIR/benchmarks: BIG-Bench Hard (2,025) and BBQ
(1,800, with its choices) as `beyond_real_data.py` writes them, and GSM8K test (1,319). Only GSM8K is read again
(`real_text_new.jsonl`); `assemble` takes every row's concepts from the three rows files. Each row is its
source's (`benchmark` = source) with metadata `length` (the tercile of the prompt's length within its source:
short / medium / long) and `group` (BBQ: its template, category + question index, 149 groups of 1-49 rows;
otherwise the row itself). The cells are source × length (9).

`plant` draws the scores: each cell gets a base rate uniform in [0.35, 0.85] (seeded), a row is 1 with its
cell's rate, 0.20 lower on rows whose prompt holds a dollar amount (`$` then a digit, `DOLLAR`: 400 rows, 7.8%,
396 of them GSM8K's, 4 BBH's); `--shuffle` then permutes those scores within the cells (the null: nothing
beyond the metadata). The property is read from the prompt text, never written to the metadata.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

DOLLAR = re.compile(r"\$\s?\d")
BASE_LOW, BASE_HIGH = 0.35, 0.85
DROP = 0.20
LENGTHS = ("short", "medium", "long")
NEW = ("gsm8k",)  # the sources read again; bbh and bbq come from their own rows files
READ = ("bbh_meta", "bbq", "real_text_new")
BoolArray = npt.NDArray[np.bool_]


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        yield from (json.loads(line) for line in fh if line.strip())


def _sources(data: Path, work: Path) -> Iterator[tuple[str, str, str, str]]:
    """(source, id, prompt, group) of every row, source by source."""
    bbq = {r["id"]: r["metadata"] for r in _jsonl(data / "benchmarks" / "bbq.jsonl")}
    for r in _jsonl(work / "bbh_meta.jsonl"):
        yield "bbh", r["id"], r["prompt"], r["id"]
    for r in _jsonl(work / "bbq.jsonl"):
        meta = bbq[r["id"]]
        yield "bbq", r["id"], r["prompt"], f"bbq:{meta['category']}:{meta['question_index']}"
    for r in _jsonl(data / "benchmarks" / "gsm8k.jsonl"):
        yield NEW[0], r["id"], r["prompt"], r["id"]


def _length_buckets(lengths: list[int]) -> list[str]:
    """Tercile of each length within its list (ties by order), as short / medium / long."""
    order = np.argsort(np.asarray(lengths), kind="stable")
    out = [""] * len(lengths)
    for rank, i in enumerate(order):
        out[int(i)] = LENGTHS[min(3 * rank // len(lengths), 2)]
    return out


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)
    tmp.replace(path)


def prepare(data: Path, work: Path) -> None:
    rows = list(_sources(data, work))
    buckets: dict[int, str] = {}
    for source in dict.fromkeys(s for s, *_ in rows):
        idx = [i for i, r in enumerate(rows) if r[0] == source]
        buckets.update(zip(idx, _length_buckets([len(rows[i][2]) for i in idx]), strict=True))
    records = [
        {
            "id": rid,
            "benchmark": source,
            "model": "planted",
            "score": None,
            "prompt": prompt,
            "metadata": {"length": buckets[i], "group": group},
        }
        for i, (source, rid, prompt, group) in enumerate(rows)
    ]
    _write_jsonl(work / "real_text.jsonl", records)
    _write_jsonl(work / "real_text_new.jsonl", [r for r in records if r["benchmark"] in NEW])
    share = sum(bool(DOLLAR.search(r[2])) for r in rows)
    print(f"{work / 'real_text.jsonl'}: {len(records)} rows, {share} with a dollar amount ({share / len(rows):.1%})")


def assemble(work: Path) -> None:
    """WORK/real_text.rows.parquet: the rows of real_text.jsonl, their concepts from the rows files read."""
    wanted = list(_jsonl(work / "real_text.jsonl"))
    tables = [pq.read_table(work / f"{name}.rows.parquet") for name in READ]
    schema = tables[0].schema
    table = pa.concat_tables([t.select(schema.names).cast(schema) for t in tables])
    where = {rid: i for i, rid in enumerate(table.column("row_id").to_pylist())}
    missing = [r["id"] for r in wanted if r["id"] not in where]
    if missing:
        raise SystemExit(f"{len(missing)} rows of real_text.jsonl were not read, e.g. {missing[0]}")
    table = table.take(pa.array([where[r["id"]] for r in wanted]))
    for name, values, kind in (
        ("benchmark", [r["benchmark"] for r in wanted], pa.string()),
        ("model", ["planted"] * len(wanted), pa.string()),
        ("score", [None] * len(wanted), pa.float64()),
        ("metadata", [json.dumps(r["metadata"], sort_keys=True) for r in wanted], pa.string()),
    ):
        i = table.schema.get_field_index(name)
        table = table.set_column(i, table.schema.field(i), pa.array(values, kind))
    out = work / "real_text.rows.parquet"
    _write_parquet(table, out)
    print(f"{out}: {table.num_rows} rows")


def _write_parquet(table: pa.Table, out: Path) -> None:
    tmp = out.with_suffix(".tmp.parquet")
    pq.write_table(table, tmp)
    tmp.replace(out)


def cells(table: pa.Table) -> list[str]:
    """source × length of every row."""
    meta = [json.loads(m) if m else {} for m in table.column("metadata").to_pylist()]
    return [f"{b}|{m.get('length')}" for b, m in zip(table.column("benchmark").to_pylist(), meta, strict=True)]


def has_property(table: pa.Table) -> BoolArray:
    """Rows whose prompt holds a dollar amount."""
    return np.array([bool(DOLLAR.search(p or "")) for p in table.column("prompt").to_pylist()], dtype=bool)


def planted_scores(cell: list[str], prop: BoolArray, seed: int, *, shuffle: bool = False) -> npt.NDArray[np.float64]:
    """0/1 scores: the cell's base rate, DROP lower on property rows; with `shuffle`, permuted within cells."""
    rng = np.random.default_rng(seed)
    names = sorted(set(cell))
    rate = dict(zip(names, rng.uniform(BASE_LOW, BASE_HIGH, len(names)), strict=True))
    p = np.array([rate[c] for c in cell]) - DROP * prop
    scores = (rng.random(len(cell)) < p).astype(np.float64)
    if shuffle:
        codes = np.array([names.index(c) for c in cell])
        for k in range(len(names)):
            idx = np.flatnonzero(codes == k)
            scores[idx] = scores[rng.permutation(idx)]
    return scores


def plant(rows: Path, out: Path, seed: int, *, shuffle: bool = False) -> None:
    table = pq.read_table(rows)
    prop = has_property(table)
    scores = planted_scores(cells(table), prop, seed, shuffle=shuffle)
    i = table.schema.get_field_index("score")
    table = table.set_column(i, table.schema.field(i), pa.array(scores, pa.float64()))
    name = f"{'shuffled' if shuffle else 'planted'}-s{seed}"
    j = table.schema.get_field_index("model")
    table = table.set_column(j, table.schema.field(j), pa.array([name] * table.num_rows, pa.string()))
    _write_parquet(table, out)
    print(f"{out}: {table.num_rows} rows ({name}), {int(prop.sum())} with a dollar amount, mean {scores.mean():.3f}")


def _jaccard(a: BoolArray, b: BoolArray) -> float:
    return round(int((a & b).sum()) / max(int((a | b).sum()), 1), 3)


def _mode_rows(mode: dict[str, Any], acts: list[dict[int, float]]) -> BoolArray:
    """The mode's rule on every row: some member's activation reaches its firing threshold (any activation
    where the run wrote no thresholds)."""
    rule = list(
        zip(mode["concept_ids"], mode.get("firing_thresholds") or [0.0] * len(mode["concept_ids"]), strict=True)
    )
    return np.array([any(row.get(c, 0.0) >= t and row.get(c, 0.0) > 0 for c, t in rule) for row in acts])


def _mode_figures(mode: dict[str, Any], fires: BoolArray, prop: BoolArray) -> dict[str, Any]:
    return {
        "rank": mode.get("rank"),
        "q": mode.get("q_value"),
        "rows": int(fires.sum()),
        "property_rows_in_it": int((fires & prop).sum()),
        "jaccard": _jaccard(fires, prop),
        "terms": mode.get("terms") or mode.get("description"),
    }


def judge(rows: Path, run: Path, validate: Path | None = None) -> dict[str, Any]:
    """RUN_DIR's failure modes against the property: for its first confirmed mode and its first candidate,
    their rows (any member concept active) against the property's rows (Jaccard), q and terms; how many
    candidates are mostly property rows (the effect cut into several modes); with `validate` (a validate.json
    listing the confirmed concepts), each confirmed concept's Jaccard with the property's rows."""
    table = pq.read_table(rows, columns=["concept_ids", "concept_acts", "prompt"])
    prop = has_property(table)
    ids = [set(x) for x in table.column("concept_ids").to_pylist()]
    acts = [
        dict(zip(i, a, strict=True))
        for i, a in zip(*(table.column(c).to_pylist() for c in ("concept_ids", "concept_acts")), strict=True)
    ]
    modes = sorted(pq.read_table(run / "failure_modes.parquet").to_pylist(), key=lambda m: m.get("rank") or 0)
    fires = [_mode_rows(m, acts) for m in modes]
    out: dict[str, Any] = {"modes": len(modes), "confirmed": sum(bool(m.get("confirmed")) for m in modes)}
    out["property_rows"] = int(prop.sum())
    out["mostly_property"] = int(sum(int((f & prop).sum()) > f.sum() / 2 for f in fires))
    confirmed = [i for i, m in enumerate(modes) if m.get("confirmed")]
    if confirmed:
        out["top_confirmed"] = _mode_figures(modes[confirmed[0]], fires[confirmed[0]], prop)
    if modes:
        out["top_candidate"] = _mode_figures(modes[0], fires[0], prop)
    if validate is not None:
        concepts = json.loads(validate.read_text(encoding="utf-8"))["beyond"]["concepts"]
        out["confirmed_concepts"] = [
            {"concept": c["concept"], "jaccard": _jaccard(np.array([c["concept"] in row for row in ids]), prop)}
            | {"q": c["q_value"]}
            for c in concepts
            if c.get("confirmed")
        ]
    print(json.dumps(out, default=str))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("data", type=Path)
    p.add_argument("work", type=Path)
    p = sub.add_parser("assemble")
    p.add_argument("work", type=Path)
    p = sub.add_parser("plant")
    p.add_argument("rows", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--shuffle", action="store_true")
    p = sub.add_parser("judge")
    p.add_argument("rows", type=Path)
    p.add_argument("run", type=Path)
    p.add_argument("--validate", type=Path, help="a validate.json whose beyond block lists the concepts")
    args = parser.parse_args(argv)
    if args.cmd == "prepare":
        prepare(args.data, args.work)
    elif args.cmd == "assemble":
        assemble(args.work)
    elif args.cmd == "plant":
        plant(args.rows, args.out, args.seed, shuffle=args.shuffle)
    else:
        judge(args.rows, args.run, args.validate)


if __name__ == "__main__":
    main()
