"""``autograd_nb.autograd.forward_ad``: torch's API and errors, nested levels, mixing forward
and reverse mode to higher order, and the functional API built on it."""

import warnings

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb.autograd import forward_ad as fwAD
from autograd_nb.autograd import functional as F
from tests.checks import numerical_vjp


def f(x):
    return (anb.sin(x) * x ** 2).sum() + x[0] * x[1] * x[2]


def numerical_hessian(function, x, eps=1e-5):
    def gradient(z):
        t = anb.tensor(z, requires_grad=True)
        return anb.grad(function(t), t)[0].numpy()

    columns = []
    for i in range(x.size):
        step = np.zeros_like(x)
        step[i] = eps
        columns.append((gradient(x + step) - gradient(x - step)) / (2 * eps))
    return np.stack(columns, axis=1)


X0 = np.array([0.3, -1.2, 0.8])
V = np.array([0.5, 1.0, -2.0])


# -- the API ---------------------------------------------------------------------------------


def test_dual_level_make_and_unpack():
    x = anb.tensor([1.0, 2.0])
    with fwAD.dual_level() as level:
        assert level == 0
        dual = fwAD.make_dual(x, anb.tensor([1.0, 0.5]))
        y = anb.exp(dual) * 3
        unpacked = fwAD.unpack_dual(y)
        assert isinstance(unpacked, fwAD.UnpackedDualTensor)
        primal, tangent = unpacked
        np.testing.assert_allclose(primal.numpy(), 3 * np.exp([1.0, 2.0]))
        np.testing.assert_allclose(tangent.numpy(), 3 * np.exp([1.0, 2.0]) * [1.0, 0.5])
        assert unpacked.primal is primal and unpacked.tangent is tangent
        assert fwAD.unpack_dual(primal).tangent is None  # the primal is not dual
        assert fwAD.unpack_dual(x).tangent is None  # nor the tensor made dual
    assert fwAD.unpack_dual(y).tangent is None  # the level's tangents are gone


def test_enter_and_exit_by_hand_and_as_decorator():
    level = fwAD.enter_dual_level()
    try:
        dual = fwAD.make_dual(anb.tensor(2.0), anb.tensor(1.0), level=level)
        assert fwAD.unpack_dual(dual * dual, level=level).tangent.item() == 4.0
    finally:
        fwAD.exit_dual_level(level=level)

    @fwAD.dual_level()
    def tangent_of_cube(x):
        return fwAD.unpack_dual(fwAD.make_dual(x, anb.tensor(1.0)) ** 3).tangent

    assert tangent_of_cube(anb.tensor(2.0)).item() == 12.0


def test_unpack_outside_a_level_gives_no_tangent():
    x = anb.tensor(1.0)
    assert fwAD.unpack_dual(x) == (x, None)


def test_tangent_of_an_op_without_dual_inputs_is_none():
    with fwAD.dual_level():
        fwAD.make_dual(anb.tensor(1.0), anb.tensor(1.0))
        assert fwAD.unpack_dual(anb.ones(3) * 2).tangent is None


# -- torch's errors ------------------------------------------------------------------------------


def test_make_dual_outside_a_level():
    with pytest.raises(RuntimeError, match="no level exists, make sure to enter_dual_level"):
        fwAD.make_dual(anb.tensor(1.0), anb.tensor(1.0))


def test_make_dual_with_a_tangent_of_another_shape():
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match=r"different size .* of size \[2\] .* \[3\]"):
            fwAD.make_dual(anb.ones(2), anb.ones(3))


def test_make_dual_with_a_tangent_of_another_dtype():
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="float64.*float32"):
            fwAD.make_dual(anb.ones(2), anb.ones(2, dtype=np.float32))


def test_make_dual_of_integers():
    with fwAD.dual_level():
        with pytest.raises(ValueError, match="Expected primal to be floating point"):
            fwAD.make_dual(anb.tensor([1, 2]), anb.ones(2))
        with pytest.raises(ValueError, match="Expected tangent to be floating point"):
            fwAD.make_dual(anb.ones(2), anb.tensor([1, 2]))


