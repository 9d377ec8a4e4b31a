"""The HF `generate` fallback through Ray Data, on a tiny random Llama built offline (fast)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cg_ray.benchmarks import to_dataset
from cg_ray.benchmarks.rows import make_row
from cg_ray.generation import generate_responses
from cg_ray.generation.config import GenerationConfig
from cg_ray.generation.hf import HFChatModel

VOCAB = [
    "<pad>",
    "<s>",
    "</s>",
    "<unk>",
    *["what", "is", "one", "two", "three", "plus", "minus", "answer", "the", "a", "of", "and", "yes", "no"],
]


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    inner = Tokenizer(models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="<unk>"))
    inner.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=inner, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    )
    tok.chat_template = "{% for m in messages %}<s> {{ m['content'] }} </s> {% endfor %}<s>"
    import torch

    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(VOCAB),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=128,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
        )
    )
    out = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.mark.usefixtures("ray_local")
def test_hf_backend_through_ray_data_equals_direct_generate(tiny_llama: Path) -> None:
    config = GenerationConfig.model_validate(
        {
            "backend": "hf",
            "model": str(tiny_llama),
            "engine": {"dtype": "float32"},
            "sampling": {"max_tokens": 6},
            "resources": {"batch_size": 3},
        }
    )
    prompts = ["what is one plus two", "yes or no", "the answer", "two minus one", "what of the a"]
    rows = [make_row(row_id=f"r{i}", benchmark="tiny", prompt=p, scorer="exact") for i, p in enumerate(prompts)]
    out = {r["row_id"]: r for r in generate_responses(to_dataset(rows, blocks=2), config).take_all()}

    direct = HFChatModel(str(tiny_llama), config)
    for i, prompt in enumerate(prompts):
        texts, counts = direct.complete([prompt])  # one at a time: padding must not change greedy output
        got = out[f"r{i}"]
        assert got["response"] == texts[0] and got["n_output_tokens"] == counts[0]
        assert 1 <= got["n_output_tokens"] <= 6 and got["model"] == str(tiny_llama)
    assert direct.render("yes") == "<s> yes </s> <s>"  # the model's chat template is applied
