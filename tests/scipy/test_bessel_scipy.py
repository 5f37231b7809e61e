"""The Bessel functions whose scalars are SciPy's compiled ones (``jv yv kv kve k0 k1 k0e k1e
i0e i1e``, and ``jn`` at a non-integer order, ``iv``/``ive`` at a negative non-integer one)
against SciPy: values bit for bit (the same C functions) over orders and arguments of every
size and sign, float32, gradients in ``x`` against float64 central differences to second
order and against SciPy's derivatives, the order's error, CPU only, the docstrings."""

import doctest
import warnings

import numpy as np
import pytest
import scipy.special as sc

import autograd_nb as anb
import autograd_nb.scipy.special as anb_scipy_special
from autograd_nb.ops.registry import FUNCTIONS, REGISTRY, DerivativeNotImplemented
from tests.checks import check_gradients

ORDERED = ("jv", "yv", "kv", "kve")
UNARY = ("k0", "k1", "k0e", "k1e", "i0e", "i1e")
NAMES = ORDERED + UNARY
RNG = np.random.default_rng(44)
#: Arguments of every size, both signs, zeros and the edges.
X = np.concatenate([
    np.exp(RNG.uniform(np.log(1e-300), 0.0, 200)), RNG.uniform(-40.0, 40.0, 300),
    np.exp(RNG.uniform(np.log(40.0), np.log(1e5), 100)),
    -np.exp(RNG.uniform(np.log(1e-12), np.log(1e4), 100)),
    [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 700.0, 710.0, -710.0],
])
#: Whole, fractional and negative orders, large ones, and those that are not numbers.
ORDERS = np.concatenate([
    np.arange(-5.0, 51.0), RNG.uniform(-50.0, 50.0, 40), [0.5, -0.5, 1.5, -2.5, 120.5, 500.25],
    [1e4, np.inf, -np.inf, np.nan],
])[:, None]


