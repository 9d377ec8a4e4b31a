"""Circles measured from the imports (issue #48, item 6): no cg_ray module reaches itself through a chain of
imports. grimp reads every import, module-level, function-level and under TYPE_CHECKING alike; a strongly
connected component of more than one module is a circle. A new circle fails here; the allow-list holds the
ones not yet removed, each with why."""

from __future__ import annotations

import grimp

# Circles not yet removed (none left since issue #48). Each entry would be the whole component, as found;
# the test also fails on an entry that no longer exists, so the list cannot go stale.
ALLOWED: set[frozenset[str]] = set()


def import_cycles(package: str = "cg_ray") -> set[frozenset[str]]:
    """The strongly connected components of more than one module in `package`'s import graph (Tarjan's
    algorithm, iterative)."""
    graph = grimp.build_graph(package, include_external_packages=False)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                nxt = edges[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.add(frozenset(component))
    return found


def test_cycle_finder_sees_a_circle(tmp_path, monkeypatch) -> None:
    pkg = tmp_path / "circ"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from circ import b\n")
    (pkg / "b.py").write_text("def f():\n    from circ import c\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from circ import a\n")
    (pkg / "d.py").write_text("from circ import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("circ") == {frozenset({"circ.a", "circ.b", "circ.c"})}


def test_no_new_import_cycles() -> None:
    found = import_cycles()
    new = sorted(sorted(c) for c in found - ALLOWED)
    assert not new, f"import circles (issue #48): {new}"
    gone = sorted(sorted(c) for c in ALLOWED - found)
    assert not gone, f"allowed circles no longer found, drop them from ALLOWED: {gone}"
