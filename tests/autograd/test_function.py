"""anb.autograd.Function: torch's custom-function protocol, checked against closed forms,
finite differences and the errors of API.md."""

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb.autograd import Function, GradcheckError, gradcheck, gradgradcheck
from autograd_nb.ops.registry import REGISTRY
from tests.checks import check_gradients


class Exp(Function):
    """exp with a hand-written backward that reuses the saved result."""

    @staticmethod
    def forward(ctx, x):
        y = anb.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y


class WrongExp(Exp):
    """Exp whose backward is 1% off: gradcheck must catch it."""

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y * 1.01


class Mul(Function):
    """x * y, counting its backward calls."""

    calls = 0

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, grad_output):
        Mul.calls += 1
        x, y = ctx.saved_tensors
        return grad_output * y, grad_output * x


class SinCos(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return anb.sin(x), anb.cos(x)

    @staticmethod
    def backward(ctx, grad_sin, grad_cos):
        (x,) = ctx.saved_tensors
        return grad_sin * anb.cos(x) - grad_cos * anb.sin(x)


def values(n=4, seed=0):
    return np.random.default_rng(seed).uniform(-1.5, 1.5, size=n)


# -- values and first derivatives ---------------------------------------------------------------


def test_exp_forward_backward_and_grad_fn():
    a = values()
    x = anb.tensor(a, requires_grad=True)
    y = Exp.apply(x)
    np.testing.assert_allclose(y.numpy(), np.exp(a), rtol=1e-13)
    assert y.requires_grad and not y.is_leaf
    assert repr(y.grad_fn) == "<ExpBackward>"
    assert y.grad_fn.name == "Exp"
    assert y.grad_fn.next_functions == (x,)
    y.backward(anb.ones(4))
    np.testing.assert_allclose(x.grad.numpy(), np.exp(a), rtol=1e-13)


def test_exp_kernel_path_rule_path_and_finite_differences_agree():
    check_gradients(Exp.apply, [values(6).reshape(2, 3)])


def test_function_composes_with_ops_on_both_sides():
    a = values()
    x = anb.tensor(a, requires_grad=True)
    loss = (Exp.apply(anb.sin(x) * 2.0) * x).sum()
    loss.backward()
    expected = np.exp(2 * np.sin(a)) * 2 * np.cos(a) * a + np.exp(2 * np.sin(a))
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)


def test_adapter_op_is_not_registered():
    y = Exp.apply(anb.tensor([1.0], requires_grad=True))
    assert y.grad_fn.op.name == "Exp"
    assert REGISTRY.get("Exp") is not y.grad_fn.op
    assert all(op is not y.grad_fn.op for op in REGISTRY.values())


def test_backward_runs_once_per_pass_for_several_inputs():
    a, b = values(3, 1), values(3, 2)
    x = anb.tensor(a, requires_grad=True)
    y = anb.tensor(b, requires_grad=True)
    Mul.calls = 0
    gx, gy = anb.grad(Mul.apply(x, y).sum(), (x, y))
    assert Mul.calls == 1
    np.testing.assert_allclose(gx.numpy(), b)
    np.testing.assert_allclose(gy.numpy(), a)


def test_retain_graph_allows_a_second_backward():
    x = anb.tensor([0.5, 1.0], requires_grad=True)
    y = Exp.apply(x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp([0.5, 1.0]))


def test_non_tensor_arguments_and_keywords():
    class Affine(Function):
        @staticmethod
        def forward(ctx, x, scale, shift=0.0):
            ctx.scale = scale
            return x * scale + shift

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * ctx.scale, None

    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = Affine.apply(x, 3.0, shift=1.0)
    np.testing.assert_allclose(y.numpy(), [4.0, 7.0])
    (g,) = anb.grad(y.sum(), x)
    np.testing.assert_allclose(g.numpy(), [3.0, 3.0])


