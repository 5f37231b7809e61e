"""The Bessel functions of ``anb.special`` (``j0 j1 jn y0 y1 yn iv ive``) against SciPy:
values over wide grids of orders and arguments, values at high precision (mpmath) where SciPy
is the less accurate, special values, float32, broadcasting, gradients in ``x`` against float64
central differences to second order, and the error of a gradient through an order (that of
every elementwise input with no derivative formula)."""

import doctest

import mpmath
import numpy as np
import pytest
import scipy.special as sc

import autograd_nb as anb
from autograd_nb.ops.elementwise import ElementwiseOp
from autograd_nb.ops.registry import FUNCTIONS, REGISTRY, DerivativeNotImplemented
from tests.checks import check_gradients

UNARY = ("j0", "j1", "y0", "y1")
ORDERED = ("jn", "yn", "iv", "ive")
NAMES = UNARY + ORDERED
RNG = np.random.default_rng(11)
#: Small, medium and large arguments (negative ones too: NaN for y, symmetric for j and iv).
X = np.concatenate([
    np.exp(RNG.uniform(np.log(1e-12), 0.0, 300)),
    RNG.uniform(-40.0, 40.0, 600),
    np.exp(RNG.uniform(np.log(40.0), np.log(1e4), 300)),
])
WHOLE_ORDERS = np.arange(51.0)[:, None]
REAL_ORDERS = np.concatenate([np.arange(51.0), RNG.uniform(0, 50, 30), [0.5, 1.5, 120.5]])


def reference(name, order, x):
    with np.errstate(all="ignore"):
        return getattr(sc, name)(x) if order is None else getattr(sc, name)(order, x)


def ours(name, order, x, dtype=np.float64):
    function = getattr(anb.special, name)
    tensor = anb.tensor(np.asarray(x, dtype=dtype))
    return (function(tensor) if order is None else function(order, tensor)).numpy()


def modulus(order, x):
    """``sqrt(J**2 + Y**2)``: the scale of J and Y at ``x`` (their zeros have no relative
    accuracy, in SciPy neither)."""
    with np.errstate(all="ignore"):
        return np.hypot(sc.jv(order, np.abs(x)), sc.yv(order, np.abs(x)))


