"""register_op: user @njit kernels as a registered op, checked by gradcheck, closed forms and
second derivatives through the differentiable rule.

Kernels live at module level: numba leaves a dead weak proxy behind for every @njit function
that is created and dropped inside a test, which trips ``gc.get_objects()`` scans elsewhere.
"""

import numpy as np
import pytest
from numba import njit

import autograd_nb as anb
from autograd_nb.autograd import GradcheckError, gradcheck, gradgradcheck, register_op
from autograd_nb.autograd.custom_op import CustomOp, unregister_op
from autograd_nb.ops.registry import FUNCTIONS, REGISTRY
from tests.checks import check_gradients

# -- kernels, in the library's calling convention -----------------------------------------------


@njit(cache=True)
def cube_forward(x, out):
    flat, result = x.reshape(-1), out.reshape(-1)
    for i in range(flat.size):
        result[i] = flat[i] * flat[i] * flat[i]


@njit(cache=True)
def cube_vjp(grad_output, x, out, grad_x):
    g, flat, target = grad_output.reshape(-1), x.reshape(-1), grad_x.reshape(-1)
    for i in range(flat.size):
        target[i] += 3.0 * flat[i] * flat[i] * g[i]


@njit(cache=True)
def cube_vjp_wrong(grad_output, x, out, grad_x):
    g, flat, target = grad_output.reshape(-1), x.reshape(-1), grad_x.reshape(-1)
    for i in range(flat.size):
        target[i] += 2.0 * flat[i] * flat[i] * g[i]


def cube_rule(grad_output, x, out):
    return 3.0 * grad_output * x * x


@njit(cache=True)
def axpy_forward(a, x, y, out):
    # out = a * x + y, with a scalar array a
    s = a.reshape(-1)[0]
    fx, fy, fo = x.reshape(-1), y.reshape(-1), out.reshape(-1)
    for i in range(fo.size):
        fo[i] = s * fx[i] + fy[i]


@njit(cache=True)
def axpy_vjp_a(grad_output, a, x, y, out, grad_a):
    g, fx = grad_output.reshape(-1), x.reshape(-1)
    total = 0.0
    for i in range(g.size):
        total += g[i] * fx[i]
    grad_a.reshape(-1)[0] += total


@njit(cache=True)
def axpy_vjp_x(grad_output, a, x, y, out, grad_x):
    s = a.reshape(-1)[0]
    g, target = grad_output.reshape(-1), grad_x.reshape(-1)
    for i in range(g.size):
        target[i] += s * g[i]


@njit(cache=True)
def axpy_vjp_y(grad_output, a, x, y, out, grad_y):
    g, target = grad_output.reshape(-1), grad_y.reshape(-1)
    for i in range(g.size):
        target[i] += g[i]


@njit(cache=True)
def take_forward(table, index, out):
    for i in range(index.size):
        out[i] = table[index[i]]


@njit(cache=True)
def take_vjp(grad_output, table, index, out, grad_table):
    for i in range(index.size):
        grad_table[index[i]] += grad_output[i]


@njit(cache=True)
def row_norm2_forward(x, out):
    for i in range(x.shape[0]):
        total = 0.0
        for j in range(x.shape[1]):
            total += x[i, j] * x[i, j]
        out[i] = total


@njit(cache=True)
def row_norm2_vjp(grad_output, x, out, grad_x):
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            grad_x[i, j] += 2.0 * x[i, j] * grad_output[i]


@njit(cache=True)
def square_forward(x, out):
    for i in range(x.size):
        out.reshape(-1)[i] = x.reshape(-1)[i] ** 2


@njit(cache=True)
def square_vjp(grad_output, x, out, grad_x):
    for i in range(x.size):
        grad_x.reshape(-1)[i] += 2.0 * x.reshape(-1)[i] * grad_output.reshape(-1)[i]


