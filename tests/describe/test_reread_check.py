"""describe's re-read check: it compares the stored s̃ with the re-read per (concept, top row) pair and warns
when a share of the pairs differ (settings), not when one pair does (a TopK near-tie); the re-read takes the
dtype the run's reader actors resolved `auto` to."""

from __future__ import annotations

import json
from pathlib import Path

from cg_ray.describe.reread import REREAD_MAX_SHARE, REREAD_TOL, reread_check
from cg_ray.describe.rundir import ReadSettings, named_reader


def test_same_settings_in_float32_agree() -> None:
    pairs = [(v, v * (1 + 1e-6)) for v in (0.5, 1.0, 2.0, 3.5) * 95]
    check = reread_check(pairs)
    assert check.pairs == 380 and check.differing == 0 and not check.mismatch
    assert check.worst < 1e-5


def test_isolated_topk_near_ties_do_not_warn() -> None:
    # bfloat16, packed run vs one row at a time: most pairs agree; a few move, one loses its only token.
    # The old check took the largest pair and warned at 26.1% on the demo; here it is one pair of 380.
    pairs = [(1.0, 1.0)] * 350 + [(1.0, 1.03)] * 28 + [(0.4, 0.4 * (1 - 0.261)), (0.2, 0.0)]
    check = reread_check(pairs)
    assert check.worst == 1.0 and check.differing == 30 and check.median == 0.0
    assert not check.mismatch


def test_different_settings_warn_with_what_was_compared() -> None:
    # Sink positions not dropped: every top row's mean moves by ~8% (demo: 95% of pairs by > 5%).
    pairs = [(v, v * 1.08) for v in (0.5, 1.0, 2.0) * 20] + [(1.0, 1.0)] * 10
    check = reread_check(pairs)
    assert check.mismatch and check.differing == 60 and check.pairs == 70
    msg = check.message()
    assert "60 of 70 (concept, top row) pairs" in msg and f"{REREAD_TOL:.0%}" in msg
    assert f"{REREAD_MAX_SHARE:.0%}" in msg and "\n" not in msg
    info = check.as_dict()
    assert info["pairs_differing"] == 60 and info["tolerance"] == REREAD_TOL
    assert abs(info["max_rel_diff_vs_stored_s_tilde"] - 0.08) < 1e-6


def test_no_pairs_and_zero_stored_values() -> None:
    assert not reread_check([]).mismatch
    check = reread_check([(0.0, 1.0), (1.0, 1.0)])
    assert check.pairs == 1 and not check.mismatch


def _manifest(tmp_path: Path, dtypes: list[str], given: str = "auto") -> Path:
    path = tmp_path / "manifest.json"
    reader = {"model": "smollm2-135m-instruct", "sae": "default", "dtype": given, "text": "prompt"}
    path.write_text(
        json.dumps(
            {
                "cg_ray_version": "0",
                "config": {"reader": reader},
                "reader": {"d_sae": 4608, "actors": [{"dtype": d, "device": "cuda"} for d in dtypes]},
            }
        )
    )
    return path


def _dtype(manifest: Path) -> str:
    got = named_reader(str(manifest))
    assert isinstance(got, ReadSettings)
    return str(got.reader["dtype"])


def test_the_reread_takes_the_dtype_auto_became_in_the_run(tmp_path: Path) -> None:
    assert _dtype(_manifest(tmp_path, ["bfloat16", "bfloat16"])) == "bfloat16"
    assert _dtype(_manifest(tmp_path, ["float32"])) == "float32"
    assert _dtype(_manifest(tmp_path, ["bfloat16", "float32"])) == "auto"  # actors disagree
    assert _dtype(_manifest(tmp_path, ["float16"])) == "auto"  # not a dtype the reader config names
    assert _dtype(_manifest(tmp_path, [])) == "auto"
    assert _dtype(_manifest(tmp_path, ["bfloat16"], "float32")) == "float32"  # a dtype the config names is kept
