"""autograd_nb.scipy.stats against SciPy: values at many points (tails and edges included),
gradients in x and every continuous parameter against float64 central differences (first
and second order), SciPy's answers outside the domain (NaN, with a NaN gradient) and SciPy's
errors; SciPy's own functions where no argument is a Tensor."""

import mpmath
import numpy as np
import pytest
import scipy.stats as ss
from hypothesis import given, settings
from hypothesis.extra import numpy as hnp

import autograd_nb as anb
from autograd_nb.autograd import gradcheck, gradgradcheck
from autograd_nb.scipy import stats

RNG = np.random.default_rng(7)


def values(tensor_or_array):
    return tensor_or_array.numpy() if isinstance(tensor_or_array, anb.Tensor) else tensor_or_array


def close(ours, reference, rtol=1e-12, atol=0.0):
    np.testing.assert_allclose(values(ours), reference, rtol=rtol, atol=atol)


ALL = ["pdf", "logpdf", "cdf", "logcdf", "sf", "logsf"]
# distribution, methods, x points (tails and edges), parameter sets
CONTINUOUS = [
    ("norm", ALL,
     [-40.0, -8.0, -1.5, 0.0, 0.3, 2.0, 9.0, 37.0], [(), (0.5, 2.0), (-3.0, 0.1)]),
    ("t", ALL, [-1e3, -30.0, -1.5, 0.0, 0.3, 2.0, 50.0],
     [(1.0,), (3.5, 0.2, 1.5), (30.0,), (150.0,), (1e7,), (np.inf,)]),
    ("gamma", ALL, [-1.0, 0.0, 1e-8, 0.3, 2.0, 15.0, 200.0],
     [(0.5,), (1.0,), (2.5, 0.0, 1.5), (40.0, -1.0, 0.3)]),
    ("chi2", ALL, [-1.0, 0.0, 1e-6, 0.3, 2.0, 15.0, 300.0],
     [(1.0,), (3.0,), (25.0, 0.5, 2.0)]),
    ("beta", ALL, [-0.5, 0.0, 1e-9, 0.25, 0.5, 0.999, 1.0, 1.5],
     [(1.0, 1.0), (2.5, 0.7), (0.5, 0.5), (30.0, 4.0, -0.2, 2.0)]),
]
CASES = [(d, m, x, p) for d, ms, x, ps in CONTINUOUS for m in ms for p in ps]