@njit(cache=True)
def double_forward(x, out):
    for i in range(x.size):
        out.reshape(-1)[i] = 2.0 * x.reshape(-1)[i]


@njit(cache=True)
def double_vjp(grad_output, x, out, grad_x):
    for i in range(x.size):
        grad_x.reshape(-1)[i] += 2.0 * grad_output.reshape(-1)[i]


def not_compiled(x, out):
    out[:] = x


# -- fixtures: every op registered here is removed again ----------------------------------------


@pytest.fixture
def register():
    names = []

    def make(name, *args, **kwargs):
        function = register_op(name, *args, **kwargs)
        names.append(name)
        return function

    yield make
    for name in names:
        if isinstance(REGISTRY.get(name), CustomOp):
            unregister_op(name)


@pytest.fixture
def cube(register):
    return register("test_cube", cube_forward, [cube_vjp], rules=[cube_rule])


def values(shape, seed=0):
    return np.random.default_rng(seed).uniform(-1.5, 1.5, size=shape)


# -- tests --------------------------------------------------------------------------------------


def test_cube_is_a_registered_first_class_op(cube):
    op = REGISTRY["test_cube"]
    assert isinstance(op, CustomOp) and op.family == "custom"
    assert FUNCTIONS["test_cube"] is cube and cube.op is op
    assert op.forward_kernel is cube_forward and op.vjp_kernels == (cube_vjp,)
    assert op.n_inputs == 1 and op.differentiable == (True,)
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = cube(x)
    assert repr(y.grad_fn) == "<TestCubeBackward>" and y.grad_fn.op is op


def test_cube_values_and_closed_form_gradient(cube):
    a = values((2, 3))
    x = anb.tensor(a, requires_grad=True)
    y = cube(x)
    np.testing.assert_allclose(y.numpy(), a**3, rtol=1e-14)
    y.backward(anb.ones((2, 3)))
    np.testing.assert_allclose(x.grad.numpy(), 3 * a**2, rtol=1e-14)


def test_cube_passes_gradcheck_and_gradgradcheck(cube):
    x = anb.tensor(values((3,)), requires_grad=True)
    assert gradcheck(cube, x)
    assert gradgradcheck(cube, x)


def test_cube_kernel_rule_and_finite_differences_agree(cube):
    check_gradients(cube, [values((2, 2), seed=1)])


def test_cube_second_and_third_derivatives_through_the_rule(cube):
    a = values((4,), seed=2)
    x = anb.tensor(a, requires_grad=True)
    (g,) = anb.grad(cube(x).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.numpy(), 3 * a**2, rtol=1e-14)
    (h,) = anb.grad(g.sum(), x, create_graph=True)
    np.testing.assert_allclose(h.numpy(), 6 * a, rtol=1e-14)
    (t,) = anb.grad(h.sum(), x)
    np.testing.assert_allclose(t.numpy(), np.full(4, 6.0))


def test_rules_calling_the_custom_op_itself(register):
    # The rule of a "square" op uses a custom "double" op: higher order stays in kernels.
    double = register(
        "test_double", double_forward, [double_vjp], rules=[lambda g, x, out: double(g)]
    )
    square = register(
        "test_square", square_forward, [square_vjp], rules=[lambda g, x, out: double(x) * g]
    )
    x = anb.tensor(values((3,)), requires_grad=True)
    assert gradcheck(square, x)
    assert gradgradcheck(square, x)


def test_a_wrong_vjp_kernel_fails_gradcheck(register):
    wrong = register("test_cube_wrong", cube_forward, [cube_vjp_wrong])
    x = anb.tensor(values((3,)), requires_grad=True)
    assert gradcheck(wrong, x, raise_exception=False) is False
    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        gradcheck(wrong, x)


