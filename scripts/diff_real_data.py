"""The real-data example of docs/compare.md: GPT-3 6B vs 175B (+ verifier) on GSM8K, no second reading.

    python scripts/diff_real_data.py rescore --rows A/rows.parquet --outputs SCORED.jsonl --model M --out B.parquet
    python scripts/diff_real_data.py table DIFF_DIR [--key top_regressed|top_improved] [--n 10]
    python scripts/diff_real_data.py plant --rows A/rows.parquet --match REGEX --effect 0.2 --seed S --out B.parquet

`rescore` writes run B's rows from run A's: the rows were read with the question only (`--text prompt`),
so s̃ does not depend on the answering model; each row's score, model and response are replaced by model
M's from the scored-outputs file (a row M has no output for is an error), and A's extract manifest is
copied beside it with `model_filter` = M and `rescored_from`, so the diff's reader check reads it.
`table` prints the Markdown table of a diff's listed concepts. `plant` writes a run B whose change from A
is known (the held-out findings' real-text check, docs/compare.md): every row flips with probability
`--flip` each way (right → wrong, wrong → right), and the rows whose prompt matches `--match` (a property
of the real text, not a concept) lose `--effect` more on average (their right rows flip to wrong with
`--flip` + effect / their share right); the manifest is copied as `rescore` does.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np
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


def plant(rows: Path, match: str, effect: float, flip: float, seed: int, out: Path) -> None:
    table = pq.read_table(rows)
    prompts = table.column("prompt").to_pylist()
    a = np.asarray(table.column("score").to_pylist(), dtype=np.float64)
    planted = np.array([re.search(match, p or "", flags=re.IGNORECASE) is not None for p in prompts])
    rng = np.random.default_rng(seed)
    right = a >= 0.5
    regress = flip + np.where(planted, effect / max(float(right[planted].mean()), 1e-9), 0.0)
    u = rng.random(a.size)
    b = np.where(right, (u >= regress).astype(np.float64), (u < flip).astype(np.float64))
    table = table.set_column(table.schema.get_field_index("score"), "score", pa.array(b, pa.float64()))
    pq.write_table(table, out)
    manifest = json.loads(rows.with_name(rows.name.removesuffix(".parquet") + ".manifest.json").read_text())
    manifest |= {"planted": {"rows": str(rows), "match": match, "effect": effect, "flip": flip, "seed": seed}}
    out.with_name(out.name.removesuffix(".parquet") + ".manifest.json").write_text(json.dumps(manifest, indent=2))
    change = b - a
    print(
        f"{out}: {planted.sum()} of {a.size} rows match {match!r}; mean change there {change[planted].mean():+.3f}, "
        f"elsewhere {change[~planted].mean():+.3f}"
    )


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
    pl = sub.add_parser("plant")
    pl.add_argument("--rows", type=Path, required=True)
    pl.add_argument("--match", required=True, help="regular expression on the prompt: the rows that lose more")
    pl.add_argument("--effect", type=float, default=0.2)
    pl.add_argument("--flip", type=float, default=0.1)
    pl.add_argument("--seed", type=int, default=0)
    pl.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if args.cmd == "rescore":
        rescore(args.rows, args.outputs, args.model, args.out)
    elif args.cmd == "plant":
        plant(args.rows, args.match, args.effect, args.flip, args.seed, args.out)
    else:
        table(args.diff_dir, args.key, args.n)


if __name__ == "__main__":
    main()
