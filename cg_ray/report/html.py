"""The pages: the explorer's app (cg_ray/serve/ui) with an analysis' documents embedded, in one file that works
offline — report.html of a run or an arena, diff.html of `cg-ray diff`, diff_models.html of `cg-ray diff-models`.
Every view is drawn by the app, in the service and in a page alike; this module only inlines it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from cg_ray import schemas as S
from cg_ray.artifacts.layout import ArtifactDir, RunDir
from cg_ray.describe.config import REPORT_TOP
from cg_ray.report.documents import run_view

REPORT_FILE = S.REPORT_FILE
# The explorer's static files, read as package data (the report imports nothing of the service above it).
UI_DIR = Path(__file__).resolve().parents[1] / "serve" / "ui"
DATA_ID = "cg-ray-run"  # the <script type="application/json"> the app reads instead of the API


def embedded_json(doc: object) -> str:
    """JSON safe inside <script>: every "<" escaped (JSON allows it only in strings), so no "</script>"."""
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


def _inline_script(name: str) -> str:
    code = (UI_DIR / name).read_text(encoding="utf-8")
    if re.search(r"</script", code, re.I):  # would end the inline <script> early
        raise ValueError(f"{name} holds '</script': it cannot be inlined")
    return f"<script>{code}</script>"


def page(view: Mapping[str, object], title: str, kind: str = "run") -> str:
    """The explorer's index.html with its stylesheet and scripts inline and the documents of the analysis
    before them, marked with the kind of view that draws them (its data-view: app.js drawEmbedded)."""
    if not re.fullmatch(r"\w+", kind):
        raise ValueError(f"a view's kind is a word, not {kind!r}")
    index = (UI_DIR / "index.html").read_text(encoding="utf-8")
    style = (UI_DIR / "style.css").read_text(encoding="utf-8")
    index = index.replace('<link rel="stylesheet" href="style.css">', f"<style>{style}</style>")
    index = re.sub(r"<title>.*?</title>", f"<title>{_escape(title)}</title>", index)
    data = f'<script type="application/json" id="{DATA_ID}" data-view="{kind}">{embedded_json(view)}</script>'
    scripts = re.findall(r'<script src="([\w.]+)"></script>', index)
    body = data + "".join(_inline_script(name) for name in scripts)
    index = re.sub(r'<script src="[\w.]+"></script>\n?', "", index)
    return index.replace("</body>", body + "</body>")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def build_report(
    run: RunDir,
    examples_per_concept: int = 3,
    top: int = REPORT_TOP,
    validate: Path | None = None,
) -> Path:
    """RUN/report.html (a post-publish step of the run); shows RUN/validate.json (or the `validate` file
    given) when there is one."""
    run.require(S.SUMMARY_FILE, S.CONCEPTS_FILE, S.BENCHMARK_CONCEPTS_FILE, S.ROWS_FILE)
    name = run.path.name
    view = run_view(run, top, examples_per_concept, validate, name=name)
    run.update("report", {REPORT_FILE: page(view, f"cg_ray report — {name}")})
    return run.report


def _title(view: Mapping[str, object], kind: str) -> str:
    return f"cg_ray {kind.replace('_', ' ')} — {view['name']}"


def write_view(files: ArtifactDir, name: str, view: Mapping[str, object], kind: str) -> Path:
    """An analysis' page (diff.html, diff_models.html, an arena's report.html) as artifact `name` of `files`
    (being built): the app with `view` embedded, drawn by the view registered for `kind` (serve/ui:
    `EMBEDDED.<kind>`)."""
    return files.write(name, page(view, _title(view, kind), kind))
