"""The elementwise functions of issue 21, beyond the registry-driven checks that every
elementwise op gets in tests/ops/test_elementwise.py: NumPy's values at special points (NaN,
infinities, signed zeros, halves, integers past 2**53), accuracy in ulps against NumPy, the
composites' gradients to second order and broadcasting, the ``%`` operators, integer dtypes."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import autograd_nb as anb
from autograd_nb.ops.registry import FUNCTIONS, REGISTRY
from tests.checks import check_gradients
from tests.reference import REFERENCE

OPS = "arctan2 hypot logaddexp log2 log10 arcsinh arccosh arctanh remainder floor rint".split()
COMPOSITES = ("exp2 logaddexp2 reciprocal sinc fabs mod deg2rad rad2deg radians degrees "
              "nan_to_num ceil trunc round fmax fmin heaviside").split()
UNARY = [n for n in OPS + COMPOSITES if n in ("log2 log10 arcsinh arccosh arctanh floor ceil "
                                              "trunc rint exp2 reciprocal sinc fabs deg2rad "
                                              "rad2deg radians degrees nan_to_num round").split()]
BINARY = [n for n in OPS + COMPOSITES if n not in UNARY]

#: Largest error against NumPy's float64 functions in ulps, measured on 10**6 points over
#: each sampling range below (and asserted on 20,000 of them): libm's functions against
#: NumPy's own, and the vectorised ``sin``, ``exp``, ``log1p`` (ops/_fastmath.py) inside
#: sinc and logaddexp. The rest are exact (the same arithmetic as NumPy's).
MAX_ULP = {
    "arctan2": 1, "hypot": 0, "log2": 1, "log10": 1, "arcsinh": 1, "arccosh": 2,
    "arctanh": 2, "exp2": 1, "sinc": 2, "logaddexp": 1, "logaddexp2": 2,
}
EXACT = ("remainder mod fmax fmin floor ceil trunc rint round deg2rad rad2deg radians degrees "
         "reciprocal fabs nan_to_num heaviside").split()


def sample(name, rng, n):
    """Arguments over the range that ``MAX_ULP`` was measured on."""
    wide = lambda: rng.uniform(-50, 50, n)  # noqa: E731
    log_uniform = lambda low, high: np.exp(rng.uniform(np.log(low), np.log(high), n))  # noqa: E731
    return {
        "log2": [log_uniform(1e-300, 1e300)],
        "log10": [log_uniform(1e-300, 1e300)],
        "arcsinh": [wide()],
        "arccosh": [1 + log_uniform(1e-12, 1e12)],
        "arctanh": [rng.uniform(-1, 1, n)],
        "exp2": [rng.uniform(-1070, 1020, n)],
        "sinc": [rng.uniform(-20, 20, n)],
        # away from results near 0 (x1 near -x2), where NumPy's cancels as ours does
        "logaddexp": [rng.uniform(1, 50, n), wide()],
        "logaddexp2": [rng.uniform(1, 50, n), wide()],
        "arctan2": [wide(), wide()],
        "hypot": [wide(), wide()],
    }.get(name, [wide()] * (2 if name in BINARY else 1))


def call(name, arrays):
    return getattr(anb, name)(*(anb.tensor(a) for a in arrays)).numpy()


def test_public_names_families_and_docs():
    for name in OPS + COMPOSITES:
        assert getattr(anb, name) is FUNCTIONS[name], name
        assert FUNCTIONS[name].family == "elementwise"
    for name in OPS:
        assert REGISTRY[name].family == "elementwise"
    for name in COMPOSITES:
        assert name not in REGISTRY  # no kernel of its own
        assert "Examples" in FUNCTIONS[name].__doc__, name


@pytest.mark.parametrize("name", sorted(MAX_ULP))
def test_accuracy_against_numpy_in_ulps(name):
    rng = np.random.default_rng(0)
    arrays = sample(name, rng, 20000)
    expected = REFERENCE[name](*arrays)
    got = call(name, arrays)
    finite = np.isfinite(expected) & (expected != 0)
    errors = np.abs(got[finite] - expected[finite]) / np.spacing(np.abs(expected[finite]))
    assert errors.max() <= MAX_ULP[name], errors.max()


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -2.5, 2.5,
                    0.49999999999999994, 1e-310, 5e-324, 1e300, -1e300, 2.0**52 + 1, 1e16 + 2,
                    2.0, 8.0, 1000.0, 0.1, 0.9999999999999999])
PAIR_VALUES = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -3.5, 1e-310])
PAIRS = np.array(list(itertools.product(PAIR_VALUES, repeat=2))).T


def assert_matches(got, expected, max_ulp, zero_signs=True):
    """NaN where NumPy has NaN, the same infinities, zeros (and their signs, unless not
    ``zero_signs``), and the finite values within ``max_ulp``."""
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    exact = ~np.isfinite(expected) | (expected == 0)
    exact &= ~np.isnan(expected)
    np.testing.assert_array_equal(got[exact], expected[exact])
    if zero_signs:
        np.testing.assert_array_equal(np.signbit(got[exact]), np.signbit(expected[exact]))
    rest = ~exact & ~np.isnan(expected)
    with np.errstate(over="ignore"):
        errors = np.abs(got[rest] - expected[rest]) / np.spacing(np.abs(expected[rest]))
    assert errors.max(initial=0) <= max_ulp, errors.max()


@pytest.mark.parametrize("name", UNARY)
def test_special_values_match_numpy(name):
    with np.errstate(all="ignore"):
        expected = REFERENCE[name](SPECIAL)
    assert_matches(call(name, [SPECIAL]), expected, MAX_ULP.get(name, 0))


@pytest.mark.parametrize("name", BINARY)
def test_special_value_pairs_match_numpy(name):
    with np.errstate(all="ignore"):
        expected = REFERENCE[name](*PAIRS)
    # NumPy's fmax(-0.0, 0.0) is -0.0 or 0.0 depending on the array's length (its SIMD loop)
    assert_matches(call(name, list(PAIRS)), expected, MAX_ULP.get(name, 0),
                   zero_signs=name not in ("fmax", "fmin"))


@pytest.mark.parametrize("name", OPS + COMPOSITES)
def test_float32_in_float32_out(name):
    arrays = [np.linspace(1.1, 3.0, 7).astype(np.float32)] * (2 if name in BINARY else 1)
    got = getattr(anb, name)(*(anb.tensor(a) for a in arrays))
    assert got.dtype == np.float32
    with np.errstate(all="ignore"):
        expected = REFERENCE[name](*arrays)
    assert expected.dtype == np.float32
    np.testing.assert_allclose(got.numpy(), expected, rtol=2e-7)


def test_rounding_keeps_integers_and_their_dtype():
    big = np.array([2**62 + 1, -(2**62) - 3, 7, -7], dtype=np.int64)
    for name in ("floor", "ceil", "trunc", "round"):
        got = getattr(anb, name)(anb.tensor(big))
        assert got.dtype == REFERENCE[name](big).dtype == np.int64
        np.testing.assert_array_equal(got.numpy(), big)
    got = anb.rint(anb.tensor(big))  # NumPy's rint gives floats for integers
    assert got.dtype == np.rint(big).dtype == np.float64
    np.testing.assert_array_equal(got.numpy(), np.rint(big))
    flags = np.array([True, False])
    assert anb.floor(anb.tensor(flags)).dtype == np.floor(flags).dtype
    np.testing.assert_array_equal(anb.round(anb.tensor(big[2:]), -1).numpy(),
                                  np.round(big[2:], -1))


@pytest.mark.parametrize("decimals", [-2, -1, 0, 1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_round_with_decimals_is_numpys_arithmetic(decimals, dtype):
    x = (np.random.default_rng(1).uniform(-500, 500, 200)).astype(dtype)
    x[:4] = [2.675, -0.125, 1.5, 250.0]
    got = anb.round(anb.tensor(x), decimals)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.numpy(), np.round(x, decimals))
    np.testing.assert_array_equal(anb.tensor(x).round(decimals).numpy(), x.round(decimals))


def test_integer_and_bool_arguments_follow_numpy():
    i = np.array([-7, -3, 0, 4, 9])
    j = np.array([3, -2, 5, 3, -4])
    for name in ("remainder", "mod", "fmax", "fmin"):
        got = getattr(anb, name)(anb.tensor(i), anb.tensor(j))
        expected = REFERENCE[name](i, j)
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got.numpy(), expected)
    for name in ("fabs", "reciprocal", "log2", "exp2", "arcsinh", "sinc", "deg2rad"):
        assert getattr(anb, name)(anb.tensor(j)).dtype == np.float64, name
    np.testing.assert_array_equal(anb.nan_to_num(anb.tensor(i)).numpy(), i)
    np.testing.assert_array_equal(anb.heaviside(anb.tensor(i), anb.tensor(j)).numpy(),
                                  np.heaviside(i, j))


# -- gradients -----------------------------------------------------------------------------------

#: Composites and where to check them (away from kinks and jumps).
COMPOSITE_CASES = {
    "exp2": [np.array([[-1.3, 0.2, 2.5], [0.7, -0.4, 1.1]])],
    "logaddexp2": [np.array([[-1.3, 0.2, 2.5], [0.7, -0.4, 1.1]]), np.array([0.3, -2.0, 1.6])],
    "reciprocal": [np.array([[-1.3, 0.2, 2.5], [0.7, -0.4, 1.1]])],
    "sinc": [np.array([[-1.3, 0.2, 2.5], [0.7, -0.4, 1.1]])],
    "fabs": [np.array([[-1.3, 0.2, 2.5], [0.7, -0.4, 1.1]])],
    "mod": [np.array([[-1.3, 0.2, 2.5], [0.7, -0.4, 1.1]]), np.array([0.9, -0.7, 1.6])],
    "deg2rad": [np.array([[-130.0, 20.0], [70.0, -4.0]])],
    "rad2deg": [np.array([[-1.3, 0.2], [0.7, -0.4]])],
    "radians": [np.array([[-130.0, 20.0], [70.0, -4.0]])],
    "degrees": [np.array([[-1.3, 0.2], [0.7, -0.4]])],
    "nan_to_num": [np.array([[-1.3, 0.2, 2.5], [0.7, -0.4, 1.1]])],
    "round": [np.array([[-1.3, 0.2, 2.4], [0.7, -0.4, 1.1]])],
    "heaviside": [np.array([[-1.3, 0.2, 2.5], [0.7, -0.4, 1.1]]), np.array([0.3, 0.5, 0.7])],
    "ceil": [np.array([[-1.3, 0.2, 2.4], [0.7, -0.4, 1.1]])],
    "trunc": [np.array([[-1.3, 0.2, 2.4], [0.7, -0.4, 1.1]])],
    "fmax": [np.array([[-1.3, 0.2, 2.5], [0.7, -0.4, 1.1]]), np.array([0.3, -2.0, 1.6])],
    "fmin": [np.array([[-1.3, 0.2, 2.5], [0.7, -0.4, 1.1]]), np.array([0.3, -2.0, 1.6])],
}


@pytest.mark.parametrize("name", COMPOSITES)
def test_composite_gradients_to_second_order(name):
    check_gradients(getattr(anb, name), COMPOSITE_CASES[name])


def test_zero_gradient_functions_give_zeros():
    x = anb.tensor([-1.5, -0.2, 0.3, 2.5], requires_grad=True)
    for name in ("floor", "ceil", "trunc", "rint", "round"):
        y = getattr(anb, name)(x)
        assert y.requires_grad and y.grad_fn is not None
        (g,) = anb.grad(y.sum(), x)
        np.testing.assert_array_equal(g.numpy(), np.zeros(4))
    (g,) = anb.grad(anb.heaviside(x, 0.5).sum(), x)
    np.testing.assert_array_equal(g.numpy(), np.zeros(4))


def test_sinc_at_zero():
    x = anb.tensor([0.0, 0.25], requires_grad=True)
    y = anb.sinc(x)
    np.testing.assert_allclose(y.numpy(), np.sinc(x.numpy()), rtol=4e-16)
    (g,) = anb.grad(y.sum(), x, create_graph=True)
    assert g.numpy()[0] == 0.0
    (h,) = anb.grad(g.sum(), x)
    assert np.isfinite(h.numpy()).all()


def test_nan_to_num_gradient_flows_where_finite():
    x = anb.tensor([np.nan, np.inf, -np.inf, 2.0], requires_grad=True)
    y = anb.nan_to_num(x, nan=1.0, posinf=5.0)
    np.testing.assert_array_equal(y.numpy(), [1.0, 5.0, np.finfo(np.float64).min, 2.0])
    (g,) = anb.grad(y.sum(), x)
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0, 0.0, 1.0])
    x32 = anb.tensor(np.array([np.inf, -np.inf], np.float32))
    np.testing.assert_array_equal(anb.nan_to_num(x32).numpy(), np.nan_to_num(x32.numpy()))


def test_heaviside_gradient_reaches_x2_where_x1_is_zero():
    x1 = anb.tensor([-1.0, 0.0, 2.0, 0.0])
    x2 = anb.tensor([0.3, 0.4, 0.5, 0.6], requires_grad=True)
    (g,) = anb.grad(anb.heaviside(x1, x2).sum(), x2)
    np.testing.assert_array_equal(g.numpy(), [0.0, 1.0, 0.0, 1.0])


def test_fmax_fmin_gradients_go_where_the_value_comes_from():
    a = anb.tensor([1.0, np.nan, 3.0, 2.0, np.nan], requires_grad=True)
    b = anb.tensor([2.0, 1.0, np.nan, 2.0, np.nan], requires_grad=True)
    for name in ("fmax", "fmin"):
        ga, gb = anb.grad(getattr(anb, name)(a, b).sum(), (a, b))
        take_a = [name == "fmin", False, True, True, True]  # ties and NaN pairs to a (torch)
        np.testing.assert_array_equal(ga.numpy(), np.array(take_a, float))
        np.testing.assert_array_equal(gb.numpy(), 1.0 - np.array(take_a, float))


def test_remainder_gradient_in_the_divisor_is_minus_floor():
    a = anb.tensor([5.5, -5.5, 7.0], requires_grad=True)
    b = anb.tensor([2.0, 2.0, -3.0], requires_grad=True)
    ga, gb = anb.grad((a % b).sum(), (a, b))
    np.testing.assert_array_equal(ga.numpy(), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(gb.numpy(), -np.floor(a.numpy() / b.numpy()))


def test_logaddexp_at_equal_infinities_and_ties():
    a = anb.tensor([np.inf, -np.inf, 1.0], requires_grad=True)
    np.testing.assert_array_equal(anb.logaddexp(a, a).numpy(), [np.inf, -np.inf, 1 + np.log(2)])
    b = anb.tensor([1.0, 2.0], requires_grad=True)
    (g,) = anb.grad(anb.logaddexp(b, anb.tensor([1.0, 2.0])).sum(), b)
    np.testing.assert_array_equal(g.numpy(), [0.5, 0.5])


# -- the % operators ---------------------------------------------------------------------------


def test_mod_operators():
    x = anb.tensor([5.5, -5.5, 7.25], requires_grad=True)
    np.testing.assert_array_equal((x % 2.0).numpy(), x.numpy() % 2.0)
    np.testing.assert_array_equal((7.0 % x).numpy(), 7.0 % x.numpy())
    np.testing.assert_array_equal((np.full(3, 9.0) % x).numpy(), 9.0 % x.numpy())
    assert (x % 2.0).grad_fn.name == "remainder"
    (g,) = anb.grad((7.0 % x).sum(), x)
    np.testing.assert_array_equal(g.numpy(), -np.floor(7.0 / x.numpy()))
    y = x * 1.0
    y %= 3.0
    np.testing.assert_array_equal(y.numpy(), x.numpy() % 3.0)
    (g,) = anb.grad(y.sum(), x)
    np.testing.assert_array_equal(g.numpy(), [1.0, 1.0, 1.0])
    i = anb.tensor([7, -7])
    assert (i % 3).dtype == np.int64
    np.testing.assert_array_equal((i % 3).numpy(), [1, 2])


shapes_pair = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3)


@pytest.mark.parametrize("name", ["logaddexp2", "mod", "heaviside"])
@settings(max_examples=8, deadline=None)
@given(shapes=shapes_pair, seed=st.integers(0, 2**16))
def test_binary_composites_broadcast(name, shapes, seed):
    rng = np.random.default_rng(seed)
    a, b = (rng.uniform(0.5, 3, s) for s in shapes.input_shapes)
    if name == "heaviside":
        a = np.where(rng.uniform(size=a.shape) < 0.3, 0.0, a - 1.75)
    function = getattr(anb, name)
    np.testing.assert_allclose(function(anb.tensor(a), anb.tensor(b)).numpy(),
                               REFERENCE[name](a, b), rtol=1e-15)
    if name == "heaviside":  # a step in x1: its finite differences jump at 0
        check_gradients(lambda t: function(anb.tensor(a), t), [b])
    else:
        check_gradients(function, [a, b], second_order=seed % 3 == 0)
