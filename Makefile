# The README's two commands: `make plan` (offline plan of the dev stack) and `make test` (every test).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STACK ?= dev
# `make plan` needs only the runtime; `make test` adds the extras (dev: tests, linters, manifest
# validators; jobs: torch). Each stamp is remade when pyproject.toml changes; either target can come first.
RUNTIME := $(VENV)/.installed-runtime
EXTRAS := $(VENV)/.installed-extras

.PHONY: setup setup-extras system-packages plan test lint golden bench clean

# Debian packages the tests use (shellcheck for rendered job scripts). The local Slurm daemons are
# installed by `slurm-eks local up`, which the test suite runs itself.
system-packages:
	@command -v shellcheck >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y -qq --no-install-recommends shellcheck; \
	  else echo "install shellcheck (apt-get install shellcheck) to run every test"; fi; }

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(RUNTIME): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(EXTRAS): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev,jobs]'
	touch $@ $(RUNTIME)

setup: $(RUNTIME)

setup-extras: $(EXTRAS)

plan: setup
	$(BIN)/slurm-eks plan --stack $(STACK)

lint: setup-extras
	$(BIN)/ruff check .

test: setup-extras system-packages lint
	$(BIN)/pytest -q

# Refresh tests/golden/ from the current program; review the diff before committing it.
golden: setup
	$(BIN)/python -m tests.golden.refresh

# Speed targets live here, not in timed tests: they print ratios.
bench: setup-extras
	$(BIN)/python benchmarks/bench_train.py

clean:
	rm -rf build .pytest_cache .ruff_cache
