"""Wrong results found by differentiating real NumPy code, and their neighbours.

* ``power`` at a base of 0: second derivatives were nan (0 * inf through the untaken branch
  of a ``where``), and the mixed derivative at an exponent of 0 was 0 (a ``where`` on
  ``b == 0`` cut the exponent out).
* ``std`` where it is 0 (one element, equal elements): gradient nan; torch's is 0.
* A list of Tensors as an operand (``mean([x, x + 2])``) silently lost the graph.
* Third-order derivatives through ``_bmm``'s views (``einsum``, ``outer``): the rules saw
  the saved operands in the product's shape instead of their own, so gradients reached the
  operands in the wrong shape (wrong values, or ``reshape``/``transpose`` errors).

Every expected value is a closed form or a central finite difference.
"""

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb.autograd import functional
from tests.checks import check_gradients

EPS = 1e-6


def second_derivative(function, x0):
    """``f''(x0)`` of a scalar function through two ``grad`` calls (the first recorded)."""
    x = anb.tensor(x0, requires_grad=True)
    (first,) = anb.grad(function(x), x, create_graph=True)
    (second,) = anb.grad(first, x)
    return second.item()


def hessian_of_power(a0, b0):
    """The 2x2 Hessian of ``(a, b) -> a ** b`` from ``functional.hessian``."""
    blocks = functional.hessian(anb.power, (anb.tensor(a0), anb.tensor(b0)))
    return np.array([[blocks[i][j].item() for j in range(2)] for i in range(2)])


def power_hessian_closed_form(a, b):
    log_a = np.log(a)
    return np.array(
        [
            [b * (b - 1) * a ** (b - 2), a ** (b - 1) * (b * log_a + 1)],
            [a ** (b - 1) * (b * log_a + 1), a**b * log_a**2],
        ]
    )


# -- power at a base of 0 ------------------------------------------------------------------


@pytest.mark.parametrize(
    "exponent, expected",
    # d²/dx² x**p at x = 0: 0 for a constant and a line, p (p - 1) 0 ** (p - 2) otherwise.
    [(0.0, 0.0), (1.0, 0.0), (2.0, 2.0), (2.5, 0.0), (3.0, 0.0), (0.3, -np.inf)],
)
def test_power_second_derivative_in_the_base_at_zero(exponent, expected):
    assert second_derivative(lambda x: anb.power(x, exponent), 0.0) == expected


@pytest.mark.parametrize("exponent", [0.3, 1.0, 2.5])
def test_power_second_derivative_in_the_exponent_at_zero(exponent):
    # 0 ** y is 0 for every y > 0: all its derivatives are 0.
    assert second_derivative(lambda y: anb.power(0.0, y), exponent) == 0.0


