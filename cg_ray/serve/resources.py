"""The CPU shares of the service's parts, sized to the cluster it starts on.

Three parts hold Ray's logical CPUs: the ingress replicas, the encoder replicas and the analyses' metrics
tasks. The replicas hold theirs for as long as they live, so whatever they leave is all the analyses ever
get: on a 2-CPU machine the old fixed shares (2 × 0.5 + 1) left nothing, and every analysis waited forever
for a CPU. A share left "auto" is therefore derived from the cluster at build time (all parts scaled by one
factor, so their proportions stay those of `PREFERRED`); a configuration that leaves no room for one
analysis is refused with the keys to change.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Annotated, Final, Literal

from pydantic import Field

from cg_ray.errors import CgRayError, ConfigError

log = logging.getLogger(__name__)

AUTO: Final = "auto"
# A part's logical CPUs per replica / task: a number, or "auto" (sized to the cluster, see resolve_shares).
CpuShare = Annotated[float, Field(ge=0)] | Literal["auto"]


@dataclasses.dataclass(frozen=True)
class Preferred:
    """Each part's share on a cluster with room for all: what the service used before shares were sized."""

    ingress: float = 0.5
    encoder: float = 1.0
    analysis: float = 0.25


PREFERRED = Preferred()
_EPS = 1e-9


@dataclasses.dataclass(frozen=True)
class Shape:
    """What the configuration asks for: counts and shares of the three parts."""

    ingress_replicas: int
    ingress_num_cpus: float | Literal["auto"]
    encoder_replicas: int  # encoder.min_replicas: the ones that always run
    encoder_num_cpus: float | Literal["auto"]
    analysis_num_cpus: float | Literal["auto"]
    analyses: int  # how many analyses' tasks the auto shares leave room for (max_concurrent_analyses)


@dataclasses.dataclass(frozen=True)
class Shares:
    """The resolved shares; `service_cpus` is what the replicas hold (ingress + the encoder's minimum)."""

    ingress: float
    encoder: float
    analysis: float
    service_cpus: float
    cluster_cpus: float | None  # None: not measured (no Ray, or a cluster with no CPU yet)

    def describe(self) -> str:
        where = f"a cluster of {self.cluster_cpus:g} CPUs" if self.cluster_cpus is not None else "an unmeasured cluster"
        return (
            f"CPU shares on {where}: ingress {self.ingress:g}, encoder {self.encoder:g}, analysis {self.analysis:g} "
            f"(the replicas hold {self.service_cpus:g})"
        )


class Unschedulable(CgRayError):
    """An analysis' task found no CPU within `limits.analysis_schedule_timeout_s` (its message is public)."""


def _floor(x: float) -> float:
    # Ray counts logical resources in 1e-4 steps; a share a hair over its room would never fit.
    return math.floor(x * 1000 + _EPS) / 1000


def resolve_shares(shape: Shape, cluster_cpus: float | None) -> Shares:
    """The shares on a cluster of `cluster_cpus` logical CPUs (None: unknown, auto shares take PREFERRED and
    nothing is checked). Auto shares keep PREFERRED when the replicas plus `shape.analyses` analyses fit,
    else all shrink by one factor until they do; refused (ConfigError) when not even one analysis fits."""
    parts = (
        (shape.ingress_replicas, shape.ingress_num_cpus, PREFERRED.ingress),
        (shape.encoder_replicas, shape.encoder_num_cpus, PREFERRED.encoder),
        (max(1, shape.analyses), shape.analysis_num_cpus, PREFERRED.analysis),
    )
    fixed = sum(n * share for n, share, _ in parts if not isinstance(share, str))
    wanted = sum(n * preferred for n, share, preferred in parts if isinstance(share, str))
    factor = 1.0
    if cluster_cpus is not None and fixed + wanted > cluster_cpus + _EPS and wanted > 0:
        factor = max(0.0, (cluster_cpus - fixed) / wanted)
    ingress, encoder, analysis = (
        _floor(preferred * factor) if isinstance(share, str) else float(share) for _, share, preferred in parts
    )
    service = shape.ingress_replicas * ingress + shape.encoder_replicas * encoder
    shares = Shares(ingress, encoder, analysis, round(service, 6), cluster_cpus)
    if cluster_cpus is not None:
        _check(shape, shares, cluster_cpus)
    return shares


def _check(shape: Shape, shares: Shares, cluster_cpus: float) -> None:
    left = cluster_cpus - shares.service_cpus
    resolved = {"ingress_num_cpus": shares.ingress, "encoder.num_cpus": shares.encoder}
    resolved["analysis_num_cpus"] = shares.analysis
    # An auto share squeezed to 0 means the explicit ones took the whole cluster: as bad as no room at all.
    squeezed = any(v == AUTO and resolved[k] <= 0 for k, v in _keys(shape).items())
    if squeezed or left + _EPS < shares.analysis:
        explicit = [k for k, v in _keys(shape).items() if v != AUTO] or ["ingress_replicas"]
        raise ConfigError(
            f"ingress_replicas × ingress_num_cpus ({shape.ingress_replicas} × {shares.ingress:g}) + "
            f"encoder.min_replicas × encoder.num_cpus ({shape.encoder_replicas} × {shares.encoder:g}) = "
            f"{shares.service_cpus:g} leaves no CPU for analyses (analysis_num_cpus {shares.analysis:g}) on a "
            f'cluster of {cluster_cpus:g} CPUs; lower {" or ".join(explicit)} ("auto" sizes a share to the '
            "cluster), or give the cluster more CPUs (an autoscaling cluster: set cluster_cpus to its full size)"
        )
    if left + _EPS < shape.analyses * shares.analysis:
        log.warning(
            "%s: %d analyses at a time fit, not %d (max_concurrent_analyses); the others wait for a CPU",
            shares.describe(),
            int((left + _EPS) // shares.analysis),
            shape.analyses,
        )


def _keys(shape: Shape) -> dict[str, float | str]:
    return {
        "ingress_num_cpus": shape.ingress_num_cpus,
        "encoder.num_cpus": shape.encoder_num_cpus,
        "analysis_num_cpus": shape.analysis_num_cpus,
    }


def measured_cpus() -> float | None:
    """The cluster's logical CPUs, or None where there is nothing to measure: Ray not initialised (a script
    building the app without a cluster), or a cluster with no CPU yet (an autoscaling one with no workers)."""
    import ray

    if not ray.is_initialized():
        return None
    cpus = float(ray.cluster_resources().get("CPU", 0.0))
    return cpus if cpus > 0 else None


def analysis_room(cluster_cpus: float, service_cpus: float, analysis_cpus: float) -> str | None:
    """Why no analysis can be scheduled (the cluster, as it is now, cannot fit one task beside the replicas),
    or None when one fits."""
    if cluster_cpus - service_cpus + _EPS >= analysis_cpus:
        return None
    return (
        f"analyses cannot be scheduled: the cluster has {cluster_cpus:g} CPUs, the service's replicas hold "
        f"{service_cpus:g} and one analysis needs {analysis_cpus:g} (analysis_num_cpus); add CPUs or lower "
        "the shares"
    )
