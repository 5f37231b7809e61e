"""Which BLAS the products call (``config.BLAS``, ``autograd_nb.ops._blas.PRODUCTS``): the
choice, its errors, a whole process on each library giving NumPy's products, and Intel MKL's
threads in forked children."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from autograd_nb.ops import _blas


def test_auto_takes_numpys_openblas_where_numpy_bundles_one(monkeypatch):
    found = _blas.Blas("numpy", {}, True, None, None, None)
    monkeypatch.setattr(_blas, "_numpy_blas", lambda: found)
    monkeypatch.setattr(_blas, "_mkl_blas", lambda: None)
    assert _blas._products_blas("auto", _blas.scipy_blas) is found
    assert _blas._products_blas("numpy", _blas.scipy_blas) is found
    assert _blas._products_blas("scipy", _blas.scipy_blas) is _blas.scipy_blas()
    monkeypatch.setattr(_blas, "_numpy_blas", lambda: None)
    assert _blas._products_blas("auto", _blas.scipy_blas) is _blas.scipy_blas()


def test_auto_takes_mkl_where_it_is_installed_on_an_intel_cpu(monkeypatch):
    mkl = _blas.Blas("mkl", {}, False, None, None, None)
    openblas = _blas.Blas("numpy", {}, True, None, None, None)
    monkeypatch.setattr(_blas, "_mkl_blas", lambda: mkl)
    monkeypatch.setattr(_blas, "_numpy_blas", lambda: openblas)
    monkeypatch.setattr(_blas, "_intel_cpu", lambda: True)
    assert _blas._products_blas("auto", _blas.scipy_blas) is mkl
    assert _blas._products_blas("numpy", _blas.scipy_blas) is openblas
    monkeypatch.setattr(_blas, "_intel_cpu", lambda: False)  # (MKL's AVX2 kernels elsewhere)
    assert _blas._products_blas("auto", _blas.scipy_blas) is openblas
    assert _blas._products_blas("mkl", _blas.scipy_blas) is mkl
    monkeypatch.setattr(_blas, "_mkl_blas", lambda: None)
    monkeypatch.setattr(_blas, "_intel_cpu", lambda: True)
    assert _blas._products_blas("auto", _blas.scipy_blas) is openblas


def test_mkl_asked_for_but_not_installed_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(_blas, "_mkl_blas", lambda: None)
    with pytest.raises(RuntimeError, match=r"no Intel MKL runtime .*autograd_nb\[mkl\]"):
        _blas._products_blas("mkl", _blas.scipy_blas)


def test_numpy_without_its_own_openblas_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(_blas, "_numpy_blas", lambda: None)
    with pytest.raises(RuntimeError, match="bundles no OpenBLAS of its own"):
        _blas._products_blas("numpy", _blas.scipy_blas)


def test_an_unknown_blas_is_a_clear_error():
    with pytest.raises(ValueError, match="'auto', 'mkl', 'numpy' or 'scipy', got 'blis'"):
        _blas._products_blas("blis", _blas.scipy_blas)


def test_the_found_libraries_multiply():
    # Each library's GEMM, called by address from compiled code, against NumPy's product.
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((37, 50)), rng.standard_normal((50, 29))
    _blas.scipy_blas()  # (loaded: libraries() lists it)
    for blas in _blas.libraries():
        assert blas.name in ("mkl", "numpy", "scipy")
        for dtype, tolerance in ((np.float64, 1e-12), (np.float32, 1e-4)):
            out = np.full((37, 29), np.nan, dtype=dtype)
            _blas.gemm_set(blas.gemm[np.dtype(dtype)], 0, x.astype(dtype), False,
                           y.astype(dtype), False, out)
            np.testing.assert_allclose(out, x @ y, rtol=tolerance, atol=tolerance)


SCRIPT = """
import numpy as np
import autograd_nb as anb
from autograd_nb.ops import _blas

assert _blas.PRODUCTS.name == {name!r}, _blas.PRODUCTS
rng = np.random.default_rng(1)
a = anb.tensor(rng.standard_normal((2, 64, 48)).astype(np.float32), requires_grad=True)
b = anb.tensor(rng.standard_normal((48, 40)).astype(np.float32), requires_grad=True)
loss = lambda a, b: anb.tanh(a @ b).sum()
eager = anb.grad(loss(a, b), [a, b])
step = anb.compile(lambda a, b: anb.grad(loss(a, b), [a, b]))
step(a, b)
compiled = step(a, b)
for e, c in zip(eager, compiled):
    assert np.array_equal(e.numpy(), c.numpy())
a64, b64 = a.numpy().astype(np.float64), b.numpy().astype(np.float64)
d = 1 - np.tanh(a64 @ b64) ** 2
np.testing.assert_allclose(eager[0].numpy(), d @ b64.T, rtol=1e-4, atol=1e-4)
np.testing.assert_allclose(eager[1].numpy(), np.einsum("imk,imn->kn", a64, d), rtol=1e-4,
                           atol=1e-3)
