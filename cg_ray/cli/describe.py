"""`cg-ray describe` and `cg-ray explain`; heavy imports happen in the handlers."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, NamedTuple

from cg_ray.cli.options import add_command, comma_list
from cg_ray.describe.config import REPORT_TOP


class _Flag(NamedTuple):
    """A flag of `cg-ray explain` that sets one ExplainConfig field (None: not given, so the --config file's
    value, else the field's default, stands)."""

    names: tuple[str, ...]
    field: str
    type: type
    help: str
    choices: tuple[str, ...] | None = None


_EXPLAIN_FLAGS = (
    _Flag(("--model",), "model", str, "explainer: known name, HF dir or hub id; the served name with --endpoint"),
    _Flag(("--backend",), "backend", str, "generation backend: vllm | hf | fake (default vllm)"),
    _Flag(("--endpoint",), "endpoint", str, "OpenAI-compatible base URL (e.g. http://host:8000/v1)"),
    _Flag(("--api-key-env",), "api_key_env", str, "environment variable holding the endpoint's API key"),
    _Flag(("--concurrency",), "concurrency", int, "endpoint requests in flight (default 8)"),
    _Flag(("--timeout",), "timeout_s", float, "seconds per endpoint request (default 60)"),
    _Flag(("--price-in",), "price_in", float, "USD per million prompt tokens (cost line)"),
    _Flag(("--price-out",), "price_out", float, "USD per million completion tokens"),
    _Flag(
        ("--n-detect", "--detect"),
        "n_detect",
        int,
        "held-out rows per class for detection (default 20 with --endpoint, else 6)",
    ),
    _Flag(("--judge-endpoint",), "judge_endpoint", str, "the judge's base URL (default: the explainer's)"),
    _Flag(("--judge-model",), "judge_model", str, "the judge's model (default: the explainer's)"),
    _Flag(("--judge-api-key-env",), "judge_api_key_env", str, "variable holding the judge endpoint's key"),
    _Flag(("--judge-batch",), "judge_batch", int, "examples per judge prompt (default 5)"),
    _Flag(
        ("--judge-structured",),
        "judge_structured",
        str,
        "ask an endpoint judge for JSON-schema answers (default auto: unless the server refuses; on: fail then)",
        ("auto", "on", "off"),
    ),
    _Flag(("--window-tokens",), "window_tokens", int, "tokens around the activation (default 32)"),
    _Flag(("--max-requests",), "max_requests", int, "refuse a plan over this many chat requests"),
    _Flag(("--expected-rate",), "expected_rate", float, "requests/s for the plan's time estimate"),
    _Flag(("--tokenizer",), "tokenizer", str, "model whose tokenizer counts the plan's prompt tokens (else 4 chars)"),
)


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
    p.add_argument("--reader", default=None, help="the reader, if the run records none: default|MODEL@SAE|manifest")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _add_common(add_command(subparsers, "describe", _describe))
    e = add_command(subparsers, "explain", _explain)
    _add_common(e)
    e.add_argument("--config", type=Path, default=None, help="a YAML file with an `explain:` block (flags win)")
    for f in _EXPLAIN_FLAGS:
        e.add_argument(*f.names, dest=f.field, type=f.type, choices=f.choices, default=None, help=f.help)
    e.add_argument("--no-fuzz", action="store_true", help="skip the fuzzing score")
    e.add_argument(
        "--all",
        dest="scope_all",
        action="store_true",
        help="every concept `describe` would describe and every listed failure mode (default: what the report "
        "shows first: the weakness and coverage-gap lists, the confirmed failure modes)",
    )
    e.add_argument("--name-themes", action="store_true", help="let the model name the themes too")
    e.add_argument(
        "--fresh",
        action="store_true",
        help="discard the answers an unfinished explain of this run saved, not reuse them",
    )


def _options(args: argparse.Namespace) -> Any:
    from cg_ray.describe.run import DescribeOptions

    return DescribeOptions(
        concepts=args.concepts,
        top=args.top,
        examples=args.examples,
        seed=args.seed,
        tokens=not args.no_tokens,
        dtype=args.dtype,
        reader=args.reader,
    )


def _describe(args: argparse.Namespace) -> int:
    """Readable descriptions and themes of a run's weak / under-covered concepts.

    Describe concepts from the run's own rows (top rows with the activating span, metadata enrichment,
    in-suite tokens, labels, LLM explanations when `cg-ray explain` ran) and group them into themes; writes
    RUN_DIR/descriptions.parquet and RUN_DIR/themes.json."""
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.describe.run import describe_run
    from cg_ray.report.refresh import refresh_report

    run = RunDir(args.run_dir)
    table, themes = describe_run(run, _options(args))
    refresh_report(run)
    _print(table, themes)
    return 0


def _explain(args: argparse.Namespace) -> int:
    """LLM explanations of concepts, scored by detection and fuzzing (balanced accuracy).

    An instruct model explains each concept (and confirmed failure mode) from its top rows, activating spans
    marked; a judge (the same model, or --judge-endpoint / --judge-model) then reads 32-token windows of
    held-out rows with and without it, several per prompt, given each candidate description; candidates are
    compared on half the rows and the winner scored on the other half. Through the generation backend or an
    OpenAI-compatible endpoint (--endpoint, --model, --api-key-env); the plan is printed before the first
    request. Writes RUN_DIR/explanations.parquet and refreshes descriptions.parquet / themes.json."""
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.describe.endpoint import usage_line
    from cg_ray.describe.explain import explain_run
    from cg_ray.report.refresh import refresh_report

    config = _explain_config(args)
    run = RunDir(args.run_dir)
    table, themes = explain_run(
        run,
        _options(args),
        config,
        scope_all=args.scope_all,
        announce=lambda line: print(line, flush=True),
        fresh=args.fresh,
    )
    refresh_report(run)
    _print(table, themes)
    info = themes["summary"]["explainer"]
    judging = info["judging"]
    rate = "—" if judging["parse_rate"] is None else f"{judging['parse_rate']:.0%}"
    print(
        f"explanations: {info['explanations']} read, {info['explanations_unreadable']} unreadable; "
        f"judgements: {info['judgements']}, {info['judgements_unreadable']} unreadable; judge batches read as "
        f"lists: {judging['parsed']} of {judging['batches']} ({rate}), {judging['fallback_requests']} "
        f"fallback requests; structured answers: {judging.get('structured', 'off')}"
    )
    for key in ("usage", "judge_usage"):
        if key in info:
            print(usage_line(info[key]))
    return 0


def _explain_config(args: argparse.Namespace) -> Any:
    """ExplainConfig from --config's `explain:` block, then the flags given."""
    from cg_ray.describe.config import ExplainConfig
    from cg_ray.errors import ConfigError

    base: dict[str, Any] = {}
    if args.config is not None:
        import yaml

        data = yaml.safe_load(args.config.read_text(encoding="utf-8")) or {}
        if not isinstance(data, dict) or not isinstance(data.get("explain"), dict):
            raise ConfigError(f"{args.config}: no `explain:` block")
        base = dict(data["explain"])
    flags = {f.field: getattr(args, f.field) for f in _EXPLAIN_FLAGS}
    if args.max_requests is not None and args.max_requests < 1:
        raise ConfigError(f"--max-requests {args.max_requests}: the cap must be at least 1 (leave it out for none)")
    base.update({k: v for k, v in flags.items() if v is not None})
    base["seed"] = args.seed
    if args.no_fuzz:
        base["fuzz"] = False
    if args.name_themes:
        base["name_themes"] = True
    if base.get("endpoint") and "model" not in base:
        raise ConfigError("--endpoint needs --model: the model name the endpoint serves")
    if base.get("judge_model") and not (base.get("judge_endpoint") or base.get("endpoint")):
        raise ConfigError("--judge-model needs an endpoint that serves it: --judge-endpoint URL (or --endpoint)")
    try:
        return ExplainConfig.model_validate(base)
    except ValueError as exc:
        raise ConfigError(f"explain settings: {exc}") from None


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
