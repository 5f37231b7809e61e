"""``autograd_nb.scipy.special`` against SciPy: the namespace, values on grids that reach the
edges and tails, gradients in every argument against float64 central differences of SciPy's
own functions, second derivatives, the errors, broadcasting, and the docstrings' examples.

The tolerances are the largest errors measured, rounded up (measured on these grids; where
SciPy is itself the less accurate, against mpmath at 40 digits)."""

import doctest

import mpmath
import numpy as np
import pytest
import scipy.special as sc

import autograd_nb as anb
import autograd_nb.scipy.special as ssp
from autograd_nb.ops.registry import FUNCTIONS
from tests.checks import check_gradients

NEW = ("gamma rgamma gammasgn beta betaln betainc gammainc gammaincc psi multigammaln "
       "erfcinv").split()
EARLIER = ("erf erfc erfinv gammaln digamma polygamma logit expit xlogy ndtr log_ndtr i0 "
           "i1").split()


def rel_error(got, expected, floor=np.finfo(np.float64).tiny):
    """max |got - expected| / |expected| where ``expected`` is finite and above ``floor``."""
    keep = np.isfinite(expected) & (np.abs(expected) >= floor)
    return float(np.max(np.abs(got[keep] - expected[keep]) / np.abs(expected[keep]),
                        initial=0.0))


def values(name, *arrays):
    return getattr(ssp, name)(*(anb.tensor(a) for a in arrays)).numpy()


# -- the namespace -----------------------------------------------------------------------------


def test_the_namespace_shows_the_registrys_special_functions():
    names = ssp.provided()
    assert set(NEW + EARLIER) <= set(names)
    assert names == anb.special.provided()
    for name in names:
        assert getattr(ssp, name) is FUNCTIONS["special." + name] is getattr(anb.special, name)
        assert hasattr(sc, name), name
    assert set(NEW) <= set(dir(ssp))
    with pytest.raises(AttributeError, match="autograd_nb.scipy.special.*no attribute 'nope'"):
        ssp.nope  # noqa: B018


def test_psi_is_digamma():
    x = np.array([-2.5, 0.3, 1.0, 40.0])
    np.testing.assert_array_equal(values("psi", x), values("digamma", x))
    check_gradients(ssp.psi, [x[1:]])


# -- values against SciPy ----------------------------------------------------------------------


def off_the_poles(x):
    return x[~((x <= 0) & (np.abs(x - np.round(x)) < 1e-6))]


def test_gamma_rgamma_gammasgn_match_scipy():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-30, 172, 4000), np.exp(rng.uniform(-700, 5, 1000)),
                        -np.exp(rng.uniform(-700, 0, 500)), rng.uniform(-185, -165, 500)])
    x = off_the_poles(x)
    for name, bound in (("gamma", 3e-15), ("rgamma", 1e-14)):
        assert rel_error(values(name, x), getattr(sc, name)(x)) <= bound, name
    np.testing.assert_array_equal(values("gammasgn", x), sc.gammasgn(x))


SPECIAL_X = np.array([0.0, -0.0, -1.0, -2.0, -170.0, 1e-310, -1e-310, 171.7, 180.0, -170.5,
                      -180.5, np.inf, -np.inf, np.nan, 0.5, 1.0])


@pytest.mark.parametrize("name", ["gamma", "rgamma", "gammasgn"])
def test_gamma_family_special_values_match_scipy(name):
    with np.errstate(all="ignore"):
        expected = getattr(sc, name)(SPECIAL_X)
    got = values(name, SPECIAL_X)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(expected)],
                                  expected[~finite & ~np.isnan(expected)])
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(got)]),
                                  np.signbit(expected[~np.isnan(expected)]))
    assert rel_error(got, expected) <= 3e-15


