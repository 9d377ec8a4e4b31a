"""`cg-ray describe` and `cg-ray explain`; heavy imports happen in the handlers."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cg_ray.cli.options import add_command, comma_list
from cg_ray.describe.config import REPORT_TOP


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", type=Path, help="a run directory (rows.parquet, concepts.parquet, summary.json)")
    p.add_argument("--concepts", type=comma_list(int, "concept ids"), default=None, help="comma-separated concept ids")
    p.add_argument(
        "--top", type=int, default=REPORT_TOP, help="worst-by-X_model and least-covered concepts, each (as the report)"
    )
    p.add_argument("--examples", type=int, default=5, help="top rows per concept")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-tokens", action="store_true", help="do not re-read the top rows token by token")
    p.add_argument(
        "--dtype", choices=("auto", "float32", "bfloat16"), default=None, help="reader dtype for the re-read"
    )


def register(subparsers: Any) -> None:
    _add_common(add_command(subparsers, "describe", _describe))
    e = add_command(subparsers, "explain", _explain)
    _add_common(e)
    e.add_argument("--model", default="smollm2-135m-instruct", help="explainer: known name, HF dir or hub id")
    e.add_argument("--backend", default="vllm", help="generation backend: vllm | hf | fake")
    e.add_argument("--detect", type=int, default=6, help="held-out rows per class for detection")
    e.add_argument("--name-themes", action="store_true", help="let the model name the themes too")


def _options(args: argparse.Namespace) -> Any:
    from cg_ray.describe.run import DescribeOptions

    return DescribeOptions(
        concepts=args.concepts,
        top=args.top,
        examples=args.examples,
        seed=args.seed,
        tokens=not args.no_tokens,
        dtype=args.dtype,
    )


def _describe(args: argparse.Namespace) -> int:
    """Readable descriptions and themes of a run's weak / under-covered concepts.

    Describe concepts from the run's own rows (top rows with the activating span, metadata enrichment,
    in-suite tokens, labels, LLM explanations when `cg-ray explain` ran) and group them into themes; writes
    RUN_DIR/descriptions.parquet and RUN_DIR/themes.json."""
    from cg_ray.describe.run import describe_run

    table, themes = describe_run(args.run_dir, _options(args))
    _print(table, themes)
    return 0


def _explain(args: argparse.Namespace) -> int:
    """LLM explanations of concepts, scored by detection (balanced accuracy).

    An instruct model explains each concept from its top rows (activating spans marked), then judges
    held-out rows with and without the concept given each candidate description; writes
    RUN_DIR/explanations.parquet and refreshes descriptions.parquet / themes.json."""
    from cg_ray.describe.explain import ExplainConfig, explain_run

    config = ExplainConfig(
        model=args.model, backend=args.backend, n_detect=args.detect, seed=args.seed, name_themes=args.name_themes
    )
    table, themes = explain_run(args.run_dir, _options(args), config)
    _print(table, themes)
    return 0


def _print(table: Any, themes: dict[str, Any]) -> None:
    for r in table.to_pylist():
        score = "" if r["detection_score"] is None else f" [detection {r['detection_score']:.2f}]"
        x = "—" if r["X_model"] is None else f"{r['X_model']:.3f}"
        print(f"{r['concept_id']:>6}  X_model {x}  {r['source']:<10} {r['description']}{score}")
        for e in r["metadata_enrichment"]:
            print(f"{'':>8}{e}")
    for t in themes["themes"]:
        ids = ", ".join(str(c["concept_id"]) for c in t["concepts"])
        mean = "—" if t["mean_score"] is None else f"{t['mean_score']:.3f}"
        print(f"theme: {t['name']} ({ids}; {t['support']} rows, mean score {mean})")
    skipped = themes["summary"]["metadata_fields"]["skipped"]
    if skipped:
        print("metadata fields skipped: " + "; ".join(f"{k}: {v}" for k, v in skipped.items()))
