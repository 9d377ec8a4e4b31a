"""report.html: the explorer's app (cg_ray/serve/ui) with the run's documents embedded, in one file that works
offline. Every view is drawn by the app, in the service and in a report alike; this module only inlines it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from cg_ray import schemas as S
from cg_ray.artifacts.layout import RunDir
from cg_ray.describe.config import REPORT_TOP
from cg_ray.report.documents import run_view

REPORT_FILE = S.REPORT_FILE
# The explorer's static files, read as package data (the report imports nothing of the service above it).
UI_DIR = Path(__file__).resolve().parents[1] / "serve" / "ui"
DATA_ID = "cg-ray-run"  # the <script type="application/json"> the app reads instead of the API

# The stand-alone pages of `cg-ray diff` / `diff-models` (cg_ray.compare) share this look.
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1f2937;color:#fff;padding:18px 32px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#cbd5e1}main{padding:8px 32px 48px;max-width:1200px}
section{background:#fff;border:1px solid #e5e7eb;border-radius:8px;padding:12px 20px;margin:18px 0}
h2{font-size:18px;margin:8px 0 12px}.grid{display:grid;grid-template-columns:1fr 1fr;gap:12px}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{border-bottom:1px solid #eee;padding:5px 8px;
text-align:left;vertical-align:top}th{background:#f3f4f6}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ex{color:#555;font-size:12px}.ex b{color:#111}
.shares{color:#444;font-size:12px;margin:2px 0}.kpis{display:flex;gap:24px;flex-wrap:wrap}
.kpi{min-width:140px}.kpi .v{font-size:22px;font-weight:600}.kpi .l{color:#666;font-size:12px}
details summary{cursor:pointer}mark{background:#fde68a;padding:0 1px}.ci{color:#666;font-size:11px}
h3{font-size:15px;margin:10px 0 6px}.none{color:#444}.ok{color:#15803d;font-weight:600}
"""


def embedded_json(doc: Any) -> str:
    """JSON safe inside <script>: every "<" escaped (JSON allows it only in strings), so no "</script>"."""
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


def _inline_script(name: str) -> str:
    code = (UI_DIR / name).read_text(encoding="utf-8")
    if re.search(r"</script", code, re.I):  # would end the inline <script> early
        raise ValueError(f"{name} holds '</script': it cannot be inlined")
    return f"<script>{code}</script>"


def page(view: dict[str, Any], title: str) -> str:
    """The explorer's index.html with its stylesheet and scripts inline and the run's documents before them."""
    index = (UI_DIR / "index.html").read_text(encoding="utf-8")
    style = (UI_DIR / "style.css").read_text(encoding="utf-8")
    index = index.replace('<link rel="stylesheet" href="style.css">', f"<style>{style}</style>")
    index = re.sub(r"<title>.*?</title>", f"<title>{_escape(title)}</title>", index)
    data = f'<script type="application/json" id="{DATA_ID}">{embedded_json(view)}</script>'
    scripts = re.findall(r'<script src="([\w.]+)"></script>', index)
    body = data + "".join(_inline_script(name) for name in scripts)
    index = re.sub(r'<script src="[\w.]+"></script>\n?', "", index)
    return index.replace("</body>", body + "</body>")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def build_report(
    run_dir: str | Path, examples_per_concept: int = 3, top: int = REPORT_TOP, validate: str | Path | None = None
) -> Path:
    """RUN/report.html (a post-publish step of the run); shows RUN/validate.json (or the `validate` file
    given) when there is one."""
    run_files = RunDir(run_dir)
    run_files.require(S.SUMMARY_FILE, S.CONCEPTS_FILE, S.BENCHMARK_CONCEPTS_FILE, S.ROWS_FILE)
    name = run_files.path.name
    view = run_view(
        run_files.path, top, examples_per_concept, Path(validate) if validate is not None else None, name=name
    )
    run_files.update("report", {REPORT_FILE: page(view, f"cg_ray report — {name}")})
    return run_files.report
