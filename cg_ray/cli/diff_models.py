"""`cg-ray diff-models`: SAE model diffing of two models' answers to the same prompts, as a Ray Data job
(the reader actor pool of `cg_ray.pipeline.reading`). Also a Ray job entry point:

    ray job submit --working-dir . -- python -m cg_ray.cli.diff_models --config jobs/diff_models.yaml
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cg_ray.activations.config import DEFAULT_READER_FACTORY
from cg_ray.cli.options import add_command, add_model_flags, ensure_output_free, validated

if TYPE_CHECKING:
    from cg_ray.compare.model_diff_config import DiffModelsConfig
    from cg_ray.compare.model_diff_job import ConceptNames, NamesFor, ReadFn

FLAGS: tuple[tuple[str, type], ...] = (
    ("answers", str),
    ("model_a", str),
    ("model_b", str),
    ("a", str),
    ("b", str),
    ("prompts", str),
    ("turn", int),
    ("limit", int),
    ("threshold", float),
    ("max_response_tokens", int),
    ("confidence", float),
    ("seed", int),
    ("min_rows", int),
    ("top", int),
    ("splits", int),
    ("fdr", float),
    ("examples", int),
    ("labels", str),
    ("descriptions_from", str),
)


def init_ray(address: str | None) -> None:
    from cg_ray.generation.config import GenerationConfig
    from cg_ray.generation.local_ray import join_or_start_ray

    join_or_start_ray(GenerationConfig(), address)


def ray_reader(config: DiffModelsConfig, factory: str = DEFAULT_READER_FACTORY) -> ReadFn:
    """A ReadFn: the texts through the pipeline's reader actor pool, each read from its response offset."""
    import json

    import numpy as np
    import pyarrow as pa

    from cg_ray.compare.model_diff_job import ReadResult
    from cg_ray.pipeline.config import reader_settings
    from cg_ray.pipeline.reader_stage import ReadOptions
    from cg_ray.pipeline.reading import read_texts

    def read(texts: list[str], offsets: list[int]) -> ReadResult:
        init_ray(config.ray_address)
        table = pa.table({"text": texts, "count_from": pa.array(offsets, pa.int64())})
        reader_config = reader_settings(config.reader)  # the reader's own settings, without the actor pool
        options: ReadOptions = {"pool": config.pool}
        if config.max_response_tokens is not None:
            options["span_tokens"] = config.max_response_tokens
        out = read_texts(
            table,
            "text",
            reader_config,
            config.reader.resources,
            factory,
            count_from_column="count_from",
            read_options=options,
        )
        actors = sorted(set(out["_reader_actor"].to_pylist()))
        return ReadResult(
            concept_ids=[np.asarray(x, np.int32) for x in out["concept_ids"].to_pylist()],
            concept_acts=[np.asarray(x, np.float32) for x in out["concept_acts"].to_pylist()],
            n_tokens=[int(x) for x in out["n_tokens"].to_pylist()],
            d_sae=int(out["_d_sae"][0].as_py()),
            reader={
                "config": reader_config.model_dump(mode="json"),
                "factory": factory,
                "read": options,
                "actors": [json.loads(a) for a in actors],
            },
        )

    return read


def names_factory(config: DiffModelsConfig, factory: str = DEFAULT_READER_FACTORY) -> NamesFor:
    """d_sae -> (concept -> (label, description)): --labels, else the SAE's shipped labels; sentences of
    a described run directory (--descriptions-from) first."""

    def make(d_sae: int) -> ConceptNames:
        from cg_ray.activations.saes.labels import shipped_labels
        from cg_ray.artifacts.layout import RunDir
        from cg_ray.describe.outputs import read_sentences
        from cg_ray.labels import load_labels

        labels = (
            load_labels(config.labels, d_sae=d_sae)
            if config.labels
            else shipped_labels(config.reader.sae, d_sae, factory)
        )
        sentences = read_sentences(RunDir(config.descriptions_from)) if config.descriptions_from else {}

        def names(c: int) -> tuple[str | None, str | None]:
            return (labels.get(c) if labels is not None else None), sentences.get(c)

        return names

    return make


def run_diff_models(
    config: DiffModelsConfig, *, overwrite: bool = False, factory: str = DEFAULT_READER_FACTORY
) -> dict[str, Any]:
    from cg_ray.compare.model_diff_job import diff_models
    from cg_ray.compare.model_diff_outputs import write_diff_models

    if config.out is None:
        raise SystemExit("cg-ray diff-models: error: --out (or `out:` in the config) is required")
    out = Path(config.out)
    ensure_output_free(out, overwrite)
    result = diff_models(config, ray_reader(config, factory), names_factory(config, factory))
    return write_diff_models(result, out, overwrite=overwrite)


