"""`cg-ray explain` against a scripted OpenAI-compatible server: a capable explainer's sentence for the planted
concept wins by detection and reaches descriptions.parquet, weaknesses.parquet and the report; a bad one
loses to the offline candidates; the same seed gives the same prompts, rows and choice; the key is written
nowhere (run directory, logs, manifest)."""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from cg_ray import cli
from cg_ray.artifacts.layout import RunDir
from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.descriptions import Candidate, choose
from cg_ray.describe.explain import explain_run
from cg_ray.describe.fuzzing import SpanTexts, wrong_marking
from cg_ray.describe.run import Analysis, DescribeOptions
from cg_ray.report.refresh import refresh_report
from tests.describe.endpoint_server import Script, serve
from tests.describe.judge_script import answer, marked_words

KEY = "sk-test-9f3Kq-planted-secret"
MARKER = re.compile(r"\b(w\d+|algebra|geometry|poetry)\b")


def faithful(kind: str, desc: str, text: str) -> bool:
    """Yes exactly when the text (detection) or the marked words (fuzzing) contain a marker or topic the
    description names."""
    seen = marked_words(text) if kind == "fuzzing" else text
    return bool(set(MARKER.findall(desc.lower())) & set(MARKER.findall(seen)))


def faithful_judge(prompt: str) -> str:
    return answer(prompt, faithful)


def explainer(good: bool) -> Callable[[str], str]:
    def answer(prompt: str) -> str:
        if prompt.startswith("A language model was tested"):  # a failure mode
            return '{"description": "Rows about poetry"}'
        if prompt.startswith("Below are text excerpts"):
            common = Counter(re.findall(r"\bw\d+\b", prompt)).most_common(1)[0][0]
            if good and common == "w0":  # it understands the planted concept (0) only
                return '{"description": "Texts containing the marker w0"}'
            return "Rows about poetry" if not good else '{"description": "Poems and verse"}'
        return faithful_judge(prompt)

    return answer


def marker_spans(a: Analysis, rows: Mapping[int, Sequence[int]]) -> SpanTexts:
    """The window around a planted row's activating span, its marker `w<concept>` (what a token re-read would
    find): 8 words either side, as a 32-token window of short words would be."""
    out: SpanTexts = {}
    for c, rs in rows.items():
        for r in rs:
            text = a.text_of(r)
            m = re.search(rf"\bw{c}\b", text)
            if m:
                words = list(re.finditer(r"\S+", text))
                at = next(i for i, w in enumerate(words) if w.start() == m.start())
                lo, hi = words[max(0, at - 8)].start(), words[min(len(words) - 1, at + 8)].end()
                out[(c, r)] = (text[lo:hi], m.start() - lo, m.end() - lo)
    return out


@pytest.fixture
def run(make_run: Callable[..., Path]) -> Path:
    from cg_ray.report.html import build_report

    path = make_run(labels={0: "',' | '.'", 6: "'books' | 'house'"})
    build_report(RunDir(path))
    return path


def _explain(run: Path, url: str, **kw: object) -> dict[tuple[int, str], dict[str, object]]:
    config = ExplainConfig.model_validate({"endpoint": url, "model": "scripted-model", **kw})
    explain_run(
        RunDir(run), DescribeOptions(concepts=(0, 6), tokens=False), config, span_reader=marker_spans, scope_all=True
    )
    refresh_report(RunDir(run))  # what `cg-ray explain` does after the step
    return {(r["concept_id"], r["source"]): r for r in pq.read_table(run / "explanations.parquet").to_pylist()}


def test_the_plan_counts_prompt_tokens_with_the_named_tokenizer_as_the_server_would(run: Path) -> None:
    """--tokenizer: the plan's prompt tokens are the chat-templated tokens of the prompts it plans; against what
    was sent (counted the same way, as a vLLM server counts them) it is off only by the LLM's sentence, unknown
    when the plan is made. Without it, 4 characters a token."""
    from cg_ray.generation.base import token_counter

    count = token_counter("smollm2-135m-instruct")
    plans = {}
    for tokenizer in ("smollm2-135m-instruct", None):
        script = Script(explainer(good=True))
        with serve(script) as url:
            _explain(run, url, tokenizer=tokenizer)
        info = json.loads((run / "themes.json").read_text())["summary"]["explainer"]
        posts = [r["body"]["messages"][0]["content"] for r in script.requests if r["path"] == "/v1/chat/completions"]
        assert len(posts) == info["plan"]["requests"]  # no fallback: the plan's prompts are the ones sent
        plans[tokenizer] = info["plan"]
    sent = sum(map(count, posts))
    counted = plans["smollm2-135m-instruct"]
    assert counted["prompt_tokens_counted_by"] == "counted with the tokenizer of smollm2-135m-instruct"
    assert abs(counted["prompt_tokens_est"] - sent) <= 0.05 * sent, (counted["prompt_tokens_est"], sent)
    assert plans[None]["prompt_tokens_counted_by"].startswith("4 characters a token")
    assert abs(plans[None]["prompt_tokens_est"] - sent) > abs(counted["prompt_tokens_est"] - sent)


