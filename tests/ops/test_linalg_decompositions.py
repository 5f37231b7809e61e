"""``anb.linalg`` (the ops/linalg_*.py modules): values against NumPy's ``numpy.linalg`` (batched
shapes too), gradients against finite differences to second order (kernels and
differentiable rules), float32, degenerate cases, errors, and the Gaussian-process example of
docs/linalg.rst.

Each case is one function written once over a namespace ``xp``: run with ``numpy`` on arrays
it is the reference, with ``autograd_nb`` on Tensors it is checked. Functions of eigenvectors
and singular vectors fix their signs first (LAPACK's choice is arbitrary), and symmetric or
positive-definite inputs are made from unconstrained ones, so finite differences may move
every element.
"""

import numpy as np
import pytest
from scipy.linalg import lapack

import autograd_nb as anb
from autograd_nb.ops import (
    linalg_cholesky,
    linalg_det,
    linalg_eigh,
    linalg_lu,
    linalg_norms,
    linalg_pinv,
    linalg_products,
    linalg_qr,
    linalg_svd,
)
from autograd_nb.ops.registry import FUNCTIONS, REGISTRY
from tests.checks import check_gradients

RNG = np.random.default_rng(21)

#: The modules of ``anb.linalg``'s functions and ops.
MODULES = {module.__name__ for module in (linalg_lu, linalg_det, linalg_cholesky, linalg_eigh,
                                          linalg_svd, linalg_qr, linalg_pinv, linalg_products,
                                          linalg_norms)}


def normal(*shape):
    return RNG.standard_normal(shape)


def well_conditioned(*shape):
    return normal(*shape) + 3.0 * np.eye(shape[-1])


def spd(xp, x):
    """A symmetric positive-definite matrix made from any square ``x``."""
    return x @ xp.swapaxes(x, -1, -2) + 3.0 * xp.eye(x.shape[-1])


def rows(xp, *parts):
    """The parts (each with the batch of the first) flattened and joined along the last axis,
    one Tensor to differentiate."""
    batch = parts[0].shape[:-2] if parts[0].ndim >= 2 else ()
    return xp.concatenate([xp.reshape(p, batch + (-1,)) for p in parts], axis=-1)


def signed_eigh(xp, w, v):
    return rows(xp, xp.reshape(w, w.shape[:-1] + (1, -1)), v * xp.sign(v[..., :1, :]))


def signed_svd(xp, u, s, vh):
    signs = xp.sign(u[..., :1, :])
    return rows(xp, u * signs, xp.reshape(s, s.shape[:-1] + (1, -1)),
                vh * xp.swapaxes(signs, -1, -2))


def signed_qr(xp, q, r):
    k = r.shape[-2]
    signs = xp.sign(r[..., np.arange(k), np.arange(k)])  # R's diagonal
    return rows(xp, q * signs[..., None, :], r * signs[..., :, None])


class Case:
    """``function(xp, *inputs)``, checked at ``inputs``; ``covers`` names the public
    functions it exercises. ``second_order=False`` where the function is linear in its
    inputs or piecewise so."""

    def __init__(self, label, covers, function, inputs, second_order=True, rtol=1e-10):
        self.id = label
        self.covers = set(covers.split())
        self.function = function
        self.inputs = inputs
        self.second_order = second_order
        self.rtol = rtol


