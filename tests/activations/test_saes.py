"""SAE backends: our encoders agree with sae-lens' own `encode`; bad SAEs fail clearly."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from cg_ray.activations.saes import load_sae, parse_sae_spec
from cg_ray.errors import ConfigError, InputError

from .conftest import LAYER, tiny_saelens_sae


def _x(n: int = 50, d: int = 64) -> torch.Tensor:
    torch.manual_seed(7)
    return torch.randn(n, d) * 2


def _tensors(sae: object) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone().contiguous() for k, v in sae.state_dict().items()}  # type: ignore[attr-defined]


@pytest.mark.parametrize("rescale", [False, True])
def test_safetensors_topk_equals_saelens(tmp_path: Path, rescale: bool) -> None:
    sae = tiny_saelens_sae("topk")
    sae.cfg.rescale_acts_by_decoder_norm = rescale
    path = tmp_path / "sae.safetensors"
    save_file(_tensors(sae), str(path))
    x = _x()
    ours = load_sae(f"safetensors:{path},k=8,rescale={str(rescale).lower()}")  # arch inferred from k
    got = ours.encode(x)
    assert ours.info.architecture == "topk" and ours.info.d_sae == 96
    assert (got > 0).sum(dim=1).max() <= 8
    torch.testing.assert_close(got, sae.encode(x))
    other = load_sae(f"safetensors:{path},arch=topk,k=8,rescale={str(not rescale).lower()}").encode(x)
    assert not torch.allclose(other, got)  # the flag matters: the test can tell them apart


def test_saelens_disk_encode_is_saelens(tiny_sae_dir: Callable[..., Path]) -> None:
    from sae_lens import SAE

    path = tiny_sae_dir("topk")
    ours = load_sae(f"saelens-disk:{path}")
    assert ours.info.hook_layer == LAYER and ours.info.d_in == 64
    x = _x()
    torch.testing.assert_close(ours.encode(x), SAE.load_from_disk(str(path)).encode(x))
    assert load_sae(str(path)).info.backend == "saelens-disk"  # a bare directory works too


def test_the_weights_fingerprint_follows_the_weights_not_the_path(tiny_sae_dir: Callable[..., Path]) -> None:
    from safetensors.torch import load_file

    path = tiny_sae_dir("topk")
    before = load_sae(f"saelens-disk:{path}").info.fingerprint
    assert before is not None and len(before) == 16
    assert load_sae(f"saelens-disk:{path}").info.fingerprint == before  # stable across loads
    weights = load_file(str(path / "sae_weights.safetensors"))
    weights["b_enc"] = weights["b_enc"] + 1.0  # retrained in place: same spec, same path
    save_file(weights, str(path / "sae_weights.safetensors"))
    assert load_sae(f"saelens-disk:{path}").info.fingerprint != before


def test_npz_jumprelu_equals_saelens(tmp_path: Path) -> None:
    sae = tiny_saelens_sae("jumprelu")
    path = tmp_path / "params.npz"
    np.savez(path, **{k: v.numpy() for k, v in _tensors(sae).items()})
    ours = load_sae(f"npz:{path}")
    x = _x()
    expected = sae.encode(x)
    assert 0 < int((expected > 0).sum()) < expected.numel()  # the threshold matters here
    torch.testing.assert_close(ours.encode(x), expected)
    assert ours.info.architecture == "jumprelu"


def test_goodfire_pth_equals_saelens_standard(tmp_path: Path) -> None:
    sae = tiny_saelens_sae("relu")
    assert not sae.cfg.apply_b_dec_to_input
    t = _tensors(sae)
    state = {
        "encoder_linear.weight": t["W_enc"].T.contiguous(),
        "encoder_linear.bias": t["b_enc"],
        "decoder_linear.weight": t["W_dec"].T.contiguous(),
        "decoder_linear.bias": t["b_dec"],
    }
    path = tmp_path / "sae.pth"
    torch.save(state, path)
    x = _x()
    torch.testing.assert_close(load_sae(f"pth:{path}").encode(x), sae.encode(x))


def test_to_dtype_keeps_results_close(tmp_path: Path) -> None:
    sae = tiny_saelens_sae("jumprelu")
    path = tmp_path / "params.npz"
    np.savez(path, **{k: v.numpy() for k, v in _tensors(sae).items()})
    x = _x()
    f32 = load_sae(f"npz:{path}").encode(x)
    bf16 = load_sae(f"npz:{path}").to("cpu", torch.bfloat16).encode(x)
    assert bf16.dtype == torch.bfloat16
    assert (bf16.float() - f32).abs().max() < 0.1 * f32.abs().max()


def test_bad_sae_inputs(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        load_sae(f"npz:{tmp_path / 'missing.npz'}")
    with pytest.raises(InputError, match="directory not found"):
        load_sae(f"saelens-disk:{tmp_path / 'missing'}")
    np.savez(tmp_path / "partial.npz", W_enc=np.zeros((4, 8), np.float32))
    with pytest.raises(InputError, match="missing tensors") as err:
        load_sae(f"npz:{tmp_path / 'partial.npz'}")
    assert "partial.npz" in str(err.value)
    save_file(
        {"W_enc": torch.zeros(4, 8), "b_enc": torch.zeros(8), "b_dec": torch.zeros(4)},
        tmp_path / "s.safetensors",
    )
    with pytest.raises(InputError, match="unknown SAE architecture"):
        load_sae(f"safetensors:{tmp_path / 's.safetensors'},arch=gated")
    with pytest.raises(InputError, match="needs k"):
        load_sae(f"safetensors:{tmp_path / 's.safetensors'},arch=topk")
    save_file(
        {"W_enc": torch.zeros(4, 8), "b_enc": torch.zeros(5), "b_dec": torch.zeros(4)},
        tmp_path / "b.safetensors",
    )
    with pytest.raises(InputError, match="b_enc has shape"):
        load_sae(str(tmp_path / "b.safetensors"))
    # an sae-lens directory of an unknown architecture
    sae_dir = tmp_path / "weird"
    sae_dir.mkdir()
    (sae_dir / "cfg.json").write_text('{"architecture": "no-such-arch", "d_in": 4, "d_sae": 8}')
    with pytest.raises(InputError, match="cannot load"):
        load_sae(f"saelens-disk:{sae_dir}")
    # pickled objects are refused (weights_only), never unpickled
    torch.save({"encoder_linear.weight": torch.zeros(8, 4), "evil": Path("x")}, tmp_path / "p.pth")
    with pytest.raises(InputError, match="safely"):
        load_sae(f"pth:{tmp_path / 'p.pth'}")


@pytest.mark.parametrize(
    "spec", ["", "zip:/x", "npz:", "saelens:release-without-id", "safetensors:/x,color=red", "/no/such/thing"]
)
def test_bad_specs(spec: str) -> None:
    with pytest.raises(ConfigError):
        parse_sae_spec(spec)


def test_spec_round_trip() -> None:
    s = parse_sae_spec("safetensors:/a/b.safetensors,k=4,arch=topk")
    assert (s.kind, s.location, s.options) == ("safetensors", "/a/b.safetensors", {"k": "4", "arch": "topk"})
    assert parse_sae_spec(str(s)) == s
    assert parse_sae_spec("saelens:gemma-scope-2b-pt-res-canonical@layer_20/width_16k/canonical").kind == "saelens"
    assert parse_sae_spec("default").kind == "default"
