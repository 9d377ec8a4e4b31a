"""Realised FDR and power of the findings' decision rule, the rule in use beside candidate rules (issue #49).

`collect` judges seeded suites with several real effects (tests/profile/planted_suites.py
`write_effects_suite`: N = 4,000 rows, `type` × `level` cells, a fifth of the rows questions answered four
times) through the real judgement (`nullcheck.judge_rows`, the defaults a user gets) and records, for every
call of the decision rule, what each split tested: the findings, their tests and ranks (the judgement's own
observer, `decision.Observer`, sees each call). Every candidate rule is then applied to the same records
(`table`, which ends with the table of docs/findings.md), so the rules differ in nothing but the aggregation;
`check` judges each figure that table states by its 99.9% binomial band at the records' number of suites
(tests/bench_scripts/test_fdr_simulation.py runs it on a few suites).

A finding is true when it is one of the planted effects: a concept finding when it is an effect's concept
below its cells, a failure mode when it holds an effect's concept. Everything else confirmed is false
(concepts above their cells, random concepts, the `geo` concept that tracks metadata). Power: the share of
planted effects confirmed as a failure mode.

    .venv/bin/python scripts/fdr_simulation.py collect --setting five --reps 400 --out /tmp/fdr
    .venv/bin/python scripts/fdr_simulation.py table /tmp/fdr
    .venv/bin/python scripts/fdr_simulation.py check /tmp/fdr
"""

from __future__ import annotations

import argparse
import pickle
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cg_ray.artifacts.rows import open_rows
from cg_ray.config import MetricsConfig
from cg_ray.profile import decision, splits
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
    """The judgement's observer (`decision.Observer`): keeps what each call of the decision rule tested, by kind,
    and for failure modes each finding's shown rule (its concepts), which says whether it is a planted effect."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, judged: decision.Judged) -> None:
        call: dict[str, Any] = {
            "kind": judged.kind,
            "per_split": judged.per_split,
            "splits": judged.splits,
            "fdr": judged.fdr,
        }
        if judged.kind == "failure_modes":
            call["members"] = dict(judged.members)
        self.calls.append(call)


def record_one(path: Path, cfg: MetricsConfig) -> list[dict[str, Any]]:
    """Every call of the decision rule the judgement of the suite at `path` makes."""
    rec = Recorder()
    judge_rows(open_rows(path), cfg, observe=rec)
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
            calls = record_one(path, cfg)
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
        # The product's own steps without the intervals (`decision.judge` would price every bound: 10× slower).
        tried = decision.split_tries(per_split, fdr, gamma)
        return {k for k, per in tried.items() if decision.combined_q(per, splits, gamma) <= fdr}

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


RULES: dict[str, Rule] = {
    "product": quantile_bh(decision.GAMMA),  # the rule `decision.judge` implements now
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
    if call["kind"] == "failure_modes":
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
            if call["kind"] == "failure_modes" and truth:
                found |= {c - EFFECT_CONCEPT for c in call["members"][key] if c - EFFECT_CONCEPT in range(n_effects)}
    return {"fdp": false / max(confirmed, 1), "any_false": float(false > 0), "found": len(found), "effects": n_effects}


def _coverage(record: dict[str, Any]) -> tuple[int, int]:
    """Of the product rule's confirmed modes holding exactly one planted effect's concept: how many intervals
    hold that effect's planted drop (its rows against the other rows of their cells), and how many there were."""
    n_effects = len(record["effects"])
    held = shown = 0
    for call in record["calls"]:
        if call["kind"] != "failure_modes":
            continue
        for key, v in decision.judge(call["per_split"], call["splits"], call["fdr"], (-1.0, 1.0)).items():
            own = [c - EFFECT_CONCEPT for c in call["members"][key] if c - EFFECT_CONCEPT in range(n_effects)]
            if not v.confirmed or len(own) != 1 or v.low is None or v.high is None:
                continue
            drop = -record["effects"][own[0]][1]
            shown += 1
            held += v.low <= drop <= v.high
    return held, shown


