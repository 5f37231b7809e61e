"""NumPy's own functions on Tensors (``Tensor.__array_ufunc__``, NEP 13, and
``Tensor.__array_function__``, NEP 18): recorded where autograd_nb has the function, a TypeError
naming it where not, and ``np.asarray`` detaching."""

import numpy as np
import pytest

import autograd_nb as anb
from tests.checks import check_gradients

RNG = np.random.default_rng(1)
X = RNG.uniform(0.1, 0.9, (2, 3))
Y = RNG.uniform(0.1, 0.9, (2, 3))
A = RNG.uniform(0.1, 0.9, (2, 3))  # a NumPy constant in the functions below

GRADIENT_CASES = {
    "ufuncs": (lambda x: np.sin(x) + np.exp(np.negative(x)) * np.sqrt(x), [X]),
    "add with a number": (lambda x: np.add(x, 1.0) * np.multiply(2.0, x), [X]),
    "absolute": (lambda x: np.abs(x - 0.5), [X]),
    "binary ufuncs": (lambda x, y: np.power(x, y) + np.maximum(x, y) / np.minimum(x, y), [X, Y]),
    "array first": (lambda x: A + x * (A - x) / (A * x) + A**x - x**A, [X]),
    "array @ tensor": (lambda x: A.T @ x + np.matmul(A.T, x), [X]),
    "sum axis": (lambda x: np.sum(x * x, axis=0), [X]),
    "mean": (lambda x, y: np.mean(x * y, axis=1, keepdims=True), [X, Y]),
    "reshape transpose": (lambda x: np.transpose(np.reshape(x, (3, 2))) * x, [X]),
    "concatenate stack": (
        lambda x, y: np.stack([np.concatenate([x, y]), np.concatenate([y, x * x])]),
        [X, Y],
    ),
    "where": (lambda x, y: np.where(x > y, x, y * 2.0), [X, Y]),
    "max": (lambda x: np.max(x, axis=1) + np.amin(x, axis=0).sum(), [X]),
    "dot outer": (lambda x, y: np.outer(np.dot(x.T, y[:, 0]), x[0]), [X, Y]),
    "einsum": (lambda x, y: np.einsum("ij,kj->ik", x, y), [X, Y]),
    "linalg.matmul": (lambda x, y: np.linalg.matmul(x, y.T), [X, Y]),
}


@pytest.mark.parametrize("name", list(GRADIENT_CASES))
def test_numpy_functions_on_tensors_record(name):
    function, arrays = GRADIENT_CASES[name]
    check_gradients(function, arrays)


def test_results_are_recorded_tensors():
    x = anb.tensor(X, requires_grad=True)
    for result in (
        np.sin(x),
        np.add(x, 1),
        np.sum(x, axis=0),
        np.mean(x),
        np.reshape(x, -1),
        np.concatenate([x, x]),
        A + x,
        A * x,
        A - x,
        A / x,
        A**x,
        A @ x.T,
    ):
        assert isinstance(result, anb.Tensor)
        assert result.grad_fn is not None


def test_array_first_operators_match_tensor_first():
    x = anb.tensor(X, requires_grad=True)
    for array_first, tensor_first in ((A + x, x + A), (A * x, x * A)):
        np.testing.assert_array_equal(array_first.numpy(), tensor_first.numpy())
        assert array_first.grad_fn.name == tensor_first.grad_fn.name
    np.testing.assert_array_equal((A - x).numpy(), A - X)
    np.testing.assert_array_equal((np.float64(2.0) * x).numpy(), 2.0 * X)


def test_a_recorded_array_operand_is_copied():
    """``array * t`` keeps the array's values of the forward that ran, as ``t * array``."""
    x = anb.tensor(X, requires_grad=True)
    a = A.copy()
    y = a * x
    a[...] = 0.0
    (g,) = anb.grad(y.sum(), x)
    np.testing.assert_array_equal(g.numpy(), A)


def test_no_gradient_functions():
    x = anb.tensor(X, requires_grad=True)
    for result, expected in (
        (np.greater(A, x), A > X),
        (np.isnan(x), np.isnan(X)),
        (np.argmax(x, axis=1), np.argmax(X, axis=1)),
        (np.zeros_like(x), np.zeros_like(X)),
    ):
        assert isinstance(result, anb.Tensor) and not result.requires_grad
        np.testing.assert_array_equal(result.numpy(), expected)
    assert np.shape(x) == (2, 3) and np.ndim(x) == 2
    assert np.allclose(x, X) is True and np.array_equal(x, X) is True
    (rows, cols) = np.where(x > 0.5)
    np.testing.assert_array_equal(rows.numpy(), np.where(X > 0.5)[0])


def test_asarray_detaches():
    x = anb.tensor(X, requires_grad=True)
    a = np.asarray(x)
    assert type(a) is np.ndarray and np.shares_memory(a, x.numpy())
    b = np.array(x)
    assert type(b) is np.ndarray and not np.shares_memory(b, x.numpy())
    np.testing.assert_array_equal(b, X)


@pytest.mark.parametrize(
    "call, named",
    [
        (lambda x: np.histogram(x), "numpy.histogram"),
        (lambda x: np.linalg.cond(x[:, :2]), "numpy.linalg.cond"),
        (lambda x: np.spacing(x), "numpy.spacing"),
        (lambda x: np.add.reduce(x), "numpy.add.reduce"),
        (lambda x: np.multiply.outer(x, x), "numpy.multiply.outer"),
        (lambda x: np.sin(x, where=x > 0.5), "numpy.sin: the arguments where"),
    ],
    ids=["histogram", "linalg.cond", "spacing", "reduce", "outer", "where="],
)
def test_unsupported_functions_raise_type_error_naming_them(call, named):
    x = anb.tensor(X, requires_grad=True)
    with pytest.raises(TypeError, match=named.replace(".", r"\.")):
        call(x)


def test_out_is_refused():
    x = anb.tensor(X, requires_grad=True)
    with pytest.raises(TypeError, match=r"numpy\.add with out="):
        np.add(x, 1.0, out=np.empty((2, 3)))
    with pytest.raises(TypeError, match=r"numpy\.sum with out="):
        np.sum(x, out=np.empty(()))
    a = A.copy()
    with pytest.raises(TypeError, match=r"numpy\.add with out="):
        a += x  # would write a recorded result into a NumPy array
    np.testing.assert_array_equal(a, A)
    assert np.sum(x, out=None).requires_grad


def test_other_array_types_answer_for_themselves():
    class Other:
        def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
            return "other"

        def __array_function__(self, func, types, args, kwargs):
            return "other"

    x = anb.tensor(X)
    assert np.add(x, Other()) == "other"
    assert np.concatenate([x, Other()]) == "other"
