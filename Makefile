# The README's two commands: `make plan` (offline plan of the dev stack) and `make test` (every test).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STACK ?= dev
STAMP := $(VENV)/.installed

.PHONY: setup plan test lint golden clean

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

test: setup lint
	$(BIN)/pytest -q

# Refresh tests/golden/ from the current program; review the diff before committing it.
golden: setup
	$(BIN)/python -m tests.golden.refresh

clean:
	rm -rf build .pytest_cache .ruff_cache
