# The README's two commands: `make plan` (offline plan of the dev stack) and `make test` (every test).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STACK ?= dev
STAMP := $(VENV)/.installed

.PHONY: setup system-packages plan test lint golden bench clean

# Debian packages the tests use (shellcheck for rendered job scripts). The local Slurm daemons are
# installed by `slurm-eks local up`, which the test suite runs itself.
system-packages:
	@command -v shellcheck >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y -qq --no-install-recommends shellcheck; \
	  else echo "install shellcheck (apt-get install shellcheck) to run every test"; fi; }

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,jobs]'
	touch $(STAMP)

setup: $(STAMP)

plan: setup
	$(BIN)/slurm-eks plan --stack $(STACK)

lint: setup
	$(BIN)/ruff check .

test: setup system-packages lint
	$(BIN)/pytest -q

# Refresh tests/golden/ from the current program; review the diff before committing it.
golden: setup
	$(BIN)/python -m tests.golden.refresh

# Speed targets live here, not in timed tests: they print ratios.
bench: setup
	$(BIN)/python benchmarks/bench_train.py

clean:
	rm -rf build .pytest_cache .ruff_cache
