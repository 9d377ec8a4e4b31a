"""The probe ledger (cg_ray.probe.ledger): a gap's probes are numbered by what it tests, not by the run folder,
so `cg-ray metrics --overwrite`, a copied run or a new output directory do not start it again at probe 1
(share 0.8), and its fdr is fixed at its first probe."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from scipy import stats

from cg_ray.artifacts import layout as L
from cg_ray.probe.api import earlier_text
from cg_ray.probe.config import ProbeConfig
from cg_ray.probe.confirm import FDR, family_q, gap_test, verdict
from cg_ray.probe.ledger import LedgerFdrError, open_ledger, rows_digest
from cg_ray.probe.plan import ProbePlan, make_plan
from cg_ray.probe.power import mcnemar_power, share
from tests.probe.scripted_probe import write_run

RESETS = 10
PAIRS = 60
NULL = 0.7  # a null gap: targets and controls both right 70% of the time
USERS = 400


def plan_of(run: Path, gaps: list[str] | None = None) -> ProbePlan:
    config = ProbeConfig(gaps=gaps or ["mode:2"], families="only", model={"backend": "fake"})
    return make_plan(run, config)


def spend(plan: ProbePlan, fdr: float = FDR) -> int:
    """What `run_probe` does when it judges: take the probe's number from the ledger (a real probe would then
    publish into RUN/probe/, which the next reset wipes)."""
    ledger = open_ledger(plan.run / "rows.parquet", plan.gaps, plan.rules, plan.ledger_dir)
    return ledger.spend(1, fdr, plan.run, {g.gap_id: g.description for g in plan.gaps})


@pytest.fixture(scope="module")
def made_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scripted run (its mode:2 is a null gap), made once; each test copies it."""
    return write_run(tmp_path_factory.mktemp("made") / "run")


def test_ten_overwrites_of_a_run_do_not_reset_its_null_gaps_probes_and_the_bound_holds(
    made_run: Path, tmp_path: Path
) -> None:
    """Ten resets: each time the run folder is replaced by the run as `cg-ray metrics --overwrite` writes it
    (no probe/: the last test runs the command itself), and its null gap probed as the run's first probe.
    The ledger numbers them 1 … 10, so the probability that any of the ten confirms it, computed exactly
    (McNemar's exact test of 60 fresh pairs per probe, enumerated: `power.mcnemar_power` at p_worse = p_better
    is the chance of a confirmation), is 1 − Π(1 − r_k) ≤ Σ share(k) · fdr / 2 < fdr / 2 = 0.025. Numbered by
    the run folder instead, each reset spends share(1) again: 1 − (1 − r_1)^10, over the bound (the issue
    measured 0.116), which this test asserts so that it can tell the two apart."""
    run = tmp_path / "run"
    numbers = []
    for _ in range(RESETS):
        shutil.rmtree(run, ignore_errors=True)
        shutil.copytree(made_run, run)  # the run as `cg-ray metrics --overwrite` writes it again: no probe/
        assert not (run / L.PROBE_RESULTS).exists()
        numbers.append(spend(plan_of(run)))
    assert numbers == list(range(1, RESETS + 1))
    discordant = 2 * NULL * (1 - NULL)

    def confirms(k: int) -> float:
        return mcnemar_power(PAIRS, discordant / 2, discordant / 2, share(k) * FDR)

    ever = 1 - np.prod([1 - confirms(k) for k in numbers])
    reset = 1 - (1 - confirms(1)) ** RESETS
    print(f"ten resets of a null gap: confirmed with probability {ever:.4f} (ledger), {reset:.4f} (reset)")
    assert ever <= sum(share(k) for k in numbers) * FDR / 2 <= FDR / 2
    assert reset > FDR / 2


