# Every target sets itself up: a newcomer needs nothing but `make test` or `make demo`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy --strict scriptbridge sandbox

test: lint
	$(BIN)/pytest

demo: $(STAMP)
	$(BIN)/scriptbridge demo

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	$(BIN)/python benchmarks/compare.py

clean:
	rm -rf $(VENV) build dist .mypy_cache .ruff_cache .hypothesis
