# Everything a developer runs. `make run` and `make test` set up .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
SERVE_INSTALLED := $(VENV)/.installed-serve
BENCH_INSTALLED := $(VENV)/.installed-bench

.PHONY: help run test lint fmt bench soak screenshots compat clean

help:
	@echo "make run    serve on 127.0.0.1:6789 (ARGS='--port 0 --world-size 8' to change)"
	@echo "make test   run the whole test suite, two workers a core (PYTEST_WORKERS=0 for one process)"
	@echo "make lint   ruff and mypy, checking only"
	@echo "make fmt    ruff fix and format, changing files"
	@echo "make bench  run the benchmarks against the polling baseline and the reference server"
	@echo "            (BENCH_ARGS=--quick for a short run)"
	@echo "make soak   abuse figures: SIGKILL with --state-file, SIGTERM with parked waits, batch"
	@echo "            memory, /health beside abuse (a few minutes; SOAK_ARGS=--quick for about one);"
	@echo "            then the server under faults (FAULTS_ARGS='--before TREE' for a before column)"
	@echo "make screenshots  retake docs/page.png, docs/page-4096.png and docs/page-prefill.png in Chromium"
	@echo "make compat the engines' released code (compat/engines.txt) beside aiobootstrap, in an environment"
	@echo "            of its own cached in ~/.cache/aiobootstrap (several GB, built once a pin; COMPAT_ARGS to pytest)"
	@echo "make clean  remove .venv and caches"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(INSTALLED): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test,lint,fast,redis,etcd]'
	touch $@

# What serving needs, no more: the test and lint extras (a browser driver, a fuzzer, mypy) took most of
# a fresh clone's make run.
$(SERVE_INSTALLED): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[fast,redis,etcd]'
	touch $@

$(BENCH_INSTALLED): pyproject.toml | $(INSTALLED)
	$(BIN)/python -m pip install -q -e '.[test,lint,bench,redis,etcd]'
	touch $@

# A checkout that has run make test serves from that install, not a second one.
run: $(if $(wildcard $(INSTALLED)),$(INSTALLED),$(SERVE_INSTALLED))
	$(BIN)/python -m aiobootstrap $(ARGS)

# PYTEST_WORKERS=0 runs the suite in one process (for a debugger, or to read a test's output in order).
# Two workers a core: much of the suite waits (on subprocess servers, Redis and Sentinel failovers,
# timeouts), so a second worker a core fills that time; on 2 cores, 4 workers ran it in 80-104 s
# where 2 took 118-148 s, in the same hour.
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))

# Bytecode is cached even where the environment sets PYTHONDONTWRITEBYTECODE: without the
# cache each run re-rewrites pytest's ~400 test and plugin modules in each worker (collection
# 6.5 s instead of 2.5 s) and each server or tool subprocess compiles the package anew.
# --dist worksteal: a worker that runs out takes tests queued for another, so a module of slow tests (the
# browser's, the Sentinel failovers, the doc-test) no longer ends the run alone on one worker; on 2 cores
# it ran the suite in 146 and 166 s where --dist load took 162 to 180 s, in the same hour.
test: $(INSTALLED)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# BENCH_ARGS=--quick for a CI-sized run; a full run rewrites docs/benchmarks.md and its plot.
bench: $(BENCH_INSTALLED)
	$(BIN)/python -m bench $(BENCH_ARGS)
	$(BIN)/python -m bench.abandoned
	$(BIN)/python -m bench.big_batch
	$(BIN)/python -m bench.token_lookup
	$(BIN)/python -m bench.page
	$(BIN)/python -m bench.leases --redis
	$(BIN)/python -m bench.replica_wrk
	$(BIN)/python -m bench.failover
	$(BIN)/python -m bench.store_etcd
	$(BIN)/python -m bench.etcd_replicas
	$(BIN)/python -m bench.layers
	$(BIN)/python -m bench.big_readers
	$(BIN)/python -m bench.prefill
	$(BIN)/python -m bench.mooncake
	$(BIN)/python -m bench.write_path
	$(BIN)/python -m bench.mooncake_engines
	$(BIN)/python -m bench.mooncake_probes
	$(BIN)/python -m bench.vllm

# Real servers on free ports; prints tables for docs/benchmarks.md's Soak section.
soak: $(INSTALLED)
	$(BIN)/python -m bench.soak $(SOAK_ARGS)
	$(BIN)/python -m bench.server_faults $(FAULTS_ARGS)

# The docs' screenshots, taken by the browser tests that check what they show; a plain test run writes
# its screenshots to tmp_path, so it leaves git clean.
screenshots: $(INSTALLED)
	AIOBOOTSTRAP_SCREENSHOTS=docs $(BIN)/python -m pytest -n 0 -q tests/test_page.py tests/test_page_faces.py -k "screenshot or 4096 or prefill"

# The engines as released (compat/engines.txt: SGLang, vLLM) beside aiobootstrap installed as a wheel, in an
# environment that compat/run.sh builds once a pin outside the checkout (a fresh clone on the same machine
# reuses it) and runs compat/tests in. Needs no .venv: it is not part of make test.
compat:
	bash compat/run.sh $(COMPAT_ARGS)

fmt: $(INSTALLED)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