def oscillating_errors(name, order, x):
    """|ours - SciPy| over the modulus, beside SciPy's own error bound at ``x``: Cephes
    rounds ``x - pi/4`` before its cosine, which costs ~|x| eps (measured against mpmath in
    test_high_precision_where_scipy_is_less_accurate)."""
    expected = reference(name, order, x)
    got = ours(name, order, x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(got[~finite], expected[~finite])
    order = np.broadcast_to(0.0 if order is None else order, expected.shape)
    scale = np.maximum(np.abs(expected), modulus(order, np.broadcast_to(x, expected.shape)))
    error = np.abs(got - expected)[finite] / scale[finite]
    bound = 1e-12 + 4e-16 * np.abs(np.broadcast_to(x, expected.shape)[finite])
    return error, bound


def test_the_functions_are_in_anb_special():
    for name in NAMES:
        function = getattr(anb.special, name)
        assert function is FUNCTIONS["special." + name]
        assert function.family == "special" and not function.is_method
        assert REGISTRY[name].family == "special"
        assert name in anb.special.provided() and hasattr(sc, name)
        assert not hasattr(anb, name) and not hasattr(anb.Tensor, name)


@pytest.mark.parametrize("name", ["j0", "j1", "y0", "y1", "jn", "yn"])
def test_j_and_y_match_scipy_over_orders_0_to_50(name):
    order = None if name in UNARY else WHOLE_ORDERS
    error, bound = oscillating_errors(name, order, X)
    assert np.all(error <= bound), error.max()


@pytest.mark.parametrize("name", ["iv", "ive"])
def test_iv_and_ive_match_scipy_over_whole_and_fractional_orders(name):
    x = np.concatenate([np.abs(X), -X[X < 0][:100], [700.0, 709.0, 750.0]])
    v = REAL_ORDERS[:, None]
    expected = reference(name, v, x)
    got = ours(name, v, x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    # (SciPy flushes results below ~1e-290 to 0; iv overflows beyond ~713)
    normal = np.isfinite(expected) & (np.abs(expected) > 1e-290)
    error = np.abs(got - expected)[normal] / np.abs(expected[normal])
    assert error.max() <= 1e-12, error.max()


def test_orders_beyond_the_grid_and_negative_ones():
    x = np.array([0.3, 2.0, 17.0, 60.0, 300.0])
    for n in (-7.0, -2.0, 75.0, 200.0):
        for name in ("jn", "yn"):
            error, bound = oscillating_errors(name, n, x)
            assert np.all(error <= bound), (name, n, error)
    for v in (-3.0, -1.0, 80.25, 500.0):
        expected = reference("ive", v, x)
        normal = np.abs(expected) > 1e-290
        np.testing.assert_allclose(ours("ive", v, x)[normal], expected[normal], rtol=1e-12)


HIGH_PRECISION = [
    ("j0", None, 8483.152319664336), ("y0", None, 8483.152319664336),
    ("y1", None, 9270.062492299141), ("j1", None, 1e300), ("y0", None, 1e300),
    ("jn", 50, 874.5638230512872), ("jn", 26, 291.6339919514326), ("yn", 49, 1880.0707901973),
    ("yn", 3, 1e-5), ("jn", 10, 24.9), ("jn", 10, 25.1), ("yn", 44, 17.195822587761413),
    ("ive", 50, 100.0), ("ive", 30, 29.5), ("ive", 36.48445687669615, 2.0318048726543402e-07),
    ("ive", 300.0, 38.84086628614098), ("ive", 17.2, 1e5), ("iv", 2.5, 200.0),
]


def _mpmath_value(name, order, x):
    with mpmath.workdps(40):
        x = mpmath.mpf(x)
        order = {"j0": 0, "j1": 1, "y0": 0, "y1": 1}.get(name, order)
        if name in ("j0", "j1", "jn"):
            return float(mpmath.besselj(order, x)), float(abs(mpmath.hankel1(order, x)))
        if name in ("y0", "y1", "yn"):
            return float(mpmath.bessely(order, x)), float(abs(mpmath.hankel1(order, x)))
        value = mpmath.besseli(order, x) * (mpmath.exp(-x) if name == "ive" else 1)
        return float(value), abs(float(value))


@pytest.mark.parametrize("name, order, x", HIGH_PRECISION)
def test_high_precision_where_scipy_is_less_accurate(name, order, x):
    value, scale = _mpmath_value(name, order, x)
    got = ours(name, order, np.array([x]))[0]
    assert abs(got - value) <= 4e-15 * scale, (got, value)


SPECIAL_X = np.array([np.nan, 0.0, -0.0, 1e-300, 1e-8, 1.0, -1.0, -40.0, 700.0, -700.0])


@pytest.mark.parametrize("name, order", [(n, None) for n in UNARY] + [
    ("jn", 0), ("jn", 3), ("jn", -3), ("yn", 2), ("yn", -3), ("yn", 2.7),
    ("yn", -2.7), ("yn", np.inf), ("iv", 0), ("iv", 3), ("iv", -2), ("iv", 0.5), ("iv", np.inf),
    ("ive", 1), ("ive", -4), ("ive", 2.5), ("ive", np.nan),
])
def test_special_values_match_scipy(name, order):
    expected = reference(name, order, SPECIAL_X)
    got = ours(name, order, SPECIAL_X)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(got[np.isinf(expected)], expected[np.isinf(expected)])
    finite = np.isfinite(expected) & ~(np.abs(expected) < 1e-290)  # (SciPy flushes to 0)
    scale = np.abs(expected)
    if name not in ("iv", "ive"):  # (the bound of oscillating_errors)
        scale = np.maximum(scale, modulus(0.0 if order is None else order, SPECIAL_X))
        scale *= 1 + 4e-3 * np.abs(SPECIAL_X)
    assert np.all(np.abs(got - expected)[finite] <= 1e-13 * scale[finite])


#: Where we differ from SciPy on purpose, as ``i0``/``i1`` do (tests/ops/test_special.py):
#: at x = +-inf the limits (SciPy: NaN), and jn's at n = inf; at subnormal x SciPy's iv is
#: NaN, ours the series; at |x| = 1e300 SciPy's j and y round x - pi/4 (ours match mpmath,
#: see HIGH_PRECISION) and its ive is NaN (ours 1 / sqrt(2 pi x)).
DIFFERENT = [
    ("j0", None, [np.inf, -np.inf], [0.0, 0.0]), ("jn", 4, [np.inf, -np.inf], [0.0, 0.0]),
    ("jn", np.inf, [-1.0, 40.0], [0.0, 0.0]),
    ("y1", None, [np.inf, -np.inf], [0.0, np.nan]), ("yn", 3, [np.inf], [0.0]),
    ("iv", 2, [np.inf, -np.inf], [np.inf, np.inf]), ("iv", 3, [-np.inf], [-np.inf]),
    ("iv", 0.5, [np.inf, -np.inf], [np.inf, np.nan]), ("ive", 1, [np.inf, -np.inf], [0.0, 0.0]),
    ("iv", 0, [1e-310], [1.0]), ("iv", 1, [1e-310], [5e-311]),
    ("ive", 1, [1e300, -1e300], [1 / np.sqrt(2e300 * np.pi), -1 / np.sqrt(2e300 * np.pi)]),
]


@pytest.mark.parametrize("name, order, x, expected", DIFFERENT)
def test_values_where_we_differ_from_scipy_on_purpose(name, order, x, expected):
    np.testing.assert_allclose(ours(name, order, np.array(x)), expected, rtol=1e-15)


def test_negative_fractional_orders_of_iv_are_scipys():
    # (I_-v = I_v + (2 / pi) sin(pi v) K_v: SciPy's own function; test_bessel_scipy.py)
    got = ours("iv", -0.5, [0.0, 0.3, 4.0, -1.0])
    np.testing.assert_array_equal(got, sc.iv(-0.5, [0.0, 0.3, 4.0, -1.0]))
    assert got[0] == np.inf and np.isfinite(got[1:3]).all() and np.isnan(got[3])


def test_jn_of_a_non_integer_order_is_jv_and_yn_truncates_it():
    # (as SciPy's jn and yn; test_bessel_scipy.py holds them over many orders)
    np.testing.assert_array_equal(ours("jn", 2.5, [1.0, 3.0]), sc.jv(2.5, [1.0, 3.0]))
    np.testing.assert_array_equal(ours("yn", 2.9, [1.0, 3.0]), ours("yn", 2, [1.0, 3.0]))
    np.testing.assert_array_equal(ours("yn", -2.9, [1.0, 3.0]), ours("yn", -2, [1.0, 3.0]))


def test_negative_x_follows_scipy():
    x = np.array([-0.5, -3.0, -50.0])
    assert np.isnan(ours("y0", None, x)).all() and np.isnan(ours("yn", 2, x)).all()
    assert np.isnan(ours("iv", 0.5, x)).all() and np.isnan(ours("ive", 2.5, x)).all()
    np.testing.assert_allclose(ours("jn", 3, x), -ours("jn", 3, -x), rtol=0)
    np.testing.assert_allclose(ours("iv", 3, x), -ours("iv", 3, -x), rtol=0)
    np.testing.assert_allclose(ours("ive", 3, x), sc.ive(3, x), rtol=1e-13)


@pytest.mark.parametrize("name", NAMES)
def test_float32_is_the_float64_result_rounded(name):
    order = None if name in UNARY else 2.0
    x = np.abs(X[::7]).astype(np.float32)
    got = ours(name, order, x, np.float32)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, ours(name, order, x.astype(np.float64)).astype(np.float32))
    expected = reference(name, None if order is None else np.float32(order), x)
    assert expected.dtype == np.float32
    close = np.isfinite(expected) & (np.abs(expected) > 1e-30)
    scale = np.maximum(np.abs(expected), 1e-7 * modulus(order or 0.0, x)
                       if name not in ("iv", "ive") else 0.0)
    assert np.all(np.abs(got - expected)[close] <= 4e-7 * scale[close])


def test_orders_broadcast_with_x():
    n = np.array([[0.0], [1.0], [4.0]])
    x = np.array([0.5, 2.0, 9.0, 30.0])
    for name in ORDERED:
        got = getattr(anb.special, name)(anb.tensor(n), anb.tensor(x))
        assert got.shape == (3, 4)
        np.testing.assert_allclose(got.numpy(), reference(name, n, x), rtol=1e-13)


# -- gradients ---------------------------------------------------------------------------------

POINTS = {"j": np.array([[-7.3, -0.4, 0.9], [3.1, 12.0, 31.5]]),
          "y": np.array([[0.4, 0.9, 2.2], [5.5, 12.0, 31.5]]),
          "i": np.array([[-3.1, -0.4, 0.9], [2.2, 5.5, 8.5]])}
GRADIENT_CASES = [("j0", None), ("j1", None), ("jn", 0), ("jn", 3), ("jn", -2), ("y0", None),
                  ("y1", None), ("yn", 2), ("yn", -3), ("iv", 0), ("iv", 2), ("iv", -1),
                  ("ive", 1), ("ive", 3)]


@pytest.mark.parametrize("name, order", GRADIENT_CASES)
def test_gradients_in_x_to_second_order(name, order):
    function = getattr(anb.special, name)
    call = function if order is None else (lambda t: function(order, t))
    check_gradients(call, [POINTS[name[0]]], rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name, v", [("iv", 0.5), ("iv", 2.75), ("ive", 1.5), ("ive", 0.25)])
def test_gradients_at_fractional_orders(name, v):
    function = getattr(anb.special, name)
    x = np.array([0.3, 1.7, 6.0, 33.0 if name == "ive" else 8.5])
    check_gradients(lambda t: function(v, t), [x], rtol=1e-6, atol=1e-8)


def test_derivatives_chain_within_the_family():
    x = anb.tensor([0.7, 3.0, 28.0], requires_grad=True)
    plain = x.numpy()
    (first,) = anb.grad(anb.special.j0(x).sum(), x, create_graph=True)
    (second,) = anb.grad(first.sum(), x)
    np.testing.assert_allclose(first.numpy(), -sc.j1(plain), rtol=1e-13)
    np.testing.assert_allclose(second.numpy(), -sc.jvp(1, plain), rtol=1e-12)
    (first,) = anb.grad(anb.special.yn(3, x).sum(), x)
    np.testing.assert_allclose(first.numpy(), sc.yvp(3, plain), rtol=1e-12)
    (first,) = anb.grad(anb.special.iv(2.5, x).sum(), x)
    np.testing.assert_allclose(first.numpy(), sc.ivp(2.5, plain), rtol=1e-12)
    (first,) = anb.grad(anb.special.ive(2.5, x).sum(), x)
    expected = (sc.ivp(2.5, plain) - sc.iv(2.5, plain)) * np.exp(-plain)
    np.testing.assert_allclose(first.numpy(), expected, rtol=1e-12)


def test_derivatives_at_zero():
    x = anb.tensor([0.0], requires_grad=True)
    cases = [(anb.special.j0, 0.0), (anb.special.j1, 0.5),
             (lambda t: anb.special.jn(1, t), 0.5), (lambda t: anb.special.jn(2, t), 0.0),
             (lambda t: anb.special.iv(1, t), 0.5), (lambda t: anb.special.iv(0, t), 0.0),
             (lambda t: anb.special.iv(2.5, t), 0.0), (lambda t: anb.special.ive(1, t), 0.5)]
    for function, expected in cases:
        (first,) = anb.grad(function(x).sum(), x, create_graph=True)
        assert first.item() == expected
        (second,) = anb.grad(first.sum(), x)
        assert np.isfinite(second.item())
    (first,) = anb.grad(anb.special.iv(0.5, x).sum(), x)
    assert first.item() == np.inf  # sqrt(2 / (pi x)) sinh(x)'s slope at 0


# -- the order: no derivative -----------------------------------------------------------------

# (the public ones: the incomplete functions' derivative ops, whose shape parameters have no
# derivative either, are tested in test_special.py)
NOT_IMPLEMENTED = sorted(
    name for name, op in REGISTRY.items()
    if isinstance(op, ElementwiseOp) and op.not_implemented and "special." + name in FUNCTIONS
)


def test_the_orders_are_the_inputs_without_a_derivative():
    found = {name: [REGISTRY[name].input_names[k] for k in REGISTRY[name].not_implemented]
             for name in NOT_IMPLEMENTED}
    assert found == {"iv": ["v"], "ive": ["v"], "jn": ["n"], "polygamma": ["order"],
                     "yn": ["n"], "jv": ["v"], "yv": ["v"], "kv": ["v"], "kve": ["v"]}


@pytest.mark.parametrize("name", NOT_IMPLEMENTED)
def test_a_gradient_through_an_input_without_a_derivative_raises(name):
    op = REGISTRY[name]
    function = FUNCTIONS["special." + name]
    (k,) = op.not_implemented
    argument = op.input_names[k]
    order = anb.tensor([1.0, 2.0], requires_grad=True)
    x = anb.tensor([0.5, 3.0], requires_grad=True)
    message = f"the derivative for '{argument}' is not implemented"
    y = function(order, x).sum()
    for request in (lambda: anb.grad(y, [order, x], retain_graph=True),
                    lambda: anb.grad(y, [order], allow_unused=True, retain_graph=True),
                    lambda: anb.grad(y, [order], create_graph=True),
                    lambda: y.backward(retain_graph=True)):
        with pytest.raises(DerivativeNotImplemented, match=message):
            request()
    assert order.grad is None and x.grad is None  # nothing accumulated
    # Only where the gradient is needed (as torch): x's alone, the order a computed Tensor.
    (expected,) = anb.grad(function(1.0 * order.detach(), x).sum(), x)
    (got,) = anb.grad(y, x, retain_graph=True)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())
    y.backward(inputs=[x])
    np.testing.assert_array_equal(x.grad.numpy(), expected.numpy())
    with pytest.raises(DerivativeNotImplemented, match=message):
        anb.grad(function(order * 2.0, x).sum(), [order])


def test_a_compiled_function_with_such_an_input_runs_eagerly():
    order = anb.tensor([1.0, 2.0], requires_grad=True)
    x = anb.tensor([0.5, 3.0], requires_grad=True)
    compiled = anb.compile(lambda n, t: anb.special.jn(n, t).sum())
    with pytest.warns(Warning, match="derivative for 'n' is not implemented"):
        y = compiled(order, x)
    (got,) = anb.grad(y, x)
    np.testing.assert_allclose(got.numpy(), sc.jvp([1, 2], x.numpy()), rtol=1e-13)
    with pytest.raises(DerivativeNotImplemented, match="'n'"):
        anb.grad(compiled(order, x), order)


def test_docstring_examples_run():
    for name in NAMES:
        function = getattr(anb.special, name)
        finder = doctest.DocTestFinder()
        runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
        tests = finder.find(function, name, globs={})
        assert tests and tests[0].examples
        for test in tests:
            runner.run(test)
        assert runner.failures == 0, name
