"""Reader test fixtures: a tiny random Llama + tokenizer built offline, tiny random SAEs, and (slow)
the real SmolLM2 prepared into a temporary cache. Everything lives under pytest's tmp dirs."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.conftest import prepared_once

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
_WORDS_TEXT = """
the a an of to and in is it that for on with as was be by this are from at or not one two three
four five six seven eight nine ten cat dog bird fish tree house car road city river eggs ducks
day market dollars sells eats bakes muffins friends how many much what who when where why
answer question solve add subtract multiply divide number total each every morning breakfast
fresh price cost money time hour minute week year red blue green big small fast slow good bad
happy sad new old first last
"""
WORDS = tuple(_WORDS_TEXT.split())
SPECIALS = ("<unk>", "<bos>", "<eos>", "<pad>")
LAYER = 2
CHAT_TEMPLATE = "{% for m in messages %}<bos>{{ m['role'] }} {{ m['content'] }}<eos>{% endfor %}"


@pytest.fixture(scope="session", autouse=True)
def _offline_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No network, caches and temp files under pytest's tmp dir (restored afterwards)."""
    root = tmp_path_factory.mktemp("reader-env")
    env = {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HOME": str(root / "hf"),
        "WANDB_MODE": "disabled",
        "WANDB_DIR": str(root / "wandb"),
        "CG_RAY_CACHE": str(root / "cache"),
    }
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture
def reader_commands(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The CLI with the reader's commands (whatever the shared COMMAND_MODULES holds today)."""
    from cg_ray import cli

    mods = []
    for name in (*cli.COMMAND_MODULES, "cg_ray.cli.activations", "cg_ray.cli.preparation"):
        try:
            importlib.import_module(name)
            mods.append(name)
        except ImportError:
            pass
    monkeypatch.setattr(cli, "COMMAND_MODULES", tuple(dict.fromkeys(mods)))
    yield


def build_tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate((*SPECIALS, *WORDS))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    # Like Llama/Gemma tokenizers: BOS is added in front of every text.
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 1)])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>"
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 4-layer Llama (hidden 64) with an offline WordLevel tokenizer, saved as an HF dir."""
    return save_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


def save_tiny_llama(path: Path) -> Path:
    """The tiny random Llama of `tiny_model_dir`, saved at `path` (other test folders build it through this)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    return save_random_model(LlamaForCausalLM(config), tokenizer, path)


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


def npz_sae(path: Path, d_in: int = 64, d_sae: int = 96) -> Path:
    """A random Gemma-Scope-style JumpReLU `params.npz` (no sae-lens needed: what the GPU tests use)."""
    import numpy as np

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


def save_random_model(model: Any, tokenizer: Any, path: Path) -> Path:
    """`model` (built under seed 0 by the caller's config) with its 2-D weights redrawn from N(0, 0.2²),
    saved with `tokenizer` as an HF dir at `path`."""
    with torch.no_grad():  # larger weights than HF's 0.02 init so that layers differ visibly
        for p in model.eval().parameters():
            if p.dim() == 2:
                p.normal_(0, 0.2)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def tiny_saelens_sae(architecture: str = "topk", d_in: int = 64, d_sae: int = 96, seed: int = 1) -> Any:
    """A random sae-lens SAE (inference class) hooked at model.layers.LAYER."""
    from sae_lens import (
        JumpReLUSAE,
        JumpReLUSAEConfig,
        StandardSAE,
        StandardSAEConfig,
        TopKSAE,
        TopKSAEConfig,
    )

    torch.manual_seed(seed)
    if architecture == "topk":
        sae: Any = TopKSAE(TopKSAEConfig(d_in=d_in, d_sae=d_sae, k=8))
    elif architecture == "jumprelu":
        sae = JumpReLUSAE(JumpReLUSAEConfig(d_in=d_in, d_sae=d_sae))
    else:
        sae = StandardSAE(StandardSAEConfig(d_in=d_in, d_sae=d_sae, apply_b_dec_to_input=False))
    with torch.no_grad():
        for name, p in sae.named_parameters():
            if name == "threshold":
                p.uniform_(0.0, 0.3)
            elif p.dim() == 2:
                p.normal_(0, 1.0 / d_in**0.5)
            else:
                p.normal_(0, 0.1)
    sae.cfg.metadata.hook_name = f"model.layers.{LAYER}"
    return sae.eval()


@pytest.fixture
def tiny_sae_dir(tmp_path: Path) -> Callable[..., Path]:
    """tiny_sae_dir(architecture="topk", d_in=64) -> an sae-lens on-disk SAE directory."""

    def make(architecture: str = "topk", d_in: int = 64, **meta: Any) -> Path:
        sae = tiny_saelens_sae(architecture, d_in=d_in)
        for k, v in meta.items():
            setattr(sae.cfg.metadata, k, v)
        path = tmp_path / f"sae-{architecture}-{d_in}"
        sae.save_model(str(path))
        return path

    return make


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def smollm_dir() -> Path:
    """The real default reader, prepared once in cg_ray's cache (tests/conftest.py prepared_once)."""
    return prepared_once()


def reader_config(**kwargs: Any) -> Any:
    from cg_ray.activations.config import ReaderConfig

    return ReaderConfig.model_validate({"dtype": "float32", "device": "cpu", **kwargs})