@dataclass(frozen=True)
class Tally:
    """One rule on one setting's suites: what the figures are made of, in counts a binomial band can judge."""

    suites: int
    any_false: int  # suites with at least one false finding confirmed
    fdp: float  # the suites' false discovery proportions, summed
    found: int  # planted effects confirmed as a failure mode
    effects: int  # planted effects

    @property
    def fdr(self) -> float:
        return self.fdp / self.suites

    @property
    def p_any(self) -> float:
        return self.any_false / self.suites

    @property
    def power(self) -> float | None:
        return self.found / self.effects if self.effects else None


def load(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """The records in `folder`, by setting."""
    records: dict[str, list[dict[str, Any]]] = {}
    for f in sorted(folder.glob("*.pkl")):
        r = pickle.loads(f.read_bytes())
        records.setdefault(r["setting"], []).append(r)
    return records


def tally(reps: Sequence[dict[str, Any]], rule: Rule) -> Tally:
    scored = [_score(r, rule) for r in reps]
    return Tally(
        len(scored),
        int(sum(s["any_false"] for s in scored)),
        float(sum(s["fdp"] for s in scored)),
        int(sum(s["found"] for s in scored)),
        int(sum(s["effects"] for s in scored)),
    )


def table(folder: Path) -> None:
    """Every rule on every setting recorded in `folder`, then the table as docs/findings.md shows it."""
    records = load(folder)
    print("| setting | reps | rule | realised FDR | P(any false) | power (effects found as a mode) |")
    print("|---|---|---|---|---|---|")
    tallies: dict[tuple[str, str], Tally] = {}
    for setting in SETTINGS:
        reps = records.get(setting, [])
        if not reps:
            continue
        for name, rule in RULES.items():
            t = tallies[setting, name] = tally(reps, rule)
            power = f"{t.power:.3f}" if t.power is not None else "nan"
            print(f"| {setting} | {t.suites} | {name} | {t.fdr:.4f} | {t.p_any:.3f} | {power} |")
        cov = [_coverage(r) for r in reps]
        held, shown = sum(c[0] for c in cov), sum(c[1] for c in cov)
        if shown:
            print(f"<!-- {setting}: intervals of confirmed real modes holding the planted drop: {held} of {shown} -->")
    print()
    print(doc_table(tallies))


# ---- the table docs/findings.md quotes, written and read back ---------------------------------------------

DOC = Path(__file__).resolve().parents[1] / "docs" / "findings.md"
DOC_ROWS = {  # setting → its row in the doc's table
    "null": "no effect (FDR = P(any))",
    "one": "1 effect",
    "five": "5 effects",
    "fifteen": "15 effects",
    "five_at_5pc_015": "5 effects, 5% of rows, −0.15",
    "five_at_3pc_015": "5 effects, 3% of rows, −0.15",
}
DOC_COLUMNS = {  # rule → its column
    "product": "this rule (median q × 2): FDR / P(any false) / power",
    "e_bh_half": "derandomised e-BH, each split's BH at fdr/2 (Ren & Barber 2024)",
    "e_bh_quarter": "e-BH, at fdr/4",
    "quantile_bh_0.3": "quantile γ = 0.3",
    "quantile_bh_0.7": "γ = 0.7",
}
BAND = 0.999  # the binomial band a figure regenerated on fewer suites must land in


def doc_table(tallies: dict[tuple[str, str], Tally]) -> str:
    """The table of docs/findings.md from the tallies (FDR / P(any false) / power; the null row's one figure is
    both FDR and P(any), this rule's power in bold)."""
    lines = ["| setting | " + " | ".join(DOC_COLUMNS.values()) + " |", "|---" * (len(DOC_COLUMNS) + 1) + "|"]
    for setting, label in DOC_ROWS.items():
        if not all((setting, rule) in tallies for rule in DOC_COLUMNS):
            continue
        cells = []
        for rule in DOC_COLUMNS:
            t = tallies[setting, rule]
            if t.power is None:
                cells.append(f"{t.p_any:.3f}")
            else:
                power = f"**{t.power:.3f}**" if rule == "product" else f"{t.power:.3f}"
                cells.append(f"{t.fdr:.3f} / {t.p_any:.3f} / {power}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


@dataclass(frozen=True)
class Stated:
    """A cell of the doc's table."""

    fdr: float
    p_any: float
    power: float | None


def read_doc_table(text: str) -> dict[tuple[str, str], Stated]:
    """(setting, rule) → the figures the doc's table states (the table `doc_table` writes)."""
    lines = text.splitlines()
    header = "| setting | " + " | ".join(DOC_COLUMNS.values()) + " |"
    if header not in lines:
        raise ValueError(f"no table headed {header!r}")
    setting_of = {label: setting for setting, label in DOC_ROWS.items()}
    out: dict[tuple[str, str], Stated] = {}
    for line in lines[lines.index(header) + 2 :]:
        if not line.startswith("|"):
            break
        label, *cells = [c.strip() for c in line.strip("|").split("|")]
        for rule, cell in zip(DOC_COLUMNS, cells, strict=True):
            figures = [float(x.strip("* ")) for x in cell.split("/")]
            fdr, p_any, power = figures if len(figures) == 3 else (figures[0], figures[0], None)
            out[setting_of[label], rule] = Stated(fdr, p_any, power)
    return out


# The doc's sentence on the intervals' coverage (whitespace collapsed), one group per setting it states.
DOC_COVERAGE = re.compile(
    r"held the planted drop in (?P<five>[\d.]+)% \(5 effects\), (?P<fifteen>[\d.]+)% \(15\), "
    r"(?P<five_at_5pc_015>[\d.]+)% \(5% of rows\) and (?P<five_at_3pc_015>[\d.]+)% \(3%\) of cases, "
    r"and in all (?P<one>\d+) with one effect"
)


def read_doc_coverage(text: str) -> dict[str, float]:
    """Setting → the share of confirmed real modes' intervals holding the planted drop, as the doc states it."""
    found = DOC_COVERAGE.search(" ".join(text.split()))
    if found is None:
        raise ValueError("the doc's coverage sentence is not where DOC_COVERAGE looks")
    return {k: 1.0 if k == "one" else float(v) / 100 for k, v in found.groupdict().items()}


def band(n: int, p: float) -> tuple[int, int]:
    """The central `BAND` interval of Binomial(n, p) counts."""
    low, high = stats.binom.interval(BAND, n, p)
    return int(low), int(high)


def check(folder: Path, doc: Path = DOC) -> list[str]:
    """Each figure the doc states for a setting recorded in `folder`, regenerated from those records and judged
    by a binomial band at their number of suites: the suites with a false finding against the stated P(any),
    the planted effects found against the stated power, the suites' false discovery proportions summed against
    the stated FDR (a sum of [0, 1] variables is less spread than the binomial of its mean: Hoeffding 1963, so
    the band is wide enough), and the confirmed real modes' intervals holding their planted drop against the
    stated coverage. Prints one line a figure; returns the ones outside their band."""
    text = doc.read_text()
    records = load(folder)
    figures: list[tuple[str, float, int, float]] = []  # (what, the count, of how many, the doc's rate)
    for (setting, rule), want in read_doc_table(text).items():
        if setting not in records:
            continue
        t = tally(records[setting], RULES[rule])
        figures += [(f"{setting} {rule} P(any false)", t.any_false, t.suites, want.p_any)]
        figures += [(f"{setting} {rule} FDR (false proportions summed)", t.fdp, t.suites, want.fdr)]
        if want.power is not None:
            figures.append((f"{setting} {rule} power", t.found, t.effects, want.power))
    for setting, rate in read_doc_coverage(text).items():
        if setting in records:
            cov = [_coverage(r) for r in records[setting]]
            figures.append(
                (f"{setting} product interval coverage", sum(c[0] for c in cov), sum(c[1] for c in cov), rate)
            )
    failed = []
    for name, k, n, p in figures:
        low, high = band(n, p)
        line = f"{name}: {k:.4g} of {n} (doc {p:.3f}, band {low}–{high})"
        print(line, "ok" if low <= k <= high else "OUTSIDE")
        if not low <= k <= high:
            failed.append(line)
    return failed


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
    k = sub.add_parser("check", help="the doc's figures against the records' (binomial bands); fails if outside")
    k.add_argument("folder", type=Path)
    args = ap.parse_args()
    if args.cmd == "collect":
        splits.CHOOSING_SHARE = args.choosing_share
        collect(args.setting, args.reps, args.out, args.start)
    elif args.cmd == "oracle":
        oracle(args.setting, args.reps, (0.05, 0.01, 0.005))
    elif args.cmd == "table":
        table(args.folder)
    elif check(args.folder):
        sys.exit(1)


if __name__ == "__main__":
    main()
