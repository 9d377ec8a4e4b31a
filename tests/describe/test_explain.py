"""`cg-ray explain` with a scripted fake completer: prompts, parsing, detection scoring, the choice."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cg_ray.artifacts.layout import RunDir
from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.explain import explain_run, held_out_rows
from cg_ray.describe.judging import halves
from cg_ray.describe.outputs import read_descriptions
from cg_ray.describe.prompts import (
    balanced_accuracy,
    batch_prompt,
    detect_prompt,
    explain_prompt,
    parse_answers,
    parse_explanation,
    parse_judgement,
)
from cg_ray.describe.run import DescribeOptions, analyse
from cg_ray.errors import ConfigError
from tests.describe.judge_script import answer, read_judge_prompt


def geometry(kind: str, desc: str, text: str) -> bool:
    return "geometry" in desc.lower() and "geometry" in text


class ScriptedModel:
    """Explains every concept as geometry; judges 'yes' when the text mentions geometry (and the description
    does); answers one in five batches with prose (then each example alone, correctly)."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.batches = 0

    def complete(self, prompts: Sequence[str], max_tokens: int) -> list[str]:
        self.prompts += prompts
        out = []
        for p in prompts:
            if p.startswith(("Below are text excerpts", "A language model was tested")):
                out.append('Sure! {"description": "Rows about geometry"}')
                continue
            if p.startswith("These descriptions belong"):
                out.append('{"name": "Planted group"}' if "algebra" in p else "no idea")
                continue
            judged = read_judge_prompt(p)
            assert judged is not None
            if judged.batched:
                self.batches += 1
                if self.batches % 5 == 0:
                    out.append("Each of these could be about geometry.")
                    continue
            out.append(answer(p, geometry))
        return out


def test_prompts_and_parsing() -> None:
    p = explain_prompt(["a [[triangle]] here", "the [[angle]]"])
    assert "1. a [[triangle]] here\n2. the [[angle]]" in p and '{"description": "..."}' in p
    assert 'described as: "Angles"' in detect_prompt("Angles", 'say "hi"') and "say 'hi'" in detect_prompt(
        "A", 'say "hi"'
    )
    assert parse_explanation('ok {"description": "Triangles and angles"}') == ("Triangles and angles", "json")
    assert parse_explanation('Description: "Triangle words"\nmore') == ("Triangle words", "text")
    assert parse_explanation("  ") == (None, "failed")
    assert parse_judgement('{"answer": "Yes"}') is True and parse_judgement("no.") is False
    assert parse_judgement("I think so") is None
    assert parse_judgement('```json\n{"answer": "no"}\n```') is False and parse_judgement("The answer: Yes.") is True
    batch = batch_prompt("detection", "Angles", ["a\n b", 'say "hi"'])
    assert 'Example 1: "a b"\nExample 2: "say \'hi\'"' in batch and "JSON list of 2 answers" in batch
    assert parse_answers('Sure: ["yes", "No"]', 2) == [True, False] and parse_answers("[1, 0, true]", 3) == [
        True,
        False,
        True,
    ]
    assert parse_answers('["yes"]', 2) is None and parse_answers("yes, no", 2) is None
    assert parse_answers('["yes", "maybe"]', 2) is None


def test_balanced_accuracy_counts_unparsed_as_wrong() -> None:
    assert balanced_accuracy([True, True, None, False], [False, False]) == pytest.approx((0.5 + 1.0) / 2)
    assert balanced_accuracy([], [False]) is None


