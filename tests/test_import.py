"""``import autograd_nb`` loads no compiled function and no SciPy subpackage: those load with
their first use (docs/benchmarking.rst, "Import time"), and give the same results then.

Each check runs in a child process, where nothing was imported before."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.special

from autograd_nb import cache

ROOT = Path(__file__).resolve().parents[1]

#: What a child prints: the modules and compiled functions loaded after each step.
REPORT = textwrap.dedent(
    """
    import gc, json, sys
    import autograd_nb as anb
    from autograd_nb import collector

    # (numba itself imports the ``scipy`` package, which is light, at its import)
    HEAVY = ("scipy.special", "scipy.linalg", "scipy.fft", "scipy._lib._array_api",
             "numba.np.linalg")

    def state():
        info = anb.config.cache_info()
        return {
            "modules": sorted(m for m in sys.modules if m in HEAVY),
            "loaded": info.loaded, "compiled": info.compiled,
            "walk": collector.LAYOUT is not None,
            "hook": collector._hook is not None and collector._hook in gc.callbacks,
            "hooks": sum(c in (collector._hook, collector._on_collection)
                         for c in gc.callbacks),
        }
    """
)


def run_child(body, **env):
    script = REPORT + textwrap.dedent(body)
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
        env=dict(os.environ, **env), timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_import_loads_no_compiled_function_and_no_scipy_subpackage():
    report = run_child('print(json.dumps(state()))')
    assert report["modules"] == []
    assert report["loaded"] == report["compiled"] == 0
    assert not report["walk"]  # collections meanwhile untrack in Python


def test_with_an_empty_cache_the_walk_compiles_at_import(tmp_path):
    report = run_child('print(json.dumps(state()))',
                       AUTOGRAD_NB_CACHE_DIR=str(tmp_path / "k"),
                       NUMBA_CACHE_DIR=str(tmp_path / "n"))
    assert report["walk"] and report["hooks"] == 1
    assert "scipy.special" not in report["modules"]


@pytest.mark.parametrize("first", ["an op", "load_compiled_walk"])
def test_the_compiled_walk_loads_with_the_first_compiled_function(first):
    report = run_child(
        f"""
        if "{first}" == "load_compiled_walk":
            assert collector.load_compiled_walk()
        x = anb.tensor([1.0, 2.0], requires_grad=True)
        (anb.sin(x) * x).sum().backward()
        print(json.dumps(state()))
        """,
        AUTOGRAD_NB_TIERED="0",
    )
    assert report["loaded"] + report["compiled"] > 0
    assert report["walk"] and report["hook"]
    assert report["hooks"] == 1  # (the compiled hook in the Python one's place, once)


@pytest.mark.parametrize("name", ["kv", "k1e"])
def test_scipy_bessel_kernels_from_the_cache_register_their_symbols(name):
    """The first child may compile (codegen registers SciPy's symbols), the second reads the
    machine code from the cache (the data file names the symbols): both give SciPy's bits,
    and neither imports scipy.special before the call."""
    body = f"""
        before = state()
        x = anb.tensor([0.5, 1.5, 2.5], requires_grad=True)
        y = anb.special.{name}(1.5, x) if "{name}" == "kv" else anb.special.{name}(x)
        (g,) = anb.grad(y.sum(), x)
        print(json.dumps({{"before": before, "after": state(), "y": y.tolist(),
                           "g": g.tolist()}}))
        """
    x = np.array([0.5, 1.5, 2.5])
    want = scipy.special.kv(1.5, x) if name == "kv" else scipy.special.k1e(x)
    for _ in range(2):
        report = run_child(body, AUTOGRAD_NB_TIERED="0")
        assert "scipy.special" not in report["before"]["modules"]
        np.testing.assert_array_equal(report["y"], want)
        assert np.all(np.isfinite(report["g"]))
    assert report["after"]["compiled"] == 0  # (the second child read every kernel)
    assert report["after"]["loaded"] > 0


def test_a_data_file_naming_a_deferred_symbol_registers_it(monkeypatch):
    calls = []
    monkeypatch.setattr(cache, "_deferred_symbols", [])
    cache.on_symbols("anb_test_symbol_", lambda: calls.append("registered"))
    cache._register_symbols_in(b"...machine code without it...")
    assert calls == []
    cache._register_symbols_in(b"...call anb_test_symbol_f...")
    cache._register_symbols_in(b"...call anb_test_symbol_f...")
    assert calls == ["registered"]  # (once)
    assert cache._deferred_symbols == []
