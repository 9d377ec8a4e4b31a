"""Errors users see. Every input error names where the problem is: file, line or row, and field.

One numbering convention: `line` is the 1-based line of a text file (JSONL, CSV), as an editor shows it;
`row` is the 0-based index of a row in a table without lines (Parquet, Arrow). The service's API edge
reports the same `line` (cg_ray.serve.errors)."""

from __future__ import annotations


class CgRayError(Exception):
    """Base class: the CLI prints these as one clear line and exits non-zero (no traceback)."""


class InputError(CgRayError):
    """Bad user input, located as precisely as we can (file, 1-based line or 0-based row, field)."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        row: int | None = None,
        field: str | None = None,
        line: int | None = None,
    ) -> None:
        self.path = path
        self.row = row
        self.line = line
        self.field = field
        self.reason = message
        where = []
        if path is not None:
            where.append(str(path))
        if line is not None:
            where.append(f"line {line}")
        elif row is not None:
            where.append(f"row {row}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(f"{': '.join([', '.join(where), message]) if where else message}")


class NotARunDirectory(InputError):
    """A path handed to `cg_ray.read_run` that is not a published run directory (its message says what is
    missing)."""


class ConfigError(CgRayError):
    """An invalid configuration value (validated once, at the edge)."""


class LimitExceeded(InputError):
    """Input over a configured size limit (bytes, rows, characters): the service answers 413."""
