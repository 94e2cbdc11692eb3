# Two commands on a fresh machine: `make run` and `make test`. Both create .venv and install what they need.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
STORE_DIR ?= var/store

.PHONY: run test lint bench clean

$(STAMP): requirements.txt
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON)"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	@touch $(STAMP)

run: $(STAMP)
	@mkdir -p $(STORE_DIR)
	$(PY) -m broker_core --store-dir $(STORE_DIR)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

test: $(STAMP) lint
	$(VENV)/bin/pytest

bench: $(STAMP)
	$(PY) -m bench.store

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache .hypothesis
