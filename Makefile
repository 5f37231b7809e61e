# autograd_nb: `make demo` and `make test` work on a fresh machine (they create .venv).
# GNU make; recipes are indented with tabs.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP_INSTALL := $(PY) -m pip install --quiet --disable-pip-version-check
# `make bench ASV_ARGS=` for a full (slower, statistically meaningful) asv run.
ASV_ARGS ?= --quick

.PHONY: help demo test test-fast test-gpu bench bench-report docs lint clean-cache warmup

help:
	@echo "make demo          create $(VENV), install the package, run the grad_outputs tour"
	@echo "make test          install the test, docs, cuda, distributed and mkl extras into $(VENV)"
	@echo "                   and run the whole suite (the CUDA tests on numba's simulator: no GPU"
	@echo "                   needed), then the op, autograd and engine tests again in tier 0"
	@echo "                   (pytest --tier=0: the NumPy twins a fresh machine's first calls run)"
	@echo "                   (both on every core: pytest-xdist; PYTEST_WORKERS=0 runs serially)"
	@echo "make test-fast     the same without the tests marked slow (subprocesses, clusters, longest)"
	@echo "make test-gpu      run the CUDA tests (tests/cuda) on a real NVIDIA GPU"
	@echo "make bench         install the bench extra and run the asv suite in $(VENV)"
	@echo "make bench-report  turn the asv results into HTML (asv_bench/html)"
	@echo "make docs          build the Sphinx site (warnings are errors) into docs/_build/html"
	@echo "make lint          ruff check"
	@echo "make clean-cache   delete the on-disk caches of compiled kernels (never needed: an"
	@echo "                   edit or an upgrade starts a new cache generation)"
	@echo "make warmup        compile every public function's kernels into the cache (optional;"
	@echo "                   WARMUP_ARGS=\"--ops tanh,matmul --dtypes float32\" for a subset)"

$(PY):
	$(PYTHON) -m venv $(VENV)

demo: $(PY)
	$(PIP_INSTALL) -e .
	$(PY) -m autograd_nb

# The registry-driven tests run twice: with the compiled kernels (in the whole suite), and
# with tier 0 forced (the NumPy twins a fresh machine's first calls run: tests/conftest.py).
TIER0_TESTS := tests/ops tests/autograd tests/engine tests/scipy
# Both passes run on every core this process may use (pytest-xdist, one worker process each;
# nproc counts the CPUs of its affinity mask). A test file stays on one worker (--dist
# loadfile), so its kernels compile in one process, and the workers share the kernel cache on
# disk (concurrent writes are safe: autograd_nb/cache.py). PYTEST_WORKERS=0 runs serially.
PYTEST_WORKERS ?= $(shell nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
XDIST := -n $(PYTEST_WORKERS) --dist loadfile

test: $(PY)
	$(PIP_INSTALL) -e ".[test,docs,cuda,distributed,mkl]"
	$(PY) -m pytest $(XDIST)
	$(PY) -m pytest $(XDIST) --tier=0 $(TIER0_TESTS)

# The inner loop: every test but those marked slow (fresh processes, empty caches, clusters,
# the longest checks; pyproject.toml lists them).
test-fast: $(PY)
	$(PIP_INSTALL) -e ".[test,docs,cuda,mkl]"
	$(PY) -m pytest $(XDIST) -m "not slow"
	$(PY) -m pytest $(XDIST) -m "not slow" --tier=0 $(TIER0_TESTS)

# For convenience only: the kernel cache is keyed by the package's sources and the numba,
# llvmlite, NumPy and Python versions (autograd_nb/cache.py), so an edit or an upgrade starts a
# new generation and old ones are pruned. Removes every generation, and numba's in-tree caches
# of the package (__pycache__/*.nbi, *.nbc: an older layout).
clean-cache: $(PY)
	find autograd_nb -name '*.nbi' -delete -o -name '*.nbc' -delete
	$(PY) -c 'from autograd_nb import cache; cache.clear()'

# Compiles the public functions' kernels into the cache with a progress bar; nobody needs it.
WARMUP_ARGS ?=
warmup: $(PY)
	$(PIP_INSTALL) -e .
	$(PY) -m autograd_nb warmup $(WARMUP_ARGS)

# The same CUDA tests as `make test` runs on the simulator, on the GPU (tests/conftest.py leaves
# NUMBA_ENABLE_CUDASIM alone when AUTOGRAD_NB_TEST_GPU=1).
test-gpu: $(PY)
	$(PIP_INSTALL) -e ".[test,cuda]"
	AUTOGRAD_NB_TEST_GPU=1 NUMBA_ENABLE_CUDASIM=0 $(PY) -m pytest tests/cuda

# The peers (torch, jax, HIPS autograd) are only compared against; when one cannot be
# installed here, its benchmarks skip (NotImplementedError in setup) and the run still completes.
bench: $(PY)
	$(PIP_INSTALL) -e ".[bench]" || { \
		echo "warning: the full bench extra did not install; trying each peer alone" >&2; \
		$(PIP_INSTALL) -e . "asv>=0.6"; \
		for peer in torch==2.13.0 "jax jaxlib" autograd; do \
			$(PIP_INSTALL) $$peer || echo "warning: $$peer not installed; its rows skip" >&2; \
		done; \
		$(PIP_INSTALL) -e ".[mkl]" || echo "warning: MKL not installed; products on OpenBLAS" >&2; \
	}
	cd asv_bench && ../$(PY) -m asv machine --yes >/dev/null
	cd asv_bench && ../$(PY) -m asv run --python=same $(ASV_ARGS) --show-stderr \
		--set-commit-hash=$$(git rev-parse HEAD)

bench-report: $(PY)
	cd asv_bench && ../$(PY) -m asv publish
	@echo "open asv_bench/html/index.html (or: cd asv_bench && ../$(PY) -m asv preview)"

docs: $(PY)
	$(PIP_INSTALL) -e ".[docs]"
	$(PY) -m sphinx -W --keep-going -q -b html docs docs/_build/html
	@echo "open docs/_build/html/index.html"

lint: $(PY)
	$(PIP_INSTALL) -e ".[lint]"
	$(PY) -m ruff check .
