"""Code others can live in: no module of cg_ray over 400 lines, no function over 80 (issue "One house")."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "cg_ray"
MODULES = sorted(PACKAGE.rglob("*.py"))


def test_the_package_is_found() -> None:
    assert len(MODULES) > 100


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_and_function_sizes(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert source.count("\n") <= 400, f"{path.name}: split it (over 400 lines)"
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > 80
    ]
    assert not long, f"{path.name}: functions over 80 lines: {long}"


# ---- the layering is a design (issue #24): few layers, purity and independence contracts, no harness

CONTRACTS = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"][
    "contracts"
]
HARNESS = PACKAGE / "testing"


def layers() -> list[list[str]]:
    (contract,) = [c for c in CONTRACTS if c["type"] == "layers"]
    return [[m.strip() for m in re.split(r"[|:]", layer)] for layer in contract["layers"]]


def test_at_most_eight_layers_naming_every_package() -> None:
    assert len(layers()) <= 8
    named = {m for layer in layers() for m in layer}
    # every package and top-level module of cg_ray sits in a layer, except the harness outside them
    tops = {f"cg_ray.{p.stem}" for p in PACKAGE.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()}
    tops -= {"cg_ray.__init__", "cg_ray.testing", "cg_ray.artifacts"}
    artifacts = {f"cg_ray.artifacts.{p.stem}" for p in (PACKAGE / "artifacts").glob("*.py") if p.stem != "__init__"}
    assert tops | artifacts <= named, f"not in a layer: {sorted((tops | artifacts) - named)}"


def test_purity_and_independence_contracts() -> None:
    forbidden = [c for c in CONTRACTS if c["type"] == "forbidden"]
    pure = [c for c in forbidden if {"cg_ray.metrics", "cg_ray.profile"} <= set(c["source_modules"])]
    assert pure and {"torch", "ray", "transformers", "vllm", "cg_ray.serve", "cg_ray.pipeline"} <= set(
        pure[0]["forbidden_modules"]
    )
    assert any(c["type"] == "independence" and len(c["modules"]) >= 2 for c in CONTRACTS)
    # the siblings of several layers are declared independent (`|`), not merely allowed to import each other (`:`)
    (contract,) = [c for c in CONTRACTS if c["type"] == "layers"]
    assert sum("|" in layer for layer in contract["layers"]) >= 3
    harness = [c for c in forbidden if c["forbidden_modules"] == ["cg_ray.testing"]]
    layered = {".".join(m.split(".")[:2]) for layer in layers() for m in layer}  # cg_ray.artifacts.rows -> artifacts
    assert harness and layered <= set(harness[0]["source_modules"]), "every layered package is kept off the harness"


def test_no_test_harness_in_the_product_packages() -> None:
    stray = [
        str(p.relative_to(PACKAGE))
        for p in MODULES
        if HARNESS not in p.parents and p.stem in {"fakes", "loadfault", "local_serve"}
    ]
    assert not stray, f"test harness modules belong in cg_ray/testing/: {stray}"
    source = [p for p in MODULES if HARNESS not in p.parents]
    users = [str(p.relative_to(PACKAGE)) for p in source if "cg_ray.testing" in p.read_text(encoding="utf-8")]
    assert not users, f"product modules naming the harness: {users}"


def _artifact_names() -> set[str]:
    """The file names every output directory's registry in cg_ray/artifacts/layout.py names."""
    from cg_ray.artifacts import layout

    layouts = [v for v in vars(layout).values() if isinstance(v, type) and issubclass(v, layout.ArtifactDir)]
    return {Path(name).name for kind in layouts for name in kind.ARTIFACTS}


def _string_constants() -> dict[str, str]:
    """Module-level `NAME = "literal"` of every cg_ray module (a joined name may be one imported)."""
    found: dict[str, str] = {}
    for path in MODULES:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
            target = node.target if isinstance(node, ast.AnnAssign) else target
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            if isinstance(target, ast.Name) and isinstance(value, ast.Constant) and isinstance(value.value, str):
                found[target.id] = value.value
    return found


# Modules that still join artifact names themselves, each with why.
JOINS_ALLOWED: set[str] = {
    "probe/export.py",  # `export_items` writes into a directory its caller names, not an output directory
}


def test_only_the_layout_joins_artifact_names() -> None:
    """`dir / S.X_FILE`, `dir / "summary.json"` or `dir / TABLE_FILE` outside cg_ray/artifacts/layout.py: an
    artifact path that RunDir / ArenaDir / the output-directory classes there should hand out (issue #24)."""
    names, constants = _artifact_names(), _string_constants()
    assert {"summary.json", "rows.parquet", "diff.json", "skills.json", "pairs.parquet"} <= names
    found = []
    for path in MODULES:
        where = str(path.relative_to(PACKAGE))
        if where in {"artifacts/layout.py", *JOINS_ALLOWED}:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
                continue
            right = node.right
            schema_name = isinstance(right, ast.Attribute) and isinstance(right.value, ast.Name)
            schema_name = schema_name and right.value.id == "S"
            literal = right.value if isinstance(right, ast.Constant) else None
            constant = constants.get(right.id) if isinstance(right, ast.Name) else None
            if schema_name or (isinstance(literal, str) and Path(literal).name in names) or constant in names:
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "join through RunDir / ArenaDir / the classes of cg_ray/artifacts/layout.py:\n" + "\n".join(found)
