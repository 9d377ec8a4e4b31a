"""Bad input and interruptions of `cg-ray probe`: an unknown gap, a run without scores, an endpoint that is
down, a probe killed half-way. Each fails with an error naming the thing, leaves nothing half-written, and
a killed probe resumes without sending an answered request again."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.artifacts import layout as L
from cg_ray.cli import main as cli_main
from cg_ray.errors import CgRayError
from cg_ray.probe import work as work_module
from cg_ray.probe.config import WORK_DIR, ProbeConfig
from cg_ray.probe.gaps import read_gaps
from cg_ray.probe.plan import make_plan
from cg_ray.probe.run import run_probe
from tests.describe.endpoint_server import serve
from tests.probe.scripted_probe import probe_config, script, write_run

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_module")]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run(tmp_path_factory.mktemp("probe_errors") / "run")


def _model_prompts(requests: list[dict[str, Any]]) -> list[str]:
    """The prompts the evaluated model was asked (not the writer's pair requests nor its checks)."""
    prompts = [r["body"]["messages"][-1]["content"] for r in requests if r.get("body")]
    return [p for p in prompts if "minimal pair" not in p and not p.startswith("Answer this question")]


def test_an_unknown_gap_is_named_with_the_ids_the_run_has(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli_main(["probe", str(run_dir), "--gap", "mode:99", "--families", "only", "--model-endpoint",
                     "http://127.0.0.1:9/v1", "--model", "m", "--dry-run"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "unknown gap 'mode:99'" in err and "mode:1, mode:2" in err


def test_a_run_without_scores_is_refused_naming_its_rows_file(run_dir: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    rows = pq.read_table(run_dir / S.ROWS_FILE)
    nulls = pa.nulls(rows.num_rows, rows.schema.field("score").type)
    pq.write_table(rows.set_column(rows.schema.get_field_index("score"), "score", nulls), bare / S.ROWS_FILE)
    with pytest.raises(CgRayError, match=r"rows\.parquet: no row has a score"):
        read_gaps(bare)


def test_an_answering_endpoint_that_is_down_fails_before_any_request(run_dir: Path) -> None:
    server = script()
    published = sorted((run_dir / "probe").rglob("*")) if (run_dir / "probe").exists() else []
    with serve(server) as url:
        config = probe_config(url, 0, 10)
        config["model"]["endpoint"]["url"] = "http://127.0.0.1:9/v1"  # type: ignore[index]  # nothing listens
        plan = make_plan(run_dir, ProbeConfig.model_validate(config))
        with pytest.raises(CgRayError, match=r"generation endpoint http://127\.0\.0\.1:9/v1 cannot be reached"):
            run_probe(plan, fresh=True, say=lambda _: None)
    assert not [r for r in server.requests if r.get("body")]  # not one pair was asked for
    after = sorted((run_dir / "probe").rglob("*")) if (run_dir / "probe").exists() else []
    assert after == published  # nothing published, nothing half-written
    assert not (run_dir / WORK_DIR).exists()  # and no work directory that a corrected rerun would trip on


def test_a_killed_probe_resumes_without_asking_an_answered_item_again(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.rmtree(run_dir / "probe", ignore_errors=True)
    published_before = (run_dir / L.PROBE_RESULTS).exists()
    calls = {"n": 0}
    real_save = work_module.Work.save_answers

    def save_then_die(self: work_module.Work, answers: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 2:  # killed after the first batch of answers was saved
            raise KeyboardInterrupt
        real_save(self, answers)

    server = script()
    with serve(server) as url:
        config = ProbeConfig.model_validate(probe_config(url, 3, 20))
        monkeypatch.setattr(work_module.Work, "save_answers", save_then_die)
        with pytest.raises(KeyboardInterrupt):
            run_probe(make_plan(run_dir, config), fresh=True, say=lambda _: None)
        assert (run_dir / L.PROBE_RESULTS).exists() == published_before  # the killed attempt published nothing
        saved = work_module.Work(run_dir / WORK_DIR).answers()
        assert saved, "the first batch of answers was saved"
        killed_at = len(server.requests)
        monkeypatch.setattr(work_module.Work, "save_answers", real_save)
        summary = run_probe(make_plan(run_dir, config), say=lambda _: None)
    resumed = server.requests[killed_at:]
    asked_again = set(_model_prompts(resumed))
    items = pq.read_table(run_dir / L.PROBE_ITEMS)
    answered_first = {r["prompt"] for r in items.to_pylist() if f"{r['pair_id']}/{r['role']}" in saved}
    assert answered_first and not answered_first & asked_again
    assert not [r for r in resumed if r.get("body") and "minimal pair" in str(r["body"])]  # pairs were kept
    answered = items.filter(pc.field("dropped").is_null())
    assert answered.num_rows and pc.all(pc.is_valid(answered["score"])).as_py()
    assert summary["requests"]["model"] == answered.num_rows
    assert not (run_dir / WORK_DIR).exists()
