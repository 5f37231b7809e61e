"""``anb.linalg`` on complex matrices (autograd_nb/ops/linalg_complex.py, docs/complex.rst):
values against NumPy, gradients in torch's convention against central differences of the
real and imaginary parts (tests/complex_checks.py), to second order; eig's complex result for
real matrices; the phase checks of eigh, eig and svd; promotion and bad input."""

import numpy as np
import pytest

import autograd_nb as anb
from tests.complex_checks import check_complex_gradients


def _matrix(shape, seed=0, shift=0.0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    if shift:
        a = a + shift * np.eye(shape[-1])
    return a


def _hermitian_pd(x):
    """``x x^H + I``, recorded: a Hermitian positive-definite function of any ``x``."""
    return x @ anb.conj(anb.swapaxes(x, -1, -2)) + np.eye(x.shape[-1])


def _hermitian(x):
    return x + anb.conj(anb.swapaxes(x, -1, -2))


def _h(a):
    return np.conj(np.swapaxes(a, -1, -2))


# -- values against NumPy -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype, rtol", [(np.complex128, 1e-12), (np.complex64, 1e-4)])
def test_values_match_numpy(dtype, rtol):
    a = _matrix((2, 3, 3), shift=3.0).astype(dtype)
    b = _matrix((2, 3, 2), seed=1).astype(dtype)
    spd = a @ _h(a) + np.eye(3, dtype=dtype)
    t = anb.tensor(a)
    close = {"rtol": rtol, "atol": rtol}
    results = {
        "solve": (anb.linalg.solve(t, anb.tensor(b)), np.linalg.solve(a, b)),
        "inv": (anb.linalg.inv(t), np.linalg.inv(a)),
        "det": (anb.linalg.det(t), np.linalg.det(a)),
        "sign": (anb.linalg.slogdet(t).sign, np.linalg.slogdet(a)[0]),
        "logabsdet": (anb.linalg.slogdet(t).logabsdet, np.linalg.slogdet(a)[1]),
        "cholesky": (anb.linalg.cholesky(anb.tensor(spd)), np.linalg.cholesky(spd)),
        "cholesky upper": (anb.linalg.cholesky(anb.tensor(spd), upper=True),
                           np.linalg.cholesky(spd, upper=True)),
        "eigvalsh": (anb.linalg.eigvalsh(anb.tensor(spd)), np.linalg.eigvalsh(spd)),
        "eigh U": (anb.linalg.eigh(anb.tensor(spd), UPLO="U").eigenvalues,
                   np.linalg.eigh(spd, UPLO="U").eigenvalues),
        "svdvals": (anb.linalg.svdvals(t), np.linalg.svd(a, compute_uv=False)),
        "qr R": (anb.linalg.qr(t, mode="r"), np.linalg.qr(a, mode="r")),
        "qr Q": (anb.linalg.qr(t).Q, np.linalg.qr(a).Q),
        "norm": (anb.linalg.norm(t), np.linalg.norm(a)),
        "norm 2": (anb.linalg.norm(t[0], 2), np.linalg.norm(a[0], 2)),
        "norm nuc": (anb.linalg.norm(t[0], "nuc"), np.linalg.norm(a[0], "nuc")),
        "norm 1": (anb.linalg.norm(t[0], 1), np.linalg.norm(a[0], 1)),
        "norm inf": (anb.linalg.norm(t[0], np.inf), np.linalg.norm(a[0], np.inf)),
        "vector_norm 3": (anb.linalg.vector_norm(t, ord=3, axis=-1),
                          np.linalg.vector_norm(a, ord=3, axis=-1)),
        "matrix_norm": (anb.linalg.matrix_norm(t), np.linalg.matrix_norm(a)),
        "eigvals": (np.sort_complex(anb.linalg.eigvals(t).numpy()),
                    np.sort_complex(np.linalg.eigvals(a))),
    }
    for name, (ours, numpy_value) in results.items():
        ours = np.asarray(ours)
        numpy_value = np.asarray(numpy_value)
        assert ours.shape == numpy_value.shape, name
        assert ours.dtype == numpy_value.dtype, (name, ours.dtype, numpy_value.dtype)
        np.testing.assert_allclose(ours, numpy_value, err_msg=name, **close)


def test_decompositions_reconstruct():
    a = _matrix((4, 3))
    u, s, vh = anb.linalg.svd(anb.tensor(a), full_matrices=False)
    np.testing.assert_allclose((u.numpy() * s.numpy()) @ vh.numpy(), a, atol=1e-12)
    assert s.dtype == np.float64
    u, s, vh = anb.linalg.svd(anb.tensor(a))  # full, no grad
    assert u.shape == (4, 4) and vh.shape == (3, 3)
    w, v = anb.linalg.eigh(anb.tensor(a[:3] + _h(a[:3])))
    assert w.dtype == np.float64 and v.dtype == np.complex128
    np.testing.assert_allclose((v.numpy() * w.numpy()) @ _h(v.numpy()), a[:3] + _h(a[:3]),
                               atol=1e-12)
    q, r = anb.linalg.qr(anb.tensor(a), mode="complete")
    np.testing.assert_allclose(q.numpy() @ r.numpy(), a, atol=1e-12)


def test_eig_is_complex_for_real_matrices():
    a = np.array([[0.0, -2.0], [1.0, 0.0]])  # eigenvalues +-i sqrt(2)
    w, v = anb.linalg.eig(anb.tensor(a))
    assert w.dtype == np.complex128 and v.dtype == np.complex128
    np.testing.assert_allclose(np.sort_complex(w.numpy()), [-1j * 2 ** 0.5, 1j * 2 ** 0.5])
    np.testing.assert_allclose(a @ v.numpy(), v.numpy() * w.numpy(), atol=1e-12)
    # real eigenvalues are complex too (NumPy's eig would return float64 here)
    w32 = anb.linalg.eigvals(anb.tensor(np.diag([1.0, 2.0]).astype(np.float32)))
    assert w32.dtype == np.complex64
    np.testing.assert_allclose(w32.numpy(), [1.0, 2.0])


# -- gradients ----------------------------------------------------------------------------------

SQUARE = _matrix((3, 3), shift=3.0)
RECTANGLES = [(3, 3), (4, 2), (2, 4)]


def test_solve_gradients():
    b = _matrix((3, 2), seed=1)
    check_complex_gradients(anb.linalg.solve, [SQUARE, b])
    check_complex_gradients(anb.linalg.solve, [SQUARE, b[:, 0]])  # one vector
    check_complex_gradients(anb.linalg.solve, [SQUARE, b.real])  # a real b keeps re(grad)
    check_complex_gradients(anb.linalg.solve, [_matrix((2, 3, 3), shift=3.0), b])  # batch


def test_inv_gradients():
    check_complex_gradients(anb.linalg.inv, [SQUARE])
    check_complex_gradients(anb.linalg.inv, [_matrix((2, 3, 3), seed=2, shift=3.0)])


def test_det_and_slogdet_gradients():
    check_complex_gradients(anb.linalg.det, [SQUARE])
    check_complex_gradients(anb.linalg.det, [_matrix((2, 3, 3), seed=3)])
    check_complex_gradients(lambda a: anb.linalg.slogdet(a).logabsdet, [SQUARE])
    check_complex_gradients(lambda a: anb.linalg.slogdet(a).sign, [SQUARE])


def test_det_gradient_is_torchs_closed_form():
    # g conj(det) inv(a)^H for the grad_output g
    g = 0.5 - 2j
    t = anb.tensor(SQUARE, requires_grad=True)
    (grad,) = anb.grad(anb.linalg.det(t), t, grad_outputs=anb.tensor(g))
    expected = g * np.conj(np.linalg.det(SQUARE)) * _h(np.linalg.inv(SQUARE))
    np.testing.assert_allclose(grad.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_gradients(upper):
    x = _matrix((3, 3), seed=4)
    check_complex_gradients(
        lambda x: anb.linalg.cholesky(_hermitian_pd(x), upper=upper), [x])


def test_eigh_gradients():
    x = _matrix((3, 3), seed=5)
    weights = np.random.default_rng(6).standard_normal((3, 3))
    check_complex_gradients(lambda x: anb.linalg.eigvalsh(_hermitian(x)), [x])
    # gauge-invariant functions of the eigenvectors: |V|^2, V f(w) V^H
    check_complex_gradients(
        lambda x: anb.abs(anb.linalg.eigh(_hermitian(x)).eigenvectors) ** 2 * weights, [x])

    def spectral(x):
        w, v = anb.linalg.eigh(_hermitian(x), UPLO="U")
        return (v * anb.exp(w * 0.3)) @ anb.conj(anb.swapaxes(v, -1, -2))

    check_complex_gradients(spectral, [x])


@pytest.mark.parametrize("shape", RECTANGLES)
def test_svd_gradients(shape):
    x = _matrix(shape, seed=7)
    check_complex_gradients(anb.linalg.svdvals, [x])
    check_complex_gradients(lambda x: anb.linalg.norm(x, "nuc"), [x])

    def gauge_free(x):
        u, s, vh = anb.linalg.svd(x, full_matrices=False)
        return (u * anb.sqrt(s)) @ vh  # invariant under u_j e^{i phi}, e^{-i phi} vh_j

    check_complex_gradients(gauge_free, [x])
    k = min(shape)
    weights = np.random.default_rng(8).standard_normal((shape[0], k))
    check_complex_gradients(
        lambda x: anb.abs(anb.linalg.svd(x, full_matrices=False).U) ** 2 * weights, [x])


@pytest.mark.parametrize("shape", RECTANGLES)
def test_qr_gradients(shape):
    x = _matrix(shape, seed=9)
    check_complex_gradients(lambda x: anb.linalg.qr(x).Q, [x])
    check_complex_gradients(lambda x: anb.linalg.qr(x).R, [x])


@pytest.mark.parametrize("ord, axis", [(None, None), ("fro", None), (2, None), (1, None),
                                       (np.inf, None), (3, -1), (2, -1), (1, 0)])
def test_norm_gradients(ord, axis):
    x = _matrix((3, 3), seed=10)
    if axis is not None or ord is None:
        check_complex_gradients(lambda x: anb.linalg.norm(x, ord, axis), [x])
    else:
        check_complex_gradients(lambda x: anb.linalg.norm(x, ord), [x])
    check_complex_gradients(lambda x: anb.linalg.vector_norm(x, ord=4), [x[0]])


def test_eig_gradients_of_real_matrices():
    a = np.array([[0.3, -2.0, 0.5], [1.0, 0.1, -0.4], [0.2, 0.7, 1.5]])
    assert np.iscomplexobj(np.linalg.eigvals(a))  # a complex pair
    check_complex_gradients(anb.linalg.eigvals, [a])
    weights = np.random.default_rng(11).standard_normal((3, 3))
    check_complex_gradients(lambda a: anb.abs(anb.linalg.eig(a).eigenvectors) ** 2 * weights,
                            [a])
    grads = check_complex_gradients(anb.linalg.eigvals, [a], second_order=False)
    assert grads[0].dtype == np.float64  # a real input keeps the real part


def test_eig_gradients_of_complex_matrices():
    x = _matrix((3, 3), seed=12)
    check_complex_gradients(anb.linalg.eigvals, [x])

    def similar(x):  # V diag(w^2) V^-1 = x @ x: free of the eigenvectors' phases and norms
        w, v = anb.linalg.eig(x)
        return (v * w * w) @ anb.linalg.inv(v)

    check_complex_gradients(similar, [x])
    weights = np.random.default_rng(13).standard_normal((3, 3))
    check_complex_gradients(lambda x: anb.abs(anb.linalg.eig(x).eigenvectors) ** 2 * weights,
                            [x])


@pytest.mark.parametrize("decomposition", ["eigh", "eig", "svd"])
def test_a_phase_dependent_loss_raises_as_torchs(decomposition):
    x = anb.tensor(_matrix((3, 3), seed=14), requires_grad=True)
    if decomposition == "eigh":
        vectors = anb.linalg.eigh(_hermitian(x)).eigenvectors
    elif decomposition == "eig":
        vectors = anb.linalg.eig(x).eigenvectors
    else:
        vectors = anb.linalg.svd(x).U
    loss = anb.real(vectors).sum()
    with pytest.raises(RuntimeError, match=r"up to multiplication by e\^\{i phi\}"):
        loss.backward()


# -- promotion and bad input ------------------------------------------------------------------


def test_dtype_mixes_promote_as_numpy():
    a64 = _matrix((3, 3), shift=3.0).astype(np.complex64)
    b = np.ones((3, 1))
    cases = [(a64, b.astype(np.float32)), (a64, b), (a64.real.astype(np.float32), b + 0j),
             (a64.astype(np.complex128), b.astype(np.float32))]
    for a, b in cases:
        ours = anb.linalg.solve(anb.tensor(a), anb.tensor(b))
        assert ours.dtype == np.linalg.solve(a, b).dtype, (a.dtype, b.dtype)
    x = anb.tensor(np.eye(2), requires_grad=True)
    y = anb.linalg.solve(x, anb.tensor(np.array([1j, 2.0])))
    assert y.dtype == np.complex128
    anb.abs(y).sum().backward()
    assert x.grad.dtype == np.float64  # the real matrix keeps the real part


def test_bad_input():
    rect = anb.tensor(_matrix((2, 3)))
    for function in (anb.linalg.inv, anb.linalg.det, anb.linalg.cholesky, anb.linalg.eigh,
                     anb.linalg.eig, anb.linalg.eigvals, lambda a: anb.linalg.slogdet(a)):
        with pytest.raises(np.linalg.LinAlgError, match="square"):
            function(rect)
    with pytest.raises(np.linalg.LinAlgError):
        anb.linalg.solve(anb.tensor(np.zeros((2, 2)) + 0j), anb.tensor(np.ones(2)))
    with pytest.raises(np.linalg.LinAlgError):
        anb.linalg.cholesky(anb.tensor(-np.eye(2) + 0j))
    with pytest.raises(ValueError, match="full_matrices=False"):
        anb.linalg.svd(anb.tensor(_matrix((2, 3)), requires_grad=True))
    with pytest.raises(np.linalg.LinAlgError, match="Incompatible dimensions"):
        anb.linalg.lstsq(rect, anb.tensor(np.ones(3) + 0j))


# -- pinv and lstsq ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(3, 2), (2, 3), (2, 3, 3)])
def test_pinv_values_and_gradients(shape):
    a = _matrix(shape, seed=3)
    got = anb.linalg.pinv(anb.tensor(a))
    assert got.dtype == np.complex128
    np.testing.assert_allclose(got.numpy(), np.linalg.pinv(a), rtol=1e-12, atol=1e-12)
    check_complex_gradients(anb.linalg.pinv, [a])


def test_pinv_single_precision_and_a_real_matrix_keeps_a_real_gradient():
    a = _matrix((3, 2), seed=4).astype(np.complex64)
    got = anb.linalg.pinv(anb.tensor(a))
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got.numpy(), np.linalg.pinv(a), rtol=1e-4, atol=1e-5)
    x = anb.tensor(_matrix((3, 2), seed=5).real, requires_grad=True)
    (anb.abs(anb.linalg.pinv(x * (1 + 2j))) ** 2).sum().backward()
    assert x.grad.dtype == np.float64
    check_complex_gradients(lambda x: anb.linalg.pinv(x * (1 + 2j)), [x.numpy()])


def _lstsq_operands(kinds, b_shape, seed=6):
    rng = np.random.default_rng(seed)
    a = _matrix((4, 2), seed=seed) if kinds[0] == "c" else rng.standard_normal((4, 2))
    b = _matrix(b_shape, seed=seed + 1) if kinds[1] == "c" else rng.standard_normal(b_shape)
    return a, b


@pytest.mark.parametrize("b_shape", [(4,), (4, 2)])
@pytest.mark.parametrize("kinds", ["cc", "cr", "rc"])
def test_lstsq_values_and_gradients(b_shape, kinds):
    a, b = _lstsq_operands(kinds, b_shape)
    x, residuals, rank, s = anb.linalg.lstsq(anb.tensor(a), anb.tensor(b))
    expected = np.linalg.lstsq(a, b, rcond=None)
    np.testing.assert_allclose(x.numpy(), expected[0], rtol=1e-12, atol=1e-12)
    assert residuals.dtype == expected[1].dtype == np.float64
    assert residuals.shape == expected[1].shape
    np.testing.assert_allclose(residuals.numpy(), expected[1], rtol=1e-12)
    assert rank == expected[2] == 2
    np.testing.assert_allclose(s.numpy(), expected[3], rtol=1e-12)
    check_complex_gradients(lambda a, b: anb.linalg.lstsq(a, b)[0], [a, b])
    check_complex_gradients(lambda a, b: anb.linalg.lstsq(a, b)[1], [a, b])


def test_lstsq_of_a_rank_deficient_matrix():
    a = _matrix((4, 1), seed=8) @ _matrix((1, 3), seed=9)  # rank 1
    b = _matrix((4,), seed=10)
    x, residuals, rank, s = anb.linalg.lstsq(anb.tensor(a), anb.tensor(b))
    expected = np.linalg.lstsq(a, b, rcond=None)
    assert rank == expected[2] == 1
    assert residuals.shape == expected[1].shape == (0,) and residuals.dtype == np.float64
    np.testing.assert_allclose(x.numpy(), expected[0], rtol=1e-10, atol=1e-12)


class _ComplexOnCuda:
    """Stands for a complex CUDA tensor (the check comes before anything reads the data)."""

    device = "cuda"
    dtype = np.dtype(np.complex128)
    shape = (2, 2)
    ndim = 2


@pytest.mark.parametrize("name", ["solve", "inv", "det", "slogdet", "cholesky", "eigh", "svd",
                                  "qr", "norm", "eig", "eigvals", "pinv", "lstsq"])
def test_complex_cuda_operands_raise_not_implemented_naming_the_function(name):
    x = _ComplexOnCuda()
    args = (x, x) if name in ("solve", "lstsq") else (x,)
    with pytest.raises(NotImplementedError, match=rf"linalg\.{name}\b.*CUDA"):
        getattr(anb.linalg, name)(*args)


def test_numpys_own_eig_records_on_tensors():
    x = anb.tensor(np.array([[0.0, -2.0], [1.0, 0.0]]), requires_grad=True)
    w, v = np.linalg.eig(x)  # __array_function__
    assert isinstance(w, anb.Tensor) and w.requires_grad and w.dtype == np.complex128
    (grad,) = anb.grad(anb.abs(w).sum(), x)
    assert grad.dtype == np.float64


def test_matrix_power_and_multi_dot():
    a = _matrix((3, 3), seed=15, shift=3.0)
    b = _matrix((3, 2), seed=16)
    np.testing.assert_allclose(anb.linalg.matrix_power(anb.tensor(a), -2).numpy(),
                               np.linalg.matrix_power(a, -2), rtol=1e-12)
    np.testing.assert_allclose(
        anb.linalg.multi_dot([anb.tensor(a), anb.tensor(a), anb.tensor(b)]).numpy(),
        np.linalg.multi_dot([a, a, b]), rtol=1e-12)
    check_complex_gradients(lambda a: anb.linalg.matrix_power(a, -2), [a])
    check_complex_gradients(lambda a, b: anb.linalg.multi_dot([a, a, b]), [a, b])