def test_make_dual_twice_at_one_level():
    with fwAD.dual_level():
        dual = fwAD.make_dual(anb.ones(2), anb.ones(2))
        with pytest.raises(RuntimeError, match="already has a forward gradient at the same"):
            fwAD.make_dual(dual, anb.ones(2))


def test_exit_a_level_that_is_not_the_last():
    with fwAD.dual_level():
        inner = fwAD.enter_dual_level()
        with pytest.raises(RuntimeError, match="not the last one that was created"):
            fwAD.exit_dual_level(level=0)
        fwAD.exit_dual_level(level=inner)
    with pytest.raises(RuntimeError, match="not the last one"):
        fwAD.exit_dual_level()


def test_an_op_without_a_rule_names_it():
    class Square(anb.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * x

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output

    with fwAD.dual_level():
        dual = fwAD.make_dual(anb.tensor(2.0), anb.tensor(1.0))
        with pytest.raises(NotImplementedError, match="jvp function .* Square"):
            Square.apply(dual)


def test_custom_function_jvp():
    class Cube(anb.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return 3 * grad_output * x * x

        @staticmethod
        def jvp(ctx, tangent):
            (x,) = ctx.saved_tensors
            return 3 * tangent * x * x

    with fwAD.dual_level():
        dual = fwAD.make_dual(anb.tensor(2.0), anb.tensor(0.5))
        assert fwAD.unpack_dual(Cube.apply(dual)).tangent.item() == 6.0


def test_in_place_update_of_a_dual():
    with fwAD.dual_level():
        dual = fwAD.make_dual(anb.tensor([1.0, 2.0]), anb.tensor([1.0, 1.0]))
        y = dual * 1.0
        y *= dual  # y = x², tangent 2x
        y[0] = dual[1] * 3  # y[0] = 3 x1, tangent 3
        np.testing.assert_allclose(fwAD.unpack_dual(y).tangent.numpy(), [3.0, 4.0])


# -- nesting and mixing modes --------------------------------------------------------------------


def test_grad_inside_a_level_is_the_ordinary_gradient():
    x = anb.tensor(X0, requires_grad=True)
    (expected,) = anb.grad(f(x), x)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, anb.tensor(V))
        (got,) = anb.grad(f(dual), x)
    np.testing.assert_allclose(got.numpy(), expected.numpy())


def test_forward_over_reverse_is_the_hessian_vector_product():
    x = anb.tensor(X0, requires_grad=True)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, anb.tensor(V))
        (gradient,) = anb.grad(f(dual), dual, create_graph=True)
        hv = fwAD.unpack_dual(gradient).tangent
    np.testing.assert_allclose(hv.numpy(), numerical_hessian(f, X0) @ V, rtol=1e-6)


def test_reverse_over_forward():
    x = anb.tensor(X0, requires_grad=True)
    with fwAD.dual_level():
        tangent = fwAD.unpack_dual(f(fwAD.make_dual(x, anb.tensor(V)))).tangent
        (got,) = anb.grad(tangent, x)
    np.testing.assert_allclose(got.numpy(), numerical_hessian(f, X0) @ V, rtol=1e-6)


def test_forward_over_forward_with_nested_levels():
    w = np.array([1.0, 0.0, 2.0])
    with fwAD.dual_level():
        outer = fwAD.make_dual(anb.tensor(X0), anb.tensor(w))
        with fwAD.dual_level():
            inner = fwAD.make_dual(outer, anb.tensor(V))
            first = fwAD.unpack_dual(f(inner)).tangent  # (inner level: the current one)
        second = fwAD.unpack_dual(first).tangent
    np.testing.assert_allclose(second.item(), w @ numerical_hessian(f, X0) @ V, rtol=1e-6)


