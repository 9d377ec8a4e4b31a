"""cluster.yaml is valid for the Ray cluster launcher and asks for what the pipeline needs."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

CLUSTER = Path(__file__).resolve().parents[2] / "cluster.yaml"


@pytest.fixture(scope="module")
def config() -> dict:
    return yaml.safe_load(CLUSTER.read_text())


def test_valid_against_rays_schema(config) -> None:
    # What `ray up` does before touching the cloud: fill in the provider defaults, then validate.
    validate_config(prepare_config(config))


def test_cpu_head_and_autoscaling_gpu_workers(config) -> None:
    types = config["available_node_types"]
    head = types[config["head_node_type"]]
    assert head["resources"].get("GPU", 0) == 0
    gpu_types = [t for name, t in types.items() if t["resources"].get("GPU", 0) > 0]
    assert gpu_types, "no GPU worker type"
    for t in gpu_types:
        assert t["min_workers"] == 0 < t["max_workers"] <= config["max_workers"]
    assert any('".[gpu]"' in cmd for cmd in config["setup_commands"])


def test_schema_rejects_a_broken_config(config) -> None:
    broken = {**config, "available_node_types": {**config["available_node_types"]}}
    broken["available_node_types"]["head_cpu"] = {**broken["available_node_types"]["head_cpu"], "typo": 1}
    with pytest.raises(jsonschema.ValidationError):
        validate_config(prepare_config(broken))
