"""A real-text calibration suite for the findings (docs/trust.md, "Real text, planted"; issue 38).

    python scripts/real_text_calibration.py prepare DATA_DIR WORK_DIR            # WORK_DIR/real_text.jsonl
    python scripts/real_text_calibration.py plant ROWS.parquet OUT.parquet --seed S [--shuffle]
    python scripts/real_text_calibration.py judge ROWS.parquet RUN_DIR          # top confirmed mode vs property

`prepare` writes 5,923 real prompts of five benchmarks from DATA_DIR/benchmarks, unscored (read them with
`cg-ray extract --allow-missing-scores --text prompt`): GSM8K test (1,319), NQ-open dev (2,000), Social IQa
dev (1,954), AGIEval AQuA-RAT (250) and the first 100 four-question contexts of LogicBench BQA (400). Each row
is its benchmark's (`benchmark` = source) with metadata `length` (the tercile of the prompt's length within
its source: short / medium / long) and `group` (Social IQa: its context; LogicBench: its shared context;
otherwise the row itself). The cells are source × length (15).

`plant` draws the scores: each cell gets a base rate uniform in [0.35, 0.85] (seeded), a row is 1 with its
cell's rate, 0.20 lower on rows whose prompt holds a dollar amount (`$` then a digit, `DOLLAR`: 420 rows, 7.1%);
`--shuffle` then permutes those scores within the cells (the null: nothing beyond the metadata). The property
is read from the prompt text, never written to the metadata.
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
LOGIC_GROUPS = 100
BoolArray = npt.NDArray[np.bool_]


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        yield from (json.loads(line) for line in fh if line.strip())


def _sources(bench: Path) -> Iterator[tuple[str, str, str, str]]:
    """(source, id, prompt, group) of every row kept, source by source."""
    for r in _jsonl(bench / "gsm8k.jsonl"):
        yield "gsm8k", r["id"], r["prompt"], r["id"]
    for r in _jsonl(bench / "nq_open.jsonl"):
        yield "nq_open", r["id"], r["prompt"], r["id"]
    for r in _jsonl(bench / "social_iqa.jsonl"):
        yield "social_iqa", r["id"], r["prompt"], "siqa:" + r["metadata"]["context"]
    for r in _jsonl(bench / "agieval_en.jsonl"):
        if r["metadata"]["subset"] == "aqua-rat":
            yield "aqua_rat", r["id"], r["prompt"], r["id"]
    logic = [r for r in _jsonl(bench / "logicbench.jsonl") if r["metadata"]["task"] == "BQA"]
    sizes: dict[str, int] = {}
    for r in logic:
        key = r["id"].rsplit("-", 1)[0]
        sizes[key] = sizes.get(key, 0) + 1
    kept = [g for g, n in sizes.items() if n == 4][:LOGIC_GROUPS]
    keep = set(kept)
    for r in logic:
        key = r["id"].rsplit("-", 1)[0]
        if key in keep:
            yield "logicbench", r["id"], r["prompt"], key


def _length_buckets(lengths: list[int]) -> list[str]:
    """Tercile of each length within its list (ties by order), as short / medium / long."""
    order = np.argsort(np.asarray(lengths), kind="stable")
    out = [""] * len(lengths)
    for rank, i in enumerate(order):
        out[int(i)] = LENGTHS[min(3 * rank // len(lengths), 2)]
    return out


def prepare(data: Path, work: Path) -> Path:
    rows = list(_sources(data / "benchmarks"))
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
    work.mkdir(parents=True, exist_ok=True)
    out = work / "real_text.jsonl"
    tmp = out.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)
    tmp.replace(out)
    share = sum(bool(DOLLAR.search(r[2])) for r in rows)
    print(f"{out}: {len(records)} rows, {share} with a dollar amount ({share / len(records):.1%})")
    return out


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
    tmp = out.with_suffix(".tmp.parquet")
    pq.write_table(table, tmp)
    tmp.replace(out)
    print(f"{out}: {table.num_rows} rows ({name}), {int(prop.sum())} with a dollar amount, mean {scores.mean():.3f}")


def judge(rows: Path, run: Path) -> dict[str, Any]:
    """The first confirmed failure mode of RUN_DIR: its rows (any member concept active) against the
    property's rows (Jaccard), and its terms."""
    table = pq.read_table(rows, columns=["concept_ids", "prompt"])
    prop = has_property(table)
    modes = pq.read_table(run / "failure_modes.parquet").to_pylist()
    confirmed = [m for m in modes if m.get("confirmed")]
    out: dict[str, Any] = {"modes": len(modes), "confirmed": len(confirmed), "property_rows": int(prop.sum())}
    if confirmed:
        top = confirmed[0]
        members = set(top["concept_ids"])
        fires = np.array([bool(members & set(ids)) for ids in table.column("concept_ids").to_pylist()])
        both = int((fires & prop).sum())
        out.update(
            mode_rows=int(fires.sum()),
            overlap=both,
            jaccard=round(both / int((fires | prop).sum()), 3),
            terms=top.get("terms") or top.get("description"),
        )
    print(json.dumps(out, default=str))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("data", type=Path)
    p.add_argument("work", type=Path)
    p = sub.add_parser("plant")
    p.add_argument("rows", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--shuffle", action="store_true")
    p = sub.add_parser("judge")
    p.add_argument("rows", type=Path)
    p.add_argument("run", type=Path)
    args = parser.parse_args(argv)
    if args.cmd == "prepare":
        prepare(args.data, args.work)
    elif args.cmd == "plant":
        plant(args.rows, args.out, args.seed, shuffle=args.shuffle)
    else:
        judge(args.rows, args.run)


if __name__ == "__main__":
    main()