CASES = [
    Case("solve", "linalg.solve", lambda xp, a, b: xp.linalg.solve(a, b),
         [well_conditioned(2, 3, 3), normal(2, 3, 2)]),
    Case("solve-vector", "linalg.solve", lambda xp, a, b: xp.linalg.solve(a, b),
         [well_conditioned(3, 3), normal(3)]),
    Case("solve-broadcast", "linalg.solve", lambda xp, a, b: xp.linalg.solve(a, b),
         [well_conditioned(1, 3, 3), normal(2, 1, 3, 2)]),
    # One column, and a 1 x 1 matrix: ``b.T`` is then contiguous already, a view that a
    # solve must copy before LAPACK solves in place (tier 0's twin once wrote into the seed).
    Case("solve-column", "linalg.solve", lambda xp, a, b: xp.linalg.solve(a, b),
         [well_conditioned(4, 4), normal(4, 1)]),
    Case("inv", "linalg.inv", lambda xp, a: xp.linalg.inv(a), [well_conditioned(2, 3, 3)]),
    Case("inv-1x1", "linalg.inv", lambda xp, a: xp.linalg.inv(a), [well_conditioned(2, 1, 1)]),
    Case("det", "linalg.det", lambda xp, a: xp.linalg.det(a), [well_conditioned(2, 2, 3, 3)]),
    Case("slogdet", "linalg.slogdet", lambda xp, a: xp.stack(xp.linalg.slogdet(a), axis=-1),
         [normal(2, 3, 3)]),
    Case("cholesky", "linalg.cholesky", lambda xp, x: xp.linalg.cholesky(spd(xp, x)),
         [normal(2, 3, 3)]),
    Case("cholesky-upper", "linalg.cholesky",
         lambda xp, x: xp.linalg.cholesky(spd(xp, x), upper=True), [normal(3, 3)]),
    Case("eigh", "linalg.eigh",
         lambda xp, x: signed_eigh(xp, *xp.linalg.eigh(x + xp.swapaxes(x, -1, -2))),
         [normal(2, 3, 3)]),
    Case("eigh-upper", "linalg.eigh",
         lambda xp, x: signed_eigh(xp, *xp.linalg.eigh(x + xp.swapaxes(x, -1, -2), "U")),
         [normal(3, 3)]),
    Case("eigvalsh", "linalg.eigvalsh", lambda xp, x: xp.linalg.eigvalsh(x + x.T),
         [normal(4, 4)]),
    Case("svd-tall", "linalg.svd",
         lambda xp, x: signed_svd(xp, *xp.linalg.svd(x, full_matrices=False)),
         [normal(2, 4, 3)]),
    Case("svd-wide", "linalg.svd",
         lambda xp, x: signed_svd(xp, *xp.linalg.svd(x, full_matrices=False)), [normal(3, 5)]),
    Case("svd-square-full", "linalg.svd", lambda xp, x: signed_svd(xp, *xp.linalg.svd(x)),
         [normal(3, 3)]),
    Case("svd-values", "linalg.svd linalg.svdvals",
         lambda xp, x: xp.linalg.svd(x, compute_uv=False) + xp.linalg.svdvals(x),
         [normal(2, 3, 4)]),
    Case("qr-tall", "linalg.qr", lambda xp, x: signed_qr(xp, *xp.linalg.qr(x)),
         [normal(2, 4, 3)]),
    Case("qr-wide", "linalg.qr", lambda xp, x: signed_qr(xp, *xp.linalg.qr(x)), [normal(3, 5)]),
    Case("qr-r", "linalg.qr", lambda xp, x: xp.abs(xp.linalg.qr(x, mode="r")), [normal(4, 3)]),
    Case("pinv-tall", "linalg.pinv", lambda xp, x: xp.linalg.pinv(x), [normal(2, 4, 3)]),
    Case("pinv-wide", "linalg.pinv", lambda xp, x: xp.linalg.pinv(x), [normal(3, 5)]),
    Case("lstsq", "linalg.lstsq",
         lambda xp, a, b: (lambda x, r, k, s: xp.concatenate([xp.ravel(x), r, s * k]))(
             *xp.linalg.lstsq(a, b)),
         [normal(5, 3), normal(5, 2)]),
    Case("lstsq-vector", "linalg.lstsq",
         lambda xp, a, b: (lambda x, r, k, s: xp.concatenate([x, r]))(*xp.linalg.lstsq(a, b)),
         [normal(4, 3), normal(4)]),
    Case("matrix_power", "linalg.matrix_power",
         lambda xp, a: xp.linalg.matrix_power(a, 3) + xp.linalg.matrix_power(a, 1),
         [normal(2, 3, 3)]),
    Case("matrix_power-negative", "linalg.matrix_power",
         lambda xp, a: xp.linalg.matrix_power(a, -2) + xp.linalg.matrix_power(a, 0),
         [well_conditioned(3, 3)]),
    Case("multi_dot", "linalg.multi_dot",
         lambda xp, a, b, c, d: xp.linalg.multi_dot([a, b, c, d]),
         [normal(3), normal(3, 5), normal(5, 2), normal(2, 4)]),
    Case("norm-vector", "linalg.norm",
         lambda xp, x: xp.stack([xp.linalg.norm(x), xp.linalg.norm(x[0], ord=1),
                                 xp.linalg.norm(x[1], ord=np.inf), xp.linalg.norm(x[2], -np.inf),
                                 xp.linalg.norm(x[0], ord=3), xp.linalg.norm(x[1], ord=0.5),
                                 xp.linalg.norm(x[2], ord=0)]),
         [normal(3, 4)]),
    Case("norm-axis", "linalg.norm",
         lambda xp, x: rows(xp, xp.linalg.norm(x, axis=1, keepdims=True),
                            xp.linalg.norm(x, ord=2, axis=-1)),
         [normal(2, 3, 4)]),
    Case("norm-matrix", "linalg.norm",
         lambda xp, x: xp.stack([xp.linalg.norm(x, ord=o) for o in
                                 ("fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf)]),
         [normal(3, 4)]),
    Case("norm-matrix-axes", "linalg.norm",
         lambda xp, x: rows(xp, xp.linalg.norm(x, ord="nuc", axis=(2, 0), keepdims=True),
                            xp.linalg.norm(x, ord=-1, axis=(0, 2)),
                            xp.linalg.norm(x, ord=np.inf, axis=(2, 0), keepdims=True)),
         [normal(3, 2, 4)]),
    Case("vector_norm", "linalg.vector_norm",
         lambda xp, x: xp.stack([xp.linalg.vector_norm(x), xp.linalg.vector_norm(x, ord=1),
                                 xp.sum(xp.linalg.vector_norm(x, axis=(0, 2), keepdims=True))]),
         [normal(2, 3, 4)]),
    Case("matrix_norm", "linalg.matrix_norm",
         lambda xp, x: xp.linalg.matrix_norm(x) + xp.linalg.matrix_norm(x, ord=2),
         [normal(2, 3, 4)]),
]


def values(case, xp):
    if xp is np:
        return np.asarray(case.function(np, *case.inputs))
    return case.function(anb, *(anb.tensor(a) for a in case.inputs))


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_values_match_numpy(case):
    got, expected = values(case, anb), values(case, np)
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got.numpy(), expected, rtol=case.rtol, atol=case.rtol)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_gradients_to_second_order(case):
    check_gradients(lambda *tensors: case.function(anb, *tensors), case.inputs,
                    second_order=case.second_order)


def test_every_linalg_function_and_op_has_a_case():
    ours = {name for name, fn in FUNCTIONS.items()
            if fn.__module__ in MODULES and name.startswith("linalg.")}
    covered = set().union(*(case.covers for case in CASES))
    assert ours - {"linalg.matrix_transpose", "linalg.vecdot"} <= covered  # (contractions)
    ops = {name for name, op in REGISTRY.items() if type(op).__module__ in MODULES}
    # (_cpinv: tests/ops/test_linalg_complex.py)
    assert ops == {"_lu", "_lu_solve", "_slogdet", "_slogdet_sign", "_det", "_cholesky",
                   "_eigh", "_svd", "_qr", "_pinv", "_cpinv", "_norm2"}
    for name in ours:
        assert "Examples" in FUNCTIONS[name].__doc__, name


# -- float32 ------------------------------------------------------------------------------------


def test_float32_stays_float32_and_matches_numpy():
    # One function: each float32 kernel is one more compilation on a cold cache.
    a = well_conditioned(2, 4, 4).astype(np.float32)
    b = normal(2, 4, 2).astype(np.float32)
    at, bt = anb.tensor(a, requires_grad=True), anb.tensor(b, requires_grad=True)
    x = anb.linalg.solve(at, bt)
    assert x.dtype == np.float32
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(a, b), rtol=1e-4, atol=1e-5)
    v = normal(2, 4, 2)
    ga, gb = anb.grad(x, (at, bt), grad_outputs=anb.tensor(v.astype(np.float32)))
    expected_b = np.linalg.solve(np.swapaxes(a, -1, -2).astype(np.float64), v)
    expected_a = -expected_b @ np.swapaxes(np.linalg.solve(a.astype(np.float64), b), -1, -2)
    assert ga.dtype == gb.dtype == np.float32
    np.testing.assert_allclose(gb.numpy(), expected_b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ga.numpy(), expected_a, rtol=1e-4, atol=1e-4)


def test_mixed_dtypes_compute_in_float64():
    a = anb.tensor(well_conditioned(3, 3).astype(np.float32), requires_grad=True)
    x = anb.linalg.solve(a, np.ones(3))
    assert x.dtype == np.float64
    (g,) = anb.grad(x.sum(), a)
    assert g.dtype == np.float32


# -- degenerate cases ---------------------------------------------------------------------------


def test_det_gradient_at_a_singular_matrix_is_the_cofactor_matrix():
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])  # rank 2
    x = anb.tensor(a, requires_grad=True)
    (g,) = anb.grad(anb.linalg.det(x), x)
    cofactors = np.array([[np.linalg.det(np.delete(np.delete(a, i, 0), j, 1)) * (-1) ** (i + j)
                           for j in range(3)] for i in range(3)])
    np.testing.assert_allclose(g.numpy(), cofactors, atol=1e-12)


