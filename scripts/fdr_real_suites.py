"""What the findings' decision rule confirms on real scored suites, and on the same suites with their scores
permuted within the cells the run adjusts for (issue #49: before vs after a change of the rule).

    .venv/bin/python scripts/fdr_real_suites.py NAME=ROWS.parquet ... --out FILE.json [--seeds 5]

Per suite: the confirmed failure modes, concepts, slices and slices beyond the adjusted fields of the real
judgement (`nullcheck.judge_rows`, the defaults a user gets), and `nullcheck.null_check` over seeds 0..S-1
(whole groups' scores permuted within the adjusted cells: anything it confirms beyond them is false).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cg_ray.artifacts.rows import open_rows
from cg_ray.config import MetricsConfig
from cg_ray.profile.nullcheck import confirmed_counts, judge_rows, null_check


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suites", nargs="+", help="NAME=ROWS.parquet")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--choosing-share", type=float, default=None, help="override splits.CHOOSING_SHARE")
    args = ap.parse_args()
    if args.choosing_share is not None:
        from cg_ray.profile import splits

        splits.CHOOSING_SHARE = args.choosing_share
    cfg = MetricsConfig()
    out = {}
    for spec in args.suites:
        name, path = spec.split("=", 1)
        t0 = time.perf_counter()
        rows = open_rows(Path(path))
        real = judge_rows(rows, cfg)
        null = null_check(rows, cfg, seeds=range(args.seeds), real=real)
        out[name] = {
            "confirmed": confirmed_counts(real),
            "adjusted_for": list(real.adjusted_for),
            "null": [{k: r[k] for k in ("seed", "false_findings")} for r in null["confirmed"]],
            "null_false_findings": null["false_findings"],
            "seconds": round(time.perf_counter() - t0, 1),
        }
        print(name, json.dumps(out[name]), flush=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
