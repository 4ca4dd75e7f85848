# The cuDNN workspace workbook. Quick start (README): `make lab`, `make test`; everything: `make check`.
#
# Variables you may set on the command line:
#   PYTHON=python3.12      the interpreter the venv is made from (>= 3.10; default python3)
#   GPU=auto|none|cuda12|cuda13
#                          which GPU extra to install (auto: from the driver's CUDA version in the
#                          `nvidia-smi` header; nothing when nvidia-smi does not work)
#   LAB_ARGS="--port=8899" extra arguments for `jupyter lab`
#   PYTEST_ARGS="-k spec"  extra arguments for pytest
#   CLASS_DIR=/srv/labkit-class   `make hub`: the class folder (class/README.md)

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
GPU ?= auto
LAB_ARGS ?=
PYTEST_ARGS ?=
CLASS_DIR ?= /srv/labkit-class
# JupyterHub's proxy (npm's configurable-http-proxy), installed beside the venv; labkit.cli.classroom finds it there
PROXY := $(VENV)/node/node_modules/.bin/configurable-http-proxy
PROXY_VERSION ?= 5

comma := ,

# ---- which GPU extra ------------------------------------------------------------------------
ifeq ($(GPU),auto)
  # "CUDA Version: 12.4" in the nvidia-smi header is the newest CUDA the driver supports.
  CUDA_MAJOR := $(shell out=$$(nvidia-smi 2>/dev/null) && printf '%s\n' "$$out" | sed -n 's/.*CUDA Version: *\([0-9][0-9]*\).*/\1/p' | head -n 1)
  ifeq ($(CUDA_MAJOR),)
    GPU_EXTRA :=
  else ifeq ($(shell [ "$(CUDA_MAJOR)" -ge 13 ] && echo yes),yes)
    GPU_EXTRA := cuda13
  else
    GPU_EXTRA := cuda12
    ifeq ($(shell [ "$(CUDA_MAJOR)" -lt 12 ] && echo yes),yes)
      $(warning warning: nvidia-smi says the driver supports CUDA $(CUDA_MAJOR); the cuda12 extra needs a CUDA 12 driver. Update the driver, or use GPU=none for recorded mode)
    endif
  endif
else ifeq ($(GPU),none)
  GPU_EXTRA :=
else ifneq ($(filter cuda12 cuda13,$(GPU)),)
  GPU_EXTRA := $(GPU)
else
  $(error GPU must be auto, none, cuda12 or cuda13 (got "$(GPU)"))
endif

EXTRAS := test$(if $(GPU_EXTRA),$(comma)$(GPU_EXTRA)$(comma)trace-$(GPU_EXTRA))
# One stamp per set of extras; it is older than pyproject.toml when the dependencies changed.
STAMP := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))

# ---- jupyter lab flags ----------------------------------------------------------------------
# No display (ssh, container, CI): don't try to open a browser, unless LAB_ARGS says otherwise.
ifeq ($(strip $(DISPLAY)$(WAYLAND_DISPLAY)),)
  ifeq ($(findstring browser,$(LAB_ARGS)),)
    LAB_FLAGS += --no-browser
  endif
endif
# Jupyter refuses to start as root (containers, cloud VMs) without --allow-root.
ifeq ($(shell id -u 2>/dev/null),0)
  ifeq ($(findstring allow-root,$(LAB_ARGS)),)
    LAB_FLAGS += --allow-root
  endif
endif

.DEFAULT_GOAL := help
.PHONY: help setup lab test check pytest doctor strip clean proxy hub hub-stop

help:
	@echo "make lab      set up (first time only) and open the workbook in JupyterLab"
	@echo "make test     set up (first time only) and run the quick tier: units, claims, every notebook (recorded)"
	@echo "make check    everything: the quick tier, then the browser tests and a class on JupyterHub (what CI runs)"
	@echo "make setup    create $(VENV) and install labkit[$(EXTRAS)] (re-runs only when pyproject.toml changes)"
	@echo "make doctor   say what this machine has and whether labkit runs live or recorded"
	@echo "make strip    remove outputs from the notebooks (run before committing a lesson edited in JupyterLab)"
	@echo "make hub      check, then start a class on JupyterHub from CLASS_DIR (default /srv/labkit-class): class/README.md"
	@echo "make hub-stop stop the class's hub and every learner's server"
	@echo "make proxy    install JupyterHub's proxy (npm's configurable-http-proxy) into $(VENV)/node"
	@echo "make clean    remove $(VENV) and caches"

