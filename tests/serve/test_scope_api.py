"""POST /v1/analyses/{id}/scope and GET …/scope: `cg-ray scope` of a published run over REST. The run has two
benchmarks, "narrow" and "wide"; three concepts fire on 15% of wide's rows and never on narrow's, so scoped
against its sibling wide, narrow's gaps are exactly those three, with their evidence. Bad requests are 422s
naming the problem with nothing written; a judge reaches only the service's endpoints, within its limits."""

from __future__ import annotations

import fcntl
import json
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from cg_ray import schemas as S
from cg_ray.artifacts.layout import SCOPE_SUMMARY, RunDir
from cg_ray.cli import main
from cg_ray.serve import scopes
from cg_ray.serve.api import create_api
from cg_ray.serve.api_types import ScopeView
from cg_ray.serve.db import Analysis, Store
from cg_ray.serve.encoding import LocalEncoder
from cg_ray.serve.keys import create_key
from cg_ray.serve.settings import ScopeSettings, ServiceSettings
from cg_ray.testing.fakes import HashingReader
from tests.conftest import rows_table
from tests.describe.endpoint_server import Script, serve
from tests.scope.synthetic import scope_rows

D = 64
LEFT_OUT = (7, 8, 9)  # each fires on 15% of wide's rows, never on narrow's
LABELS = {7: "sports scores and league tables", 8: "recipes and cooking times", 9: "clauses of legal contracts"}
ANALYSIS = "ana_scoped"
DESCRIPTIONS = {"narrow": "Grade-school arithmetic word problems.", "wide": "General knowledge of every kind."}
_PROMPT_SCHEMA = S.ROWS_SCHEMA.append(pa.field("prompt", pa.string()))
_CONCEPT = re.compile(r'^Concept (\d+): "', re.MULTILINE)


def _rows(benchmark: str, n: int, rng: np.random.Generator, left_out_share: float) -> list[dict[str, Any]]:
    return scope_rows(benchmark, n, rng, left_out_share, LEFT_OUT, D, "{benchmark} question {i}")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A published run (`cg-ray metrics` of synthetic rows, with labels), copied into each test's service."""
    root = tmp_path_factory.mktemp("scope-run")
    rng = np.random.default_rng(0)
    table = rows_table(_rows("narrow", 300, rng, 0.0) + _rows("wide", 300, rng, 0.15), schema=_PROMPT_SCHEMA)
    rows = root / "rows.parquet"
    pq.write_table(table.replace_schema_metadata({S.D_SAE_METADATA_KEY: str(D).encode()}), rows)
    labels = root / "labels.jsonl"
    labels.write_text("".join(json.dumps({"concept_id": c, "label": t}) + "\n" for c, t in LABELS.items()))
    args = ["metrics", "--rows", str(rows), "--out", str(root / "run"), "--min-rows", "5", "--labels", str(labels)]
    assert main(args) == 0
    return root / "run"


@contextmanager
def service(
    root: Path, template: Path, scope: ScopeSettings | None = None
) -> Iterator[tuple[TestClient, dict[str, str], Path]]:
    """(client, alice's key headers, the run of her succeeded analysis ANALYSIS)."""
    settings = ServiceSettings(data_dir=root / "data", scope=scope or ScopeSettings())
    store = Store(settings.db_url)
    owner, key = create_key(store, "alice")
    run = settings.analyses_dir / ANALYSIS / "run"
    shutil.copytree(template, run)
    with store.session() as s:
        s.add(Analysis(id=ANALYSIS, owner=owner, upload_ids=[], mode="precomputed", options={},
                       status="succeeded", progress=1.0, run_dir=str(run)))  # fmt: skip
    with TestClient(create_api(settings, store, LocalEncoder(HashingReader(d_sae=D)), labels=None)) as client:
        yield client, {"X-API-Key": key}, run


@pytest.fixture
def api(tmp_path: Path, template: Path) -> Iterator[tuple[TestClient, dict[str, str], Path]]:
    with service(tmp_path, template) as made:
        yield made


URL = f"/v1/analyses/{ANALYSIS}/scope"


def test_a_scope_finds_the_left_out_concepts_with_their_evidence(api) -> None:
    client, headers, run = api
    assert client.get(URL, headers=headers).status_code == 404
    made = client.post(URL, headers=headers, json={"benchmarks": ["narrow"], "references": ["wide"]})
    assert made.status_code == 200, made.text
    view = made.json()
    assert view["decision"].startswith("in use when")
    [narrow] = view["benchmarks"]
    assert (narrow["benchmark"], narrow["reference"], narrow["rows"], narrow["reference_rows"]) == (
        "narrow", "wide", 300, 300,
    )  # fmt: skip
    assert narrow["gaps"] == narrow["gaps_missing"] == 3 and narrow["rule"]["ratio"] == 0.5
    shown = {g["concept_id"]: g for g in narrow["gaps_shown"]}
    assert sorted(shown) == list(LEFT_OUT)
    for c, g in shown.items():
        assert g["label"] == LABELS[c] and g["missing"] and g["q_value"] <= 0.1
        assert " of the reference vs 0 of 300 rows here (< 1.0%, 95%); ×0.00 [0.00, " in g["evidence"]
        assert g["example"].startswith("wide question ") and g["judge"] is None
    assert view["suite"]["benchmarks"] == ["narrow", "wide"] and view["suite"]["d_sae"] == D
    assert str(run) not in made.text  # no server path
    assert client.get(URL, headers=headers).json() == view
    doc = client.get(f"/v1/analyses/{ANALYSIS}/view", headers=headers).json()["scope"]  # the explorer's
    assert ScopeView.model_validate(doc).model_dump(mode="json") == view
    assert RunDir(run).steps()[-1]["step"] == "scope"


