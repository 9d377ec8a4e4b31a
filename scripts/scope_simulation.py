"""Planted benchmark gaps on real text, read by the default reader: which scope rule finds them
(docs/method.md, "Choosing the rule: planted gaps on real text").

    python scripts/scope_simulation.py prepare DATA_DIR WORK_DIR     # WORK_DIR/scope_sources.jsonl
    cg-ray extract --input WORK_DIR/scope_sources.jsonl --out WORK_DIR/scope_sources.rows.parquet \\
        --allow-missing-scores
    python scripts/scope_simulation.py run WORK_DIR/scope_sources.rows.parquet DATA_DIR --reps 20 --null-reps 400 \\
        --out WORK_DIR/scope_simulation.json
    python scripts/scope_simulation.py table WORK_DIR/scope_simulation.json [MORE.json ...]

A *planted theme* is a question form or a topic of a real benchmark (THEMES: NQ-open's "where" questions,
SocialIQA's "how would X feel", GSM8K's percentages, BBQ's religion questions, ...). Each replication deals the
benchmark's rows, by group (a BBQ template whole on one side), into a reference holding the theme at a set
share (5–20%) and a benchmark of the other rows that never asks it; the null deals both sides from all rows
alike. Then each rule is run as `cg-ray scope` runs it:

- `ratio`: the per-concept rule before #57 (p_b / p_R confidently below 0.5, rows as independent draws);
- `excess`: the per-concept rule now (p_R − p_b confidently above 2 points, by cluster);
- `rows`: the row-level view (`cg_ray.scope.uncovered`): the confirmed themes of uncovered reference rows.

A reported item (a gap's theme of concepts, or a row theme) is *right* when most (≥ half) of the reference rows
it covers are the planted theme's; *recall* is the share of replications where some item is right, *precision*
the share of reported items that are right; under the null any reported item is false.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SOURCES = {"nq_open": "nq_open.jsonl", "social_iqa": "social_iqa.jsonl", "gsm8k": "gsm8k.jsonl", "bbq": "bbq.jsonl"}
CHOICES = "{prompt}\n{choices}"
TEMPLATED = {"social_iqa": CHOICES, "bbq": CHOICES}


def _first_word(word: str) -> Callable[[dict[str, Any]], bool]:
    return lambda r: r["prompt"].split()[0].lower() == word


def _question(pattern: str) -> Callable[[dict[str, Any]], bool]:
    return lambda r: re.search(pattern, str(r["metadata"].get("question", "")).lower()) is not None


def _text(pattern: str) -> Callable[[dict[str, Any]], bool]:
    return lambda r: re.search(pattern, r["prompt"]) is not None


def _category(name: str) -> Callable[[dict[str, Any]], bool]:
    return lambda r: r["metadata"].get("category") == name


# theme name -> (source benchmark, kind, which rows hold it)
THEMES: dict[str, tuple[str, str, Callable[[dict[str, Any]], bool]]] = {
    "nq_open: 'where' questions": ("nq_open", "form", _first_word("where")),
    "nq_open: 'when' questions": ("nq_open", "form", _first_word("when")),
    "social_iqa: 'how would X feel'": ("social_iqa", "form", _question(r"feel")),
    "social_iqa: 'why did X'": ("social_iqa", "form", _question(r"^why")),
    "gsm8k: percentages": ("gsm8k", "topic", _text(r"\bpercent|%")),
    "gsm8k: hours and minutes": ("gsm8k", "topic", _text(r"\b(minutes?|hours?)\b")),
    "bbq: religion": ("bbq", "topic", _category("Religion")),
    "bbq: sexual orientation": ("bbq", "topic", _category("Sexual_orientation")),
}
SHARES = (0.05, 0.10, 0.15, 0.20)
RULES = ("ratio", "excess", "rows")


def group_of(benchmark: str, r: dict[str, Any]) -> str:
    """BBQ's template (category, question index) holds its rows together; other rows are their own group."""
    if benchmark == "bbq":
        m = r["metadata"]
        return f"bbq:{m['category']}:{m['question_index']}"
    return str(r["id"])


def prepare(data: Path, work: Path) -> None:
    from cg_ray.benchmarks.local import load_normalized
    from cg_ray.benchmarks.sources import NormalizedSource

    work.mkdir(parents=True, exist_ok=True)
    out = work / "scope_sources.jsonl"
    tmp = out.with_suffix(".tmp")
    n = 0
    with tmp.open("w", encoding="utf-8") as f:
        for name, file in SOURCES.items():
            source = NormalizedSource(kind="normalized", path=str(data / "benchmarks" / file), benchmark=name)
            if name in TEMPLATED:
                source = source.model_copy(update={"prompt_template": TEMPLATED[name]})
            for r in load_normalized(source):
                meta = json.loads(r["metadata"])
                row = {"id": r["row_id"], "benchmark": name, "prompt": r["prompt"], "metadata": meta}
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                n += 1
    os.replace(tmp, out)
    print(f"wrote {out}: {n} rows")


