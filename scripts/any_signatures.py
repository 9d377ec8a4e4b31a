"""Public function signatures of cg_ray that mention `Any` (issue #32 tracks the count).

python scripts/any_signatures.py            # the count, per package
python scripts/any_signatures.py --list     # every such signature, file:line
"""

from __future__ import annotations

import argparse
import ast
import collections
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "cg_ray"


def any_signatures(root: Path = ROOT) -> list[tuple[Path, int, str, list[str]]]:
    found = []
    for path in sorted(root.rglob("*.py")):
        if "testing" in path.relative_to(root).parts:  # the test harness is not the product's API
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name.startswith("_"):
                continue
            args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            annotated = [(a.arg, a.annotation) for a in args if a.annotation is not None]
            if node.returns is not None:
                annotated.append(("->", node.returns))
            bad = [f"{name}: {ast.unparse(a)}" for name, a in annotated if "Any" in ast.unparse(a)]
            if bad:
                found.append((path, node.lineno, node.name, bad))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    found = any_signatures()
    if args.list:
        for path, line, name, bad in found:
            print(f"{path.relative_to(ROOT.parent)}:{line} {name}  " + "; ".join(bad))
    per = collections.Counter(str(path.parent.relative_to(ROOT.parent)) for path, *_ in found)
    for package, n in per.most_common():
        print(f"{n:4d}  {package}")
    print(f"{len(found)} public signatures mention Any")


if __name__ == "__main__":
    main()