def _print(doc: dict[str, Any]) -> None:
    c, conf, names = doc["counts"], doc["confirmation"], doc["models"]
    skips = {
        k: v for k, v in c.items() if isinstance(v, int) and v and k.startswith(("only", "empty", "no_", "beyond"))
    }
    print(f"{c['compared']:,} prompts compared, A = {names['a']}, B = {names['b']} (skipped: {skips or 'none'})")
    formed, confirmed = sum(conf["formed"].values()), sum(conf["confirmed"].values())
    print(
        f"hypotheses formed on one half of each of {conf['splits']} splits of the prompts and tested on the other: "
        f"{confirmed} of {formed} confirmed (q ≤ {conf['fdr']:g})"
    )
    listed = [h for h in doc["hypotheses"] if h["heldout"]["low"] is not None or h["heldout"]["high"] is not None]
    for h in listed:
        a, held = h["all"], h["heldout"]
        bounds = "[" + ", ".join("—" if x is None else f"{x:+.2f}" for x in (held["low"], held["high"])) + "]"
        mark = "confirmed" if h["confirmed"] else f"not confirmed (q={held['q_value']:.2f})"
        print(
            f"  {h['concept_id']:>6} {a['frac_a']:.2f} -> {a['frac_b']:.2f}  held-out Δ {held['estimate']:+.2f} "
            f"{bounds} {mark}: {h['statement'][:90]}"
        )
    if formed > len(listed):
        print(f"  ({formed - len(listed)} more formed, without an interval or beyond --top: diff_models.parquet)")


def _cmd(args: argparse.Namespace) -> int:
    """SAE model diffing: concepts one model's answers contain more often than another's.

    Pairs two models' answers by prompt id, reads each response with its prompt as context
    (only response tokens count), and per concept compares the fraction of answers where it is active
    (B − A, Newcombe paired intervals). Hypotheses are formed on one half of each of --splits splits of
    the prompts and tested on the other; confirmed when the splits' q ≤ --fdr. Input: --answers FILE
    --model-a X --model-b Y, or --a FILE --b FILE; or --config YAML."""
    from cg_ray.compare.model_diff_config import DiffModelsConfig, load_diff_models_config

    flags = {name: getattr(args, name, None) for name, _ in FLAGS}
    flags |= {"pool": args.pool, "match_length": args.match_length, "out": None if args.out is None else str(args.out)}
    # The YAML is checked on its own first (its errors name the file), so what fails after is a flag: named so.
    base = load_diff_models_config(args.config).model_dump(exclude_unset=True) if args.config is not None else {}
    config = validated(DiffModelsConfig, {**base, **{k: v for k, v in flags.items() if v is not None}})
    if args.sae or args.reader_model or args.device:
        reader = {"sae": args.sae, "model": args.reader_model, "device": args.device}
        config = config.model_copy(
            update={"reader": config.reader.model_copy(update={k: v for k, v in reader.items() if v})}
        )
    doc = run_diff_models(config, overwrite=args.overwrite)
    _print(doc)
    print(f"-> {config.out}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    from cg_ray.compare.model_diff_config import DiffModelsConfig

    p = add_command(subparsers, "diff-models", _cmd)
    p.add_argument("--config", type=Path, default=None, help="job configuration (YAML), e.g. jobs/diff_models.yaml")
    p.add_argument("--out", type=Path, default=None, help="output directory (published atomically)")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    g = p.add_argument_group("diff-models options")
    add_model_flags(g, DiffModelsConfig, FLAGS)
    g.add_argument(
        "--match-length",
        dest="match_length",
        action="store_const",
        const=True,
        default=None,
        help="cut both answers of a prompt to the shorter one's length before reading (a length control)",
    )
    g.add_argument(
        "--pool", choices=["mean", "max"], default=None, help="pooling over the response tokens (default mean)"
    )
    r = p.add_argument_group("reader")
    r.add_argument("--reader-model", default=None, help="reader model (default: the config's, smollm2-135m-instruct)")
    r.add_argument("--sae", default=None, help="SAE spec (default: the config's, the shipped SAE)")
    r.add_argument("--device", default=None, help="reader device (auto, cpu, cuda)")


if __name__ == "__main__":  # the Ray job entry point
    from cg_ray.cli import main

    sys.exit(main(["diff-models", *sys.argv[1:]]))