@pytest.mark.parametrize("dist, method, points, params", CASES)
def test_values_match_scipy(dist, method, points, params):
    x = np.array(points)
    with np.errstate(all="ignore"):
        if method in ("logcdf", "logsf"):
            reference = scipy_log(getattr(ss, dist), method, x, *params)
        else:
            reference = getattr(getattr(ss, dist), method)(x, *params)
    ours = getattr(getattr(stats, dist), method)(anb.tensor(x), *params)
    assert isinstance(ours, anb.Tensor)
    close(ours, reference, rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize("df", [0.5, 3.0, 1e5])
def test_t_cdf_across_its_forms_and_its_gradient_at_zero(df):
    # the series below |z| = 1e-5, the central form, the tail form beyond |z| = 2
    x = np.array([-2.5, -2.0, -1.9999, -0.5, -1e-5, -9e-6, 0.0, 9e-6, 1e-5, 1.9999, 2.0, 2.5])
    for method in ("cdf", "sf"):
        # the tail form's relative error grows as df times rounding (5e-12 at df = 1e5)
        close(getattr(stats.t, method)(anb.tensor(x), df), getattr(ss.t, method)(x, df),
              rtol=1e-12 + 1e-16 * df)
    tx, tdf = leaves([[0.0, 1e-6], df])
    gx, gdf = anb.grad(stats.t.cdf(tx, tdf).sum(), (tx, tdf))
    close(gx, ss.t.pdf(np.array([0.0, 1e-6]), df), rtol=1e-12)
    # cdf(0) is 1/2 at every df; near 0, cdf = 1/2 + z pdf(0) + O(z**3), so d/d(df) is z
    # times the derivative of the density at 0 (mpmath's, in 50 digits)
    with mpmath.workdps(50):
        density_slope = float(mpmath.diff(lambda n: mpmath.gamma((n + 1) / 2) / (
            mpmath.gamma(n / 2) * mpmath.sqrt(n * mpmath.pi)), mpmath.mpf(df)))
    close(gdf, 1e-6 * density_slope, rtol=1e-8)


def scipy_log(distribution, method, x, *params):
    """SciPy's ``logcdf``/``logsf`` where it keeps its digits; ``log1p`` of SciPy's
    complement where the probability is near 1 (SciPy's log of a probability that rounded to
    1 is 0 or a rounded number: ours is the accurate one there)."""
    value = getattr(distribution, method)(x, *params)
    probability, complement = (("cdf", "sf") if method == "logcdf" else ("sf", "cdf"))
    p = getattr(distribution, probability)(x, *params)
    q = getattr(distribution, complement)(x, *params)
    return np.where(p > 0.5, np.log1p(-q), value)


@pytest.mark.parametrize("method", ["cdf", "logcdf", "sf", "logsf", "logpmf"])
@pytest.mark.parametrize("mu", [0.0, 0.3, 4.0, 60.0])
def test_poisson_distribution_functions_match_scipy(method, mu):
    k = np.array([-2.0, 0.0, 0.5, 1.0, 3.0, 10.0, 60.0, 150.0, 400.0])
    with np.errstate(all="ignore"):
        if method in ("logcdf", "logsf"):
            reference = scipy_log(ss.poisson, method, k, mu)
        else:
            reference = getattr(ss.poisson, method)(k, mu)
    ours = getattr(stats.poisson, method)(anb.tensor(k), anb.tensor(mu))
    close(ours, reference, rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize("dist, params", [
    ("norm", (0.5, 2.0)), ("t", (3.5, 0.2, 1.5)), ("t", (150.0,)), ("t", (np.inf,)),
    ("gamma", (2.5, 0.0, 1.5)), ("chi2", (3.0, 0.0, 2.0)), ("beta", (2.5, 0.7, 0.0, 1.0)),
])
def test_entropy_matches_scipy(dist, params):
    ours = getattr(stats, dist).entropy(*[anb.tensor(p) for p in params])
    close(ours, getattr(ss, dist).entropy(*params), rtol=1e-12)


def test_without_tensors_the_functions_are_scipys():
    x = np.linspace(-2, 2, 5)
    result = stats.norm.logpdf(x, 0.5, 2.0)
    assert type(result) is np.ndarray
    np.testing.assert_array_equal(result, ss.norm.logpdf(x, 0.5, 2.0))
    assert stats.multivariate_normal.logpdf(np.zeros(2), [0.0, 1.0]) == (
        ss.multivariate_normal.logpdf(np.zeros(2), [0.0, 1.0]))


# -- gradients --------------------------------------------------------------------------------

# function of tensors, input values (positive where a parameter must be)
GRADIENT_CASES = {
    "norm.logpdf": (lambda x, m, s: stats.norm.logpdf(x, m, s), [[-1.0, 0.3, 2.0], 0.5, 1.7]),
    "norm.logcdf tail": (lambda x, m, s: stats.norm.logcdf(x, m, s),
                         [[-30.0, -3.0, 0.3, 4.0], 0.5, 1.7]),
    "norm.logsf": (lambda x, m, s: stats.norm.logsf(x, m, s), [[-4.0, 0.3, 12.0], 0.2, 0.9]),
    "t.logpdf": (lambda x, df, m, s: stats.t.logpdf(x, df, m, s),
                 [[-2.0, 0.1, 3.0], 3.5, 0.2, 1.5]),
    "t.logpdf large df": (lambda x, df: stats.t.logpdf(x, df), [[-2.0, 0.1, 3.0], 400.0]),
    "t.entropy": (lambda df, s: stats.t.entropy(df, 0.0, s), [[2.5, 50.0, 200.0], 1.5]),
    "t.cdf": (lambda x, df, m, s: stats.t.cdf(x, df, m, s),
              [[-4.0, -0.3, 1e-5, 0.25, 3.0], 3.5, 0.2, 1.5]),
    "t.logcdf tail": (lambda x, df: stats.t.logcdf(x, df), [[-200.0, -8.0, 2.0, 40.0], 2.5]),
    "t.logsf large df": (lambda x, df: stats.t.logsf(x, df), [[-3.0, 0.5, 6.0], 300.0]),
    "gamma.cdf": (lambda x, a, s: stats.gamma.cdf(x, a, 0.1, s), [[0.3, 1.3, 4.0], 2.5, 1.5]),
    "gamma.logsf tail": (lambda x, a: stats.gamma.logsf(x, a), [[0.01, 2.0, 30.0], 0.7]),
    "gamma.logcdf large a": (lambda x, a: stats.gamma.logcdf(x, a), [[20.0, 60.0, 90.0], 55.0]),
    "chi2.sf": (lambda x, df: stats.chi2.sf(x, df), [[0.5, 1.3, 9.0], 3.5]),
    "beta.cdf": (lambda x, a, b: stats.beta.cdf(x, a, b), [[0.1, 0.4, 0.8], 2.5, 0.7]),
    "beta.logsf": (lambda x, a, b, s: stats.beta.logsf(x, a, b, 0.0, s),
                   [[0.05, 0.5, 1.2], 1.5, 4.0, 1.3]),
    "poisson.cdf": (lambda mu: stats.poisson.cdf(np.array([0.0, 1.0, 4.0, 9.0]), mu),
                    [[0.5, 2.0, 7.0, 3.0]]),
    "poisson.logsf": (lambda mu: stats.poisson.logsf(np.array([0.0, 2.0, 30.0]), mu),
                      [[0.5, 2.0, 7.0]]),
    "gamma.logpdf": (lambda x, a, s: stats.gamma.logpdf(x, a, 0.1, s),
                     [[0.5, 1.3, 4.0], 2.5, 1.5]),
    "gamma.logpdf a = 1": (lambda x, a: stats.gamma.logpdf(x, a), [[0.5, 1.3, 4.0], 1.0]),
    "beta.logpdf a = b = 1": (lambda x, a, b: stats.beta.logpdf(x, a, b),
                              [[0.1, 0.4, 0.8], 1.0, 1.0]),
    "dirichlet.logpdf alpha 1": (lambda a: stats.dirichlet.logpdf(np.array([0.2, 0.3, 0.5]), a),
                                 [[1.0, 2.0, 1.0]]),
    "gamma.entropy": (lambda a, s: stats.gamma.entropy(a, 0.0, s), [[0.7, 2.5], 1.5]),
    "chi2.logpdf": (lambda x, df: stats.chi2.logpdf(x, df), [[0.5, 1.3, 4.0], 3.5]),
    "beta.logpdf": (lambda x, a, b: stats.beta.logpdf(x, a, b), [[0.1, 0.4, 0.8], 2.5, 0.7]),
    "beta.entropy": (lambda a, b: stats.beta.entropy(a, b), [[0.7, 2.5], 1.3]),
    "poisson.logpmf": (lambda mu: stats.poisson.logpmf(np.array([0.0, 1.0, 4.0]), mu),
                       [[0.5, 2.0, 7.0]]),
    "poisson.entropy": (lambda mu: stats.poisson.entropy(mu), [[0.5, 2.0, 30.0]]),
    "dirichlet.logpdf": (lambda x, a: stats.dirichlet.logpdf(x / anb.sum(x), a),
                         [[0.2, 0.3, 0.5], [1.5, 2.0, 3.0]]),
    "dirichlet.entropy": (lambda a: stats.dirichlet.entropy(a), [[1.5, 2.0, 3.0]]),
    "mvn.logpdf": (lambda x, m, a: stats.multivariate_normal.logpdf(
        x, m, anb.matmul(a, a.T) + anb.eye(3)),
        [RNG.normal(size=(4, 3)).tolist(), [0.1, -0.2, 0.3], RNG.normal(size=(3, 3)).tolist()]),
    "mvn.entropy": (lambda a: stats.multivariate_normal.entropy(
        None, anb.matmul(a, a.T) + anb.eye(2)), [[[1.0, 0.3], [-0.2, 0.8]]]),
}


def leaves(points):
    return [anb.tensor(np.array(p, dtype=np.float64), requires_grad=True) for p in points]


@pytest.mark.parametrize("name", sorted(GRADIENT_CASES))
def test_gradients_match_central_differences(name):
    function, points = GRADIENT_CASES[name]
    inputs = leaves(points)
    assert gradcheck(function, inputs, eps=1e-6, atol=1e-7, rtol=1e-5)


@pytest.mark.parametrize("name", ["norm.logpdf", "t.logpdf", "gamma.logpdf", "beta.logpdf",
                                  "dirichlet.entropy", "mvn.logpdf", "poisson.cdf"])
def test_second_order_gradients_match_central_differences(name):
    function, points = GRADIENT_CASES[name]
    assert gradgradcheck(function, leaves(points), eps=1e-5, atol=1e-6, rtol=1e-4)


@settings(max_examples=25, deadline=None)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3))
def test_norm_broadcasts_as_scipy(shapes):
    x = RNG.normal(size=shapes.input_shapes[0])
    loc = RNG.normal(size=shapes.input_shapes[1])
    scale = RNG.uniform(0.5, 2.0, size=shapes.input_shapes[2])
    tx, tl, ts = leaves([x, loc, scale])
    out = stats.norm.logpdf(tx, tl, ts)
    close(out, ss.norm.logpdf(x, loc, scale), rtol=1e-12)
    gx, gl, gs = anb.grad(out.sum(), (tx, tl, ts))
    z = (x - loc) / scale
    expected = np.broadcast_to(-z / scale, shapes.result_shape)

    def reduced(full, shape):
        full = full.sum(axis=tuple(range(full.ndim - len(shape)))) if full.ndim else full
        return full.sum(axis=tuple(i for i, n in enumerate(shape) if n == 1), keepdims=True)

    close(gx, reduced(expected, x.shape).reshape(x.shape), rtol=1e-12, atol=1e-14)
    close(gl, reduced(-expected, loc.shape).reshape(loc.shape), rtol=1e-12, atol=1e-14)
    gs_expected = np.broadcast_to((z * z - 1) / scale, shapes.result_shape)
    close(gs, reduced(gs_expected, scale.shape).reshape(scale.shape), rtol=1e-12, atol=1e-14)


