"""The run's resources fitted to its cluster: what the job needs, the pools clamped to what fits, and the
refusal (naming what is missing) of a cluster that cannot host it. Pure computation, no Ray."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cg_ray.errors import ConfigError
from cg_ray.generation.vllm import LIGHT_STAGE_MEMORY, LIGHT_STAGES
from cg_ray.pipeline.cluster_fit import TASK_CPUS, Cluster, fit, legacy_autoscaler
from cg_ray.pipeline.config import RunConfig, load_run_config, parse_run_config

DEFAULT_JOB = Path(__file__).resolve().parents[2] / "jobs" / "default.yaml"


def cluster(
    cpus: float, gpus: float = 0.0, nodes: int = 1, autoscaled: bool = False, memory_gib: float = float("inf")
) -> Cluster:
    return Cluster(cpus, gpus, cpus / nodes, gpus / nodes, autoscaled, memory_gib * 2**30)


def job(generation: dict[str, Any] | None = None, reader: dict[str, Any] | None = None, **more: Any) -> RunConfig:
    return parse_run_config(
        {
            "benchmarks": [{"kind": "probes", "per_kind": 3}],
            "generation": {"backend": "vllm", "resources": {"num_cpus": 0.5}, **(generation or {})},
            "reader": {"resources": {"num_cpus": 0.25}, **(reader or {})},
            **more,
        }
    )


def test_the_default_job_fits_a_two_cpu_cluster_and_nothing_smaller() -> None:
    config = load_run_config(DEFAULT_JOB)
    plan = fit(config, cluster(2))
    assert plan.needs_cpus == pytest.approx(1.9)  # engine 0.5 + light stages 3 × 0.05 + reader 0.25 + a task 1
    assert (plan.engine_actors, plan.reader_actors) == (1, 1)
    with pytest.raises(ConfigError) as refused:
        fit(config, cluster(1.5))
    assert str(refused.value) == (
        "the job needs 1.9 CPUs (engine 0.5, light vLLM stages 0.15, reader 0.25, Ray Data tasks 1) but the "
        "cluster has 1.5; add CPUs or lower generation.resources.num_cpus / reader.resources.num_cpus"
    )


def test_the_old_whole_cpu_defaults_are_refused_on_two_cpus_naming_each_share() -> None:
    config = job({"resources": {"num_cpus": 1}}, {"resources": {"num_cpus": 1}})
    with pytest.raises(ConfigError, match=r"needs 3\.15 CPUs \(engine 1, light vLLM stages 0\.15, reader 1, "):
        fit(config, cluster(2))
    assert fit(config, cluster(4)).needs_cpus == pytest.approx(3.15)


def test_pools_grow_to_what_fits_but_never_past_the_configured_max() -> None:
    config = job({"resources": {"num_cpus": 1, "max_actors": 2}}, {"resources": {"num_cpus": 1, "max_actors": 8}})
    # 4 CPUs: one of each (1.15 + 1) and a task (1) leave 0.85: no second actor of either pool.
    plan = fit(config, cluster(4))
    assert (plan.engine_actors, plan.reader_actors) == (1, 1)
    # 8 CPUs: 4.85 spare, taken one actor at a time, pool by pool: a 2nd engine (1.15), then readers.
    plan = fit(config, cluster(8))
    assert (plan.engine_actors, plan.reader_actors) == (2, 4)
    plan = fit(config, cluster(100))
    assert (plan.engine_actors, plan.reader_actors) == (2, 8)


def test_apply_clamps_only_max_actors_and_keeps_the_explicit_values() -> None:
    config = job({"resources": {"num_cpus": 1, "max_actors": 3}}, {"resources": {"num_cpus": 0.5, "max_actors": 16}})
    # 4 CPUs: 1.15 + 0.5 + 1 leave 1.35: a 2nd engine (1.15) fits, then no 2nd reader (0.5).
    fitted = fit(config, cluster(4)).apply(config)
    assert fitted.generation.resources.model_dump() == {**config.generation.resources.model_dump(), "max_actors": 2}
    assert fitted.reader.resources.model_dump() == {**config.reader.resources.model_dump(), "max_actors": 1}
    assert fitted.reader.reader_config() == config.reader.reader_config()
    assert config.reader.resources.max_actors == 16  # the config itself (fingerprint, manifest) is unchanged


def test_min_actors_must_fit_and_the_message_says_so() -> None:
    config = job(reader={"resources": {"num_cpus": 1, "min_actors": 3, "max_actors": 3}})
    with pytest.raises(ConfigError) as refused:
        fit(config, cluster(4))
    assert "reader 3 × 1" in str(refused.value)
    assert str(refused.value).endswith("reader.resources.num_cpus or min_actors")


def test_an_actor_larger_than_any_node_is_refused() -> None:
    config = job(reader={"resources": {"num_cpus": 3}})
    with pytest.raises(ConfigError, match="one reader actor needs 3 CPUs and 0 GPUs on one node, but the largest"):
        fit(config, cluster(8, nodes=4))
    assert fit(config, cluster(8, nodes=2)).reader_actors == 1


def test_no_engine_pool_for_the_fake_backend() -> None:
    config = job({"backend": "fake"}, {"resources": {"num_cpus": 1}})
    plan = fit(config, cluster(2))
    assert plan.engine is None and plan.needs_cpus == pytest.approx(1 + TASK_CPUS)


def test_gpu_engines_need_gpus_unless_an_autoscaler_can_add_them() -> None:
    config = job({"resources": {"num_cpus": 1, "num_gpus": 1}, "engine": {"tensor_parallel_size": 2}})
    with pytest.raises(ConfigError) as refused:
        fit(config, cluster(16, gpus=1))
    assert "the job needs 2 GPUs (engine 2) but the cluster has 1; add GPUs" in str(refused.value)
    assert "CPUs (" not in str(refused.value)  # 16 CPUs are plenty
    plan = fit(config, Cluster(64, 8, float("inf"), float("inf"), autoscaled=True))
    assert plan.engine_actors == 1 and plan.engine is not None and plan.engine.cpus == 2


def test_the_judge_engine_runs_beside_the_generation_engine_when_rows_are_judged() -> None:
    judged = [{"kind": "probes", "per_kind": 3}, {"kind": "local", "path": "chat.jsonl", "scorer": "judge"}]
    config = job(judge={"backend": "vllm", "resources": {"num_cpus": 2}}, benchmarks=judged)
    # The judge pass streams behind the generation: both engines at once (0.65 + 2.15), the reader, a task.
    with pytest.raises(ConfigError) as refused:
        fit(config, cluster(4))
    assert str(refused.value) == (
        "the job needs 4.05 CPUs (engine 0.5, light vLLM stages 0.15, judge engine 2, light vLLM stages 0.15, "
        "reader 0.25, Ray Data tasks 1) but the cluster has 4; add CPUs or lower generation.resources.num_cpus / "
        "judge.resources.num_cpus / reader.resources.num_cpus"
    )
    plan = fit(config, cluster(4.05))
    assert (plan.engine_actors, plan.judge_actors, plan.reader_actors) == (1, 1, 1)
    assert plan.apply(config).judge_config().resources.max_actors == 1
    # The default judge is the generation model: a second pool of the generation engine's shape.
    plan = fit(job(benchmarks=judged), cluster(4))
    assert plan.needs_cpus == pytest.approx(2 * 0.65 + 0.25 + TASK_CPUS) and plan.judge_actors == 1
    # A judge configured for a suite that no judge scores starts no engine and needs nothing.
    plan = fit(job(judge={"backend": "vllm", "resources": {"num_cpus": 2}}), cluster(2))
    assert plan.judge is None and plan.judge_actors == 0 and plan.needs_cpus == pytest.approx(1.9)


def test_of_ray_reads_the_connected_cluster(ray_module: None) -> None:
    import ray

    got = Cluster.of_ray()
    assert got == Cluster(2.0, 0.0, 2.0, 0.0, False, memory=got.memory, largest_node_memory=got.memory)
    assert got.memory == pytest.approx(ray.cluster_resources()["memory"]) and got.memory > 2**30


def test_reserved_memory_is_counted_and_a_cluster_without_it_is_refused_naming_each_share() -> None:
    config = load_run_config(DEFAULT_JOB)  # the reader reserves 1 GiB, the light vLLM stages 3 × 0.625
    plan = fit(config, cluster(2, memory_gib=8))
    assert plan.reserved_memory == LIGHT_STAGES * LIGHT_STAGE_MEMORY + 2**30
    assert plan.as_dict()["reserved_memory_gib"] == 2.88 and plan.as_dict()["cluster_memory_gib"] == 8.0
    with pytest.raises(ConfigError) as refused:
        fit(config, cluster(2, memory_gib=2))
    assert str(refused.value) == (
        "the job reserves 2.88 GiB of memory (light vLLM stages 3 × 0.62, reader 1.00) but the cluster offers "
        "Ray 2.00 GiB; add memory (nodes, or `ray start --memory`) or lower reader.resources.memory_gib"
    )
    # Memory, like CPUs, caps how far a pool grows: room for 2 engines' light stages, not 4.
    grown = job({"resources": {"num_cpus": 0.5, "max_actors": 4}})
    assert fit(grown, cluster(16, memory_gib=4)).engine_actors == 2
    assert fit(grown, cluster(16)).engine_actors == 4
    readers = job(reader={"resources": {"num_cpus": 0.25, "max_actors": 8, "memory_gib": 3}})
    assert fit(readers, cluster(16, memory_gib=10)).reader_actors == 2  # 1.88 + 2 × 3 ≤ 10 < 1.88 + 3 × 3
    # One actor's reservation must fit one node: two nodes of 5 GiB cannot host a 6 GiB reader.
    big = job(reader={"resources": {"num_cpus": 0.25, "memory_gib": 6}})
    two_nodes = Cluster(16, 0, 8, 0, memory=10 * 2**30, largest_node_memory=5 * 2**30)
    with pytest.raises(ConfigError, match=r"^one reader actor reserves 6\.00 GiB of memory, but the largest node"):
        fit(big, two_nodes)


def test_memory_is_reserved_where_the_config_asks_and_refused_where_nothing_can_take_it() -> None:
    from cg_ray.generation.config import GenerationConfig
    from cg_ray.generation.vllm import engine_bundle

    cpu = GenerationConfig.model_validate({"backend": "vllm", "resources": {"num_cpus": 1, "memory_gib": 2}})
    assert engine_bundle(cpu) == {"CPU": 1, "memory": 2 * 2**30}
    assert engine_bundle(GenerationConfig.model_validate({"backend": "vllm"})) == {"CPU": 1.0}
    with pytest.raises(ValueError, match="memory_gib applies to CPU vLLM engines"):
        GenerationConfig.model_validate({"backend": "vllm", "resources": {"num_gpus": 1, "memory_gib": 2}})


def test_a_v1_autoscaler_is_told_from_a_fixed_cluster_by_its_node_types() -> None:
    # The v1 monitor's status (`ray status`) as Ray 2.60 writes it: with an autoscaling config its report
    # names node types; without one each node is its own type, `node_<id>`.
    autoscaling = {"autoscaler_report": {"active_nodes": {"head_cpu": 1}, "node_type_mapping": {"ab12": "head_cpu"}}}
    fixed = {"autoscaler_report": {"active_nodes": {"node_ab12": 1}, "node_type_mapping": {"ab12": "node_ab12"}}}
    assert legacy_autoscaler(autoscaling)
    assert not legacy_autoscaler(fixed) and not legacy_autoscaler(None) and not legacy_autoscaler({})
    # Its maximum is unknown: the run keeps its configured pools and records no cluster size.
    plan = fit(job(), Cluster(float("inf"), float("inf"), float("inf"), float("inf"), autoscaled=True))
    assert plan.as_dict()["cluster_cpus"] is None and plan.as_dict()["autoscaled"] is True


def test_the_vllm_processor_asks_for_what_the_plan_counts() -> None:
    from cg_ray.generation.vllm import LIGHT_STAGE_CPUS, processor_config

    config = job({"resources": {"num_cpus": 0.5, "min_actors": 1, "max_actors": 2}})
    processor = processor_config(config.generation, "/m")
    assert processor.placement_group_config["bundles"] == [{"CPU": 0.5, "GPU": 0.0}]  # a share, not rounded up
    for stage in (processor.chat_template_stage, processor.tokenize_stage, processor.detokenize_stage):
        memory = {"memory": LIGHT_STAGE_MEMORY}  # reserved: cluster_fit counts it (the next test)
        assert stage == {"enabled": True, "num_cpus": LIGHT_STAGE_CPUS, **memory, "concurrency": (1, 2)}
    assert fit(config, cluster(2)).engine.cpus_per_actor == pytest.approx(0.5 + 3 * LIGHT_STAGE_CPUS)  # type: ignore[union-attr]


def test_a_reader_pool_alone_is_clamped_and_refused_the_same_way() -> None:
    from cg_ray.generation.config import StageResources
    from cg_ray.pipeline.cluster_fit import fit_reader_pool

    wanted = StageResources(num_cpus=0.5, max_actors=8, batch_size=4)
    assert fit_reader_pool(wanted, cluster(2)) == wanted.model_copy(update={"max_actors": 2})  # 1 + 2 × 0.5
    assert fit_reader_pool(wanted, cluster(100)).max_actors == 8
    with pytest.raises(ConfigError, match=r"needs 2 CPUs \(reader 1, Ray Data tasks 1\) but the cluster has 1;"):
        fit_reader_pool(StageResources(num_cpus=1), cluster(1))


@pytest.mark.parametrize(
    ("resources", "where", "message"),
    [
        ({"reader": {"resources": {"memory_gib": -1}}}, "reader.resources.memory_gib", "greater than 0"),
        ({"reader": {"resources": {"memory_gib": "lots"}}}, "reader.resources.memory_gib", "valid number"),
        (
            {"generation": {"backend": "vllm", "resources": {"num_gpus": 1, "memory_gib": 2}}},
            "generation",
            "memory_gib applies to CPU vLLM engines",
        ),
    ],
)
def test_a_bad_memory_gib_is_a_config_error_naming_the_file_and_key(
    resources: dict[str, Any], where: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=rf"^job\.yaml: {where}: .*{message}"):
        parse_run_config({"benchmarks": [{"kind": "probes", "per_kind": 3}], **resources}, source="job.yaml")
