"""The web explorer in headless Chromium (Debian's, driven by Playwright): upload → analysis → concept
table → concept detail with examples. A screenshot is kept in test-artifacts/."""

from __future__ import annotations

import json
import re
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed (scripts/setup.sh installs it)")


@pytest.fixture
def server(tmp_path: Path):
    import uvicorn

    from cg_ray.serve.api import create_api
    from cg_ray.serve.db import Store
    from cg_ray.serve.encoding import LocalEncoder
    from cg_ray.serve.keys import create_key
    from cg_ray.serve.settings import ServiceSettings
    from cg_ray.testing.fakes import HashingReader

    settings = ServiceSettings(data_dir=tmp_path / "data")
    store = Store(settings.db_url)
    key = create_key(store, "browser")[1]
    labels_path = tmp_path / "labels.csv"
    labels_path.write_text("concept_id,label\n" + "".join(f"{i},hashed word group {i}\n" for i in range(128)))
    from cg_ray.labels import load_labels

    app = create_api(settings, store, LocalEncoder(HashingReader(d_sae=128)), load_labels(labels_path, d_sae=128))
    # The socket is bound here and handed to uvicorn: no window in which another process takes the port.
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", key
    server.should_exit = True
    thread.join(timeout=10)
    listening.close()


def signed_in(p: Any, base: str, key: str) -> tuple[Any, Any]:
    """A headless Chromium on the explorer, with the API key saved and accepted."""
    from playwright.sync_api import expect

    browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
    page = browser.new_page(viewport={"width": 1280, "height": 1800})
    page.goto(f"{base}/ui/")
    page.fill("#apikey", key)
    page.click("#save-key")
    expect(page.locator("#auth-status")).to_have_text("key OK")
    return browser, page


