# The few entry points. Each creates or updates .venv itself, so a fresh
# machine needs only Python >= 3.10 and make.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
export HYPOTHESIS_PROFILE ?= dev

.PHONY: demo test lint format gen gen-check pytest bench fuzz clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## demo: the main job: a sample registration across the wire, shown readably
demo: $(STAMP)
	$(BIN)/llmgw-wire demo

## test: lint, the generated code's freshness, and the whole test suite (ci profile)
test: lint gen-check
	HYPOTHESIS_PROFILE=ci $(BIN)/python -m pytest

pytest: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

## gen: regenerate the wire layer from proto/
gen: $(STAMP)
	$(BIN)/python scripts/gen.py

## gen-check: fail when the committed wire layer differs from a fresh generation
gen-check: $(STAMP)
	$(BIN)/python scripts/gen.py --check

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis build dist