def test_a_second_scope_keeps_the_first_pair(api) -> None:
    client, headers, _ = api
    first = client.post(URL, headers=headers, json={"benchmarks": ["narrow"], "references": ["wide"]})
    assert first.status_code == 200, first.text
    second = client.post(URL, headers=headers, json={"benchmarks": ["wide"], "references": ["narrow"], "ratio": 0.4})
    assert second.status_code == 200, second.text
    pairs = {(b["benchmark"], b["reference"]): b for b in second.json()["benchmarks"]}
    assert sorted(pairs) == [("narrow", "wide"), ("wide", "narrow")]
    assert pairs[("narrow", "wide")] == first.json()["benchmarks"][0]  # kept as it was
    assert pairs[("wide", "narrow")]["rule"]["ratio"] == 0.4 and pairs[("wide", "narrow")]["gaps"] == 0
    assert client.get(URL, headers=headers).json() == second.json()


@pytest.mark.parametrize(
    ("body", "field", "said"),
    [
        ({"benchmarks": ["nope"], "references": ["wide"]}, "benchmarks", "no benchmark 'nope' in the run; it holds"),
        ({"references": ["nope"]}, "references", "no benchmark 'nope' in the run"),
        ({"benchmarks": ["narrow"]}, "references", "no reference: name sibling benchmarks or rows of real use"),
        ({"benchmarks": ["wide"], "references": ["wide"]}, "references", "named as both a benchmark to scope"),
        ({"references": ["narrow", "wide"]}, "references", "no benchmark left to scope"),
        ({"references": ["wide"], "ratio": 2}, "ratio", "ratio: Input should be less than or equal to 1"),
        ({"references": ["wide"], "fdr": 0}, "fdr", "fdr: Input should be greater than 0"),
        ({"references": "wide"}, "references", "references: Input should be a valid list"),
        ({"references": ["wide"], "reference_rows": ["/srv/traffic.parquet"]}, "reference_rows",
         "rows files are not accepted over REST"),
        ({"references": ["wide"], "top": 3}, "top", "top: Extra inputs are not permitted"),
        ({"references": ["wide"], "judge": {"model": "m"}}, "judge.endpoint", "judge.endpoint: Field required"),
    ],
)  # fmt: skip
def test_a_bad_request_is_a_422_naming_the_problem_and_writes_nothing(api, body, field, said) -> None:
    client, headers, run = api
    before = sorted(p.name for p in run.iterdir())
    answer = client.post(URL, headers=headers, json=body)
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert detail["field"] == field and said in detail["error"], detail
    assert "--" not in detail["error"] and str(run.parent) not in answer.text  # no CLI flag, no server folder
    assert sorted(p.name for p in run.iterdir()) == before and not (run / S.SCOPE_DIR).exists()


def test_scope_routes_answer_only_the_analysis_owner(api) -> None:
    client, headers, run = api
    assert client.post(URL, headers=headers, json={"benchmarks": ["narrow"], "references": ["wide"]}).status_code == 200
    store: Store = client.app.state.service.store  # type: ignore[attr-defined]
    mallory = {"X-API-Key": create_key(store, "mallory")[1]}
    assert client.get(URL, headers=mallory).status_code == 404
    summary = RunDir(run).read_json(SCOPE_SUMMARY)
    refused = client.post(URL, headers=mallory, json={"benchmarks": ["wide"], "references": ["narrow"]})
    assert refused.status_code == 404 and repr(ANALYSIS) in refused.json()["detail"]["error"]
    assert RunDir(run).read_json(SCOPE_SUMMARY) == summary


