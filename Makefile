# Set-up is part of every target: a fresh machine needs only python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck reliability bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/batchval run sample_inputs/portfolio.csv --out runs/sample

lint: $(STAMP)
	$(BIN)/ruff check batchval tests
	$(BIN)/ruff format --check batchval tests

typecheck: $(STAMP)
	$(BIN)/mypy batchval tests

test: lint typecheck
	$(BIN)/pytest -q

# Speed, pacing and memory figures against issue 13's targets, printed, never asserted;
# rewrites docs/performance.md. Quick by default (under 10 minutes); BENCH_ARGS=--full
# for the targets' own sizes (about 20 minutes).
BENCH_ARGS ?=
bench: $(STAMP)
	$(BIN)/python tests/bench/run.py $(BENCH_ARGS)

# The reliability suites at full size; rewrites docs/reliability.md (several minutes).
reliability: $(STAMP)
	$(BIN)/python tests/reliability/report.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
