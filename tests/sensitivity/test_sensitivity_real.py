"""`cg-ray sensitivity` end to end with the real reader and the shipped SAEs, on a small real suite: 48 GSM8K
questions with GPT-3's scores, read by the default reader (`cg-ray extract`), judged (`cg-ray metrics`), then
re-read by another shipped reader through the Ray Data reader pool and compared."""

from __future__ import annotations

from pathlib import Path

import pytest

from cg_ray import cli
from cg_ray.activations.saes.shipped import SHIPPED_READERS
from cg_ray.artifacts.layout import SENSITIVITY_PAIRS, SENSITIVITY_SUMMARY, RunDir

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_module")]

OTHERS = [name for name in SHIPPED_READERS if name != "default"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    tmp = tmp_path_factory.mktemp("real")
    rows = tmp / "gsm8k.rows.parquet"
    outputs = shared_data / "model_outputs" / "gsm8k_gpt3_solutions.jsonl"
    benchmark = shared_data / "benchmarks" / "gsm8k.jsonl"
    argv = ["--input", str(outputs), "--join-benchmarks", str(benchmark), "--model", "gpt3-175b_verification"]
    assert cli.main(["extract", *argv, "--limit", "48", "--out", str(rows), "--dtype", "float32"]) == 0
    assert cli.main(["metrics", "--rows", str(rows), "--out", str(tmp / "run"), "--min-rows", "5"]) == 0
    return tmp / "run"


def test_another_shipped_reader_re_reads_the_run_and_shares_some_but_not_all_latents(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert cli.main(["sensitivity", str(run), "--reader", OTHERS[0]]) == 0
    out = capsys.readouterr().out
    assert f"default vs {OTHERS[0]}" in out and "of latents matched at >= 0.5" in out
    summary = RunDir(run).read_json(SENSITIVITY_SUMMARY)
    reader = summary["readers"][0]
    assert reader["name"] == OTHERS[0] and reader["rows"] == 48 and not reader["resumed"]
    other = RunDir(run).sensitivity_reader(OTHERS[0])
    assert other.read_summary()["labels"]["n_labels"] == 4608  # its own shipped labels name its concepts
    pair = RunDir(run).read_table(SENSITIVITY_PAIRS).to_pylist()[0]
    assert pair["method"] == "decoder cosine"  # the same layer: decoder directions are comparable
    # Seeds share some latents, far from all (44.8% of all 4,608 at cosine >= 0.5: docs/sensitivity.md)
    assert 0.2 < pair["shared_05"] < 0.8 and pair["shared_09"] < 0.2


def test_unknown_reader_and_dry_run(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert cli.main(["sensitivity", str(run), "--reader", "l99"]) == 2
    assert "unknown reader 'l99'; shipped readers: default" in capsys.readouterr().err
    assert cli.main(["sensitivity", str(run), "--reader", OTHERS[0], "--dry-run"]) == 0
    assert "48 rows" in capsys.readouterr().out
