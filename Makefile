# Two commands do all set-up: `make demo` (the main job) and `make test`.
# Each creates .venv if missing, installs torch==2.13.0 first (on the dev machine its
# cp311 CPU wheel is on local disk; any other torch spec, or another Python, downloads
# gigabytes: the CUDA build from PyPI), then attnkit with its dev extras.
#
# Python used to create .venv (an existing .venv is kept, whichever Python made it).
# PY=... on the command line (or in the environment) wins. Otherwise the newest of
# PY_CANDIDATES that runs and is 3.11-3.14: attnkit needs >= 3.11 and torch 2.13.0 has
# CPython wheels for 3.10-3.14 (widen the list when the torch pin moves). Each candidate
# is run, not just looked up, as pyenv has shims for versions that are not selected.
# `make print-python` shows the choice.
PY ?=
PY_CANDIDATES = python3.14 python3.13 python3.12 python3.11 python3
PY_OK = import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 14))
PICK_PY = py='$(PY)'; \
	if [ -z "$$py" ]; then \
	  for c in $(PY_CANDIDATES); do \
	    if $$c -c '$(PY_OK)' >/dev/null 2>&1; then py=$$c; break; fi; \
	  done; \
	  [ -n "$$py" ] || { echo "No suitable Python: none of $(PY_CANDIDATES) on PATH runs as CPython 3.11-3.14 (attnkit needs >= 3.11, torch 2.13.0 <= 3.14). Install one, or name one: make demo PY=/path/to/python3.12" >&2; exit 1; }; \
	elif ! "$$py" -c 'import sys' >/dev/null 2>&1; then \
	  echo "PY=$$py not found or does not run; pass PY=python3.x (3.11-3.14)" >&2; exit 1; \
	elif ! "$$py" -c '$(PY_OK)'; then \
	  echo "warning: PY=$$py is not 3.11-3.14; torch 2.13.0 / attnkit may not install" >&2; \
	fi
# pytest-xdist workers of `make test`: the suite's tests each use one thread (tests/conftest.py),
# so two workers use both cores of the 2-core CI machine. TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 2
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint format bench clean print-python

$(BIN)/python:
	@$(PICK_PY); echo "$$py -m venv $(VENV)   # $$($$py --version 2>&1)"; "$$py" -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q --disable-pip-version-check torch==2.13.0
	$(BIN)/pip install -q --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/attnkit demo

test: $(STAMP)
	bash tools/ensure_browser.sh
	$(BIN)/ruff check src tests benchmarks tools
	$(BIN)/ruff format --check src tests benchmarks tools
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks tools
	$(BIN)/ruff format --check src tests benchmarks tools

format: $(STAMP)
	$(BIN)/ruff format src tests benchmarks tools
	$(BIN)/ruff check --fix src tests benchmarks tools

bench: $(STAMP)
	$(BIN)/python -m benchmarks.book.attention

print-python:
	@$(PICK_PY); echo "$$py ($$($$py --version 2>&1))"; \
	if [ -x $(BIN)/python ]; then echo "existing $(VENV) is kept: $$($(BIN)/python --version 2>&1)"; fi

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache .ruff_cache
