# The README's two commands, `make demo` and `make test`, do all the set-up on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.installed-docs

.PHONY: install demo screenshots test test-slow bench lint docs clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
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

test: $(STAMP)
	$(BIN)/python -m pytest

test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow

# Rewrites docs/benchmarks/bench_<name>.md, the Benchmarks page's sections, from the figures it prints.
bench: $(STAMP)
	$(BIN)/python -m benchmarks

# The site, into site/: --strict turns every warning (a broken link, a docstring griffe cannot read) into a failure.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lint: $(STAMP)
	$(BIN)/ruff check dagster_privrelease assets tests benchmarks docs/hooks scripts
	$(BIN)/pyright

clean:
	rm -rf $(VENV) .venv-peer .pytest_cache site
