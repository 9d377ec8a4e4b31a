"""What the packed forward's pieces share: the `Block` of one attention call and the NO_MASK placeholder.

model.py (the forward), varlen.py (the SDPA loop) and flex.py (the FlexAttention masks) all read these;
they live here, below all three, so the imports between those modules point one way
(varlen → flex, varlen → model; none back).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Block:
    """One attention call: queries [start, start+length); keys the prefix [prefix_start, +prefix_len)
    (empty for a plain causal block) followed by the queries' own tokens."""

    start: int
    length: int
    prefix_start: int = 0
    prefix_len: int = 0


# transformers hands a 4-D mask to the attention untouched: with this placeholder no (T × T) mask is built
# for a packed forward (the attention function reads the layout instead). No key positions: no real mask
# looks like it, so a compiled forward tells a packed call from a padded one by its shape.
NO_MASK = torch.ones(1, 1, 1, 0, dtype=torch.bool)


def is_no_mask(mask: torch.Tensor | None) -> bool:
    return mask is not None and mask.dim() == 4 and mask.shape[-1] == 0
