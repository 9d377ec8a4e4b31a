"""What every subcommand shares: its wiring (a handler whose docstring is the help), flags generated from a
settings model, those flags validated back into the model (errors name the flag), the flags several commands
take alike, and the refusal to overwrite an output without --overwrite."""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Literal, TypeVar, get_args, get_origin

from pydantic import BaseModel, ValidationError

from cg_ray.errors import CgRayError, ConfigError

Settings = TypeVar("Settings", bound=BaseModel)
Handler = Callable[[argparse.Namespace], int]
T = TypeVar("T")


def add_command(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], name: str, handler: Handler
) -> argparse.ArgumentParser:
    """`cg-ray NAME`, run by `handler`. The handler's docstring is the command's help: its first paragraph
    the line in `cg-ray --help`, the rest the description in `cg-ray NAME --help`."""
    summary, _, rest = (inspect.getdoc(handler) or name).partition("\n\n")
    summary = " ".join(summary.split())
    p = subparsers.add_parser(name, help=summary.replace("%", "%%"), description=" ".join(rest.split()) or summary)
    p.set_defaults(handler=handler)
    return p


def comma_list(kind: Callable[[str], T], what: str) -> Callable[[str], tuple[T, ...]]:
    """An argparse `type` for "a,b,c": each item read by `kind` (empty items skipped)."""

    def parse(value: str) -> tuple[T, ...]:
        try:
            return tuple(kind(v) for v in value.split(",") if v.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {what}, got {value!r}") from None

    return parse


def add_labels_options(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--labels", type=Path, default=None, help=help)
    p.add_argument("--labels-source", default=None, help='SAE in a multi-SAE labels file, "MODEL/SAE_ID"')


def add_job_options(p: argparse.ArgumentParser, what: str, example: str) -> None:
    """A job's CONFIG file and the flags that override where its run directory goes."""
    p.add_argument("config", type=Path, help=f"{what} (YAML), e.g. {example}")
    p.add_argument("--overwrite", action="store_true", help="replace an existing run directory")
    p.add_argument("--output-dir", type=Path, default=None, help="override the config's output_dir")


def job_config(config: Settings, args: argparse.Namespace) -> Settings:
    """A job's loaded config with --output-dir applied."""
    if args.output_dir is None:
        return config
    return config.model_copy(update={"output_dir": str(args.output_dir)})


def flag(name: str) -> str:
    return f"--{name.replace('_', '-')}"


def add_model_flags(
    group: argparse._ActionsContainer, model: type[BaseModel], fields: Iterable[tuple[str, type]]
) -> None:
    """One optional flag per (field, type); unset flags stay None so the model's default applies. A `str`
    field typed `Literal[...]` gets those choices; a `bool` field is a switch that sets it true."""
    described = model.model_fields
    for name, kind in fields:
        info = described[name]
        help_ = f"{info.description or name} (default {info.default})".replace("%", "%%")
        if kind is bool:
            group.add_argument(flag(name), dest=name, action="store_const", const=True, default=None, help=help_)
            continue
        choices = get_args(info.annotation) if get_origin(info.annotation) is Literal else None
        group.add_argument(flag(name), dest=name, type=kind, choices=choices, default=None, help=help_)


def validated(model: type[Settings], values: Mapping[str, object], flags: dict[str, str] | None = None) -> Settings:
    """`model` from flag values (None: not given); a problem is reported against its flag (`flags`: the
    flags not named after their field, e.g. {"n_components": "--components"})."""
    try:
        return model(**{k: v for k, v in values.items() if v is not None})
    except ValidationError as exc:
        names = flags or {}
        where = ["-".join(map(str, e["loc"])) for e in exc.errors()]
        problems = "; ".join(f"{names.get(w, flag(w))}: {e['msg']}" for w, e in zip(where, exc.errors(), strict=True))
        raise ConfigError(problems) from None


def from_args(model: type[Settings], args: argparse.Namespace) -> Settings:
    """`model` from the flags `add_model_flags` made for it (fields without a flag keep their default)."""
    return validated(model, {name: getattr(args, name, None) for name in model.model_fields})


def ensure_output_free(path: Path, overwrite: bool) -> None:
    """Fail before any work when the output exists and may not be replaced."""
    if path.exists() and not overwrite:
        raise CgRayError(f"{path} already exists (pass --overwrite to replace it)")


def item_writer_settings(args: argparse.Namespace, flags: Mapping[str, object]) -> dict[str, object]:
    """The settings of a command that writes items (`cg-ray probe`, `cg-ray augment`): --config's YAML, then
    the `flags` given (they win), the gaps named (--gap), --no-reader-check, and the writer (--writer-model,
    with --writer-endpoint or a backend). Validated by the caller's own model."""
    import yaml

    data: dict[str, object] = {}
    if args.config:
        data = yaml.safe_load(args.config.read_text(encoding="utf-8")) or {}
    data.update({k: v for k, v in flags.items() if v is not None})
    if args.gap:
        data["gaps"] = args.gap
    if args.no_reader_check:
        data["reader_check"] = False
    if args.writer_endpoint and not args.writer_model:
        raise ConfigError("--writer-endpoint needs --writer-model: the model name the endpoint serves")
    if args.writer_model:  # an endpoint's model, or a model the generation backend runs through Ray Data
        backend = {"endpoint": args.writer_endpoint, "api_key_env": args.writer_api_key_env}
        data["writer"] = {"model": args.writer_model, "backend": args.writer_backend or "vllm", **backend}
    return data
