"""`cg-ray scope` with an LLM judge of scope (the paper's way): against a scripted OpenAI-compatible endpoint on
loopback that says "in scope" of exactly the concepts whose label holds a marker word, the table's verdicts
follow the script, the requests are the batches planned, unreadable answers are null and counted, and a
missing description or an endpoint that is down stops the command before anything is written."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.artifacts.layout import SCOPE_GAPS, SCOPE_SUMMARY, RunDir
from cg_ray.cli import main
from cg_ray.scope.judge import Candidate, Verdict, candidates_of, parse_verdicts, scope_prompt
from cg_ray.scope.reference import compare
from tests.conftest import rows_table
from tests.describe.endpoint_server import Script, serve
from tests.scope.synthetic import scope_rows

D = 64
MARKER = "arithmetic"
LABELS = {
    2: "carrying digits in multi-digit arithmetic",
    3: "recipes and cooking times",
    4: "arithmetic word problems about money",
    5: "song lyrics and rhymes",
    6: "mental arithmetic shortcuts",
    7: "sports scores and league tables",
    8: "clauses of legal contracts",
}
LEFT_OUT = sorted(LABELS)  # each fires on 15% of the reference and of "wide", never on "narrow"
DESCRIPTIONS = {
    "narrow": "Grade-school arithmetic: word problems solved with the four operations.",
    "wide": "General knowledge questions of every kind.",
}
_CONCEPT = re.compile(r'^Concept (\d+): "(.*)"$', re.MULTILINE)
_PROMPT_SCHEMA = S.ROWS_SCHEMA.append(pa.field("prompt", pa.string()))


def _rows(benchmark: str, n: int, rng: np.random.Generator, left_out_share: float) -> list[dict[str, Any]]:
    return scope_rows(benchmark, n, rng, left_out_share, LEFT_OUT, D, "{benchmark} text {i} on {ids}")


@pytest.fixture
def run_dir(tmp_path: Path, write_rows: Callable[..., Path]) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    suite = rows_table(_rows("narrow", 300, rng, 0.0) + _rows("wide", 300, rng, 0.15), schema=_PROMPT_SCHEMA)
    path = write_rows(d_sae=D, table=suite)
    traffic = rows_table(_rows("traffic", 400, rng, 0.15), schema=_PROMPT_SCHEMA)
    ref = write_rows(d_sae=D, name="traffic.rows.parquet", table=traffic)
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"concept_id": c, "label": t}) + "\n" for c, t in LABELS.items()))
    args = ["metrics", "--rows", str(path), "--out", str(tmp_path / "run"), "--min-rows", "5", "--labels", str(labels)]
    assert main(args) == 0
    return tmp_path / "run", ref


def asked(prompt: str) -> list[tuple[int, str]]:
    """The (concept, label) pairs a scope prompt asks about, in its order."""
    return [(int(c), label) for c, label in _CONCEPT.findall(prompt)]


def verdicts_json(pairs: Sequence[tuple[int, str]]) -> str:
    items = [
        {"concept": c, "in_scope": MARKER in label, "reason": f"{'about' if MARKER in label else 'not about'} sums"}
        for c, label in pairs
    ]
    return json.dumps({"verdicts": items})


def by_marker(prompt: str) -> str:
    return verdicts_json(asked(prompt))


def chats(script: Script) -> list[dict[str, Any]]:
    return [r for r in script.requests if r["path"].endswith("/chat/completions")]


def judge_args(url: str | None, *extra: str, model: str = "scripted-model") -> list[str]:
    args = ["--judge-model", model, *(["--judge-endpoint", url] if url else []), "--judge-retries", "0"]
    for bench, text in DESCRIPTIONS.items():
        args += ["--description", f"{bench}={text}"]
    return [*args, *extra]


def gaps_of(run: Path) -> pd.DataFrame:
    return pq.read_table(RunDir(run).file(SCOPE_GAPS)).to_pandas()


def test_verdicts_follow_the_script_in_the_batches_planned(
    run_dir: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run, ref = run_dir
    script = Script(answer=by_marker)
    with serve(script) as url:
        assert main(["scope", str(run), "--reference-rows", str(ref), *judge_args(url, "--judge-batch", "3")]) == 0
    out = capsys.readouterr().out
    gaps = gaps_of(run)
    narrow = gaps[(gaps["benchmark"] == "narrow") & gaps["gap"]]
    assert sorted(narrow["concept_id"]) == LEFT_OUT
    assert not gaps.loc[gaps["benchmark"] == "wide", "gap"].any()
    for row in narrow.itertuples():
        assert row.in_scope_judge is (MARKER in LABELS[row.concept_id])
        assert row.judge_reason == ("about sums" if row.in_scope_judge else "not about sums")
        assert len(row.examples) == 3  # the reference texts the judge was shown
    assert gaps.loc[~gaps["gap"], "in_scope_judge"].isna().all()  # only candidates are asked
    # The plan: 7 gaps of narrow in batches of 3 (3 requests, in the gaps' order), none for wide (no gap).
    # The plan: narrow's 7 gaps in their order (most confident first) in batches of 3, one request each
    # (answered concurrently, so they arrive in any order); none for wide, which has no gap.
    expected = narrow.sort_values(["q_value", "reference_share"], ascending=[True, False])["concept_id"].tolist()
    sent = {tuple(c for c, _ in asked(r["body"]["messages"][-1]["content"])): r["body"] for r in chats(script)}
    assert len(chats(script)) == 3
    assert sorted(sent, key=lambda b: expected.index(b[0])) == [
        tuple(expected[:3]),
        tuple(expected[3:6]),
        (expected[6],),
    ]
    for batch, body in sent.items():
        prompt = body["messages"][-1]["content"]
        assert DESCRIPTIONS["narrow"] in prompt and prompt.count("it fires on: ") == 3 * len(batch)
        schema = body["response_format"]["json_schema"]["schema"]["properties"]["verdicts"]
        assert schema["minItems"] == schema["maxItems"] == len(batch)
        assert schema["items"]["properties"]["concept"]["enum"] == list(batch)
    summary = RunDir(run).read_json(SCOPE_SUMMARY)
    judge = {b["benchmark"]: b["judge"] for b in summary["benchmarks"]}
    assert {k: judge["narrow"][k] for k in ("asked", "in_scope", "out_of_scope", "unreadable", "requests")} == {
        "asked": 7, "in_scope": 3, "out_of_scope": 4, "unreadable": 0, "requests": 3
    }  # fmt: skip
    assert judge["narrow"]["prompt_tokens"] > 0 and judge["narrow"]["structured"] == "used"
    assert judge["wide"]["asked"] == 0 and judge["wide"]["requests"] == 0
    assert summary["judge"]["model"] == "scripted-model" and summary["judge"]["usage"]["answered"] == 3
    assert "judge: in scope — about sums" in out and "judge: out of scope — not about sums" in out
    assert "judge: of 7 concepts asked, 3 in scope, 4 out of scope, 0 unreadable (3 requests" in out


def test_an_unreadable_answer_is_null_and_counted(run_dir: tuple[Path, Path]) -> None:
    """A batch answered in prose has no verdict for any of its concepts; a concept left out of its answer, and
    one answered "yes" instead of a JSON boolean, have none either. Nothing is guessed."""
    run, ref = run_dir

    def answer(prompt: str) -> str:
        pairs = asked(prompt)
        if any(c == 5 for c, _ in pairs):
            return "These concepts seem mostly relevant to me."
        data = json.loads(verdicts_json([p for p in pairs if p[0] != 8]))
        for item in data["verdicts"]:
            if item["concept"] == 7:
                item["in_scope"] = "yes"
        return "Here you are:\n```json\n" + json.dumps(data) + "\n```"

    script = Script(answer=answer)
    with serve(script) as url:
        assert main(["scope", str(run), "--reference-rows", str(ref), *judge_args(url, "--judge-batch", "3")]) == 0
    prose = next(
        [c for c, _ in asked(r["body"]["messages"][-1]["content"])]
        for r in chats(script)
        if 5 in [c for c, _ in asked(r["body"]["messages"][-1]["content"])]
    )
    unreadable = set(prose) | {7, 8}
    narrow = gaps_of(run).query("benchmark == 'narrow' and gap")
    for row in narrow.itertuples():
        if row.concept_id in unreadable:
            assert pd.isna(row.in_scope_judge) and pd.isna(row.judge_reason)
        else:
            assert row.in_scope_judge is (MARKER in LABELS[row.concept_id])
    judge = RunDir(run).read_json(SCOPE_SUMMARY)["benchmarks"][0]["judge"]
    assert judge["unreadable"] == len(unreadable) and judge["asked"] == 7
    assert judge["in_scope"] + judge["out_of_scope"] == 7 - len(unreadable)


def test_a_benchmark_without_description_is_refused_before_any_request(
    run_dir: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run, ref = run_dir
    script = Script(answer=by_marker)
    with serve(script) as url:
        args = ["--judge-model", "scripted-model", "--judge-endpoint", url, "--description", "narrow=sums"]
        assert main(["scope", str(run), "--reference-rows", str(ref), *args]) != 0
    assert "no description of 'wide'" in capsys.readouterr().err
    assert script.requests == []  # not even GET /models
    assert not (run / S.SCOPE_DIR).exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_endpoint_that_is_down_writes_nothing(
    run_dir: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run, ref = run_dir
    url = f"http://127.0.0.1:{_free_port()}/v1"
    assert main(["scope", str(run), "--reference-rows", str(ref), *judge_args(url)]) != 0
    assert f"scope judge endpoint {url} is unreachable" in capsys.readouterr().err
    assert not (run / S.SCOPE_DIR).exists()
    assert all(s["step"] != "scope" for s in RunDir(run).steps())


def test_an_endpoint_failing_every_request_writes_nothing(
    run_dir: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run, ref = run_dir
    script = Script(answer=by_marker, fault_for=lambda _prompt: [("status", 503)])
    with serve(script) as url:
        assert main(["scope", str(run), "--reference-rows", str(ref), *judge_args(url, "--judge-batch", "3")]) != 0
    assert "all 3 requests failed" in capsys.readouterr().err
    assert len(chats(script)) == 3
    assert not (run / S.SCOPE_DIR).exists()


def test_the_key_is_sent_and_never_written(
    run_dir: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run, ref = run_dir
    key = "sk-scope-judge-0123456789abcdef"
    monkeypatch.setenv("SCOPE_JUDGE_KEY", key)
    script = Script(answer=by_marker, key=key)
    with serve(script) as url:
        args = judge_args(url, "--judge-api-key-env", "SCOPE_JUDGE_KEY")
        assert main(["scope", str(run), "--reference-rows", str(ref), *args]) == 0
    assert {r["auth"] for r in script.requests} == {f"Bearer {key}"}
    captured = capsys.readouterr()
    assert key not in captured.out + captured.err
    for path in run.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path
    assert RunDir(run).read_json(SCOPE_SUMMARY)["judge"]["api_key_env"] == "SCOPE_JUDGE_KEY"


def test_a_server_without_structured_answers_is_asked_without(run_dir: tuple[Path, Path]) -> None:
    run, ref = run_dir
    script = Script(answer=by_marker, refuse_format=400)
    with serve(script) as url:
        assert main(["scope", str(run), "--reference-rows", str(ref), *judge_args(url)]) == 0
    narrow = gaps_of(run).query("benchmark == 'narrow' and gap")
    assert [
        v is (MARKER in LABELS[c]) for c, v in zip(narrow["concept_id"], narrow["in_scope_judge"], strict=True)
    ] == [True] * 7
    judge = RunDir(run).read_json(SCOPE_SUMMARY)["benchmarks"][0]["judge"]
    assert judge["structured"] == "refused" and judge["unreadable"] == 0


def test_the_offline_judge_runs_on_the_generation_backend(
    run_dir: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without an endpoint, --judge-model names a model of the generation backend, as `cg-ray explain`
    runs it offline (here its answers are scripted: the backend itself is tested with the explainer)."""
    from cg_ray.describe import completers

    checked: list[Any] = []
    prompts: list[str] = []

    def complete(self: completers.BackendCompleter, batch: Sequence[str], max_tokens: int) -> list[str]:
        prompts.extend(batch)
        return [by_marker(p) for p in batch]

    monkeypatch.setattr(completers, "check_model", checked.append)
    monkeypatch.setattr(completers.BackendCompleter, "complete", complete)
    run, ref = run_dir
    assert (
        main(["scope", str(run), "--reference-rows", str(ref), *judge_args(None, model="smollm2-135m-instruct")]) == 0
    )
    assert [(c.model, c.backend, c.endpoint) for c in checked] == [("smollm2-135m-instruct", "vllm", None)]
    assert len(prompts) == 2  # 7 gaps, 5 a request
    narrow = gaps_of(run).query("benchmark == 'narrow' and gap")
    assert all(v is (MARKER in LABELS[c]) for c, v in zip(narrow["concept_id"], narrow["in_scope_judge"], strict=True))
    judge = RunDir(run).read_json(SCOPE_SUMMARY)["benchmarks"][0]["judge"]
    assert judge["prompt_tokens"] is None and judge["structured"] == "off"  # the backend counts no tokens


