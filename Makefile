# One task runner. `make run` and `make test` do all the set-up on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint install clean migration-initial

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
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) outfitter.db .pytest_cache .mypy_cache .ruff_cache

## Before the first release only: rewrite the initial migration from the models.
migration-initial: install
	rm -f src/outfitter/migrations/versions/0001_initial_schema.py /tmp/outfitter-migration.db
	$(BIN)/python -c "from outfitter.migrations import autogenerate; from outfitter.db.session import make_engine; autogenerate(make_engine('sqlite:////tmp/outfitter-migration.db'), 'initial schema', rev_id='0001')"
	$(BIN)/ruff format src/outfitter/migrations/versions