def test_one_scope_of_an_analysis_at_a_time(api) -> None:
    """A scope merges with the run's earlier ones, so a second one meanwhile is a 409 (stood in for by holding
    the analysis' scope lock), not a lost pair."""
    client, headers, run = api
    with open(run.parent / scopes.LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        busy = client.post(URL, headers=headers, json={"references": ["wide"]})
    assert busy.status_code == 409 and "a scope of this analysis is running" in busy.json()["detail"]["error"]
    assert not (run / S.SCOPE_DIR).exists()
    assert client.post(URL, headers=headers, json={"references": ["wide"]}).status_code == 200


def _in_scope(prompt: str) -> str:
    concepts = [int(c) for c in _CONCEPT.findall(prompt)]
    return json.dumps({"verdicts": [{"concept": c, "in_scope": c != 9, "reason": f"said of {c}"} for c in concepts]})


def _judge(url: str, **extra: Any) -> dict[str, Any]:
    return {"model": "scripted-model", "endpoint": url, "descriptions": DESCRIPTIONS, **extra}


def test_a_judge_the_service_does_not_allow_is_refused_before_any_request(tmp_path: Path, template: Path) -> None:
    script = Script(answer=_in_scope)
    with serve(script) as url:
        with service(tmp_path / "none", template) as (client, headers, run):  # default: no judge endpoint
            answer = client.post(URL, headers=headers, json={"references": ["wide"], "judge": _judge(url)})
            assert answer.status_code == 422 and answer.json()["detail"]["field"] == "judge.endpoint"
            assert "none: this service allows no scope judge" in answer.json()["detail"]["error"]
            assert not (run / S.SCOPE_DIR).exists()
        other = ScopeSettings(endpoints=["http://127.0.0.1:9/v1"], key_envs=["SCOPE_KEY"])
        with service(tmp_path / "other", template, other) as (client, headers, run):
            answer = client.post(URL, headers=headers, json={"references": ["wide"], "judge": _judge(url)})
            assert (
                answer.status_code == 422
                and "not an endpoint this service allows (http://127.0.0.1:9/v1)" in (answer.json()["detail"]["error"])
            )
            near = _judge("http://127.0.0.1:9/v1", api_key_env="HOME")
            answer = client.post(URL, headers=headers, json={"references": ["wide"], "judge": near})
            assert answer.status_code == 422 and answer.json()["detail"]["field"] == "judge.api_key_env"
            pasted = _judge("http://127.0.0.1:9/v1", api_key="sk-secret-1")
            answer = client.post(URL, headers=headers, json={"references": ["wide"], "judge": pasted})
            assert answer.status_code == 422 and answer.json()["detail"]["field"] == "judge.api_key"
            assert "sk-secret-1" not in answer.text
            assert not (run / S.SCOPE_DIR).exists()
    assert script.requests == []  # nothing was sent


def test_an_allowed_judge_says_of_each_gap_within_the_service_limits(tmp_path: Path, template: Path) -> None:
    script = Script(answer=_in_scope)
    with serve(script) as url:
        limits = ScopeSettings(endpoints=[url], max_judge_requests=2, retries=0)
        with service(tmp_path, template, limits) as (client, headers, run):
            body = {"benchmarks": ["narrow"], "references": ["wide"]}
            undescribed = client.post(URL, headers=headers, json=body | {"judge": _judge(url, descriptions={})})
            assert undescribed.status_code == 422, undescribed.text
            assert undescribed.json()["detail"]["field"] == "judge.descriptions"
            assert "no description of 'narrow'" in undescribed.json()["detail"]["error"]
            over = client.post(URL, headers=headers, json=body | {"judge": _judge(url, batch=1)})  # 3 requests
            assert over.status_code == 422 and over.json()["detail"]["field"] == "judge.batch"
            assert "over this service's 2 per scope" in over.json()["detail"]["error"]
            assert not [r for r in script.requests if r["path"].endswith("/chat/completions")]
            assert not (run / S.SCOPE_DIR).exists()
            made = client.post(URL, headers=headers, json=body | {"judge": _judge(url, batch=2)})  # 2 requests
            assert made.status_code == 200, made.text
    chats = [r for r in script.requests if r["path"].endswith("/chat/completions")]
    assert len(chats) == 2
    [narrow] = made.json()["benchmarks"]
    judge = narrow["judge"]
    assert (judge["asked"], judge["in_scope"], judge["out_of_scope"], judge["unreadable"], judge["requests"]) == (
        3, 2, 1, 0, 2,
    )  # fmt: skip
    assert judge["description"] == DESCRIPTIONS["narrow"] and judge["prompt_tokens"] > 0
    said = {g["concept_id"]: g["judge"] for g in narrow["gaps_shown"]}
    assert said == {7: "in scope: said of 7", 8: "in scope: said of 8", 9: "out of scope: said of 9"}


def test_an_allowed_judge_endpoint_that_is_down_is_a_502_that_writes_nothing(tmp_path: Path, template: Path) -> None:
    down = "http://127.0.0.1:9/v1"  # allowed, but nothing listens there
    with service(tmp_path, template, ScopeSettings(endpoints=[down], retries=0)) as (client, headers, run):
        body = {"benchmarks": ["narrow"], "references": ["wide"], "judge": _judge(down)}
        answer = client.post(URL, headers=headers, json=body)
        assert answer.status_code == 502, answer.text
        assert answer.json()["detail"]["error"].startswith("the scope judge: ") and "127.0.0.1:9" in answer.text
        assert not (run / S.SCOPE_DIR).exists()
