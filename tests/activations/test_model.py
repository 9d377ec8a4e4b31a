"""The hooked, truncated forward against the full model (tiny random Llama, float32)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from cg_ray.activations.model import LayerCapture, decoder_layers, forward_to_layer, load_model, truncate
from cg_ray.errors import ConfigError, InputError

from .conftest import LAYER

TEXTS = ["the cat eats eggs every morning", "how many ducks", "red"]


def _ids(model_dir: Path, text: str) -> torch.Tensor:
    from transformers import AutoTokenizer

    return torch.as_tensor([AutoTokenizer.from_pretrained(model_dir)(text).input_ids])


@pytest.mark.parametrize("layer", [0, LAYER, 3])
def test_hook_equals_hidden_states_of_full_model(tiny_model_dir: Path, layer: int) -> None:
    full = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    capture = LayerCapture(full.model.layers[layer])
    ids = _ids(tiny_model_dir, TEXTS[0])
    with torch.no_grad():
        out = full(input_ids=ids, output_hidden_states=True)
    # hidden_states[0] is the embedding output, so layer L's output is hidden_states[L + 1]…
    # …except for the last layer, where HF applies the final norm before storing it.
    expected = out.hidden_states[layer + 1]
    if layer == len(full.model.layers) - 1:
        expected = None
    got = capture.take()
    if expected is not None:
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
    else:
        assert not torch.allclose(got, out.hidden_states[-1])  # the final norm was applied there
    capture.remove()


def test_truncated_forward_equals_full_forward_at_layer(tiny_model_dir: Path) -> None:
    full = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    ids = _ids(tiny_model_dir, TEXTS[0])
    with torch.no_grad():
        expected = full(input_ids=ids, output_hidden_states=True).hidden_states[LAYER + 1]
    loaded = load_model(tiny_model_dir, "float32", torch.device("cpu"))
    truncate(loaded.base, LAYER)
    assert len(decoder_layers(loaded.base)) == LAYER + 1
    capture = LayerCapture(decoder_layers(loaded.base)[LAYER])
    ran: list[int] = []
    for i, layer in enumerate(decoder_layers(loaded.base)):
        layer.register_forward_hook(lambda *_a, i=i: ran.append(i))
    got = forward_to_layer(loaded.base, capture, ids, torch.ones_like(ids))
    assert ran == list(range(LAYER + 1))  # nothing after the hooked layer ran
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    # last_hidden_state would be wrong: it has the final norm applied.
    with torch.no_grad():
        last = loaded.base(input_ids=ids).last_hidden_state
    assert not torch.allclose(last, expected, atol=1e-3)


def test_capture_handles_tuple_outputs() -> None:
    class TupleLayer(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, None]:
            return x * 2, None

    class TensorLayer(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + 1

    x = torch.ones(2, 3)
    for layer, expected in ((TupleLayer(), x * 2), (TensorLayer(), x + 1)):
        cap = LayerCapture(layer)
        layer(x)
        torch.testing.assert_close(cap.take(), expected)
        with pytest.raises(RuntimeError):
            cap.take()  # consumed: a stale output is never reused


def test_left_padding_positions_match_unpadded(tiny_model_dir: Path) -> None:
    loaded = load_model(tiny_model_dir, "float32", torch.device("cpu"))
    truncate(loaded.base, LAYER)
    capture = LayerCapture(decoder_layers(loaded.base)[LAYER])
    ids = _ids(tiny_model_dir, TEXTS[1])
    alone = forward_to_layer(loaded.base, capture, ids, torch.ones_like(ids))
    padded = torch.cat([torch.full((1, 3), 3), ids], dim=1)
    mask = torch.cat([torch.zeros(1, 3, dtype=torch.long), torch.ones_like(ids)], dim=1)
    got = forward_to_layer(loaded.base, capture, padded, mask)[:, 3:]
    torch.testing.assert_close(got, alone, rtol=1e-4, atol=1e-4)


def test_errors(tmp_path: Path, tiny_model_dir: Path) -> None:
    with pytest.raises(InputError, match="model path not found"):
        load_model(tmp_path / "nope", "float32", torch.device("cpu"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"no config\.json"):
        load_model(tmp_path / "empty", "float32", torch.device("cpu"))
    loaded = load_model(tiny_model_dir, "float32", torch.device("cpu"))
    with pytest.raises(ConfigError, match="out of range"):
        truncate(loaded.base, 4)


def test_left_padding_with_absolute_positions(tmp_path: Path) -> None:
    """RoPE is relative, so Llama hides position mistakes; GPT-2's absolute positions do not."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from .conftest import build_tokenizer

    tok = build_tokenizer()
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=64, n_layer=3, n_head=4, n_positions=64)).save_pretrained(
        tmp_path
    )
    tok.save_pretrained(tmp_path)
    loaded = load_model(tmp_path, "float32", torch.device("cpu"))
    truncate(loaded.base, 1)
    capture = LayerCapture(decoder_layers(loaded.base)[1])
    ids = _ids(tmp_path, TEXTS[0])
    alone = forward_to_layer(loaded.base, capture, ids, torch.ones_like(ids))
    padded = torch.cat([torch.full((1, 4), 3), ids], dim=1)
    mask = torch.cat([torch.zeros(1, 4, dtype=torch.long), torch.ones_like(ids)], dim=1)
    torch.testing.assert_close(forward_to_layer(loaded.base, capture, padded, mask)[:, 4:], alone)
    # the same batch without mask-derived positions is wrong: the test can tell
    with torch.no_grad():
        loaded.base(input_ids=padded, attention_mask=mask)
    assert not torch.allclose(capture.take()[:, 4:], alone, atol=1e-3)
