"""autograd_nb.scipy.stats.multivariate_normal.cdf and logcdf against SciPy: values are SciPy's
own integral (the same rng gives the same bits); gradients in x, mean, cov and lower_limit
against exact closed forms (one component; independent components) and against float64
central differences of SciPy's cdf with a fixed rng and a tight abseps; second derivatives
(create_graph) against central differences of the first; SciPy's errors."""

import warnings

import numpy as np
import pytest
import scipy.stats as ss

import autograd_nb as anb
from autograd_nb.autograd import gradcheck, gradgradcheck
from autograd_nb.autograd.functional import hessian
from autograd_nb.scipy.stats import multivariate_normal as mvn

RNG = np.random.default_rng(11)
COV3 = np.array([[2.0, 0.6, 0.3], [0.6, 1.0, -0.2], [0.3, -0.2, 1.5]])


def leaf(value):
    return anb.tensor(np.array(value, dtype=np.float64), requires_grad=True)


def close(ours, reference, rtol=1e-12, atol=0.0):
    ours = ours.numpy() if isinstance(ours, anb.Tensor) else ours
    np.testing.assert_allclose(ours, reference, rtol=rtol, atol=atol)


def central(function, array, eps=1e-5, symmetric=False):
    """Central differences of ``function(array).sum()`` in every entry of ``array`` (for a
    covariance with ``symmetric``: ``cov_ij`` and ``cov_ji`` moved by ``eps / 2`` each, the
    symmetric gradient's convention)."""
    array = np.array(array, dtype=np.float64)
    out = np.zeros_like(array)
    for index in np.ndindex(array.shape):
        step = np.zeros_like(array)
        step[index] += eps / 2 if symmetric else eps
        if symmetric:
            step[index[::-1]] += eps / 2
        out[index] = (np.sum(function(array + step)) - np.sum(function(array - step))) / (
            2 * eps)
    return out


# -- values -----------------------------------------------------------------------------------


@pytest.mark.parametrize("x_shape, mean, cov", [
    ((), 0.5, 2.0), ((4,), 0.5, 2.0), ((2,), [0.1, -0.2], [1.0, 3.0]),
    ((5, 2), None, [[1.0, 0.4], [0.4, 2.0]]), ((3,), [0.1, 0.2, -0.3], COV3),
    ((2, 2, 3), None, COV3), ((4,), None, np.eye(4) + 0.3),
])
@pytest.mark.parametrize("method", ["cdf", "logcdf"])
def test_values_and_shapes_are_scipys(x_shape, mean, cov, method):
    x = RNG.normal(size=x_shape)
    ours = getattr(mvn, method)(anb.tensor(x), mean, cov, rng=4)
    reference = getattr(ss.multivariate_normal, method)(x, mean, cov, rng=4)
    assert isinstance(ours, anb.Tensor)
    assert ours.shape == np.shape(reference)
    close(ours, reference, rtol=1e-13)


def test_lower_limit_broadcasts_as_scipys():
    x = np.abs(RNG.normal(size=(4, 3))) + 0.5
    lower = np.array([-0.5, -np.inf, 0.2])
    for method in ("cdf", "logcdf"):
        ours = getattr(mvn, method)(anb.tensor(x), None, COV3, lower_limit=lower, rng=2)
        close(ours, getattr(ss.multivariate_normal, method)(x, None, COV3, lower_limit=lower,
                                                             rng=2), rtol=1e-13)
    # lower limits with more points than x, and their gradient
    x0, lower0, cov = np.array([[0.5, 0.2], [1.0, 0.7]]), RNG.normal(size=(3, 1, 2)) - 1, [
        [1.0, 0.3], [0.3, 2.0]]
    x, lower = leaf(x0), leaf(lower0)
    p = mvn.cdf(x, [0.0, 0.1], cov, lower_limit=lower)
    close(p, ss.multivariate_normal.cdf(x0, [0.0, 0.1], cov, lower_limit=lower0))
    gx, gl = anb.grad(p.sum(), (x, lower))
    assert gx.shape == x.shape and gl.shape == lower.shape
    close(gl, central(lambda v: ss.multivariate_normal.cdf(x0, [0.0, 0.1], cov, lower_limit=v),
                      lower0), rtol=1e-7, atol=1e-11)
    # a lower limit above x: SciPy's signed integral
    ours = mvn.cdf(anb.tensor([0.3, -0.5]), [0.0, 0.0], lower_limit=anb.tensor([1.0, -1.0]))
    close(ours, ss.multivariate_normal.cdf([0.3, -0.5], [0.0, 0.0], lower_limit=[1.0, -1.0]))
    assert ours.item() < 0


