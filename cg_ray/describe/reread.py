"""The check that `cg-ray describe` re-reads rows as the run read them: stored s̃ against the re-read's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# The re-read checks that describe reads rows as the run did. Each (concept, top row) pair compares the stored
# s̃ with the mean of the re-read's per-token activations; a pair differs when they are more than REREAD_TOL
# apart (relative). Settings that differ (text mode, token policy, SAE) move nearly every pair (demo: 95-99%
# by > 5%); the same settings move none in float32 (demo: ≤ 8e-6) but, in bfloat16, a few: the run read rows
# packed and the re-read one at a time, so rounding differs and a token near the TopK cut can gain or lose a
# concept (demo: 1-11% of pairs by > 1%, single pairs by up to 100%). Hence a share, not the largest pair.
REREAD_TOL = 0.01
REREAD_MAX_SHARE = 0.25


@dataclass(frozen=True)
class RereadCheck:
    pairs: int  # (concept, top row) pairs with a stored s̃ > 0 and a re-read row
    differing: int  # pairs whose re-read is more than REREAD_TOL from the stored s̃ (relative)
    median: float  # median relative difference over the pairs
    worst: float  # largest relative difference

    @property
    def mismatch(self) -> bool:
        return self.differing >= 2 and self.differing > REREAD_MAX_SHARE * self.pairs

    def as_dict(self) -> dict[str, Any]:
        return {
            "pairs_compared": self.pairs,
            "pairs_differing": self.differing,
            "tolerance": REREAD_TOL,
            "median_rel_diff_vs_stored_s_tilde": round(self.median, 6),
            "max_rel_diff_vs_stored_s_tilde": round(self.worst, 6),
        }

    def message(self) -> str:
        return (
            f"re-read activations differ from the stored s̃ by more than {REREAD_TOL:.0%} on {self.differing} of "
            f"{self.pairs} (concept, top row) pairs ({self.differing / max(self.pairs, 1):.0%}; median "
            f"{self.median:.1%}, largest {self.worst:.1%}): the re-read's dtype or reader settings are likely "
            f"not the run's (up to {REREAD_MAX_SHARE:.0%} of pairs may differ by TopK near-ties in bfloat16)"
        )


def reread_check(pairs: Sequence[tuple[float, float]]) -> RereadCheck:
    """(stored s̃, re-read mean of per-token activations) per (concept, top row); pairs with s̃ ≤ 0 are skipped."""
    rel = np.array([abs(reread - stored) / stored for stored, reread in pairs if stored > 0], dtype=np.float64)
    if rel.size == 0:
        return RereadCheck(0, 0, 0.0, 0.0)
    return RereadCheck(int(rel.size), int((rel > REREAD_TOL).sum()), float(np.median(rel)), float(rel.max()))
