"""A run keeps every gap it has probed (cg_ray.probe.history): probing one gap after another keeps the earlier
gaps' pairs and judges all of them as one family; `replace` forgets them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from statsmodels.stats.multitest import multipletests

from cg_ray.artifacts import layout as L
from cg_ray.cli.probe import kept_text
from cg_ray.probe.config import ProbeConfig
from cg_ray.probe.confirm import GapConfirmation
from cg_ray.probe.history import Earlier, changes_text, rejudged
from cg_ray.probe.plan import make_plan
from cg_ray.probe.run import run_probe
from tests.describe.endpoint_server import serve
from tests.probe.scripted_probe import probe_config, script, write_run


def probe(run: Path, url: str, seed: int, gap: str, *, replace: bool = False) -> dict[str, Any]:
    config = ProbeConfig.model_validate(probe_config(url, seed, 60) | {"gaps": [gap]})
    return run_probe(make_plan(run, config), fresh=True, replace=replace, say=lambda _: None)


@pytest.mark.slow
@pytest.mark.usefixtures("ray_module")
def test_probing_gaps_one_at_a_time_keeps_each_and_judges_them_together(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    with serve(script()) as url:
        first = probe(run, url, 0, "mode:1")
        second = probe(run, url, 1, "mode:2")
        results = {r["gap_id"]: r for r in pq.read_table(run / L.PROBE_RESULTS).to_pylist()}
        items = pq.read_table(run / L.PROBE_ITEMS).to_pylist()
        exported = (run / L.PROBE_EXPORT / "items.jsonl").read_text().splitlines()
        # --dry-run says which earlier gaps the next probe keeps (none with --replace).
        plan = make_plan(run, ProbeConfig.model_validate(probe_config(url, 2, 60) | {"gaps": ["mode:2"]}))
        dry_kept, dry_replaced = kept_text(plan, replace=False), kept_text(plan, replace=True)
        replaced = probe(run, url, 2, "mode:2", replace=True)

    # The second probe named only mode:2; mode:1 is still there, from probe 1 with its own seed, newest first.
    assert [g["gap_id"] for g in second["gaps"]] == ["mode:2", "mode:1"]
    assert (results["mode:1"]["probe"], results["mode:1"]["probe_seed"]) == (1, 0)
    assert (results["mode:2"]["probe"], results["mode:2"]["probe_seed"]) == (2, 1)
    assert [p["gaps"] for p in second["probes"]] == [["mode:1"], ["mode:2"]]
    # mode:1 was judged again on the pairs probe 1 answered, rebuilt from items.parquet: the same test...
    before = first["gaps"][0]
    for key in ("n_pairs", "n_clusters", "n_dropped", "difference", "p_value", "ci_low", "ci_high", "method"):
        assert results["mode:1"][key] == pytest.approx(before[key]), key
    # ...and both q-values are Benjamini–Hochberg over the two gaps, not each alone.
    p_values = [results[g]["p_value"] for g in ("mode:1", "mode:2")]
    expected = multipletests(p_values, alpha=0.05, method="fdr_bh")[1]
    assert [results[g]["q_value"] for g in ("mode:1", "mode:2")] == pytest.approx(list(expected))
    assert before["q_value"] == pytest.approx(before["p_value"])  # alone, q was p
    # Every gap's items stay, numbered by the probe that wrote them, and the export holds both gaps' pairs.
    assert {(r["gap_id"], r["probe"]) for r in items} == {("mode:1", 1), ("mode:2", 2)}
    answered = {r["pair_id"] for r in items if r["dropped"] is None}
    assert {json.loads(line)["pair_id"] for line in exported} == answered
    assert {p.split("/")[0] for p in answered} == {"mode:1", "mode:2"}
    assert dry_kept.endswith(f"--replace forgets them): mode:1 ({results['mode:1']['verdict']}, probe 1)")
    assert dry_replaced == ""
    # replace: the earlier probes are forgotten.
    assert [g["gap_id"] for g in replaced["gaps"]] == ["mode:2"]
    assert [p["probe"] for p in replaced["probes"]] == [1]
    assert set(pq.read_table(run / L.PROBE_ITEMS, columns=["gap_id"]).column("gap_id").to_pylist()) == {"mode:2"}


def _verdict(gap_id: str, p: float, q: float, verdict: str) -> GapConfirmation:
    return GapConfirmation(gap_id=gap_id, n_pairs=30, n_clusters=30, n_dropped=0, target_mean=0.4, control_mean=0.6,
                           difference=-0.2, ci_low=-0.35, ci_high=-0.05, p_value=p, q_value=q, verdict=verdict,
                           run_effect=-0.2, mde=0.15, pairs_needed=None, method="mcnemar_exact", note="")  # fmt: skip


def test_a_kept_gap_whose_verdict_the_joint_judgement_changes_is_named() -> None:
    earlier = Earlier(results=[{"gap_id": "mode:1", "probe": 1, "verdict": "confirmed", "q_value": 0.04}])
    joint = [_verdict("mode:2", 0.6, 0.6, "unsettled"), _verdict("mode:1", 0.04, 0.08, "unsettled")]
    carried = rejudged(earlier, joint)
    assert carried[0]["q_value"] == 0.08 and carried[0]["verdict_before"] == "confirmed"
    assert changes_text(carried, 2) == [
        "mode:1 (probe 1): confirmed → unsettled with q over the 2 gaps this run has tested"
    ]
    same = rejudged(earlier, [_verdict("mode:1", 0.01, 0.02, "confirmed")])
    assert changes_text(same, 2) == []
