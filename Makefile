# One task runner. `make run` and `make test` do all the set-up on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

## Serve on the embedded default: SQLite, demo data, a printed token.
run: install
	$(BIN)/outfitter demo
	$(BIN)/outfitter serve --host 127.0.0.1 --port 8000

## Lint, type-check, then the whole suite (SQLite always; PostgreSQL when reachable, required in CI).
test: install lint
	$(BIN)/pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

clean:
	rm -rf $(VENV) outfitter.db .pytest_cache .mypy_cache .ruff_cache
