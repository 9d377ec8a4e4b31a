"""The real-data example of docs/compare.md: GPT-3 6B vs 175B (+ verifier) on GSM8K, no second reading.

    python scripts/diff_real_data.py rescore --rows A/rows.parquet --outputs SCORED.jsonl --model M --out B.parquet
    python scripts/diff_real_data.py table DIFF_DIR [--key top_regressed|top_improved] [--n 10]

`rescore` writes run B's rows from run A's: the rows were read with the question only (`--text prompt`),
so s̃ does not depend on the answering model; each row's score, model and response are replaced by model
M's from the scored-outputs file (a row M has no output for is an error), and A's extract manifest is
copied beside it with `model_filter` = M and `rescored_from`, so the diff's reader check reads it.
`table` prints the Markdown table of a diff's listed concepts.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def rescore(rows: Path, outputs: Path, model: str, out: Path) -> None:
    found: dict[str, tuple[float, str]] = {}
    with outputs.open(encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r["model"] == model:
                found[r["id"]] = (r["score"], r["output"])
    table = pq.read_table(rows)
    ids = table.column("row_id").to_pylist()
    missing = [i for i in ids if i not in found]
    if missing:
        raise SystemExit(f"{model} has no output for {len(missing)} rows, e.g. {missing[:3]}")
    for name, values, kind in (
        ("score", [found[i][0] for i in ids], pa.float64()),
        ("response", [found[i][1] for i in ids], pa.string()),
        ("model", [model] * len(ids), pa.string()),
    ):
        if name in table.column_names:
            index = table.schema.get_field_index(name)
            table = table.set_column(index, table.schema.field(name), pa.array(values, kind))
    pq.write_table(table, out)
    manifest = json.loads(rows.with_name(rows.name.removesuffix(".parquet") + ".manifest.json").read_text())
    manifest |= {"model_filter": model, "rescored_from": {"rows": str(rows), "scores": str(outputs), "model": model}}
    out.with_name(out.name.removesuffix(".parquet") + ".manifest.json").write_text(json.dumps(manifest, indent=2))
    print(f"{out}: {table.num_rows} rows with the scores and responses of {model}")


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:+.3f}"


def table(diff_dir: Path, key: str, n: int) -> None:
    doc = json.loads((diff_dir / "diff.json").read_text(encoding="utf-8"))
    flips = "right_in_a_wrong_in_b" if key == "top_regressed" else "wrong_in_a_right_in_b"
    print(
        "| # | concept | description | ΔX_model [95% CI] | beyond Δ mean score [95% CI] | X_model A → B | rows "
        "| e.g. flipped |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for i, e in enumerate(doc[key][:n], 1):
        r = e["relative"]
        name = " ".join((e["description"] or e["label"] or "(no label)").replace("|", "\\|").split())
        example = (e["examples"].get(flips) or [{}])[0].get("row_id", "—")
        print(
            f"| {i} | {e['concept_id']} | {name} | {_f(e['delta_X_model'])} [{_f(e['low'])}, {_f(e['high'])}] | "
            f"{_f(r['delta'])} [{_f(r['low'])}, {_f(r['high'])}] | {e['X_model_a']:.3f} → {e['X_model_b']:.3f} | "
            f"{e['n_paired_active']} | {example} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("rescore")
    r.add_argument("--rows", type=Path, required=True)
    r.add_argument("--outputs", type=Path, required=True)
    r.add_argument("--model", required=True)
    r.add_argument("--out", type=Path, required=True)
    t = sub.add_parser("table")
    t.add_argument("diff_dir", type=Path)
    t.add_argument("--key", choices=["top_regressed", "top_improved"], default="top_regressed")
    t.add_argument("--n", type=int, default=10)
    args = ap.parse_args()
    if args.cmd == "rescore":
        rescore(args.rows, args.outputs, args.model, args.out)
    else:
        table(args.diff_dir, args.key, args.n)


if __name__ == "__main__":
    main()