def test_power_second_derivative_over_a_vector_with_zeros():
    x0 = np.array([0.0, 0.5, 2.0, 0.0])
    for p in (0.0, 1.0, 2.0, 3.0):
        x = anb.tensor(x0, requires_grad=True)
        (first,) = anb.grad(anb.power(x, p).sum(), x, create_graph=True)
        (second,) = anb.grad(first.sum(), x)  # the Hessian is diagonal
        expected = [p * (p - 1) * v ** (p - 2) if v or p >= 2 else 0.0 for v in x0]
        np.testing.assert_allclose(second.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("a", [0.7, 1.3])
@pytest.mark.parametrize("b", [0.0, 1.0, 2.0, 0.3, 2.5, -1.0])
def test_power_hessian_away_from_zero(a, b):
    hessian = hessian_of_power(a, b)
    np.testing.assert_allclose(hessian, power_hessian_closed_form(a, b), rtol=1e-10, atol=1e-12)

    # And against central differences of the first-order gradients.
    def gradient(a_, b_):
        return np.array(
            [g.item() for g in functional.jacobian(anb.power, (anb.tensor(a_), anb.tensor(b_)))]
        )

    numeric = np.array(
        [
            (gradient(a + EPS, b) - gradient(a - EPS, b)) / (2 * EPS),
            (gradient(a, b + EPS) - gradient(a, b - EPS)) / (2 * EPS),
        ]
    )
    np.testing.assert_allclose(hessian, numeric, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("b", [2.0, 2.5, 3.0])
def test_power_hessian_at_zero_base(b):
    # At a = 0 and b > 1: a ** (b - 1) (b log a + 1) and a ** b log(a) ** 2 tend to 0.
    expected = [[b * (b - 1) * 0.0 ** (b - 2), 0.0], [0.0, 0.0]]
    np.testing.assert_array_equal(hessian_of_power(0.0, b), expected)


def test_power_first_derivatives_at_zero_keep_their_convention():
    jac = functional.jacobian(anb.power, (anb.tensor(0.0), anb.tensor(0.0)))
    assert [j.item() for j in jac] == [0.0, 0.0]
    jac = functional.jacobian(anb.power, (anb.tensor(0.0), anb.tensor(0.3)))
    assert [j.item() for j in jac] == [np.inf, 0.0]
    jac = functional.jacobian(anb.power, (anb.tensor(0.7), anb.tensor(0.0)))
    np.testing.assert_allclose([j.item() for j in jac], [0.0, np.log(0.7)], rtol=1e-12)


# -- std where it is 0 ---------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(), (1,), (1, 1)])
def test_std_of_one_element_has_zero_gradient(shape):
    x = anb.tensor(np.full(shape, 1.5), requires_grad=True)
    (first,) = anb.grad(anb.std(x), x, create_graph=True)
    np.testing.assert_array_equal(first.numpy(), np.zeros(shape))
    if first.requires_grad:
        (second,) = anb.grad(first.sum(), x)
        np.testing.assert_array_equal(second.numpy(), np.zeros(shape))


@pytest.mark.parametrize("n", [1, 3, 5])
def test_std_of_a_constant_has_zero_gradient(n):
    x = anb.tensor([1.5, 2.0], requires_grad=True)
    (first,) = anb.grad(anb.std(anb.ones(n) * x[0]), x, create_graph=True)
    np.testing.assert_array_equal(first.numpy(), [0.0, 0.0])
    (second,) = anb.grad(first.sum(), x, allow_unused=True, materialize_grads=True)
    np.testing.assert_array_equal(second.numpy(), [0.0, 0.0])


@pytest.mark.parametrize("ddof", [0, 1])
def test_std_over_an_axis_with_constant_rows(ddof):
    x0 = np.array([[1.0, 2.0, 4.0], [3.0, 3.0, 3.0], [0.5, -1.0, 2.0], [-2.0, -2.0, -2.0]])
    x = anb.tensor(x0, requires_grad=True)
    (first,) = anb.grad(anb.std(x, axis=1, ddof=ddof).sum(), x)
    deviation = x0 - x0.mean(axis=1, keepdims=True)
    std = x0.std(axis=1, ddof=ddof, keepdims=True)
    expected = np.divide(deviation, (3 - ddof) * std, out=np.zeros_like(x0), where=std != 0)
    np.testing.assert_allclose(first.numpy(), expected, rtol=1e-12, atol=1e-15)
    assert np.all(first.numpy()[[1, 3]] == 0)
    # Against central differences, which are 0 at a constant row (std is symmetric about
    # it); to second order only on the rows that vary (at a constant row the gradient jumps).
    check_gradients(lambda t: anb.std(t, axis=1, ddof=ddof), [x0], second_order=False)
    check_gradients(lambda t: anb.std(t, axis=1, ddof=ddof), [x0[[0, 2]]])
    (grad,) = anb.grad(anb.std(x, axis=1, ddof=ddof).sum(), x, create_graph=True)
    (second,) = anb.grad((grad * anb.tensor(np.arange(12.0).reshape(4, 3))).sum(), x)
    assert np.all(second.numpy()[[1, 3]] == 0)


def test_std_keeps_float32():
    x = anb.tensor(np.array([2.0, 2.0, 2.0], dtype=np.float32), requires_grad=True)
    result = anb.std(x)
    (grad,) = anb.grad(result, x)
    assert result.dtype == np.float32 and grad.dtype == np.float32
    np.testing.assert_array_equal(grad.numpy(), np.zeros(3, dtype=np.float32))


# -- a list of Tensors as an operand -------------------------------------------------------


X = np.array([[0.5, -1.2, 2.0], [1.5, 0.3, -0.7]])

# Functions of one Tensor that pass it to a public function inside a list, as NumPy code does.
LIST_OPERANDS = {
    "mean": lambda t: anb.mean([t, t + 2]),
    "sum": lambda t: anb.sum([t, t]),
    "sum_axis": lambda t: anb.sum([t, t * t], axis=(0, 2)),
    "prod": lambda t: anb.prod([t, t + 3], axis=0),
    "max": lambda t: anb.max([t, t * 2], axis=0),
    "var": lambda t: anb.var([t, 2 * t + 1], axis=0),
    "std": lambda t: anb.std([t, t * t]),
    "logsumexp": lambda t: anb.logsumexp([t, -t]),
    "exp": lambda t: anb.exp([t[0], t[1]]),
    "add": lambda t: anb.add([t[0], t[1]], t),
    "multiply_tuple": lambda t: anb.multiply(t, (t[1], t[0])),
    "matmul": lambda t: anb.matmul([t[0], t[1]], t.T),
    "einsum": lambda t: anb.einsum("ij,kj->ik", [t[0], t[1] * 2], t),
    "where": lambda t: anb.where(X > 0, [t[0], t[1]], t * 3),
    "transpose": lambda t: anb.transpose([t, t * 2], (2, 0, 1)),
    "reshape": lambda t: anb.reshape([t, t], (3, 4)),
    "expand_dims": lambda t: anb.expand_dims([t[0], t[1]], 1),
    "concatenate_nested": lambda t: anb.concatenate([[t[0], t[1]], t * 3]),
    "nested_with_numbers": lambda t: anb.sum([[t[0, 0], 1.0], [2.0, t[1, 2]]]),
}


@pytest.mark.parametrize("name", sorted(LIST_OPERANDS))
def test_list_of_tensors_is_stacked_and_recorded(name):
    function = LIST_OPERANDS[name]
    x = anb.tensor(X, requires_grad=True)
    assert function(x).requires_grad
    check_gradients(function, [X], second_order=name in ("mean", "var", "std", "matmul"))


def test_list_of_tensors_gives_numpys_value():
    x = anb.tensor(X, requires_grad=True)
    np.testing.assert_allclose(anb.mean([x, x + 2]).numpy(), np.mean([X, X + 2]))
    np.testing.assert_allclose(anb.sum([x, x], axis=0).numpy(), np.sum([X, X], axis=0))
    (grad,) = anb.grad(anb.mean([x, x + 2]), x)
    np.testing.assert_allclose(grad.numpy(), np.full(X.shape, 1 / X.size))


def test_list_of_tensors_in_place():
    w = anb.tensor(3.0, requires_grad=True)
    t = anb.full(2, 2.0)
    t *= [w, w * 2]
    assert anb.grad(t.sum(), w)[0].item() == 2.0 * 1 + 2.0 * 2
    t = anb.zeros(3)
    t[1:] = [w, w * 2]
    assert anb.grad(t.sum(), w)[0].item() == 3.0


# -- third order through _bmm's views (einsum, matmul, dot, outer) ---------------------------


def jvp_of_jvp(function, point, v, w):
    """``d/dt [J(point + t w) v]`` at 0, through two nested ``functional.jvp`` calls."""

    def inner(*inputs):
        return functional.jvp(function, inputs, v, create_graph=True)[1]

    return functional.jvp(inner, point, w)[1].numpy()


def numerical_jvp_of_jvp(function, point, v, w):
    def first(t):
        shifted = tuple(p + t * d for p, d in zip(point, w))
        return functional.jvp(function, shifted, v)[1].numpy()

    return (first(EPS) - first(-EPS)) / (2 * EPS)


def random_point(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [tuple(anb.tensor(rng.standard_normal(s)) for s in shapes) for _ in range(3)]


EINSUMS = [
    ("...ij,...jk->...ik", (2, 3), (2, 3, 4)),
    ("...jk,...lj->...lk", (3, 4, 4), (4, 4)),
    ("...ij,...jk->...ik", (3, 1, 2, 3), (4, 3, 2)),
    ("...ij,...jk->...ik", (2, 3, 4), (4, 5)),
    ("...ij,...jk", (2, 2, 3), (1, 3, 4)),
    ("ij,ajk->aik", (2, 3), (2, 3, 4)),
    ("ij,ajk->iak", (2, 3), (2, 3, 4)),
    ("i...,i...->...", (3, 2, 4), (3, 1, 4)),
    ("...i,...i->...", (2, 3), (3,)),
    ("ij...,jk...->ik...", (2, 3, 4), (3, 2, 1)),
]


@pytest.mark.parametrize("subscripts, a_shape, b_shape", EINSUMS)
def test_einsum_jvp_of_jvp(subscripts, a_shape, b_shape):
    def function(a, b):
        return anb.einsum(subscripts, a, b)

    point, v, w = random_point([a_shape, b_shape])
    got = jvp_of_jvp(function, point, v, w)
    np.testing.assert_allclose(got, numerical_jvp_of_jvp(function, point, v, w), atol=1e-7)
    # einsum is bilinear: the derivative is einsum(v_a, w_b) + einsum(w_a, v_b).
    exact = [
        np.einsum(subscripts, *(np.asarray(t) for t in pair))
        for pair in ((v[0], w[1]), (w[0], v[1]))
    ]
    np.testing.assert_allclose(got, exact[0] + exact[1], atol=1e-12)


@pytest.mark.parametrize("subscripts, a_shape, b_shape", EINSUMS[:4])
def test_einsum_of_nonlinear_operands_jvp_of_jvp(subscripts, a_shape, b_shape):
    def function(a, b):
        return anb.einsum(subscripts, anb.sin(a), b * b)

    point, v, w = random_point([a_shape, b_shape], seed=1)
    np.testing.assert_allclose(
        jvp_of_jvp(function, point, v, w),
        numerical_jvp_of_jvp(function, point, v, w),
        rtol=1e-6,
        atol=1e-7,
    )


@pytest.mark.parametrize(
    "function, shapes",
    [
        (anb.matmul, [(2, 1, 3, 4), (5, 4, 2)]),
        (anb.matmul, [(3,), (2, 3, 4)]),
        (anb.dot, [(2, 3), (4, 3, 5)]),
        (anb.outer, [(2, 2), (3,)]),
    ],
)
def test_products_jvp_of_jvp(function, shapes):
    point, v, w = random_point(shapes, seed=2)
    np.testing.assert_allclose(
        jvp_of_jvp(function, point, v, w),
        numerical_jvp_of_jvp(function, point, v, w),
        atol=1e-7,
    )


@pytest.mark.parametrize("subscripts, a_shape, b_shape", EINSUMS[:3])
def test_einsum_vjp_is_twice_differentiable(subscripts, a_shape, b_shape):
    # The first-order VJP as a function of (a, b, grad_output), checked to second order.
    def vjp(a, b, grad_output):
        return anb.grad(anb.einsum(subscripts, a, b), (a, b), grad_output, create_graph=True)

    rng = np.random.default_rng(3)
    a = anb.tensor(rng.standard_normal(a_shape), requires_grad=True)
    b = anb.tensor(rng.standard_normal(b_shape), requires_grad=True)
    out_shape = np.einsum(subscripts, a.numpy(), b.numpy()).shape
    grad_output = anb.tensor(rng.standard_normal(out_shape), requires_grad=True)
    assert anb.autograd.gradgradcheck(vjp, (a, b, grad_output))


@pytest.mark.parametrize("vectorize", [False, True])
def test_jvp_of_a_jacobian_of_outer(vectorize):
    weights = anb.tensor(np.arange(27.0).reshape(3, 3, 3))

    def summed_jacobian(x):
        jacobian = functional.jacobian(
            lambda y: anb.outer(y, y), x, create_graph=True, vectorize=vectorize
        )
        return anb.sum(jacobian * weights)

    x, v = anb.tensor([1.0, 2.0, 3.0]), anb.tensor([0.5, -1.0, 2.0])
    got = functional.jvp(summed_jacobian, (x,), (v,))[1].item()
    numeric = (summed_jacobian(x + EPS * v).item() - summed_jacobian(x - EPS * v).item()) / (
        2 * EPS
    )
    np.testing.assert_allclose(got, numeric, rtol=1e-7)
    # The brief's case: the unweighted sum, d/dx sum_ijk (δik x_j + x_i δjk) · v = 2 n sum(v).
    plain = functional.jvp(
        lambda x: anb.sum(functional.jacobian(lambda y: anb.outer(y, y), x, create_graph=True)),
        (anb.tensor([1.0, 2.0]),),
        (anb.tensor([0.5, -1.0]),),
    )[1]
    assert plain.item() == 2 * 2 * (0.5 - 1.0)
