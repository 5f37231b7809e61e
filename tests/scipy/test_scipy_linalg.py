"""autograd_nb.scipy.linalg against SciPy: solve_sylvester and sqrtm, single matrices and
batches (broadcast as SciPy's), float32 and float64; gradients in every argument against
float64 central differences (first and second order); SciPy's errors and deprecations."""

import warnings

import numpy as np
import pytest
import scipy.linalg as sl

import autograd_nb as anb
from autograd_nb.ops.registry import REGISTRY, Saved
from autograd_nb.scipy import linalg
from tests.checks import check_gradients
from tests.complex_checks import check_complex_gradients


def _shifted(rng, shape, shift=3.0):
    """Random square matrices with eigenvalues pushed right (a well-posed Sylvester
    equation: no eigenvalue of ``A`` near one of ``-B``)."""
    n = shape[-1]
    return rng.standard_normal(shape) + shift * np.eye(n)


def _with_real_root(rng, shape):
    """Non-symmetric matrices whose eigenvalues lie well inside the right half-plane."""
    m = rng.standard_normal(shape)
    n = shape[-1]
    return m @ np.swapaxes(m, -1, -2) / n + np.eye(n) + 0.2 * rng.standard_normal(shape)


# a, b, q shapes: square, rectangular, 1x1, a batch, a broadcast batch
SYLVESTER_SHAPES = [
    ((3, 3), (3, 3), (3, 3)), ((4, 4), (2, 2), (4, 2)), ((1, 1), (3, 3), (1, 3)),
    ((2, 3, 3), (2, 2, 2), (2, 3, 2)), ((2, 3, 3), (2, 2), (1, 3, 2)),
]


