"""The failure modes explained and judged like the concepts, through `explain_run` (the product path): the
explainer sees FAILED and PASSED rows of the same cells; a faithful explainer's sentence wins by detection on
one half of the rows, is scored on the other and becomes the mode's description; a bad one's loses to the
terms."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.artifacts.layout import RunDir
from cg_ray.cli import main
from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.explain import explain_run
from cg_ray.describe.explain_modes import MODE_EXPLANATIONS_FILE
from cg_ray.describe.run import DescribeOptions
from tests.describe.judge_script import read_judge_prompt
from tests.profile.test_findings import planted


class Scripted:
    """Explains rows with figures as "Problems that come with a diagram"; judges yes when the description
    says diagram and the row has a figure (faithful), or at random (`faithful=False`, explaining "cats")."""

    def __init__(self, faithful: bool = True) -> None:
        self.faithful = faithful
        self.n = 0
        self.mode_prompts: list[str] = []

    def complete(self, prompts: Sequence[str], max_tokens: int) -> list[str]:
        out = []
        for p in prompts:
            if p.startswith("A language model was tested"):
                self.mode_prompts.append(p)
                said = "Problems that come with a diagram" if self.faithful else "Rows about cats"
                out.append(f'{{"description": "{said}"}}')
                continue
            if p.startswith("Below are text excerpts"):
                out.append('{"description": "Some concept"}')
                continue
            judged = read_judge_prompt(p)
            assert judged is not None
            fair = "diagram" in judged.description or judged.description.startswith("Rows with")
            yes: list[bool] = []
            for text in judged.texts:
                self.n += 1
                yes.append("[asy]" in text if fair else self.n % 2 == 0)
            out.append(json.dumps(["yes" if x else "no" for x in yes]) if judged.batched else str(yes[0]))
        return out


@pytest.fixture
def planted_run(tmp_path: Path) -> Path:
    table, _ = planted(1200)
    pq.write_table(table, tmp_path / "rows.parquet")
    out = tmp_path / "run"
    assert main(["metrics", "--rows", str(tmp_path / "rows.parquet"), "--out", str(out), "--top-k", "5"]) == 0
    return out


def test_a_faithful_explainer_names_the_mode(planted_run: Path) -> None:
    before = pq.read_table(planted_run / S.FAILURE_MODES_FILE).to_pylist()
    assert sorted(before[0]["concept_ids"]) == [5, 6]
    model = Scripted()
    summary = _explain(planted_run, model)
    assert summary["modes"] == len(before) and summary["explained_by_llm"] >= 1
    # the mode prompt: the mode's failing rows and passing rows of the same cells, labelled
    first_prompt = model.mode_prompts[0]
    assert (
        "1. FAILED: " in first_prompt and "PASSED: " in first_prompt and "what the FAILED texts share" in first_prompt
    )
    first = pq.read_table(planted_run / S.FAILURE_MODES_FILE).to_pylist()[0]
    assert first["description"] == "Problems that come with a diagram" and first["description_source"] == "llm"
    assert first["detection_score"] >= 0.8  # on the held-out half
    assert first["terms"] == before[0]["terms"]  # the evidence stays
    records = pq.read_table(planted_run / MODE_EXPLANATIONS_FILE).to_pylist()
    assert {(r["rank"], r["source"]) for r in records if r["rank"] == 1} == {(1, "llm"), (1, "terms")}
    won = next(r for r in records if r["rank"] == 1 and r["source"] == "llm")
    assert won["heldout_detection_score"] == first["detection_score"] and won["detection_score"] >= 0.8


def test_a_bad_explainer_loses_to_the_terms(planted_run: Path) -> None:
    before = pq.read_table(planted_run / S.FAILURE_MODES_FILE).to_pylist()[0]
    _explain(planted_run, Scripted(faithful=False))
    first = pq.read_table(planted_run / S.FAILURE_MODES_FILE).to_pylist()[0]
    assert first["description"] == before["description"] and first["description_source"] == "terms"


def _explain(run: Path, model: Scripted) -> dict[str, Any]:
    config = ExplainConfig(backend="fake", n_detect=10, fuzz=False)
    _, themes = explain_run(RunDir(run), DescribeOptions(tokens=False, top=2), config, completer=model, scope_all=True)
    modes: dict[str, Any] = themes["summary"]["explainer"]["failure_modes"]
    return modes