def test_the_ledgers_bound_holds_in_400_simulated_users_with_the_real_rule() -> None:
    """The same ten probes of a null gap at the ledger's numbers 1 … 10, each judged by the probe's rule (the
    test at its share, the family's q, the verdict) on 60 fresh simulated pairs, for 400 users: the share who
    ever see it confirmed is at most the 99.9% binomial quantile of Bin(400, fdr / 2)."""
    rng, confirmed = np.random.default_rng(59), 0
    for _ in range(USERS):
        for k in range(1, RESETS + 1):
            t, c = (rng.random(PAIRS) < NULL).astype(float), (rng.random(PAIRS) < NULL).astype(float)
            frame = {"gap_id": "g", "pair_id": [f"p{i}" for i in range(PAIRS)],
                     "request_id": [f"r{i}" for i in range(PAIRS)], "target_score": t, "control_score": c}  # fmt: skip
            test = gap_test(pd.DataFrame(frame), share(k) * FDR)
            assert test is not None
            (q,) = family_q([test.p_value], k, FDR)
            if verdict(test, q, -0.15, FDR) == "confirmed":
                confirmed += 1
                break
    print(f"{confirmed}/{USERS} users saw the null gap confirmed in ten ledger-numbered probes")
    assert confirmed <= stats.binom.ppf(0.999, USERS, FDR / 2)


def test_a_copy_or_a_new_folder_over_the_same_rows_shares_the_ledger_and_other_rows_do_not(
    made_run: Path, tmp_path: Path
) -> None:
    """The key is the rows (ids, benchmarks, models) and the gap's rule, not the folder: a copy elsewhere
    continues the count; each gap has its own; a probe of two gaps takes a number above both; rows in another
    order are the same rows; a run over other rows starts its own."""
    first, copy = tmp_path / "a", tmp_path / "elsewhere" / "b"
    shutil.copytree(made_run, first)
    assert spend(plan_of(first)) == 1
    shutil.copytree(first, copy)
    assert spend(plan_of(copy)) == 2
    assert spend(plan_of(copy, ["mode:1"])) == 1  # another gap: its own count
    assert spend(plan_of(first, ["mode:1", "mode:2"])) == 3  # above both gaps' last numbers
    rows = pq.read_table(first / "rows.parquet")
    shuffled = tmp_path / "shuffled.parquet"
    pq.write_table(rows.take(np.random.default_rng(0).permutation(rows.num_rows)), shuffled)
    assert rows_digest(shuffled) == rows_digest(first / "rows.parquet")
    other = write_run(tmp_path / "other", n_rows=200)
    assert spend(plan_of(other)) == 1


def test_another_fdr_is_refused_naming_the_ledger_and_the_fdr_it_fixed(made_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(made_run, run)
    plan = plan_of(run)
    spend(plan, fdr=0.05)
    ledger = open_ledger(run / "rows.parquet", plan.gaps, plan.rules, None)
    with pytest.raises(LedgerFdrError, match=r"--fdr 0.1 differs from the fdr 0.05") as refused:
        spend(plan, fdr=0.1)
    assert str(ledger.file("mode:2")) in str(refused.value)
    with pytest.raises(LedgerFdrError):  # the dry run refuses it too, before anything is written
        earlier_text(make_plan(run, ProbeConfig(gaps=["mode:2"], fdr=0.1, families="only",
                                                model={"backend": "fake"})), replace=False)  # fmt: skip
    assert spend(plan, fdr=0.05) == 2


def test_the_dry_run_states_the_ledger_and_the_number_after_an_overwrite(made_run: Path, tmp_path: Path) -> None:
    """After one probe and `cg-ray metrics --overwrite` of the run (scripted_probe.write_run runs it), the dry
    run says probe 2, its share, and the ledger that numbered it."""
    run = tmp_path / "run"
    shutil.copytree(made_run, run)
    spend(plan_of(run))
    write_run(run)  # `cg-ray metrics --rows … --out RUN --overwrite`
    text = earlier_text(plan_of(run), replace=False)
    assert text.startswith("  probe 2: Benjamini–Hochberg at level 0.005 (share 0.1 of fdr 0.05)")
    assert f"probe ledger {open_ledger(run / 'rows.parquet', [], {}, None).root}" in text
    assert "mode:2 1)" in text
