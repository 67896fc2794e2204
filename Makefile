# Two entry points: `make run` (set up, then plan the default workload) and `make test`.
VENV ?= .venv
PYTHON ?= python3
# On a CPU-only machine this takes the CPU build; on a GPU host install your CUDA torch first
# (it satisfies the project's range and is kept), or run `make setup TORCH_SPEC=`.
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin

.PHONY: setup run test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

setup: $(BIN)/python
	@if ! $(BIN)/python -c "import torch" 2>/dev/null && [ -n "$(TORCH_SPEC)" ]; then \
		$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"; fi
	$(BIN)/python -m pip install --quiet -e ".[dev]"

run: setup
	$(BIN)/advisor plan --workload digits-cnn --adapter ddp --nproc 2 --device-memory 1GiB \
		--out recipes/digits-cnn.toml --force

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python bench/diagnose_speed.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