setup: $(STAMP)

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null || { \
	  echo "error: the workbook needs Python >= 3.10; '$(PYTHON)' is: $$($(PYTHON) --version 2>&1)" >&2; \
	  echo "       install a newer Python and run e.g. 'make PYTHON=python3.11 $(MAKECMDGOALS)'" >&2; exit 1; }
	@echo "creating $(VENV) with $$($(PYTHON) --version 2>&1)"
	@$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
	  echo "error: '$(PYTHON) -m venv' failed. On Debian/Ubuntu: sudo apt-get install python3-venv" >&2; exit 1; }
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	@echo "installing labkit[$(EXTRAS)] into $(VENV)$(if $(GPU_EXTRA),, (no working nvidia-smi: CPU only, recorded mode))"
	$(BIN)/python -m pip install --progress-bar off -e ".[$(EXTRAS)]"
	@# an editable install leaves labkit uncompiled: the first import would compile ~170 files (0.5 s)
	@$(BIN)/python -m compileall -q labkit > /dev/null || true
	@# with a GPU: the kernels a first visit would compile, compiled now: CuPy's (18 of them waited in one
	@# panel's first paint) and cuDNN's run-time compiled plans for every shape the lessons offer (kept in
	@# labkit's plan store, ~/.cache/labkit/plans, and CUDA's JIT cache; about two minutes on an H100 host)
	@$(BIN)/python -m labkit warm-kernels || true
	@rm -f $(VENV)/.installed-*
	@touch $@

lab: setup
	@mkdir -p notebooks
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/jupyter lab notebooks/ $(LAB_FLAGS) $(LAB_ARGS)

# Two tiers. `make test`: the units, the claims and every notebook (nbmake, recorded without a GPU),
# on every core (pytest-xdist); `make check`: everything (CI runs it: .ci/run), the quick tier as
# `make test` runs it, then the rest one test at a time: the browser tests (headless Chromium, within
# time budgets that run side by side on 2 cores would put at risk: docs/maintaining.md) and a class on
# a real JupyterHub. Notebooks are run only when there are some; pytest's exit 5 ("no tests
# collected") fails like any other non-zero exit.
QUICK_TIER := -m "not browser and not slow" -n auto
REST_TIER := -m "browser or slow"

test: setup
	@$(MAKE) --no-print-directory pytest TIER_ARGS='$(QUICK_TIER)'

check: setup proxy
	@$(MAKE) --no-print-directory pytest TIER_ARGS='$(QUICK_TIER)'
	@$(MAKE) --no-print-directory pytest TIER_ARGS='$(REST_TIER)'

pytest:
	@args="tests/"; \
	if [ -n "$$(find notebooks -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' 2>/dev/null | head -n 1)" ]; then \
	  args="$$args --nbmake notebooks/"; \
	fi; \
	echo "$(BIN)/python -m pytest $$args $(TIER_ARGS) $(PYTEST_ARGS)"; \
	rc=0; t0=$$(date +%s); PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest $$args $(TIER_ARGS) $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make: pytest collected no tests; that is a failure" >&2; fi; \
	echo "make: the tests took $$(( $$(date +%s) - t0 )) s"; \
	exit $$rc

doctor: setup
	$(BIN)/python -m labkit doctor

# The notebooks are the lessons' source: edit them in JupyterLab, then strip outputs before a
# commit (or let the pre-commit hook in .pre-commit-config.yaml do it; tests fail on stored outputs).
strip: setup
	$(BIN)/nbstripout --keep-id notebooks/*.ipynb

proxy: $(PROXY)

$(PROXY): | $(BIN)/python
	@command -v npm >/dev/null || { echo "error: JupyterHub's proxy comes from npm; install Node.js (>= 20) and npm" >&2; exit 1; }
	npm install --prefix $(VENV)/node --no-fund --no-audit --loglevel=error configurable-http-proxy@$(PROXY_VERSION)

# A class: JupyterHub with class/jupyterhub_config.py, on the class folder CLASS_DIR, checked
# first and started in the background (python -m labkit class start); hub-stop stops it.
hub: setup proxy
	@$(BIN)/python -c 'import jupyterhub, firstuseauthenticator, jupyterhub_idle_culler, pynvml' 2>/dev/null || \
	  $(BIN)/python -m pip install --progress-bar off -e ".[$(EXTRAS),class]"
	$(BIN)/python -m labkit class start --dir "$(CLASS_DIR)"

hub-stop:
	$(BIN)/python -m labkit class stop --dir "$(CLASS_DIR)"

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build dist *.egg-info
	find labkit tests notebooks -name __pycache__ -type d -prune -exec rm -rf {} + 2>/dev/null || true
