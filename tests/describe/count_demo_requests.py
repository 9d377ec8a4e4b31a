"""Count the chat requests `cg-ray explain` makes on a run, against the scripted loopback server (no model).

Not a test (the demo run is not in the repository): `python -m tests.describe.count_demo_requests COPY_OF_RUN
[--concepts 1,2] [--all]`. The run is read without the token re-read (`tokens=False`, minutes on the demo);
every held-out active row gets a stand-in activating span (a word in its middle), so fuzzing is planned as
if the reader had read every row. The same script counted the requests before and after issue #34.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cg_ray.artifacts.layout import RunDir
from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.explain import explain_run
from cg_ray.describe.run import DescribeOptions
from tests.describe.endpoint_server import Script, serve


def middle_word_spans(a: Any, rows: Mapping[int, Sequence[int]]) -> dict[tuple[int, int], tuple[str, int, int]]:
    """A stand-in activating span per (concept, row): the word in the middle of the row's text."""
    out: dict[tuple[int, int], tuple[str, int, int]] = {}
    for c, rs in rows.items():
        for r in rs:
            text = a.text_of(r)
            words = list(re.finditer(r"\S+", text))
            if len(words) >= 3:
                m = words[len(words) // 2]
                out[(c, r)] = (text, m.start(), m.end())
    return out


def answer(prompt: str) -> str:
    """A fixed, well-formed answer to every kind of prompt (the counts do not depend on what it says)."""
    if 'Answer only with JSON: {"description"' in prompt:
        return '{"description": "Texts about the marked words"}'
    n = len(re.findall(r"^Example \d+:", prompt, flags=re.MULTILINE))
    return json.dumps(["yes"] * n) if n else '{"answer": "yes"}'


def count(run: Path, concepts: tuple[int, ...] | None, every: bool) -> dict[str, Any]:
    script = Script(answer)
    with tempfile.TemporaryDirectory() as tmp, serve(script) as url:
        copy = Path(tmp) / "run"
        shutil.copytree(run, copy)
        config = ExplainConfig(endpoint=url, model="scripted-model", concurrency=8)
        kw: dict[str, Any] = {"span_reader": middle_word_spans}
        if "scope_all" in inspect.signature(explain_run).parameters:
            kw["scope_all"] = every
        _, themes = explain_run(RunDir(copy), DescribeOptions(concepts=concepts, tokens=False), config, **kw)
    posts = [r for r in script.requests if r["path"].endswith("/chat/completions")]
    info = themes["summary"]["explainer"]
    return {"requests": len(posts), "concepts": themes["summary"]["n_concepts"], "modes": info["failure_modes"]}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("run", type=Path)
    p.add_argument("--concepts", default=None)
    p.add_argument("--all", action="store_true")
    args = p.parse_args()
    concepts = tuple(int(c) for c in args.concepts.split(",")) if args.concepts else None
    print(json.dumps(count(args.run, concepts, args.all), default=str))


if __name__ == "__main__":
    main()