def test_a_wrong_rule_fails_gradgradcheck(register):
    bad = register(
        "test_cube_bad_rule", cube_forward, [cube_vjp], rules=[lambda g, x, out: 3.0 * g * x]
    )
    x = anb.tensor(values((3,), seed=4), requires_grad=True)
    assert gradcheck(bad, x)
    assert gradgradcheck(bad, x, raise_exception=False) is False
    with pytest.raises(GradcheckError, match="First-order gradient mismatch"):
        gradgradcheck(bad, x)


def test_without_a_rule_create_graph_raises_and_changes_nothing(register):
    plain = register("test_cube_plain", cube_forward, [cube_vjp])
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = plain(x).sum()
    with pytest.raises(RuntimeError, match="create_graph=True needs a differentiable rule"):
        y.backward(create_graph=True)
    assert x.grad is None
    y.backward()  # the kernel path still works, on the same graph
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 12.0])


def test_the_kernel_runs_when_not_recording(register):
    def exploding_rule(grad_output, x, out):
        raise AssertionError("the rule must not run with create_graph=False")

    op = register("test_cube_kernel_only", cube_forward, [cube_vjp], rules=[exploding_rule])
    x = anb.tensor([1.0, -2.0], requires_grad=True)
    (g,) = anb.grad(op(x).sum(), x)
    np.testing.assert_allclose(g.numpy(), [3.0, 12.0])


def test_three_inputs_with_a_scalar_array(register):
    axpy = register(
        "test_axpy",
        axpy_forward,
        [axpy_vjp_a, axpy_vjp_x, axpy_vjp_y],
        rules=[
            lambda g, a, x, y, out: (g * x).sum().reshape(a.shape),
            lambda g, a, x, y, out: g * a,
            lambda g, a, x, y, out: g,
        ],
        output_shape=lambda a, x, y: x,
    )
    a = anb.tensor([2.0], requires_grad=True)
    x = anb.tensor(values((4,), seed=5), requires_grad=True)
    y = anb.tensor(values((4,), seed=6), requires_grad=True)
    np.testing.assert_allclose(axpy(a, x, y).numpy(), 2.0 * x.numpy() + y.numpy())
    assert gradcheck(axpy, (a, x, y))
    assert gradgradcheck(axpy, (a, x, y))


