from __future__ import annotations

import sys

import pytest

from cg_ray.errors import ConfigError
from cg_ray.registry import Registry


def test_lazy_entry_is_not_imported_until_used() -> None:
    reg: Registry[object] = Registry("thing")
    reg.add("dec", "decimal:Decimal")
    reg.add("fake", "cg_ray_not_a_module_xyz:attr")  # never imported: registering costs nothing
    assert "dec" in reg and reg.names() == ["dec", "fake"]
    import decimal

    assert reg.get("dec") is decimal.Decimal
    assert "cg_ray_not_a_module_xyz" not in sys.modules
    with pytest.raises(ConfigError, match="cannot import cg_ray_not_a_module_xyz"):
        reg.get("fake")


def test_scorer_registry_does_not_import_scorers_on_validation() -> None:
    from cg_ray.scoring import SCORERS

    assert SCORERS.check("numeric") == "numeric"
    assert {"exact", "numeric", "multiple_choice", "any_of", "judge", "precomputed"} <= set(SCORERS)


def test_decorator_and_direct_registration() -> None:
    reg: Registry[object] = Registry("scorer")

    @reg.register("double")
    def double(x: int) -> int:
        return 2 * x

    reg.register("triple", lambda x: 3 * x)
    assert reg.get("double") is double
    assert reg.get("triple")(2) == 6  # type: ignore[operator]
    with pytest.raises(ValueError, match="already registered"):
        reg.register("double", double)


def test_unknown_name_suggests_close_matches() -> None:
    reg: Registry[object] = Registry("scorer")
    for name in ("exact", "numeric", "multiple_choice"):
        reg.add(name, "builtins:len")
    with pytest.raises(ConfigError, match=r"unknown scorer 'numerc'; did you mean 'numeric'\?"):
        reg.get("numerc")
    with pytest.raises(ValueError, match="unknown scorer 'zzz' \\(known: exact, multiple_choice, numeric\\)"):
        reg.check("zzz")


def test_bad_lazy_references() -> None:
    reg: Registry[object] = Registry("loader")
    with pytest.raises(ValueError, match="module:attr"):
        reg.add("x", "no_colon_here")
    reg.add("missing_attr", "decimal:NoSuchThing")
    with pytest.raises(ConfigError, match="has no attribute 'NoSuchThing'"):
        reg.get("missing_attr")
