"""`scripts/scope_simulation.py`, whose table docs/method.md quotes ("Choosing the rule: planted gaps on real
text"): its dealing keeps each side's size, the theme's share and whole groups, and its scoring runs every rule
end to end and tells a right item from a wrong one. The figures themselves come from rows read by the real
reader (minutes); tests/scope/test_real_text.py checks the headline claim on real text in CI."""

from __future__ import annotations

from types import ModuleType

import numpy as np
from scipy import sparse

from tests.scripts import load_script


def _source(sim: ModuleType, rng: np.random.Generator, n: int = 1200, per: int = 3):
    """Rows in groups of `per`; a theme on 20% of the groups fires latents 0–3 (60%), every latent fires on a
    6% background."""
    groups = np.repeat(np.arange(n // per), per).astype(str)
    theme = np.repeat(rng.random(n // per) < 0.2, per)
    fired = rng.random((n, 60)) < 0.06
    fired[np.ix_(theme, [0, 1, 2, 3])] |= rng.random((int(theme.sum()), 4)) < 0.6
    rows = [{"id": str(i)} for i in range(n)]
    return sim.Source("toy", sparse.csr_matrix(fired.astype(float)), groups, rows), theme


def test_a_deal_keeps_sizes_shares_and_whole_groups() -> None:
    sim = load_script("scope_simulation")
    rng = np.random.default_rng(0)
    src, theme = _source(sim, rng)
    bench, ref = sim.deal(src, theme, 0.15, 300, rng)
    assert not (bench & ref).any()
    assert abs(int(bench.sum()) - 300) <= 3 and abs(int(ref.sum()) - 300) <= 3
    assert not theme[bench].any() and abs(theme[ref].mean() - 0.15) < 0.02
    for g in np.unique(src.groups):  # a group lies whole on one side or on none
        sides = {(bool(b), bool(r)) for b, r in zip(bench[src.groups == g], ref[src.groups == g], strict=True)}
        assert len(sides) == 1
    null_b, null_r = sim.deal(src, None, 0.0, 300, rng)
    assert abs(theme[null_b].mean() - theme[null_r].mean()) < 0.1  # the null: both sides alike


def test_every_rule_is_scored_and_a_planted_theme_is_a_right_item_of_the_row_view() -> None:
    sim = load_script("scope_simulation")
    rng = np.random.default_rng(1)
    src, theme = _source(sim, rng, n=2400)
    bench, ref = sim.deal(src, theme, 0.2, 900, rng)
    items = sim.judge_items(src, bench, ref, theme)
    assert set(items) >= set(sim.RULES)
    assert items["rows"] and all(s >= 0.8 for s in items["rows"])  # right items: mostly planted rows
    table = sim.summarise(
        [{"theme": "toy", "kind": "form", "share": 0.2, "rep": 0, "items": items}],
        [{"source": "toy", "rep": 0, "items": {r: [] for r in sim.RULES}}],
    )
    assert table["planted"]["rows"][("toy", 0.2)]["recall"] == 1.0
    assert table["null"]["rows"]["any_item"] == 0.0
