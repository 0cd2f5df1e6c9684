# Every target sets itself up: a newcomer needs nothing but `make test` or `make demo`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# npm's MCP servers for the tests against servers nobody here wrote (skipped without node)
NPM_DIR := $(VENV)/npm
NPM_STAMP := $(NPM_DIR)/.installed

.PHONY: test demo lint bench clean npm-servers fuzz

$(STAMP): pyproject.toml hatch_build.py scriptbridge/_fastcontent.c
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,smolagents,langgraph,fastmcp]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy --strict scriptbridge sandbox

$(NPM_STAMP): tests/npm/package.json | $(STAMP)
	@if command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then \
		mkdir -p $(NPM_DIR) && cp tests/npm/package.json $(NPM_DIR)/package.json && \
		npm install --prefix $(NPM_DIR) --cache $(NPM_DIR)/cache --no-audit --no-fund \
			--no-package-lock --loglevel=error && touch $@; \
	else \
		echo "node or npm not found: the tests against npm's MCP servers will be skipped"; \
	fi

npm-servers: $(NPM_STAMP)

# two workers: most tests wait on children, servers and pipes, so the suite takes about half
# as long on two cores (CI's); `.venv/bin/pytest` alone still runs it in one process
test: lint npm-servers
	$(BIN)/pytest -n 2

# every fuzz target (fuzz/) for FUZZ_S seconds each, the C loop built with ASan and UBSan (needs
# clang; atheris comes with the test extra); findings and what the runs learnt stay in
# fuzz/findings/ (SECURITY.md says more)
FUZZ_S ?= 10
fuzz: $(STAMP)
	nice -n 10 $(BIN)/python fuzz/run.py --seconds $(FUZZ_S)

demo: $(STAMP)
	$(BIN)/scriptbridge demo

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	$(BIN)/python benchmarks/compare.py

clean:
	rm -rf $(VENV) build dist .mypy_cache .ruff_cache .hypothesis fuzz/findings
