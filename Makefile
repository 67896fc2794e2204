# Entry points: `make run` (set up, then plan the default workload), `make test` (the fast tier, minutes),
# `make test-all` (every test, as CI runs them) and `make wheel-check` (build the wheel, install it into a
# fresh venv, run the installed advisor).
VENV ?= .venv
PYTHON ?= python3
# On a CPU-only machine this takes the CPU build; on a GPU host install your CUDA torch first
# (it satisfies the project's range and is kept), or run `make setup TORCH_SPEC=`.
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin

.PHONY: setup user-setup run lint test test-slow test-all wheel-check bench clean

# The pip a venv ships with is kept when it is 23 or newer (editable installs from pyproject.toml, constraints files:
# all the installs below need); an older one is upgraded first. Upgrading a recent one is a download for nothing.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	@$(BIN)/python -c "import pip, sys; sys.exit(int(pip.__version__.split('.')[0]) < 23)" || \
		$(BIN)/python -m pip install --quiet --upgrade pip

setup: $(BIN)/python
	@if ! $(BIN)/python -c "import torch" 2>/dev/null && [ -n "$(TORCH_SPEC)" ]; then \
		$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"; fi
	$(BIN)/python -m pip install --quiet -c .ci/constraints.txt -e ".[dev]"
	@[ -f $(VENV)/.extensions-built ] || { $(BIN)/python .ci/prebuild_extensions.py && touch $(VENV)/.extensions-built; }

# What a user installs: torch (the CPU build on a machine without CUDA) and the project with the built-in
# workloads' data set, in one pip run (one resolve); a torch already there (a CUDA build) is kept. No dev stack
# and no DeepSpeed op: the demo plans through plain DDP. A venv that has it all (`make setup` made it, or an
# earlier `make run`) installs nothing. The files are not byte-compiled at install (pip would compile every
# module of torch, sympy, scipy, ...: most of the install's CPU time); Python compiles what the plan imports on
# first use and keeps it. Where Python may not write that (PYTHONDONTWRITEBYTECODE set), pip compiles as usual.
USER_PIP_FLAGS := --quiet -c .ci/constraints.txt $(if $(PYTHONDONTWRITEBYTECODE),,--no-compile)
# Exit 0 when every distribution named after it is installed (reads metadata: no import of torch, ~0.1 s).
INSTALLED := $(BIN)/python -c "import importlib.metadata as m, sys; [m.distribution(n) for n in sys.argv[1:]]"
user-setup: $(BIN)/python
	@if $(INSTALLED) torch scikit-learn batch-advisor 2>/dev/null; then :; \
	elif $(INSTALLED) torch 2>/dev/null || [ -z "$(TORCH_SPEC)" ]; then \
		$(BIN)/python -m pip install $(USER_PIP_FLAGS) -e ".[examples]"; \
	else $(BIN)/python -m pip install $(USER_PIP_FLAGS) "$(TORCH_SPEC)" -e ".[examples]"; fi

# The demo writes under runs/ (ignored by git), never over the committed recipes/: a second `make run` replaces
# its own recipe (--force keeps the old one as a .bak) and its history there is this machine's.
run: user-setup
	mkdir -p runs
	$(BIN)/advisor plan --workload digits-cnn --adapter ddp --nproc 2 --device-memory 1GiB \
		--out runs/digits-cnn.toml --force

# Every function within a cyclomatic complexity of 15 (pyproject's [tool.ruff.lint]); CI runs it first.
lint: setup
	$(BIN)/ruff check advisor adapters

# The fast tier: every unit and app test, the real-process tests that guard the launch paths, and one shared
# small real plan. Tests marked `slow` (whole real plans, long real runs) run in test-all and CI.
PYTEST_ARGS ?=
test: setup
	$(BIN)/python -m pytest -q -m "not slow" $(PYTEST_ARGS)

test-slow: setup
	$(BIN)/python -m pytest -q -m slow $(PYTEST_ARGS)

test-all: setup
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

# Self-contained (its own temporary venv, removed afterwards); also run by .ci/run.
wheel-check:
	PYTHON="$(PYTHON)" TORCH_SPEC="$(TORCH_SPEC)" bash .ci/wheel-check

bench: setup
	$(BIN)/python bench/diagnose_speed.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
