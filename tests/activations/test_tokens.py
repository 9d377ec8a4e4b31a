"""Token policy, batching plan and padding (pure logic, no model)."""

from __future__ import annotations

import pytest
import torch

from cg_ray.activations.saes.base import SaeInfo, hook_layer_from_name
from cg_ray.activations.tokens import TokenPolicy, counted_mask, pad, plan_batches, resolve_policy

from .conftest import build_tokenizer, reader_config


def policy(**kw: object) -> TokenPolicy:
    base = dict(
        prepend_bos=True,
        exclude_bos=True,
        sink_positions=0,
        exclude_special_tokens=False,
        bos_id=1,
        pad_id=3,
        special_ids=(0, 1, 2, 3),
    )
    base.update(kw)
    return TokenPolicy(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("side", ["left", "right"])
def test_counted_mask_excludes_padding_bos_sinks_specials(side: str) -> None:
    seqs = [[1, 10, 11, 2, 12], [1, 20]]
    ids, mask = pad(seqs, 3, side)  # type: ignore[arg-type]
    assert ids.shape == (2, 5) and int(mask.sum()) == 7

    def counted(p: TokenPolicy) -> list[list[int]]:
        keep = counted_mask(ids, mask, p)
        return [ids[r][keep[r]].tolist() for r in range(2)]

    assert counted(policy(exclude_bos=False)) == [[1, 10, 11, 2, 12], [1, 20]]
    assert counted(policy()) == [[10, 11, 2, 12], [20]]
    assert counted(policy(exclude_special_tokens=True)) == [[10, 11, 12], [20]]
    assert counted(policy(sink_positions=2)) == [[11, 2, 12], []]


def test_bos_only_excluded_at_the_start() -> None:
    ids, mask = pad([[5, 1, 6]], 3, "right")
    keep = counted_mask(ids, mask, policy())
    assert keep.tolist() == [[True, True, True]]


def test_plan_batches_respects_budget_and_covers_rows() -> None:
    lengths = [5, 17, 3, 9, 9, 40, 1, 12]
    batches = plan_batches(lengths, token_budget=20)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        longest = max(lengths[i] for i in b)
        assert len(b) == 1 or len(b) * longest <= 20
        assert lengths[b[0]] == longest  # longest first: padding is bounded by sorting
    assert [5] in batches  # a row over budget gets a batch of its own


def test_resolve_policy_follows_sae_metadata_when_auto() -> None:
    tok = build_tokenizer()
    info = SaeInfo("x", "x", "topk", 64, 96, sink_positions=3, exclude_special_tokens=True, prepend_bos=True)
    p = resolve_policy(reader_config(), info, tok)
    assert (p.sink_positions, p.exclude_special_tokens, p.prepend_bos, p.bos_id, p.pad_id) == (
        3,
        True,
        True,
        1,
        3,
    )
    p = resolve_policy(reader_config(sink_positions=0, exclude_special_tokens=False), info, tok)
    assert (p.sink_positions, p.exclude_special_tokens) == (0, False)
    bare = SaeInfo("x", "x", "topk", 64, 96)
    p = resolve_policy(reader_config(), bare, tok)
    assert (p.sink_positions, p.exclude_special_tokens, p.prepend_bos) == (0, False, False)


def test_hook_layer_from_name() -> None:
    assert hook_layer_from_name("model.layers.20") == 20
    assert hook_layer_from_name("blocks.19.hook_resid_post") == 19
    assert hook_layer_from_name("transformer.h.3") == 3
    assert hook_layer_from_name("embed") is None
    assert hook_layer_from_name(None) is None


def test_pad_sides() -> None:
    ids, mask = pad([[7, 8], [9]], 0, "left")
    assert ids.tolist() == [[7, 8], [0, 9]] and mask.tolist() == [[1, 1], [0, 1]]
    ids, mask = pad([[7, 8], [9]], 0, "right")
    assert ids.tolist() == [[7, 8], [9, 0]] and mask.tolist() == [[1, 1], [1, 0]]
    assert ids.dtype == torch.long
