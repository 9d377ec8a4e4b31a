"""`cg-ray probe` end to end against a scripted OpenAI-compatible server (tests/probe/scripted_probe.py) as
writer, checker and evaluated model, with the hashing reader: what issue 40 asks users can rely on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cg_ray.artifacts import layout as L
from cg_ray.probe.config import ProbeConfig
from cg_ray.probe.plan import make_plan
from cg_ray.probe.run import run_probe
from tests.describe.endpoint_server import serve
from tests.probe.scripted_probe import probe_config, script, write_run

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_module")]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run(tmp_path_factory.mktemp("probe") / "run")


def probe(run: Path, url: str, seed: int, pairs: int, **extra: Any) -> dict[str, Any]:
    config = ProbeConfig.model_validate(probe_config(url, seed, pairs) | extra)
    return run_probe(make_plan(run, config), fresh=True, say=lambda _: None)


def test_a_planted_gap_is_confirmed_on_new_items_and_a_matched_null_is_not(run_dir: Path) -> None:
    """Items with the planted word fail 60% vs 20%: confirmed in ≥ 19 of 20 seeds; the frequency-matched
    word with no effect: confirmed in at most 2 of 20.

    The rule promises a null gap is confirmed at most fdr / 2 = 2.5% of the time (two-sided BH level, one
    direction); P(≥ 3 of 20) is then 1.4%. Seeds 0–19 hold 2: the same scripted model's decisions, scored
    and judged the same way without the pipeline, confirm the null gap in 7 of 400 seeds (1.75%, McNemar's
    exact test) and the real one in 377 of 400 — these seeds are in the null's tail, not a leak."""
    confirmed = {"mode:1": 0, "mode:2": 0}
    with serve(script()) as url:
        for seed in range(20):
            summary = probe(run_dir, url, seed, pairs=60)
            for g in summary["gaps"]:
                confirmed[g["gap_id"]] += g["verdict"] == "confirmed"
    assert confirmed["mode:1"] >= 19, confirmed
    assert confirmed["mode:2"] <= 2, confirmed


def test_bad_items_are_dropped_and_counted_at_each_check(run_dir: Path) -> None:
    with serve(script()) as url:
        summary = probe(run_dir, url, 0, pairs=40)
    items = pq.read_table(run_dir / L.PROBE_ITEMS).to_pylist()
    results = {r["gap_id"]: r for r in pq.read_table(run_dir / L.PROBE_RESULTS).to_pylist()}
    gap = results["mode:1"]
    # The writer's request i is malformed when i % 9 == 4, has a wrong target reference when i % 11 == 7, and
    # a target without the gap's word when i % 6 == 5: each is caught where it should be, and counted.
    assert gap["malformed"] == sum(i % 9 == 4 for i in range(gap["requests"])) > 0
    assert gap["wrong_reference"] == sum(i % 11 == 7 and i % 9 != 4 for i in range(gap["requests"])) > 0
    dropped = [r for r in items if r["gap_id"] == "mode:1" and r["role"] == "target" and r["dropped"] == "reader"]
    assert dropped and all("zorblat" not in r["prompt"] for r in dropped)
    kept = [r for r in items if r["gap_id"] == "mode:1" and r["role"] == "target" and r["dropped"] is None]
    assert kept and all("zorblat" in r["prompt"] for r in kept)
    assert gap["reader_passed"] == len(kept) and gap["reader_checked"] == len(kept) + len(dropped)
    assert gap["n_pairs"] == len(kept) and all(r["score"] is not None for r in kept)
    assert summary["requests"]["malformed"] == gap["malformed"] + results["mode:2"]["malformed"]
    # Nothing dropped is answered: the model never saw it.
    assert all(r["response"] is None for r in items if r["dropped"] in ("reader", "near_copy"))
    exported = [json.loads(line) for line in (run_dir / L.PROBE_EXPORT / "items.jsonl").read_text().splitlines()]
    assert {e["pair_id"] for e in exported} == {r["pair_id"] for r in items if r["dropped"] is None}
    assert not (run_dir / "probe.work").exists()