def test_slogdet_of_a_singular_matrix():
    x = anb.tensor(np.ones((2, 2)), requires_grad=True)
    sign, logabsdet = anb.linalg.slogdet(x)
    assert sign.item() == 0 and logabsdet.item() == -np.inf
    assert not sign.requires_grad
    (g,) = anb.grad(logabsdet, x)
    assert np.all(np.isnan(g.numpy()))


def test_eigh_repeated_eigenvalues_give_the_gradient_of_basis_free_functions():
    x = anb.tensor(np.diag([2.0, 2.0, 5.0]), requires_grad=True)
    w, v = anb.linalg.eigh(x)
    (g,) = anb.grad(w.sum(), x)  # the trace
    np.testing.assert_allclose(g.numpy(), np.eye(3), atol=1e-12)
    w, v = anb.linalg.eigh(x)
    projector = v[:, :2] @ anb.swapaxes(v[:, :2], 0, 1)  # onto the eigenspace of 2
    (g,) = anb.grad(anb.sum(projector * anb.tensor(normal(3, 3))), x)
    assert np.all(np.isfinite(g.numpy()))


def test_norm_gradient_is_zero_at_zero_to_second_order():
    x = anb.zeros((2, 3), requires_grad=True)
    for y in (anb.linalg.norm(x), anb.linalg.norm(x, axis=1).sum(),
              anb.linalg.norm(x, ord=3, axis=0).sum(), anb.linalg.norm(x, ord="fro")):
        (g,) = anb.grad(y, x, create_graph=True)
        np.testing.assert_array_equal(g.numpy(), 0.0)
        (h,) = anb.grad(g.sum(), x, allow_unused=True, materialize_grads=True)
        assert np.all(np.isfinite(h.numpy()))


