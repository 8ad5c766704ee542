# kbsite: the README's two commands are `make run` and `make test`.
#
#   make run          web server on 127.0.0.1:$PORT (default 8000) + a runner serving the cpu queue
#   make test         the test suite on the embedded default (SQLite, ORM broker); PYTEST_ARGS="..."
#   make test-fast    the fast tier: every test that starts no process (minutes; after each change)
#   make lint         ruff, then the import contracts (lint-imports, pyproject.toml)
#   make scaled       local PostgreSQL + Redis (Debian packages), then web + runner against them
#   make scaled-runner  one more runner on them (HARDWARE=cpu); make scaled-stop stops them
#   make test-scaled  the scaled/integration tests against local PostgreSQL + Redis
#   make lock         regenerate requirements/lock.txt (with hashes) from pyproject.toml
#   make gpu-wheels   download into .whl/ the wheels the runner needs on a GPU host
#
# Each target creates .venv (python3 -m venv) and installs the hashed lock when it is missing or
# older than the lock; `make run` and `make test` also install the browser assets of package.json
# (CodeMirror, the submit page's editor) into node_modules/ with `npm ci` from package-lock.json.
# Runtime state lives in var/ (ignored by git).

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
LOCK := requirements/lock.txt
STAMP := $(VENV)/.kbsite-installed
NODE_STAMP := node_modules/.package-lock.json
PYTEST_ARGS ?=
SCALED_MARKERS := scaled or integration

# run_embedded reads PORT from the environment (default 8000): `PORT=9000 make run`.

.PHONY: help run test test-fast lint format scaled scaled-runner scaled-stop test-scaled services \
	venv system-deps lock gpu-wheels clean

help:
	@sed -n '3,12p' Makefile | sed 's/^# \{0,1\}//'

# ---- virtual environment ------------------------------------------------------------------------

venv: $(STAMP)

