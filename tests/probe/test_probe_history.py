"""A run keeps every attempt of every gap it has probed (cg_ray.probe.history): each probe is judged once, on
its own fresh pairs, at its share of fdr; earlier verdicts are final; a gap stands confirmed once any probe
confirmed it, else at its latest verdict; `replace` forgets the earlier attempts but not their numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cg_ray.artifacts import layout as L
from cg_ray.artifacts.layout import RunDir
from cg_ray.cli.probe import earlier_text
from cg_ray.probe.config import ProbeConfig
from cg_ray.probe.history import numbered_id, read_earlier
from cg_ray.probe.ledger import LedgerFdrError
from cg_ray.probe.plan import make_plan
from cg_ray.probe.power import share
from cg_ray.probe.run import run_probe
from cg_ray.report.probe import probe_view
from cg_ray.schemas.probe import PROBE_ITEMS_SCHEMA
from tests.describe.endpoint_server import serve
from tests.probe.scripted_probe import probe_config, script, write_run

VERDICT_KEYS = ("n_pairs", "difference", "p_value", "q_value", "ci_low", "ci_high", "verdict", "method")


def probe(run: Path, url: str, seed: int, gap: str, *, replace: bool = False) -> dict[str, Any]:
    config = ProbeConfig.model_validate(probe_config(url, seed, 60) | {"gaps": [gap]})
    return run_probe(make_plan(run, config), fresh=True, replace=replace, say=lambda _: None)


@pytest.mark.slow
@pytest.mark.usefixtures("ray_module")
def test_each_probe_is_judged_once_at_its_share_and_every_attempt_stays(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    with serve(script()) as url:
        first = probe(run, url, 0, "mode:1")
        probe(run, url, 1, "mode:2")
        third = probe(run, url, 2, "mode:1")  # mode:1 again: a new attempt beside the first
        results = pq.read_table(run / L.PROBE_RESULTS).to_pylist()
        items = pq.read_table(run / L.PROBE_ITEMS).to_pylist()
        exported = [json.loads(line) for line in (run / L.PROBE_EXPORT / "items.jsonl").read_text().splitlines()]
        plan = make_plan(run, ProbeConfig.model_validate(probe_config(url, 3, 60) | {"gaps": ["mode:2"]}))
        dry, dry_replaced = earlier_text(plan, replace=False), earlier_text(plan, replace=True)
        replaced = probe(run, url, 3, "mode:2", replace=True)

    # One row per gap per probe, newest first, each with its probe's number and share.
    assert [(r["gap_id"], r["probe"]) for r in results] == [("mode:1", 3), ("mode:2", 2), ("mode:1", 1)]
    assert [r["fdr_share"] for r in results] == pytest.approx([share(3), share(2), share(1)])
    assert [p["share"] for p in third["probes"]] == pytest.approx([share(1), share(2), share(3)])
    # Probe 1's verdict is final: its row is as probe 1 published it, not judged again.
    for key in VERDICT_KEYS:
        assert results[2][key] == pytest.approx(first["gaps"][0][key]), key
    # Each probe is its own family of one gap: q = p / share (capped at 1); the planted gap is confirmed
    # in both of its probes, so it stands confirmed.
    for r in results:
        assert r["q_value"] == pytest.approx(min(1.0, r["p_value"] / r["fdr_share"]))
    assert results[0]["verdict"] == results[2]["verdict"] == "confirmed"
    assert {r["gap_id"]: r["standing"] for r in results} == {"mode:1": "confirmed", "mode:2": results[1]["verdict"]}
    # Every attempt's items stay, apart: probe 3's pair ids carry its number, and the export holds all of them.
    assert {(r["gap_id"], r["probe"]) for r in items} == {("mode:1", 1), ("mode:2", 2), ("mode:1", 3)}
    ids = [r["pair_id"] for r in items if r["role"] == "target"]
    assert len(ids) == len(set(ids)) and all(
        r["pair_id"].startswith("mode:1/probe-3/") for r in items if r["probe"] == 3
    )
    answered = {r["pair_id"] for r in items if r["dropped"] is None}
    assert {e["pair_id"] for e in exported} == answered
    assert dry.startswith(
        "  probe 4: Benjamini–Hochberg at level 0.000833 (share 0.0167 of fdr 0.05) over the 1 gap above"
    )
    assert "mode:1 (confirmed, probe 1)" in dry and "earlier probes' gaps" not in dry_replaced
    # replace: the earlier attempts are forgotten, their numbers are not (no share bought back).
    assert [(g["gap_id"], g["probe"]) for g in replaced["gaps"]] == [("mode:2", 4)]
    assert replaced["gaps"][0]["fdr_share"] == pytest.approx(share(4))
    assert [p.get("forgotten", False) for p in replaced["probes"]] == [True, True, True, False]
    assert set(pq.read_table(run / L.PROBE_ITEMS, columns=["gap_id"]).column("gap_id").to_pylist()) == {"mode:2"}


@pytest.mark.slow
@pytest.mark.usefixtures("ray_module")
def test_an_overwritten_run_goes_on_at_its_gaps_next_probe_number(tmp_path: Path, probe_ledger: Path) -> None:
    """Probe mode:1, then make the run again into its folder (`cg-ray metrics --overwrite`: probe/ is gone),
    then probe mode:1 again: the second probe is number 2 at share 0.1 (not probe 1 at 0.8 again), its summary
    names the ledger, and a third with another --fdr is refused before anything is written."""
    run = write_run(tmp_path / "run")
    with serve(script()) as url:
        probe(run, url, 0, "mode:1")
        write_run(run)
        assert not (run / L.PROBE_RESULTS).exists()
        second = probe(run, url, 1, "mode:1")
        config = ProbeConfig.model_validate(probe_config(url, 2, 60) | {"gaps": ["mode:1"], "fdr": 0.1})
        with pytest.raises(LedgerFdrError, match=r"differs from the fdr 0\.05"):
            run_probe(make_plan(run, config), fresh=True, say=lambda _: None)
    assert [(g["gap_id"], g["probe"], g["fdr_share"]) for g in second["gaps"]] == [("mode:1", 2, share(2))]
    (entry,) = second["probes"]
    assert entry["probe"] == 2 and entry["ledger"] == str(probe_ledger) and len(entry["keys"]) == 1
    assert not (run / "probe.work").exists()


def _row(gap_id: str, verdict: str, **more: Any) -> dict[str, Any]:
    figures = {"n_pairs": 30, "target_mean": 0.5, "control_mean": 0.6, "difference": -0.1, "ci_low": -0.3,
               "ci_high": 0.1, "p_value": 0.3, "q_value": 0.4, "pairs_needed": None, "note": "",
               "pairs_written": 40, "run_effect": -0.2, "run_rows": 50, "run_confirmed": False}  # fmt: skip
    return {"gap_id": gap_id, "verdict": verdict, **figures, **more}


def _summary(run: Path, fields: dict[str, Any]) -> None:
    base = {"run": str(run), "config": {}, "gaps": [], "requests": {}, "seconds": {}, "decision": "", "exports": []}
    (run / L.PROBE_SUMMARY).write_text(json.dumps(base | fields))


def test_results_written_before_probes_were_numbered_are_probe_ones(tmp_path: Path) -> None:
    """An old results.parquet (no probe column, one row per gap) and items.parquet (no probe column) read as
    probe 1's final attempts; the next probe is number 2."""
    run = RunDir(tmp_path)
    (tmp_path / "probe").mkdir()
    pq.write_table(pa.Table.from_pylist([_row("mode:1", "unsettled")]), tmp_path / L.PROBE_RESULTS)
    items = [{"gap_id": "mode:1", "pair_id": "mode:1/0", "role": role, "request_id": "r0", "seed": 0, "prompt": role,
              "generator": "g", "score": score} for role, score in (("target", 0.0), ("control", 1.0))]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(items, schema=PROBE_ITEMS_SCHEMA), tmp_path / L.PROBE_ITEMS)
    _summary(tmp_path, {"config": {"seed": 5, "pairs": 40}})
    earlier = read_earlier(run)
    assert [(r.gap_id, r.probe, r.probe_seed) for r in earlier.results] == [("mode:1", 1, 5)]
    assert earlier.items is not None and earlier.items.column("probe").to_pylist() == [1, 1]
    assert earlier.next_probe() == 2
    assert read_earlier(run, replace=True).next_probe() == 2  # forgetting keeps the count
    view = probe_view(run)
    assert view is not None and [g["gap_id"] for g in view["gaps"]] == ["mode:1"]


