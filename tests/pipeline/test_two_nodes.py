"""A real 2-node Ray cluster on one machine: the reader actors spread over both nodes, and the artifacts
equal those of a single-node run. In its own module: it needs clusters of its own."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from cg_ray.pipeline.config import parse_run_config
from cg_ray.pipeline.runner import RunOptions, run
from tests.conftest import ray_test_cluster

from .test_runner import FAKE_READER, comparable, config_dict


@pytest.mark.slow
def test_two_node_cluster_spreads_reader_actors_and_matches_one_node(tmp_path: Path) -> None:
    import ray

    env_before = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    temp = tempfile.mkdtemp(prefix="cgc", dir="/tmp")
    try:
        with ray_test_cluster(num_cpus=4, temp_dir=temp, include_dashboard=False) as cluster:
            cluster.add_node(num_cpus=4)
            cluster.wait_for_nodes()
            ray.init(address=cluster.address, log_to_driver=False)
            cfg = config_dict(tmp_path / "two", per_kind=24)
            # 3 logical CPUs per reader actor: two cannot share a 4-CPU node, and 1 CPU per node stays free for
            # Ray Data's own tasks (otherwise they starve).
            cfg["reader"]["resources"] = {"num_cpus": 3, "min_actors": 2, "max_actors": 2, "batch_size": 4}
            # The slow fake (same outputs, 0.5 s a batch) keeps the work long enough for both actors to take
            # some, whichever starts first.
            slow = "cg_ray.testing.fakes:SlowHashingReader.from_config"
            out = run(parse_run_config(cfg), RunOptions(shard_rows=4, reader_factory=slow, report=False))
            nodes = json.loads((out / "manifest.json").read_text())["counts"]["rows_per_reader_node"]
            assert len(nodes) == 2 and all(n > 0 for n in nodes.values()), nodes
    finally:
        shutil.rmtree(temp, ignore_errors=True)
        if env_before is None:
            os.environ.pop("RAY_AUTH_MODE", None)
    ray.init(
        num_cpus=2, include_dashboard=False, _temp_dir=tempfile.mkdtemp(prefix="cg1", dir="/tmp"), log_to_driver=False
    )
    try:
        single = run(
            parse_run_config(config_dict(tmp_path / "one", per_kind=24)),
            RunOptions(shard_rows=4, reader_factory=FAKE_READER, report=False),
        )
    finally:
        ray.shutdown()
    assert comparable(out) == comparable(single)
