# Two commands do everything on a fresh machine (Python 3.10+, Java 17, Node 20):
#   make demo   - create .venv, install, train a small model on local Spark, print its accuracy
#   make test   - create .venv, install with test dependencies, run every test
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

export SPARK_LOCAL_IP ?= 127.0.0.1
export PYSPARK_PYTHON ?= $(abspath $(PY))
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: demo test lint venv clean bench bench-feed bench-tensorboard bench-kernel

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PIP) install -q -e ".[test]"
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) example_notebooks/run_demo.py

test: $(STAMP)
	$(PY) -m ruff check tfos_notebook tests bench example_notebooks
	$(PY) -m pytest -ra $(PYTEST_ARGS)

lint: $(STAMP)
	$(PY) -m ruff check tfos_notebook tests bench example_notebooks

# Benchmarks run by hand (not in CI), each beside its anchor in the same run; see docs/benchmarks.md.
bench: $(STAMP)
	$(PY) bench/launch.py

bench-feed: $(STAMP)
	$(PY) bench/feed.py

bench-tensorboard: $(STAMP)
	$(PY) bench/tb_freshness.py

bench-kernel: $(STAMP)
	$(PY) bench/kernel_responsiveness.py

clean:
	rm -rf $(VENV) build dist .pytest_cache
