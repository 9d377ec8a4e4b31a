"""The FlexAttention packed kernel against the padded path, in float32 on tiny random Llama and Gemma-2
models (Gemma-2: logit soft-capping, sliding windows on alternate layers, GQA), with BOS kept or dropped,
sinks and shared prefixes; and the FlexAttention layout's mask against each row attended alone."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from cg_ray.activations.reader import ConceptReader

from .conftest import reader_config
from .test_varlen import TEXTS, dense


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


# Issue #41: the flex path under torch.compile (CPU, backends that need no inductor), static lengths, the
# masks built outside the model, and the loud fall-back to padded batches.
NEW_TEXTS = [  # other lengths than TEXTS (all within the 64-token budget: the same static length)
    "the dog runs",
    "how many ducks does the bird sell at the market every week and what is the price of one fish",
    "one two three four five six seven eight nine ten " * 4,
    "a small car",
]


@pytest.fixture
def compile_backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """aot_eager for the reader's compiles (dynamo and AOT autograd as on a GPU, no inductor), and
    create_block_mask failing if anything calls it: a mask built inside the forward would."""
    from torch.nn.attention import flex_attention as fa

    from cg_ray.activations import flex

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("create_block_mask called: masks must be built before the forward")

    monkeypatch.setattr(flex.SETTINGS, "backend", "aot_eager")
    monkeypatch.setattr(fa, "create_block_mask", refuse)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("family", "how"),
    [("llama", "model"), ("gemma2", "model"), ("gemma2", "kernel")],
    ids=["llama-compiled-model", "gemma2-compiled-model", "gemma2-compiled-kernel"],
)
def test_compiled_flex_equals_padded_and_new_lengths_add_no_graph(
    family: str,
    how: str,
    compile_backend: None,
    monkeypatch: pytest.MonkeyPatch,
    tiny_model_dir: Path,
    tiny_gemma2_dir: Path,
    tiny_sae_dir: Callable[..., Path],
) -> None:
    """The compile settings of a GPU (dynamic=False, one static packed length, the soft-cap a constant):
    `model` compiles the whole truncated model with FlexAttention traced inline (compile: true), `kernel`
    an eager model calling the compiled FlexAttention kernel (compile: false on CUDA)."""
    from cg_ray.activations import flex

    model = tiny_model_dir if family == "llama" else tiny_gemma2_dir
    sae = f"saelens-disk:{tiny_sae_dir('jumprelu')}"
    if how == "kernel":
        monkeypatch.setattr(flex.SETTINGS, "kernel", True)
    kw = {"packing": True, "packed_attention": "flex", "min_shared_tokens": 4, "compile": how == "model"}
    _, want, _ = _read(model, sae, packing=False)
    reader, got, _ = _read(model, sae, **kw)
    assert reader.packed and reader.kernel == "flex" and reader.fallback is None
    assert reader.compiled == (how == "model")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert want.any()
    graphs = flex.graphs_compiled()
    assert graphs > 0
    # a second set of rows with new lengths: the same static length, no new graph
    padded = ConceptReader.from_config(reader_config(model=str(model), sae=sae, token_budget=64, packing=False))
    again = dense(reader.read(NEW_TEXTS), reader.d_sae)
    assert flex.graphs_compiled() == graphs and reader.fallback is None
    np.testing.assert_allclose(again, dense(padded.read(NEW_TEXTS), padded.d_sae), rtol=1e-5, atol=1e-5)
    assert reader.stats["mask_batches"] > 0 and reader.describe()["mask_build_ms_per_batch"] > 0


def test_a_recompile_falls_back_to_padded_batches_and_says_why(
    tiny_gemma2_dir: Path, tiny_sae_dir: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A packed batch of a length already run that compiles a graph is an error; the reader reads the rest
    padded (Gemma-2: eager attention, soft-capped), the manifest says why, and s̃ stays exact."""
    from cg_ray.activations import flex

    sae = f"saelens-disk:{tiny_sae_dir('jumprelu')}"
    _, want, _ = _read(tiny_gemma2_dir, sae, packing=False)
    calls = iter(range(10**6))
    monkeypatch.setattr(flex, "graphs_compiled", lambda: next(calls))  # every batch "compiles"
    reader, got, _ = _read(tiny_gemma2_dir, sae, packing=True, packed_attention="flex")
    assert not reader.packed and reader.fallback is not None and "Recompiled" in reader.fallback
    described = reader.describe()
    assert described["packing_fallback"] == reader.fallback
    assert described["packing_decision"]["path"] == "padded" and "then padded" in reader.path_decision.reason
    assert described["padded_attention"].startswith("eager")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_static_lengths_and_masks_per_layer_kind(tiny_gemma2_dir: Path, tiny_model_dir: Path) -> None:
    from transformers import AutoConfig

    from cg_ray.activations import flex
    from cg_ray.activations.varlen import Block

    assert flex.static_length(10, 64) == flex.static_length(128, 100) == 128
    assert flex.static_length(129, 100) == 256 and flex.static_length(300, 8192) == 8192
    gemma = flex.layer_windows(AutoConfig.from_pretrained(tiny_gemma2_dir))
    assert gemma == {"sliding_attention": 5, "full_attention": None}
    assert flex.layer_windows(AutoConfig.from_pretrained(tiny_model_dir)) == {"": None}
    layout = flex.FlexLayout.of([Block(0, 3), Block(3, 20)], "cpu", 256)
    masks = layout.block_masks([5, None])
    arg = flex.mask_argument(masks, gemma)
    assert set(arg) == {"sliding_attention", "full_attention"} and arg["full_attention"] is masks[None]
    assert flex.mask_argument(masks, {"": None}) is masks[None]
    with pytest.raises(ValueError, match="cannot hold"):
        flex.FlexLayout.of([Block(0, 200)], "cpu", 128)


def test_flex_off_cuda_hides_only_its_compile_warning() -> None:
    import warnings

    from cg_ray.activations import flex
    from cg_ray.activations.varlen import Block

    layout = flex.FlexLayout.of([Block(0, 5)], "cpu", 128)
    mask = layout.block_masks([None])[None]
    q = torch.randn(1, 2, 128, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "flex_attention called without torch.compile" here
        out = flex.flex_attention_call(q, q, q, mask, None, 2.0)
    assert out.shape == (1, 128, 2, 8) and torch.isfinite(out[0, :5]).all()