print("ok")
"""


#: Whether this environment has Intel MKL (the ``mkl`` extra, which ``make test`` installs on
#: x86-64 Linux and Windows).
HAS_MKL = bool(_blas._mkl_paths())


@pytest.mark.parametrize("name", ["scipy", "auto", "mkl"])
def test_a_process_on_each_blas_gives_the_products_and_their_gradients(name):
    # (A new process: ``config.BLAS`` is read once, at import.) On SciPy's BLAS, on MKL, and
    # on the default: MKL where it is installed on an Intel CPU, else NumPy's OpenBLAS where
    # NumPy bundles one.
    if name == "mkl" and not HAS_MKL:
        pytest.skip("Intel MKL is not installed here (pip install 'autograd_nb[mkl]')")
    root = Path(_blas.__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root), AUTOGRAD_NB_BLAS=name)
    expected = _blas.PRODUCTS.name if name == "auto" else name
    run = subprocess.run([sys.executable, "-c", SCRIPT.format(name=expected)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "ok"


@pytest.mark.slow
def test_the_blas_products_script_prints_each_product_on_each_library():
    if _blas._numpy_blas() is None:
        pytest.skip("NumPy bundles no OpenBLAS here: the script has nothing to compare")
    script = Path(_blas.__file__).resolve().parents[2] / "asv_bench" / "blas_products.py"
    run = subprocess.run([sys.executable, str(script), "--rounds", "1", "--calls", "1"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [line for line in run.stdout.splitlines() if line.startswith("| `")]
    assert len(rows) == 8
    libraries = 3 if HAS_MKL else 2  # (times, then each time over NumPy's, then the bits)
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert len(cells) == 2 * libraries + 1
        assert all(float(cell) > 0 for cell in cells[1:-1]) and cells[-1] in ("True", "False")


FORKED = """
import multiprocessing
import numpy as np
import autograd_nb as anb
from autograd_nb.ops import _blas, _parallel

def work(_):
    a = anb.tensor(np.linspace(-1, 1, 160000).reshape(400, 400).astype(np.float32),
                   requires_grad=True)
    loss = anb.sum(anb.tanh(a @ a))
    return (anb.grad(loss, a)[0].numpy(), _blas.PRODUCTS.get_threads(),
            _parallel.parallel_allowed())

if __name__ == "__main__":
    assert _blas.PRODUCTS.name == "mkl"
    gnu = _blas.mkl_threading == _blas._MKL_GNU  # (else sequential: no libgomp here)
    _blas.PRODUCTS.set_threads(2)
    want, threads, _ = work(0)  # (a product large enough for MKL's threads)
    assert threads == 2 or not gnu
    with multiprocessing.get_context("fork").Pool(2) as pool:
        got = pool.map_async(work, range(2)).get(timeout=120)
    # (one thread against two: the same sums but for their order)
    for g, t, p in got:
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-3)
        assert (t == 1 and not p) or not gnu, (t, p)
    print("ok")
"""


@pytest.mark.skipif(not HAS_MKL, reason="Intel MKL is not installed here")
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() here")
def test_children_forked_after_mkls_threads_ran_their_products_on_one_thread():
    # GNU OpenMP is not fork-safe: without the guard these children hung in their first
    # product (and in numba's first prange), and the pool's map timed out.
    root = Path(_blas.__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root), AUTOGRAD_NB_BLAS="mkl")
    env.pop("MKL_THREADING_LAYER", None)
    run = subprocess.run([sys.executable, "-c", FORKED], env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "ok"


@pytest.mark.skipif(not HAS_MKL, reason="Intel MKL is not installed here")
def test_mkls_threading_layer_named_in_the_environment_is_kept():
    root = Path(_blas.__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root), AUTOGRAD_NB_BLAS="mkl",
               MKL_THREADING_LAYER="SEQUENTIAL")
    script = ("from autograd_nb.ops import _blas; import numpy as np; "
              "x = np.ones((300, 300), np.float32); out = np.empty_like(x); "
              "_blas.gemm_set(_blas.gemm_address(x.dtype), 0, x, False, x, False, out); "
              "print(_blas.mkl_threading, out[0, 0])")
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == [str(_blas._MKL_SEQUENTIAL), "300.0"]


def test_mkl_without_a_threading_layers_library_is_not_used(monkeypatch, tmp_path):
    # MKL would end the process at its first call: the products take OpenBLAS instead.
    monkeypatch.delenv("MKL_THREADING_LAYER", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    asked = []
    monkeypatch.setattr(_blas, "_function", lambda *a, **k: asked.append(a[1]) or (lambda c: c))
    runtime = tmp_path / "libmkl_rt.so.3"
    assert not _blas._choose_mkl_threads(None, str(runtime))
    assert asked == [["MKL_Set_Threading_Layer"]]
    monkeypatch.setattr(_blas, "mkl_threading", None)
    (tmp_path / "libmkl_sequential.so.3").touch()
    assert _blas._choose_mkl_threads(None, str(runtime))
    assert _blas.mkl_threading == _blas._MKL_SEQUENTIAL  # (GNU's library is not there)
