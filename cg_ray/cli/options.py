"""What every subcommand shares: flags generated from a settings model, those flags validated back into
the model (errors name the flag), and the refusal to overwrite an output without --overwrite."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from cg_ray.errors import CgRayError, ConfigError

Settings = TypeVar("Settings", bound=BaseModel)


def flag(name: str) -> str:
    return f"--{name.replace('_', '-')}"


def add_model_flags(
    group: argparse._ActionsContainer, model: type[BaseModel], fields: Iterable[tuple[str, type]]
) -> None:
    """One optional flag per (field, type); unset flags stay None so the model's default applies."""
    described = model.model_fields
    for name, kind in fields:
        info = described[name]
        group.add_argument(
            flag(name),
            dest=name,
            type=kind,
            default=None,
            help=f"{info.description or name} (default {info.default})",
        )


def validated(model: type[Settings], values: dict[str, Any]) -> Settings:
    """`model` from flag values (None: not given); a problem is reported against its flag."""
    try:
        return model(**{k: v for k, v in values.items() if v is not None})
    except ValidationError as exc:
        problems = "; ".join(f"{flag('-'.join(map(str, e['loc'])))}: {e['msg']}" for e in exc.errors())
        raise ConfigError(problems) from None


def from_args(model: type[Settings], args: argparse.Namespace) -> Settings:
    """`model` from the flags `add_model_flags` made for it (fields without a flag keep their default)."""
    return validated(model, {name: getattr(args, name, None) for name in model.model_fields})


def ensure_output_free(path: Path, overwrite: bool) -> None:
    """Fail before any work when the output exists and may not be replaced."""
    if path.exists() and not overwrite:
        raise CgRayError(f"{path} already exists (pass --overwrite to replace it)")