@pytest.mark.parametrize("shapes", SYLVESTER_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_solve_sylvester_matches_scipy(shapes, dtype):
    rng = np.random.default_rng(len(shapes[0]) + shapes[1][-1])
    a, b = _shifted(rng, shapes[0]), _shifted(rng, shapes[1])
    q = rng.standard_normal(shapes[2])
    a, b, q = (x.astype(dtype) for x in (a, b, q))
    reference = sl.solve_sylvester(a, b, q)
    result = linalg.solve_sylvester(anb.tensor(a), anb.tensor(b), anb.tensor(q))
    assert result.dtype == dtype and result.shape == reference.shape
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(result.numpy(), reference, rtol=rtol, atol=rtol)
    x = result.numpy().astype(np.float64)
    residual = a @ x + x @ b - q
    assert np.abs(residual).max() < (1e-4 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (4, 4), (3, 3, 3)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sqrtm_matches_scipy(shape, dtype):
    rng = np.random.default_rng(shape[-1])
    a = _with_real_root(rng, shape).astype(dtype)
    reference = sl.sqrtm(a)
    result = linalg.sqrtm(anb.tensor(a))
    assert result.dtype == dtype == reference.dtype
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(result.numpy(), reference, rtol=rtol, atol=rtol)
    root = result.numpy().astype(np.float64)
    np.testing.assert_allclose(root @ root, a, rtol=10 * rtol, atol=10 * rtol)


def test_sqrtm_of_triangular_and_integer_matrices():
    upper = np.array([[4.0, 1.0, 2.0], [0.0, 9.0, -1.0], [0.0, 0.0, 1.0]])
    np.testing.assert_allclose(linalg.sqrtm(anb.tensor(upper)).numpy(), sl.sqrtm(upper),
                               rtol=1e-13)
    integers = anb.tensor([[5, 4], [4, 5]])
    result = linalg.sqrtm(integers)
    assert result.dtype == np.float64
    np.testing.assert_allclose(result.numpy(), sl.sqrtm(np.array([[5, 4], [4, 5]])),
                               rtol=1e-13)


def test_without_tensors_the_functions_are_scipys():
    rng = np.random.default_rng(0)
    a, b, q = _shifted(rng, (3, 3)), _shifted(rng, (2, 2)), rng.standard_normal((3, 2))
    result = linalg.solve_sylvester(a, b, q)
    assert type(result) is np.ndarray
    np.testing.assert_array_equal(result, sl.solve_sylvester(a, b, q))
    m = np.array([[1.0, 2.0], [0.0, -1.0]])  # a complex root, as SciPy gives
    np.testing.assert_array_equal(linalg.sqrtm(m), sl.sqrtm(m))


# -- gradients --------------------------------------------------------------------------------


@pytest.mark.parametrize("shapes", SYLVESTER_SHAPES, ids=str)
def test_solve_sylvester_gradients(shapes):
    rng = np.random.default_rng(4)
    arrays = [_shifted(rng, shapes[0]), _shifted(rng, shapes[1]),
              rng.standard_normal(shapes[2])]
    check_gradients(linalg.solve_sylvester, arrays)


def test_solve_sylvester_adjoint_formulas():
    # Q_bar = Y, A_bar = -Y X^T, B_bar = -X^T Y, with A^T Y + Y B^T = G
    rng = np.random.default_rng(6)
    a, b, q = _shifted(rng, (3, 3)), _shifted(rng, (2, 2)), rng.standard_normal((3, 2))
    g = rng.standard_normal((3, 2))
    tensors = [anb.tensor(v, requires_grad=True) for v in (a, b, q)]
    grads = anb.grad(linalg.solve_sylvester(*tensors), tensors, grad_outputs=anb.tensor(g))
    x = sl.solve_sylvester(a, b, q)
    y = sl.solve_sylvester(a.T, b.T, g)
    for ours, expected in zip(grads, (-y @ x.T, -x.T @ y, y)):
        np.testing.assert_allclose(ours.numpy(), expected, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (2, 3, 3)], ids=str)
def test_sqrtm_gradients(shape):
    rng = np.random.default_rng(8)
    check_gradients(linalg.sqrtm, [_with_real_root(rng, shape)])


def test_float32_gradients_keep_the_dtype():
    rng = np.random.default_rng(9)
    a = anb.tensor(_with_real_root(rng, (3, 3)).astype(np.float32), requires_grad=True)
    q = anb.tensor(rng.standard_normal((3, 3)).astype(np.float32), requires_grad=True)
    (g_a,) = anb.grad(linalg.sqrtm(a).sum(), a)
    g_a2, g_q = anb.grad(linalg.solve_sylvester(a, a, q).sum(), [a, q])
    assert {g.dtype for g in (g_a, g_a2, g_q)} == {np.dtype(np.float32)}
    s = sl.sqrtm(a.numpy().astype(np.float64))
    np.testing.assert_allclose(g_a.numpy(), sl.solve_sylvester(s.T, s.T, np.ones((3, 3))),
                               rtol=1e-4, atol=1e-5)


# -- errors and deprecations ------------------------------------------------------------------


def test_solve_sylvester_errors():
    eye = anb.eye(2)
    with pytest.raises(ValueError, match="a must be square"):
        linalg.solve_sylvester(anb.ones((2, 3)), eye, anb.ones((2, 2)))
    with pytest.raises(ValueError, match="b must be square"):
        linalg.solve_sylvester(eye, anb.ones((3, 2)), anb.ones((2, 3)))
    with pytest.raises(ValueError, match="q must have shape"):
        linalg.solve_sylvester(eye, anb.eye(3), anb.ones((3, 2)))
    with pytest.raises(ValueError, match="at least two-dimensional"):
        linalg.solve_sylvester(eye, eye, anb.ones(2))
    with pytest.raises(TypeError, match="q has dtype <U1"):
        linalg.solve_sylvester(eye, eye, np.full((2, 2), "a"))
    with pytest.raises(ValueError):  # SciPy's own errors for the same mistakes
        sl.solve_sylvester(np.ones((2, 3)), np.eye(2), np.ones((2, 2)))
    with pytest.raises(ValueError):
        sl.solve_sylvester(np.eye(2), np.eye(3), np.ones((3, 2)))


def test_sqrtm_errors_are_scipys():
    for value in (np.ones(3), np.ones((2, 3))):
        with pytest.raises(np.linalg.LinAlgError) as scipys:
            sl.sqrtm(value)
        with pytest.raises(np.linalg.LinAlgError) as ours:
            linalg.sqrtm(anb.tensor(value))
        assert str(ours.value) == str(scipys.value)


# -- complex ------------------------------------------------------------------------------------

COMPLEX_RNG = np.random.default_rng(11)


def _complex(shape):
    return COMPLEX_RNG.standard_normal(shape) + 1j * COMPLEX_RNG.standard_normal(shape)


def test_a_real_matrix_without_a_real_root_has_scipys_complex_root_and_a_real_gradient():
    a = np.array([[1.0, 2.0], [0.0, -1.0]])
    root = linalg.sqrtm(anb.tensor(a))
    assert root.dtype == np.complex128
    np.testing.assert_allclose(root.numpy(), sl.sqrtm(a), rtol=1e-13, atol=1e-14)
    a = np.array([[-4.0, 1.0], [0.5, 2.0]])
    (grad,) = check_complex_gradients(lambda x: linalg.sqrtm(x), [a])
    assert grad.dtype == np.float64


@pytest.mark.parametrize("shape", [(2, 2), (3, 3), (2, 3, 3)])
def test_sqrtm_of_complex_matrices(shape):
    a = _complex(shape) + 3 * np.eye(shape[-1])
    root = linalg.sqrtm(anb.tensor(a))
    assert root.dtype == np.complex128
    np.testing.assert_allclose(root.numpy(), sl.sqrtm(a), rtol=1e-12, atol=1e-13)
    check_complex_gradients(lambda x: linalg.sqrtm(x), [a])


def test_solve_sylvester_of_complex_and_mixed_matrices():
    a = _complex((3, 3)) + 4 * np.eye(3)
    b = COMPLEX_RNG.standard_normal((2, 2)) + 4 * np.eye(2)  # real: promoted
    q = _complex((3, 2))
    x = linalg.solve_sylvester(anb.tensor(a), anb.tensor(b), anb.tensor(q))
    assert x.dtype == np.complex128
    # against SciPy's with b made complex first, as ours makes it: SciPy's own with the real
    # b does not solve the equation where b has complex eigenvalues (this one has)
    np.testing.assert_allclose(x.numpy(), sl.solve_sylvester(a, b.astype(complex), q),
                               rtol=1e-12)
    np.testing.assert_allclose(a @ x.numpy() + x.numpy() @ b, q, atol=1e-13)
    check_complex_gradients(lambda *t: linalg.solve_sylvester(*t), [a, b, q])
    single = linalg.solve_sylvester(*(anb.tensor(v.astype(np.complex64)) for v in (a, b, q)))
    assert single.dtype == np.complex64


def test_sqrtm_deprecated_arguments_warn_as_scipys():
    a = np.array([[4.0, 1.0], [1.0, 3.0]])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        root, errest = linalg.sqrtm(anb.tensor(a), disp=False)
        assert linalg.sqrtm(anb.tensor(a), blocksize=8).shape == (2, 2)
    assert [w.category for w in caught] == [DeprecationWarning] * 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        reference, reference_errest = sl.sqrtm(a, disp=False)
    np.testing.assert_allclose(root.numpy(), reference, rtol=1e-13)
    assert abs(errest - reference_errest) < 1e-14


# -- the ops' host twins ----------------------------------------------------------------------


def test_the_twins_give_the_forwards_and_vjps_bits():
    rng = np.random.default_rng(12)
    a, b, q = _shifted(rng, (3, 3)), _shifted(rng, (2, 2)), rng.standard_normal((3, 2))
    for name, values in (("_solve_sylvester", [a, b, q]), ("_sqrtm", [_with_real_root(
            rng, (3, 3))])):
        op = REGISTRY[name]
        arrays, attrs = op.prepare(values, {})
        output = op.forward(arrays, attrs)
        assert output.tobytes() == op.forward_numpy(arrays, attrs).tobytes()
        g = rng.standard_normal(output.shape)
        for k in range(len(arrays)):
            compiled, twin = np.ones(arrays[k].shape), np.ones(arrays[k].shape)
            op.vjp(k, g, Saved(arrays, output), attrs, compiled)
            op.vjp_numpy(k, g, Saved(arrays, output), attrs, twin)
            assert compiled.tobytes() == twin.tobytes()


# -- anb.linalg's functions under SciPy's signatures ------------------------------------------


def _spd(rng, shape):
    m = rng.standard_normal(shape)
    return m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_numpy_linalg_names_match_scipy(shape, dtype):
    rng = np.random.default_rng(shape[-1])
    a = _spd(rng, shape).astype(dtype)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    cases = [("det", {}), ("inv", {}), ("inv", {"assume_a": "general"}), ("cholesky", {}),
             ("cholesky", {"lower": True}), ("svdvals", {})]
    for name, kwargs in cases:
        reference = getattr(sl, name)(a, **kwargs)
        result = getattr(linalg, name)(anb.tensor(a), **kwargs)
        assert result.dtype == np.asarray(reference).dtype, name
        np.testing.assert_allclose(result.numpy(), reference, rtol=rtol, atol=rtol,
                                   err_msg=name)
        plain = getattr(linalg, name)(a, **kwargs)
        assert not isinstance(plain, anb.Tensor)
        np.testing.assert_array_equal(plain, reference)


def test_the_numpy_linalg_names_gradients():
    rng = np.random.default_rng(13)
    a = _spd(rng, (3, 3)) + 0.3 * rng.standard_normal((3, 3))
    check_gradients(linalg.det, [a])
    check_gradients(linalg.inv, [a])
    check_gradients(linalg.svdvals, [rng.standard_normal((4, 3))])
    # the factor of the symmetric part: a perturbation of either triangle counts
    spd = _spd(rng, (3, 3))
    check_gradients(lambda x: linalg.cholesky((x + x.T) / 2), [spd])
    check_gradients(lambda x: linalg.cholesky((x + x.T) / 2, lower=True), [spd])


def test_check_finite_and_assume_a():
    bad = anb.tensor([[np.nan, 1.0], [1.0, 2.0]])
    for name in ("det", "inv", "cholesky", "svdvals"):
        with pytest.raises(ValueError, match="must not contain infs or NaNs"):
            getattr(linalg, name)(bad)
        with pytest.raises(ValueError, match="must not contain infs or NaNs"):
            getattr(sl, name)(bad.numpy())
    assert np.isnan(float(linalg.det(bad, check_finite=False)))
    with pytest.raises(NotImplementedError, match="assume_a='pos'"):
        linalg.inv(anb.eye(2), assume_a="pos")
    with pytest.raises(np.linalg.LinAlgError):
        linalg.cholesky(anb.tensor([[1.0, 2.0], [2.0, 1.0]]))


def test_compiled_programs_run_eagerly_with_a_warning():
    def loss(a, q):
        return linalg.sqrtm(linalg.solve_sylvester(a, a, q)).sum()

    compiled = anb.compile(loss)
    rng = np.random.default_rng(14)
    arrays = [_shifted(rng, (3, 3)), _spd(rng, (3, 3))]
    results = []
    with pytest.warns(anb.CompileWarning, match="runs eagerly"):
        results.append(compiled(*(anb.tensor(x) for x in arrays)))
    results.append(loss(*(anb.tensor(x) for x in arrays)))
    assert results[0].numpy().tobytes() == results[1].numpy().tobytes()
