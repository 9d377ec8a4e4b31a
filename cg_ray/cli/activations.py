"""`cg-ray extract`: registered by cg_ray.cli; heavy imports happen inside the handler."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cg_ray.cli.options import add_command
from cg_ray.config import TEXT_MODES, canonical_text_mode


def add_reader_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("reader")
    g.add_argument("--reader-model", default="smollm2-135m-instruct", help="known name, HF dir, .gguf or hub id")
    g.add_argument("--sae", default="default", help="SAE spec (default: the shipped SAE), e.g. npz:params.npz")
    g.add_argument("--layer", type=int, default=None, help="decoder layer (default: from the SAE)")
    g.add_argument(
        "--dtype",
        choices=("auto", "float32", "bfloat16"),
        default="auto",
        help="auto: bfloat16 on CUDA or a CPU with native bf16, else float32",
    )
    g.add_argument("--device", default="auto")
    g.add_argument(
        "--token-budget",
        type=lambda v: v if v == "auto" else int(v),
        default="auto",
        help="padded tokens per batch (auto: 512 on CPU, 8192 on CUDA)",
    )
    g.add_argument("--max-tokens", type=int, default=2048, help="truncate longer rows")
    g.add_argument("--padding-side", choices=("right", "left"), default="right")
    g.add_argument("--keep-bos", action="store_true", help="count the BOS token (default: excluded)")
    g.add_argument("--sink-positions", default="auto", help="leading positions dropped (int or auto)")
    g.add_argument(
        "--exclude-special-tokens", choices=("auto", "yes", "no"), default="auto", help="drop special tokens"
    )


def reader_config(args: argparse.Namespace) -> Any:
    from pydantic import ValidationError

    from cg_ray.activations.config import ReaderConfig
    from cg_ray.errors import ConfigError

    sinks: int | str = args.sink_positions
    if sinks != "auto":
        try:
            sinks = int(sinks)
        except ValueError:
            raise ConfigError(f"--sink-positions must be an integer or auto, got {sinks!r}") from None
    special = {"auto": "auto", "yes": True, "no": False}[args.exclude_special_tokens]
    try:
        return ReaderConfig.model_validate(
            {
                "model": args.reader_model,
                "sae": args.sae,
                "layer": args.layer,
                "dtype": args.dtype,
                "device": args.device,
                "token_budget": args.token_budget,
                "max_tokens": args.max_tokens,
                "padding_side": args.padding_side,
                "exclude_bos": not args.keep_bos,
                "sink_positions": sinks,
                "exclude_special_tokens": special,
            }
        )
    except ValidationError as exc:
        raise ConfigError(str(exc)) from None


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(subparsers, "extract", _extract)
    p.add_argument("--input", required=True, type=Path, help="JSONL rows with id, benchmark, score, texts")
    p.add_argument("--out", required=True, type=Path, help="rows.parquet to write")
    p.add_argument(
        "--text",
        type=canonical_text_mode,
        choices=TEXT_MODES,
        default="prompt",
        help="which text is read (`both`: deprecated name of prompt_response)",
    )
    p.add_argument(
        "--join-benchmarks",
        type=Path,
        action="append",
        default=[],
        metavar="PATH",
        help="benchmark JSONL file or directory whose prompts are joined on id (repeatable)",
    )
    p.add_argument(
        "--input-format",
        choices=("auto", "jsonl", "inspect"),
        default="auto",
        help="auto: an inspect_ai log for a .eval / .json file or a folder of logs, else scored-rows JSONL",
    )
    p.add_argument(
        "--scorer-name", default=None, help="inspect logs: the scorer whose value is the score (default: the only one)"
    )
    p.add_argument(
        "--skip-missing-scores",
        action="store_true",
        help="inspect logs: skip (and count) samples without that score instead of refusing the log",
    )
    p.add_argument("--model", default=None, help="keep only rows of this evaluated model")
    p.add_argument("--limit", type=int, default=None, help="keep the first N rows")
    p.add_argument("--allow-missing-scores", action="store_true", help="accept rows whose score is null")
    # How the text reaches the reader: beside the reader's own options.
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--chat-template", action="store_true", help="read through the model's chat template")
    mode.add_argument("--raw", action="store_true", help="read the raw text (default)")
    add_reader_arguments(p)


def _extract(args: argparse.Namespace) -> int:
    """SAE concept activations of scored rows → rows.parquet

    Read scored JSONL rows, compute s̃ per row with the reader, write rows.parquet and a manifest beside it."""
    from cg_ray.activations.extract import ExtractJob, run_extract

    converted = _inspect_rows(args)
    try:
        manifest = run_extract(
            ExtractJob(
                input=converted or args.input,
                out=args.out,
                text=args.text,
                chat_template=args.chat_template,
                require_score=not args.allow_missing_scores,
                join_benchmarks=tuple(args.join_benchmarks),
                model=None if converted else args.model,
                limit=None if converted else args.limit,
                reader=reader_config(args),
            )
        )
    except BaseException:
        if converted is not None:  # nothing half-written: the converted input goes with a failed extract
            converted.unlink(missing_ok=True)
        raise
    c, t = manifest["counts"], manifest["timings_s"]
    print(
        f"wrote {manifest['output']}: {c['rows']} rows, d_sae {manifest['d_sae']}, "
        f"{c['tokens_counted']} tokens counted, {t['rows_per_s']} rows/s, {t['tokens_per_s']} tokens/s"
    )
    return 0


def _is_inspect(args: argparse.Namespace) -> bool:
    if args.input_format != "auto":
        return bool(args.input_format == "inspect")
    return bool(args.input.is_dir() or args.input.suffix in (".eval", ".json"))


def _inspect_rows(args: argparse.Namespace) -> Path | None:
    """For inspect_ai logs: their rows, written as scored-rows JSONL beside the output (`OUT.input.jsonl`,
    the input the extract manifest names); None for a JSONL input."""
    from cg_ray.errors import ConfigError

    if not _is_inspect(args):
        if args.scorer_name is not None or args.skip_missing_scores:
            raise ConfigError("--scorer-name and --skip-missing-scores apply to inspect_ai logs only")
        return None
    from cg_ray.benchmarks import load_source
    from cg_ray.benchmarks.inspect import write_scored_rows
    from cg_ray.benchmarks.sources import InspectSource

    source = InspectSource(
        kind="inspect",
        path=str(args.input),
        scorer_name=args.scorer_name,
        missing_score="skip" if args.skip_missing_scores else "error",
        model=args.model,
        limit=args.limit,
    )
    rows = load_source(source)
    return write_scored_rows(rows, args.out.with_name(args.out.name.removesuffix(".parquet") + ".input.jsonl"))