def test_descriptions_come_from_a_file_and_flags_override_it(
    run_dir: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, ref = run_dir
    file = tmp_path / "descriptions.yaml"
    file.write_text("narrow: from the file\nwide: General knowledge.\n")
    script = Script(answer=by_marker)
    with serve(script) as url:
        args = ["--judge-model", "scripted-model", "--judge-endpoint", url, "--descriptions", str(file)]
        args += ["--description", "narrow=Arithmetic, from the flag"]
        assert main(["scope", str(run), "--reference-rows", str(ref), *args]) == 0
    assert all("Arithmetic, from the flag" in r["body"]["messages"][-1]["content"] for r in chats(script))
    assert RunDir(run).read_json(SCOPE_SUMMARY)["benchmarks"][0]["judge"]["description"] == "Arithmetic, from the flag"
    file.write_text("- narrow\n- wide\n")
    assert (
        main(["scope", str(run), "--reference-rows", str(ref), "--judge-model", "m", "--descriptions", str(file)]) != 0
    )
    assert "expected a mapping of benchmark names" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--description", "narrow=x"], "--description without a judge"),
        (["--judge-model", "m", "--description", "narrow"], "expected BENCH=TEXT"),
        (["--judge-model", "m", "--judge-api-key-env", "K"], "needs an endpoint"),
        (["--judge-model", "m", "--judge-endpoint", "http://user:pw@host/v1"], "must not carry credentials"),
        (["--judge-model", "m", "--judge-batch", "0"], "--judge-batch"),
    ],
)
def test_bad_judge_flags_are_clear_errors(
    run_dir: tuple[Path, Path], args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run, ref = run_dir
    assert main(["scope", str(run), "--reference-rows", str(ref), *args]) != 0
    err = capsys.readouterr().err
    assert message in err and "pw" not in err
    assert not (run / S.SCOPE_DIR).exists()


def test_answers_are_read_strictly() -> None:
    good = [{"concept": 1, "in_scope": True, "reason": "r1"}, {"concept": 2, "in_scope": False, "reason": ""}]
    assert parse_verdicts(json.dumps({"verdicts": good}), [1, 2]) == {1: Verdict(True, "r1"), 2: Verdict(False)}
    assert parse_verdicts("Sure: " + json.dumps(good) + " done", [1, 2]) == {1: Verdict(True, "r1"), 2: Verdict(False)}
    assert parse_verdicts("```json\n" + json.dumps({"verdicts": good[:1]}) + "\n```", [1, 2]) == {
        1: Verdict(True, "r1")
    }
    assert parse_verdicts("no JSON here", [1, 2]) == {}
    assert parse_verdicts(json.dumps({"verdicts": good}), [2]) == {2: Verdict(False)}  # not asked: ignored
    stringly = [{"concept": 1, "in_scope": "true", "reason": ""}, {"concept": "2", "in_scope": False}]
    assert parse_verdicts(json.dumps({"verdicts": stringly}), [1, 2]) == {}
    twice = [*good, {"concept": 1, "in_scope": False, "reason": "changed its mind"}]
    assert parse_verdicts(json.dumps({"verdicts": twice}), [1, 2]) == {2: Verdict(False)}
    prompt = scope_prompt(
        "b", "tests sums", "real use", [Candidate(4, 'say "hi"', ("an example",)), Candidate(9, None)]
    )
    assert asked(prompt) == [(4, "say 'hi'"), (9, "(no description: judge it by the texts)")]


def test_the_candidates_are_the_gaps_then_with_an_option_the_missing_concepts_in_use() -> None:
    # Concept 0: 20% of the reference, 0 of 40 rows here (a gap); 1: 6%, 0 of 40 (in use, missing, not a gap:
    # 40 rows cannot tell a share below half of 6%); 2: 6% here and there (in use, no gap).
    cmp = compare(np.array([0, 0, 3]), 40, np.array([200, 60, 60]), 1000)
    assert cmp.table["gap"].tolist() == [True, False, False]
    assert cmp.table["in_reference"].all() and cmp.table["missing"].tolist() == [True, True, False]
    assert candidates_of(cmp, include_missing=False) == [0]
    assert candidates_of(cmp, include_missing=True) == [0, 1]


@pytest.mark.slow
def test_smollm2_judges_offline_through_vllm(run_dir: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The real offline path: the embedded SmolLM2-135M-Instruct on vLLM (CPU) through Ray, as `cg-ray explain`
    runs it without an endpoint (about 80 s on 2 cores). A model this small rarely writes the verdicts asked
    for; what must hold is that every concept asked is counted once, readable or not, and the requests are
    the batches planned."""
    pytest.importorskip("vllm")
    import ray

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    started_here = not ray.is_initialized()
    run, ref = run_dir
    try:
        args = judge_args(None, "--judge-batch", "3", model="smollm2-135m-instruct")
        assert main(["scope", str(run), "--reference-rows", str(ref), *args]) == 0
    finally:
        if started_here and ray.is_initialized():
            ray.shutdown()
    judge = RunDir(run).read_json(SCOPE_SUMMARY)["benchmarks"][0]["judge"]
    assert judge["asked"] == 7 and judge["requests"] == 3
    assert judge["in_scope"] + judge["out_of_scope"] + judge["unreadable"] == 7
    narrow = gaps_of(run).query("benchmark == 'narrow' and gap")
    assert int(narrow["in_scope_judge"].isna().sum()) == judge["unreadable"]