def test_non_differentiable_integer_input_is_passed_as_is(register):
    take = register(
        "test_take", take_forward, [take_vjp, None], output_shape=lambda table, index: index
    )
    op = REGISTRY["test_take"]
    assert op.differentiable == (True, False)
    table = anb.tensor([10.0, 20.0, 30.0], requires_grad=True)
    index = np.array([2, 0, 2, 1])
    out = take(table, index)
    np.testing.assert_allclose(out.numpy(), [30.0, 10.0, 30.0, 20.0])
    (g,) = anb.grad(out, table, grad_outputs=anb.tensor([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0, 4.0])
    assert gradcheck(take, (table, index))


def test_output_shape_rule(register):
    row_norm2 = register(
        "test_row_norm2",
        row_norm2_forward,
        [row_norm2_vjp],
        rules=[lambda g, x, out: 2.0 * anb.expand_dims(g, 1) * x],
        output_shape=lambda shape: shape[:1],
    )
    a = values((3, 4), seed=7)
    x = anb.tensor(a, requires_grad=True)
    y = row_norm2(x)
    assert y.shape == (3,)
    np.testing.assert_allclose(y.numpy(), (a * a).sum(axis=1), rtol=1e-14)
    assert gradcheck(row_norm2, x)
    assert gradgradcheck(row_norm2, x)


def test_float32_in_float32_out_and_mixed_inputs(cube, register):
    x32 = anb.tensor(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    y = cube(x32)
    assert y.dtype == np.float32
    (g,) = anb.grad(y.sum(), x32)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g.numpy(), [3.0, 12.0])
    axpy = register(
        "test_axpy_mixed",
        axpy_forward,
        [axpy_vjp_a, axpy_vjp_x, axpy_vjp_y],
        output_shape=lambda a, x, y: x,
    )
    a = anb.tensor([2.0], requires_grad=True)
    out = axpy(a, x32, anb.tensor([1.0, 1.0]))
    assert out.dtype == np.float64
    ga, gx = anb.grad(out.sum(), (a, x32))
    assert gx.dtype == np.float32
    np.testing.assert_allclose(gx.numpy(), [2.0, 2.0])
    np.testing.assert_allclose(ga.numpy(), [3.0])


def test_batched_grads_and_accumulation(cube):
    a = values((3,), seed=8)
    x = anb.tensor(a, requires_grad=True)
    (jacobian,) = anb.grad(cube(x), x, grad_outputs=anb.eye(3), is_grads_batched=True)
    np.testing.assert_allclose(jacobian.numpy(), np.diag(3 * a**2), rtol=1e-14)
    (cube(x) + cube(x)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 6 * a**2, rtol=1e-14)


def test_saved_input_modified_in_place_raises(cube):
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1.0
    y = cube(h)
    h += 1.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_without_inputs_requiring_grad_nothing_is_recorded(cube):
    y = cube(anb.tensor([2.0]))
    assert not y.requires_grad and y.grad_fn is None
    np.testing.assert_allclose(y.numpy(), [8.0])
    np.testing.assert_allclose(cube(np.array([3.0])).numpy(), [27.0])


def test_arity_and_keywords_are_checked(cube):
    with pytest.raises(TypeError, match="takes 1 inputs"):
        cube(anb.tensor([1.0]), anb.tensor([1.0]))
    with pytest.raises(TypeError):
        cube(anb.tensor([1.0]), axis=0)


def test_names_must_be_free_unless_replacing_a_custom_op(register, cube):
    with pytest.raises(ValueError, match="already registered"):
        register("exp", cube_forward, [cube_vjp])
    with pytest.raises(ValueError, match="replace=True"):
        register("test_cube", cube_forward, [cube_vjp_wrong])
    replaced = register("test_cube", cube_forward, [cube_vjp_wrong], replace=True)
    assert REGISTRY["test_cube"].vjp_kernels == (cube_vjp_wrong,)
    assert FUNCTIONS["test_cube"] is replaced
    with pytest.raises(ValueError, match="built in"):
        register("exp", cube_forward, [cube_vjp], replace=True)


def test_unregister_removes_the_op_but_existing_graphs_keep_working(register):
    op = register("test_cube_transient", cube_forward, [cube_vjp])
    x = anb.tensor([2.0], requires_grad=True)
    y = op(x)
    unregister_op("test_cube_transient")
    assert "test_cube_transient" not in REGISTRY and "test_cube_transient" not in FUNCTIONS
    (g,) = anb.grad(y.sum(), x)
    np.testing.assert_allclose(g.numpy(), [12.0])
    with pytest.raises(ValueError, match="not a custom op"):
        unregister_op("exp")


def test_kernels_must_be_njit_with_the_right_arity():
    with pytest.raises(TypeError, match="@njit"):
        register_op("test_bad", not_compiled, [cube_vjp])
    with pytest.raises(TypeError, match="must take 2 arguments"):
        register_op("test_bad", axpy_forward, [cube_vjp])
    with pytest.raises(TypeError, match=r"vjps\[0\] must take 4 arguments"):
        register_op("test_bad", cube_forward, [axpy_vjp_x])
    with pytest.raises(ValueError, match="one entry per input"):
        register_op("test_bad", cube_forward, [cube_vjp], rules=[cube_rule, cube_rule])
    with pytest.raises(ValueError, match="at least one input"):
        register_op("test_bad", cube_forward, [None])
    assert "test_bad" not in REGISTRY


def test_a_rule_of_the_wrong_shape_is_reported(register):
    bad = register(
        "test_cube_rule_shape", cube_forward, [cube_vjp], rules=[lambda g, x, out: g.sum()]
    )
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="returned shape"):
        anb.grad(bad(x).sum(), x, create_graph=True)