def test_needs_input_grad_and_forward_runs_without_recording():
    seen = {}

    class Probe(Function):
        @staticmethod
        def forward(ctx, x, y, z):
            seen["needs"] = ctx.needs_input_grad
            seen["grad_mode"] = anb.is_grad_enabled()
            inner = x * y
            seen["inner_requires_grad"] = inner.requires_grad
            return inner

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output, None, None

    x = anb.tensor([1.0], requires_grad=True)
    Probe.apply(x, anb.tensor([2.0]), 5)
    assert seen == {"needs": (True, False, False), "grad_mode": False, "inner_requires_grad": False}


def test_nothing_recorded_without_inputs_requiring_grad_or_in_no_grad():
    y = Exp.apply(anb.tensor([1.0]))
    assert not y.requires_grad and y.grad_fn is None
    x = anb.tensor([1.0], requires_grad=True)
    with anb.no_grad():
        z = Exp.apply(x)
    assert not z.requires_grad and z.grad_fn is None


def test_none_gradient_is_no_contribution():
    class FirstOnly(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * 2.0 + y

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * 2.0, None

    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = anb.tensor([3.0, 4.0], requires_grad=True)
    # y also reaches the loss directly: only that path contributes to its gradient.
    gx, gy = anb.grad((FirstOnly.apply(x, y) + 5.0 * y).sum(), (x, y))
    np.testing.assert_allclose(gx.numpy(), [2.0, 2.0])
    np.testing.assert_allclose(gy.numpy(), [5.0, 5.0])


def test_returning_an_input_gives_a_new_tensor_in_the_graph():
    class Identity(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * 3.0  # deliberately not 1, to see it used

    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = Identity.apply(x)
    assert y is not x and x.is_leaf and y.grad_fn is not None
    (g,) = anb.grad(y.sum(), x)
    np.testing.assert_allclose(g.numpy(), [3.0, 3.0])


def test_returning_a_tensor_held_elsewhere_does_not_rewire_it():
    constant = anb.tensor([5.0, 6.0])

    class ReturnsGlobal(Function):
        @staticmethod
        def forward(ctx, x):
            return constant

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output

    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = ReturnsGlobal.apply(x)
    assert y.requires_grad and constant.is_leaf and not constant.requires_grad
    np.testing.assert_array_equal(y.numpy(), [5.0, 6.0])


def test_the_same_tensor_returned_twice_gets_both_gradients():
    class Twice(Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2.0
            return y, y

        @staticmethod
        def backward(ctx, grad_first, grad_second):
            return 2.0 * (grad_first + grad_second)

    x = anb.tensor([1.0, 2.0], requires_grad=True)
    first, second = Twice.apply(x)
    (g,) = anb.grad((first + 3.0 * second).sum(), x)
    np.testing.assert_allclose(g.numpy(), [8.0, 8.0])


def test_setup_context_form():
    class Cube(Function):
        @staticmethod
        def forward(x):
            return x * x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            (x,) = inputs
            ctx.save_for_backward(x)

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return 3.0 * grad_output * x * x

    a = values(3)
    x = anb.tensor(a, requires_grad=True)
    (g,) = anb.grad(Cube.apply(x).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.numpy(), 3 * a**2, rtol=1e-14)
    (h,) = anb.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), 6 * a, rtol=1e-14)


def test_broadcast_gradient_is_summed_to_the_input_shape():
    class AddRow(Function):
        @staticmethod
        def forward(ctx, x, row):
            return x + row

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output, grad_output  # row's gradient still has x's shape

    x = anb.tensor(np.ones((3, 2)), requires_grad=True)
    row = anb.tensor([1.0, 2.0], requires_grad=True)
    v = np.arange(6.0).reshape(3, 2)
    _, g_row = anb.grad(AddRow.apply(x, row), (x, row), grad_outputs=anb.tensor(v))
    np.testing.assert_allclose(g_row.numpy(), v.sum(axis=0))
    _, g_row = anb.grad(
        AddRow.apply(x, row), (x, row), grad_outputs=anb.tensor(v), create_graph=True
    )
    np.testing.assert_allclose(g_row.numpy(), v.sum(axis=0))


def test_batched_grads_through_a_function():
    a = values(3)
    x = anb.tensor(a, requires_grad=True)
    y = Exp.apply(x)
    (jacobian,) = anb.grad(y, x, grad_outputs=anb.eye(3), is_grads_batched=True)
    np.testing.assert_allclose(jacobian.numpy(), np.diag(np.exp(a)), rtol=1e-13)


# -- several outputs ----------------------------------------------------------------------------


def test_tuple_outputs_each_get_their_gradient():
    a = values()
    x = anb.tensor(a, requires_grad=True)
    s, c = SinCos.apply(x)
    assert repr(s.grad_fn) == "<SinCosBackward>" and s.grad_fn.name == "SinCos"
    np.testing.assert_allclose(s.numpy(), np.sin(a))
    np.testing.assert_allclose(c.numpy(), np.cos(a))
    (g,) = anb.grad((2.0 * s + 3.0 * c).sum(), x)
    np.testing.assert_allclose(g.numpy(), 2 * np.cos(a) - 3 * np.sin(a), rtol=1e-12)


def test_tuple_outputs_with_one_output_used_gets_zeros_for_the_other():
    a = values()
    x = anb.tensor(a, requires_grad=True)
    _, c = SinCos.apply(x)
    (g,) = anb.grad(c.sum(), x)
    np.testing.assert_allclose(g.numpy(), -np.sin(a), rtol=1e-12)


def test_tuple_outputs_pass_gradcheck_and_gradgradcheck():
    x = anb.tensor(values(3).reshape(3, 1), requires_grad=True)
    assert gradcheck(SinCos.apply, x)
    assert gradgradcheck(SinCos.apply, x)


def test_tuple_outputs_of_different_shapes_and_dtypes():
    class SplitStats(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sum(axis=1), (x * x).astype(np.float32)

        @staticmethod
        def backward(ctx, grad_sum, grad_square):
            (x,) = ctx.saved_tensors
            assert grad_sum.shape == (2,) and grad_square.dtype == np.float32
            return anb.expand_dims(grad_sum, 1) + 2.0 * grad_square.astype(np.float64) * x

    a = values(6).reshape(2, 3)
    x = anb.tensor(a, requires_grad=True)
    total, square = SplitStats.apply(x)
    assert square.dtype == np.float32 and total.shape == (2,)
    (g,) = anb.grad(total.sum() + square.astype(np.float64).sum(), x)
    np.testing.assert_allclose(g.numpy(), 1 + 2 * a, rtol=1e-6)


def test_mark_non_differentiable_and_materialized_zero_grad():
    received = {}

    class SortLike(Function):
        @staticmethod
        def forward(ctx, x):
            order = anb.tensor(np.argsort(x.numpy()).astype(np.float64))
            ctx.mark_non_differentiable(order)
            return x * 2.0, order

        @staticmethod
        def backward(ctx, grad_output, grad_order):
            received["order"] = grad_order.numpy().copy()
            return grad_output * 2.0

    x = anb.tensor([3.0, 1.0, 2.0], requires_grad=True)
    doubled, order = SortLike.apply(x)
    assert not order.requires_grad and doubled.requires_grad
    (g,) = anb.grad(doubled.sum(), x)
    np.testing.assert_allclose(g.numpy(), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(received["order"], np.zeros(3))


def test_set_materialize_grads_false_gives_none_for_non_differentiable_outputs():
    received = {}

    class WithCount(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2.0, 7

        @staticmethod
        def backward(ctx, grad_output, grad_count):
            received["count"] = grad_count
            return grad_output * 2.0

    x = anb.tensor([1.0], requires_grad=True)
    doubled, count = WithCount.apply(x)
    assert count == 7
    anb.grad(doubled.sum(), x)
    assert received["count"] is None


# -- higher order -------------------------------------------------------------------------------


def test_second_derivative_through_saved_output():
    a = values()
    x = anb.tensor(a, requires_grad=True)
    (g,) = anb.grad(Exp.apply(x).sum(), x, create_graph=True)
    assert g.requires_grad
    np.testing.assert_allclose(g.numpy(), np.exp(a), rtol=1e-13)
    (h,) = anb.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), np.exp(a), rtol=1e-13)


def test_second_derivative_through_saved_inputs_of_two_arguments():
    a, b = values(3, 3), values(3, 4)
    x = anb.tensor(a, requires_grad=True)
    y = anb.tensor(b, requires_grad=True)
    gx, _ = anb.grad((Mul.apply(x, y) * x).sum(), (x, y), create_graph=True)  # 2xy
    hx, hy = anb.grad(gx.sum(), (x, y))
    np.testing.assert_allclose(hx.numpy(), 2 * b)
    np.testing.assert_allclose(hy.numpy(), 2 * a)


def test_gradgradcheck_catches_a_backward_that_is_not_differentiable():
    class DetachedExp(Function):
        @staticmethod
        def forward(ctx, x):
            y = anb.exp(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad_output):
            (y,) = ctx.saved_tensors
            return grad_output * y.detach()  # right value, but cut from the graph

    x = anb.tensor(values(3), requires_grad=True)
    assert gradcheck(DetachedExp.apply, x)
    assert gradgradcheck(Exp.apply, x)
    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        gradgradcheck(DetachedExp.apply, x)


# -- wrong backwards fail -----------------------------------------------------------------------


def test_gradcheck_passes_exp_and_fails_a_wrong_backward():
    x = anb.tensor(values(3), requires_grad=True)
    assert gradcheck(Exp.apply, x)
    assert gradcheck(WrongExp.apply, x, raise_exception=False) is False
    with pytest.raises(GradcheckError, match="Jacobian mismatch for output 0"):
        gradcheck(WrongExp.apply, x)


def test_wrong_number_of_gradients():
    class TooFew(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, grad_output):
            return (grad_output,)

    x = anb.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"incorrect number of gradients \(expected 2, got 1\)"):
        anb.grad(TooFew.apply(x, x).sum(), x)


def test_gradient_of_an_incompatible_shape():
    class BadShape(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, grad_output):
            return anb.ones(5)

    x = anb.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="invalid gradient at index 0"):
        anb.grad(BadShape.apply(x).sum(), x)
    with pytest.raises(RuntimeError, match="invalid gradient at index 0"):
        anb.grad(BadShape.apply(x).sum(), x, create_graph=True)


