"""One generic, typed registry of named components (benchmark loaders, scorers, generators, SAE backends).

Entries are either objects or lazy ``"package.module:attr"`` strings: nothing is imported until a name is
used, so registering a vLLM-backed generator costs nothing for a run that never generates.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar, cast, overload

from cg_ray.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """Names -> components of one kind. ``get`` resolves (and caches) lazy entries."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T | str] = {}

    def add(self, name: str, entry: T | str, *, replace: bool = False) -> None:
        """Register an object, or a lazy ``"module:attr"`` reference to one."""
        if isinstance(entry, str) and ":" not in entry:
            raise ValueError(f"lazy {self.kind} entry {entry!r} must look like 'package.module:attr'")
        if name in self._entries and not replace:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = entry

    @overload
    def register(self, name: str) -> Callable[[T], T]: ...
    @overload
    def register(self, name: str, obj: T) -> T: ...
    def register(self, name: str, obj: T | None = None) -> T | Callable[[T], T]:
        """``@registry.register("name")`` as a decorator, or ``registry.register("name", obj)``."""
        if obj is not None:
            self.add(name, obj)
            return obj

        def decorate(target: T) -> T:
            self.add(name, target)
            return target

        return decorate

    def get(self, name: str) -> T:
        try:
            entry = self._entries[name]
        except KeyError:
            raise ConfigError(self.unknown_message(name)) from None
        if isinstance(entry, str):
            resolved = cast(T, _import_attr(entry, self.kind, name))
            self._entries[name] = resolved
            return resolved
        return entry

    def unknown_message(self, name: str) -> str:
        close = difflib.get_close_matches(name, list(self._entries), n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        return f"unknown {self.kind} {name!r}{hint} (known: {', '.join(self.names())})"

    def check(self, name: str) -> str:
        """Validate a name without importing anything (for configs); returns it unchanged."""
        if name not in self._entries:
            raise ValueError(self.unknown_message(name))
        return name

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)


def _import_attr(ref: str, kind: str, name: str) -> object:
    module_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{kind} {name!r}: cannot import {module_name} ({exc})") from exc
    obj: object = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"{kind} {name!r}: {module_name} has no attribute {attr!r}") from None
    return obj