def test_the_report_shows_each_gap_once_at_its_standing_verdict_with_its_other_attempts(tmp_path: Path) -> None:
    """mode:1 confirmed by probe 1 and unsettled in probe 3 stands confirmed (probe 1's figures, no next step);
    mode:2, unsettled in probe 2, stands unsettled with the command that settles it."""
    (tmp_path / "probe").mkdir()
    rows = [
        _row("mode:1", "unsettled", probe=3, probe_seed=2, probed_at="2026-12-03T10:00:00+00:00", pairs_needed=300),
        _row("mode:2", "unsettled", probe=2, probe_seed=1, probed_at="2026-12-02T10:00:00+00:00", pairs_needed=200,
             note="about 200 new pairs in the next probe (probe 4) …"),
        _row("mode:1", "confirmed", probe=1, probe_seed=0, probed_at="2026-12-01T10:00:00+00:00", q_value=0.01),
    ]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / L.PROBE_RESULTS)
    probes = [{"probe": k, "pairs": 40} for k in (1, 2, 3)]
    _summary(tmp_path, {"config": {"seed": 2, "pairs": 40, "fdr": 0.05}, "probes": probes})
    view = probe_view(RunDir(tmp_path))
    assert view is not None
    one, two = view["gaps"]
    assert (one["gap_id"], one["verdict"], one["probe"], one["next_step"]) == ("mode:1", "confirmed", 1, None)
    assert one["checks"].startswith("probe 1 of 3 (2026-12-01): 30 pairs kept of 40 written")
    assert one["checks"].endswith("; other attempts: probe 3 (2026-12-03): unsettled, target 0.500 vs control 0.600: "
                                  "-0.100 [-0.300, +0.100], q=0.400, 30 pairs")  # fmt: skip
    assert [a.split(":")[0] for a in one["attempts"]] == ["probe 1 (2026-12-01)", "probe 3 (2026-12-03)"]
    assert (two["gap_id"], two["verdict"]) == ("mode:2", "unsettled")
    assert two["next_step"]["command"] == "cg-ray probe " + tmp_path.name + " --gap mode:2 --pairs 267 --seed 2"


def test_pair_ids_of_later_probes_carry_their_number() -> None:
    assert numbered_id("mode:1/7", "mode:1", 1) == "mode:1/7"
    assert numbered_id("mode:1/7", "mode:1", 3) == "mode:1/probe-3/7"
    assert numbered_id("odd", "mode:1", 2) == "mode:1/probe-2/odd"
