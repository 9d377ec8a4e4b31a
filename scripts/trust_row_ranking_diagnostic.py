"""Diagnostic for docs/trust.md, not a product ranking: rank concepts by the upper end of the Wilson interval of
the *unweighted* mean score of the fit rows exhibiting them (n = active rows), near-duplicates merged as in the
profile, and compare its held-out lift with the paper's ranking over seeds 0-4.

    PYTHONPATH=. python scripts/trust_row_ranking_diagnostic.py NAME ...   # reads WORK/NAME.rows.parquet
"""

import os
import sys

import numpy as np

from cg_ray.artifacts.rows import load_row_table, open_rows
from cg_ray.metrics.uncertainty import wilson_interval
from cg_ray.profile import validate as V
from cg_ray.profile.grouping import pool_activity_from_csr
from cg_ray.profile.ranking import eligible
from cg_ray.profile.weaknesses import POOL_FACTOR, profile_entries

WORK = os.environ.get("TRUST_WORK", "/tmp/trust_real")


def row_rank(result, fit, size):
    row_of = np.repeat(np.arange(fit.n_rows), np.diff(fit.offsets))
    pos = fit.concept_acts > 0
    cnt = np.bincount(fit.concept_ids[pos], minlength=fit.d_sae).astype(float)
    sm = np.bincount(fit.concept_ids[pos], weights=fit.scores[row_of[pos]], minlength=fit.d_sae)
    with np.errstate(all="ignore"):
        mean = np.where(cnt > 0, sm / cnt, np.nan)
    _, hi = wilson_interval(mean, cnt)
    mask = eligible(result) & ~np.isnan(hi)
    idx = np.flatnonzero(mask)
    order = idx[np.lexsort((idx, -cnt[idx], hi[idx]))]
    pool = order[: POOL_FACTOR * size]
    act = pool_activity_from_csr(fit.offsets, fit.concept_ids, fit.concept_acts, pool.tolist(), fit.d_sae)
    return [e.concept for e in profile_entries(order, act, cnt, size, result.config.duplicate_jaccard)]


for name in sys.argv[1:]:
    table = load_row_table(open_rows(f"{WORK}/{name}.rows.parquet"))
    res = []
    for seed in range(5):
        cfg = V.ValidateConfig(seed=seed, n_bootstrap=10, n_random=2)
        orig = V.new_ranking
        V.new_ranking = row_rank
        try:
            r = V.validate(table, table.benchmark_codes, cfg)
        finally:
            V.new_ranking = orig
        at = {e["k"]: e["lift"] for e in r["lift"]}
        pat = {e["k"]: e["lift"] for e in r["baselines"]["paper"]["lift"]}
        m10 = next(e["value"] for e in r["low_performance"]["by_size"] if e["M"] == 10)
        pm10 = next(e["value"] for e in r["baselines"]["paper"]["low_performance"]["by_size"] if e["M"] == 10)
        res.append((at[5], at[20], m10, pat[5], pat[20], pm10))
    a = np.array(res)
    m = a.mean(axis=0)
    wins = [int((a[:, i] < a[:, i + 3]).sum()) for i in range(3)]
    print(
        f"{name} row-ub mean lift@5 {m[0]:+.3f} lift@20 {m[1]:+.3f} M10 {m[2]:.3f} | "
        f"paper {m[3]:+.3f} {m[4]:+.3f} {m[5]:.3f} | wins {wins[0]}/{wins[1]}/{wins[2]}",
        flush=True,
    )
