"""The compiled executor's drivers of ``anb.linalg`` (``_lu_solve``, ``_slogdet``, ``_det``,
``_cholesky``, ``_eigh``, ``_svd``, ``_qr``, ``_pinv``; ops/linalg_*.py) against the Python
walk over the same kernels (``config.COMPILED_BACKWARD = False``): the same bits, batched and
not, float32 and float64, from LU's factors and from Cholesky's (symmetric positive-definite
matrices), one backward and ``is_grads_batched``; and the kernels of ``_lapack`` behind them,
at orders where they recurse, against NumPy.
"""

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb import config
from autograd_nb.engine import executor
from autograd_nb.ops import _lapack, linalg_cholesky

RNG = np.random.default_rng(2121)

#: 3: one block everywhere; 80: past ``_lapack.LEAVES`` and ``CHOLESKY_BLOCKS``, so the
#: recursions and the blocked reverse run.
ORDERS = (3, 80)


def spd(batch, n):
    x = RNG.standard_normal(batch + (n, n))
    return x @ np.swapaxes(x, -1, -2) / n + np.eye(n)


def general(batch, n):
    return RNG.standard_normal(batch + (n, n)) + 3.0 * np.sqrt(n) * np.eye(n)


def symmetric(batch, n):
    """Symmetric and not positive definite: ``_lu`` tries Cholesky, then LU."""
    x = spd(batch, n)
    x[..., 0, 0] = 1e-3
    x[..., -1, -1] = 1e-3
    x[..., 0, -1] = x[..., -1, 0] = 1.0
    return x


#: name: (function of the inputs, inputs for a batch and an order): every public function
#: whose backward the drivers run, from LU's factors and (``-spd``) Cholesky's.
CASES = {
    "solve": (lambda a, b: anb.linalg.solve(a, b),
              lambda batch, n: [general(batch, n), RNG.standard_normal(batch + (n, 2))]),
    "solve-spd": (lambda a, b: anb.linalg.solve(a, b),
                  lambda batch, n: [spd(batch, n), RNG.standard_normal(batch + (n, 2))]),
    "solve-symmetric": (lambda a, b: anb.linalg.solve(a, b),
                        lambda batch, n: [symmetric(batch, n), RNG.standard_normal(n)]),
    "solve-vector": (lambda a, b: anb.linalg.solve(a, b),
                     lambda batch, n: [general(batch, n), RNG.standard_normal(n)]),
    "inv": (lambda a: anb.linalg.inv(a), lambda batch, n: [general(batch, n)]),
    "inv-spd": (lambda a: anb.linalg.inv(a), lambda batch, n: [spd(batch, n)]),
    "det": (lambda a: anb.linalg.det(a), lambda batch, n: [general(batch, n) / 3.0]),
    "det-spd": (lambda a: anb.linalg.det(a), lambda batch, n: [spd(batch, n)]),
    "slogdet": (lambda a: anb.linalg.slogdet(a)[1], lambda batch, n: [general(batch, n)]),
    "slogdet-spd": (lambda a: anb.linalg.slogdet(a)[1], lambda batch, n: [spd(batch, n)]),
    "cholesky": (lambda a: anb.linalg.cholesky(a), lambda batch, n: [spd(batch, n)]),
    "cholesky-upper": (lambda a: anb.linalg.cholesky(a, upper=True),
                       lambda batch, n: [spd(batch, n)]),
    "eigh": (lambda a: anb.linalg.eigh(a)[0] + anb.linalg.eigh(a)[1][..., 0, :],
             lambda batch, n: [spd(batch, n)]),
    "svd": (lambda a: anb.linalg.svd(a, full_matrices=False)[1]
            + anb.linalg.svd(a, full_matrices=False)[2][..., 0, :],
            lambda batch, n: [RNG.standard_normal(batch + (n + 2, n))]),
    "qr": (lambda a: anb.linalg.qr(a)[1], lambda batch, n: [RNG.standard_normal(batch + (n, n))]),
    "qr-tall": (lambda a: anb.linalg.qr(a)[0],
                lambda batch, n: [RNG.standard_normal(batch + (n + 2, n))]),
    "qr-wide": (lambda a: anb.linalg.qr(a)[1],
                lambda batch, n: [RNG.standard_normal(batch + (n, n + 2))]),
    "pinv": (lambda a: anb.linalg.pinv(a),
             lambda batch, n: [RNG.standard_normal(batch + (n + 2, n))]),
}