def test_without_tensors_it_is_scipys_and_a_seed_reproduces_the_value():
    x = np.array([0.2, 0.1, -0.3])
    assert mvn.cdf(x, None, COV3, rng=9) == ss.multivariate_normal.cdf(x, None, COV3, rng=9)
    first = mvn.cdf(anb.tensor(x), None, COV3, rng=np.random.default_rng(3))
    again = mvn.cdf(anb.tensor(x), None, COV3, rng=np.random.default_rng(3))
    assert first.item() == again.item() == ss.multivariate_normal.cdf(
        x, None, COV3, rng=np.random.default_rng(3))


def test_float32_in_float32_out():
    x = anb.tensor(np.array([0.3, 0.1], dtype=np.float32), requires_grad=True)
    p = mvn.cdf(x, np.zeros(2, np.float32), np.eye(2, dtype=np.float32))
    assert p.dtype == np.float32
    (g,) = anb.grad(p, x)
    assert g.dtype == np.float32
    close(g, ss.norm.pdf([0.3, 0.1]) * ss.norm.cdf([0.1, 0.3]), rtol=1e-6)


# -- gradients: exact closed forms ----------------------------------------------------------------


def test_one_component_is_norms_with_its_exact_gradients():
    x, mean, var = leaf([-2.0, 0.3, 1.5]), leaf(0.4), leaf(1.7)
    z, sd = (np.array([-2.0, 0.3, 1.5]) - 0.4) / np.sqrt(1.7), np.sqrt(1.7)
    p = mvn.cdf(x, mean, var)
    close(p, ss.norm.cdf(z))
    gx, gm, gv = anb.grad(p.sum(), (x, mean, var))
    density = ss.norm.pdf(z) / sd
    close(gx, density)
    close(gm, -density.sum())
    close(gv, np.sum(-z / (2 * sd) * density), rtol=1e-12)
    gx, gv = anb.grad(mvn.logcdf(x, mean, var).sum(), (x, var))
    close(gx, density / ss.norm.cdf(z))
    close(gv, np.sum(-z / (2 * sd) * density / ss.norm.cdf(z)), rtol=1e-12)


def test_independent_components_are_a_product_with_its_exact_gradients():
    x0, sds = np.array([[0.3, -1.2], [1.1, 0.4]]), np.array([1.0, 2.0])
    x, mean, cov = leaf(x0), leaf([0.2, -0.3]), leaf(np.diag(sds**2))
    z = (x0 - [0.2, -0.3]) / sds
    phi, big_phi = ss.norm.pdf(z) / sds, ss.norm.cdf(z)
    p = mvn.cdf(x, mean, cov)
    close(p, big_phi.prod(axis=-1))
    gx, gm, gc = anb.grad(p.sum(), (x, mean, cov))
    dx = phi * big_phi[:, ::-1]
    close(gx, dx)
    close(gm, -dx.sum(axis=0))
    expected = np.zeros((2, 2))
    for i in range(2):  # d/d var_i of ndtr(z_i) is -z_i phi_i / (2 sd_i)
        expected[i, i] = np.sum(-z[:, i] / (2 * sds[i]) * phi[:, i] * big_phi[:, 1 - i])
    # the symmetric pair cov_01 = cov_10 moves P by the joint density: half on each entry
    expected[0, 1] = expected[1, 0] = 0.5 * np.sum(phi[:, 0] * phi[:, 1])
    close(gc, expected, rtol=1e-12, atol=1e-15)


# -- gradients: central differences of SciPy's cdf ------------------------------------------------


def directional(function, array, direction, eps=1e-5):
    """The central difference of ``function(array).sum()`` along ``direction``."""
    return (np.sum(function(array + eps * direction)) - np.sum(function(array - eps * direction))
            ) / (2 * eps)