def test_beta_and_betaln_match_scipy_and_high_precision():
    rng = np.random.default_rng(1)
    a, b = np.exp(rng.uniform(-5, 9, (2, 4000)))
    # SciPy takes log(beta) beyond gamma's range as lgamma(a) + lgamma(b) - lgamma(a + b),
    # off by ~lgamma(a + b) ulps (4.5e-10 relative where betaln is near 0); ours keeps
    # Stirling's terms apart (against mpmath below).
    assert rel_error(values("betaln", a, b), sc.betaln(a, b)) <= 1e-9
    assert rel_error(values("beta", a, b), sc.beta(a, b)) <= 5e-11
    small = rng.uniform(0.05, 60, (2, 2000))
    assert rel_error(values("beta", *small), sc.beta(*small)) <= 5e-14
    negative = off_the_poles(rng.uniform(-8, 8, 4000)).reshape(2, -1)
    assert rel_error(values("beta", *negative), sc.beta(*negative)) <= 1e-13
    # at the poles: SciPy's finite values where a is a negative integer and b an integer with
    # 1 - a - b > 0, its infinities elsewhere
    poles = np.array([[-3.0, 2.0, -1.0, -1.0, -4.0, -4.0, -2.0, 0.0, -5.0, 3.0, -2.5, -7.0],
                      [2.0, -3.0, 0.5, -1.0, 3.0, 5.0, 1.0, 1.0, 2.0, -6.0, -3.0, -0.0]])
    for name in ("beta", "betaln"):
        with np.errstate(all="ignore"):
            expected = getattr(sc, name)(*poles)
        np.testing.assert_allclose(values(name, *poles), expected, rtol=1e-14)
    mpmath.mp.dps = 40
    for x, y in zip(a[:100], b[:100]):
        exact = float(mpmath.log(mpmath.beta(x, y)))
        got = values("betaln", np.array([x]), np.array([y]))[0]
        assert abs(got - exact) <= 1e-13 * max(1.0, abs(exact)), (x, y)


def test_erfcinv_matches_scipy_into_the_tail():
    rng = np.random.default_rng(2)
    y = np.concatenate([np.exp(rng.uniform(np.log(1e-300), np.log(2), 4000)),
                        rng.uniform(0, 2, 2000), 2 - np.exp(rng.uniform(-36, 0, 1000)),
                        [1e-300, 1e-308, 1e-320, 1.0, 2.0, 0.0, -1.0, 2.5, np.nan]])
    y = y[(y >= 1e-300) | ~(y > 0)]  # (SciPy's digits fade below, see the roots below)
    with np.errstate(all="ignore"):
        expected = sc.erfcinv(y)
    got = values("erfcinv", y)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(got[np.isinf(expected)], expected[np.isinf(expected)])
    assert rel_error(got, expected) <= 2e-15
    # SciPy's erfcinv(5e-324) is inf; against the root of erfc at 40 digits:
    mpmath.mp.dps = 40
    for q in (5e-324, 1e-320, 3e-312, 1e-308, 2e-303, 1e-300, 1e-295):
        root = mpmath.findroot(lambda t, q=q: mpmath.log(mpmath.erfc(t)) - mpmath.log(q), 27)
        assert abs(values("erfcinv", np.array([q]))[0] - float(root)) <= 4e-15 * float(root)


def incomplete_gamma_grid(rng, n=4000):
    """(a, x) with a over 1e-2..1e4 and x from a/e^3 to a e^3, plus small x and a."""
    a = np.exp(rng.uniform(np.log(1e-2), np.log(1e4), n))
    x = a * np.exp(rng.uniform(-3, 3, n))
    a = np.concatenate([a, rng.uniform(0.01, 5, 500), rng.uniform(0.01, 30, 500)])
    x = np.concatenate([x, rng.uniform(1e-3, 5, 500), rng.uniform(0, 200, 500)])
    return a, x


def test_gammainc_and_gammaincc_match_scipy():
    a, x = incomplete_gamma_grid(np.random.default_rng(3))
    for name in ("gammainc", "gammaincc"):
        got, expected = values(name, a, x), getattr(sc, name)(a, x)
        assert np.abs(got - expected).max() <= 5e-14, name
        assert rel_error(got, expected, floor=1e-280) <= 2e-11, name


def test_gammainc_for_huge_shapes_converges_or_says_nan():
    a = np.array([1e8, 1e9, 3e9])
    x = a - np.sqrt(a)
    for name in ("gammainc", "gammaincc"):
        np.testing.assert_allclose(values(name, a, x), getattr(sc, name)(a, x), rtol=1e-12)
    # past 10**6 terms the series has not converged: NaN, never an unconverged value
    assert np.isnan(values("gammainc", np.array([1e12]), np.array([1e12 - 1e6]))).all()


