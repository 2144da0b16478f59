PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint typecheck unit bench docs clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# Scan the example sessions; exit 1 (problems found) is the expected outcome here.
demo: install
	@$(BIN)/sessionfix scan examples/sessions; status=$$?; [ $$status -le 1 ]

lint: install
	$(BIN)/ruff check src tests bench

typecheck: install
	$(BIN)/mypy --strict src

unit: install
	$(BIN)/pytest

test: lint typecheck unit

bench: install
	$(BIN)/python bench/run.py

docs: install
	$(BIN)/sessionfix rule --all

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis .bench
