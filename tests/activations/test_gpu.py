"""The reader on a CUDA device (marked `gpu`; skipped where there is none): float32 on the GPU equals the
CPU path, `dtype: auto` becomes bfloat16 there and stays close to float32."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from cg_ray.activations.reader import ConceptReader

from .conftest import LAYER, reader_config

pytestmark = pytest.mark.gpu

TEXTS = ["the cat eats eggs", "a red dog runs to the sea and back", "green"]


def _npz_sae(path: Path, d_in: int = 64, d_sae: int = 96) -> Path:
    gen = torch.Generator().manual_seed(3)
    np.savez(
        path,
        W_enc=(torch.randn(d_in, d_sae, generator=gen) / d_in**0.5).numpy(),
        b_enc=torch.zeros(d_sae).numpy(),
        threshold=torch.full((d_sae,), 0.05).numpy(),
        W_dec=torch.randn(d_sae, d_in, generator=gen).numpy(),
        b_dec=torch.zeros(d_in).numpy(),
    )
    return path


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
    sae = f"npz:{_npz_sae(tmp_path / 'params.npz')}"
    common = {"model": str(tiny_model_dir), "sae": sae, "layer": LAYER}
    cpu = _dense(ConceptReader.from_config(reader_config(**common, dtype="float32", device="cpu")))
    gpu32 = _dense(ConceptReader.from_config(reader_config(**common, dtype="float32", device="cuda")))
    auto = ConceptReader.from_config(reader_config(**common, dtype="auto", device="cuda"))
    assert auto.describe()["dtype"] == "bfloat16" and auto.describe()["device"].startswith("cuda")
    scale = np.abs(cpu).max()
    assert scale > 0
    assert np.abs(gpu32 - cpu).max() <= 1e-4 * scale
    assert np.abs(_dense(auto) - cpu).max() < 0.1 * scale