def test_a_capable_explainer_wins_by_detection_and_reaches_every_output(run: Path) -> None:
    script = Script(explainer(good=True))
    with serve(script) as url:
        by = _explain(run, url)
    llm = by[(0, "llm")]
    assert llm["description"] == "Texts containing the marker w0" and llm["parse"] == "json"
    # 10 + 10 rows to compare the candidates, 10 + 10 others to score the winner; fuzzing likewise
    assert llm["n_positive"] == 20 and llm["n_negative"] == 20 and llm["n_fuzz"] == 40 and llm["n_unparsed"] == 0
    assert llm["detection_score"] == 1.0 and llm["fuzzing_score"] == 1.0
    assert llm["heldout_detection_score"] == 1.0 and llm["heldout_fuzzing_score"] == 1.0
    enrich = by[(0, "enrichment")]  # "Rows with task = geometry": detects well, marks the wrong words
    assert 0.8 <= enrich["detection_score"] <= 1.0 and enrich["fuzzing_score"] < 0.6  # type: ignore[operator]
    assert enrich["heldout_detection_score"] is None and enrich["n_positive"] == 10  # a loser: one half only
    assert by[(0, "label")]["detection_score"] == 0.5  # punctuation names nothing in the rows: always no
    assert by[(6, "llm")]["detection_score"] <= 0.5  # type: ignore[operator]  # "Poems and verse" misses 6
    posts = [r["body"]["messages"][0]["content"] for r in script.requests if r["path"] == "/v1/chat/completions"]
    info = json.loads((run / "themes.json").read_text())["summary"]["explainer"]
    modes = info["failure_modes"]
    assert modes["modes"] >= 1  # --all: every listed mode, each explained from FAILED / PASSED rows
    assert sum(p.startswith("Below are text excerpts") for p in posts) == 2
    assert sum(p.startswith("A language model was tested") for p in posts) == modes["modes"]
    judged = [p for p in posts if "described as" in p]
    assert all("Example 5:" in p for p in judged[:10]) and info["judging"]["parse_rate"] == 1.0
    assert len(posts) == info["plan"]["requests"]  # the plan announced is what was sent (no fallback here)
    # today's way, one example per request and every candidate on every row, would have sent 5× more
    assert len(posts) <= 0.2 * info["plan"]["one_per_request"]
    mode_candidates = pq.read_table(run / "mode_explanations.parquet").column("description").to_pylist()
    quoted = {str(r["description"]) for r in by.values()} | set(mode_candidates)
    assert all(re.search(r'described as: "(.*?)"\n', p).group(1) in quoted for p in judged)  # type: ignore[union-attr]

    described = {r["concept_id"]: r for r in pq.read_table(run / "descriptions.parquet").to_pylist()}
    assert described[0]["source"] == "llm" and described[0]["description"].startswith("Texts containing the marker w0")
    assert described[6]["source"] != "llm"
    weak = {r["concept_id"]: r for r in pq.read_table(run / "weaknesses.parquet").to_pylist()}
    assert weak[0]["description"] == described[0]["description"]
    assert "Texts containing the marker w0" in (run / "report.html").read_text(encoding="utf-8")
    summary = json.loads((run / "themes.json").read_text())["summary"]["explainer"]
    assert summary["usage"]["answered"] == len(posts) and summary["usage"]["failed"] == 0
    assert summary["judgements_unreadable"] == 0 and summary["n_detect"] == 20
    assert described[0]["detection_score"] == llm["heldout_detection_score"]


def test_a_bad_explainer_loses_to_the_offline_candidates(run: Path) -> None:
    with serve(Script(explainer(good=False))) as url:
        by = _explain(run, url)
    assert by[(0, "llm")]["description"] == "Rows about poetry" and by[(0, "llm")]["parse"] == "text"
    assert by[(0, "llm")]["detection_score"] < by[(0, "enrichment")]["detection_score"]  # type: ignore[operator]
    assert by[(0, "llm")]["heldout_detection_score"] is None  # it lost: never judged on the held-out half
    described = {r["concept_id"]: r for r in pq.read_table(run / "descriptions.parquet").to_pylist()}
    assert described[0]["source"] not in ("llm", "none") and described[6]["source"] not in ("llm", "none")


def test_the_same_seed_gives_the_same_prompts_rows_and_choice(run: Path) -> None:
    outputs, prompts = [], []
    for _ in range(2):
        script = Script(explainer(good=True))
        with serve(script) as url:
            by = _explain(run, url, seed=3, concurrency=4)
        outputs.append({k: {f: v for f, v in r.items() if f != "model"} for k, r in by.items()})  # model@URL:port
        prompts.append(sorted(r["body"]["messages"][0]["content"] for r in script.requests if "body" in r))
        prompts[-1].append(pq.read_table(run / "descriptions.parquet").column("description").to_pylist())
    assert outputs[0] == outputs[1] and prompts[0] == prompts[1]
    script = Script(explainer(good=True))
    with serve(script) as url:
        other = _explain(run, url, seed=4)
    assert other[(0, "llm")]["source"] == "llm"
    assert sorted(r["body"]["messages"][0]["content"] for r in script.requests if "body" in r) != prompts[0][:-1]