def test_gammainc_tails_at_high_precision():
    mpmath.mp.dps = 40
    for a, x in [(0.5, 1e-10), (3.0, 40.0), (100.0, 10.0), (100.0, 200.0), (1e4, 1.05e4),
                 (1e4, 9.5e3), (2.5, 700.0), (1e3, 1e3)]:
        lower = float(mpmath.gammainc(a, 0, x, regularized=True))
        upper = float(mpmath.gammainc(a, x, mpmath.inf, regularized=True))
        assert abs(values("gammainc", np.array([a]), np.array([x]))[0] - lower) <= 1e-12 * lower
        assert abs(values("gammaincc", np.array([a]), np.array([x]))[0] - upper) <= 1e-12 * upper


def incomplete_beta_grid(rng, n=4000):
    a, b = np.exp(rng.uniform(np.log(1e-2), np.log(3e3), (2, n)))
    x = np.concatenate([rng.uniform(0, 1, n // 2), np.exp(rng.uniform(-30, 0, n // 2))])
    return a, b, x


def test_betainc_matches_scipy():
    a, b, x = incomplete_beta_grid(np.random.default_rng(4))
    got, expected = values("betainc", a, b, x), sc.betainc(a, b, x)
    assert np.abs(got - expected).max() <= 5e-13
    # (below 1e-250 SciPy loses digits: betainc(565.7, 12.7, 0.27) = 1.89153e-299, SciPy's
    # 1.89148e-299; see the high-precision values)
    assert rel_error(got, expected, floor=1e-250) <= 5e-11


def test_betainc_at_high_precision():
    mpmath.mp.dps = 40
    for a, b, x in [(565.6726284708228, 12.718788215697524, 0.27066179228116205),
                    (0.5, 0.5, 1e-12), (2.0, 3.0, 0.4), (1e3, 1e3, 0.49), (0.1, 200.0, 0.3),
                    (50.0, 0.2, 0.999), (5.0, 5.0, 1 - 1e-9)]:
        exact = float(mpmath.betainc(a, b, 0, x, regularized=True))
        got = values("betainc", np.array([a]), np.array([b]), np.array([x]))[0]
        assert abs(got - exact) <= 1e-12 * exact, (a, b, x, got, exact)


def test_incomplete_functions_edge_values_match_scipy():
    a = np.array([0.0, 0.0, 1.0, 1.0, -1.0, np.inf, np.inf, 2.0, 2.0, np.nan, 3.0])
    x = np.array([0.0, 1.0, 0.0, np.inf, 1.0, 1.0, np.inf, -1.0, 1e-300, 1.0, 1e300])
    with np.errstate(all="ignore"):
        for name in ("gammainc", "gammaincc"):
            np.testing.assert_allclose(values(name, a, x), getattr(sc, name)(a, x), rtol=1e-14,
                                       atol=0.0, err_msg=name)
        a = np.array([0.0, 1.0, 0.0, 2.0, 1.0, np.inf, 2.0, -1.0, 2.0, 2.0, np.inf, 1.0])
        b = np.array([1.0, 0.0, 0.0, 3.0, 1.0, 1.0, np.inf, 1.0, 2.0, 2.0, np.inf, 1.0])
        x = np.array([0.5, 0.5, 0.5, 0.0, 1.0, 0.5, 0.5, 0.5, 1.5, -0.1, 0.5, np.nan])
        np.testing.assert_allclose(values("betainc", a, b, x), sc.betainc(a, b, x), rtol=1e-14,
                                   atol=0.0)


def test_multigammaln_matches_scipy_and_checks_like_it():
    a = np.random.default_rng(5).uniform(5, 50, 20)
    for d in (1, 2, 5, 10):
        np.testing.assert_allclose(ssp.multigammaln(anb.tensor(a), d).numpy(),
                                   sc.multigammaln(a, d), rtol=1e-14)
    check_gradients(lambda t: ssp.multigammaln(t, 4), [a[:4]])
    with pytest.raises(ValueError, match="d should be a positive integer"):
        ssp.multigammaln(anb.tensor(a), 2.5)
    with pytest.raises(ValueError, match="d should be a positive integer"):
        ssp.multigammaln(anb.tensor(a), [2, 3])
    with pytest.raises(ValueError, match=r"condition a .* > 0.5 \* \(d-1\) .* not met"):
        ssp.multigammaln(anb.tensor([1.0, 2.0]), 4)


# -- gradients against central differences of SciPy's functions -------------------------------


def central_difference(function, arrays, k, step):
    up, down = list(arrays), list(arrays)
    up[k] = arrays[k] + step
    down[k] = arrays[k] - step
    return (function(*up) - function(*down)) / (2 * step)


def extrapolated_difference(function, arrays, k, step):
    """Central differences at ``step`` and ``step / 2`` combined (Richardson): the truncation
    error of order step**4, the rounding error ~3 eps |f| / step."""
    coarse = central_difference(function, arrays, k, step)
    fine = central_difference(function, arrays, k, step / 2)
    return (4 * fine - coarse) / 3


def assert_gradients_match_scipy(name, arrays, bound, positions=None, floor=1e-280):
    """The gradient in each argument against a central difference of SciPy's function, with a
    step that keeps the function's change across it near linear (1e-5 of the argument and of
    the scale over which the function changes by its own size), where that difference is
    reliable (the change is above 1e-8 of the value: rounding stays below ~1e-8) and the value
    above ``floor`` (SciPy's own digits fade in the far tails)."""
    tensors = [anb.tensor(a, requires_grad=True) for a in arrays]
    positions = range(len(arrays)) if positions is None else positions
    grads = anb.grad(getattr(ssp, name)(*tensors).sum(), [tensors[k] for k in positions])
    reference = getattr(sc, name)
    value = np.abs(reference(*arrays))
    worst = 0.0
    for k, grad in zip(positions, grads, strict=True):
        rough = central_difference(reference, arrays, k, 1e-5 * np.abs(arrays[k]))
        scale = np.where(rough != 0, value / np.maximum(np.abs(rough), 1e-300), np.inf)
        step = 1e-5 * np.minimum(np.abs(arrays[k]), scale)
        expected = extrapolated_difference(reference, arrays, k, step)
        reliable = ((np.abs(expected) * step > 1e-8 * value) & (np.abs(expected) > 1e-280)
                    & (value > floor))
        error = rel_error(grad.numpy()[reliable], expected[reliable])
        worst = max(worst, error)
        assert error <= bound, (name, k, error)
        assert np.mean(reliable) > 0.4, (name, k)  # the check covers much of the grid
    return worst


def test_gamma_family_gradients_match_central_differences():
    x = off_the_poles(np.random.default_rng(6).uniform(-10, 40, 2000))
    x = x[np.abs(x - np.round(x)) > 1e-2]  # central differences straddle no pole
    for name in ("gamma", "rgamma"):
        assert_gradients_match_scipy(name, [x], 1e-7)
    t = anb.tensor(x, requires_grad=True)
    (g,) = anb.grad(ssp.gammasgn(t).sum(), t)
    np.testing.assert_array_equal(g.numpy(), np.zeros_like(x))


def test_rgamma_slope_at_the_poles():
    x = np.array([0.0, -1.0, -2.0, -5.0])
    t = anb.tensor(x, requires_grad=True)
    (g,) = anb.grad(ssp.rgamma(t).sum(), t)
    np.testing.assert_allclose(g.numpy(), central_difference(sc.rgamma, [x], 0, 1e-7),
                               rtol=1e-6)


def test_beta_gradients_match_central_differences():
    rng = np.random.default_rng(7)
    a, b = np.exp(rng.uniform(-3, 7, (2, 2000)))
    assert_gradients_match_scipy("betaln", [a, b], 1e-5)  # SciPy's own rounding, see above
    small = rng.uniform(0.1, 30, (2, 2000))
    assert_gradients_match_scipy("beta", list(small), 1e-7)
    assert_gradients_match_scipy("betaln", list(small), 1e-7)


def test_erfcinv_gradient_matches_central_differences_into_the_tail():
    y = np.exp(np.random.default_rng(8).uniform(np.log(1e-300), np.log(1.999), 2000))
    assert_gradients_match_scipy("erfcinv", [y], 1e-7)


def test_gammainc_gradients_match_central_differences():
    a, x = incomplete_gamma_grid(np.random.default_rng(9), 3000)
    keep = x > 0
    for name in ("gammainc", "gammaincc"):
        # (below 1e-30 SciPy's values are off by up to ~1e-11, which the differences
        # magnify to ~1e-6: the tails are checked against mpmath below)
        assert_gradients_match_scipy(name, [a[keep], x[keep]], 2e-7, floor=1e-30)


def test_betainc_gradients_match_central_differences():
    a, b, x = incomplete_beta_grid(np.random.default_rng(10), 3000)
    keep = (x > 0) & (x < 1)
    assert_gradients_match_scipy("betainc", [a[keep], b[keep], x[keep]], 1e-7, floor=1e-30)


def gradients(name, *arrays):
    tensors = [anb.tensor(np.array([v]), requires_grad=True) for v in arrays]
    return [g.item() for g in anb.grad(getattr(ssp, name)(*tensors).sum(), tensors)]


def test_shape_derivatives_in_the_tails_at_high_precision():
    """The derivatives in the shape parameters where the functions are far below 1e-30 (and
    near 1, where the complement is), against mpmath's numerical derivative at 50 digits."""
    mpmath.mp.dps = 50
    for a, x in [(3001.788522502508, 1527.0451310255364), (100.0, 10.0), (2.5, 300.0),
                 (4645.3, 7213.4), (0.5, 1e-8), (1e4, 1.1e4)]:
        # (from whichever of P and Q is the smaller, whose digits mpmath keeps)
        if mpmath.gammainc(a, 0, x, regularized=True) < 0.5:
            lower = mpmath.diff(lambda s, x=x: mpmath.gammainc(s, 0, x, regularized=True), a)
        else:
            lower = -mpmath.diff(
                lambda s, x=x: mpmath.gammainc(s, x, mpmath.inf, regularized=True), a)
        got_lower, _ = gradients("gammainc", a, x)
        got_upper, _ = gradients("gammaincc", a, x)
        assert abs(got_lower - float(lower)) <= 1e-11 * abs(float(lower)), (a, x)
        assert abs(got_upper + float(lower)) <= 1e-11 * abs(float(lower)), (a, x)
    for a, b, x in [(19.14320673865854, 28.417884299484832, 2.6468270102234145e-13),
                    (2304.2, 255.2, 0.6389), (0.3, 50.0, 0.9), (200.0, 3.0, 0.2)]:
        def f(s, t, a=a, b=b, x=x):
            # (the smaller of I and 1 - I, whose digits mpmath keeps, with I's sign)
            if mpmath.betainc(a, b, 0, x, regularized=True) < 0.5:
                return mpmath.betainc(s, t, 0, x, regularized=True)
            return -mpmath.betainc(t, s, 0, 1 - mpmath.mpf(x), regularized=True)

        d_a = float(mpmath.diff(lambda s, b=b: f(s, b), a))
        d_b = float(mpmath.diff(lambda t, a=a: f(a, t), b))
        got_a, got_b, _ = gradients("betainc", a, b, x)
        assert abs(got_a - d_a) <= 1e-11 * abs(d_a), (a, b, x, got_a, d_a)
        assert abs(got_b - d_b) <= 1e-11 * abs(d_b), (a, b, x, got_b, d_b)


def test_shape_derivatives_are_zero_where_the_function_is_constant():
    a = anb.tensor([2.0, 2.0, 0.0], requires_grad=True)
    x = anb.tensor([0.0, np.inf, 1.0], requires_grad=True)
    ga, gx = anb.grad(ssp.gammainc(a, x).sum(), [a, x])
    np.testing.assert_array_equal(ga.numpy(), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(gx.numpy(), [0.0, 0.0, 0.0])


# -- second derivatives and their errors -------------------------------------------------------


@pytest.mark.parametrize("name, domain", [("gamma", (0.3, 4)), ("rgamma", (-0.8, 4)),
                                          ("erfcinv", (0.05, 1.95))])
def test_unary_gradients_to_second_order(name, domain):
    x = np.random.default_rng(11).uniform(*domain, (2, 3))
    check_gradients(getattr(ssp, name), [x])


def test_beta_gradients_to_second_order():
    rng = np.random.default_rng(12)
    a, b = rng.uniform(0.3, 5, (2, 2, 3))
    check_gradients(ssp.beta, [a, b])
    check_gradients(ssp.betaln, [a, b])


def test_incomplete_functions_in_x_to_second_order():
    rng = np.random.default_rng(13)
    a, b = rng.uniform(0.5, 5, (2, 5))
    x = rng.uniform(0.1, 0.9, 5)
    check_gradients(lambda t: ssp.gammainc(a, 4 * t), [x])
    check_gradients(lambda t: ssp.gammaincc(a, 4 * t), [x])
    check_gradients(lambda t: ssp.betainc(a, b, t), [x])


def test_shape_derivatives_differentiate_again_in_x():
    rng = np.random.default_rng(14)
    a, b = rng.uniform(0.5, 5, (2, 5))
    x = rng.uniform(0.1, 0.9, 5)
    check_gradients(lambda t: ssp.gammainc(t, 4 * x), [a], second_order=False)

    def mixed(function, arrays, k, step=1e-5):
        # d/dx of the k-th derivative: central differences of SciPy's in both.
        def derivative(*args):
            return central_difference(function, args, k, step)

        return central_difference(derivative, arrays, len(arrays) - 1, step)

    for name, arrays in (("gammainc", [a, 4 * x]), ("gammaincc", [a, 4 * x]),
                         ("betainc", [a, b, x])):
        tensors = [anb.tensor(v, requires_grad=True) for v in arrays]
        firsts = anb.grad(getattr(ssp, name)(*tensors).sum(), tensors, create_graph=True)
        for k, first in enumerate(firsts[:-1]):
            (second,) = anb.grad(first.sum(), tensors[-1])
            expected = mixed(getattr(sc, name), arrays, k)
            np.testing.assert_allclose(second.numpy(), expected, rtol=1e-4, atol=1e-7,
                                       err_msg=f"{name} d/dx d/d{k}")


@pytest.mark.parametrize("name, position, argument", [
    ("gammainc", 0, "a"), ("gammaincc", 0, "a"), ("betainc", 0, "a"), ("betainc", 1, "b")])
def test_a_second_derivative_in_a_shape_parameter_raises(name, position, argument):
    arrays = [np.array([1.5, 3.0]), np.array([2.0, 0.5]), np.array([0.3, 0.6])]
    arrays = arrays[:2] if name.startswith("gammainc") else arrays
    tensors = [anb.tensor(v, requires_grad=True) for v in arrays]
    firsts = anb.grad(getattr(ssp, name)(*tensors).sum(), tensors, create_graph=True)
    base = {"gammaincc": "gammainc"}.get(name, name)  # (gammaincc's is gammainc's, negated)
    with pytest.raises(NotImplementedError, match=f"the derivative of d{base}/d{argument}.* "
                       f"in {argument} is not implemented"):
        anb.grad(firsts[position].sum(), tensors[position])
    # raised before the backward ran: the graph is whole, and a derivative in x still works
    (mixed,) = anb.grad(firsts[position].sum(), tensors[-1])
    assert np.all(np.isfinite(mixed.numpy()))


# -- broadcasting, dtypes, docstrings ----------------------------------------------------------


def test_broadcasting_values_and_gradients():
    rng = np.random.default_rng(15)
    a = rng.uniform(0.5, 4, (2, 1))
    b = rng.uniform(0.5, 4, (3,))
    x = rng.uniform(0.1, 0.9, (1, 3))
    np.testing.assert_allclose(values("betainc", a, b, x), sc.betainc(a, b, x), rtol=1e-13)
    np.testing.assert_allclose(values("gammainc", a, 4 * x), sc.gammainc(a, 4 * x), rtol=1e-13)
    np.testing.assert_allclose(values("beta", a, b), sc.beta(a, b), rtol=1e-13)
    check_gradients(ssp.betainc, [a, b, x], second_order=False)
    check_gradients(ssp.gammaincc, [a, 4 * x], second_order=False)
    check_gradients(ssp.betaln, [a, b], second_order=False)


@pytest.mark.parametrize("name, arity", [("gamma", 1), ("rgamma", 1), ("gammasgn", 1),
                                         ("erfcinv", 1), ("beta", 2), ("betaln", 2),
                                         ("gammainc", 2), ("gammaincc", 2), ("betainc", 3)])
def test_float32_is_the_float64_result_rounded_once(name, arity):
    x = np.random.default_rng(16).uniform(0.1, 0.9, (arity, 7)).astype(np.float32)
    got = getattr(ssp, name)(*(anb.tensor(v) for v in x))
    assert got.dtype == np.float32
    expected = values(name, *x.astype(np.float64))
    np.testing.assert_array_equal(got.numpy(), expected.astype(np.float32))


def test_docstring_examples_run():
    for name in NEW:
        function = getattr(ssp, name)
        assert "Examples" in function.__doc__, name
        test = doctest.DocTestParser().get_doctest(function.__doc__, {}, name, None, 0)
        runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
        report = []
        runner.run(test, out=report.append)
        assert runner.failures == 0, "".join(report)
