"""`cg-ray models prepare`, `cg-ray sae train|eval|label|list`; heavy imports inside the handlers."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DATA_DIR_HELP = "shared data directory holding model_outputs/ and arena/ (the corpus source)"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    models = subparsers.add_parser("models", help="prepare reader models")
    msub = models.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    prep = msub.add_parser("prepare", help="convert a known model (e.g. the GGUF default) to a local HF dir")
    prep.add_argument("name", nargs="?", default="smollm2-135m-instruct")
    prep.add_argument("--cache", type=Path, default=None, help="cache root (default: $CG_RAY_CACHE or ~/.cache/cg_ray)")
    prep.add_argument("--overwrite", action="store_true")
    prep.set_defaults(handler=_prepare)

    sae = subparsers.add_parser("sae", help="train, evaluate and label the default reader's SAE")
    ssub = sae.add_subparsers(dest="sae_command", required=True, metavar="ACTION")

    train = ssub.add_parser("train", help="train a TopK SAE with sae-lens on model answers")
    train.add_argument("--data-dir", type=Path, required=True, help=DATA_DIR_HELP)
    train.add_argument("--out", type=Path, required=True, help="SAE directory to write (sae-lens format)")
    train.add_argument("--work-dir", type=Path, required=True, help="scratch directory for sae-lens outputs")
    train.add_argument("--model", default="smollm2-135m-instruct")
    train.add_argument("--layer", type=int, default=20)
    train.add_argument("--d-sae", type=int, default=4608)
    train.add_argument("--k", type=int, default=32)
    train.add_argument("--tokens", type=int, default=2_000_000, help="training tokens")
    train.add_argument("--max-minutes", type=float, default=None, help="end training gracefully after this long")
    train.add_argument("--seed", type=int, default=42)
    train.add_argument("--dead-window", type=int, default=25, help="steps without firing before AuxK trains a latent")
    train.add_argument("--init-from", type=Path, default=None, help="warm start from this SAE directory")
    train.add_argument("--skip-tokens", type=int, default=0, help="skip the documents holding the first N tokens")
    train.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (after warm-up, before decay)")
    train.add_argument("--warm-up-steps", type=int, default=50, help="linear learning-rate warm-up")
    train.add_argument("--decay-steps", type=int, default=0, help="linear learning-rate decay to 0 at the end")
    train.add_argument("--buffer-batches", type=int, default=256, help="sae-lens mixing buffer, in store batches")
    train.add_argument("--device", default="auto", help="auto (cuda if available, else cpu), cpu, cuda")
    train.add_argument("--overwrite", action="store_true")
    train.set_defaults(handler=_train)

    listing = ssub.add_parser("list", help="the readers shipped for the default model, with their quality")
    listing.add_argument("--json", action="store_true", help="one JSON object per reader instead of a table")
    listing.set_defaults(handler=_list)

    for name, help_ in (
        ("eval", "held-out explained variance, L0, dead latents"),
        ("label", "label latents"),
    ):
        p = ssub.add_parser(name, help=help_)
        p.add_argument("--data-dir", type=Path, required=True, help=DATA_DIR_HELP)
        p.add_argument("--sae", default="default", help="SAE spec (default: the shipped SAE)")
        p.add_argument("--reader-model", default="smollm2-135m-instruct")
        p.add_argument("--dtype", choices=("auto", "float32", "bfloat16"), default="auto")
        p.add_argument("--heldout-fraction", type=float, default=0.03, help="as used in training")
        p.add_argument("--out", type=Path, required=True, help="JSON (eval) or JSONL (label) to write")
        if name == "label":
            p.add_argument("--train-docs", type=int, default=1500, help="training documents added to held-out")
        p.set_defaults(handler=_eval if name == "eval" else _label)


def _prepare(args: argparse.Namespace) -> int:
    from cg_ray.catalog import prepare

    print(prepare(args.name, args.cache, overwrite=args.overwrite))
    return 0


def _train(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from cg_ray.errors import ConfigError
    from cg_ray.sae_training.sae_train import SaeTrainConfig, train

    try:
        cfg = SaeTrainConfig.model_validate(
            {
                "model": args.model,
                "layer": args.layer,
                "d_sae": args.d_sae,
                "k": args.k,
                "training_tokens": args.tokens,
                "max_minutes": args.max_minutes,
                "seed": args.seed,
                "device": args.device,
                "dead_feature_window": args.dead_window,
                "init_from": args.init_from,
                "skip_tokens": args.skip_tokens,
                "n_batches_in_buffer": args.buffer_batches,
                "lr": args.lr,
                "lr_warm_up_steps": args.warm_up_steps,
                "lr_decay_steps": args.decay_steps,
            }
        )
    except ValidationError as exc:
        raise ConfigError(str(exc)) from None
    print(train(cfg, args.data_dir, args.out, work_dir=args.work_dir, overwrite=args.overwrite))
    return 0


def _reader(args: argparse.Namespace) -> Any:
    from cg_ray.activations.config import ReaderConfig
    from cg_ray.activations.reader import ConceptReader

    return ConceptReader.from_config(
        ReaderConfig.model_validate(
            {"model": args.reader_model, "sae": args.sae, "dtype": args.dtype, "padding_side": "right"}
        )
    )


def _eval(args: argparse.Namespace) -> int:
    from cg_ray.artifacts.contract import SaeEvaluation, write_document
    from cg_ray.artifacts.publish import atomic_file
    from cg_ray.sae_training.corpus import split_corpus
    from cg_ray.sae_training.sae_eval import evaluate

    _, heldout = split_corpus(args.data_dir, args.heldout_fraction)
    result = evaluate(_reader(args), heldout)
    with atomic_file(args.out) as tmp:
        result = write_document(tmp, SaeEvaluation, result)
    print(json.dumps(result))
    return 0


def _label(args: argparse.Namespace) -> int:
    from cg_ray.artifacts.publish import atomic_file
    from cg_ray.sae_training.corpus import split_corpus
    from cg_ray.sae_training.sae_label import label_latents

    train_docs, heldout = split_corpus(args.data_dir, args.heldout_fraction)
    records = label_latents(_reader(args), heldout + train_docs[: args.train_docs])
    with atomic_file(args.out) as tmp, tmp.open("w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    dead = sum(1 for r in records if r.get("n_active_tokens", 0) == 0)
    with_context = sum(1 for r in records if r.get("context_words"))
    print(
        f"wrote {args.out}: {len(records)} labels ({dead} inactive, {with_context} named with context words, "
        f"{len(records) - dead - with_context} token lists)"
    )
    return 0


def _list(args: argparse.Namespace) -> int:
    from cg_ray.activations.saes.shipped import SHIPPED_READERS, reader_facts

    facts = [reader_facts(r) for r in SHIPPED_READERS.values()]
    if args.json:
        for f in facts:
            print(json.dumps(f))
        return 0
    head = ("name", "layer", "width", "k", "seed", "EV", "L0", "dead", "labels", "folder")
    rows = [
        (f["name"], f["layer"], f["d_sae"], f["k"], f["seed"], f"{f['explained_variance']:.3f}", f"{f['l0']:g}",
         f["dead_latents"], f["labels"], f["folder"])
        for f in facts
    ]  # fmt: skip
    table = [tuple(str(v) for v in row) for row in (head, *rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(head) - 1)]
    for row in table:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=False)) + "  " + row[-1])
    return 0
