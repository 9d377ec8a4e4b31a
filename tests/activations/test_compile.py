"""torch.compile of the packed reader (slow: these compile): one graph without breaks, and the same s̃ as
eager on a random tiny Llama in float32. The fast tests never compile."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from cg_ray.activations.reader import ConceptReader

from .conftest import reader_config
from .test_varlen import TEXTS, dense

pytestmark = pytest.mark.slow


def _reader(model: Path, sae: str, **kw: Any) -> ConceptReader:
    return ConceptReader.from_config(
        reader_config(model=str(model), sae=sae, min_shared_tokens=4, token_budget=64, **kw)
    )


def test_packed_forward_is_one_graph(tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path]) -> None:
    """The packed attention is a custom op, so dynamo traces the whole truncated model without a break."""
    from cg_ray.activations.packed import NO_MASK
    from cg_ray.activations.varlen import pack, packed_blocks, plan_groups, plan_packed_batches

    reader = _reader(tiny_model_dir, f"saelens-disk:{tiny_sae_dir('topk')}")
    seqs = reader.tokenize(TEXTS)
    batch = plan_packed_batches(plan_groups(seqs, 4, 64), 64)[0]
    packed = pack(seqs, batch)
    torch._dynamo.reset()
    with torch.inference_mode(), packed_blocks(packed.blocks):
        explained = torch._dynamo.explain(reader.model.base.forward)(
            input_ids=packed.input_ids, attention_mask=NO_MASK, position_ids=packed.position_ids, use_cache=False
        )
    assert explained.graph_count == 1 and explained.graph_break_count == 0


@pytest.mark.parametrize("share", [False, True])
def test_compiled_packed_equals_eager(tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path], share: bool) -> None:
    sae = f"saelens-disk:{tiny_sae_dir('topk')}"
    eager = _reader(tiny_model_dir, sae, share_prefixes=share)
    compiled = _reader(tiny_model_dir, sae, share_prefixes=share, compile=True)
    assert compiled.compiled and compiled.packed
    torch._dynamo.reset()
    want = eager.read(TEXTS)
    got = compiled.read(TEXTS)
    assert len(eager.model.base.layers) == len(compiled.model.base.layers)
    assert [r.n_tokens for r in got] == [r.n_tokens for r in want]
    np.testing.assert_allclose(dense(got, compiled.d_sae), dense(want, eager.d_sae), rtol=1e-5, atol=1e-5)
    assert dense(want, eager.d_sae).any()
    # a padded forward of the same compiled model (token detail, token passes) still gets SDPA's masks; raw
    # hidden states of this large-weight model, so a tolerance relative to their size
    ids = torch.as_tensor([compiled.tokenize(TEXTS[:1])[0]])
    from cg_ray.activations.model import forward_to_layer

    mask = torch.ones_like(ids)
    torch.testing.assert_close(
        forward_to_layer(compiled.model.base, compiled.capture, ids, mask),
        forward_to_layer(eager.model.base, eager.capture, ids, mask),
        rtol=1e-4,
        atol=1e-4,
    )
