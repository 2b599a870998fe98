# Two commands on a fresh machine with only Python 3.11+ and make:
#   make demo   - the main job: an agent and a client talking, with a cancelled request
#   make test   - lint, strict typing and the test suite (what CI runs)
# Both bootstrap a local virtualenv (.venv) on first use.

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

# The remote tests against the newest hypercorn (CI, after `make test`).
HYPERCORN_VENV := .venv-hypercorn-latest

BENCH_VENV  := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed

.PHONY: docs test lint typecheck pytest demo check-real-agents bench bench-framing bench-connection bench-schema bench-sdks bench-report bench-remote bench-scale fuzz-websocket test-hypercorn-latest test-attacks regen schema-update clean

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
	$(BIN)/mypy --strict acp_trio examples tests/typed_usage

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
	$(BIN)/python -m pytest

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

# The remote tests (and the contract over the private hypercorn names the
# server's front uses) against the newest hypercorn on the package index, in
# a virtualenv of its own: a hypercorn release that breaks the front fails
# here, naming the name, before it reaches users.
test-hypercorn-latest:
	@test -x $(HYPERCORN_VENV)/bin/python || $(PYTHON) -m venv $(HYPERCORN_VENV)
	$(HYPERCORN_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(HYPERCORN_VENV)/bin/python -m pip install --quiet -e '.[test]'
	$(HYPERCORN_VENV)/bin/python -m pip install --quiet --upgrade 'hypercorn[trio]'
	@$(HYPERCORN_VENV)/bin/python -c "import importlib.metadata as m; print('hypercorn', m.version('hypercorn'))"
	$(HYPERCORN_VENV)/bin/python -m pytest tests/remote -q -p no:cacheprovider

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
	rm -rf docs/_build $(VENV) $(BENCH_VENV) $(HYPERCORN_VENV) $(OFFICIAL_RC_VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis build dist

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