def test_explain_scores_every_candidate_and_describe_uses_the_best(make_run: Callable[..., Path]) -> None:
    run = make_run(labels={0: "',' | '.'", 6: "'books' | 'house'"})
    options = DescribeOptions(concepts=(0, 6), tokens=False)
    model = ScriptedModel()
    config = ExplainConfig(backend="fake", n_detect=10)
    explain_run(RunDir(run), options, config, completer=model)
    table = pq.read_table(run / "explanations.parquet").to_pylist()
    by = {(r["concept_id"], r["source"]): r for r in table}
    assert set(by) == {
        (0, "llm"),
        (0, "label"),
        (0, "enrichment"),
        (6, "llm"),
        (6, "label"),
        (0, "terms"),
        (6, "terms"),
    }
    # the expected scores, recomputed from the same held-out rows (halves) and the scripted judge
    a = analyse(RunDir(run), options)
    pos, neg = held_out_rows(a, 0, 10, 0)
    (sel_p, rep_p), (sel_n, rep_n) = halves(pos, (0, 0, 0, 1)), halves(neg, (0, 0, 0, 2))
    llm = by[(0, "llm")]
    assert llm["parse"] == "json" and llm["description"] == "Rows about geometry"
    assert llm["raw_explanation"].startswith("Sure!") and by[(0, "label")]["raw_explanation"] is None

    def score(p: list[int], n: list[int]) -> float | None:
        said = [geometry("detection", "Rows about geometry", a.text_of(r)[:400]) for r in p + n]
        return balanced_accuracy(said[: len(p)], said[len(p) :])

    assert llm["detection_score"] == pytest.approx(score(sel_p, sel_n)) and llm["detection_score"] > 0.6
    assert llm["heldout_detection_score"] == pytest.approx(score(rep_p, rep_n))
    assert llm["n_positive"] == len(pos) == 10 and llm["n_negative"] == len(neg) == 10  # both halves
    assert llm["n_unparsed"] == 0  # the prose answers were judged again one example at a time
    assert by[(0, "label")]["heldout_detection_score"] is None  # only the winner is judged twice
    # the punctuation label cannot detect geometry: it never says yes → TPR 0
    assert by[(0, "label")]["detection_score"] <= 0.5
    rows = {r["concept_id"]: r for r in read_descriptions(RunDir(run)) or []}
    assert rows[0]["source"] == "llm" and rows[0]["description"].startswith("Rows about geometry")
    assert rows[0]["detection_score"] == llm["heldout_detection_score"]  # the held-out half's, not the best
    # concept 6 fires at random: "geometry" does not detect it, the label stays
    assert rows[6]["source"] == "label"
    # deterministic: the same seed gives the same prompts
    again = ScriptedModel()
    explain_run(RunDir(run), options, config, completer=again)
    assert again.prompts == model.prompts


def test_themes_are_named_by_the_model_when_asked(make_run: Callable[..., Path]) -> None:
    import json

    run = make_run()
    options = DescribeOptions(concepts=(1, 2, 3, 4, 5), tokens=False)
    explain_run(RunDir(run), options, ExplainConfig(backend="fake", name_themes=True), completer=ScriptedModel())
    themes = {
        tuple(sorted(c["concept_id"] for c in t["concepts"])): t
        for t in json.loads((run / "themes.json").read_text())["themes"]
    }
    assert themes[(1, 2, 3)]["name"] == "Planted group" and themes[(1, 2, 3)]["named_by"] == "llm:smollm2-135m-instruct"
    assert themes[(4, 5)]["named_by"] == "enrichment/descriptions"  # an invalid answer keeps the old name


def test_an_explainer_that_cannot_load_fails_before_any_work(
    make_run: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    run = make_run()
    config = ExplainConfig(model=str(tmp_path / "no-such-model"), backend="vllm")
    with pytest.raises(ConfigError, match=r"explainer model .*no-such-model.* cannot be loaded"):
        explain_run(RunDir(run), DescribeOptions(concepts=(0,), tokens=False), config)
    assert not (run / "explanations.parquet").exists() and not (run / "descriptions.parquet").exists()
    with pytest.raises(ConfigError, match="generation backend"):
        explain_run(RunDir(run), DescribeOptions(concepts=(0,), tokens=False), ExplainConfig(backend="vlm"))
