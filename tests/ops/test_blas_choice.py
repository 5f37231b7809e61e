"""Which BLAS the products call (``config.BLAS``, ``autograd_nb.ops._blas.PRODUCTS``): the
choice, its errors, and a whole process on SciPy's BLAS giving NumPy's products."""

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
    assert _blas._products_blas("auto", _blas.SCIPY) is found
    assert _blas._products_blas("numpy", _blas.SCIPY) is found
    assert _blas._products_blas("scipy", _blas.SCIPY) is _blas.SCIPY
    monkeypatch.setattr(_blas, "_numpy_blas", lambda: None)
    assert _blas._products_blas("auto", _blas.SCIPY) is _blas.SCIPY


def test_numpy_without_its_own_openblas_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(_blas, "_numpy_blas", lambda: None)
    with pytest.raises(RuntimeError, match="bundles no OpenBLAS of its own"):
        _blas._products_blas("numpy", _blas.SCIPY)


def test_an_unknown_blas_is_a_clear_error():
    with pytest.raises(ValueError, match="'auto', 'numpy' or 'scipy', got 'mkl'"):
        _blas._products_blas("mkl", _blas.SCIPY)


def test_the_found_libraries_multiply():
    # Each library's GEMM, called by address from compiled code, against NumPy's product.
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((37, 50)), rng.standard_normal((50, 29))
    for blas in _blas.LIBRARIES:
        assert blas.name in ("numpy", "scipy")
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


@pytest.mark.parametrize("name", ["scipy", "auto"])
def test_a_process_on_each_blas_gives_the_products_and_their_gradients(name):
    # (A new process: ``config.BLAS`` is read once, at import.) On SciPy's BLAS, and on the
    # default, which is NumPy's where NumPy bundles one.
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
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert float(cells[1]) > 0 and float(cells[2]) > 0 and cells[4] in ("True", "False")
