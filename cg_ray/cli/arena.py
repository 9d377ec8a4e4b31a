"""`cg-ray arena-ratings`, `cg-ray arena-rows` and `cg-ray arena-head-to-head`: the arena variant's core
steps from a battles file, without a reader model. Heavy imports happen inside the handlers."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from cg_ray.cli.options import (
    add_command,
    add_labels_options,
    add_model_flags,
    ensure_output_free,
    from_args,
    validated,
)
from cg_ray.errors import ConfigError

BATTLES_HELP = (
    "battles in the LMSYS Chatbot Arena layout: .jsonl, .json, .parquet, a datasets.save_to_disk directory, "
    "or hf:NAME for datasets.load_dataset (e.g. hf:lmsys/chatbot_arena_conversations)"
)


def _tie_policy(args: argparse.Namespace) -> Any:
    from cg_ray.arena.config import TiePolicy

    return validated(TiePolicy, {"tie": args.tie_policy, "bothbad": args.bothbad_policy})


def _load(args: argparse.Namespace) -> Any:
    from cg_ray.benchmarks.arena import load_battles

    battles = load_battles(args.battles, skip_invalid=args.skip_invalid, split=args.split)
    skipped = f", skipped {battles.skipped}" if battles.skipped else ""
    print(f"{len(battles):,} battles of {len(battles.models())} models from {args.battles}{skipped}")
    return battles


def _fmt(x: float | None) -> str:
    return "      —" if x is None else f"{x:7.1f}"


def _cmd_ratings(args: argparse.Namespace) -> int:
    """Bradley–Terry and Elo ratings of pairwise battles, with bootstrap CIs

    Rate every model of a battles file (Bradley–Terry MLE and Elo, 400·log10 scale) with seeded percentile
    bootstrap CIs and per-model battle counts, into a directory published atomically."""
    from cg_ray.arena.config import RatingsConfig
    from cg_ray.arena.outcomes import BattleArrays
    from cg_ray.arena.outputs import write_ratings
    from cg_ray.arena.ratings import rate
    from cg_ray.artifacts.layout import RatingsDir
    from cg_ray.artifacts.publish import atomic_directory

    policy = _tie_policy(args)
    config = from_args(RatingsConfig, args)
    ensure_output_free(args.out, args.overwrite)
    started = time.perf_counter()
    battles = _load(args)
    try:
        ratings = rate(BattleArrays.from_battles(battles.battles), config, policy)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    with atomic_directory(args.out, overwrite=args.overwrite) as tmp:
        result = write_ratings(RatingsDir(tmp), ratings, {"source": str(args.battles), "skipped": battles.skipped})
    models = result["models"]
    level = f"{config.confidence:.0%} CI" if config.bootstrap else "no CI"
    print(f"{'model':40} {'BT':>7} {level:>17} {'Elo':>7} {'battles':>8} {'W-L-T':>13}")
    for r in models:
        ci = f"[{_fmt(r['bt_lower'])},{_fmt(r['bt_upper'])}]" if config.bootstrap else ""
        wlt = f"{r['wins']}-{r['losses']}-{r['ties'] + r['bothbad']}"
        print(f"{r['model'][:40]:40} {_fmt(r['bt'])} {ci:>17} {_fmt(r['elo'])} {r['battles']:>8} {wlt:>13}")
    print(f"-> {args.out} ({time.perf_counter() - started:.1f} s)")
    return 0


def _cmd_rows(args: argparse.Namespace) -> int:
    """per-model scored rows (prompt + that model's response) of the battles, for the reader

    Turn the battles of the models of interest into rows scored 1 (win) / 0 (loss) / ties per policy, with the
    text the reader reads: all user prompts and that model's responses."""
    from cg_ray.arena.config import SelectionConfig
    from cg_ray.arena.rows import RowCounts, iter_model_rows, select_models, write_rows_jsonl

    policy = _tie_policy(args)
    selection = validated(SelectionConfig, {"models": tuple(args.model or ()), "min_battles": args.all_min_battles})
    ensure_output_free(args.out, args.overwrite)
    battles = _load(args)
    models = select_models(battles, selection.models, selection.min_battles)
    counts = RowCounts()
    rows = iter_model_rows(battles.battles, models, policy, benchmark=args.benchmark, counts=counts)
    n = write_rows_jsonl(rows, args.out)
    for model, c in counts.as_dict().items():
        mean = c["score_sum"] / c["rows"] if c["rows"] else float("nan")
        print(f"  {model}: {c['rows']} rows, mean score {mean:.3f}, {c['dropped']} dropped by the tie policy")
    print(f"{n:,} rows of {len(models)} model(s) -> {args.out}")
    return 0


def _cmd_head_to_head(args: argparse.Namespace) -> int:
    """per-concept head-to-head win rates from per-model rows.parquet files

    Where model A beats model B: s̃-weighted win rates per concept over their battles, and the concepts each
    model wins and loses on, judged held out (its strengths and weaknesses profiles)."""
    from cg_ray.arena.concepts import (
        head_to_head,
        load_model_activations,
        model_concepts_table,
        write_head_to_head,
    )
    from cg_ray.artifacts.layout import ArenaDir
    from cg_ray.artifacts.publish import atomic_directory
    from cg_ray.config import MetricsConfig
    from cg_ray.labels import load_labels
    from cg_ray.run_outputs import judged_profiles

    policy = _tie_policy(args)
    files: dict[str, str] = {}
    for spec in args.rows:
        model, sep, path = spec.partition("=")
        if not sep or not model or not path:
            raise ConfigError(f"--rows expects MODEL=PATH, got {spec!r}")
        files[model] = path
    metrics = validated(MetricsConfig, {"min_rows": args.min_rows, "top_k": args.top_k})
    ensure_output_free(args.out, args.overwrite)
    battles = _load(args)
    activations = {m: load_model_activations(m, p) for m, p in files.items()}
    d_sae = next(iter(activations.values())).d_sae
    labels = load_labels(args.labels, args.labels_source, d_sae) if args.labels else None
    h2h = head_to_head(battles.battles, activations, policy, weighting=args.weighting, labels=labels)
    # each model's wins and losses judged held out, as its own run's profiles are
    table = model_concepts_table({m: judged_profiles(p, m, metrics, labels) for m, p in files.items()})
    with atomic_directory(args.out, overwrite=args.overwrite) as tmp:
        write_head_to_head(ArenaDir(tmp), h2h, table, top_k=metrics.top_k, min_active=args.min_active)
    for p in h2h.pairs:
        rate = "—" if p.win_rate is None else f"{p.win_rate:.3f}"
        print(f"  {p.model_a} vs {p.model_b}: {p.n_counted} battles counted, score {rate}")
    print(f"{h2h.table.num_rows:,} (pair, concept) win rates -> {args.out}")
    return 0


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--battles", required=True, help=BATTLES_HELP)
    p.add_argument("--split", default="train", help="dataset split for Hugging Face sources (default train)")
    p.add_argument("--skip-invalid", action="store_true", help="skip bad battle records (counted) instead of failing")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    g = p.add_argument_group("tie policy")
    g.add_argument("--tie-policy", choices=["half", "drop"], default=None, help='"tie": 0.5 each (default) or drop')
    g.add_argument(
        "--bothbad-policy",
        choices=["drop", "zero", "half"],
        default=None,
        help='"tie (bothbad)": drop (default), 0 for both (rows; ratings drop it), or a plain tie',
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    from cg_ray.arena.config import RatingsConfig

    r = add_command(subparsers, "arena-ratings", _cmd_ratings)
    _add_common(r)
    r.add_argument("--out", required=True, type=Path, help="output directory")
    add_model_flags(
        r,
        RatingsConfig,
        (
            ("bootstrap", int),
            ("seed", int),
            ("confidence", float),
            ("elo_k", float),
            ("elo_permutations", int),
            ("prior", float),
            ("scale", float),
            ("base", float),
            ("anchor_rating", float),
            ("anchor_model", str),
        ),
    )

    w = add_command(subparsers, "arena-rows", _cmd_rows)
    _add_common(w)
    who = w.add_mutually_exclusive_group(required=True)
    who.add_argument("--model", action="append", help="a model of interest (repeatable)")
    who.add_argument("--all-min-battles", type=int, default=None, help="every model with at least N battles")
    w.add_argument("--benchmark", default="arena", help="benchmark name of the rows (default arena)")
    w.add_argument("--out", required=True, type=Path, help="rows.jsonl to write (atomically)")

    h = add_command(subparsers, "arena-head-to-head", _cmd_head_to_head)
    _add_common(h)
    h.add_argument("--rows", action="append", required=True, help="MODEL=rows.parquet (one per model)")
    h.add_argument("--out", required=True, type=Path, help="output directory")
    h.add_argument("--weighting", choices=["mean", "own"], default="mean", help="s̃ of both rows (mean) or A's own")
    add_labels_options(h, "concept labels (as for cg-ray metrics)")
    h.add_argument("--top-k", type=int, default=None, help="concepts listed per model / pair (default 50)")
    h.add_argument("--min-rows", type=int, default=None, help="ranking filter: concept active in ≥ n rows")
    h.add_argument("--min-active", type=int, default=5, help="JSON top lists: concept active in ≥ n battles")