def test_third_order_reverse_over_forward_over_reverse():
    def hvp_sum(z):
        with fwAD.dual_level():
            dual = fwAD.make_dual(z, anb.tensor(V))
            (gradient,) = anb.grad(f(dual), dual, create_graph=True)
            return fwAD.unpack_dual(gradient).tangent.sum()

    x = anb.tensor(X0, requires_grad=True)
    (got,) = anb.grad(hvp_sum(x), x)
    expected = numerical_vjp(lambda z: hvp_sum(anb.tensor(z, requires_grad=True)).numpy(), [X0],
                             np.ones(()))
    np.testing.assert_allclose(got.numpy(), expected[0], rtol=1e-5, atol=1e-6)


def test_compile_runs_eagerly_inside_a_level():
    compiled = anb.compile(lambda x: anb.sin(x) * 2)
    compiled(anb.tensor([0.5]))
    with fwAD.dual_level():
        dual = fwAD.make_dual(anb.tensor([0.5]), anb.tensor([1.0]))
        with pytest.warns(anb.CompileWarning, match="dual level"):
            result = compiled(dual)
        np.testing.assert_allclose(fwAD.unpack_dual(result).tangent.numpy(), 2 * np.cos(0.5))


def test_no_seam_left_after_the_level():
    from autograd_nb.tensor import dual_level_open

    with fwAD.dual_level():
        assert dual_level_open()
    assert not dual_level_open()


# -- the functional API --------------------------------------------------------------------------


def mlp(x):
    w = anb.tensor(np.linspace(-1, 1, 12).reshape(3, 4))
    return anb.tanh(x @ w) * 2


def test_functional_jvp_is_one_forward_pass():
    x, v = anb.tensor(X0), anb.tensor(V)
    output, product = F.jvp(mlp, x, v)
    jacobian = F.jacobian(mlp, x)
    np.testing.assert_allclose(product.numpy(), jacobian.numpy() @ V)
    np.testing.assert_allclose(output.numpy(), mlp(x).numpy())
    assert not product.requires_grad


def test_functional_jvp_create_graph_differentiates_again():
    x = anb.tensor(X0, requires_grad=True)
    _, product = F.jvp(lambda z: f(z), x, anb.tensor(V), create_graph=True)
    (got,) = anb.grad(product, x)
    np.testing.assert_allclose(got.numpy(), numerical_hessian(f, X0) @ V, rtol=1e-6)


def test_forward_mode_jacobian_matches_reverse():
    x = anb.tensor(X0)
    forward = F.jacobian(mlp, x, vectorize=True, strategy="forward-mode")
    np.testing.assert_allclose(forward.numpy(), F.jacobian(mlp, x).numpy(), atol=1e-15)
    pair = F.jacobian(lambda a, b: a * b.sum(), (x, anb.tensor(V)), vectorize=True,
                      strategy="forward-mode")
    reverse = F.jacobian(lambda a, b: a * b.sum(), (x, anb.tensor(V)))
    for got, expected in zip(pair[0], reverse[0]):
        np.testing.assert_allclose(got.numpy(), expected.numpy())


def test_forward_mode_jacobian_keeps_torchs_errors():
    x = anb.tensor(X0)
    with pytest.raises(NotImplementedError, match="only implemented for `vectorize=True`"):
        F.jacobian(mlp, x, strategy="forward-mode")
    with pytest.raises(NotImplementedError, match="create_graph=True"):
        F.jacobian(mlp, x, vectorize=True, strategy="forward-mode", create_graph=True)
    with pytest.raises(RuntimeError, match="strict=True"):
        F.jacobian(mlp, x, vectorize=True, strategy="forward-mode", strict=True)


def test_hessian_forward_over_reverse_and_hvp():
    x = anb.tensor(X0)
    reverse = F.hessian(f, x)
    forward = F.hessian(f, x, vectorize=True, outer_jacobian_strategy="forward-mode")
    np.testing.assert_allclose(forward.numpy(), reverse.numpy(), atol=1e-14)
    np.testing.assert_allclose(F.hvp(f, x, anb.tensor(V))[1].numpy(), reverse.numpy() @ V)
    np.testing.assert_allclose(F.vhp(f, x, anb.tensor(V))[1].numpy(), V @ reverse.numpy())