# -- outside the domain -----------------------------------------------------------------------


@pytest.mark.parametrize("dist, x, params, at", [
    ("norm", 0.3, [0.0, -1.0], 1), ("t", 0.3, [-2.0], 0), ("gamma", 0.3, [-1.0], 0),
    ("beta", 0.3, [2.0, 0.0], 1), ("chi2", 0.3, [-3.0], 0),
])
@pytest.mark.parametrize("method", ["logpdf", "cdf", "logsf"])
def test_a_parameter_outside_its_domain_gives_nan_and_a_nan_gradient(dist, x, params, at,
                                                                    method):
    inputs = leaves(params)
    value = getattr(getattr(stats, dist), method)(x, *inputs)
    with np.errstate(all="ignore"):
        assert np.isnan(getattr(getattr(ss, dist), method)(x, *params))
    assert np.isnan(value.numpy())
    (g,) = anb.grad(value, inputs[at])
    assert np.isnan(g.numpy())


@pytest.mark.parametrize("method", ["logpdf", "pdf", "cdf", "logsf", "entropy"])
@pytest.mark.parametrize("loc, scale", [(0, 2.0), (0.5, [1.0, -1.0, 3.0]), (-1.0, 0.0)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_norm_with_a_constant_scale_matches_scipy_with_its_gradient(method, loc, scale, dtype):
    # a constant scale takes a NumPy path of its own (norm._standard_fixed_scale)
    x = np.array([-1.0, 0.25, 2.0], dtype=dtype)
    leaf = anb.tensor(x, requires_grad=True)
    call = getattr(stats.norm, method)
    reference = getattr(ss.norm, method)
    with np.errstate(all="ignore"):  # SciPy's own, at scale <= 0
        if method == "entropy":  # no x: the leaf is loc
            value, expected = call(leaf, scale), reference(x, scale)
        else:
            value, expected = call(leaf, loc, scale), reference(x, loc, scale)
    assert value.dtype == np.result_type(x, np.float64)
    np.testing.assert_allclose(value.numpy(), expected, rtol=1e-6 if dtype == np.float32
                               else 1e-12)
    (g,) = anb.grad(value.sum(), leaf)
    fixed = np.broadcast_to(scale, x.shape)
    if method == "entropy":  # it does not read loc: a zero derivative, also where it is NaN
        assert (g.numpy() == 0).all()
        return
    assert np.isnan(g.numpy()[fixed <= 0]).all()
    if dtype == np.float64:
        step = 1e-6
        with np.errstate(all="ignore"):
            reference = (reference(x + step, loc, scale) - reference(x - step, loc, scale)) / (
                2 * step)
        good = fixed > 0
        np.testing.assert_allclose(g.numpy()[good], reference[good], rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("dist, x, params", [
    ("gamma", [-1.0, 0.5], [2.0]), ("beta", [-0.5, 1.5, 0.5], [2.0, 3.0]),
    ("chi2", [-1.0, 2.0], [3.0]),
])
@pytest.mark.parametrize("method", ["logpdf", "cdf", "sf", "logcdf", "logsf"])
def test_outside_the_support_the_functions_are_constant_with_a_zero_gradient(dist, x, params,
                                                                            method):
    tx = leaves([x])[0]
    out = getattr(getattr(stats, dist), method)(tx, *params)
    close(out, getattr(getattr(ss, dist), method)(np.array(x), *params))
    (g,) = anb.grad(out.sum(), tx)
    y = np.array(x)
    outside = (y < 0) | ((y > 1) & (dist == "beta"))
    assert np.all(g.numpy()[outside] == 0) and np.all(np.isfinite(g.numpy()))


def test_poisson_outside_the_whole_numbers_and_its_count_without_derivative():
    k = np.array([-1.0, 0.0, 2.5, 3.0])
    close(stats.poisson.logpmf(anb.tensor(k), 2.0), ss.poisson.logpmf(k, 2.0))
    with pytest.raises(ValueError, match="k is a count"):
        stats.poisson.logpmf(anb.tensor(k, requires_grad=True), 2.0)


def test_dirichlet_takes_k_minus_one_components_and_raises_scipys_errors():
    x = np.array([[0.2, 0.1], [0.3, 0.6]])  # K - 1 = 2 rows, two points
    alpha = np.array([1.5, 2.0, 3.0])
    close(stats.dirichlet.logpdf(anb.tensor(x), alpha), ss.dirichlet.logpdf(x, alpha))
    for bad_x, bad_alpha in [([0.2, 0.3, 0.6], alpha), ([0.5, 0.5], [-1.0, 1.0]),
                             ([1.2, -0.2], [1.0, 1.0])]:
        with pytest.raises(ValueError) as ours:
            stats.dirichlet.logpdf(anb.tensor(bad_x), bad_alpha)
        with pytest.raises(ValueError) as theirs:
            ss.dirichlet.logpdf(np.array(bad_x), np.array(bad_alpha))
        assert str(ours.value) == str(theirs.value)


# -- multivariate normal ----------------------------------------------------------------------


@pytest.mark.parametrize("x_shape, mean, cov", [
    ((3,), None, 2.0), ((5, 3), [0.1, 0.2, -0.3], [1.0, 2.0, 0.5]), ((2, 4, 3), None, "full"),
    ((), 0.5, 2.0), ((4,), 0.5, 2.0),
])
def test_multivariate_normal_shapes_match_scipy(x_shape, mean, cov):
    if cov == "full":
        a = RNG.normal(size=(3, 3))
        cov = a @ a.T + np.eye(3)
    x = RNG.normal(size=x_shape)
    for method in ("logpdf", "pdf"):
        ours = getattr(stats.multivariate_normal, method)(anb.tensor(x), mean, cov)
        reference = getattr(ss.multivariate_normal, method)(x, mean, cov)
        assert np.shape(values(ours)) == np.shape(reference)
        close(ours, reference, rtol=1e-12)


def test_a_singular_covariance_follows_scipy():
    cov = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 2.0]])
    x = np.array([[1.0, 1.0, 0.5], [1.0, 0.0, 0.0]])
    ours = stats.multivariate_normal.logpdf(anb.tensor(x), None, cov, allow_singular=True)
    close(ours, ss.multivariate_normal.logpdf(x, None, cov, allow_singular=True))
    close(stats.multivariate_normal.entropy(None, anb.tensor(cov)),
          ss.multivariate_normal.entropy(None, cov), rtol=1e-12)
    with pytest.raises(np.linalg.LinAlgError, match="allow_singular"):
        stats.multivariate_normal.logpdf(anb.tensor(x), None, cov)
    with pytest.raises(ValueError, match="positive semidefinite"):
        stats.multivariate_normal.logpdf(anb.tensor(x), None, -np.eye(3))