def test_ties_in_detection_go_to_fuzzing() -> None:
    import numpy as np

    llm = Candidate("llm", "Texts with w0", detection_score=0.9, fuzzing_score=0.7)
    assert choose([llm, Candidate("enrichment", "Rows with geometry", detection_score=0.9, fuzzing_score=0.6)]) == llm
    better = Candidate("enrichment", "Rows with geometry", detection_score=0.9, fuzzing_score=0.8)
    assert choose([llm, better]) == better
    assert choose([llm, Candidate("label", "Tokens", detection_score=0.95)]).source == "label"  # type: ignore[union-attr]
    text = "row 3 about geometry: w0 w7"
    wrong = wrong_marking(text, text.index("w0"), text.index("w0") + 2, np.random.default_rng(0))
    assert wrong is not None and "[[w0]]" not in wrong and wrong.count("[[") == 1


def test_the_key_is_written_nowhere(
    run: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("CGRAY_TEST_KEY", KEY)
    script = Script(explainer(good=True), key=KEY, faults=__import__("collections").deque([[("status", 429)]]))
    with serve(script) as url:
        args = ["explain", str(run), "--concepts", "0,6", "--no-tokens", "--endpoint", url, "--model", "scripted-model"]
        args += ["--judge-model", "scripted-model"]  # the same server as judge: the key goes with it
        assert cli.main([*args, "--api-key-env", "CGRAY_TEST_KEY", "--price-in", "0.2", "--price-out", "0.6"]) == 0
    out = capsys.readouterr()
    assert all(r["auth"] == f"Bearer {KEY}" for r in script.requests)
    assert re.search(
        r"explainer scripted-model at http://127\.0\.0\.1:\d+/v1: \d+ answers, \d+ requests \(1 retries", out.out
    )
    assert "cost $0.00" in out.out and "judgements: " in out.out and out.out.startswith("plan: ")
    for path in run.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in out.out + out.err + caplog.text
    # a run config's `explain:` goes into manifest.json as the variable's name, never its value
    from cg_ray.pipeline.config import parse_run_config
    from cg_ray.pipeline.manifest import StageTimer, build_manifest

    data = yaml.safe_load(Path("jobs/default.yaml").read_text())
    data["explain"] = {"endpoint": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": "CGRAY_TEST_KEY"}
    config = parse_run_config(data)
    manifest = json.dumps(
        build_manifest(config=config.model_dump(mode="json"), reader=None, timer=StageTimer(), counts={})
    )
    assert '"api_key_env": "CGRAY_TEST_KEY"' in manifest and KEY not in manifest


def test_the_gpu_job_file_parses_into_a_gpu_vllm_explainer() -> None:
    """jobs/explain_gpu.yaml (not run here: no GPU) validates as `cg-ray explain --config` reads it."""
    import argparse

    from cg_ray.cli.describe import _explain_config, register
    from cg_ray.describe.completers import backend_generation

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["explain", "runs/x", "--config", "jobs/explain_gpu.yaml", "--n-detect", "10"])
    config = _explain_config(args)
    assert config.model == "meta-llama/Llama-3.1-8B-Instruct" and config.endpoint is None
    assert config.detect_rows == 10 and config.fuzz and config.name_themes  # the flag wins over the file
    gen = backend_generation(config, config.explain_tokens)
    assert gen.on_gpu and gen.resources.num_gpus == 1 and gen.engine.dtype == "bfloat16"
    assert gen.engine.max_model_len == 4096 and gen.sampling.temperature == 0.0


def test_the_service_setting_reaches_the_run_config_of_its_ray_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow as pa

    from cg_ray.pipeline.config import parse_run_config
    from cg_ray.serve.db import Analysis, Upload
    from cg_ray.serve.jobs import job_config
    from cg_ray.serve.settings import ServiceSettings
    from cg_ray.serve.uploads import UPLOAD_SCHEMA

    monkeypatch.setenv("CGRAY_TEST_KEY", KEY)
    path = tmp_path / "u.parquet"
    row = {"row_id": "1", "benchmark": "a", "prompt": "p", "response": "r", "reference": None, "score": 1.0}
    pq.write_table(pa.Table.from_pylist([row], schema=UPLOAD_SCHEMA), path)
    upload = Upload(id="u", owner="k", name="u", n_rows=1, benchmarks=["a"], fields={}, path=str(path))
    explain = {"endpoint": "https://llm.example/v1", "model": "big", "api_key_env": "CGRAY_TEST_KEY"}
    settings = ServiceSettings(data_dir=tmp_path, explain=explain)
    analysis = Analysis(id="x", owner="k", upload_ids=["u"], mode="precomputed", options={"text": "prompt"})
    job = job_config(settings, analysis, [upload], tmp_path / "w").model_dump(mode="json", exclude_unset=True)
    config = parse_run_config(job)  # what the job's job.yaml holds
    assert config.explain is not None and config.explain.endpoint == "https://llm.example/v1"
    assert config.explain.detect_rows == 20 and KEY not in json.dumps(job)
    assert ServiceSettings(data_dir=tmp_path).explain is None
