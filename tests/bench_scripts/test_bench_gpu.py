"""`benchmarks/bench_gpu.py` runs its real code paths: `--tiny` on the CPU here, the full setups on a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_gpu.py"


def run_bench(tmp_path: Path, *args: str, timeout: int) -> tuple[str, dict]:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
            "HOME": str(tmp_path),
            "TMPDIR": str(tmp_path),
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
        for suite in ("uniform", "skewed")
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


@pytest.mark.gpu
def test_full_bench_on_a_gpu(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    _, results = run_bench(tmp_path, "--rows", "512", "--naive-rows", "16", "--skip-vllm", timeout=1200)
    gemma = results["reader"][0]
    assert gemma["dtype"] == "bfloat16" and gemma["setup"].startswith("gemma")
    assert gemma["speedup_vs_naive"] > 1
