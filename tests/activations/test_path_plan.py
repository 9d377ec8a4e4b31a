"""`packing: auto` and `compile: auto` choose from recorded figures per device kind: the built-in ones
(never the packed SDPA loop on CUDA, measured slower there) and figures planted in the cg_ray cache."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cg_ray.activations import compile_plan, path_plan
from cg_ray.activations.reader import ConceptReader, choose_path
from cg_ray.hardware import hardware_info

from .conftest import reader_config
from .test_varlen import TEXTS

ALL = {"packed-flex": None, "packed-sdpa": None, "padded": None}


def test_builtin_figures_choose_padded_on_cuda_and_packed_on_cpu() -> None:
    cuda = path_plan.choose("auto", ALL, path_plan.BUILTIN["cuda"], "cuda")
    assert cuda.path == "padded" and not cuda.packed  # kernel rates alone: padded 49,676 > flex 47,788
    assert cuda.rates == {"packed-flex": 47_788.0, "packed-sdpa": 22_174.0, "padded": 49_676.0}
    assert path_plan.choose("auto", ALL, path_plan.BUILTIN["cpu"], "cpu").path == "packed-sdpa"
    # Gemma-2 (no SDPA kernel) on CUDA: padded unless the job's rows say otherwise
    gemma = {**ALL, "packed-sdpa": "attention logit soft-capping (SDPA has none)"}
    assert path_plan.choose("auto", gemma, path_plan.BUILTIN["cuda"], "cuda").path == "padded"
    # nothing measured: the path doing the least work; one usable path: that one
    assert path_plan.choose("auto", ALL, {}, "mps").path == "packed-flex"
    assert path_plan.choose("false", {"padded": None}, path_plan.BUILTIN["cuda"], "cuda").path == "padded"
    assert "not measured" in path_plan.choose("auto", ALL, {"padded": path_plan.PathRate(1.0, "x")}, "cuda").reason


FLEX_FILL = {"packed-sdpa": 1.0, "packed-flex": 0.98}


@pytest.mark.parametrize(
    ("job", "cuda", "cpu"),
    [  # issue #41's H200 suites: longest-first padding 5.4% (uniform) / 11.9% (skewed); GSM8K on the CPU
        (path_plan.JobShape(10**6, 0.054, 0.0, FLEX_FILL), "padded", "packed-sdpa"),
        (path_plan.JobShape(10**6, 0.119, 0.0, FLEX_FILL), "packed-flex", "packed-sdpa"),
        (path_plan.JobShape(10**6, 0.054, 0.45, FLEX_FILL), "packed-flex", "packed-sdpa"),  # 8 answers, 1 question
        (path_plan.JobShape(13_826, 0.013, 0.236, FLEX_FILL), "packed-flex", "packed-sdpa"),
        (path_plan.JobShape(10**6, 0.0, 0.0, {"packed-sdpa": 1.0, "packed-flex": 0.5}), "padded", "packed-sdpa"),
    ],
    ids=["uniform-sorted", "skewed", "shared-prefix", "gsm8k", "half-empty-flex"],
)
def test_packing_auto_weighs_the_jobs_shares(job: path_plan.JobShape, cuda: str, cpu: str) -> None:
    """A sorted uniform suite stays padded on CUDA, a skewed or shared-prefix one packs; the arithmetic
    is in the reason."""
    got = path_plan.choose("auto", ALL, path_plan.BUILTIN["cuda"], "cuda", job)
    assert got.path == cuda, got.reason
    assert got.job == job and got.predicted is not None and set(got.predicted) == set(ALL)
    assert "this job" in got.reason and "% padding" in got.reason and "% shared" in got.reason
    assert got.describe()["job"]["padding_share"] == job.padding_share  # type: ignore[index]
    assert path_plan.choose("auto", ALL, path_plan.BUILTIN["cpu"], "cpu", job).path == cpu
    padded = path_plan.BUILTIN["cuda"]["padded"].tokens_per_s * (1 - job.padding_share)
    assert got.predicted["padded"] == pytest.approx(padded)


def test_job_shape_from_the_rows() -> None:
    from cg_ray.activations.config import ReaderConfig
    from cg_ray.activations.reader import job_shape

    config = ReaderConfig(token_budget=256, min_shared_tokens=4)
    same = [[i + 3] + [5] * 31 for i in range(16)]  # equal lengths, no common prefix: no padding, no sharing
    shape = job_shape(same, config, "cpu")
    assert shape.padding_share == 0 and shape.shared_share == 0 and shape.tokens == 512
    assert shape.fill == {"packed-sdpa": 1.0, "packed-flex": 1.0}  # two full 256-token batches
    question = list(range(3, 43))
    shared = [question + [50 + i] * (4 + i) for i in range(8)]
    shape = job_shape(shared, config, "cpu")
    assert 0 < shape.padding_share < 0.05 and 0.5 < shape.shared_share < 0.8
    assert shape.fill["packed-flex"] == 100 / 256  # 40 + 60 tokens forwarded in a 256-slot static length


@pytest.mark.parametrize(
    ("planted", "want"),
    [
        ({"packed-flex": 60_000.0}, "packed-flex"),  # measured faster than padded: taken
        ({"packed-flex": 30_000.0}, "padded"),  # measured, slower
        ({"packed-sdpa": 60_000.0}, "packed-sdpa"),
    ],
)
def test_planted_figures_give_the_planted_choice(tmp_path: Path, planted: dict[str, float], want: str) -> None:
    records = tmp_path / "reader_paths.json"
    for name, rate in planted.items():
        path_plan.record_rate("cuda", "gpu box", name, path_plan.PathRate(rate, "planted"), records)
    rates = path_plan.recorded_rates("cuda", "gpu box", records)
    assert rates["padded"] == path_plan.BUILTIN["cuda"]["padded"]  # what was not recorded stays built-in
    assert path_plan.choose("auto", ALL, rates, "cuda").path == want
    assert path_plan.recorded_rates("cuda", "another box", records) == path_plan.BUILTIN["cuda"]
    records.write_text("not json")
    assert path_plan.recorded_rates("cuda", "gpu box", records) == path_plan.BUILTIN["cuda"]
    with pytest.raises(ValueError, match="unknown reader path"):
        path_plan.record_rate("cuda", "gpu box", "packed", path_plan.PathRate(1.0, "x"), records)


def _reader(model: Path, sae: str, **kw: Any) -> ConceptReader:
    return ConceptReader.from_config(reader_config(model=str(model), sae=sae, **kw))


def test_the_reader_records_what_packing_auto_chose_and_why(
    tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sae = f"saelens-disk:{tiny_sae_dir('topk')}"
    monkeypatch.setenv("CG_RAY_CACHE", str(tmp_path))
    default = _reader(tiny_model_dir, sae)  # built-in CPU figures: packed with the SDPA kernel, as before
    decision = default.describe()["packing_decision"]
    assert default.packed and default.kernel == "sdpa" and decision["path"] == "packed-sdpa"
    assert decision["requested"] == "auto" and "fastest recorded on cpu" in decision["reason"]
    default.read(TEXTS)  # `auto` weighs the job's own rows at the first read, and says so
    weighed = default.describe()["packing_decision"]
    assert weighed["job"] is not None and "this job" in weighed["reason"] and default.kernel == "sdpa"
    # this model on CUDA with the built-in figures: padded, never the packed SDPA loop
    assert choose_path(default.config, default.model.base, "cuda").path == "padded"
    machine = hardware_info().line()
    path_plan.record_rate("cpu", machine, "padded", path_plan.PathRate(10**6, "planted"))
    planted = _reader(tiny_model_dir, sae)
    assert not planted.packed and planted.describe()["packing_decision"]["path"] == "padded"
    assert "planted" in (planted.packing_off or "")
    forced = _reader(tiny_model_dir, sae, packing=True)  # an explicit setting is not overridden by figures
    assert forced.packed


def test_compile_auto_follows_planted_figures(
    tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A planted cost that pays on any job compiles (compilation stubbed out); the built-in one does not."""
    sae = f"saelens-disk:{tiny_sae_dir('topk')}"
    monkeypatch.setenv("CG_RAY_CACHE", str(tmp_path))
    monkeypatch.setattr(ConceptReader, "_compile", lambda self: setattr(self, "compiled", True))
    builtin = _reader(tiny_model_dir, sae, compile="auto")
    builtin.read(TEXTS)
    assert not builtin.compiled and builtin.compile_decision is not None
    assert builtin.compile_decision.cost == compile_plan.BUILTIN["cpu"]
    cost = compile_plan.CompileCost(compile_s=1e-9, speedup=100.0, source="planted")
    compile_plan.record_compile("cpu", hardware_info().line(), cost)
    planted = _reader(tiny_model_dir, sae, compile="auto")
    planted.read(TEXTS[:1])
    decision = planted.describe()["compile_decision"]
    assert planted.compiled and decision["compile"] and decision["cost"]["source"] == "planted"
    assert json.loads((tmp_path / "compile_costs.json").read_text())  # the record the decision read