@pytest.fixture
def executions(monkeypatch):
    """The number of compiled backwards run (one-by-one and batched)."""
    calls = []
    for name in ("execute", "execute_batched"):
        original = getattr(executor, name)

        def counting(*args, original=original):
            calls.append(1)
            return original(*args)

        monkeypatch.setattr(executor, name, counting)
    return calls


def gradients(function, arrays, dtype, rows=None):
    """The gradients of ``function`` at ``arrays`` (cast to ``dtype``) for a seeded cotangent,
    or for ``rows`` of them at once (``is_grads_batched``)."""
    inputs = [anb.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
    y = function(*inputs)
    shape = y.shape if rows is None else (rows,) + y.shape
    v = np.random.default_rng(7).standard_normal(shape).astype(dtype)
    grads = anb.grad(y, inputs, grad_outputs=anb.tensor(v), is_grads_batched=rows is not None)
    return [g.numpy() for g in grads]


def walk_and_compiled(monkeypatch, executions, *args, **kwargs):
    with monkeypatch.context() as patch:
        patch.setattr(config, "COMPILED_BACKWARD", False)
        walked = gradients(*args, **kwargs)
    assert not executions
    compiled = gradients(*args, **kwargs)
    assert executions, "the backward ran as the Python walk: a node has no driver"
    return walked, compiled


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("batch", [(), (2,)], ids=["single", "batched"])
@pytest.mark.parametrize("n", ORDERS)
@pytest.mark.parametrize("name", CASES)
@pytest.mark.compiled_only
def test_compiled_backward_gives_the_walks_bits(monkeypatch, executions, name, n, batch, dtype):
    function, make = CASES[name]
    arrays = make(batch, n)
    walked, compiled = walk_and_compiled(monkeypatch, executions, function, arrays, dtype)
    for w, c in zip(walked, compiled):
        assert c.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(c, w)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", ["solve", "solve-spd", "slogdet", "slogdet-spd", "det",
                                  "cholesky", "eigh", "svd", "qr", "pinv"])
@pytest.mark.compiled_only
def test_grads_batched_give_the_walks_bits(monkeypatch, executions, name, dtype):
    function, make = CASES[name]
    arrays = make((2,), 5)
    walked, compiled = walk_and_compiled(monkeypatch, executions, function, arrays, dtype,
                                         rows=3)
    first = gradients(function, arrays, dtype)  # the first row's cotangent (same seed)
    for w, c, one in zip(walked, compiled, first):
        assert c.shape == (3,) + one.shape
        np.testing.assert_array_equal(c, w)
        np.testing.assert_allclose(c[0], one, rtol=1e-4 if dtype == "float32" else 1e-12)


def test_driver_gradients_match_closed_forms():
    n = 80
    a, b = general((), n), RNG.standard_normal(n)
    at, bt = anb.tensor(a, requires_grad=True), anb.tensor(b, requires_grad=True)
    ga, gb = anb.grad(anb.linalg.solve(at, bt).sum(), (at, bt))
    expected_b = np.linalg.solve(a.T, np.ones(n))
    np.testing.assert_allclose(gb.numpy(), expected_b, rtol=1e-10)
    np.testing.assert_allclose(ga.numpy(), -np.outer(expected_b, np.linalg.solve(a, b)),
                               rtol=1e-9, atol=1e-12)
    (g,) = anb.grad(anb.linalg.slogdet(at)[1], at)
    np.testing.assert_allclose(g.numpy(), np.linalg.inv(a).T, rtol=1e-10, atol=1e-14)
    s = spd((), n)
    st = anb.tensor(s, requires_grad=True)
    (g,) = anb.grad(anb.sum(anb.linalg.cholesky(st)), st)
    lower = np.linalg.cholesky(s)
    inverse = np.linalg.inv(lower)
    phi = np.tril(lower.T @ np.tril(np.ones((n, n))))
    phi[np.diag_indices(n)] *= 0.5
    expected = inverse.T @ ((phi + phi.T) / 2) @ inverse
    np.testing.assert_allclose(g.numpy(), expected, rtol=1e-9, atol=1e-12)


