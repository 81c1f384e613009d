# The README's two commands: `make plan` (offline plan of the dev stack) and `make test` (every test).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STACK ?= dev
# `make plan` needs only the runtime; `make test` adds the extras (dev: tests, linters, manifest
# validators; jobs: torch). Each stamp is remade when pyproject.toml changes; either target can come first.
# No pip cache: the torch-xla venv alone downloads about 3 GB of wheels that a cache would keep twice on disk,
# and CI's disk has run out there.
PIP_FLAGS := --quiet --no-cache-dir
RUNTIME := $(VENV)/.installed-runtime
EXTRAS := $(VENV)/.installed-extras

.PHONY: setup setup-extras system-packages xla-venv plan test lint golden bench bench-gpu crds mutate clean

# Debian packages the tests use: shellcheck (rendered job scripts), sssd-tools and sssd-ldap (`sssctl
# config-check`, sssd against a test directory), openssh-server (`sshd -T`), slapd and ldap-utils (that test
# directory). No service of theirs is started: a policy-rc.d answers "no" while apt installs them (libnss-sss
# and libpam-sss still add sss to nsswitch.conf and PAM, harmless while no sssd runs). The local Slurm daemons
# are installed by `slurm-eks local up`, which the test suite runs itself.
SYSTEM_PACKAGES := shellcheck sssd-tools sssd-ldap openssh-server slapd ldap-utils mariadb-server mariadb-client openssl
system-packages:
	@missing="$$(for p in $(SYSTEM_PACKAGES); do dpkg-query -W -f='$${db:Status-Status}' $$p 2>/dev/null \
	  | grep -qx installed || echo $$p; done)"; [ -z "$$missing" ] || { \
	  if [ "$$(id -u)" = 0 ]; then guard=; [ -e /usr/sbin/policy-rc.d ] || { guard=1; \
	      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; }; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	      $$missing; rc=$$?; [ -z "$$guard" ] || rm -f /usr/sbin/policy-rc.d; exit $$rc; \
	  else echo "to run every test: apt-get install" $$missing; fi; }

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install $(PIP_FLAGS) --upgrade pip

$(RUNTIME): pyproject.toml | $(BIN)/python
	$(BIN)/pip install $(PIP_FLAGS) -e .
	touch $@

$(EXTRAS): pyproject.toml | $(BIN)/python
	$(BIN)/pip install $(PIP_FLAGS) -e '.[dev,jobs]'
	touch $@ $(RUNTIME)

setup: $(RUNTIME)

setup-extras: $(EXTRAS)

plan: setup
	$(BIN)/slurm-eks plan --stack $(STACK)

# torch-xla on the CPU for the Trainium path's tests; its torch differs from ours, so its own venv. PyPI's torch
# 2.9.1 is the CUDA build, whose NVIDIA libraries (4.3 GB) its import loads; triton (0.6 GB), the GPU kernel
# compiler, is never loaded on the CPU, so it goes.
XLA_VENV := .venv-xla
$(XLA_VENV)/.installed: jobs/requirements-xla.txt
	$(PYTHON) -m venv $(XLA_VENV)
	$(XLA_VENV)/bin/pip install $(PIP_FLAGS) -r jobs/requirements-xla.txt
	$(XLA_VENV)/bin/pip uninstall $(PIP_FLAGS) -y triton
	touch $@

xla-venv: $(XLA_VENV)/.installed

lint: setup-extras
	$(BIN)/ruff check .

# Everything but the local Slurm tests on TEST_WORKERS processes (one per core, at least 2; a test module stays
# on one, so its fixtures are built once); the Slurm tests then alone: one local Slurm at a time.
TEST_WORKERS ?= $(shell n=$$(nproc); [ $$n -gt 2 ] && echo $$n || echo 2)
# The three installs share nothing (the main venv, Debian packages, the torch-xla venv) and mostly wait on
# downloads and disk, so they run side by side: about two minutes less on a fresh machine.
test:
	$(MAKE) --no-print-directory -j3 setup-extras system-packages xla-venv
	$(MAKE) --no-print-directory lint
	$(BIN)/pytest -q -m "not slurm" -n $(TEST_WORKERS) --dist loadfile --durations=30
	$(BIN)/pytest -q -m slurm --durations=15

# Refresh tests/golden/ from the current program; review the diff before committing it.
golden: setup
	$(BIN)/python -m tests.golden.refresh

# Speed targets live here, not in timed tests: they print ratios.
bench: setup-extras
	$(BIN)/python benchmarks/bench_manifests.py
	$(BIN)/python benchmarks/bench_train.py

# On a GPU machine: tokens/s and MFU of one node-local run of a preset (MODEL=llama3-1b by default).
MODEL ?= llama3-1b
bench-gpu: setup-extras
	$(BIN)/python benchmarks/bench_gpu.py --model $(MODEL)

# The upstream CRD schemas, from the commits pinned in tools/crds.json, SHA-256 checked, into build/crds
# (which the tests then read instead of ../shared/crds). Standard library only: no venv needed.
crds:
	$(PYTHON) tools/fetch_crds.py

# Mutation testing of the safety modules against their targeted tests (tests/mutation/run.py); long, so
# on demand only, never in CI or `make test`. MODULES="scripts/checks/order.py ..." narrows it.
MODULES ?=
$(VENV)/.installed-mutate: pyproject.toml $(EXTRAS)
	$(BIN)/pip install --quiet -e '.[mutate]'
	touch $@

mutate: $(VENV)/.installed-mutate
	$(BIN)/python -m tests.mutation.run $(MODULES)

clean:
	rm -rf build .pytest_cache .ruff_cache
