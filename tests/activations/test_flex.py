"""The FlexAttention packed kernel against the padded path, in float32 on tiny random Llama and Gemma-2
models (Gemma-2: logit soft-capping, sliding windows on alternate layers, GQA), with BOS kept or dropped,
sinks and shared prefixes; and the FlexAttention layout's mask against each row attended alone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from cg_ray.activations.reader import ConceptReader

from .conftest import build_tokenizer, reader_config, save_random_model
from .test_varlen import TEXTS, dense


@pytest.fixture(scope="session")
def tiny_gemma2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 4-layer Gemma-2 (hidden 64, 4 query / 2 key-value heads) whose soft-cap (2.0) and sliding
    window (5 tokens, layers 0 and 2) bite on the test texts."""
    from transformers import Gemma2Config, Gemma2ForCausalLM

    tokenizer = build_tokenizer()
    config = Gemma2Config(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=16,
        max_position_embeddings=256, sliding_window=5, attn_logit_softcapping=2.0, final_logit_softcapping=30.0,
        bos_token_id=1, eos_token_id=2, pad_token_id=3,
    )  # fmt: skip
    torch.manual_seed(0)
    return save_random_model(Gemma2ForCausalLM(config), tokenizer, tmp_path_factory.mktemp("tiny-gemma2"))


def _read(model: Path, sae: str, **kw: Any) -> tuple[ConceptReader, np.ndarray, list[int]]:
    reader = ConceptReader.from_config(reader_config(model=str(model), sae=sae, token_budget=64, **kw))
    rows = reader.read(TEXTS)
    return reader, dense(rows, reader.d_sae), [r.n_tokens for r in rows]


POLICIES = [{}, {"exclude_bos": False}, {"sink_positions": 3}, {"padding_side": "left"}]


@pytest.mark.parametrize("family", ["llama", "gemma2"])
@pytest.mark.parametrize("policy", POLICIES, ids=["default", "bos-kept", "sinks", "left"])
@pytest.mark.parametrize("share", [False, True])
def test_flex_packed_equals_padded(
    family: str,
    policy: dict[str, Any],
    share: bool,
    tiny_model_dir: Path,
    tiny_gemma2_dir: Path,
    tiny_sae_dir: Callable[..., Path],
) -> None:
    model = tiny_model_dir if family == "llama" else tiny_gemma2_dir
    sae = f"saelens-disk:{tiny_sae_dir('jumprelu')}"
    padded, want, want_n = _read(model, sae, packing=False, **policy)
    flex, got, got_n = _read(
        model, sae, packing=True, packed_attention="flex", share_prefixes=share, min_shared_tokens=4, **policy
    )
    assert not padded.packed and flex.packed and flex.kernel == "flex"
    assert got_n == want_n
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert want.any()
    if share:  # the question's tokens were computed once for its rows
        assert flex.stats["tokens_forward"] < flex.stats["tokens_read"]


def test_gemma2_packs_only_with_flex_and_its_soft_cap_counts(
    tiny_gemma2_dir: Path, tiny_sae_dir: Callable[..., Path]
) -> None:
    sae = f"saelens-disk:{tiny_sae_dir('jumprelu')}"
    sdpa, _, _ = _read(tiny_gemma2_dir, sae, packing=True, packed_attention="sdpa")
    assert not sdpa.packed and "soft-capping" in (sdpa.packing_off or "")
    padded, want, _ = _read(tiny_gemma2_dir, sae, packing=False)
    assert padded.describe()["padded_attention"].startswith("eager")  # SDPA would drop the soft-cap
    # the same padded forward through transformers' SDPA (no soft-capping) reads other s̃: the cap is live
    uncapped = ConceptReader.from_config(
        reader_config(model=str(tiny_gemma2_dir), sae=sae, packing=False, token_budget=64)
    )
    uncapped.model.base.set_attn_implementation("sdpa")
    assert np.abs(dense(uncapped.read(TEXTS), uncapped.d_sae) - want).max() > 1e-3
    auto = ConceptReader.from_config(reader_config(model=str(tiny_gemma2_dir), sae=sae, packing=True))
    assert auto.packed and auto.kernel == "flex"  # packing: true on Gemma-2 takes the only packed kernel


def test_flex_layout_mask_is_each_row_alone() -> None:
    """The document mask of a packed layout (a shared prefix, two suffixes, a row alone) against the
    row-by-row truth, with and without a window, and the padded tail attending to nothing."""
    from cg_ray.activations.flex import ALIGN, FlexLayout
    from cg_ray.activations.varlen import Block

    # tokens 0-2: prefix of rows A and B; 3-4: A's own; 5-7: B's own; 8-11: row C alone
    blocks = [Block(0, 3), Block(3, 2, 0, 3), Block(5, 3, 0, 3), Block(8, 4)]
    rows = {"A": [0, 1, 2, 3, 4], "B": [0, 1, 2, 5, 6, 7], "C": [8, 9, 10, 11]}
    layout = FlexLayout.of(blocks, "cpu")
    assert layout.length == 12 and layout.size == ALIGN
    q = torch.arange(layout.size).view(-1, 1)
    k = torch.arange(layout.size).view(1, -1)
    for window in (None, 2):
        got = layout.mask_mod(window)(None, None, q, k)
        want = torch.zeros(layout.size, layout.size, dtype=torch.bool)
        for toks in rows.values():
            for i, qi in enumerate(toks):
                for j, kj in enumerate(toks[: i + 1]):
                    if window is None or i - j < window:
                        want[qi, kj] = True
        assert torch.equal(got, want), window


@pytest.mark.gpu
@pytest.mark.parametrize("family", ["llama", "gemma2"])
def test_compiled_flex_on_cuda_equals_padded(
    family: str, tiny_model_dir: Path, tiny_gemma2_dir: Path, tiny_sae_dir: Callable[..., Path]
) -> None:
    """On CUDA the flex kernel is the compiled FlexAttention one: float32 s̃ == the padded path's."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    model = tiny_model_dir if family == "llama" else tiny_gemma2_dir
    sae = f"saelens-disk:{tiny_sae_dir('jumprelu')}"
    _, want, _ = _read(model, sae, packing=False, device="cuda")
    flex, got, _ = _read(model, sae, packing=True, packed_attention="flex", min_shared_tokens=4, device="cuda")
    assert flex.kernel == "flex" and flex.device.type == "cuda"
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
