"""The asv suite's ``setup`` leaves autograd_nb's workloads in their steady state.

``asv run --quick`` times the one call after ``setup``. That call must be served from the
graph's template with the compiled check (``engine/plan_cache.py``, ``engine/graph_reader.py``)
and compile or load nothing: else a 50 us step times at 9 ms (``docs/benchmarking.rst``,
"Warm-up"). No asv run and no peer engine is needed: the benchmark classes are imported and
their ``setup`` called as asv would.
"""

import importlib
import importlib.util
import os
import sys

import numba.core.event as numba_event
import pytest

from autograd_nb.engine import graph_reader, plan_cache

_BENCHMARKS = os.path.join(
    os.path.dirname(__file__), os.pardir, os.pardir, "asv_bench", "benchmarks"
)


@pytest.fixture(scope="module")
def bench_engines():
    """``asv_bench/benchmarks/bench_engines.py``, imported as asv does: inside its package."""
    name = "asv_benchmarks_under_test"
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(_BENCHMARKS, "__init__.py"), submodule_search_locations=[_BENCHMARKS]
    )
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    with pytest.MonkeyPatch.context() as patch:
        # bench_engines points JAX's compilation cache at a folder; keep that out of the suite.
        patch.setattr(os, "environ", dict(os.environ))
        spec.loader.exec_module(package)
        module = importlib.import_module(f"{name}.bench_engines")
    yield module
    for loaded in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
        del sys.modules[loaded]


# Small sizes: a few milliseconds per step at most, so each case takes well under a second
# once the kernels are in numba's on-disk cache.
CASES = [
    ("SeedOuter", (100, "float64", "autograd_nb", "cpu")),
    ("FastestAutograd", (1000, "autograd_nb", "cpu")),
]


@pytest.mark.parametrize(("suite_name", "params"), CASES, ids=[name for name, _ in CASES])
def test_the_call_after_setup_is_served_by_a_warm_template(bench_engines, suite_name, params):
    # A fresh cache: a key that other tests missed often enough would never get a template.
    plan_cache.clear()
    suite = getattr(bench_engines, suite_name)()
    compiled = 1 if graph_reader.found_layout() is not None else 0

    before_setup = dict(plan_cache.stats)
    suite.setup(*params)
    # The template was made and already used in setup (its first use loads the compiled
    # check: that one-time cost must be paid there).
    assert plan_cache.stats["made"] > before_setup["made"]
    assert plan_cache.stats["compiled"] - before_setup["compiled"] >= compiled
    assert plan_cache.stats["hits"] > before_setup["hits"]

    before_call = dict(plan_cache.stats)
    # Every numba compilation, and every load of a compiled function from numba's on-disk
    # cache, holds numba's compiler lock: none may happen in the timed call.
    with numba_event.install_recorder("numba:compiler_lock") as compiler_lock:
        suite.time_forward_backward(*params)
    took = {key: plan_cache.stats[key] - before_call[key] for key in before_call}
    assert took == {"hits": 1, "compiled": compiled, "made": 0}
    assert compiler_lock.buffer == []
