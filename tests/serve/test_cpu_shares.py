"""The service's CPU shares fit the cluster: auto shares are sized to it, a configuration that leaves the
analyses no CPU is refused naming the keys, and an analysis waiting for a CPU says so (fast: no Ray)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cg_ray.errors import ConfigError
from cg_ray.serve.app import ServeArgs, cpu_shares
from cg_ray.serve.resources import Shape, analysis_room, resolve_shares

ROOT = Path(__file__).resolve().parents[2]


def shipped_args(**changes: object) -> ServeArgs:
    (app,) = yaml.safe_load((ROOT / "serve_config.yaml").read_text())["applications"]
    return ServeArgs.model_validate({**app["args"], **changes})


def room_for_analyses(args: ServeArgs, cpus: float) -> float:
    shares = cpu_shares(args.model_copy(update={"cluster_cpus": cpus}))
    assert shares.cluster_cpus == cpus
    return (cpus - shares.service_cpus) / shares.analysis


@pytest.mark.parametrize("cpus", [1.0, 2.0, 3.0, 8.0, 64.0])
def test_the_shipped_config_leaves_room_for_its_concurrent_analyses_on_any_cluster(cpus: float) -> None:
    args = shipped_args()
    shares = cpu_shares(args.model_copy(update={"cluster_cpus": cpus}))
    # the replicas' shares plus max_concurrent_analyses analyses fit the cluster
    assert args.ingress_replicas * shares.ingress + args.encoder.min_replicas * shares.encoder == pytest.approx(
        shares.service_cpus
    )
    assert room_for_analyses(args, cpus) >= args.limits.max_concurrent_analyses - 1e-6
    assert min(shares.ingress, shares.encoder, shares.analysis) > 0


def test_auto_shares_keep_the_old_values_where_they_fit_and_shrink_together_where_not() -> None:
    big = cpu_shares(shipped_args(cluster_cpus=8))
    assert (big.ingress, big.encoder, big.analysis) == (0.5, 1.0, 0.25)
    two = cpu_shares(shipped_args(cluster_cpus=2))
    # 2 × 0.5 + 1 + 2 × 0.25 = 2.5 CPUs wanted on 2: each share × 0.8
    assert (two.ingress, two.encoder, two.analysis) == (0.4, 0.8, 0.2)
    assert two.service_cpus == pytest.approx(1.6)


def test_explicit_shares_that_leave_analyses_no_cpu_are_refused_naming_the_keys() -> None:
    old = {"ingress_num_cpus": 0.5, "encoder": {"num_cpus": 1}, "analysis_num_cpus": 0.25, "cluster_cpus": 2}
    with pytest.raises(ConfigError) as refused:
        cpu_shares(shipped_args(**old))
    message = str(refused.value)
    assert "(2 × 0.5)" in message and "(1 × 1)" in message and "= 2 leaves no CPU for analyses" in message
    assert "cluster of 2 CPUs" in message
    assert "ingress_num_cpus or encoder.num_cpus or analysis_num_cpus" in message and '"auto"' in message
    # the same explicit replicas with the analysis share left auto: it would be squeezed to 0, refused too
    with pytest.raises(ConfigError, match=r"lower ingress_num_cpus or encoder\.num_cpus \("):
        cpu_shares(shipped_args(**{**old, "analysis_num_cpus": "auto"}))
    # explicit replicas that leave room: the auto analysis share takes what is left for its 2 analyses
    fits = cpu_shares(shipped_args(**{**old, "ingress_num_cpus": 0.25, "analysis_num_cpus": "auto"}))
    assert fits.service_cpus == 1.5 and fits.analysis == 0.25


def test_explicit_shares_that_fit_one_analysis_but_not_all_are_kept(caplog: pytest.LogCaptureFixture) -> None:
    shares = resolve_shares(Shape(2, 0.25, 2, 0.5, 0.25, analyses=8), cluster_cpus=2.0)
    assert (shares.ingress, shares.encoder, shares.analysis) == (0.25, 0.5, 0.25)
    assert "2 analyses at a time fit, not 8" in caplog.text


def test_no_cluster_to_measure_takes_the_preferred_shares_unchecked() -> None:
    shares = resolve_shares(Shape(2, "auto", 1, "auto", "auto", analyses=2), cluster_cpus=None)
    assert (shares.ingress, shares.encoder, shares.analysis, shares.cluster_cpus) == (0.5, 1.0, 0.25, None)


def test_bad_shares_and_deadlines_are_refused_by_validation() -> None:
    from cg_ray.serve.app import build_app

    for bad in ({"ingress_num_cpus": -1}, {"analysis_num_cpus": "half"}, {"cluster_cpus": 0}):
        with pytest.raises(ConfigError):
            build_app(bad)
    for timeout in (0, -5, 10**6):
        with pytest.raises(ConfigError, match="analysis_schedule_timeout_s"):
            build_app({"limits": {"analysis_schedule_timeout_s": timeout}})


def test_readiness_reason_when_the_cluster_cannot_fit_one_analysis() -> None:
    assert analysis_room(2.0, 1.6, 0.2) is None
    reason = analysis_room(1.0, 1.6, 0.2)
    assert reason is not None and "1 CPUs" in reason and "hold 1.6" in reason and "needs 0.2" in reason
