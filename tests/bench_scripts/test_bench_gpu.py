"""`benchmarks/bench_gpu.py` runs its real code paths: `--tiny` on the CPU here, the full setups on a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_gpu.py"


def run_bench(tmp_path: Path, *args: str, timeout: int) -> tuple[str, dict]:
    out = tmp_path / "bench.json"
    # A short TMPDIR: vLLM binds its ZMQ sockets there, and a unix socket path holds at most 107 characters
    # (an xdist worker's tmp_path, /tmp/pytest-of-…/popen-gw1/…, left too few).
    with tempfile.TemporaryDirectory(prefix="cgb", dir="/tmp") as tmp:
        proc = subprocess.run(
            [sys.executable, str(SCRIPT), *args, "--json", str(out)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
                "HOME": str(tmp_path),
                "TMPDIR": tmp,
                "HF_HUB_OFFLINE": "1",
            },
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, json.loads(out.read_text())


@pytest.mark.slow
def test_tiny_bench_runs_the_reader_and_vllm_and_prints_the_ratio_last(tmp_path: Path) -> None:
    stdout, results = run_bench(tmp_path, "--tiny", "--rows", "12", "--naive-rows", "3", timeout=1800)
    # The bench's own lines (vLLM's engine processes log to the same stdout, prefixed "(Name pid=…)").
    lines = [line for line in stdout.strip().splitlines() if not line.startswith("(")]
    assert lines[0].startswith("hardware: CPU")
    assert lines[-1].startswith("speed-up (reader") and lines[-1].endswith("x")
    reader = results["reader"]
    # every setup x suite x path, in that order
    assert [(r["setup"], r["suite"], r["path"]) for r in reader] == [
        (setup, suite, path)
        for setup in ("gemma-2 (tiny)", "llama-3.1 (tiny)")
        for suite in ("uniform", "skewed", "shared")
        for path in ("auto", "padded", "packed-sdpa", "packed-flex")
    ]
    for r in reader:
        assert 0 <= r["padding_share"] < 1
        if r["setup"].startswith("gemma") and r["path"] == "packed-sdpa":
            assert "soft-capping" in r["skipped"]  # Gemma-2 packs only with FlexAttention
            continue
        assert r["tokens_per_s"] > 0 and r["naive_tokens_per_s"] > 0
        assert r["dtype"] in ("float32", "bfloat16")
        assert 0 < r["pooled_latents_per_row"] <= 512  # the random SAE fires sparsely per token
        assert r["ran"] == ("packed-sdpa" if r["setup"].startswith("llama") else "padded") or r["path"] != "auto"
        if r["dtype"] == "float32":  # the reader and the naive way read the same weights: they agree
            assert r["max_abs_pre"] < 1e-3 and r["max_abs_s"] < 1e-2, r
    skew = {r["suite"]: r["padding_share"] for r in reader if r["path"] == "padded"}
    assert skew["skewed"] > skew["uniform"] > 0  # the skewed suite pads more
    vllm = results["vllm"]
    assert vllm["output_tokens"] == 16 * 16  # EOS ignored: every prompt gets all its tokens
    assert vllm["output_tokens_per_s"] > 0 and vllm["engine_start_s"] > 0


@pytest.mark.slow
def test_tiny_bench_compiled_flex_runs_every_suite_without_recompiles(tmp_path: Path) -> None:
    """Issue #41's CPU check of `--tiny --skip-vllm --paths padded,packed-flex --compile true` (aot_eager
    here, to stay quick; the command itself runs inductor): every setup x suite to the end, no fallback,
    no compile in the timed pass, flex == padded in float32."""
    stdout, results = run_bench(
        tmp_path, "--tiny", "--skip-vllm", "--paths", "padded,packed-flex", "--compile", "true",
        "--compile-backend", "aot_eager", "--rows", "16", "--naive-rows", "2", timeout=1800,
    )  # fmt: skip
    reader = results["reader"]
    assert [(r["setup"], r["suite"], r["path"]) for r in reader] == [
        (setup, suite, path)
        for setup in ("gemma-2 (tiny)", "llama-3.1 (tiny)")
        for suite in ("uniform", "skewed", "shared")
        for path in ("padded", "packed-flex")
    ]
    for r in reader:
        assert r["ran"] == r["path"] and r["compiled"] and r["packing_fallback"] is None, r
        assert r["compiles_in_timed_pass"] == 0, r
        if r["dtype"] == "float32":  # the reader and the naive way read the same weights: they agree
            assert r["max_abs_pre"] < 1e-3 and r["rel_s"] < 1e-4, r
        else:  # a native-bf16 CPU: beside the naive way in bf16 and that way's own noise
            assert r["vs_naive_same_dtype"] and r["naive_dtype_noise"], r
        assert (r["mask_build_ms_per_batch"] is not None) == (r["path"] == "packed-flex")
    shared = {r["suite"]: r["shared_share"] for r in reader if r["path"] == "padded"}
    assert shared["shared"] > 0.3 > shared["uniform"]  # 8 answers after one question
    assert stdout.strip().splitlines()[-1].startswith("speed-up (reader")


@pytest.mark.gpu
def test_full_bench_on_a_gpu(tmp_path: Path) -> None:
    """A short full-size run (a GPU session has minutes): padded and flex on every suite, eager, warmed
    up: no compile in the timed pass, no fallback, and the bf16 agreement beside its own noise floor."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    _, results = run_bench(
        tmp_path, "--rows", "256", "--naive-rows", "4", "--skip-vllm", "--paths", "padded,packed-flex",
        timeout=1200,
    )  # fmt: skip
    gemma = results["reader"][0]
    assert gemma["dtype"] == "bfloat16" and gemma["setup"].startswith("gemma")
    assert gemma["speedup_vs_naive"] > 1
    for r in results["reader"]:
        assert r["compiles_in_timed_pass"] == 0 and r["packing_fallback"] is None, r
        assert r["naive_dtype_noise"] is not None  # bf16: the naive way in bf16 against float32
