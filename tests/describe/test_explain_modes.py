"""The failure modes explained and judged like the concepts: a faithful explainer's sentence wins by
detection and becomes the mode's description; a bad one's loses to the terms."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.cli import main
from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.explain_modes import MODE_EXPLANATIONS_FILE, explain_modes
from tests.profile.test_beyond import planted


class Scripted:
    """Explains rows with figures as "Problems that come with a diagram"; judges yes when the description
    says diagram and the row has a figure (faithful), or at random (`faithful=False`, explaining "cats")."""

    def __init__(self, faithful: bool = True) -> None:
        self.faithful = faithful
        self.n = 0

    def complete(self, prompts: Sequence[str], max_tokens: int) -> list[str]:
        out = []
        for p in prompts:
            self.n += 1
            if p.startswith("Below are text excerpts"):
                said = "Problems that come with a diagram" if self.faithful else "Rows about cats"
                out.append(f'{{"description": "{said}"}}')
                continue
            desc = re.search(r'described as: "(.*)"', p).group(1)  # type: ignore[union-attr]
            text = re.search(r'Text: "(.*)"', p, re.DOTALL).group(1)  # type: ignore[union-attr]
            fair = "diagram" in desc or desc.startswith("Rows with")  # the terms sentence is judged fairly too
            yes = "[asy]" in text if fair else self.n % 2 == 0
            out.append("Yes." if yes else "No.")
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
    summary = explain_modes(planted_run, Scripted(), ExplainConfig(backend="fake", n_detect=10))
    assert summary["modes"] == len(before) and summary["explained_by_llm"] >= 1
    first = pq.read_table(planted_run / S.FAILURE_MODES_FILE).to_pylist()[0]
    assert first["description"] == "Problems that come with a diagram" and first["description_source"] == "llm"
    assert first["detection_score"] >= 0.8
    assert first["terms"] == before[0]["terms"]  # the evidence stays
    records = pq.read_table(planted_run / MODE_EXPLANATIONS_FILE).to_pylist()
    assert {(r["rank"], r["source"]) for r in records if r["rank"] == 1} == {(1, "llm"), (1, "terms")}


def test_a_bad_explainer_loses_to_the_terms(planted_run: Path) -> None:
    before = pq.read_table(planted_run / S.FAILURE_MODES_FILE).to_pylist()[0]
    explain_modes(planted_run, Scripted(faithful=False), ExplainConfig(backend="fake", n_detect=10))
    first = pq.read_table(planted_run / S.FAILURE_MODES_FILE).to_pylist()[0]
    assert first["description"] == before["description"] and first["description_source"] == "terms"