def test_functional_inside_a_user_level():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with fwAD.dual_level():
            dual = fwAD.make_dual(anb.tensor(X0), anb.tensor(V))
            # functional.jvp opens a level of its own: the user's tangent is kept apart
            _, product = F.jvp(lambda z: z * dual, anb.tensor(X0), anb.tensor(np.ones(3)),
                               create_graph=True)
            np.testing.assert_allclose(fwAD.unpack_dual(product).tangent.numpy(), V)


# -- batched tangents (jacfwd) ---------------------------------------------------------------


def test_a_batched_level_takes_tangents_with_the_batch_in_front():
    x = anb.tensor(X0)
    with fwAD.dual_level(batch_shape=2):
        with pytest.raises(RuntimeError, match=r"batch \[2\] in front"):
            fwAD.make_dual(x, anb.tensor(V))
        dual = fwAD.make_dual(x, anb.tensor(np.stack([V, 2 * V])))
        tangent = fwAD.unpack_dual(anb.sin(dual) * dual).tangent
    expected = (np.cos(X0) * X0 + np.sin(X0)) * V
    np.testing.assert_allclose(tangent.numpy(), np.stack([expected, 2 * expected]))
    with pytest.raises(ValueError, match="batch_shape"):
        fwAD.enter_dual_level(batch_shape=(-1,))


def _counting(function):
    calls = []

    def counted(*args):
        calls.append(1)
        return function(*args)

    return counted, calls


def test_forward_mode_jacobian_is_one_batched_pass_in_chunks(monkeypatch):
    def function(a, b):
        return anb.tanh(a[:, None] * b).sum(axis=0), anb.exp(a).prod()

    a, b = np.array([0.3, -0.7, 1.1]), np.array([[0.2, 0.5], [1.0, -0.4], [0.6, 0.1]])
    inputs = (anb.tensor(a), anb.tensor(b))
    counted, calls = _counting(function)
    forward = F.jacobian(counted, inputs, vectorize=True, strategy="forward-mode")
    assert len(calls) == 1  # 9 columns, one pass
    reverse = F.jacobian(function, inputs)
    monkeypatch.setattr(anb.config, "FORWARD_JACOBIAN_CHUNK", 4)
    counted, calls = _counting(function)
    chunked = F.jacobian(counted, inputs, vectorize=True, strategy="forward-mode")
    assert len(calls) == 3  # 4 + 4 + 1 columns
    for k in range(2):
        for j in range(2):
            np.testing.assert_allclose(forward[k][j].numpy(), reverse[k][j].numpy(),
                                       rtol=1e-13, atol=1e-14)
            np.testing.assert_array_equal(chunked[k][j].numpy(), forward[k][j].numpy())
    # and the first output's against finite differences, column by column
    numeric = numerical_vjp(lambda a, b: function(anb.tensor(a), anb.tensor(b))[0].numpy(),
                            [a, b], np.eye(2)[0])
    np.testing.assert_allclose(forward[0][0].numpy()[0], numeric[0], rtol=1e-6)
    np.testing.assert_allclose(forward[0][1].numpy()[0], numeric[1], rtol=1e-6)


