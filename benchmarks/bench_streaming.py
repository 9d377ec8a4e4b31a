"""Large suites: the driver's peak RSS of `cg-ray run` at 100k and 1M rows, and a resume after a kill.

Each size runs `cg-ray run`'s runner (`pipeline.runner.run`, the fake generator, the hashing fake reader:
what is measured is the driver around the stages, not a model) in a child process on a private local Ray;
the child reports its own peak RSS (`ru_maxrss`: the driver process only, not Ray's workers). The resume
check starts the largest size, kills the child (its process group, by id) once a share of its shards is
written, and runs it again with `--resume`: it must skip the finished shards and publish every row.

    .venv/bin/python benchmarks/bench_streaming.py [--rows 100000 1000000] [--kill-at 0.3]

The last line: `streaming: peak driver RSS A MB at N1 rows, B MB at N2 rows (xR); resume after kill: ...`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

FAKE_READER = "cg_ray.testing.fakes:HashingReader.from_config"


class PhaseRss:
    """The driver's peak RSS (and Arrow's allocated bytes) in each phase of the runner, sampled every 0.1 s
    from /proc/self/status: where the memory goes, not only how much."""

    def __init__(self) -> None:
        self.phase = "start"
        self.peaks: dict[str, dict[str, float]] = {}
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        import pyarrow as pa

        while True:
            status = dict(
                line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line
            )
            peak = self.peaks.setdefault(self.phase, {"rss_mb": 0.0, "anon_mb": 0.0, "shmem_mb": 0.0, "arrow_mb": 0.0})
            # RssShmem: shared pages mapped in (Ray's object store, when the driver reads blocks from it).
            for key, field in (("VmRSS", "rss_mb"), ("RssAnon", "anon_mb"), ("RssShmem", "shmem_mb")):
                peak[field] = max(peak[field], round(int(status[key].split()[0]) / 1024, 1))
            peak["arrow_mb"] = max(peak["arrow_mb"], round(pa.total_allocated_bytes() / 2**20, 1))
            time.sleep(0.1)

    def wrap(self, owner: object, name: str, phase: str) -> None:
        fn = getattr(owner, name)

        def wrapped(*args: object, **kwargs: object) -> object:
            before, self.phase = self.phase, phase
            try:
                return fn(*args, **kwargs)
            finally:
                self.phase = before

        setattr(owner, name, wrapped)


def child(rows: int, out: Path, resume: bool, shard_rows: int) -> None:
    """In the child: run the pipeline, print one JSON line with its figures."""
    from cg_ray.pipeline import runner
    from cg_ray.pipeline.config import parse_run_config
    from cg_ray.pipeline.runner import RunOptions, run
    from cg_ray.pipeline.shards import ShardStore

    phases = PhaseRss()
    for owner, name, phase in [
        (runner, "_stage", "load"),
        (runner, "_compute_shards", "generate+score+read"),
        (ShardStore, "assemble", "assemble"),
        (runner, "_metrics", "metrics"),
        (runner, "describe_published_run", "describe"),
    ]:
        phases.wrap(owner, name, phase)

    kinds = ["arithmetic", "letter_count", "ordering"]
    config = parse_run_config(
        {
            "name": "stream",
            "output_dir": str(out),
            "benchmarks": [{"kind": "probes", "per_kind": -(-rows // len(kinds)), "seed": 0, "kinds": kinds}],
            "generation": {"backend": "fake", "resources": {"num_cpus": 1, "batch_size": 1024}},
            "reader": {"resources": {"num_cpus": 1, "min_actors": 1, "max_actors": 1, "batch_size": 1024}},
            "metrics": {"min_rows": 1},
        }
    )
    before = len(list((out / "stream.partial").glob("shard-*.parquet")))  # finished shards a resume skips
    start = time.monotonic()
    run_dir = run(config, RunOptions(resume=resume, shard_rows=shard_rows, reader_factory=FAKE_READER, report=False))
    import pyarrow.parquet as pq

    figures = {
        "rows": pq.read_metadata(run_dir / "rows.parquet").num_rows,
        "seconds": round(time.monotonic() - start, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "shards_found": before,
        "phases": phases.peaks,
    }
    print("FIGURES " + json.dumps(figures), flush=True)


def spawn(rows: int, out: Path, resume: bool, shard_rows: int, log: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, __file__, "--child", str(rows), "--out", str(out), "--shard-rows", str(shard_rows)]
    if resume:
        cmd.append("--resume")
    env = {**os.environ, "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "disabled")}
    return subprocess.Popen(cmd, stdout=log.open("ab"), stderr=subprocess.STDOUT, env=env, start_new_session=True)


def figures_of(log: Path) -> dict[str, float]:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.startswith("FIGURES ")]
    if not lines:
        raise RuntimeError(f"no figures; the log ends:\n{log.read_text(errors='replace')[-3000:]}")
    out: dict[str, float] = json.loads(lines[-1].removeprefix("FIGURES "))
    return out


def measure(rows: int, tmp: Path, shard_rows: int) -> dict[str, float]:
    log = tmp / f"run-{rows}.log"
    proc = spawn(rows, tmp / f"out-{rows}", False, shard_rows, log)
    if proc.wait() != 0:
        raise RuntimeError(log.read_text(errors="replace")[-3000:])
    return figures_of(log)


def kill_and_resume(rows: int, tmp: Path, shard_rows: int, kill_at: float) -> dict[str, float]:
    out = tmp / "resume"
    log = tmp / "resume.log"
    shards = out / "stream.partial"
    n_shards = -(-rows // shard_rows)
    proc = spawn(rows, out, False, shard_rows, log)
    while proc.poll() is None and len(list(shards.glob("shard-*.parquet"))) < kill_at * n_shards:
        time.sleep(0.5)
    done_at_kill = len(list(shards.glob("shard-*.parquet")))
    os.killpg(proc.pid, signal.SIGKILL)  # the child's own process group (it was started in a new session)
    proc.wait()
    time.sleep(2)
    resumed = spawn(rows, out, True, shard_rows, log)
    if resumed.wait() != 0:
        raise RuntimeError(log.read_text(errors="replace")[-3000:])
    figures = figures_of(log)
    return {**figures, "shards": n_shards, "done_at_kill": done_at_kill}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--shard-rows", type=int, default=4096)
    parser.add_argument("--kill-at", type=float, default=0.3, help="share of shards written when killed")
    parser.add_argument("--no-resume", action="store_true")
    parser.add_argument("--json", default=None)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--resume", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, Path(args.out), args.resume, args.shard_rows)
        return

    from cg_ray.hardware import hardware_info

    print(f"hardware: {hardware_info().line()}; fake generator, hashing fake reader (the driver is measured)")
    tmp = Path(tempfile.mkdtemp(prefix="cgs", dir="/tmp"))
    try:
        sizes = {}
        for rows in args.rows:
            sizes[rows] = measure(rows, tmp, args.shard_rows)
            f = sizes[rows]
            print(f"{rows:,} rows: {f['rows']:,} published in {f['seconds']} s, peak driver RSS {f['peak_rss_mb']} MB")
            for phase, peak in f["phases"].items():  # type: ignore[attr-defined]
                print(
                    f"    {phase:>20}: peak RSS {peak['rss_mb']:,.0f} MB (anonymous {peak['anon_mb']:,.0f}, "
                    f"shared {peak['shmem_mb']:,.0f}), Arrow {peak['arrow_mb']:,.0f} MB"
                )
        small, large = min(sizes), max(sizes)
        line = (
            f"streaming: peak driver RSS {sizes[small]['peak_rss_mb']:.0f} MB at {small:,} rows, "
            f"{sizes[large]['peak_rss_mb']:.0f} MB at {large:,} rows "
            f"(x{sizes[large]['peak_rss_mb'] / sizes[small]['peak_rss_mb']:.2f} for x{large / small:g} rows)"
        )
        result: dict[str, object] = {"sizes": sizes}
        if not args.no_resume:
            r = kill_and_resume(large, tmp, args.shard_rows, args.kill_at)
            result["resume"] = r
            line += (
                f"; resume after a kill at {r['done_at_kill']:.0f}/{r['shards']:.0f} shards: "
                f"{r['shards_found']:.0f} found and skipped, {r['rows']:,.0f} rows published"
            )
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1))
        print(line)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
