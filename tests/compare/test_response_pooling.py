"""Reading a response with its prompt as context: only the response's tokens count (mean and max),
checked against brute force on the tiny model, and a concept planted on a prompt token gives 0.
(tiny_model_dir / tiny_sae_dir: the reader tests' fixtures, shared through tests/compare/conftest.py.)"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from cg_ray.activations.reader import ConceptReader
from tests.activations.conftest import LAYER, reader_config

PROMPTS = ["the cat eats eggs every morning", "how many ducks", "what is the total cost of five muffins"]
RESPONSES = ["the dog sells fish at the market", "two big trees", "red"]


def texts_and_offsets() -> tuple[list[str], list[int]]:
    texts = [f"{p}\n\n{r}" for p, r in zip(PROMPTS, RESPONSES, strict=True)]
    return texts, [len(p) + 2 for p in PROMPTS]


def dense(row: Any, d_sae: int) -> np.ndarray:
    out = np.zeros(d_sae)
    out[row.concept_ids] = row.concept_acts
    return out


def hidden_states(model_dir: Path, ids: list[int]) -> torch.Tensor:
    full = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    with torch.no_grad():
        return full(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states[LAYER + 1][0]


def make_reader(model_dir: Path, sae_dir: Path, **kwargs: Any) -> ConceptReader:
    return ConceptReader.from_config(
        reader_config(model=str(model_dir), sae=f"saelens-disk:{sae_dir}", token_budget=24, **kwargs)
    )


@pytest.mark.parametrize("pool", ["mean", "max"])
@pytest.mark.parametrize("side", ["right", "left"])
def test_response_tokens_only_equals_brute_force(
    tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path], pool: str, side: str
) -> None:
    reader = make_reader(tiny_model_dir, tiny_sae_dir("topk"), padding_side=side)
    texts, offsets = texts_and_offsets()
    rows = reader.read(texts, count_from=offsets, pool=pool)  # type: ignore[arg-type]
    for text, offset, response, row in zip(texts, offsets, RESPONSES, rows, strict=True):
        head = reader.tokenize([text[:offset]])[0]
        tail = reader.tokenizer(response, add_special_tokens=False)["input_ids"]
        assert row.n_tokens == len(tail)
        h = hidden_states(tiny_model_dir, head + tail)[len(head) :]
        acts = reader.sae.encode(h).double()
        want = acts.max(0).values if pool == "max" else acts.mean(0)
        np.testing.assert_allclose(dense(row, reader.d_sae), want.numpy(), rtol=1e-4, atol=1e-5)


def test_span_tokens_truncates_the_response_only(tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path]) -> None:
    reader = make_reader(tiny_model_dir, tiny_sae_dir("topk"))
    texts, offsets = texts_and_offsets()
    rows = reader.read(texts, count_from=offsets, span_tokens=2)
    assert [r.n_tokens for r in rows] == [2, 2, 1]
    assert reader.stats["truncated_rows"] == 2


class PlantedSae:
    """The tiny SAE plus one concept that fires only on one hidden state (a token of the prompt)."""

    def __init__(self, base: Any, target: torch.Tensor) -> None:
        self.base, self.target = base, target / target.norm()
        self.info = replace(base.info, d_sae=base.info.d_sae + 1)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        cos = (x.float() @ self.target) / x.float().norm(dim=-1)
        planted = torch.relu(cos - 0.9999) * 1e4
        return torch.cat([self.base.encode(x), planted.unsqueeze(-1).to(x.dtype)], dim=-1)

    # Dense only: the planted concept is outside the base SAE's TopK.
    topk_k = None

    def encode_topk(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def to(self, device: Any, dtype: Any) -> PlantedSae:
        return self


@pytest.mark.parametrize("pool", ["mean", "max"])
def test_a_concept_of_a_prompt_token_never_counts(
    tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path], pool: str
) -> None:
    reader = make_reader(tiny_model_dir, tiny_sae_dir("topk"))
    texts, offsets = texts_and_offsets()
    ids = reader.tokenize([texts[0]])[0]
    cat = ids.index(reader.tokenizer.convert_tokens_to_ids("cat"))  # a token of the prompt
    reader.sae = PlantedSae(reader.sae, hidden_states(tiny_model_dir, ids)[cat])  # type: ignore[assignment]
    planted = reader.d_sae - 1
    whole = reader.read(texts[:1], pool=pool)[0]  # the prompt counts: the planted concept fires
    assert planted in whole.concept_ids.tolist()
    response_only = reader.read(texts[:1], count_from=offsets[:1], pool=pool)[0]  # type: ignore[arg-type]
    assert planted not in response_only.concept_ids.tolist()
    assert dense(response_only, reader.d_sae)[planted] == 0.0
    assert response_only.concept_ids.size > 0  # the response's own concepts are still there
