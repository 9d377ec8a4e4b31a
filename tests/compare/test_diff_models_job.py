"""`cg-ray diff-models` end to end with the hashing fake reader: the planted word of A's answers is found
and confirmed over repeated splits, the prompt's words never count, identical models give nothing; the Ray
Data path (the pipeline's reader actor pool) and the CLI, the YAML job and its outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from cg_ray.artifacts.contract import DiffModelsSummary, read_document
from cg_ray.artifacts.layout import ModelDiffDir
from cg_ray.compare.model_diff_config import DiffModelsConfig, load_diff_models_config
from cg_ray.compare.model_diff_job import ReadResult, diff_models
from cg_ray.compare.model_diff_outputs import HTML_FILE, JSON_FILE, TABLE_FILE, write_diff_models
from cg_ray.errors import InputError
from cg_ray.report.comparisons import model_diff_view
from cg_ray.testing.fakes import HashingReader, word_concept
from tests.report.offline import embedded, self_contained

FAKE = "cg_ray.testing.fakes:HashingReader.from_config"
FILLER = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "omicron",
    "sigma",
    "tau",
    "upsilon",
]
D_SAE = 256


def answers_file(tmp_path: Path, n: int = 240, seed: int = 0, same: bool = False) -> Path:
    """Model `big` says "certainly" in 80% of its answers, `small` in 10%; every prompt says "banana"."""
    rng = np.random.default_rng(seed)
    rows = []
    for model, rate in (("big", 0.8), ("small", 0.8 if same else 0.1)):
        for i in range(n):
            words = list(rng.choice(FILLER, size=6))
            if rng.random() < rate:
                words.append("certainly")
            rows.append({"id": f"q{i}", "model": model, "prompt": f"banana question {i}", "output": [" ".join(words)]})
    if same:  # the same answers for both models
        rows[n:] = [{**r, "model": "small"} for r in rows[:n]]
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def fake_read(texts: list[str], offsets: list[int]) -> ReadResult:
    rows = HashingReader(D_SAE).read(texts, count_from=offsets)
    return ReadResult(
        [r.concept_ids for r in rows], [r.concept_acts for r in rows], [r.n_tokens for r in rows], D_SAE, {"fake": True}
    )


def names_for(d_sae: int) -> Any:
    return lambda c: (f"word {c}", None)


def config(answers: Path, **kwargs: Any) -> DiffModelsConfig:
    return DiffModelsConfig(answers=str(answers), model_a="big", model_b="small", **kwargs)


def test_planted_word_is_found_and_confirmed_and_prompt_words_never_count(tmp_path: Path) -> None:
    result = diff_models(config(answers_file(tmp_path)), fake_read, names_for)
    certainly, banana = word_concept("certainly", D_SAE), word_concept("banana", D_SAE)
    assert result.stats.active_a[banana] == 0 and result.stats.active_b[banana] == 0  # prompt only
    top, verdict = result.confirmation.judged["a_more"][0]
    assert top == certainly and verdict.confirmed and verdict.splits_selected == 10
    doc = write_diff_models(result, tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted([TABLE_FILE, JSON_FILE, HTML_FILE])
    first = doc["hypotheses"][0]
    assert first["concept_id"] == certainly and first["confirmed"] and first["direction"] == "a_more"
    assert first["heldout"]["high"] < 0 and first["heldout"]["n_heldout"] == 120  # half of the 240 prompts
    assert first["statement"] == f"big's answers more often contain word {certainly} (than small's)"
    assert all("certainly" in e["response_a"] and "certainly" not in e["response_b"] for e in first["examples"])
    assert doc["confirmation"]["confirmed"]["a_more"] >= 1 and doc["counts"]["compared"] == 240
    table = pq.read_table(tmp_path / "out" / TABLE_FILE).to_pylist()
    row = {r["concept_id"]: r for r in table}[certainly]
    assert row["hypothesis"] == "a_more" and row["confirmed"] and row["delta_high"] < 0 and row["heldout_high"] < 0
    assert banana not in {r["concept_id"] for r in table}
    assert read_document(tmp_path / "out" / JSON_FILE, DiffModelsSummary).kind == "cg_ray.diff_models"
    # diff_models.html is the explorer's app with the folder's document embedded (drawn: test_pages_browser.py)
    view, embedded_doc = embedded(tmp_path / "out" / HTML_FILE)
    assert view == "model_diff" and embedded_doc == model_diff_view(ModelDiffDir(tmp_path / "out"))
    assert embedded_doc["hypotheses"] == doc["hypotheses"] and embedded_doc["concepts"]["concept_id"] == [
        r["concept_id"] for r in table
    ]
    self_contained(tmp_path / "out" / HTML_FILE)


def test_identical_models_give_no_hypotheses(tmp_path: Path) -> None:
    result = diff_models(config(answers_file(tmp_path, same=True)), fake_read, names_for)
    assert np.all(result.stats.delta == 0)
    counts = result.confirmation.counts()
    assert counts["confirmed"] == {"a_more": 0, "b_more": 0} and counts["formed"] == {"a_more": 0, "b_more": 0}


def test_limit_and_counted_skips_reach_the_summary(tmp_path: Path) -> None:
    path = answers_file(tmp_path, n=40)
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[3] = json.dumps({**json.loads(lines[3]), "output": [""]})  # big's q3: empty
    del lines[45]  # small's q5: missing
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = diff_models(config(path, limit=20), fake_read, names_for)
    counts = result.paired.counts
    assert counts["empty_a"] == 1 and counts["only_a"] == 1 and counts["paired"] == 20
    assert counts["beyond_limit"] == 38 - 20 and result.stats.n == 20


def test_config_needs_one_input_kind(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="either answers"):
        DiffModelsConfig(answers="x", a="y", b="z", model_a="m", model_b="n")
    with pytest.raises(ValueError, match="needs model_a and model_b"):
        DiffModelsConfig(answers="x", model_a="m")
    with pytest.raises(InputError, match="no rows for model 'nobody'"):
        diff_models(
            DiffModelsConfig(answers=str(answers_file(tmp_path)), model_a="big", model_b="nobody"), fake_read, names_for
        )


def test_two_files_are_named_by_their_stems_unless_named() -> None:
    # As the service's upload_a / upload_b: model_a / model_b, when given, only name the two inputs.
    assert DiffModelsConfig(a="runs/base.jsonl", b="runs/tuned.jsonl").names() == ("base", "tuned")
    assert DiffModelsConfig(a="runs/base.jsonl", b="runs/tuned.jsonl", model_a="v1").names() == ("v1", "tuned")
    assert DiffModelsConfig(answers="both.jsonl", model_a="big", model_b="small").names() == ("big", "small")


@pytest.mark.slow
@pytest.mark.usefixtures("ray_module")
def test_ray_job_yaml_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cg_ray.cli import main
    from cg_ray.cli.diff_models import run_diff_models

    answers = answers_file(tmp_path, n=120)
    job = tmp_path / "job.yaml"
    job.write_text(
        f"answers: {answers}\nmodel_a: big\nmodel_b: small\nout: {tmp_path / 'ray-out'}\n"
        "reader: {resources: {num_cpus: 1, min_actors: 1, max_actors: 2, batch_size: 16}}\n",
        encoding="utf-8",
    )
    cfg = load_diff_models_config(job, {"top": 5})
    doc = run_diff_models(cfg, factory=FAKE)  # through the pipeline's ReaderStage actor pool
    certainly = word_concept("certainly", D_SAE)
    assert doc["hypotheses"][0]["concept_id"] == certainly and doc["hypotheses"][0]["confirmed"]
    assert doc["reader"]["read"] == {"pool": "mean"} and doc["config"]["top"] == 5
    assert 120 * 6 < doc["counts"]["response_tokens_a"] <= 120 * 7  # 6 words + "certainly" (not the prompt)
    # What the command prints: the count confirmed under the rule, then each hypothesis with an interval.
    from cg_ray.cli.diff_models import _print

    _print(doc)
    printed = capsys.readouterr().out.splitlines()
    conf = doc["confirmation"]
    assert f"{sum(conf['confirmed'].values())} of {sum(conf['formed'].values())} confirmed (q ≤ 0.1)" in printed[1]
    assert printed[2].split()[0] == str(certainly) and " confirmed: big's answers more often contain" in printed[2]
    # The shipped checkout's job config parses, and the CLI refuses an existing output.
    repo_job = Path(__file__).resolve().parents[2] / "jobs" / "diff_models.yaml"
    assert load_diff_models_config(repo_job).model_a == "gpt-4"
    assert main(["diff-models", "--config", str(job)]) == 2
    assert "already exists" in capsys.readouterr().err
    # the judging's settings are refused naming their flag, before anything is read
    for flag, value in (("--splits", "1"), ("--fdr", "1.5")):
        fresh = tmp_path / f"bad{flag}"
        assert main(["diff-models", "--config", str(job), "--out", str(fresh), flag, value]) == 2
        assert flag in capsys.readouterr().err and not fresh.exists()