def scipy_value(name, order, x):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (yn's truncation)
        function = getattr(sc, name)
        return function(x) if order is None else function(order, x)


def ours(name, order, x, dtype=np.float64):
    function = getattr(anb.special, name)
    tensor = anb.tensor(np.asarray(x, dtype=dtype))
    return (function(tensor) if order is None else function(order, tensor)).numpy()


def test_the_functions_are_in_both_namespaces_and_cpu_only():
    for name in NAMES:
        function = getattr(anb.special, name)
        assert function is FUNCTIONS["special." + name] is getattr(anb_scipy_special, name)
        assert REGISTRY[name].family == "special" and REGISTRY[name].cpu_only
        assert REGISTRY[name].cuda_twin is None
        assert name in anb_scipy_special.provided() and hasattr(sc, name)
        assert not hasattr(anb, name) and not hasattr(anb.Tensor, name)


@pytest.mark.parametrize("name", ORDERED)
def test_values_are_scipys_bit_for_bit(name):
    np.testing.assert_array_equal(ours(name, ORDERS, X), scipy_value(name, ORDERS, X))


@pytest.mark.parametrize("name", UNARY)
def test_unary_values_are_scipys_bit_for_bit(name):
    np.testing.assert_array_equal(ours(name, None, X), scipy_value(name, None, X))


def test_negative_x_follows_scipy():
    x = np.array([-0.5, -3.0, -50.0])
    assert np.isnan(ours("jv", 2.5, x)).all()  # (SciPy: NaN at a non-integer order)
    np.testing.assert_array_equal(ours("jv", 3.0, x), -ours("jv", 3.0, -x))
    for name in ("yv", "kv", "kve", "k0", "k1", "k0e", "k1e"):
        order = None if name in UNARY else 1.5
        assert np.isnan(ours(name, order, x)).all(), name
        assert np.isnan(scipy_value(name, order, x)).all(), name
    np.testing.assert_array_equal(ours("i1e", None, x), -ours("i1e", None, -x))


def test_near_zero_and_at_zero():
    x = np.array([0.0, 5e-324, 1e-300, 1e-100, 1e-12, 1e-6])
    for name, order in [("jv", 0.5), ("jv", -0.5), ("jv", 0.0), ("yv", 2.5), ("kv", 0.25),
                        ("kve", 3.0), ("k0", None), ("k1e", None), ("i0e", None)]:
        np.testing.assert_array_equal(ours(name, order, x), scipy_value(name, order, x))


@pytest.mark.parametrize("name", NAMES)
def test_float32_is_the_float64_result_rounded(name):
    order = None if name in UNARY else np.float32(2.5)
    x = np.abs(X[np.isfinite(X)][::5]).astype(np.float32)
    got = ours(name, order, x, np.float32)
    assert got.dtype == np.float32
    with np.errstate(over="ignore", under="ignore"):
        expected = ours(name, order, x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(got, expected)


def test_orders_broadcast_with_x():
    v = np.array([[0.0], [1.5], [-4.25]])
    x = np.array([0.5, 2.0, 9.0, 30.0])
    for name in ORDERED:
        got = getattr(anb.special, name)(anb.tensor(v), anb.tensor(x))
        assert got.shape == (3, 4)
        np.testing.assert_array_equal(got.numpy(), scipy_value(name, v, x))


# -- the existing functions at the orders that need SciPy's ------------------------------------


def test_jn_at_a_non_integer_order_is_jv():
    v = np.array([[2.5], [-0.75], [13.1], [-30.5], [0.5]])
    x = np.concatenate([np.abs(X[:600]), -X[200:260], [0.0]])
    np.testing.assert_array_equal(ours("jn", v, x), scipy_value("jn", v, x))
    np.testing.assert_array_equal(ours("jn", v, x), scipy_value("jv", v, x))


def test_yn_at_a_non_integer_order_truncates_it_as_scipy():
    v = np.array([[2.5], [2.9], [-2.9], [0.3], [-0.7], [7.99]])
    x = np.array([0.3, 1.0, 3.0, 17.0, 60.0])
    expected = scipy_value("yn", v, x)
    np.testing.assert_allclose(ours("yn", v, x), expected, rtol=1e-13)
    np.testing.assert_array_equal(ours("yn", v, x), ours("yn", np.trunc(v), x))


@pytest.mark.parametrize("name", ["iv", "ive"])
def test_iv_and_ive_at_negative_non_integer_orders_are_scipys(name):
    v = np.concatenate([-RNG.uniform(0.0, 40.0, 20), [-0.5, -1.5, -2.25, -100.5]])[:, None]
    x = np.concatenate([np.abs(X), -np.abs(X[:50]), [0.0]])
    np.testing.assert_array_equal(ours(name, v, x), scipy_value(name, v, x))
    assert np.isnan(ours(name, -2.5, [-1.0])).all()
    assert ours("iv", -2.5, [0.0])[0] == np.inf and np.isnan(ours("ive", -2.5, [0.0])).all()


# -- gradients ---------------------------------------------------------------------------------

POINTS = {"j": np.array([[0.4, 0.9, 2.2], [5.5, 12.0, 31.5]]),
          "jneg": np.array([[-7.3, -0.4, 0.9], [3.1, 12.0, 31.5]]),
          "y": np.array([[0.4, 0.9, 2.2], [5.5, 12.0, 31.5]]),
          "k": np.array([[0.2, 0.9, 2.2], [5.5, 12.0, 31.5]]),
          "i": np.array([[-3.1, -0.4, 0.9], [2.2, 5.5, 40.0]]),
          # (where the function spans few magnitudes: the second derivative's differences
          # are of a sum over the points)
          "small": np.array([[0.4, 0.9, 2.2], [3.1, 5.5, 8.5]]),
          "ksmall": np.array([[0.9, 1.7, 2.2], [5.5, 12.0, 31.5]])}
GRADIENT_CASES = [
    ("jv", 2.5, "j"), ("jv", -1.25, "j"), ("jv", 0.0, "jneg"), ("jv", 3.0, "jneg"),
    ("jv", 40.5, "j"), ("yv", 0.5, "y"), ("yv", -2.75, "y"), ("yv", 3.0, "y"),
    ("kv", 0.0, "k"), ("kv", 2.5, "k"), ("kv", -1.75, "k"), ("kve", 0.25, "k"),
    ("kve", 4.0, "ksmall"), ("k0", None, "k"), ("k1", None, "k"), ("k0e", None, "k"),
    ("k1e", None, "k"), ("i0e", None, "i"), ("i1e", None, "i"),
    ("jn", 2.5, "j"), ("jn", -0.75, "j"), ("iv", -2.5, "small"), ("ive", -0.25, "j"),
]


@pytest.mark.parametrize("name, order, points", GRADIENT_CASES)
def test_gradients_in_x_to_second_order(name, order, points):
    function = getattr(anb.special, name)
    call = function if order is None else (lambda t: function(order, t))
    check_gradients(call, [POINTS[points]], rtol=1e-6, atol=1e-8)


def test_first_derivatives_are_scipys():
    x = np.array([0.3, 1.7, 6.0, 28.0])
    derivatives = {"jv": sc.jvp, "yv": sc.yvp, "kv": sc.kvp}
    for name, order in [("jv", 2.5), ("jv", -1.5), ("yv", 0.75), ("kv", 3.25), ("kv", -0.5)]:
        t = anb.tensor(x, requires_grad=True)
        (got,) = anb.grad(getattr(anb.special, name)(order, t).sum(), t)
        np.testing.assert_allclose(got.numpy(), derivatives[name](order, x), rtol=1e-12)
    t = anb.tensor(x, requires_grad=True)
    (got,) = anb.grad(anb.special.kve(1.5, t).sum(), t)
    np.testing.assert_allclose(got.numpy(), (sc.kvp(1.5, x) + sc.kv(1.5, x)) * np.exp(x),
                               rtol=1e-12)
    (got,) = anb.grad(anb.special.iv(-2.5, t).sum(), t)
    np.testing.assert_allclose(got.numpy(), sc.ivp(-2.5, x), rtol=1e-12)


def test_derivatives_at_zero():
    x = anb.tensor([0.0], requires_grad=True)
    cases = [(lambda t: anb.special.jv(1.0, t), 0.5), (lambda t: anb.special.jv(0.0, t), 0.0),
             (lambda t: anb.special.jv(2.5, t), 0.0), (lambda t: anb.special.jv(0.5, t), np.inf),
             (anb.special.i0e, -0.0), (anb.special.i1e, 0.5)]
    for function, expected in cases:
        (first,) = anb.grad(function(x).sum(), x)
        assert first.item() == expected


def test_a_gradient_through_the_order_raises():
    for name in ORDERED:
        v = anb.tensor([0.5, 2.0], requires_grad=True)
        x = anb.tensor([0.5, 3.0], requires_grad=True)
        y = getattr(anb.special, name)(v, x).sum()
        with pytest.raises(DerivativeNotImplemented,
                           match="the derivative for 'v' is not implemented"):
            anb.grad(y, [v, x], retain_graph=True)
        assert v.grad is None and x.grad is None
        (gx,) = anb.grad(y, x)
        assert np.isfinite(gx.numpy()).all()


def test_a_cuda_tensor_raises_naming_the_op():
    pytest.importorskip("numba.cuda")
    from autograd_nb.cuda import dispatch

    for name in NAMES:
        with pytest.raises(NotImplementedError, match=f"the op '{name}' has no CUDA"):
            dispatch.lookup(REGISTRY[name])


def test_docstring_examples_run():
    for name in NAMES:
        function = getattr(anb.special, name)
        runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
        tests = doctest.DocTestFinder().find(function, name, globs={})
        assert tests and tests[0].examples
        for test in tests:
            runner.run(test)
        assert runner.failures == 0, name