@pytest.mark.parametrize("case", ["2 correlated", "3", "3 with lower limits"])
def test_gradients_match_central_differences_of_scipy(case):
    # in 2 dimensions entry by entry; in 3 (a quasi-Monte Carlo value, ~0.1 s a call at
    # abseps 1e-7) along a random direction per argument
    dim = 2 if case.startswith("2") else 3
    cov0 = COV3[:dim, :dim]
    x0 = np.array([[0.4, -0.3, 0.9], [-0.6, 0.5, 0.1], [1.2, 0.8, -0.7]])[:, :dim]
    mean0 = np.array([0.1, -0.2, 0.3])[:dim]
    lower0 = np.array([-1.0, -np.inf, -0.8])[:dim] if "lower" in case else None
    options = dict(abseps=1e-7, rng=5)

    def reference(x=x0, mean=mean0, cov=cov0, lower=lower0):
        return ss.multivariate_normal.cdf(x, mean, cov, lower_limit=lower, **options)

    x, mean, cov = leaf(x0), leaf(mean0), leaf(cov0)
    lower = None if lower0 is None else leaf(lower0)
    p = mvn.cdf(x, mean, cov, lower_limit=lower, **options)
    close(p, reference(), rtol=1e-13)
    inputs = (x, mean, cov) if lower is None else (x, mean, cov, lower)
    grads = [g.numpy() for g in anb.grad(p.sum(), inputs)]
    finite = True if lower is None else np.isfinite(lower0)
    functions = [lambda v: reference(x=v), lambda v: reference(mean=v),
                 lambda v: reference(cov=v),
                 lambda v: reference(lower=np.where(finite, v, -np.inf))]
    points = [x0, mean0, cov0, np.where(finite, lower0, 0.0) if lower is not None else None]
    for grad, function, point in zip(grads, functions, points, strict=False):
        if dim == 2:
            close(grad, central(function, point, symmetric=point is cov0), rtol=1e-6,
                  atol=1e-10)
            continue
        direction = RNG.normal(size=point.shape)
        if point is cov0:
            direction = direction + direction.T
        close(np.sum(grad * direction), directional(function, point, direction), rtol=1e-5)
    if lower is not None:
        assert grads[3][1] == 0.0  # an infinite lower limit


def test_four_components_the_gradient_in_x_carries_scipys_error():
    cov0, x0 = np.eye(4) + 0.3 * np.ones((4, 4)), np.array([0.2, -0.1, 0.5, 0.3])
    x = leaf(x0)
    (g,) = anb.grad(mvn.cdf(x, None, cov0, abseps=1e-7, rng=1), x)
    numerical = central(lambda v: ss.multivariate_normal.cdf(v, None, cov0, abseps=1e-7,
                                                             rng=1), x0, eps=1e-3)
    # each term is a density (< 0.4) times a 3-d integral within abseps; the differences
    # see the estimate's noise over 2 eps
    close(g, numerical, atol=2e-5)


def test_an_infinite_limit_drops_its_component():
    # x_0 = inf: P is the marginal of the others, with their gradient; x_0's is zero
    x = leaf([[np.inf, 0.3, -0.2], [-np.inf, 0.3, -0.2]])
    cov = leaf(COV3)
    p = mvn.cdf(x, None, cov, rng=0)
    gx, gc = anb.grad(p.sum(), (x, cov))
    y, marginal = leaf([0.3, -0.2]), leaf(COV3[1:, 1:])
    q = mvn.cdf(y, None, marginal)
    gy, gm = anb.grad(q, (y, marginal))
    close(p, [q.item(), 0.0], rtol=0.0, atol=1e-5)  # the 3-d value is within abseps
    close(gx, [[0.0, *gy.numpy()], [0.0, 0.0, 0.0]], rtol=1e-13)
    expected = np.zeros((3, 3))
    expected[1:, 1:] = gm.numpy()
    close(gc, expected, rtol=1e-12, atol=1e-17)


def test_logcdf_gradient_is_cdfs_over_the_value():
    x0 = np.array([[-1.5, 0.3, 0.8]])
    x, cov = leaf(x0), leaf(COV3)
    gx, gc = anb.grad(mvn.logcdf(x, None, cov, rng=3).sum(), (x, cov))
    p = ss.multivariate_normal.cdf(x0, None, COV3, rng=3)
    x, cov = leaf(x0), leaf(COV3)
    hx, hc = anb.grad(mvn.cdf(x, None, cov, rng=3).sum(), (x, cov))
    close(gx, hx.numpy() / p)
    close(gc, hc.numpy() / p)


def test_gradcheck_in_a_symmetric_parametrization():
    def function(x, mean, a, lower):
        return mvn.cdf(x, mean, anb.matmul(a, a.T) + anb.eye(3), rng=0, abseps=1e-10,
                       lower_limit=lower)

    inputs = [leaf(RNG.normal(size=(2, 3))), leaf([0.1, 0.0, -0.1]),
              leaf(RNG.normal(size=(3, 3)) * 0.5), leaf([-1.5, -2.0, -1.0])]
    assert gradcheck(function, inputs, eps=1e-6, atol=1e-7, rtol=1e-5)


