"""Do findings on real suites hold under other readers? (docs/sensitivity.md; issue #51)

    python scripts/real_text_calibration.py prepare DATA_DIR WORK && ... assemble WORK     # the 5,144 prompts
    cg-ray extract --input WORK/real_text.jsonl --out WORK/texts.NAME.rows.parquet --sae NAME \
        --text prompt --allow-missing-scores --dtype bfloat16                              # once per reader
    python scripts/sensitivity_real_suites.py runs WORK ROWS_DIR --seeds 0 1 2             # the run directories
    python scripts/sensitivity_real_suites.py compare WORK --reader NAME [--reader NAME]   # -> WORK/sensitivity.json

Runs (each `cg-ray metrics` with the defaults): BBH (Codex, 2,023 rows), BBQ (UnifiedQA, 1,800) and GSM8K
(GPT-3 + verifier, 1,319) with their real scores (ROWS_DIR: their rows files read by the default reader, with
the extract manifests beside them), and the real-text calibration suite of docs/trust.md (the same 5,144
prompts) with a dollar amount planted 0.20 below its cell (`planted.S`) and its within-cell permutation
(`shuffled.S`). The prompts are the same texts in every run, so each other reader reads them once
(`cg-ray extract`, above) and each run's reader run is published from those rows (`publish_reader_run`, as
`cg-ray sensitivity` publishes what it reads); `run_sensitivity` then finds every reader done and compares.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.activations.extract import manifest_path, read_manifest
from cg_ray.artifacts.layout import SENSITIVITY_FINDINGS, SENSITIVITY_PAIRS, RunDir
from cg_ray.sensitivity.config import SensitivityConfig
from cg_ray.sensitivity.reread import ReadBy, publish_reader_run, reader_config_for, with_activations
from cg_ray.sensitivity.run import plan_sensitivity, run_sensitivity

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from real_text_calibration import has_property, plant  # noqa: E402

REAL = {"bbh": "bbh_meta", "bbq": "bbq", "gsm8k": "gsm8k"}


def _metrics(rows: Path, out: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "cg_ray.cli", "metrics", "--rows", str(rows), "--out", str(out), "--overwrite"],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def runs(work: Path, rows_dir: Path, seeds: list[int]) -> None:
    for name, stem in REAL.items():
        _metrics(rows_dir / f"{stem}.rows.parquet", work / name)
    suite = work / "real_text.rows.parquet"
    for s in seeds:
        for kind, shuffle in (("planted", False), ("shuffled", True)):
            rows = work / f"{kind}.{s}.parquet"
            plant(suite, rows, s, shuffle=shuffle)
            # the suite's rows were read by the default reader as BBQ's were: its manifest says how
            shutil.copyfile(manifest_path(rows_dir / "bbq.rows.parquet"), manifest_path(rows))
            _metrics(rows, work / f"{kind}.{s}")
        print(f"seed {s}: planted and shuffled runs written")


def _seed_reader(run: RunDir, name: str, texts: pa.Table, manifest: dict[str, Any]) -> None:
    """Publish `name`'s run of `run` from the rows that reader read of the same prompts (matched by row id)."""
    plan = plan_sensitivity(SensitivityConfig(run=run.path, readers=(name,)))
    if name in plan.done:
        return
    rows = pq.read_table(run.rows)
    where = {rid: i for i, rid in enumerate(texts.column(S.ROW_ID).to_pylist())}
    take = pa.array([where[rid] for rid in rows.column(S.ROW_ID).to_pylist()])
    read = texts.take(take).select([S.N_TOKENS, S.CONCEPT_IDS, S.CONCEPT_ACTS])
    base = rows.drop_columns([S.N_TOKENS, S.CONCEPT_IDS, S.CONCEPT_ACTS])
    d_sae = int(manifest["d_sae"])
    share = rows.num_rows / texts.num_rows  # this run's share of the reading
    seconds = float(manifest["timings_s"]["compute"]) * share
    reader = reader_config_for(plan.settings, name)
    read_by = ReadBy(name, name, reader, d_sae, [{"extract": str(manifest.get("output"))}], seconds)
    config = SensitivityConfig(run=run.path, readers=(name,))
    publish_reader_run(
        run, with_activations(base, read, d_sae), read_by, plan.settings, plan.metrics, plan.model, config
    )


def _mode_rows_jaccard(run: RunDir, finding: str, prop: np.ndarray) -> float | None:
    """Jaccard of a planted-suite mode's rows (as sensitivity flags them) with the dollar rows."""
    from cg_ray.artifacts.rows import open_rows
    from cg_ray.config import MetricsConfig
    from cg_ray.sensitivity.findings import read_findings

    config = MetricsConfig.model_validate(run.read_summary()["config"])
    for f in read_findings(run, open_rows(run.rows), None, config)[0]:
        if f.key == finding:
            mask = np.zeros(prop.size, bool)
            mask[f.rows] = True
            return round(float((mask & prop).sum() / max((mask | prop).sum(), 1)), 3)
    return None


def compare(work: Path, readers: list[str]) -> None:
    texts = {name: pq.read_table(work / f"texts.{name}.rows.parquet") for name in readers}
    manifests = {name: dict(read_manifest(work / f"texts.{name}.rows.parquet") or {}) for name in readers}
    out: dict[str, Any] = {}
    names = [p.name for p in sorted(work.iterdir()) if p.is_dir() and RunDir.published(p) is not None]
    for run_name in names:
        run = RunDir(work / run_name)
        for name in readers:
            _seed_reader(run, name, texts[name], manifests[name])
        summary = run_sensitivity(SensitivityConfig(run=run.path, readers=tuple(readers)))
        findings = run.read_table(SENSITIVITY_FINDINGS).to_pylist()
        pairs = run.read_table(SENSITIVITY_PAIRS).to_pylist()
        entry: dict[str, Any] = {"readers": summary["readers"], "pairs": pairs, "findings": findings}
        if run_name.startswith(("planted", "shuffled")):
            prop = has_property(pq.read_table(run.rows, columns=["prompt"]))
            modes = sorted({f["finding"] for f in findings if f["kind"] == "failure_mode"})
            entry["dollar_jaccard"] = {m: _mode_rows_jaccard(run, m, prop) for m in modes}
        out[run_name] = entry
        counts = {r["name"]: (r["statuses"], r["slices"]) for r in summary["readers"]}
        n = len(findings) // max(len(readers), 1)
        print(f"{run_name}: {n} confirmed findings; (modes and concepts, slices) {counts}")
        for p in pairs:
            print(
                f"  vs {p['reader_b']}: shared {p['shared_05']:.3f}/{p['shared_07']:.3f}/{p['shared_09']:.3f} "
                f"({p['method']}), rho X_model {p['spearman_X_model']}, X_bench {p['spearman_X_bench']}, "
                f"top rows J {p['top_rows_jaccard']}"
            )
    (work / "sensitivity.json").write_text(json.dumps(out, indent=1, default=str))
    print(f"wrote {work / 'sensitivity.json'}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="step", required=True)
    r = sub.add_parser("runs")
    r.add_argument("work", type=Path)
    r.add_argument("rows_dir", type=Path)
    r.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    c = sub.add_parser("compare")
    c.add_argument("work", type=Path)
    c.add_argument("--reader", action="append", required=True)
    args = p.parse_args()
    if args.step == "runs":
        runs(args.work, args.rows_dir, args.seeds)
    else:
        compare(args.work, args.reader)


if __name__ == "__main__":
    main()
