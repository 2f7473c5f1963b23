# The README's two commands, `make demo` and `make test`, do all the set-up on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.installed-docs

.PHONY: install demo screenshots test test-slow bench lint docs clean

install: $(STAMP)

# The package, and the example dg project (so that `dg` commands run in examples/privrelease_demo).
$(STAMP): pyproject.toml examples/privrelease_demo/pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python -m pip install --quiet --no-deps -e examples/privrelease_demo
	touch $(STAMP)

# The docs extra (MkDocs, Material, mkdocstrings) on top of the same install; `make test` does not need it.
$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,docs]'
	touch $(DOCS_STAMP)

# Every demo table (demo.DEMOS), each its own number of releases, then a summary; each table's history replaces
# only its own in demo/.dagster.
demo: $(STAMP)
	$(BIN)/privrelease demo --table all

# The Dagster UI over the demo (built first where demo/ lacks a table), as docs/images/*.png: dagster-webserver on
# a loopback port, Debian's chromium driven by Playwright (scripts/screenshots.py).
screenshots: $(STAMP)
	$(BIN)/python scripts/screenshots.py

# In parallel (pytest-xdist): a worker per logical core, each test handed to the next free worker (a module's tests
# may run on several workers: each test keeps to its own tmp_path and monkeypatch). `make test WORKERS=0`: serially.
# The 15 slowest tests are listed at the end. Property tests run a quarter of their examples (tests/budget.py).
WORKERS ?= logical
test: $(STAMP)
	$(BIN)/python -m pytest -n $(WORKERS) --dist worksteal --durations=15

# The minutes-long runs left out of `make test` (marked slow), then every property test with all its examples.
test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow
	HYPOTHESIS_PROFILE=full $(BIN)/python -m pytest -n $(WORKERS) --dist worksteal -m hypothesis

# Rewrites docs/benchmarks/bench_<name>.md, the Benchmarks page's sections, from the figures it prints.
bench: $(STAMP)
	$(BIN)/python -m benchmarks

# The site, into site/: --strict turns every warning (a broken link, a docstring griffe cannot read) into a failure.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lint: $(STAMP)
	$(BIN)/ruff check dagster_privrelease examples tests benchmarks docs/hooks scripts
	$(BIN)/pyright

clean:
	rm -rf $(VENV) .venv-peer .pytest_cache site
