"""Realised FDR and power of the findings' decision rule, the rule in use beside candidate rules (issue #49).

`collect` judges seeded suites with several real effects (tests/profile/planted_suites.py
`write_effects_suite`: N = 4,000 rows, `type` × `level` cells, a fifth of the rows questions answered four
times) through the real judgement (`nullcheck.judge_rows`, the defaults a user gets) and records, for every
call of the decision rule, what each split tested: the findings, their tests and ranks. Every candidate rule
is then applied to the same records (`table`), so the rules differ in nothing but the aggregation.

A finding is true when it is one of the planted effects: a concept finding when it is an effect's concept
below its cells, a failure mode when it holds an effect's concept. Everything else confirmed is false
(concepts above their cells, random concepts, the `geo` concept that tracks metadata). Power: the share of
planted effects confirmed as a failure mode.

    .venv/bin/python scripts/fdr_simulation.py collect --setting five --reps 400 --out /tmp/fdr
    .venv/bin/python scripts/fdr_simulation.py table /tmp/fdr
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cg_ray.artifacts.rows import open_rows
from cg_ray.config import MetricsConfig
from cg_ray.profile import decision, split_modes, splits, verdicts
from cg_ray.profile.nullcheck import judge_rows
from tests.profile.planted_suites import EFFECT_CONCEPT, write_effects_suite

# name → how its effects are drawn: (count, share range, drop range)
SETTINGS: dict[str, tuple[int, tuple[float, float], tuple[float, float]]] = {
    "null": (0, (0.0, 0.0), (0.0, 0.0)),
    "one": (1, (0.03, 0.08), (0.10, 0.20)),
    "five": (5, (0.03, 0.08), (0.10, 0.20)),
    "fifteen": (15, (0.03, 0.08), (0.10, 0.20)),
    "five_at_5pc_015": (5, (0.05, 0.05), (0.15, 0.15)),
    "five_at_3pc_015": (5, (0.03, 0.03), (0.15, 0.15)),
}


def draw_effects(setting: str, rng: np.random.Generator) -> list[tuple[float, float]]:
    count, shares, drops = SETTINGS[setting]
    return [(float(rng.uniform(*shares)), float(rng.uniform(*drops))) for _ in range(count)]


class Recorder:
    """Stands in for `decision.judge` where the judgement calls it: records each call, then judges as usual."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.judge = decision.judge

    def __call__(self, per_split: Any, splits: int, fdr: float, bounds: tuple[float, float]) -> Any:
        self.calls.append({"per_split": per_split, "splits": splits, "fdr": fdr})
        return self.judge(per_split, splits, fdr, bounds)


def _record_one(path: Path, cfg: MetricsConfig) -> list[dict[str, Any]]:
    rec = Recorder()
    real_split_modes = split_modes.split_modes

    def modes_recorded(*args: Any, **kw: Any) -> Any:
        out = real_split_modes(*args, **kw)
        rec.calls[-1]["kind"] = "modes"
        rec.calls[-1]["members"] = [tuple(int(c) for c in mode.members) for mode, _ in out]
        return out

    saved = (verdicts.judge, split_modes.judge, split_modes.split_modes)
    verdicts.judge, split_modes.judge = rec, rec
    from cg_ray.profile import findings

    saved_findings = getattr(findings, "split_modes", None)
    split_modes.split_modes = modes_recorded
    if saved_findings is not None:
        findings.split_modes = modes_recorded  # type: ignore[attr-defined]
    try:
        judge_rows(open_rows(path), cfg)
    finally:
        verdicts.judge, split_modes.judge, split_modes.split_modes = saved
        if saved_findings is not None:
            findings.split_modes = saved_findings  # type: ignore[attr-defined]
    for call in rec.calls:
        if "kind" in call:
            continue
        keys = [k for chosen in call["per_split"] for k, _, _ in chosen]
        call["kind"] = "concepts" if keys and isinstance(keys[0], verdicts.ConceptKey) else "slices"
    return rec.calls


def collect(setting: str, reps: int, out: Path, start: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    cfg = MetricsConfig()
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(start, start + reps):
            target = out / f"{setting}-{rep:04d}.pkl"
            if target.exists():
                continue
            t0 = time.perf_counter()
            rng = np.random.default_rng([rep, len(setting)])
            effects = draw_effects(setting, rng)
            path = Path(tmp) / "suite.parquet"
            carried = write_effects_suite(path, 10_000 + rep, effects)
            calls = _record_one(path, cfg)
            record = {"setting": setting, "rep": rep, "effects": effects, "n_rows": [int(c.sum()) for c in carried]}
            record["calls"] = calls
            target.write_bytes(pickle.dumps(record))
            print(f"{setting} rep {rep}: {time.perf_counter() - t0:.1f} s", flush=True)


# ---- the rules compared: each maps (per_split, splits, fdr) to the set of confirmed keys -------------------

Rule = Callable[[Sequence[Sequence[tuple[Any, decision.SplitTest, int]]], int, float], set[Any]]


def quantile_bh(gamma: float) -> Rule:
    """Meinshausen's quantile of the splits' weighted-BH q-values (Bonferroni over a finding's tries): the
    ⌈γR⌉-th smallest / γ ≤ fdr. γ = 0.5 is the rule of stop 52 (median × 2)."""

    def rule(per_split: Any, splits: int, fdr: float) -> set[Any]:
        verdicts = decision.judge(per_split, splits, fdr, (-1.0, 1.0), gamma)
        return {k for k, v in verdicts.items() if v.confirmed}

    return rule


def split_rejections(chosen: Sequence[tuple[Any, decision.SplitTest, int]], level: float) -> list[Any]:
    """The rules one split's weighted BH rejects at `level` (each listed by its finding's key)."""
    if not chosen:
        return []
    p = np.array([t.p_value for _, t, _ in chosen])
    ranks = np.array([r for _, _, r in chosen], dtype=np.int64)
    q = np.minimum(1.0, decision.split_multipliers(p, ranks) * np.maximum(p, decision.P_FLOOR))
    return [key for (key, _, _), v in zip(chosen, q, strict=True) if v <= level]


def e_bh(share: float) -> Rule:
    """Derandomised e-BH (Ren & Barber 2024): each split's weighted BH at share × fdr makes e-values
    (rejections of a finding / (share × fdr × the split's rejections)), averaged over the splits, then e-BH."""

    def rule(per_split: Any, splits: int, fdr: float) -> set[Any]:
        level = share * fdr
        e: dict[Any, float] = {}
        for chosen in per_split:
            rejected = split_rejections(chosen, level)
            for key in rejected:
                e[key] = e.get(key, 0.0) + 1.0 / (level * len(rejected) * splits)
        ordered = sorted(e.items(), key=lambda kv: -kv[1])
        k_hat = max((k for k, (_, v) in enumerate(ordered, start=1) if v >= 1.0 / (fdr * k)), default=0)
        return {key for key, _ in ordered[:k_hat]}

    return rule


def e_bh_mixture(shares: Sequence[float]) -> Rule:
    """e-BH on the mean of the split-BH e-values at several shares of fdr (a mean of e-values is one)."""

    def rule(per_split: Any, splits: int, fdr: float) -> set[Any]:
        e: dict[Any, float] = {}
        for share in shares:
            level = share * fdr
            for chosen in per_split:
                rejected = split_rejections(chosen, level)
                for key in rejected:
                    e[key] = e.get(key, 0.0) + 1.0 / (level * len(rejected) * splits * len(shares))
        ordered = sorted(e.items(), key=lambda kv: -kv[1])
        k_hat = max((k for k, (_, v) in enumerate(ordered, start=1) if v >= 1.0 / (fdr * k)), default=0)
        return {key for key, _ in ordered[:k_hat]}

    return rule


def product(per_split: Any, splits: int, fdr: float) -> set[Any]:
    """The rule `decision.judge` implements now."""
    return {k for k, v in decision.judge(per_split, splits, fdr, (-1.0, 1.0)).items() if v.confirmed}


RULES: dict[str, Rule] = {
    "product": product,
    "median_bh": quantile_bh(0.5),
    "quantile_bh_0.3": quantile_bh(0.3),
    "quantile_bh_0.7": quantile_bh(0.7),
    "quantile_bh_0.8": quantile_bh(0.8),
    "quantile_bh_0.9": quantile_bh(0.9),
    "quantile_bh_1.0": quantile_bh(1.0),
    "e_bh_quarter": e_bh(0.25),
    "e_bh_half": e_bh(0.5),
    "e_bh_3q": e_bh(0.75),
    "e_bh_full": e_bh(1.0),
    "e_bh_mix": e_bh_mixture((0.25, 0.5, 1.0)),
}


def _truth(call: dict[str, Any], key: Any, n_effects: int) -> bool | None:
    effect_concepts = set(range(EFFECT_CONCEPT, EFFECT_CONCEPT + n_effects))
    if call["kind"] == "concepts":
        return key.concept in effect_concepts and key.direction == decision.LESS
    if call["kind"] == "modes":
        return bool(set(call["members"][key]) & effect_concepts)
    return None  # slices: on the metadata, not scored here


def _score(record: dict[str, Any], rule: Rule) -> dict[str, float]:
    n_effects = len(record["effects"])
    false = confirmed = 0
    found: set[int] = set()
    for call in record["calls"]:
        if call["kind"] == "slices":
            continue
        for key in rule(call["per_split"], call["splits"], call["fdr"]):
            truth = _truth(call, key, n_effects)
            confirmed += 1
            false += not truth
            if call["kind"] == "modes" and truth:
                found |= {c - EFFECT_CONCEPT for c in call["members"][key] if c - EFFECT_CONCEPT in range(n_effects)}
    return {"fdp": false / max(confirmed, 1), "any_false": float(false > 0), "found": len(found), "effects": n_effects}


def _coverage(record: dict[str, Any]) -> tuple[int, int]:
    """Of the product rule's confirmed modes holding exactly one planted effect's concept: how many intervals
    hold that effect's planted drop (its rows against the other rows of their cells), and how many there were."""
    n_effects = len(record["effects"])
    held = shown = 0
    for call in record["calls"]:
        if call["kind"] != "modes":
            continue
        for key, v in decision.judge(call["per_split"], call["splits"], call["fdr"], (-1.0, 1.0)).items():
            own = [c - EFFECT_CONCEPT for c in call["members"][key] if c - EFFECT_CONCEPT in range(n_effects)]
            if not v.confirmed or len(own) != 1 or v.low is None or v.high is None:
                continue
            drop = -record["effects"][own[0]][1]
            shown += 1
            held += v.low <= drop <= v.high
    return held, shown


def table(folder: Path) -> None:
    records: dict[str, list[dict[str, Any]]] = {}
    for f in sorted(folder.glob("*.pkl")):
        r = pickle.loads(f.read_bytes())
        records.setdefault(r["setting"], []).append(r)
    print("| setting | reps | rule | realised FDR | P(any false) | power (effects found as a mode) |")
    print("|---|---|---|---|---|---|")
    for setting in SETTINGS:
        reps = records.get(setting, [])
        if not reps:
            continue
        for name, rule in RULES.items():
            scored = [_score(r, rule) for r in reps]
            fdr = float(np.mean([s["fdp"] for s in scored]))
            anyf = float(np.mean([s["any_false"] for s in scored]))
            total = sum(s["effects"] for s in scored)
            power = sum(s["found"] for s in scored) / total if total else float("nan")
            print(f"| {setting} | {len(reps)} | {name} | {fdr:.4f} | {anyf:.3f} | {power:.3f} |")
        cov = [_coverage(r) for r in reps]
        held, shown = sum(c[0] for c in cov), sum(c[1] for c in cov)
        if shown:
            print(f"<!-- {setting}: intervals of confirmed real modes holding the planted drop: {held} of {shown} -->")


def oracle(setting: str, reps: int, levels: Sequence[float]) -> None:
    """The power of a test that needs no search: each planted effect's own rows, known in advance, tested alone
    on every row of its suite (the product's cluster contrast within the type × level cells, groups = questions),
    one-sided at each of `levels`. No held-out rule can beat it; it bounds what any rule could reach."""
    from cg_ray.profile.heldout import HeldOut
    from cg_ray.profile.strata import cell_keys, read_frame

    hits = np.zeros(len(levels))
    total = 0
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(reps):
            effects = draw_effects(setting, np.random.default_rng([rep, len(setting)]))
            path = Path(tmp) / "suite.parquet"
            carried = write_effects_suite(path, 10_000 + rep, effects)
            frame = read_frame(open_rows(path))
            cells = cell_keys(frame, ["type", "level"])
            prompts = pq_prompts(path)
            _, groups = np.unique(prompts, return_inverse=True)
            everything = HeldOut.of(np.flatnonzero(frame.scored), frame.scores, cells, groups)
            for rows in carried:
                p = everything.contrast(np.flatnonzero(rows)).p_value
                hits += np.array([p <= a for a in levels])
                total += 1
    for a, h in zip(levels, hits, strict=True):
        print(
            f"{setting}: an effect's own rows tested alone on every row at one-sided {a:g}: {h / total:.3f} of {total}"
        )


def pq_prompts(path: Path) -> np.ndarray:
    import pyarrow.parquet as pq

    return np.asarray(pq.read_table(path, columns=["prompt"])["prompt"].to_pylist())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--setting", choices=list(SETTINGS), required=True)
    c.add_argument("--reps", type=int, default=400)
    c.add_argument("--start", type=int, default=0)
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--choosing-share", type=float, default=splits.CHOOSING_SHARE)
    o = sub.add_parser("oracle")
    o.add_argument("--setting", choices=list(SETTINGS), required=True)
    o.add_argument("--reps", type=int, default=400)
    t = sub.add_parser("table")
    t.add_argument("folder", type=Path)
    args = ap.parse_args()
    if args.cmd == "collect":
        splits.CHOOSING_SHARE = args.choosing_share
        collect(args.setting, args.reps, args.out, args.start)
    elif args.cmd == "oracle":
        oracle(args.setting, args.reps, (0.05, 0.01, 0.005))
    else:
        table(args.folder)


if __name__ == "__main__":
    main()
