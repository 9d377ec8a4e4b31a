"""Autoscaling, shown: a local autoscaling Ray cluster (Ray's fake multi-node provider) scales worker nodes,
reader actors and encoder replicas up under work and back down when idle.

1. Cluster: a head with 0 task CPUs and one worker type (min 0, max `--max-nodes`, `--node-cpus` logical
   CPUs each), idle timeout `--idle-s`; the autoscaler is Ray's own, with the fake multi-node provider
   (the config of `ray.cluster_utils.AutoscalingCluster`, started without its `ray stop --force`, which
   would stop every Ray on a shared machine: this cluster's processes are ended by id).
2. Pipeline: `cg-ray run`'s Ray Data graph on `--rows` probe rows (fake generator; a tiny `from_config`
   reader, the hashing fake with `--read-delay` s per batch) with the reader pool's bounds from the config
   (min 1, max `--reader-max`), then idle until the nodes are gone.
3. Serve: the REST app on the same cluster, encoder autoscaling min 1 / max `--encoder-max` with short
   delays, a burst of concurrent `/v1/score` requests for `--burst-s`, then nothing until it scales down.

Every second it prints the worker nodes, the reader actors and the encoder replicas; the timeline is
written as JSON and a PNG (`--out`). The last line:
`autoscale: nodes A->B->C; actors D->E->F; replicas G->H->I; rows N in S s` (start -> peak -> after idle).

    .venv/bin/python benchmarks/bench_autoscale.py [--rows 480] [--out docs/figures/autoscale]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

MARKS_ENV = "CG_AUTOSCALE_MARKS"
FACTORY = "bench_autoscale:MarkedReader.from_config"
HERE = Path(__file__).resolve().parent


class MarkedReader:
    """The hashing fake, `DELAY_S` per batch, leaving a file named by its pid (and role) where the monitor
    counts live readers: Ray Data actors are unnamed, and the state API would need the dashboard."""

    DELAY_S = float(os.environ.get("CG_AUTOSCALE_DELAY", "0.3"))

    def __init__(self) -> None:
        from cg_ray.testing.fakes import HashingReader

        self.inner = HashingReader(d_sae=64)
        self.d_sae = self.inner.d_sae
        marks = os.environ.get(MARKS_ENV)
        if marks:
            role = "reader"
            try:
                from ray import serve

                serve.get_replica_context()
                role = "encoder"
            except Exception:
                pass
            Path(marks, f"{role}-{os.getpid()}").touch()

    @classmethod
    def from_config(cls, config: Any) -> MarkedReader:
        del config
        return cls()

    def read(self, texts: list[str], **kwargs: Any) -> list[Any]:
        time.sleep(self.DELAY_S)
        return self.inner.read(texts, **kwargs)

    def describe(self) -> dict[str, Any]:
        return {"model": "hashing-fake (marked, slow)", "d_sae": self.d_sae}

    def plan(self, total_tokens: int) -> None:
        self.inner.plan(total_tokens)


def live_marks(marks: Path, role: str) -> int:
    alive = 0
    for mark in marks.glob(f"{role}-*"):
        try:
            os.kill(int(mark.name.split("-", 1)[1]), 0)
            alive += 1
        except OSError:
            mark.unlink(missing_ok=True)
    return alive


class FakeCluster:
    """`ray start --head --block` with the fake multi-node autoscaler, in its own session; stopped by the
    ids of its own processes (collected before any is signalled: fake nodes would be orphaned otherwise)."""

    def __init__(self, tmp: Path, node_cpus: float, max_nodes: int, idle_s: float) -> None:
        import ray._private.services as services

        from cg_ray.testing.local_serve import free_port

        self.tmp, self.port = tmp, free_port()
        self.ip = services.get_node_ip_address()
        self.address = f"{self.ip}:{self.port}"
        self.config = {
            "cluster_name": "cg-ray-fake",
            "max_workers": max_nodes,
            "provider": {
                "type": "fake_multinode",
                "use_node_id_as_ip": True,
                "disable_node_updaters": True,
                "disable_launch_config_check": True,
                "gcs_address": self.address,
            },
            "available_node_types": {
                "ray.head.default": {"resources": {}, "node_config": {}, "max_workers": 0},
                "cpu_worker": {
                    "resources": {"CPU": node_cpus, "object_store_memory": 200 * 1024**2},
                    "node_config": {},
                    "min_workers": 0,
                    "max_workers": max_nodes,
                },
            },
            "head_node_type": "ray.head.default",
            "auth": {},
            "upscaling_speed": 1.0,
            "idle_timeout_minutes": idle_s / 60,
            "docker": {},
            **{k: [] for k in ("initialization_commands", "setup_commands", "head_setup_commands")},
            **{k: [] for k in ("worker_setup_commands", "head_start_ray_commands", "worker_start_ray_commands")},
            "file_mounts": {},
            "cluster_synced_files": [],
            "file_mounts_sync_continuously": False,
            "rsync_exclude": [],
            "rsync_filter": [],
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        cfg = self.tmp / "autoscaling.json"
        cfg.write_text(json.dumps(self.config))
        env = {**os.environ, "RAY_FAKE_CLUSTER": "1", "AUTOSCALER_UPDATE_INTERVAL_S": "1"}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH", "")) if p)
        ray_cli = Path(sys.executable).with_name("ray")
        cmd = [str(ray_cli), "start", "--head", "--block", f"--port={self.port}", f"--node-ip-address={self.ip}"]
        cmd += ["--num-cpus=0", f"--autoscaling-config={cfg}", f"--temp-dir={self.tmp / 'ray'}"]
        cmd += ["--include-dashboard=false", "--disable-usage-stats", "--object-store-memory=300000000"]
        log = (self.tmp / "head.log").open("wb")
        self.proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self) -> None:
        import psutil

        if self.proc is None:
            return
        try:
            family = [psutil.Process(self.proc.pid), *psutil.Process(self.proc.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            family = []
        self.proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(20)
        for p in family:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()


class Monitor(threading.Thread):
    """Samples the cluster every second: worker nodes, reader actors, encoder replicas; prints each sample."""

    def __init__(self, marks: Path, t0: float) -> None:
        super().__init__(daemon=True)
        self.marks, self.t0 = marks, t0
        self.phase = "start"
        self.samples: list[dict[str, Any]] = []
        self.done = threading.Event()

    def sample(self) -> dict[str, Any]:
        import ray

        nodes = sum(1 for n in ray.nodes() if n["Alive"] and "node:__internal_head__" not in n["Resources"])
        return {
            "t": round(time.monotonic() - self.t0, 1),
            "phase": self.phase,
            "nodes": nodes,
            "actors": live_marks(self.marks, "reader"),
            "replicas": encoder_replicas(),
        }

    def run(self) -> None:
        while not self.done.is_set():
            s = self.sample()
            self.samples.append(s)
            print(
                f"t={s['t']:6.1f}s {s['phase']:>13}: nodes {s['nodes']}, reader actors {s['actors']}, "
                f"encoder replicas {s['replicas']}",
                flush=True,
            )
            self.done.wait(1.0)

    def of(self, *phases: str) -> list[dict[str, Any]]:
        return [s for s in self.samples if s["phase"] in phases]


def encoder_replicas() -> int:
    from ray import serve

    try:
        app = serve.status().applications.get("cg_ray")
    except Exception:
        return 0
    if app is None or "encoder" not in app.deployments:
        return 0
    from ray.serve._private.common import ReplicaState

    return int(app.deployments["encoder"].replica_states.get(ReplicaState.RUNNING, 0))


def wait_until(check: Any, timeout: float, every: float = 1.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(every)
    return False


def run_pipeline(tmp: Path, address: str, rows: int, reader_max: int) -> tuple[int, float]:
    import logging

    import ray.data

    from cg_ray.pipeline.config import parse_run_config
    from cg_ray.pipeline.runner import RunOptions, run

    logging.getLogger("ray.data").setLevel(logging.WARNING)  # the timeline, not Ray Data's progress, is printed
    ray.data.DataContext.get_current().enable_progress_bars = False
    kinds = ["arithmetic", "letter_count", "ordering"]
    config = parse_run_config(
        {
            "name": "autoscale",
            "output_dir": str(tmp / "runs"),
            "benchmarks": [{"kind": "probes", "per_kind": -(-rows // len(kinds)), "seed": 0, "kinds": kinds}],
            "generation": {"backend": "fake", "resources": {"num_cpus": 0.5, "batch_size": 16}},
            "reader": {"resources": {"num_cpus": 1, "min_actors": 1, "max_actors": reader_max, "batch_size": 8}},
            "metrics": {"min_rows": 1},
            "ray_address": address,
        }
    )
    start = time.monotonic()
    out = run(config, RunOptions(shard_rows=8, reader_factory=FACTORY, report=False))
    seconds = time.monotonic() - start
    import pyarrow.parquet as pq

    return pq.read_metadata(out / "rows.parquet").num_rows, seconds


def run_serve(tmp: Path, monitor: Monitor, encoder_max: int, burst_s: float, clients: int) -> None:
    import asyncio

    import httpx
    from ray import serve

    from cg_ray.serve.app import ServeArgs, build_app
    from cg_ray.testing.local_serve import APP, start_proxy, tenant, texts

    port = start_proxy(proxy_location="HeadOnly")  # a port picked once Ray is up, a lost bind retried
    args = {
        "data_dir": str(tmp / "serve"),
        "ingress_num_cpus": 0,
        "encoder": {
            "reader_factory": FACTORY,
            "num_cpus": 0.5,
            "min_replicas": 1,
            "max_replicas": encoder_max,
            "target_ongoing_requests": 1,
            "max_batch_size": 2,
            "batch_wait_timeout_s": 0.0,
            "upscale_delay_s": 1,
            "downscale_delay_s": 3,
            "look_back_period_s": 2,
        },
    }
    serve.run(build_app(ServeArgs.model_validate(args)), name=APP, route_prefix="/")
    wait_until(lambda: encoder_replicas() >= 1, 60)
    headers = tenant(tmp / "serve", "bench")
    monitor.phase = "serve-start"
    time.sleep(2)

    async def burst() -> int:
        ok = 0
        stop_at = time.monotonic() + burst_s
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:

            async def one(i: int) -> None:
                nonlocal ok
                while time.monotonic() < stop_at:
                    r = await client.post("/v1/score", headers=headers, json={"texts": texts(2, i)})
                    ok += r.status_code == 200

            await asyncio.gather(*(one(i) for i in range(clients)))
        return ok

    monitor.phase = "serve-burst"
    answered = asyncio.run(burst())
    print(f"burst: {answered} /v1/score requests answered 200 in {burst_s:.0f} s from {clients} clients", flush=True)
    monitor.phase = "serve-idle"
    time.sleep(2)
    wait_until(lambda: encoder_replicas() <= 1, 90)
    time.sleep(2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=480, help="probe rows through the pipeline")
    parser.add_argument("--node-cpus", type=float, default=2, help="logical CPUs of a fake worker node")
    parser.add_argument("--max-nodes", type=int, default=4)
    parser.add_argument("--reader-max", type=int, default=3, help="reader pool: min 1, max this")
    parser.add_argument("--encoder-max", type=int, default=3, help="encoder replicas: min 1, max this")
    parser.add_argument("--idle-s", type=float, default=6, help="the autoscaler's idle timeout")
    parser.add_argument("--read-delay", type=float, default=0.5, help="seconds per reader batch of 8 rows")
    parser.add_argument("--burst-s", type=float, default=12)
    parser.add_argument("--clients", type=int, default=24)
    parser.add_argument("--out", default=None, help="write <out>.json and <out>.png (the timeline)")
    parser.add_argument("--json", default=None, help="write the figures here")
    args = parser.parse_args()

    import ray

    from cg_ray.hardware import hardware_info

    print(f"hardware: {hardware_info().line()}; fake multi-node cluster, {args.node_cpus:g} logical CPUs a node")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ["CG_AUTOSCALE_DELAY"] = str(args.read_delay)
    tmp = Path(tempfile.mkdtemp(prefix="cga", dir="/tmp"))  # short: Ray's socket paths have a length limit
    marks = tmp / "marks"
    marks.mkdir()
    os.environ[MARKS_ENV] = str(marks)
    cluster = FakeCluster(tmp, args.node_cpus, args.max_nodes, args.idle_s)
    monitor: Monitor | None = None
    figures: dict[str, Any] = {}
    try:
        cluster.start()
        env = {MARKS_ENV: str(marks), "CG_AUTOSCALE_DELAY": str(args.read_delay), "PYTHONPATH": str(HERE)}
        if not wait_until(lambda: _connect(cluster.address, env), 60):
            raise RuntimeError(f"the head did not start: {(tmp / 'head.log').read_text()[-2000:]}")
        monitor = Monitor(marks, time.monotonic())
        monitor.start()
        time.sleep(2)
        monitor.phase = "pipeline"
        n_rows, seconds = run_pipeline(tmp, cluster.address, args.rows, args.reader_max)
        print(f"pipeline: {n_rows} rows in {seconds:.1f} s", flush=True)
        monitor.phase = "pipeline-idle"
        wait_until(lambda: monitor is not None and monitor.sample()["nodes"] == 0, 90)
        time.sleep(2)
        monitor.phase = "serve"
        run_serve(tmp, monitor, args.encoder_max, args.burst_s, args.clients)
        monitor.done.set()
        monitor.join(5)
        figures = summarize(monitor, n_rows, seconds)
        write_outputs(args, monitor.samples, figures)
    finally:
        if monitor is not None:
            monitor.done.set()
        try:
            from ray import serve

            serve.shutdown()
        except Exception:
            pass
        ray.shutdown()
        cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(figures["line"], flush=True)  # last, after the shutdown (whose log lines Ray may print)


def _connect(address: str, env: dict[str, str]) -> bool:
    import ray

    try:
        ray.init(address=address, log_to_driver=False, runtime_env={"env_vars": env})
        return True
    except Exception:
        return False


def summarize(monitor: Monitor, n_rows: int, seconds: float) -> dict[str, Any]:
    pipe = monitor.of("start", "pipeline", "pipeline-idle")
    serve_ = monitor.of("serve-start", "serve-burst", "serve-idle")
    triple = {
        "nodes": [pipe[0]["nodes"], max(s["nodes"] for s in pipe), pipe[-1]["nodes"]],
        "actors": [pipe[0]["actors"], max(s["actors"] for s in pipe), pipe[-1]["actors"]],
        "replicas": [serve_[0]["replicas"], max(s["replicas"] for s in serve_), serve_[-1]["replicas"]],
    }
    arrows = "; ".join(f"{k} {'->'.join(map(str, v))}" for k, v in triple.items())
    return {
        **triple,
        "rows": n_rows,
        "pipeline_s": round(seconds, 1),
        "line": f"autoscale: {arrows}; rows {n_rows} in {seconds:.1f} s",
    }


def write_outputs(args: argparse.Namespace, samples: list[dict[str, Any]], figures: dict[str, Any]) -> None:
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(f"{args.out}.json").write_text(json.dumps({"figures": figures, "samples": samples}, indent=1))
        from autoscale_plot import plot_timeline

        plot_timeline(samples, Path(f"{args.out}.png"), figures["line"])


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