# -- second derivatives (create_graph) ------------------------------------------------------------


def test_second_derivatives_match_central_differences():
    def two(x, a):
        return mvn.cdf(x, None, anb.matmul(a, a.T) + anb.eye(2))

    def three(x, mean):
        return mvn.logcdf(x, mean, COV3, rng=0, abseps=1e-7)

    assert gradgradcheck(two, [leaf([[0.3, -0.2], [1.0, 0.5]]), leaf([[1.0, 0.2], [-0.3, 0.8]])],
                         eps=1e-5, atol=1e-6, rtol=1e-4)
    assert gradgradcheck(three, [leaf([[0.3, -0.2, 0.5]]), leaf([0.1, 0.0, 0.2])],
                         eps=1e-5, atol=1e-6, rtol=1e-4)


def test_plackett_identities_hold_for_the_hessian_in_x():
    # sum_j cov_ij d2P/dx_i dx_j = -(x_i - mean_i) dP/dx_i, and dP/dcov = (d2P/dx2) / 2
    x0, mean0 = np.array([0.4, -0.3, 0.9]), np.array([0.1, 0.2, -0.1])
    x, cov = leaf(x0), leaf(COV3)
    (g,), (gc,) = (anb.grad(mvn.cdf(x, mean0, COV3, rng=1), x),
                   anb.grad(mvn.cdf(x0, mean0, cov, rng=1), cov))
    h = hessian(lambda v: mvn.cdf(v, mean0, COV3, rng=1), x)
    close(np.sum(COV3 * h.numpy(), axis=1), -(x0 - mean0) * g.numpy(), rtol=1e-10)
    close(gc, h.numpy() / 2, rtol=1e-10)


# -- SciPy's errors, singular cov, compile ----------------------------------------------------


def test_bad_input_raises_as_scipy():
    singular = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 2.0]])
    x = anb.tensor([0.5, 0.7, 0.2])
    with pytest.raises(np.linalg.LinAlgError, match="allow_singular"):
        mvn.cdf(x, None, singular)
    with pytest.raises(ValueError, match="positive semidefinite"):
        mvn.logcdf(x, None, -np.eye(3))
    with pytest.raises(ValueError, match="x"):
        mvn.cdf(anb.tensor([1.0, 2.0]), None, np.eye(3))
    with pytest.raises(ValueError, match="complex"):
        mvn.logcdf(anb.tensor([0.3, -0.5]), [0.0, 0.0], lower_limit=[1.0, -1.0])


def test_a_singular_covariance_with_allow_singular():
    # Y_0 = Y_1: P = ndtr(min(x_0, x_1)) ndtr(x_2 / sqrt(2))
    singular = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 2.0]])
    x0 = np.array([0.5, 0.7, 0.2])
    x = leaf(x0)
    p = mvn.cdf(x, None, singular, allow_singular=True, rng=0)
    close(p, ss.multivariate_normal.cdf(x0, None, singular, allow_singular=True, rng=0))
    close(p, ss.norm.cdf(0.5) * ss.norm.cdf(0.2 / np.sqrt(2)), rtol=1e-7)
    (g,) = anb.grad(p, x)
    close(g, [ss.norm.pdf(0.5) * ss.norm.cdf(0.2 / np.sqrt(2)), 0.0,
              ss.norm.cdf(0.5) * ss.norm.pdf(0.2 / np.sqrt(2)) / np.sqrt(2)], rtol=1e-7)


def test_inside_compile_it_runs_eagerly_with_a_warning():
    compiled = anb.compile(lambda x, c: mvn.cdf(x, None, c, rng=3))
    x, cov = leaf([[0.3, 0.1, 0.2]]), leaf(COV3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first, second = compiled(x, cov), compiled(x, cov)
    assert any(issubclass(w.category, anb.CompileWarning) for w in caught)
    reference = ss.multivariate_normal.cdf([0.3, 0.1, 0.2], None, COV3, rng=3)
    close(first, reference)
    close(second, reference)
    eager = anb.grad(mvn.cdf(x, None, cov, rng=3), (x, cov))
    for ours, theirs in zip(anb.grad(second, (x, cov)), eager, strict=True):
        close(ours, theirs.numpy())