@pytest.mark.slow
def test_upload_analyse_browse(server, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, key = server
    bench = tmp_path / "arith.jsonl"
    words = ["add", "carry", "digit", "sum", "minus", "borrow", "times", "table", "divide", "remainder"]
    bench.write_text(
        "".join(
            json.dumps(
                {
                    "id": i,
                    # "please" in half the rows: a concept with enough support for the weakness profile.
                    # "diagram" on exactly the failed rows: a failure mode the explorer must put into words.
                    "prompt": f"{'please ' if i % 2 else ''}{'diagram ' if i % 3 == 0 else ''}"
                    f"{words[i % 10]} {words[(i * 3) % 10]} {i}",
                    "response": str(i),
                    "score": float(i % 3 != 0),
                }
            )
            + "\n"
            # 120 rows: the "diagram" mode's 40 rows are enough to confirm it held out (60 are not)
            for i in range(120)
        )
    )
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser, page = signed_in(p, base, key)
        page.click("#new-analysis summary")
        page.set_input_files("#upload-file", str(bench))
        page.click("#upload-submit")
        expect(page.locator("#upload-status")).to_contain_text("done", timeout=30_000)
        rows = page.locator("#concept-table tbody tr")
        expect(rows.first).to_be_visible()
        assert rows.count() > 3
        expect(page.locator("#kpis")).to_contain_text("120")
        # The same sections as a report of the run (tests/report/test_report_browser.py), drawn by the same app
        # from the same documents; the service's controls beside them.
        for section in ("overview", "beyond", "profile", "readable", "benchmarks", "concepts", "relations", "start"):
            expect(page.locator(f"#{section}")).to_be_visible()
        analysis = page.locator("#analysis").input_value()
        _same_numbers_as_the_run(page, base, key, analysis)
        # The themes panel (`cg-ray describe` ran as part of the analysis).
        expect(page.locator("#themes-body")).to_contain_text(re.compile(r"rows · mean score|No themes"))
        page.locator("#themes").screenshot(path=str(ARTIFACTS / "explorer-themes.png"))
        # First, the failure modes beyond the metadata, in words: the "diagram" rows, confirmed held out, with
        # their held-out residual and q-value; the other candidates apart, collapsed.
        expect(page.locator("#beyond-judged")).to_contain_text(
            "chosen on one half of the rows and tested on the other, over 10 grouped splits"
        )
        # The one decision rule and the interval, in the run's own sentences, beside the findings.
        expect(page.locator("#beyond-rule")).to_contain_text("Decision: confirmed ⇔ q ≤ fdr")
        expect(page.locator("#beyond-rule")).to_contain_text("Intervals: ")
        # What the run could detect (120 rows: modes of 50 rows at most on a half), in the failure modes' note.
        expect(page.locator("#modes-power")).to_contain_text(
            re.compile(r"a failure mode of 50 rows needs a residual of -\d\.\d{3} to be confirmed 80% of the time")
        )
        modes = page.locator("#modes-table tbody tr")
        expect(modes.first).to_be_visible()
        first_mode = modes.first.locator("td").nth(1)
        expect(first_mode).to_contain_text("Rows with “diagram”")
        expect(first_mode).to_contain_text("“diagram” in 100% of its rows vs 0% of the same cells")
        expect(first_mode).not_to_contain_text("no label")
        expect(first_mode.locator("mark").first).to_have_text("diagram")  # its example rows, the term marked
        expect(modes.first.locator("td").nth(2)).to_contain_text("-")
        expect(modes.first.locator("td").nth(2)).to_contain_text(re.compile(r"q[=<]0\.0\d\d"))
        expect(modes.first.locator("td").nth(2)).to_contain_text(
            re.compile(r"tested on \d+ held-out rows \(\d+ groups\), chosen by \d+ of 10 splits")
        )
        candidates = page.locator("#modes-candidates")
        expect(candidates).to_contain_text(
            "Candidates — not confirmed: each with the smallest effect this run could confirm (MDE, 80% power)"
        )
        expect(candidates).not_to_contain_text("likely noise")
        expect(candidates.locator("tbody tr").first).to_be_hidden()  # collapsed until opened
        candidates.locator("summary").click()
        expect(candidates.locator("tbody tr").first).to_be_visible()
        expect(candidates.locator("tbody tr").first.locator("td").nth(2)).to_contain_text("q=")
        # Each candidate's power: a number in the MDE column (the residual it would be confirmed at).
        expect(candidates.locator("th").last).to_have_text("MDE (80% power)")
        mdes = candidates.locator("tbody td.mde").all_inner_texts()
        assert any(re.fullmatch(r"-\d\.\d{3}", m) for m in mdes), mdes
        # The next step for the mode the rows could not settle, as the service takes it (a report gives the CLI).
        import httpx

        view = httpx.get(f"{base}/v1/analyses/{analysis}/view", headers={"X-API-Key": key}).json()
        gap = view["profiles"]["failure_modes"]["probe_gap"]
        # a REST client reading the failure modes gets the same next step (and no CLI command naming a folder)
        modes_api = httpx.get(
            f"{base}/v1/analyses/{analysis}/weaknesses", params={"kind": "failure_modes"}, headers={"X-API-Key": key}
        ).json()
        assert modes_api["probe_gap"] == gap and "probe_command" not in modes_api
        if gap:
            expect(page.locator("#modes-next")).to_contain_text(
                f'POST /v1/analyses/{analysis}/probe {{"gaps":["{gap}"]}}'
            )
            expect(page.locator("#modes-next")).not_to_contain_text("cg-ray probe")
        else:
            expect(page.locator("#modes-next")).to_be_hidden()
        # One benchmark, no metadata: no slice to try, said as a judged run's empty result (not as an old run).
        expect(page.locator("#slices-table tbody")).to_have_text(
            re.compile(r"No slice confirmed held out \(0 candidat")
        )
        expect(page.locator("#slices-note")).to_contain_text("(fields: none found)")
        page.locator("#beyond").screenshot(path=str(ARTIFACTS / "explorer-failure-modes.png"))
        # The weakness profile: ranked entries with intervals and support; a row opens the concept.
        expect(page.locator("#profile-table")).to_have_attribute("aria-busy", "false")
        profile = page.locator("#profile-table tbody tr")
        expect(profile.first).to_be_visible()
        expect(profile.first.locator("td").nth(0)).to_have_text("1")
        expect(profile.first.locator("td").nth(3)).to_contain_text("[")
        expect(page.locator("#profile-note")).to_contain_text("ranked by")
        page.select_option("#profile-kind", "strengths")
        expect(page.locator("#profile-note")).to_contain_text("ranked by")
        page.select_option("#profile-kind", "weaknesses")
        expect(page.locator("#profile-table")).to_have_attribute("aria-busy", "false")
        page.locator("#profile").screenshot(path=str(ARTIFACTS / "explorer-profile.png"))
        # The concept table sorts by the upper end of X_model's interval.
        page.click("th[data-sort='X_model_high']")
        expect(page.locator("#concept-table")).to_have_attribute("aria-busy", "false")
        # Switching to benchmark gaps re-sorts by coverage.
        page.click("#mode-bench")
        expect(page.locator("#mode-bench")).to_have_class("on")
        page.click("#mode-model")
        expect(page.locator("#concept-table")).to_have_attribute("aria-busy", "false")
        first_id = rows.first.get_attribute("data-id")  # (its cell may hold a description above the label)
        rows.first.click()
        expect(page.locator("#detail-title")).to_contain_text(f"Concept {first_id}:")
        examples = page.locator("#best .example, #worst .example")
        expect(examples.first).to_be_visible()
        page.locator("#detail").screenshot(path=str(ARTIFACTS / "explorer-detail.png"))
        page.screenshot(path=str(ARTIFACTS / "explorer.png"), full_page=True)
        # Search filters by label.
        page.fill("#search", "group 1")  # debounced: wait for the filtered table, then check every row
        expect(rows.first.locator("td").nth(1)).to_contain_text("group 1")
        expect(page.locator("#concept-table")).to_have_attribute("aria-busy", "false")
        labels = page.locator("#concept-table tbody tr td:nth-child(2)").all_inner_texts()
        assert labels and all("group 1" in label for label in labels)
        browser.close()
    assert (ARTIFACTS / "explorer.png").stat().st_size > 10_000


def _same_numbers_as_the_run(page: Any, base: str, key: str, analysis: str) -> None:
    """The weakest concept's interval and the first failure mode's held-out interval on the page are those of
    the analysis' run files (downloaded as the API serves them)."""
    import io

    import httpx
    import pyarrow.parquet as pq
    from playwright.sync_api import expect

    def table(name: str) -> list[dict[str, Any]]:
        got = httpx.get(f"{base}/v1/analyses/{analysis}/artifacts/{name}", headers={"X-API-Key": key})
        assert got.status_code == 200, got.text
        return pq.read_table(io.BytesIO(got.content)).to_pylist()

    weakest = table("weaknesses.parquet")[0]
    first = page.locator("#profile-table tbody tr").first
    expect(first.locator("td").nth(1)).to_have_text(str(weakest["concept_id"]))
    interval = f"{weakest['X_model']:.3f} [{weakest['X_model_low']:.3f}, {weakest['X_model_high']:.3f}]"
    expect(first.locator("td.xmodel")).to_have_text(interval)
    mode = table("failure_modes.parquet")[0]
    held = page.locator("#modes-table tbody tr" if mode["confirmed"] else "#modes-candidates-table tbody tr")
    low, high = mode["heldout_residual_low"], mode["heldout_residual_high"]
    expect(held.first.locator("td.heldout")).to_contain_text(
        f"{mode['heldout_residual']:+.3f} [{low:+.3f}, {high:+.3f}]"
    )


def _uploaded(base: str, headers: dict[str, str], rows: list[dict], name: str = "bench.jsonl") -> str:
    import httpx

    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    return str(httpx.post(f"{base}/v1/uploads", headers=headers, files={"file": (name, data)}).json()["id"])


def _finished(base: str, headers: dict[str, str], path: str, body: dict) -> str:
    """POST an analysis (`path`: /v1/analyses or /v1/diff-models) and wait until it has succeeded."""
    import httpx

    a = httpx.post(f"{base}{path}", headers=headers, json=body).json()
    deadline = time.monotonic() + 30
    while a["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, a
        time.sleep(0.1)
        a = httpx.get(f"{base}/v1/analyses/{a['id']}", headers=headers).json()
    assert a["status"] == "succeeded", a
    return str(a["id"])


@pytest.mark.slow
def test_compare_two_analyses_in_the_explorer(server, tmp_path: Path) -> None:
    """The explorer's compare view draws GET /v1/diff's document; `cg-ray diff` of the same two runs writes
    the same numbers into diff.parquet and its diff.html shows them the same way."""
    import pyarrow.parquet as pq
    from playwright.sync_api import expect, sync_playwright

    from cg_ray import schemas as S
    from cg_ray.cli import main
    from tests.report.offline import offline_page

    base, key = server
    headers = {"X-API-Key": key}

    def analyse(rows: list[dict]) -> str:
        return _finished(base, headers, "/v1/analyses", {"upload_ids": [_uploaded(base, headers, rows)]})

    rows: list[dict[str, Any]] = [
        {"id": i, "prompt": f"{'please ' if i % 2 else ''}add {i} and {i + 1}", "response": str(i), "score": 1.0}
        for i in range(60)
    ]
    first = analyse(rows)
    # B: every "please" row is now wrong — the concepts of "please" regress, nothing else changes
    second = analyse([{**r, "score": 0.0 if "please" in r["prompt"] else 1.0} for r in rows])
    out = tmp_path / "diff"
    assert main(["diff", *_run_dirs(tmp_path, first, second), "--out", str(out), "--assume-same-reader"]) == 0
    top = pq.read_table(out / S.DIFF_FILE).to_pylist()
    top = sorted((r for r in top if r["direction"] == "regressed"), key=lambda r: r["rank"])[0]
    cell = f"{top['delta_X_model']:+.3f} [{top['delta_X_model_low']:+.3f}, {top['delta_X_model_high']:+.3f}]"
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser, page = signed_in(p, base, key)
        page.select_option("#analysis", first)
        expect(page.locator("#compare")).to_be_visible()
        page.select_option("#compare-with", second)
        page.click("#compare-go")
        expect(page.locator("#diff-kpis")).to_contain_text("60paired rows")
        expect(page.locator("#diff-table")).to_have_attribute("aria-busy", "false")
        regressed = page.locator("#diff-table tbody tr.regressed")
        expect(regressed.first).to_have_attribute("data-id", str(top["concept_id"]))
        expect(regressed.first.locator("td").nth(2)).to_have_text(cell)  # as the CLI's diff.parquet holds it
        expect(page.locator("#diff-plot svg circle").first).to_be_visible()
        regressed.first.click()
        expect(page.locator("#diff-detail")).to_contain_text("Right in A, wrong in B")
        expect(page.locator("#diff-detail .example").first).to_contain_text("please")
        page.locator("#compare").screenshot(path=str(ARTIFACTS / "explorer-compare.png"))
        browser.close()
        # The CLI's page of the same diff: the same row, the same text.
        browser, page, left, errors = offline_page(p, out / S.DIFF_HTML, "#diff-table tr.regressed")
        expect(page.locator("#diff-table tbody tr.regressed").first.locator("td").nth(2)).to_have_text(cell)
        browser.close()
    assert not left and not errors, (left, errors)


def _run_dirs(tmp_path: Path, *analyses: str) -> list[str]:
    """The run directories of the `server` fixture's analyses (its store is under tmp_path/data)."""
    from cg_ray.serve.db import Analysis, Store
    from cg_ray.serve.settings import ServiceSettings

    store = Store(ServiceSettings(data_dir=tmp_path / "data").db_url)
    with store.session() as s:
        rows = [s.get(Analysis, a) for a in analyses]
        return [str(row.run_dir) for row in rows if row is not None]


@pytest.mark.slow
def test_diff_models_in_the_explorer(server, tmp_path: Path) -> None:
    """Two models' answers (B's all open with one word): from a CG analysis' compare area, the diff-models
    table sorted by Δ, its forest plot, and a concept's paired examples; then the analysis picked itself. The
    numbers are those the paged API route reads from diff_models.parquet, and the analysis' diff_models.html
    shows them the same way."""
    import httpx
    from playwright.sync_api import expect, sync_playwright

    from cg_ray.artifacts.layout import MODEL_DIFF_HTML, ModelDiffDir
    from cg_ray.testing.fakes import word_concept
    from tests.report.offline import offline_page

    base, key = server
    headers = {"X-API-Key": key}

    shared = {word_concept(w, 128) for i in range(30) for w in ("it", "is", str(i), str(2 * i))}
    word = next(w for w in ("certainly", "indeed", "surely") if word_concept(w, 128) not in shared)
    rows = [
        {"id": f"q{i}", "prompt": f"what is {i} plus {i}", "response": f"it is {2 * i}", "score": 1.0}
        for i in range(30)
    ]
    cg = _finished(base, headers, "/v1/analyses", {"upload_ids": [_uploaded(base, headers, rows)]})
    tuned = [{**r, "response": f"{word} {r['response']}"} for r in rows]
    pair = {
        "upload_a": _uploaded(base, headers, rows, "base.jsonl"),
        "upload_b": _uploaded(base, headers, tuned, "tuned.jsonl"),
    }
    dm = _finished(base, headers, "/v1/diff-models", {**pair, "min_rows": 2})
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser, page = signed_in(p, base, key)
        page.select_option("#analysis", cg)
        expect(page.locator("#compare-analyses")).to_be_visible()
        page.select_option("#models-analysis", dm)
        page.click("#models-go")
        expect(page.locator("#models-note")).to_contain_text("30 prompts compared")
        expect(page.locator("#models-replication")).to_contain_text("1 of 1 confirmed")
        expect(page.locator("#models-table")).to_have_attribute("aria-busy", "false")
        page.click("th[data-msort='delta']")  # B − A, largest first
        expect(page.locator("#models-table")).to_have_attribute("aria-busy", "false")
        first = page.locator("#models-table tbody tr").first
        expect(first).to_have_attribute("data-id", str(word_concept(word, 128)))
        expect(first).to_have_class("b-more")
        expect(first.locator("td").nth(4)).to_contain_text("+1.000")
        params: dict[str, str | int] = {"sort": "delta", "limit": 1}
        item = httpx.get(f"{base}/v1/diff-models/{dm}", headers=headers, params=params).json()["items"][0]
        cell = f"{item['delta']:+.3f} [{item['delta_low']:+.3f}, {item['delta_high']:+.3f}]"
        expect(first.locator("td").nth(4)).to_have_text(cell)
        expect(page.locator("#models-plot svg.chart").first).to_be_visible()
        first.click()
        detail = page.locator("#models-detail")
        expect(detail).to_contain_text("In B's answer, not A's")
        expect(detail.locator(".answer.has-concept").first).to_contain_text(f"B (tuned.jsonl): {word}")
        expect(detail.locator(".example .prompt").first).to_contain_text("what is")
        page.locator("#compare").screenshot(path=str(ARTIFACTS / "explorer-diff-models.png"))
        # the diff-models analysis picked itself: only the compare area, on its models
        page.select_option("#analysis", dm)
        expect(page.locator("#overview")).to_be_hidden()
        expect(page.locator("#compare-analyses")).to_be_hidden()
        expect(page.locator("#models-table tbody tr").first).to_be_visible()
        browser.close()
        # The analysis' own page, offline: the same row, the same text.
        page_file = ModelDiffDir(_run_dirs(tmp_path, dm)[0]).file(MODEL_DIFF_HTML)
        browser, page, left, errors = offline_page(p, page_file, "#models-table tbody tr[data-id]")
        page.click("th[data-msort='delta']")
        expect(page.locator("#models-table tbody tr").first.locator("td").nth(4)).to_have_text(cell)
        browser.close()
    assert not left and not errors, (left, errors)
