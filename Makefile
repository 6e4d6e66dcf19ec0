# Two commands do everything on a fresh machine (Python 3.10+, Java 17, Node 20):
#   make demo   - create .venv, install, train a small model on local Spark, print its accuracy
#   make test   - create .venv, install with test dependencies, run every test
# and one for the edit-test loop:
#   make check  - lint, and every test that starts no Spark application, browser or fake host (~1 min)
# and, for the Databricks runtimes alone (also part of make test):
#   make test-stacks - stand in for each LTS ML runtime (stacks/), run its stack tests, print the table
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# uv (from PyPI, into $(VENV)/uv) installs when it can be had; pip installs otherwise, from the same
# pyproject.toml. INSTALLER=pip forces pip.
INSTALLER ?= uv
UV := $(VENV)/uv/bin/uv
DEPS := $(shell cksum < pyproject.toml | cut -d' ' -f1)
EXAMPLES_STAMP := $(VENV)/.installed-examples-$(DEPS)
TEST_STAMP := $(VENV)/.installed-test-$(DEPS)
comma := ,
# pytest workers for make test and make check (tests/conftest.py keeps each Spark slot's tests in one).
TEST_WORKERS ?= 2

export SPARK_LOCAL_IP ?= 127.0.0.1
export PYSPARK_PYTHON ?= $(abspath $(PY))
export TF_CPP_MIN_LOG_LEVEL ?= 2
# Python writes its bytecode cache: with PYTHONDONTWRITEBYTECODE set (as some images do) and an
# install that compiles nothing (uv's default), every process that imports TensorFlow compiles its
# sources again (21 s instead of 7 here), and every node, kernel and test pays it.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-stacks stacks fuse check lint venv clean bench bench-connect bench-feed bench-tensorboard bench-kernel bench-scale bench-mlflow bench-decommission bench-sweep labext ui-deps chromium lab

$(PY):
	$(PYTHON) -m venv --without-pip $(VENV)

# $(call install,EXTRAS): this checkout, editable, with EXTRAS, and pip (for installs by hand).
# - SKIP_JUPYTER_BUILDER: the JupyterLab extension is built by the labext target below, when its
#   sources change, not by every install (the demo does not need it).
# - uv leaves tensorflow out: tf-keras names it, but tensorflow-cpu, the CPU build of the same
#   release, provides the same module; pip cannot leave it out and installs both (546 MiB more).
# - pyspark is published as a source archive only: its wheel is built here once, uncompressed (its
#   400 MB of jars are compressed already; deflating them again took 16 s instead of 6).
define install
	@set -e; \
	if [ "$(INSTALLER)" = uv ] && { [ -x $(UV) ] || PIP_ROOT_USER_ACTION=ignore $(PYTHON) -m pip install -q --target $(VENV)/uv uv; }; then \
		printf 'tensorflow\n' > $(VENV)/uv-excludes.txt; \
		echo "uv pip install -e \".[$(1)]\""; \
		SKIP_JUPYTER_BUILDER=1 $(UV) pip install -q --python $(PY) --excludes $(VENV)/uv-excludes.txt \
			--config-settings-package "pyspark:--build-option=--compression=stored" pip -e ".[$(1)]"; \
	else \
		echo "pip install -e \".[$(1)]\" (uv is not available)"; \
		$(PY) -m ensurepip --upgrade > /dev/null; \
		SKIP_JUPYTER_BUILDER=1 $(PY) -m pip install -q -e ".[$(1)]"; \
	fi
	rm -f $(VENV)/.installed-*
endef

$(EXAMPLES_STAMP): pyproject.toml | $(PY)
	$(call install,examples)
	touch $@

$(TEST_STAMP): pyproject.toml | $(PY)
	$(call install,test$(comma)examples)
	touch $@ $(EXAMPLES_STAMP)

venv: $(TEST_STAMP)

# The demo needs the examples' dependencies only (no Jupyter server, browser tests or linters).
demo: $(EXAMPLES_STAMP)
	$(PY) example_notebooks/run_demo.py

# Every test, slowest last (`--durations=25`; docs/testing.md keeps the table and what each cluster
# serves), then the stack tests in each Databricks runtime's stand-in (test-stacks).
test: $(TEST_STAMP) labext ui-deps fuse stacks
	$(PY) -m ruff check tfos_notebook tests bench example_notebooks stacks
	$(PY) -m pytest -ra --durations=25 -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)
	$(MAKE) --no-print-directory test-stacks

# The Databricks Runtime LTS ML stacks (stacks/README.md): each stood in by a venv under .stacks/ on
# the runtime's own Python (pyenv's), rebuilt only when its stack file, pyproject.toml or
# stacks/build.py change. In each: the stack tests (tests/stacks/) and the tests of what differs
# between the runtimes' libraries (Arrow, widgets, Keras, versions); then the table of what passed
# where (stacks/table.py, docs/databricks.md), which fails the target if anything failed.
STACKS ?= dbr-14.3-lts-ml-cpu dbr-15.4-lts-ml-cpu dbr-16.4-lts-ml-cpu dbr-17.3-lts-ml-cpu
STACK_TESTS := tests/stacks tests/runtime/feed/test_codec.py tests/notebook/test_run_views.py tests/runtime/host/test_versions.py \
	tests/runtime/driver/diagnosis/test_keras_check.py tests/runtime/node/child/test_savepoint.py tests/runtime/driver/run/test_resize.py \
	tests/runtime/driver/run/test_decommission.py::test_keras_mwms_saves_at_one_step_and_resumes_there \
	tests/search/test_space.py tests/search/test_sweep_local.py::test_six_trials_of_two_workers_run_two_at_once_pruned_failed_and_tracked

