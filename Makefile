# Every target sets up what it needs: a virtual environment in .venv with the project installed.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: run test bench lint typecheck clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,server,postgres]'
	rm -f $(VENV)/.installed-*
	touch $@

$(VENV)/.bench-installed: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,server,postgres,bench]'
	touch $@

run: $(STAMP)
	$(BIN)/engram demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(VENV)/.bench-installed
	$(BIN)/python -m benchmarks.run

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache
