# One task runner. `make run` and `make test` do all the set-up on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The service's own dependencies, and on top of them the test tools (only `make test` needs them).
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: run reset test lint install install-dev clean migration-initial

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e .
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(DEV_STAMP)

install: $(STAMP)

install-dev: $(DEV_STAMP)

## Serve on the embedded default: SQLite, demo data, a printed token. Another port: make run PORT=9000
## (the payment links and the sandbox's webhook follow it, through OUTFITTER_PUBLIC_URL).
PORT ?= 8000
run: install
	OUTFITTER_PUBLIC_URL=$${OUTFITTER_PUBLIC_URL:-http://127.0.0.1:$(PORT)} $(BIN)/outfitter demo --port $(PORT)
	OUTFITTER_PUBLIC_URL=$${OUTFITTER_PUBLIC_URL:-http://127.0.0.1:$(PORT)} \
		$(BIN)/outfitter serve --host 127.0.0.1 --port $(PORT)

## Lint, type-check, then the whole suite in two processes, naming its 25 slowest tests (SQLite
## always; PostgreSQL when reachable, required in CI). One process: make test PYTEST_ARGS=
PYTEST_ARGS ?= -n 2 --dist worksteal --durations=25
test: install-dev lint
	$(BIN)/pytest $(PYTEST_ARGS) --ignore=tests/architecture

lint: install-dev
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/pytest -q -p no:cacheprovider -n 0 --noconftest tests/architecture  # no circle, no private API

## Start the demo data afresh: delete the embedded SQLite database (the one `make run` printed under
## "Data:") and its kept demo token, then load the demo again. A PostgreSQL database is left alone.
reset: install
	OUTFITTER_PUBLIC_URL=$${OUTFITTER_PUBLIC_URL:-http://127.0.0.1:$(PORT)} $(BIN)/outfitter demo --reset

## Remove what the checkout built (the virtualenv, caches); the data stays: `make reset` for that.
clean:
	rm -rf $(VENV) outfitter.db .pytest_cache .mypy_cache .ruff_cache

## Before the first release only: rewrite the initial migration from the models.
migration-initial: install-dev
	rm -f src/outfitter/migrations/versions/0001_initial_schema.py /tmp/outfitter-migration.db
	$(BIN)/python -c "from outfitter.migrations import autogenerate; from outfitter.db.session import make_engine; autogenerate(make_engine('sqlite:////tmp/outfitter-migration.db'), 'initial schema', rev_id='0001')"
	$(BIN)/ruff format src/outfitter/migrations/versions
