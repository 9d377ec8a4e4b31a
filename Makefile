# Common tasks. `make demo` and `make test` are the README's two commands; .ci/run runs exactly those.
VENV   ?= .venv
PY     := $(VENV)/bin/python
CG_RAY := $(VENV)/bin/cg-ray
RUN    ?= runs/demo

.PHONY: setup demo lint format typecheck pytest test bench clean

$(VENV)/.setup-done: pyproject.toml scripts/setup.sh
	bash scripts/setup.sh
	touch $@

setup: $(VENV)/.setup-done  ## create .venv and install the verified CPU stack

demo: setup  ## the main job on the embedded default: synthetic suite -> metrics -> robustness
	$(CG_RAY) example --out $(RUN)-rows.parquet --labels-out $(RUN)-labels.csv
	$(CG_RAY) metrics --rows $(RUN)-rows.parquet --labels $(RUN)-labels.csv --out $(RUN) --overwrite
	$(CG_RAY) robustness --rows $(RUN)/rows.parquet --out $(RUN)/robustness --overwrite

lint: setup  ## ruff lint + format check
	$(VENV)/bin/ruff check cg_ray tests benchmarks
	$(VENV)/bin/ruff format --check cg_ray tests benchmarks

format: setup
	$(VENV)/bin/ruff format cg_ray tests benchmarks
	$(VENV)/bin/ruff check --fix cg_ray tests benchmarks

typecheck: setup  ## mypy over cg_ray/
	$(VENV)/bin/mypy

pytest: setup  ## the test suite only
	$(PY) -m pytest -q

test: lint typecheck pytest  ## everything CI checks: lint, types, tests

bench: setup  ## performance benchmarks (each prints its speed ratio last)
	$(PY) benchmarks/bench_metrics.py

clean:
	rm -rf runs .pytest_cache .mypy_cache .ruff_cache
