"""Metadata enrichment: which metadata values are over-represented among the rows exhibiting a concept.

For a field with values v, among the M rows that carry the field, n_v carry v; a concept is active in N of
the M rows, k_v of which carry v. Under independence k_v is hypergeometric(M, n_v, N); the one-sided
p-value is P(K ≥ k_v) = `scipy.stats.hypergeom.sf(k_v - 1, M, n_v, N)` (Fisher's exact test, one-sided).
Every (concept, field, value) pair with n_v > 0 of the analysed fields is one hypothesis, including those
with k_v = 0 (p = 1), and Benjamini–Hochberg (`scipy.stats.false_discovery_control`) runs over all of them
at once, across the suite. A value is reported when q ≤ alpha, lift = (k_v / N) / (n_v / M) > 1 and
k_v ≥ min_rows, as `type=Geometry (×2.4, q=1e-6)`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import false_discovery_control, hypergeom

from cg_ray.describe.evidence import Evidence


@dataclass(frozen=True)
class Enriched:
    concept_id: int
    field: str
    value: str
    k: int  # active rows carrying the value
    n_active: int  # active rows carrying the field
    n_value: int  # rows carrying the value
    n_field: int  # rows carrying the field
    lift: float
    p: float
    q: float

    def text(self) -> str:
        return f"{self.field}={self.value} (×{self.lift:.1f}, q={format_q(self.q)})"


def format_q(q: float) -> str:
    """1e-6 style below 0.001, else three decimals ("q=0.012")."""
    if q >= 0.001:
        return f"{q:.3f}"
    mantissa, exponent = f"{q:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def p_value(k: int, m_total: int, n_value: int, n_drawn: int) -> float:
    """One-sided P(K ≥ k) for K ~ hypergeom(M=m_total, n=n_value, N=n_drawn)."""
    return float(hypergeom.sf(k - 1, m_total, n_value, n_drawn))


def enrich(ev: Evidence, *, alpha: float = 0.05, min_rows: int = 3, per_concept: int = 3) -> dict[int, list[Enriched]]:
    """Significant over-represented values per concept (best q first, at most `per_concept`)."""
    tests: list[Enriched] = []
    for field, values in ev.value_rows.items():
        m_total = sum(values.values())
        if m_total == 0 or len(values) < 2:  # a constant field says nothing
            continue
        per_value = ev.value_active[field]
        n_active_field = np.sum([per_value[v] for v in values], axis=0)  # per concept
        for value, n_value in values.items():
            if n_value == 0:
                continue
            ks = per_value[value]
            for j, c in enumerate(ev.concept_ids):
                n_drawn, k = int(n_active_field[j]), int(ks[j])
                if n_drawn == 0:
                    continue
                lift = (k / n_drawn) / (n_value / m_total)
                p = p_value(k, m_total, n_value, n_drawn) if k > 0 else 1.0
                tests.append(Enriched(c, field, value, k, n_drawn, n_value, m_total, lift, p, 1.0))
    if not tests:
        return {c: [] for c in ev.concept_ids}
    qs = false_discovery_control(np.array([t.p for t in tests]), method="bh")
    out: dict[int, list[Enriched]] = {c: [] for c in ev.concept_ids}
    for t, q in zip(tests, qs, strict=True):
        if q <= alpha and t.lift > 1.0 and t.k >= min_rows:
            out[t.concept_id].append(
                Enriched(t.concept_id, t.field, t.value, t.k, t.n_active, t.n_value, t.n_field, t.lift, t.p, float(q))
            )
    for c in out:
        out[c] = sorted(out[c], key=lambda e: (e.q, -e.lift))[:per_concept]
    return out
