# Two commands on a fresh machine with only Python 3.11+ and make:
#   make demo   - the main job: an agent and a client talking, with a cancelled request
#   make test   - lint, strict typing and the test suite (what CI runs)
# Both bootstrap a local virtualenv (.venv) on first use. The test targets and
# tiers (check, test, test-slow, coverage, ...) are in docs/testing-the-project.md.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
SRC    := acp_trio tests tools examples benchmarks docs/conf.py docs/_ext

# The TypeScript SDK, for the interop tests (skipped where npm is missing).
INTEROP_STAMP := tests/interop/node_modules/.installed

# acpx, a real headless ACP client, for the check-client tests (skipped without it).
# `npm install` with the lock, not `npm ci`: the lock lacks the optional
# platform packages of a dependency that the registry did not resolve.
ACPX_STAMP := tests/acpx/node_modules/.installed

# The official Python SDK's 1.0 release candidate (remote transports), in a
# virtualenv of its own: our test extra pins its 0.12 line for the stdio
# interop tests (skipped where the install fails).
OFFICIAL_RC_VENV  := tests/interop/.venv-official-rc
OFFICIAL_RC_STAMP := $(OFFICIAL_RC_VENV)/.installed


BENCH_VENV  := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed

.PHONY: docs test check lint typecheck typecheck-docs pytest pytest-fast test-slow test-install coverage coverage-report test-pythons test-pythons-prepare demo check-real-agents bench bench-framing bench-connection bench-schema bench-sdks bench-report bench-targets bench-remote bench-scale fuzz-websocket test-hypercorn-latest test-attacks regen schema-update clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# ---------------------------------------------------------------------------
# Tests (docs/testing-the-project.md). `make test` is what CI runs: the default
# tier on $(PYTEST_WORKERS) pytest-xdist workers under branch coverage, failing
# below the floor in pyproject.toml ([tool.coverage.report] fail_under).
# `make check` is the inner loop: the same without coverage, the interop
# installs or the tests that wait on other processes' timing.

# pytest rewrites the asserts of every module of the tests and of acp_trio (a
# pytest plugin's distribution) on import; with bytecode writes off it does so
# again in every run and in every worker (three times the CPU of collecting).
unexport PYTHONDONTWRITEBYTECODE

