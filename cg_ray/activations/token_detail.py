"""Per-token SAE activations of a few rows, with each token's character span in the text.

`cg-ray describe` re-reads only the handful of rows where a concept is most salient, to highlight the
activating span and find the concept's top tokens in the suite. It reuses the reader's model (stopped at
the hooked layer), SAE and token policy (BOS / attention-sink / special-token exclusion), so the per-token
activations of the counted tokens, averaged, are exactly the row's s̃ (tested).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from cg_ray.activations.model import forward_to_layer
from cg_ray.activations.reader import ConceptReader
from cg_ray.activations.tokens import counted_mask, pad
from cg_ray.errors import InputError


@dataclass(frozen=True)
class TokenDetail:
    text: str
    token_ids: list[int]
    tokens: list[str]  # each token's text as it appears in `text` ("" for an added BOS)
    offsets: list[tuple[int, int]]  # character span of each token in `text`
    counted: npt.NDArray[np.bool_]  # the tokens that count towards s̃
    concept_ids: npt.NDArray[np.int32]
    acts: npt.NDArray[np.float32]  # (tokens, concepts): 0 on tokens that do not count

    def pooled(self) -> npt.NDArray[np.float64]:
        """s̃ of the requested concepts: the mean over counted tokens."""
        n = int(self.counted.sum())
        pooled: npt.NDArray[np.float64] = self.acts.sum(axis=0, dtype=np.float64) / max(n, 1)
        return pooled


def _tokenize_with_offsets(
    reader: ConceptReader, text: str, add_special_tokens: bool
) -> tuple[list[int], list[tuple[int, int]]]:
    enc = reader.tokenizer(text, add_special_tokens=add_special_tokens, return_offsets_mapping=True)
    ids = list(enc["input_ids"])
    offsets = [(int(a), int(b)) for a, b in enc["offset_mapping"]]
    policy = reader.policy
    if policy.prepend_bos and (not ids or ids[0] != policy.bos_id):
        ids.insert(0, int(policy.bos_id))  # type: ignore[arg-type]
        offsets.insert(0, (0, 0))
    limit = reader.config.max_tokens
    return ids[:limit], offsets[:limit]


@torch.inference_mode()
def read_tokens(
    reader: ConceptReader, texts: Sequence[str], concept_ids: Sequence[int], *, add_special_tokens: bool = True
) -> list[TokenDetail]:
    """Per-token activations of `concept_ids` for each text (one forward per text: meant for a few rows)."""
    wanted = torch.as_tensor(np.asarray(concept_ids, dtype=np.int64))
    if wanted.numel() and (int(wanted.min()) < 0 or int(wanted.max()) >= reader.d_sae):
        raise InputError(f"concept ids must be in [0, d_sae={reader.d_sae})", field="concept_id")
    out: list[TokenDetail] = []
    for text in texts:
        ids, offsets = _tokenize_with_offsets(reader, text, add_special_tokens)
        expected = reader.tokenize([text], add_special_tokens=add_special_tokens)[0]
        if ids != expected:  # the offsets must describe exactly the tokens the reader reads
            raise InputError("the tokenizer's offsets do not match the reader's tokens for this text")
        if not ids:
            raise InputError("the text has no tokens")
        id_t, mask = pad([ids], reader.policy.pad_id, "right")
        id_t, mask = id_t.to(reader.device), mask.to(reader.device)
        hidden = forward_to_layer(reader.model.base, reader.capture, id_t, mask)[0]
        counted = counted_mask(id_t, mask, reader.policy)[0]
        acts = torch.zeros((len(ids), wanted.numel()), dtype=torch.float32)
        if bool(counted.any()):
            encoded = reader.sae.encode(hidden[counted]).float().cpu()
            acts[counted.cpu()] = encoded[:, wanted]
        out.append(
            TokenDetail(
                text=text,
                token_ids=ids,
                tokens=[text[a:b] for a, b in offsets],
                offsets=offsets,
                counted=counted.cpu().numpy(),
                concept_ids=np.asarray(concept_ids, dtype=np.int32),
                acts=acts.numpy(),
            )
        )
    return out
