"""gradcheck and gradgradcheck: they pass on correct derivatives, fail (raise or return False)
on wrong ones, and follow torch's rules on which inputs and outputs they check."""

import re
import warnings

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb.autograd import Function, GradcheckError, gradcheck, gradgradcheck


def leaf(shape, seed=0, low=-1.5, high=1.5, dtype=np.float64):
    data = np.random.default_rng(seed).uniform(low, high, size=shape).astype(dtype)
    return anb.tensor(data, requires_grad=True)


class ScaledBackward(Function):
    """x * y whose backward scales the gradient of x by ``factor`` (1 is right)."""

    factor = 1.0

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        return grad_output * y * ScaledBackward.factor, grad_output * x


@pytest.fixture
def scaled():
    yield ScaledBackward
    ScaledBackward.factor = 1.0


def test_exports_and_error_type():
    assert anb.autograd.gradcheck is gradcheck
    assert anb.autograd.gradgradcheck is gradgradcheck
    assert issubclass(GradcheckError, RuntimeError)


@pytest.mark.parametrize(
    "func, shapes",
    [
        (lambda x: anb.sin(x) * x, [(3,)]),
        (lambda x: anb.tanh(x).sum(axis=0), [(2, 3)]),
        (lambda a, b: a @ b, [(2, 3), (3, 2)]),
        (lambda a, b: (a * b, a - b), [(2, 2), (2, 2)]),
        (lambda x: anb.exp(x), [()]),
    ],
)
def test_correct_derivatives_pass(func, shapes):
    inputs = tuple(leaf(s, seed=i) for i, s in enumerate(shapes))
    assert gradcheck(func, inputs)
    assert gradgradcheck(func, inputs)


def test_a_single_tensor_input_and_a_list_output():
    x = leaf((3,))
    assert gradcheck(lambda t: [t * 2.0, anb.square(t)], x)


def test_wrong_backward_raises_with_both_jacobians(scaled):
    scaled.factor = 2.0
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = anb.tensor([3.0, 5.0], requires_grad=True)
    with pytest.raises(GradcheckError) as info:
        gradcheck(scaled.apply, (x, y))
    message = str(info.value)
    assert "Jacobian mismatch for output 0 with respect to input 0" in message
    numerical = message.split("numerical:")[1].split("analytical:")[0]
    analytical = message.split("analytical:")[1]
    # d(x*y)/dx = diag(y); the wrong backward doubles it.
    assert re.findall(r"[-\d.]+", numerical)[:4] == ["3.", "0.", "0.", "5."]
    assert re.findall(r"[-\d.]+", analytical)[:4] == ["6.", "0.", "0.", "10."]


def test_raise_exception_false_returns_false(scaled):
    scaled.factor = 1.5
    inputs = (leaf((2,)), leaf((2,), seed=1))
    assert gradcheck(scaled.apply, inputs, raise_exception=False) is False
    scaled.factor = 1.0
    assert gradcheck(scaled.apply, inputs, raise_exception=False) is True


def test_tolerances_are_honoured(scaled):
    scaled.factor = 1.0 + 1e-4  # a relative error of 1e-4
    inputs = (leaf((3,)), leaf((3,), seed=1))
    assert gradcheck(scaled.apply, inputs, rtol=1e-3)
    assert not gradcheck(scaled.apply, inputs, rtol=1e-6, atol=1e-9, raise_exception=False)


def test_only_inputs_requiring_grad_are_checked(scaled):
    scaled.factor = 2.0  # wrong only for the first input
    x = anb.tensor([1.0, 2.0])
    y = anb.tensor([3.0, 4.0], requires_grad=True)
    assert gradcheck(scaled.apply, (x, y))
    x.requires_grad = True
    assert not gradcheck(scaled.apply, (x, y), raise_exception=False)


def test_non_tensor_inputs_are_passed_through():
    x = leaf((3,))
    assert gradcheck(lambda t, power: t**power, (x, 3.0))


def test_mismatch_names_the_input_by_position(scaled):
    scaled.factor = 2.0
    x = anb.tensor([1.0], requires_grad=True)
    y = anb.tensor([2.0], requires_grad=True)
    with pytest.raises(GradcheckError, match="with respect to input 1"):
        gradcheck(lambda c, a, b: scaled.apply(a, b) * c, (3.0, x, y))


def test_an_output_cut_from_the_graph_must_have_a_zero_numerical_jacobian():
    x = leaf((2,))
    with pytest.raises(GradcheckError, match="expected to be zero"):
        gradcheck(lambda t: anb.tensor(np.sin(t.numpy())), x)
    assert gradcheck(lambda t: (t * 2.0, anb.tensor(np.ones(2))), x)


def test_no_input_requiring_grad_is_an_error():
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        gradcheck(anb.sin, anb.tensor([1.0]))
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        gradgradcheck(anb.sin, (anb.tensor([1.0]),))


def test_float32_inputs_warn():
    x = leaf((2,), dtype=np.float32)
    with pytest.warns(UserWarning, match="not a double precision"):
        gradcheck(lambda t: t * 2.0, x, atol=1e-2, rtol=1e-2, eps=1e-3)


def test_float64_inputs_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gradcheck(lambda t: t * 2.0, leaf((2,)))


def test_inputs_are_restored_bit_for_bit():
    x = leaf((2, 3))
    before = x.numpy().copy()
    version = x._version_number
    gradcheck(lambda t: anb.exp(t).sum(), x)
    np.testing.assert_array_equal(x.numpy(), before)
    assert x._version_number == version and x.grad is None


def test_outputs_not_requiring_grad_in_a_tuple_are_allowed():
    x = leaf((3,))
    assert gradcheck(lambda t: (anb.sin(t), (t > 0).astype(np.float64)), x)


def test_gradgradcheck_with_given_grad_outputs():
    x = leaf((3,))
    v = anb.tensor([1.0, -2.0, 0.5], requires_grad=True)
    assert gradgradcheck(lambda t: anb.sin(t) * t, x, grad_outputs=v)
    v_fixed = anb.tensor([1.0, -2.0, 0.5])  # checked only with respect to x
    assert gradgradcheck(lambda t: anb.sin(t) * t, x, grad_outputs=v_fixed)
    assert gradgradcheck(lambda t: anb.sin(t) * t, x, grad_outputs=np.array([1.0, 2.0, 3.0]))


def test_gradgradcheck_fails_when_the_second_derivative_is_wrong():
    class LinearizedSquare(Function):
        """x²: right first derivative, but its backward treats 2x as a constant."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return grad_output * anb.tensor(2.0 * x.numpy())

    x = leaf((3,))
    assert gradcheck(LinearizedSquare.apply, x)
    assert gradgradcheck(LinearizedSquare.apply, x, raise_exception=False) is False
    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        gradgradcheck(LinearizedSquare.apply, x)
