# Two commands on a fresh machine with only Python 3.11+ and make:
#   make demo   - the main job: an agent and a client talking, with a cancelled request
#   make test   - lint, strict typing and the test suite (what CI runs)
# Both bootstrap a local virtualenv (.venv) on first use.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
SRC    := acp_trio tests tools examples benchmarks

.PHONY: test lint typecheck pytest demo bench-framing regen clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

test: lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)

typecheck: $(STAMP)
	$(BIN)/mypy --strict acp_trio

pytest: $(STAMP)
	$(BIN)/python -m pytest

demo: $(STAMP)
	$(BIN)/python examples/cancel_demo.py

bench-framing: $(STAMP)
	$(BIN)/python benchmarks/bench_framing.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis build dist