@pytest.mark.compiled_only
def test_singular_matrices_in_the_compiled_backward(executions):
    x = anb.tensor(np.ones((2, 2)), requires_grad=True)
    (g,) = anb.grad(anb.linalg.slogdet(x)[1], x)
    assert np.all(np.isnan(g.numpy()))
    singular = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    x = anb.tensor(singular, requires_grad=True)
    (g,) = anb.grad(anb.linalg.det(x), x)
    cofactors = np.array([[np.linalg.det(np.delete(np.delete(singular, i, 0), j, 1))
                           * (-1) ** (i + j) for j in range(3)] for i in range(3)])
    np.testing.assert_allclose(g.numpy(), cofactors, atol=1e-12)
    assert len(executions) == 2


# -- the kernels ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("n", [1, 5, 64, 65, 150])
def test_lapack_kernels_match_numpy(n, dtype):
    routines = _lapack.routines(dtype)
    tolerance = 1e-12 if dtype == "float64" else 1e-4
    a = general((), n).astype(dtype)
    packed = np.empty((n, n + 1), dtype=dtype)
    assert _lapack.lu_factor_into(routines, a, packed) == 0
    inverse = np.empty((n, n), dtype=dtype)
    _lapack.lu_inverse(routines, packed, inverse)
    np.testing.assert_allclose(inverse, np.linalg.inv(a.astype(np.float64)), rtol=tolerance,
                               atol=tolerance / n)
    lower = np.tril(a)
    inverted = lower.copy()
    _lapack.triangular_inverse(routines, inverted, True, False)
    np.testing.assert_allclose(np.tril(inverted), np.linalg.inv(lower.astype(np.float64)),
                               rtol=tolerance, atol=tolerance / n)
    unit_upper = np.triu(a, 1) / n + np.eye(n, dtype=dtype)
    inverted = unit_upper + np.tril(a, -1)
    _lapack.triangular_inverse(routines, inverted, False, True)
    np.testing.assert_array_equal(np.tril(inverted, -1), np.tril(a, -1))  # not touched
    expected = np.linalg.inv(unit_upper.astype(np.float64))
    np.testing.assert_allclose(np.triu(inverted, 1) + np.eye(n), expected, rtol=tolerance,
                               atol=tolerance / n)
    s = spd((), n).astype(dtype)
    factor = np.empty_like(s)
    assert _lapack.cholesky_into(routines, s, factor) == 0
    np.testing.assert_allclose(factor, np.linalg.cholesky(s.astype(np.float64)),
                               rtol=tolerance, atol=tolerance)
    assert _lapack.is_cholesky(packed) == (n == 1 and a[0, 0] > 0)  # (1 x 1: symmetric)
    assert _lapack.lu_factor_into(routines, s, packed) == 0
    assert _lapack.is_cholesky(packed) == (n > 0)
    _lapack.lu_inverse(routines, packed, inverse)
    np.testing.assert_allclose(inverse, np.linalg.inv(s.astype(np.float64)), rtol=tolerance,
                               atol=tolerance)
    b = RNG.standard_normal((n, 3)).astype(dtype)
    x = np.empty_like(b)
    _lapack.lu_solve_into(routines, packed, b, x, True)
    np.testing.assert_allclose(x, np.linalg.solve(s.astype(np.float64), b), rtol=tolerance,
                               atol=tolerance)


@pytest.mark.parametrize("n", [5, 80, 150])
def test_blocked_cholesky_reverse_matches_the_solves(n):
    s = spd((), n)
    lower = np.linalg.cholesky(s)
    g = RNG.standard_normal((n, n))
    grad = np.zeros((1, n, n))
    linalg_cholesky._cholesky_vjp(_lapack.routines(np.float64), g[None], lower[None], grad)
    phi = np.tril(lower.T @ g)
    phi[np.diag_indices(n)] *= 0.5
    inverse = np.linalg.inv(lower)
    expected = inverse.T @ ((phi + phi.T) / 2) @ inverse
    np.testing.assert_allclose(grad[0], expected, rtol=1e-9, atol=1e-12)
