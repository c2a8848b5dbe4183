# The few entry points. Each creates or updates .venv itself, so a fresh
# machine needs only Python >= 3.10 and make.

# `make test` keeps pytest's exit status through `tee` (pipefail).
SHELL  := /bin/bash
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RUNTIME := $(VENV)/.runtime-stamp
STAMP  := $(VENV)/.installed-stamp
export HYPOTHESIS_PROFILE ?= dev
# The tests that neither start processes nor build anything (`make check`).
FAST := not slow and not subprocess and not build

.PHONY: demo test lint format gen gen-check pytest bench fuzz matrix clean

# The demo needs only the runtime dependencies; everything else also needs
# the tools of the `dev` dependency group (pyproject.toml), which is this
# repository's own and not published; `--group` needs pip >= 25.1.
$(RUNTIME): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade 'pip>=25.1'
	$(BIN)/python -m pip install --quiet -e .
	touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	$(BIN)/python -m pip install --quiet -e . --group dev
	touch $(STAMP)

## demo: the main job: a control plane and an agent, each in its own process,
## speaking the stream over gRPC on loopback; what the control plane learns, shown readably
demo: $(RUNTIME)
	$(BIN)/llmgw-wire demo

## test: lint, the generated code's freshness, and the test suite (ci profile), but
## for the builds (wheel, docs site, benchmarks: `make dist docs bench-smoke`);
## the slowest tests are listed in build/test-durations.txt
test: lint gen-check compat
	@mkdir -p build
	set -o pipefail; HYPOTHESIS_PROFILE=ci $(BIN)/python -m pytest -n auto -m "not build" \
		--durations=30 --durations-min=0.5 | tee build/test-output.txt
	awk '/slowest .*durations/ {on = 1} on && /^=/ && !/slowest/ {exit} on' \
		build/test-output.txt > build/test-durations.txt

pytest: $(STAMP)
	$(BIN)/python -m pytest

## lint: ruff (format and rules), mypy --strict, and the architecture's import contracts
lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

## gen: regenerate the wire layer from proto/ (and the health service's descriptor
## from grpc's health.proto, in third_party/grpc-proto/)
gen: $(STAMP)
	$(BIN)/python scripts/gen.py

## gen-check: fail when the committed wire layer differs from a fresh generation
gen-check: $(STAMP)
	$(BIN)/python scripts/gen.py --check

## compat: fail when proto/ breaks peers that run the last released schema, or
## has a field that no pair of the mapping carries; list what changed in the mapping
compat: $(STAMP)
	$(BIN)/llmgw-wire compat --mapping

## baseline: freeze proto/ as the shipped baseline of a released schema, e.g.
## `make baseline VERSION=1.1.0`; a frozen baseline is never rebuilt
BASELINE := llmgw_wire/schemas/llmgw_v1-$(VERSION).binpb
baseline: $(STAMP)
	@test -n "$(VERSION)" || { echo "usage: make baseline VERSION=X.Y.Z"; exit 2; }
	@test ! -e $(BASELINE) || { echo "$(BASELINE) exists; baselines are frozen once released"; exit 1; }
	cd proto && $(CURDIR)/$(BIN)/python -m grpc_tools.protoc -I. --include_imports --include_source_info \
		--descriptor_set_out=$(CURDIR)/$(BASELINE) $$(find . -name '*.proto' | cut -c3- | LC_ALL=C sort)
	$(BIN)/python -c 'import sys; from llmgw_wire.mapping._description import freeze_mapping; freeze_mapping(sys.argv[1])' \
		$(BASELINE:.binpb=.mapping.json)

.PHONY: compat baseline

## interop-buf: the schema checker against the real buf CLI (pinned, installed
## from npm into .tools/) on every case of tests/compat/buf_cases.py; fails on
## any disagreement that llmgw_wire/compat/deviations.json does not list.
## Needs npm (installed with apt-get when missing); `make test` does not.
BUF_VERSION := 1.75.0
TOOLS := .tools
BUF := $(TOOLS)/node_modules/.bin/buf
BUF_STAMP := $(TOOLS)/.buf-$(BUF_VERSION)-stamp

$(BUF_STAMP):
	@command -v npm >/dev/null 2>&1 || { \
		echo "npm is missing: installing nodejs and npm with apt-get"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -q && $$SUDO apt-get install -y -q nodejs npm; }
	mkdir -p $(TOOLS)
	npm install --prefix $(TOOLS) --no-audit --no-fund --save-exact --loglevel=error \
		@bufbuild/buf@$(BUF_VERSION)
	$(BUF) --version | grep -qx '$(BUF_VERSION)'
	touch $(BUF_STAMP)

interop-buf: $(STAMP) $(BUF_STAMP)
	LLMGW_BUF=$(CURDIR)/$(BUF) $(BIN)/python -m pytest -q -p no:cacheprovider tests/compat/test_compat_buf.py

## interop-go: the stream against real grpc-go peers, outside `make test`:
## installs Go, grpc-go and protobuf-go from Debian when they are missing
## (apt-get, as root), builds the Go agent and control plane from proto/ into
## build/interop/bin/, then runs interop/tests; INTEROP_ARGS go to pytest
interop-go: interop-go-build
	$(BIN)/python -m pytest -q -p no:cacheprovider interop/tests $(INTEROP_ARGS)

## interop-go-build: only the Go peers (and the packages they need)
interop-go-build: $(STAMP)
	interop/go/install-deps.sh
	interop/go/build.sh

