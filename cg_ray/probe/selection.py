"""How much a run's effect is inflated by the run's own confirmation of it, and the effect a probe plans for
instead (docs/probe.md, "Pairs needed").

A gap the run confirmed was kept *because* its held-out estimate cleared the run's bar: where the run had little
power, the estimates that clear it are the large ones, so the estimate overstates the effect (the winner's
curse; Gelman & Carlin 2014 call the factor the exaggeration ratio, type M error). A candidate the run did not
confirm was not selected on its held-out estimate, so its estimate is kept as it is.

The run records what this needs: its interval is the one its decision rule does not reject (confirmed ⇔ it
excludes 0, cg_ray.profile.decision), so its half-width is the bar c; and its `mde` is (bar + z_0.8) · SE, so
SE ≈ (mde − c) / z_0.8. With the estimate X ~ N(μ, SE²) and μ taken as the run's estimate (the
retrodesign's assumption), the run's power is P(X beyond c) and the exaggeration E[|X| | |X| > c] / |μ|
(a truncated normal's mean). The probe plans for estimate / exaggeration and says both. Approximate: the
run's figures aggregate several splits (medians), so c and SE are those of a typical split.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats

from cg_ray.probe.power import POWER


@dataclass(frozen=True)
class Inflation:
    """The run's power to confirm an effect as large as its estimate, the exaggeration at that power, and
    the effect planned for (estimate / exaggeration)."""

    power: float
    ratio: float
    planned: float

    def text(self, effect: float) -> str:
        """What every output says of it ('at its power' only where known: a replanned attempt keeps the ratio)."""
        power = f" at its power {self.power:.2f}" if math.isfinite(self.power) else ""
        return (
            f"the run's effect {effect:+.3f} deflated for the run's confirmation of it (inflated about "
            f"{self.ratio:.2f}×{power}): {self.planned:+.3f}"
        )


def run_inflation(
    effect: float | None, low: float | None, high: float | None, mde: float | None, confirmed: bool
) -> Inflation | None:
    """The inflation of a run-confirmed gap's held-out `effect` (module docstring) from the run's interval
    [low, high] and its `mde`; None for a gap the run did not confirm or whose figures do not give it."""
    if not confirmed or effect is None or low is None or high is None or mde is None or effect == 0:
        return None
    bar = (high - low) / 2
    se = (abs(mde) - bar) / float(stats.norm.ppf(POWER))
    if not (bar > 0 and se > 0):
        return None
    size = abs(effect)
    a = (bar - size) / se  # the bar in SEs from the effect
    power = float(stats.norm.sf(a))
    if power <= 0.0:
        return None
    mean_beyond = size + se * float(stats.norm.pdf(a)) / power  # E[|X| | |X| > bar], the selected estimates
    ratio = float(mean_beyond / size)
    return Inflation(power=power, ratio=ratio, planned=effect / ratio)
