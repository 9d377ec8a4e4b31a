"""`dtype: auto` follows the hardware: the capability probe is mocked, so every branch runs on any machine."""

from __future__ import annotations

import pytest

from cg_ray import hardware
from cg_ray.activations.config import ReaderConfig
from cg_ray.generation.config import GenerationConfig
from cg_ray.generation.vllm import generation_dtype
from cg_ray.sae_training.sae_train import SaeTrainConfig, resolve_training_precision

AVX2_FLAGS = frozenset({"sse4_2", "avx", "avx2", "fma"})
BF16_FLAGS = AVX2_FLAGS | {"avx512f", "avx512_bf16"}


@pytest.fixture
def cpu(monkeypatch: pytest.MonkeyPatch):
    """Pretend to be a CPU with the given flags and torch capability."""

    def set_cpu(flags: frozenset[str], capability: str) -> None:
        monkeypatch.setattr(hardware, "cpu_flags", lambda: flags)
        monkeypatch.setattr(hardware, "cpu_capability", lambda: capability)

    return set_cpu


def test_auto_is_float32_on_a_cpu_without_native_bf16(cpu) -> None:
    cpu(AVX2_FLAGS, "AVX2")
    assert not hardware.cpu_has_native_bf16()
    assert hardware.resolve_dtype("auto", "cpu") == "float32"


@pytest.mark.parametrize(
    ("flags", "capability"),
    [
        (BF16_FLAGS, "AVX512"),  # the flag alone
        (AVX2_FLAGS | {"amx_bf16", "amx_tile"}, "AVX512"),  # AMX
        (AVX2_FLAGS, "AVX512_BF16"),  # torch's capability alone
        (frozenset({"fp", "asimd", "bf16"}), "DEFAULT"),  # aarch64 Features
    ],
)
def test_auto_is_bfloat16_where_the_cpu_has_native_bf16(cpu, flags, capability) -> None:
    cpu(flags, capability)
    assert hardware.resolve_dtype("auto", "cpu") == "bfloat16"


def test_explicit_dtypes_are_kept_and_unknown_ones_refused(cpu) -> None:
    cpu(AVX2_FLAGS, "AVX2")
    assert hardware.resolve_dtype("bfloat16", "cpu") == "bfloat16"
    assert hardware.resolve_dtype("float32", "cuda") == "float32"
    with pytest.raises(ValueError, match="int8"):
        hardware.resolve_dtype("int8", "cpu")


def test_auto_on_cuda_asks_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert hardware.resolve_dtype("auto", "cuda:0") == "bfloat16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert hardware.resolve_dtype("auto", "cuda") == "float16"


def test_defaults_are_auto_everywhere() -> None:
    assert ReaderConfig().dtype == "auto"
    assert GenerationConfig().engine.dtype == "auto"
    assert SaeTrainConfig().bf16 == "auto"


def test_vllm_cpu_engine_gets_the_resolved_dtype(cpu) -> None:
    cpu(AVX2_FLAGS, "AVX2")
    assert generation_dtype(GenerationConfig()) == "float32"
    cpu(BF16_FLAGS, "AVX512")
    assert generation_dtype(GenerationConfig()) == "bfloat16"
    # On GPU engines vLLM's own auto (the checkpoint's dtype) is kept.
    gpu = GenerationConfig.model_validate({"resources": {"num_gpus": 1}})
    assert generation_dtype(gpu) == "auto"


def test_sae_training_autocasts_only_where_bf16_is_native(cpu) -> None:
    cpu(AVX2_FLAGS, "AVX2")
    assert resolve_training_precision(SaeTrainConfig(device="cpu")) == ("cpu", False)
    cpu(BF16_FLAGS, "AVX512")
    assert resolve_training_precision(SaeTrainConfig(device="cpu")) == ("cpu", True)


def test_hardware_info_reads_this_machine() -> None:
    info = hardware.hardware_info()
    assert info.cores >= 1 and info.cpu_capability
    assert info.native_bf16 == hardware.cpu_has_native_bf16()
    assert "CPU" in info.line()


def test_a_local_cpu_engine_binds_its_threads_to_every_core(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from cg_ray.generation.vllm import cpu_engine_env, processor_config

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 3})
    assert cpu_engine_env(GenerationConfig()) == {
        "VLLM_CPU_OMP_THREADS_BIND": "0,1,3",
        "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
    }
    explicit = GenerationConfig.model_validate({"engine": {"cpu_threads_bind": "0-7"}})
    assert cpu_engine_env(explicit)["VLLM_CPU_OMP_THREADS_BIND"] == "0-7"
    assert cpu_engine_env(GenerationConfig.model_validate({"engine": {"cpu_threads_bind": "auto"}})) == {}
    assert cpu_engine_env(GenerationConfig.model_validate({"resources": {"num_gpus": 1}})) == {}
    assert cpu_engine_env(GenerationConfig.model_validate({"backend": "fake"})) == {}
    # max_num_seqs reaches the engine only when set.
    tuned = GenerationConfig.model_validate({"engine": {"max_num_seqs": 64}})
    assert processor_config(tuned, "/m").engine_kwargs["max_num_seqs"] == 64
    assert "max_num_seqs" not in processor_config(GenerationConfig(), "/m").engine_kwargs


@pytest.mark.parametrize(
    "engine",
    [{"cpu_threads_bind": "banana"}, {"cpu_threads_bind": "0-"}, {"max_num_seqs": 0}, {"dtype": "int8"}],
)
def test_bad_engine_settings_are_refused_naming_the_field(engine: dict) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=next(iter(engine))):
        GenerationConfig.model_validate({"engine": engine})


def test_bad_training_device_and_ingress_limit_are_refused() -> None:
    from pydantic import ValidationError

    from cg_ray.serve.app import ServeArgs

    with pytest.raises(ValidationError, match="device"):
        SaeTrainConfig(device="gpu0")
    assert SaeTrainConfig(device="cuda:1").device == "cuda:1"
    with pytest.raises(ValidationError, match="ingress_max_ongoing_requests"):
        ServeArgs(ingress_max_ongoing_requests=0)