@dataclass
class Source:
    name: str
    fired: Any  # scipy csr: rows × concepts firing indicators (thresholds over the source's rows)
    groups: np.ndarray
    rows: list[dict[str, Any]]


def load_sources(rows_path: Path, data: Path) -> dict[str, Source]:
    from cg_ray.metrics.firing import column_thresholds
    from cg_ray.scope.counts import read_activations
    from cg_ray.scope.uncovered import firing_indicators

    acts = read_activations([rows_path])
    by_id: dict[str, dict[str, Any]] = {}
    for name, file in SOURCES.items():
        for line in (data / "benchmarks" / file).open(encoding="utf-8"):
            r = json.loads(line)
            by_id[str(r["id"])] = {**r, "benchmark": name}
    out = {}
    ids = np.asarray(acts.row_ids)
    for name in SOURCES:
        keep = np.flatnonzero(acts.groups == name)
        if keep.size == 0:
            continue
        m = acts.matrix[keep].tocsc()
        fired = firing_indicators(m, column_thresholds(m))
        rows = [by_id[str(i)] for i in ids[keep]]
        out[name] = Source(name, fired, np.asarray([group_of(name, r) for r in rows]), rows)
    return out


def deal(
    src: Source, planted: np.ndarray | None, share: float, n: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(is_bench, is_ref) over the source's rows, dealt by group. With `planted`, the reference holds the theme
    at `share` and the benchmark none of it; without, both sides are drawn from all rows alike (the null)."""
    groups = src.groups
    names, codes = np.unique(groups, return_inverse=True)
    order = rng.permutation(names.size)
    size = np.bincount(codes)
    theme_group = np.zeros(names.size, bool) if planted is None else np.bincount(codes, planted) > 0
    is_bench = np.zeros(groups.size, bool)
    is_ref = np.zeros(groups.size, bool)
    want = {"bench": n, "ref_theme": round(share * n) if planted is not None else 0}
    want["ref_other"] = n - want["ref_theme"]
    got = dict.fromkeys(want, 0)
    turn = 0
    for gi in order:
        rows = codes == gi
        if theme_group[gi]:
            slot = "ref_theme"
        else:  # alternate so both sides draw from the whole population
            slot = ("bench", "ref_other")[turn % 2]
            if got[slot] >= want[slot]:
                slot = "ref_other" if slot == "bench" else "bench"
            turn += 1
        if got[slot] >= want[slot]:
            continue
        got[slot] += int(size[gi])
        (is_bench if slot == "bench" else is_ref)[rows] = True
    return is_bench, is_ref


def judge_items(
    src: Source, is_bench: np.ndarray, is_ref: np.ndarray, planted: np.ndarray | None
) -> dict[str, list[float]]:
    """Per rule, the planted share of each reported item's reference rows (an empty list: nothing reported)."""
    from cg_ray.scope.clustered import grouped_shares
    from cg_ray.scope.reference import ScopeRule, compare
    from cg_ray.scope.uncovered import coverage_of_fired

    truth = planted if planted is not None else np.zeros(is_ref.size, bool)
    out: dict[str, list[float]] = {}
    xb, xr = src.fired[np.flatnonzero(is_bench)], src.fired[np.flatnonzero(is_ref)]
    bs, rs = grouped_shares(xb, src.groups[is_bench]), grouped_shares(xr, src.groups[is_ref])
    ref_truth = truth[is_ref]
    xr_csc = xr.tocsc()
    for method in ("ratio", "excess"):
        rule = ScopeRule(method=method)  # type: ignore[arg-type]
        if method == "ratio":  # the rule before counted rows as independent draws
            cmp = compare(bs.k.astype(np.int64), bs.n, rs.k.astype(np.int64), rs.n, rule)
        else:
            cmp = compare(
                bs.k.astype(np.int64), bs.n, rs.k.astype(np.int64), rs.n, rule, bench_shares=bs, ref_shares=rs
            )
        gaps = [int(c) for c in cmp.gaps["concept"]]
        shares = []
        taken = np.zeros(xr.shape[0], bool)
        for c in gaps:  # one item per group of gaps firing on the same rows (themes.py's rule, Jaccard ≥ 0.5)
            rows = np.asarray(xr_csc[:, c].todense()).ravel() > 0
            if rows.sum() == 0 or (taken.any() and (taken & rows).sum() >= 0.5 * (taken | rows).sum()):
                continue
            shares.append(float(ref_truth[rows].mean()))
            taken |= rows
        out[method] = shares
    cov = coverage_of_fired(src.fired, is_bench, is_ref, src.groups)
    out["rows"] = [float(truth[list(t.reference_rows)].mean()) for t in cov.themes if t.confirmed and t.reference_rows]
    out["rows_region"] = [float(cov.uncovered.reference.share)] if cov.confirmed else []
    return out


def run(rows_path: Path, data: Path, reps: int, null_reps: int, n: int, out: Path, seed: int, label: str = "") -> None:
    sources = load_sources(rows_path, data)
    rng = np.random.default_rng(seed)
    results: dict[str, Any] = {
        "n_per_side": n, "reps": reps, "null_reps": null_reps, "planted": [], "null": [], "reading": label,
    }  # fmt: skip
    start = time.perf_counter()
    for theme, (name, kind, holds) in THEMES.items():
        if name not in sources:
            continue
        src = sources[name]
        planted = np.asarray([holds(r) for r in src.rows])
        for share in SHARES:
            for rep in range(reps):
                is_bench, is_ref = deal(src, planted, share, min(n, src.groups.size // 2), rng)
                items = judge_items(src, is_bench, is_ref, planted)
                results["planted"].append(
                    {"theme": f"{theme}{label}", "kind": kind, "share": share, "rep": rep,
                     "ref_share": float(planted[is_ref].mean()), "items": items}
                )  # fmt: skip
            print(f"{theme} at {share:.0%}: {reps} reps, {time.perf_counter() - start:.0f} s", flush=True)
    names = sorted(sources)
    for rep in range(null_reps):
        src = sources[names[rep % len(names)]]
        is_bench, is_ref = deal(src, None, 0.0, min(n, src.groups.size // 2), rng)
        results["null"].append({"source": src.name, "rep": rep, "items": judge_items(src, is_bench, is_ref, None)})
        if (rep + 1) % 20 == 0:
            print(f"null: {rep + 1} reps, {time.perf_counter() - start:.0f} s", flush=True)
    results["seconds"] = round(time.perf_counter() - start, 1)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(results), encoding="utf-8")
    os.replace(tmp, out)
    print(f"wrote {out} in {results['seconds']} s")


def summarise(planted: list[dict[str, Any]], null: list[dict[str, Any]]) -> dict[str, Any]:
    """Per rule and planted cell (theme × share): recall, precision; and the null's rate of any item."""
    table: dict[str, Any] = {"planted": {}, "null": {}}
    for rule in RULES:
        cells: dict[tuple[str, float], dict[str, float]] = {}
        for theme in dict.fromkeys(r["theme"] for r in planted):
            for share in SHARES:
                reps = [r for r in planted if r["theme"] == theme and r["share"] == share]
                if not reps:
                    continue
                items = [r["items"][rule] for r in reps]
                reported = [s for it in items for s in it]
                cells[(theme, share)] = {
                    "recall": float(np.mean([any(s >= 0.5 for s in it) for it in items])),
                    "precision": float(np.mean([s >= 0.5 for s in reported])) if reported else float("nan"),
                    "reps": len(reps),
                }
        table["planted"][rule] = cells
        table["null"][rule] = {
            "reps": len(null),
            "any_item": float(np.mean([bool(r["items"][rule]) for r in null])) if null else float("nan"),
        }
    return table


def print_table(paths: list[Path]) -> None:
    runs = [json.loads(p.read_text(encoding="utf-8")) for p in paths]
    planted = [r for run in runs for r in run["planted"]]
    null = [r for run in runs for r in run["null"]]
    t = summarise(planted, null)
    sizes = sorted({run["n_per_side"] for run in runs})
    print(f"up to {sizes[-1]} rows a side; null: {len(null)} replications; {sum(run['seconds'] for run in runs):.0f} s")
    print("| planted theme | share of the reference | " + " | ".join(f"{r}: recall / precision" for r in RULES) + " |")
    print("|---|---|" + "---|" * len(RULES))
    for theme, share in t["planted"]["rows"]:
        parts = []
        for r in RULES:
            v = t["planted"][r].get((theme, share))
            parts.append("–" if v is None else f"{v['recall']:.2f} / {v['precision']:.2f}")
        reps = t["planted"]["rows"][(theme, share)]["reps"]
        print(f"| {theme} | {share:.0%} ({reps} reps) | " + " | ".join(parts) + " |")
    any_item = " | ".join(f"{t['null'][r]['any_item']:.3f}" for r in RULES)
    print(f"| null: a replication reporting any item | | {any_item} |")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("prepare")
    a.add_argument("data", type=Path)
    a.add_argument("work", type=Path)
    b = sub.add_parser("run")
    b.add_argument("rows", type=Path)
    b.add_argument("data", type=Path)
    b.add_argument("--reps", type=int, default=20)
    b.add_argument("--null-reps", type=int, default=400)
    b.add_argument("--n", type=int, default=700, help="rows a side")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--label", default="", help="appended to each theme's name (e.g. ' (chat template)')")
    c = sub.add_parser("table")
    c.add_argument("results", type=Path, nargs="+")
    args = p.parse_args(argv)
    if args.cmd == "prepare":
        prepare(args.data, args.work)
    elif args.cmd == "run":
        run(args.rows, args.data, args.reps, args.null_reps, args.n, args.out, args.seed, args.label)
    else:
        print_table(args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