def test_triangle_read():
    a = normal(3, 3) + 6.0 * np.eye(3)  # not symmetric
    np.testing.assert_allclose(anb.linalg.cholesky(anb.tensor(a)).numpy(),
                               np.linalg.cholesky(a), rtol=1e-12)
    np.testing.assert_allclose(anb.linalg.cholesky(anb.tensor(a), upper=True).numpy(),
                               np.linalg.cholesky(a, upper=True), rtol=1e-12)
    np.testing.assert_allclose(anb.linalg.eigvalsh(anb.tensor(a), UPLO="U").numpy(),
                               np.linalg.eigvalsh(a, UPLO="U"), rtol=1e-12)


def test_batched_vjps_through_the_python_walk():
    a = well_conditioned(3, 3)
    b = normal(3)

    def f(x):
        return anb.linalg.solve(x, b) + anb.linalg.slogdet(x)[1]

    jacobian = anb.autograd.functional.jacobian
    batched = jacobian(f, anb.tensor(a), vectorize=True)
    one_by_one = jacobian(f, anb.tensor(a))
    np.testing.assert_allclose(batched.numpy(), one_by_one.numpy(), rtol=1e-12)


# -- errors -------------------------------------------------------------------------------------


def test_errors():
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        anb.linalg.solve(anb.tensor(np.ones((2, 2))), anb.tensor([1.0, 2.0]))
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        anb.linalg.inv(anb.zeros((2, 2)))
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        anb.linalg.det(anb.ones((2, 3)))
    with pytest.raises(np.linalg.LinAlgError, match="two-dimensional"):
        anb.linalg.inv(anb.ones(3))
    with pytest.raises(np.linalg.LinAlgError):
        anb.linalg.cholesky(anb.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="Invalid norm order"):
        anb.linalg.norm(anb.ones(3), ord="fro")
    with pytest.raises(ValueError, match="Improper number of dimensions"):
        anb.linalg.norm(anb.ones((2, 2, 2)), ord=1)


def test_not_unique_factors_have_no_gradient():
    x = anb.tensor(normal(4, 3), requires_grad=True)
    with pytest.raises(ValueError, match="full_matrices=False"):
        anb.linalg.svd(x)
    with pytest.raises(ValueError, match="mode='reduced'"):
        anb.linalg.qr(x, mode="complete")
    with anb.no_grad():  # without a graph, the full factors are NumPy's
        u, s, vh = anb.linalg.svd(x)
        q, r = anb.linalg.qr(x, mode="complete")
    assert u.shape == (4, 4) and vh.shape == (3, 3) and q.shape == (4, 4) and r.shape == (4, 3)
    np.testing.assert_allclose((q @ r).numpy(), x.numpy(), atol=1e-12)
    np.testing.assert_allclose((u[:, :3] * s) @ vh, x.numpy(), atol=1e-12)


def test_cuda_tensors_raise_naming_the_function():
    x = anb.tensor(well_conditioned(2, 2))
    try:
        x = x.cuda()
    except Exception as error:  # no GPU and no simulator
        pytest.skip(f"no CUDA device: {error}")
    with pytest.raises(NotImplementedError, match="linalg.solve"):
        anb.linalg.solve(x, x)