.PHONY: interop-go interop-go-build

## interop: every check against real non-Python tools (CONTRIBUTING.md);
## the schema checker against buf, the stream against grpc-go peers
interop: interop-buf interop-go

.PHONY: interop-buf interop

## fixtures: regenerate the wire fixtures of HEAD (tests/fixtures/HEAD) from the
## current code, then review `git diff tests/fixtures`; released ones never change
fixtures: $(STAMP)
	LLMGW_UPDATE_FIXTURES=1 $(BIN)/python -m pytest -q tests/codec/test_fixtures.py

.PHONY: fixtures

## bench: the codec against betterproto2 and hand-written mappings, the
## schema checker against buf (when `make interop-buf` has installed it), and the
## registration storm; `make bench BENCH_ARGS="--json bench.json"` also writes JSON
bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

## fuzz: every round-trip law, long: rounds of FUZZ_EXAMPLES inputs per law and
## model until FUZZ_SECONDS have passed, each round with a fresh seed (FUZZ_SEED
## fixes the first; a random one is printed); a failure prints its minimal input
## and the command that reproduces it. The command sets its own hypothesis
## settings; HYPOTHESIS_PROFILE is for pytest. Then the coverage-guided targets
## of fuzz/ (atheris) for another FUZZ_SECONDS, shared among them: it prints the
## inputs and coverage each reached, and any finding (build/fuzz/).
FUZZ_SECONDS  ?= 1800
FUZZ_EXAMPLES ?= 1000
fuzz: $(STAMP)
	$(BIN)/llmgw-wire fuzz --seconds $(FUZZ_SECONDS) --examples $(FUZZ_EXAMPLES) \
		$(if $(FUZZ_SEED),--seed $(FUZZ_SEED))
	$(BIN)/python fuzz/run.py --seconds $(FUZZ_SECONDS)

## load: 1,000 agents on loopback, a connection each, against the library's control
## plane, grpc.aio's raw floor, the floor with the codec inline, and grpc-go (when
## `make interop-go-build` has built it), interleaved; CPU per exchange and per
## heartbeat, memory per agent; fails on anything lost. LOAD_ARGS go to bench/load.py
## (`--check`: also fail above 1.25x the floor; `--json FILE`; `--help`)
load: $(STAMP)
	$(BIN)/python bench/load.py $(LOAD_ARGS)

.PHONY: load

## failover: 1,000 agents (keep_connected to two addresses, a shard store each) on
## control plane A; A is killed, then stopped gracefully; the time until all are
## adopted on standby B (and as a multiple of Backoff.maximum), registrations lost
## or duplicated, compute lost, B's CPU; with grpc-go as B too when
## `make interop-go-build` has built it. FAILOVER_ARGS go to bench/failover.py
failover: $(STAMP)
	$(BIN)/python bench/failover.py $(FAILOVER_ARGS)

.PHONY: failover

## docs: build the documentation site into site/, warnings as errors (Python >= 3.11),
## and check what it shows (the tests of tests/test_docs.py marked `build`)
docs: $(STAMP)
	@if $(BIN)/python -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then \
		NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict && \
		LLMGW_SITE=$(CURDIR)/site $(BIN)/python -m pytest -q -m build tests/test_docs.py; \
	else echo "docs: the documentation tools need Python >= 3.11; not built"; fi

## bench-smoke: the benchmarks, whole but tiny: every contender still computes the
## same thing, and the report is complete (figures mean nothing here); and a
## failover of a handful of agents, nothing lost
bench-smoke: $(STAMP)
	$(BIN)/python -m pytest -q -m build tests/test_bench_smoke.py tests/test_failover_smoke.py

## dist: build the sdist and the wheel into dist/ and check them: metadata,
## contents (LICENSE, the .proto files, py.typed), version == the CHANGELOG's
## newest section; then install the wheel as the docs say, in a fresh venv
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --sdist --wheel --outdir dist . > /dev/null
	$(BIN)/python -m twine check --strict dist/*
	$(BIN)/python scripts/check_dist.py dist
	LLMGW_DIST=$(CURDIR)/dist $(BIN)/python -m pytest -q -m build tests/test_wheel.py

## resolutions: the wheel of `make dist` in four fresh venvs: every runtime dependency
## at its declared floor; everything at its newest, every extra too; every extra's
## requirements at their floors (the rest as pip resolves it); a service's grpcio pin
## that every extra leaves as it is. scripts/smoke.py runs on
## the wheel alone, and one smoke per extra where the extras are installed
resolutions: dist
	$(BIN)/python scripts/resolutions.py --wheel dist/llmgw_wire-*.whl

.PHONY: docs bench-smoke dist resolutions

.PHONY: docs

## matrix: the test suite on Python 3.10, 3.11, 3.12 and 3.13; MATRIX_ARGS go to
## scripts/matrix.py (versions, `--if-present`, `-- pytest args`)
matrix: $(STAMP)
	$(BIN)/python scripts/matrix.py $(MATRIX_ARGS)

clean:
	rm -rf $(VENV) .venv-matrix .mypy_cache .pytest_cache .ruff_cache .hypothesis build dist

## check: the quick loop while editing: ruff, mypy, the contracts, and the tests
## that neither start processes nor build anything, nor are marked slow (dev profile)
check: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m pytest -q -x -n auto -m "$(FAST)"

.PHONY: check