# The stamp is newer than the lock and pyproject.toml once they are installed: nothing to do then.
# torch is the CPU build, 2.13.0+cpu, pinned with the hash of the wheel that pip's find-links folder
# holds on this kind of machine, so no CUDA build and no nvidia-* packages are fetched.
$(STAMP): $(LOCK) pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
		|| { echo "kbsite needs Python >= 3.11 ($(PYTHON) is older)" >&2; exit 1; }
	@test -x $(PY) || { echo "creating $(VENV)"; $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install -qq --disable-pip-version-check --no-input --progress-bar off \
		--require-hashes -r $(LOCK)
	@# The project itself, for the `kb` console script: editable in compat mode (a .pth file that
	@# puts this folder on sys.path), built with the venv's setuptools, fetching nothing.
	$(PY) -m pip install -qq --disable-pip-version-check --no-input --no-index \
		--no-deps --no-build-isolation --config-settings editable_mode=compat -e .
	@touch $@

# The browser assets (package.json, locked in package-lock.json), served by Django's staticfiles
# straight from node_modules/ (kbsite/settings.py), never copied into the repository. Without npm
# `make run` still serves the site: the submit page keeps its plain textarea.
$(NODE_STAMP): package.json package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --no-audit --no-fund --loglevel=error && touch $@; \
	else \
		echo "make: npm not found: no code editor, the submit page keeps its plain textarea" >&2; \
	fi

# Debian packages the tests need (installed only when missing; root or sudo).
system-deps:
	@scripts/install_system_deps.sh chromium:chromium npm:npm

# ---- the two commands ---------------------------------------------------------------------------

run: $(STAMP) $(NODE_STAMP)
	$(PY) manage.py run_embedded

# pytest's exit code 5 means it collected no tests: that is a failure here, never a silent pass.
# KB_TESTS_DIE_WITH_PARENT: make stopped (a time limit's SIGTERM) ends this recipe's shell, and
# pytest below it then ends too, with every process its tests started (tests/environment.py).
define run_pytest
rc=0; KB_TESTS_DIE_WITH_PARENT=1 $(PY) -m pytest $(1) || rc=$$?; \
if [ $$rc -eq 5 ]; then echo "make: pytest collected no tests (exit 5): failing" >&2; fi; \
exit $$rc
endef

test: $(STAMP) system-deps $(NODE_STAMP)
	@$(call run_pytest,$(PYTEST_ARGS))

# The tests marked slow (tests/conftest.py: a runner, daphne, chromium or the sandbox, the
# exploit and attack suites) are left out; each of the others has a 2 s budget.
test-fast: $(STAMP)
	@$(call run_pytest,-m "not slow" $(PYTEST_ARGS))

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# ---- scaled setup on one machine: PostgreSQL + Redis from Debian's packages ---------------------
# scripts/scaled_services.sh installs them when missing, starts them on loopback, creates the
# kbsite role and database, and prints `export DATABASE_URL=... REDIS_URL=...` lines.
# docs/deploy.md describes the same processes spread over several hosts.

HARDWARE ?= cpu

# The exports are captured before they are evaluated: `eval "$(failing command)"` succeeds on
# empty output, and the tests would then pass on SQLite while claiming the scaled setup.
define scaled_env
envs=$$(scripts/scaled_services.sh start) || exit 1; eval "$$envs"; \
[[ $$DATABASE_URL == postgres://* && $$REDIS_URL == redis://* ]] \
	|| { echo "make: scaled_services.sh gave no DATABASE_URL/REDIS_URL" >&2; exit 1; }; \
echo "scaled setup: DATABASE_URL=$$DATABASE_URL REDIS_URL=$$REDIS_URL";
endef

services:
	@scripts/scaled_services.sh start

# Web (daphne), a cpu runner and the generation queue, as `make run` but on PostgreSQL + Redis.
scaled: $(STAMP) $(NODE_STAMP)
	@$(scaled_env) exec $(PY) manage.py run_embedded

# Another runner sharing the same database and broker (run it in a second terminal).
scaled-runner: $(STAMP)
	@$(scaled_env) exec $(PY) manage.py runner --hardware $(HARDWARE)

scaled-stop:
	@scripts/scaled_services.sh stop

test-scaled: $(STAMP) system-deps $(NODE_STAMP)
	@$(scaled_env) $(call run_pytest,-m "$(SCALED_MARKERS)" $(PYTEST_ARGS))

# ---- maintenance --------------------------------------------------------------------------------

# Regenerates the lock with pip-tools from a throwaway venv. Run it on a machine of the project's
# kind (Python 3.11, linux x86_64, pip's find-links folder holding torch 2.13.0+cpu). Extras stay
# in the pins (httpx[http2]==0.28.1): with them stripped, pip may take a dependency's own
# `httpx[http2]>=0.28` for a second, unpinned requirement and refuse the whole hashed install.
lock:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT \
		&& $(PYTHON) -m venv "$$tmp/venv" \
		&& "$$tmp/venv/bin/pip" install --quiet --disable-pip-version-check pip-tools \
		&& CUSTOM_COMPILE_COMMAND="make lock" "$$tmp/venv/bin/pip-compile" --quiet \
			--generate-hashes --allow-unsafe --no-strip-extras --extra test \
			--no-emit-index-url --no-emit-find-links --no-emit-trusted-host \
			--output-file $(LOCK) pyproject.toml \
		&& if ! grep -q '^torch==.*+cpu' $(LOCK); then \
			echo "make lock: torch is not the local CPU build; check pip's find-links" >&2; exit 1; fi \
		&& if grep -vE '^nvidia-ml-py==' $(LOCK) \
			| grep -qE '^(nvidia-|litellm==1\.82\.[78] |litellm==1\.107\.0 )'; then \
			echo "make lock: forbidden package in the lock" >&2; exit 1; fi

gpu-wheels:
	scripts/fetch_gpu_wheels.sh

# Removes the venv and build leftovers; keeps var/ (the database and logs).
clean:
	rm -rf $(VENV) node_modules/ .whl/ *.egg-info build/
