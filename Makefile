# masa — run `make help` for the targets.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-builtin-rules

PYTHON ?= python3
# uv is used from PATH when present, otherwise bootstrapped into .tools/ by `make setup`.
UV := $(shell command -v uv 2>/dev/null || echo $(CURDIR)/.tools/bin/uv)
RUN := $(UV) run --frozen

.PHONY: help setup proto lint test chaos bench run play practice watch clean

help: ## List the targets.
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

# `make play`, `make practice` and `make watch` take their options as variables: make play
# LOBBY=elevator. GAME (with PRESET) makes a custom training table instead, without matchmaking;
# TABLE comes back to a seat (make play) or names the table to follow (make watch).
# PLAYERS (and GAMES, each, else until Ctrl-C) are the practice players of `make practice`.
LOBBY ?=
GAME ?=
PRESET ?= salon
TABLE ?=
PLAYERS ?= 2
GAMES ?=

$(CURDIR)/.tools/bin/uv:
	$(PYTHON) -m venv $(CURDIR)/.tools
	$(CURDIR)/.tools/bin/pip install --quiet 'uv>=0.8,<0.14'

.venv/.synced: $(UV) uv.lock pyproject.toml $(wildcard libs/*/pyproject.toml services/*/pyproject.toml)
	$(UV) sync --frozen --all-packages
	@touch $@

# The stubs in libs/proto are regenerated only when a .proto file or the generator changes.
PROTO_SRCS := $(shell find protos -name '*.proto' 2>/dev/null)
libs/proto/.stamp: .venv/.synced buf.yaml scripts/gen_proto.py $(PROTO_SRCS)
	$(RUN) python scripts/gen_proto.py
	@touch $@

proto: libs/proto/.stamp ## Generate the Python stubs of protos/ into libs/proto (masa.*.v1).

# The web client (clients/web): its packages from the lockfile, its TypeScript generated from
# protos/ and bundled into clients/web/dist, which the gateway serves; again only when a source
# of it changes.
WEB_SRCS := $(shell find clients/web/src clients/web/scripts -type f -not -path '*/gen/*' 2>/dev/null) clients/web/package.json clients/web/package-lock.json clients/web/buf.gen.yaml clients/web/tsconfig.json libs/client/masa_client/rulebook.json
.tools/.web-client: $(WEB_SRCS) $(PROTO_SRCS)
	cd clients/web && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build
	@mkdir -p .tools && touch $@

# Debian's chromium and chromedriver, for the browser tests.
.tools/.browser:
	scripts/browser_deps.sh
	@mkdir -p .tools && touch $@

setup: .venv/.synced proto .tools/.web-client .tools/.browser ## Install uv when missing, then every package and tool into .venv, build the web client, install Chromium.

# The tests are type-checked as strictly as the packages, one directory at a time: a test
# directory has no __init__.py, so its modules (conftest.py, *_support.py) are top-level
# modules whose names recur from one directory to the next.
TEST_DIRS := $(wildcard libs/*/tests services/*/tests) tests

lint: setup ## ruff, ruff format --check, mypy --strict (packages, benches, tests), the import contracts, buf lint and breaking.
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) mypy
	$(RUN) mypy bench  # the benchmarks are scripts, as strict as the packages they drive
	@for target in conftest.py $(TEST_DIRS); do echo "mypy $$target"; $(RUN) mypy "$$target"; done
	$(RUN) lint-imports
	$(RUN) buf lint
	$(RUN) scripts/buf_breaking.sh buf

# The suite mostly waits (services starting, NATS, timers), so it runs on more workers than
# cores; conftest.py groups the tests. The chaos runs are soak runs of their own (make chaos),
# which CI runs after the suite (.ci/run).
TEST_WORKERS ?= 6

test: setup lint ## Set up, lint, then run the whole test suite but the chaos runs (TEST_WORKERS=6).
	$(RUN) pytest -n $(TEST_WORKERS) -m 'not chaos' --durations=15

chaos: setup ## Only the two chaos runs of issue 12, at once, their logs kept under .masa/test/.
	scripts/chaos.sh "$(RUN)"

bench: setup ## Run the benchmarks; each prints one JSON document.
	@for b in bench/bench_*.py; do $(RUN) python "$$b"; done

run: setup ## Start NATS, the bot, the ledger, the table-engine, matchmaking and the web gateway with the web client (data in .masa/).
	$(RUN) python -m masa_client.launcher

play: setup ## Play through matchmaking with make run going: a lobby menu, LOBBY=elevator (LEVEL=hard for a training lobby's bots), or TABLE=<id> to come back.
	@$(RUN) masa play $(if $(LOBBY),--lobby $(LOBBY)) $(if $(LEVEL),--level $(LEVEL)) $(if $(GAME),--game $(GAME) --preset $(PRESET)) $(if $(TABLE),--table $(TABLE))

practice: setup ## Practice players who fill a chip lobby, with make run going: LOBBY=elevator PLAYERS=2.
	@test -n "$(LOBBY)" || { echo "make practice: name the lobby, e.g. make practice LOBBY=elevator PLAYERS=2" >&2; exit 2; }
	@$(RUN) masa practice --lobby $(LOBBY) --players $(PLAYERS) $(if $(GAMES),--games $(GAMES))

watch: setup ## Follow a table as a spectator, with make run going: make watch TABLE=<table id>.
	@test -n "$(TABLE)" || { echo "make watch: name the table, e.g. make watch TABLE=1a2b3c (masa play prints it)" >&2; exit 2; }
	@$(RUN) masa watch $(TABLE)

clean: ## Remove the virtual environment, caches and local data.
	rm -rf .venv .tools .mypy_cache .ruff_cache .pytest_cache .masa .hypothesis
	rm -rf libs/proto/.stamp libs/proto/.gen-tmp $(wildcard libs/proto/masa/*/)
	rm -rf clients/web/node_modules clients/web/dist clients/web/src/gen