#: pytest-xdist workers: `auto` is one per core. PYTEST_WORKERS=0 runs in one process.
PYTEST_WORKERS ?= auto
XDIST := -n $(PYTEST_WORKERS) --dist loadgroup
#: More pytest arguments for pytest, pytest-fast and test-slow (PYTEST_ARGS="-k cancel").
PYTEST_ARGS ?=
#: The core layers, whose missing lines and branches `make coverage` prints.
CORE := acp_trio/_core/*,acp_trio/_jsonrpc/*,acp_trio/_transports/*,acp_trio/_typed/*

test: lint typecheck pytest

check: lint typecheck pytest-fast

lint: $(STAMP)
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)

typecheck: $(STAMP)
	$(BIN)/mypy --strict acp_trio examples tests/typed_usage
	$(MAKE) --no-print-directory typecheck-docs

# The README's and guides' code under mypy --strict: the `typecheck` tier of
# the suite (tests marked typecheck, found in the files that name the
# marker; collecting only those saves collecting the whole suite).
TYPECHECK_TESTS = $(shell grep -rl --include='test_*.py' --exclude-dir=node_modules --exclude-dir='.venv*' 'mark.typecheck' tests)
typecheck-docs: $(STAMP) $(INTEROP_STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 0 --run-typecheck -m typecheck $(TYPECHECK_TESTS)

$(INTEROP_STAMP): tests/interop/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix tests/interop --no-audit --no-fund --silent && touch $@ \
		|| echo "npm ci failed: the TypeScript interop tests will be skipped"; \
	else \
		echo "npm not found: the TypeScript interop tests will be skipped"; \
	fi

$(ACPX_STAMP): tests/acpx/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		npm install --prefix tests/acpx --no-audit --no-fund --silent --ignore-scripts && touch $@ \
		|| echo "npm install failed: the acpx check-client test will be skipped"; \
	else \
		echo "npm not found: the acpx check-client test will be skipped"; \
	fi

$(OFFICIAL_RC_STAMP): tests/interop/official-rc-requirements.txt
	@( $(PYTHON) -m venv $(OFFICIAL_RC_VENV) \
		&& $(OFFICIAL_RC_VENV)/bin/python -m pip install --quiet -r tests/interop/official-rc-requirements.txt \
		&& touch $@ ) \
		|| echo "installing agent-client-protocol 1.0.0rc3 failed: its remote interop tests will be skipped"

pytest: $(STAMP) $(INTEROP_STAMP) $(ACPX_STAMP) $(OFFICIAL_RC_STAMP)
	$(BIN)/python -m coverage erase
	$(BIN)/python -m coverage run -m pytest $(XDIST) --durations=25 $(PYTEST_ARGS)
	$(MAKE) --no-print-directory coverage-report

# The default tier without coverage and without the tests that wait on other
# processes (the `process` marker): the inner loop of `make check`.
pytest-fast: $(STAMP)
	$(BIN)/python -m pytest $(XDIST) -q -m "not process" $(PYTEST_ARGS)

# The package as a user gets it: a wheel built and installed into a fresh
# virtualenv, the checker and the pytest plugin run from it, and each step of
# the CI recipe in docs/checking-in-ci.md (a slow test: CI runs it on its own).
test-install: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 0 --run-slow tests/test_install.py

# The slow tier: tests that measure time or memory under load, or run for
# minutes (benchmarks' scripts, attack budgets, installs). Not in CI's run.
test-slow: $(STAMP) $(INTEROP_STAMP) $(OFFICIAL_RC_STAMP)
	$(BIN)/python -m pytest $(XDIST) --run-slow -m slow $(PYTEST_ARGS)

# The suite's branch coverage (failing below the floor), then what the core
# layers miss: each file's missing lines and branches ("12->15": the branch
# from line 12 to line 15 never taken). Reads the data of the last `make test`.
coverage-report: $(STAMP)
	@$(BIN)/python -m coverage combine --append -q 2>/dev/null || true
	$(BIN)/python -m coverage report --include='$(CORE)' --show-missing --skip-covered --fail-under=0
	@echo "branch coverage of acp_trio (the floor is fail_under in pyproject.toml):"
	@$(BIN)/python -m coverage report --format=total

coverage: coverage-report

demo: $(STAMP)
	$(BIN)/python examples/cancel_demo.py

# Benchmarks that compare with the official Python SDK run in their own
# virtualenv, which also has `agent-client-protocol` (asyncio + pydantic).
$(BENCH_STAMP): pyproject.toml
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

bench: bench-framing bench-connection bench-schema bench-sdks

bench-framing: $(STAMP)
	$(BIN)/python benchmarks/bench_framing.py

bench-connection: $(STAMP)
	$(BIN)/python benchmarks/bench_connection.py

# Remote ACP on loopback: acp_trio, the TypeScript SDK and the official Python
# SDK's release candidate, WebSocket and Streamable HTTP.
bench-remote: $(STAMP) $(INTEROP_STAMP) $(OFFICIAL_RC_STAMP)
	$(BIN)/python benchmarks/bench_remote.py

# 1,000 remote clients at once on each profile, then 5,000 over WebSocket
# (benchmarks/bench_scale.py; `make bench-report` runs both too).
bench-scale: $(STAMP)
	$(BIN)/python benchmarks/bench_scale.py --connections 1000
	$(BIN)/python benchmarks/bench_scale.py --connections 5000 --profile websocket

# The other Pythons the classifiers name: a smoke run on each (imports, the
# demo, tests/jsonrpc and tests/connection) in a virtualenv of its own
# (tools/smoke_python.sh; a Python the machine lacks is skipped, saying so).
SMOKE_PYTHONS ?= 3.12 3.13
test-pythons:
	@for version in $(SMOKE_PYTHONS); do tools/smoke_python.sh $$version || exit 1; done

# Only their virtualenvs (downloads and installs: .ci/run makes them beside
# the test run, which keeps the cores busy meanwhile).
test-pythons-prepare:
	@for version in $(SMOKE_PYTHONS); do tools/smoke_python.sh $$version --prepare || exit 1; done

# The canary: the contract over the private hypercorn names the server's
# front uses, and the front's own tests, against the newest hypercorn on the
# package index (CI, after `make test`): a hypercorn release that breaks the
# front fails here, naming the name, before it reaches users. The newest
# hypercorn and what it needs go into an overlay directory in front of .venv
# (PYTHONPATH), over the trio and the rest of .venv: nothing is built from
# nothing, and .venv keeps its pins.
HYPERCORN_OVERLAY := .venv-hypercorn-latest
HYPERCORN_TESTS := tests/remote/test_hypercorn_contract.py tests/remote/test_front.py tests/remote/test_front_config.py
test-hypercorn-latest: $(STAMP)
	rm -rf $(HYPERCORN_OVERLAY)
	$(BIN)/python -m pip install --quiet --target $(HYPERCORN_OVERLAY) --upgrade hypercorn
	@PYTHONPATH=$(HYPERCORN_OVERLAY) $(BIN)/python -c "import hypercorn, importlib.metadata as m; assert hypercorn.__file__.startswith('$(CURDIR)/$(HYPERCORN_OVERLAY)/'), hypercorn.__file__; print('hypercorn', m.version('hypercorn'), 'from', '$(HYPERCORN_OVERLAY)')"
	PYTHONPATH=$(HYPERCORN_OVERLAY) $(BIN)/python -m pytest $(XDIST) -q -p no:cacheprovider $(HYPERCORN_TESTS)

# The attack tier (tests/attacks): each attack of issue 47 against a server with
# its default bounds while a good client makes round trips; their latency and the
# server's memory judged, the table written to attack-report.md (about 5 minutes;
# skipped by the default run).
test-attacks: $(STAMP)
	ACP_TRIO_ATTACKS=1 $(BIN)/python -m pytest tests/attacks -v -p no:cacheprovider

# The WebSocket differential test's long run against wsproto (about 10 minutes on 2 cores).
fuzz-websocket: $(STAMP)
	$(BIN)/python benchmarks/fuzz_websocket.py --sequences 1000000 --jobs 2

bench-schema: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python benchmarks/bench_schema.py

# acp_trio, the official Python SDK, the TypeScript SDK and a standard-library
# floor, client x agent over OS pipes (stream, read, cancel latency).
bench-sdks: $(BENCH_STAMP) $(INTEROP_STAMP)
	$(BENCH_VENV)/bin/python benchmarks/bench_sdks.py

# The public ACP benchmark: the whole matrix in one run (about 20 minutes on
# 2 cores), written to docs/benchmarks.md with its charts (docs/benchmarks/).
bench-report: $(BENCH_STAMP) $(INTEROP_STAMP) $(OFFICIAL_RC_STAMP)
	$(BENCH_VENV)/bin/python benchmarks/bench_report.py

# Only what the report's Targets table judges (each target against its own
# floor, in the same run: some ten minutes), printed; the page is not
# touched. TARGETS_JSON=FILE keeps the figures.
bench-targets: $(BENCH_STAMP) $(INTEROP_STAMP)
	$(BENCH_VENV)/bin/python benchmarks/bench_report.py --targets-only $(if $(TARGETS_JSON),--json $(TARGETS_JSON))

# The documentation site (docs/, Sphinx with MyST Markdown) into docs/_build/html,
# warnings as errors (-W), every reference into acp_trio resolved (-n). The
# `docs` extra goes into .venv beside the test extra.
DOCS_STAMP := $(VENV)/.docs-installed

$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(BIN)/python -m sphinx -b html -W --keep-going -n -q docs docs/_build/html

# Regenerate the schema modules and the structural schemas the package ships
# (acp_trio/schema/) from the @agentclientprotocol/sdk npm package that
# tests/interop/package.json pins (npm installs it).
regen: $(STAMP) $(INTEROP_STAMP)
	$(BIN)/python tools/gen_schema.py

# Pin another release of @agentclientprotocol/sdk (the TypeScript interop
# tests' peer too), then regenerate: make schema-update VERSION=2.5.0
schema-update: $(STAMP)
	@test -n "$(VERSION)" || { echo "usage: make schema-update VERSION=X.Y.Z"; exit 2; }
	npm install --prefix tests/interop --save-exact --no-audit --no-fund @agentclientprotocol/sdk@$(VERSION)
	touch $(INTEROP_STAMP)
	$(BIN)/python tools/gen_schema.py

clean:
	rm -rf docs/_build $(VENV) $(BENCH_VENV) $(HYPERCORN_OVERLAY) $(OFFICIAL_RC_VENV) .venv-py3.* .coverage .coverage.* .mypy_cache .pytest_cache .ruff_cache .hypothesis build dist

# Every real ACP agent from npm that installs here and speaks ACP over stdio
# (pinned in tests/real_agents, about 2 GB), checked with check-agent and
# check-agent-v2, a few at a time, each in a fresh HOME; writes the matrix
# docs/real-agents.md and fails if an agent's failures are not the recorded
# ones (tools/real_agents.py KNOWN). No model credentials: most stop at
# authentication, and the matrix says so per check (INCOMPLETE). `npm install`
# with the lock, not `npm ci`: the lock lacks the optional platform packages of
# some agents (opencode's, cline's) for other platforms.
check-real-agents: $(STAMP)
	npm install --prefix tests/real_agents --no-audit --no-fund --silent --ignore-scripts --engine-strict=false
	$(BIN)/python tools/real_agents.py