$(UV): | $(PY)
	PIP_ROOT_USER_ACTION=ignore $(PYTHON) -m pip install -q --target $(VENV)/uv uv

stacks: $(UV)
	$(PY) stacks/build.py --uv $(UV) $(STACKS)

test-stacks: stacks
	@status=0; for s in $(STACKS); do \
		echo "== $$s"; \
		TFOS_STACK=$$s TFOS_UV=$(abspath $(UV)) PYSPARK_PYTHON=$(abspath .stacks)/$$s/bin/python \
			.stacks/$$s/bin/python -m pytest -ra -p no:cacheprovider --junitxml=.stacks/$$s/results.xml \
			$(STACK_TESTS) || status=1; \
	done; \
	$(PY) stacks/table.py $(STACKS) || status=1; exit $$status

# The inner loop: lint, then the tests that start no Spark application, browser or fake host
# (markers set by tests/conftest.py from the fixtures each test uses).
check: lint
	$(PY) -m pytest -q -ra -m "not spark and not browser and not multihost" --durations=10 -n $(TEST_WORKERS) $(PYTEST_ARGS)

lint: $(TEST_STAMP) node_modules/.package-lock.json
	$(PY) -m ruff check tfos_notebook tests bench example_notebooks stacks
	cd labextension && $(NPM) run --silent prettier:check

# Benchmarks run by hand (not in CI), each beside its anchor in the same run; see docs/benchmarks.md.
bench: $(TEST_STAMP)
	$(PY) bench/launch.py

bench-connect: $(TEST_STAMP)
	$(PY) bench/connect_launch.py

bench-feed: $(TEST_STAMP)
	$(PY) bench/feed.py

bench-tensorboard: $(TEST_STAMP)
	$(PY) bench/tb_freshness.py

bench-kernel: $(TEST_STAMP)
	$(PY) bench/kernel_responsiveness.py

bench-scale: $(TEST_STAMP)
	$(PY) bench/scale.py

bench-mlflow: $(STAMP)
	$(PY) bench/mlflow_overhead.py

bench-decommission: $(TEST_STAMP)
	$(PY) bench/decommission.py --plot docs/decommission_benchmark.png

bench-sweep: $(TEST_STAMP)
	$(PY) bench/sweep.py --plot docs/sweep_benchmark.png

clean:
	rm -rf $(VENV) .stacks build dist .pytest_cache node_modules labextension/ui-tests/node_modules \
		labextension/lib labextension/tsconfig.tsbuildinfo tfos_notebook/labextension

# The JupyterLab extension (labextension/ -> tfos_notebook/labextension), built when its sources are
# newer than the build (a wheel built by `pip install .` builds it too). jupyter-builder comes from
# the venv, Node 20+ from the PATH.
NPM ?= npm
CHROMIUM ?= /usr/bin/chromium
LABEXT_BUILT := tfos_notebook/labextension/package.json
LABEXT_SOURCES := $(wildcard labextension/src/*.ts labextension/style/* labextension/schema/*.json) labextension/package.json labextension/tsconfig.json

labext: $(LABEXT_BUILT)

node_modules/.package-lock.json: package-lock.json labextension/package.json
	$(NPM) ci --no-audit --no-fund

$(LABEXT_BUILT): $(LABEXT_SOURCES) node_modules/.package-lock.json | $(TEST_STAMP)
	cd labextension && PATH="$(abspath $(VENV))/bin:$$PATH" $(NPM) run build
	mkdir -p $(VENV)/share/jupyter/labextensions  # the venv's JupyterLab loads this build
	ln -sfn "$(CURDIR)/tfos_notebook/labextension" $(VENV)/share/jupyter/labextensions/tfos-notebook
	touch $@

# The browser test's npm packages (Galata, Playwright) and Debian's chromium (Playwright cannot
# download its own browsers here); without root the chromium step only warns and the test skips.
ui-deps: labextension/ui-tests/node_modules/.package-lock.json chromium

labextension/ui-tests/node_modules/.package-lock.json: labextension/ui-tests/package-lock.json
	cd labextension/ui-tests && $(NPM) ci --no-audit --no-fund

# libfuse 2 (Debian's libfuse2) for the fake hosts' volume, a FUSE mount refusing what a Unity
# Catalog volume refuses (tests/volumefs.py, through fusepy); without root the step only warns and the
# volume is a plain directory (its test skips, saying so).
fuse:
	@if ldconfig -p 2>/dev/null | grep -q 'libfuse\.so\.2'; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q libfuse2; \
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo apt-get update -q && sudo apt-get install -y -q libfuse2; \
	else echo "WARNING: no libfuse2 and no root to install it: the fake hosts' volume will be a plain directory"; fi

chromium:
	@if [ -x "$(CHROMIUM)" ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q chromium; \
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo apt-get update -q && sudo apt-get install -y -q chromium; \
	else echo "WARNING: no $(CHROMIUM) and no root to install it: the JupyterLab browser test will be skipped"; fi

# JupyterLab on the example notebooks, with this checkout's extension (rebuilt when edited). As root
# (a container) Jupyter refuses to start without --allow-root, so it is passed then.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

lab: $(TEST_STAMP) $(LABEXT_BUILT)
	mkdir -p build/labextensions && ln -sfn "$(CURDIR)/tfos_notebook/labextension" build/labextensions/tfos-notebook
	$(VENV)/bin/jupyter lab $(ALLOW_ROOT) --notebook-dir=example_notebooks --LabApp.extra_labextensions_path="$(CURDIR)/build/labextensions"