def test_gradient_for_a_non_tensor_argument_is_an_error():
    class Confused(Function):
        @staticmethod
        def forward(ctx, x, scale):
            return x * scale

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * 2.0, grad_output

    x = anb.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="not a Tensor"):
        anb.grad(Confused.apply(x, 2.0).sum(), x)


# -- saved tensors: versions and freeing --------------------------------------------------------


def test_saved_input_modified_in_place_raises_at_backward():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    a = x * 1.0
    y = Mul.apply(a, x)
    a += 1.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    assert x.grad is None


def test_saved_output_modified_in_place_raises_at_backward():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = Exp.apply(x)
    with anb.no_grad():
        y += 1.0
    with pytest.raises(
        RuntimeError,
        match="one of the variables needed for gradient "
        "computation has been modified by an inplace",
    ):
        anb.grad(y.sum(), x)


def test_second_backward_after_freeing_raises():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = Exp.apply(x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second"):
        y.backward()


def test_save_for_backward_takes_only_tensors():
    class SavesNumber(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 3.0)
            return x

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output

    with pytest.raises(TypeError, match="save_for_backward can only save Tensors"):
        SavesNumber.apply(anb.tensor([1.0], requires_grad=True))


def test_saved_tensors_are_none_where_none_was_saved():
    class SavesNone(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(None, x)
            return x * 2.0

        @staticmethod
        def backward(ctx, grad_output):
            nothing, x = ctx.saved_tensors
            assert nothing is None
            return grad_output * 2.0

    x = anb.tensor([1.0], requires_grad=True)
    (g,) = anb.grad(SavesNone.apply(x).sum(), x)
    np.testing.assert_allclose(g.numpy(), [2.0])


def test_unimplemented_methods_and_instantiation():
    class NoForward(Function):
        pass

    with pytest.raises(NotImplementedError, match="forward"):
        NoForward.apply(anb.tensor([1.0]))

    class NoBackward(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

    x = anb.tensor([1.0], requires_grad=True)
    with pytest.raises(NotImplementedError, match="backward"):
        anb.grad(NoBackward.apply(x).sum(), x)
    with pytest.raises(RuntimeError, match=r"Exp.apply"):
        Exp()
