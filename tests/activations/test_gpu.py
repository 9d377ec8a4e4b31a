"""The reader on a CUDA device (marked `gpu`; skipped where there is none): float32 on the GPU equals the
CPU path, `dtype: auto` becomes bfloat16 there and stays close to float32."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from cg_ray.activations.reader import ConceptReader

from .conftest import LAYER, npz_sae, reader_config

pytestmark = pytest.mark.gpu

TEXTS = ["the cat eats eggs", "a red dog runs to the sea and back", "green"]


def _dense(reader: ConceptReader) -> np.ndarray:
    out = np.zeros((len(TEXTS), reader.d_sae))
    for i, row in enumerate(reader.read(TEXTS)):
        out[i, row.concept_ids] = row.concept_acts
    return out


@pytest.fixture
def cuda() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")


def test_cuda_reader_equals_cpu_and_auto_is_bfloat16(cuda: None, tiny_model_dir: Path, tmp_path: Path) -> None:
    sae = f"npz:{npz_sae(tmp_path / 'params.npz')}"
    common = {"model": str(tiny_model_dir), "sae": sae, "layer": LAYER}
    cpu = _dense(ConceptReader.from_config(reader_config(**common, dtype="float32", device="cpu")))
    gpu32 = _dense(ConceptReader.from_config(reader_config(**common, dtype="float32", device="cuda")))
    auto = ConceptReader.from_config(reader_config(**common, dtype="auto", device="cuda"))
    assert auto.describe()["dtype"] == "bfloat16" and auto.describe()["device"].startswith("cuda")
    scale = np.abs(cpu).max()
    assert scale > 0
    assert np.abs(gpu32 - cpu).max() <= 1e-4 * scale
    assert np.abs(_dense(auto) - cpu).max() < 0.1 * scale


NEW_TEXTS = ["the dog runs to the river", "a small car", "one two three four five six seven eight nine ten"]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager-model", "compiled-model"])
@pytest.mark.parametrize("family", ["llama", "gemma2"])
def test_flex_on_cuda_equals_padded_with_no_recompiles(
    cuda: None, family: str, compiled: bool, tiny_model_dir: Path, tiny_gemma2_dir: Path, tmp_path: Path
) -> None:
    """Issue #41 on a GPU: the packed FlexAttention path (compiled kernel in an eager model, or inline in a
    compiled model, inductor, dynamic=False) == padded in float32; new lengths compile nothing."""
    from cg_ray.activations import flex

    torch._dynamo.reset()
    model = tiny_model_dir if family == "llama" else tiny_gemma2_dir
    common = {
        "model": str(model), "sae": f"npz:{npz_sae(tmp_path / 'params.npz')}", "layer": LAYER,
        "dtype": "float32", "device": "cuda", "token_budget": 64, "min_shared_tokens": 4,
    }  # fmt: skip
    padded = ConceptReader.from_config(reader_config(**common, packing=False))
    reader = ConceptReader.from_config(reader_config(**common, packing=True, packed_attention="flex", compile=compiled))
    want, got = _dense(padded), _dense(reader)
    assert reader.kernel == "flex" and reader.fallback is None and reader.compiled == compiled
    scale = np.abs(want).max()
    assert scale > 0 and np.abs(got - want).max() <= 1e-4 * scale
    graphs = flex.graphs_compiled()
    reader.read(NEW_TEXTS)
    assert flex.graphs_compiled() == graphs and reader.fallback is None
    assert reader.describe()["mask_build_ms_per_batch"] is not None
