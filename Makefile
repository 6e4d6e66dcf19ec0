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

.PHONY: demo test lint venv clean bench bench-connect bench-feed bench-tensorboard bench-kernel bench-scale bench-mlflow labext ui-deps chromium lab

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

test: $(STAMP) labext ui-deps
	$(PY) -m ruff check tfos_notebook tests bench example_notebooks
	$(PY) -m pytest -ra $(PYTEST_ARGS)

lint: $(STAMP) node_modules/.package-lock.json
	$(PY) -m ruff check tfos_notebook tests bench example_notebooks
	cd labextension && $(NPM) run --silent prettier:check

# Benchmarks run by hand (not in CI), each beside its anchor in the same run; see docs/benchmarks.md.
bench: $(STAMP)
	$(PY) bench/launch.py

bench-connect: $(STAMP)
	$(PY) bench/connect_launch.py

bench-feed: $(STAMP)
	$(PY) bench/feed.py

bench-tensorboard: $(STAMP)
	$(PY) bench/tb_freshness.py

bench-kernel: $(STAMP)
	$(PY) bench/kernel_responsiveness.py

bench-scale: $(STAMP)
	$(PY) bench/scale.py

bench-mlflow: $(STAMP)
	$(PY) bench/mlflow_overhead.py

clean:
	rm -rf $(VENV) build dist .pytest_cache node_modules labextension/ui-tests/node_modules \
		labextension/lib labextension/tsconfig.tsbuildinfo tfos_notebook/labextension

# The JupyterLab extension (labextension/ -> tfos_notebook/labextension). `pip install` builds it
# too; this rebuilds it after an edit. jupyter-builder comes from the venv, Node 20+ from the PATH.
NPM ?= npm
CHROMIUM ?= /usr/bin/chromium
LABEXT_BUILT := tfos_notebook/labextension/package.json
LABEXT_SOURCES := $(wildcard labextension/src/*.ts labextension/style/*) labextension/package.json labextension/tsconfig.json

labext: $(LABEXT_BUILT)

node_modules/.package-lock.json: package-lock.json labextension/package.json
	$(NPM) ci --no-audit --no-fund

$(LABEXT_BUILT): $(LABEXT_SOURCES) node_modules/.package-lock.json | $(STAMP)
	cd labextension && PATH="$(abspath $(VENV))/bin:$$PATH" $(NPM) run build
	touch $@

# The browser test's npm packages (Galata, Playwright) and Debian's chromium (Playwright cannot
# download its own browsers here); without root the chromium step only warns and the test skips.
ui-deps: labextension/ui-tests/node_modules/.package-lock.json chromium

labextension/ui-tests/node_modules/.package-lock.json: labextension/ui-tests/package-lock.json
	cd labextension/ui-tests && $(NPM) ci --no-audit --no-fund

chromium:
	@if [ -x "$(CHROMIUM)" ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q chromium; \
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo apt-get update -q && sudo apt-get install -y -q chromium; \
	else echo "WARNING: no $(CHROMIUM) and no root to install it: the JupyterLab browser test will be skipped"; fi

# JupyterLab on the example notebooks, with this checkout's extension (rebuilt when edited). As root
# (a container) Jupyter refuses to start without --allow-root, so it is passed then.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

lab: $(STAMP) $(LABEXT_BUILT)
	mkdir -p build/labextensions && ln -sfn "$(CURDIR)/tfos_notebook/labextension" build/labextensions/tfos-notebook
	$(VENV)/bin/jupyter lab $(ALLOW_ROOT) --notebook-dir=example_notebooks --LabApp.extra_labextensions_path="$(CURDIR)/build/labextensions"