def _cube(generate_vmap_rule):
    class Cube(anb.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return 3 * grad_output * x * x

        @staticmethod
        def jvp(ctx, tangent):
            (x,) = ctx.saved_tensors
            return 3 * tangent * x * x

    Cube.generate_vmap_rule = generate_vmap_rule
    return Cube


@pytest.mark.parametrize("generate_vmap_rule", [False, True])
def test_a_function_that_refuses_a_batch_falls_back_to_one_pass_per_column(
        generate_vmap_rule):
    cube = _cube(generate_vmap_rule)
    counted, calls = _counting(lambda x: anb.sin(cube.apply(x)))
    got = F.jacobian(counted, anb.tensor(X0), vectorize=True, strategy="forward-mode")
    np.testing.assert_allclose(got.numpy(), np.diag(np.cos(X0 ** 3) * 3 * X0 ** 2),
                               rtol=1e-14)
    # the batched pass, then (refused) one pass per column
    assert len(calls) == (1 if generate_vmap_rule else 1 + X0.size)
    if not generate_vmap_rule:
        with fwAD.dual_level(batch_shape=3), pytest.raises(RuntimeError, match="cannot take"):
            cube.apply(fwAD.make_dual(anb.tensor(X0), anb.tensor(np.eye(3))))


def test_reverse_over_batched_forward_to_second_order():
    # <H, W> with the Hessian H in one batched pass (forward over reverse), and its gradient
    # (reverse over that), against finite differences
    w = np.array([[0.5, -1.0, 0.3], [0.2, 0.1, -0.7], [1.1, 0.4, 0.9]])

    def contracted(x):
        with fwAD.dual_level(batch_shape=3):
            dual = fwAD.make_dual(x, anb.tensor(np.eye(3)))
            (gradient,) = anb.grad(f(dual), dual, create_graph=True)
            columns = fwAD.unpack_dual(gradient).tangent  # the Hessian, forward over reverse
        return anb.sum(columns * anb.tensor(w))

    x = anb.tensor(X0, requires_grad=True)
    (got,) = anb.grad(contracted(x), x)
    numeric = numerical_vjp(lambda z: contracted(anb.tensor(z, requires_grad=True)).numpy(),
                            [X0], np.ones(()))
    np.testing.assert_allclose(got.numpy(), numeric[0], rtol=1e-5, atol=1e-7)
    h = contracted(anb.tensor(X0, requires_grad=True)).item()
    np.testing.assert_allclose(h, np.sum(numerical_hessian(f, X0) * w), rtol=1e-6)


def test_batched_forward_over_reverse_laplacian_matches_nested_reverse():
    rng = np.random.default_rng(5)
    w1, w2 = anb.tensor(rng.standard_normal((2, 6))), anb.tensor(rng.standard_normal((6, 1)))
    points = rng.uniform(-1, 1, size=(4, 2))

    def u(x):
        return (anb.tanh(x @ w1) @ w2)[:, 0]

    x = anb.tensor(points, requires_grad=True)
    directions = np.stack([np.eye(2)[d] * np.ones((4, 1)) for d in range(2)])
    with fwAD.dual_level(batch_shape=2):
        dual = fwAD.make_dual(x, anb.tensor(directions))
        (gradient,) = anb.grad(u(dual).sum(), dual, create_graph=True)
        second = fwAD.unpack_dual(gradient).tangent.numpy()
    laplacian = second[0, :, 0] + second[1, :, 1]
    (gradient,) = anb.grad(u(x).sum(), x, create_graph=True)
    nested = sum(anb.grad(gradient[:, d].sum(), x, retain_graph=True)[0].numpy()[:, d]
                 for d in range(2))
    np.testing.assert_allclose(laplacian, nested, rtol=1e-12, atol=1e-13)


def test_forward_over_reverse_hessian_is_one_batched_pass():
    def function(a, b):
        return (anb.sin(a) * b.sum() ** 2).sum()

    inputs = (anb.tensor(X0), anb.tensor(V[:2]))
    counted, calls = _counting(function)
    forward = F.hessian(counted, inputs, vectorize=True, outer_jacobian_strategy="forward-mode")
    assert len(calls) == 1  # the 5 columns of the Hessian as one batch of tangents
    reverse = F.hessian(function, inputs)
    for i in range(2):
        for j in range(2):
            np.testing.assert_allclose(forward[i][j].numpy(), reverse[i][j].numpy(),
                                       rtol=1e-13, atol=1e-14)