# -- the Gaussian-process example (docs/linalg.rst) ---------------------------------------------


def gp_negative_log_likelihood(np, log_length, log_signal, log_noise, points, targets):
    """The page's function, with the namespace as an argument (NumPy or autograd_nb.numpy)."""
    n = points.shape[0]
    squared = np.sum((points[:, None, :] - points[None, :, :]) ** 2, axis=-1)
    kernel = np.exp(2 * log_signal) * np.exp(-0.5 * squared / np.exp(2 * log_length))
    kernel = kernel + np.exp(2 * log_noise) * np.eye(n)
    lower = np.linalg.cholesky(kernel)
    alpha = np.linalg.solve(lower.T, np.linalg.solve(lower, targets))
    sign, logdet = np.linalg.slogdet(kernel)
    return 0.5 * targets @ alpha + 0.5 * logdet + 0.5 * n * np.log(2 * np.pi)


def test_gaussian_process_likelihood_gradient():
    import autograd_nb.numpy as anp

    points = normal(6, 2)
    targets = np.sin(points[:, 0]) + 0.1 * normal(6)
    params = [np.array(0.3), np.array(-0.2), np.array(-1.5)]

    def nll(*theta):
        return gp_negative_log_likelihood(anp, *theta, points, targets)

    expected = gp_negative_log_likelihood(np, *params, points, targets)
    np.testing.assert_allclose(nll(*(anb.tensor(p) for p in params)).item(), expected,
                               rtol=1e-12)
    check_gradients(nll, params)


# -- eigh's triangles ---------------------------------------------------------------------------

#: Inputs are not symmetric: each triangle is another matrix, so reading the wrong one fails.
EIGH_SHAPES = [(1, 1), (2, 2), (6, 6), (17, 17), (3, 6, 6), (2, 2, 5, 5)]


def lapack_eigh(a, uplo):
    """``?syevd`` as NumPy's ``eigh`` calls it (each matrix column-major, told the triangle),
    from SciPy's LAPACK: the library numba's ``eigh`` calls."""
    syevd = lapack.dsyevd if a.dtype == np.float64 else lapack.ssyevd
    pairs = [syevd(m, compute_v=1, lower=int(uplo == "L"))[:2]
             for m in a.reshape(-1, *a.shape[-2:])]
    w = np.stack([w for w, _ in pairs]).reshape(a.shape[:-1])
    v = np.stack([v for _, v in pairs]).reshape(a.shape)
    return w, v


@pytest.mark.parametrize("shape", EIGH_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=lambda t: t.__name__)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_triangles_are_numpys_signs_included(uplo, dtype, shape):
    # Inputs of their own seed: the float32 tolerances below hold for these.
    a = np.random.default_rng(40).standard_normal(shape).astype(dtype)
    w, v = anb.linalg.eigh(anb.tensor(a), uplo)
    values = anb.linalg.eigvalsh(anb.tensor(a), uplo)
    assert w.dtype == v.dtype == values.dtype == dtype
    expected_w, expected_v = lapack_eigh(a, uplo)
    np.testing.assert_array_equal(w.numpy(), expected_w)
    np.testing.assert_array_equal(v.numpy(), expected_v)
    np.testing.assert_array_equal(values.numpy(), expected_w)
    numpy_w, numpy_v = np.linalg.eigh(a, uplo)
    if dtype == np.float64:
        # The eigenvectors directly: their signs are NumPy's too.
        np.testing.assert_allclose(w.numpy(), numpy_w, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(v.numpy(), numpy_v, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(values.numpy(), numpy_w, rtol=1e-12, atol=1e-12)
    else:
        # NumPy's float32 LAPACK may be another OpenBLAS build than SciPy's: close values,
        # and on some columns the other sign.
        np.testing.assert_allclose(w.numpy(), numpy_w, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.abs(v.numpy()), np.abs(numpy_v), atol=1e-4)
        np.testing.assert_allclose(values.numpy(), numpy_w, rtol=1e-5, atol=1e-5)


def test_eigh_upper_gradient_of_a_matrix_whose_triangles_differ():
    # The lower triangle is a constant that 'U' never reads; the gradient stays symmetric.
    lower = np.tril(normal(2, 4, 4), -1)

    def f(x):
        a = x + anb.swapaxes(x, -1, -2) + anb.tensor(lower)
        return signed_eigh(anb, *anb.linalg.eigh(a, "U"))

    check_gradients(f, [normal(2, 4, 4)])
