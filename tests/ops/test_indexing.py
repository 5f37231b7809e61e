"""Indexing: ``t[index]`` against NumPy's indexing of the same array, its VJP (scatter-add,
repeated indices accumulating) against finite differences and ``np.add.at``, and
``t[index] = v`` and the in-place operators as recorded in-place ops."""

import operator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import autograd_nb as anb
from autograd_nb.ops import registry
from autograd_nb.ops.registry import REGISTRY
from tests.checks import check_gradients
from tests.ops.test_elementwise import assert_run_matches_general, layout_variant

SHAPE = (3, 4, 5)
MASK = np.random.default_rng(7).uniform(size=SHAPE) > 0.5

# (id, index) pairs over an array of SHAPE; NumPy gives every expected result.
INDICES = [
    ("int", 1),
    ("negative_int", -1),
    ("two_ints", (2, -3)),
    ("all_ints_0d", (1, 2, 3)),
    ("negative_ints_0d", (-1, -4, -5)),
    ("slice", slice(1, 3)),
    ("slice_step", (slice(None), slice(0, 4, 2))),
    ("negative_step", (slice(None, None, -1), slice(3, 0, -2))),
    ("negative_step_all", (slice(None, None, -2), slice(None, None, -3), slice(None, None, -1))),
    ("empty_slice", slice(2, 1)),
    ("empty_slice_inner", (slice(None), slice(4, None), 0)),
    ("empty_negative_step", (0, slice(0, 3, -1))),
    ("none", (None, 1)),
    ("none_middle", (slice(None), None, slice(1, 3), None)),
    ("ellipsis", (Ellipsis, 2)),
    ("ellipsis_middle", (0, Ellipsis, slice(None, None, -1))),
    ("ellipsis_only", Ellipsis),
    ("empty_tuple", ()),
    ("int_array", np.array([2, 0])),
    ("repeated_int_array", np.array([1, 1, 0, 1])),
    ("negative_int_array", np.array([-1, 0, -3])),
    ("int_array_2d", np.array([[0, 2], [1, 1]])),
    ("list", [0, 2, 2]),
    ("empty_list", []),
    ("bool_mask_full", MASK),
    ("bool_mask_first_axis", np.array([True, False, True])),
    ("bool_mask_all_false", np.zeros(3, dtype=bool)),
    ("bool_mask_trailing", (Ellipsis, np.array([True, False, True, True, False]))),
    ("bool_scalar", True),
    ("mixed_slice_then_array", (slice(None), [0, 3, 3])),
    ("mixed_adjacent_arrays", (slice(1, None), [0, 2], [4, 1])),
    ("mixed_separated_arrays", ([0, 2], slice(None), [4, 1])),  # advanced dims go first
    ("mixed_int_and_array", (1, slice(None), [0, 0, 3])),  # the int is advanced too: first
    ("mixed_broadcast_arrays", (np.array([[0], [2]]), slice(None, None, -1), np.array([1, 3]))),
    ("mixed_none_and_array", (None, [1, 0], Ellipsis, 2)),
    ("array_0d_results", (np.array(1), np.array(2), np.array(3))),
    ("zero_d_int_array", np.array(2)),
]
IDS = [name for name, _ in INDICES]
CASES = [index for _, index in INDICES]


def data(shape=SHAPE, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def scatter_reference(shape, index, v):
    """The VJP of ``x[index]`` at ``v``, by NumPy: zeros, then ``np.add.at``."""
    grad = np.zeros(shape)
    np.add.at(grad, index, v)
    return grad


@pytest.mark.parametrize("index", CASES, ids=IDS)
def test_getitem_forward_matches_numpy(index):
    a = data()
    x = anb.tensor(a)
    got = x[index]
    want = a[index]
    assert isinstance(got, anb.Tensor)
    assert got.shape == np.shape(want)
    assert got.dtype == a.dtype
    np.testing.assert_array_equal(got.numpy(), want)
    assert got.numpy().flags.c_contiguous
    assert not np.shares_memory(got.numpy(), a)


@pytest.mark.parametrize("index", CASES, ids=IDS)
def test_getitem_gradients(index):
    grads = check_gradients(lambda t: t[index], [data()])
    # The VJP at v is the scatter-add of v: repeated indices accumulate.
    x = anb.tensor(data(), requires_grad=True)
    y = x[index]
    v = np.random.default_rng(3).standard_normal(y.shape)
    (g,) = anb.grad(y, x, grad_outputs=anb.tensor(v))
    np.testing.assert_allclose(g.numpy(), scatter_reference(SHAPE, index, v), atol=1e-12)
    assert grads[0].shape == SHAPE


def test_repeated_indices_accumulate():
    x = anb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x[[0, 2, 0, 0]].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 0.0, 1.0])
    x.grad = None
    x[np.array([[1, 1], [1, 2]])].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 3.0, 1.0])


@pytest.mark.parametrize(
    "index",
    [(), Ellipsis, None, (None, Ellipsis), (Ellipsis, None)],
    ids=["empty_tuple", "ellipsis", "none", "none_ellipsis", "ellipsis_none"],
)
def test_zero_d_input(index):
    a = np.array(2.5)
    got = anb.tensor(a)[index]
    np.testing.assert_array_equal(got.numpy(), a[index])
    assert got.shape == np.shape(a[index])
    check_gradients(lambda t: t[index] * t[index], [a])


def test_zero_d_results_are_tensors_with_grad_fn():
    x = anb.tensor(data((2, 3)), requires_grad=True)
    y = x[1, -1]
    assert y.shape == () and y.grad_fn.name == "getitem"
    y.backward()
    want = np.zeros((2, 3))
    want[1, -1] = 1
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_indices_given_as_tensors_and_numpy_scalars():
    a = data((4, 3))
    x = anb.tensor(a)
    np.testing.assert_array_equal(x[anb.tensor([3, 0])].numpy(), a[[3, 0]])
    np.testing.assert_array_equal(x[anb.tensor(2)].numpy(), a[2])
    np.testing.assert_array_equal(x[np.int64(-1), np.int32(1)].numpy(), a[-1, 1])
    mask = anb.tensor(a) > 0
    np.testing.assert_array_equal(x[mask].numpy(), a[a > 0])
    np.testing.assert_array_equal(x[:, anb.tensor([True, False, True])].numpy(), a[:, [0, 2]])
    np.testing.assert_array_equal(x[[anb.tensor(1), anb.tensor(1)]].numpy(), a[[1, 1]])
    np.testing.assert_array_equal(x[[[0, 1], [2, 3]]].numpy(), a[[[0, 1], [2, 3]]])


@pytest.mark.parametrize(
    "index",
    [5, (0, 0, 0), (slice(None), [0, 7]), 1.5, np.array([True, False]), (Ellipsis, Ellipsis)],
    ids=["out_of_bounds", "too_many", "array_out_of_bounds", "float", "mask_shape", "two_ellipses"],
)
def test_bad_indices_raise_like_numpy(index):
    a = data((3, 4))
    with pytest.raises(IndexError) as numpy_error:
        a[index]
    with pytest.raises(type(numpy_error.value)):
        anb.tensor(a, requires_grad=True)[index]


def test_float32_gradients_stay_float32():
    x = anb.tensor(np.ones((3, 4), np.float32), requires_grad=True)
    y = x[[0, 0], 1:3]
    assert y.dtype == np.float32
    (g,) = anb.grad(y.sum(), x)
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g.numpy()[0], [0, 2, 2, 0])


def test_integer_and_bool_tensors_index_without_grad():
    i = anb.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(i[1:, ::-2].numpy(), np.arange(12).reshape(3, 4)[1:, ::-2])
    b = anb.tensor([True, False, True])
    assert b[[2, 1]].tolist() == [True, False]
    assert not i[0].requires_grad


def test_second_derivatives_through_indexing():
    # Products of two selections: the rules (``_index_scatter`` and back) are differentiated.
    a = data((4, 5), seed=1)
    check_gradients(lambda t: t[1:, ::-1] * t[:-1, ::-1], [a])
    check_gradients(lambda t: t[[0, 0, 3]] * t[[1, 2, 2]] ** 2, [a])
    check_gradients(lambda t: (t[t.numpy() > 0] ** 3).sum(), [a])


def test_third_order_through_the_scatter_rule():
    x = anb.tensor([0.5, -1.0, 2.0], requires_grad=True)
    y = (x[[0, 0, 2]] ** 4).sum()
    (g,) = anb.grad(y, x, create_graph=True)
    (h,) = anb.grad(g.sum(), x, create_graph=True)
    (t,) = anb.grad(h.sum(), x)
    # d3/dx3 of 2 x0^4 + x2^4 is 48 x0 and 24 x2.
    np.testing.assert_allclose(t.numpy(), [48 * 0.5, 0.0, 24 * 2.0])


settings_small = settings(max_examples=25, deadline=None)


def check_against_numpy(a, index, seed):
    """``x[index]`` equals NumPy's, and its VJP equals a NumPy scatter-add of ``v``."""
    x = anb.tensor(a, requires_grad=True)
    y = x[index]
    np.testing.assert_array_equal(y.numpy(), a[index])
    v = np.random.default_rng(seed).standard_normal(y.shape)
    (g,) = anb.grad(y, x, grad_outputs=anb.tensor(v))
    np.testing.assert_allclose(g.numpy(), scatter_reference(a.shape, index, v), atol=1e-12)


@settings_small
@given(
    shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=4),
    data_=st.data(),
)
def test_basic_indices_match_numpy(shape, data_):
    index = data_.draw(hnp.basic_indices(shape, allow_newaxis=True))
    check_against_numpy(data(shape, seed=len(shape)), index, seed=1)


@settings_small
@given(
    shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4),
    data_=st.data(),
)
def test_integer_array_indices_match_numpy(shape, data_):
    index = data_.draw(
        hnp.integer_array_indices(
            shape, result_shape=hnp.array_shapes(min_dims=0, max_dims=2, max_side=4)
        )
    )
    check_against_numpy(data(shape), index, seed=2)


@settings_small
@given(
    shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4),
    seed=st.integers(0, 2**16),
)
def test_bool_masks_match_numpy(shape, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    mask = rng.uniform(size=shape[: 1 + seed % len(shape)]) > 0.5
    x = anb.tensor(a, requires_grad=True)
    y = x[mask]
    np.testing.assert_array_equal(y.numpy(), a[mask])
    v = rng.standard_normal(y.shape)
    (g,) = anb.grad(y, x, grad_outputs=anb.tensor(v))
    np.testing.assert_allclose(g.numpy(), scatter_reference(shape, mask, v), atol=1e-12)


# -- t[index] = v ------------------------------------------------------------------------------

SET_CASES = [
    ("int_row", 1, (4, 5)),
    ("scalar_value", (0, slice(1, 3)), ()),
    ("broadcast_row", (slice(None), 2), (1,)),
    ("broadcast_columns", (Ellipsis, slice(None, None, -2)), (4, 1)),
    ("leading_ones", (1, 2), (1, 1, 5)),
    ("single_element", (2, -1, -1), ()),
    ("int_array", [2, 0], (4, 5)),
    ("mixed_advanced", ([0, 2], slice(None), [4, 1]), (2, 4)),
    ("bool_mask", MASK, ()),
    ("negative_steps", (slice(None, None, -1), 0, slice(None, None, -2)), (3, 3)),
    ("none_and_ellipsis", (None, Ellipsis, 1), (3, 4)),
    ("empty", slice(2, 1), (5,)),
]
SET_IDS = [name for name, _, _ in SET_CASES]


@pytest.mark.parametrize(("index", "value_shape"), [c[1:] for c in SET_CASES], ids=SET_IDS)
def test_setitem_forward_matches_numpy(index, value_shape):
    a, v = data(), data(value_shape, seed=1)
    want = a.copy()
    want[index] = v
    t = anb.tensor(a)
    buffer = t.numpy()
    t[index] = anb.tensor(v)
    np.testing.assert_array_equal(t.numpy(), want)
    assert t.numpy() is buffer  # written in place
    t2 = anb.tensor(a)
    t2[index] = v  # a NumPy value works the same
    np.testing.assert_array_equal(t2.numpy(), want)


def _assigned(index):
    def function(x, v):
        y = x * 1.0  # a non-leaf copy, which may be written in place
        y[index] = v
        return y

    return function


@pytest.mark.parametrize(("index", "value_shape"), [c[1:] for c in SET_CASES], ids=SET_IDS)
def test_setitem_gradients(index, value_shape):
    a, v = data(), data(value_shape, seed=1)
    check_gradients(_assigned(index), [a, v])
    # Explicitly: g for x except at the written positions, g gathered and summed for v.
    x = anb.tensor(a, requires_grad=True)
    w = anb.tensor(v, requires_grad=True)
    y = _assigned(index)(x, w)
    g = np.random.default_rng(5).standard_normal(SHAPE)
    gx, gv = anb.grad(y, (x, w), grad_outputs=anb.tensor(g))
    written = np.zeros(SHAPE, dtype=bool)
    written[index] = True
    np.testing.assert_array_equal(gx.numpy(), np.where(written, 0.0, g))
    picked = np.broadcast_to(g[index], np.shape(a[index]))
    lead = picked.ndim - len(value_shape)
    if lead >= 0:
        axes = tuple(range(lead)) + tuple(
            lead + i for i, n in enumerate(value_shape) if n == 1 and picked.shape[lead + i] != 1
        )
        want = picked.sum(axis=axes, keepdims=True).reshape(value_shape)
    else:
        want = picked.reshape(value_shape)
    np.testing.assert_allclose(gv.numpy(), want, atol=1e-12)


def test_setitem_second_derivatives():
    a, v = data((3, 4), seed=2), data((4,), seed=3)

    def function(x, w):
        y = x * x
        y[1] = w * w
        y[:, [0, 0]] = w[:2] * 3.0
        return y * x

    check_gradients(function, [a, v])


def test_setitem_is_recorded_in_place():
    x = anb.tensor(data((2, 3)), requires_grad=True)
    y = x * 2
    old_node, version, buffer = y.grad_fn, y._version_number, y.numpy()
    y[0, 1:] = 7.0
    assert y.grad_fn is not old_node
    assert y.grad_fn.name == "setitem"
    assert y._version_number == version + 1
    assert y.numpy() is buffer
    assert not y.is_leaf
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[2, 0, 0], [2, 2, 2]])


def test_setitem_value_requiring_grad_makes_a_plain_tensor_part_of_the_graph():
    t = anb.zeros(4)
    w = anb.tensor([1.0, 2.0], requires_grad=True)
    t[1:3] = w
    assert t.requires_grad and not t.is_leaf
    (t * anb.tensor([1.0, 10.0, 100.0, 1000.0])).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [10.0, 100.0])


def test_setitem_casts_to_the_target_dtype_like_numpy():
    i = anb.arange(4)
    i[1] = 2.7
    want = np.arange(4)
    want[1] = 2.7
    assert i.dtype == np.int64
    np.testing.assert_array_equal(i.numpy(), want)
    f = anb.tensor(np.zeros(3, np.float32))
    f[:2] = anb.tensor([1, 2])
    assert f.dtype == np.float32
    np.testing.assert_array_equal(f.numpy(), [1, 2, 0])


def test_setitem_float32_target_float64_value_gradient_dtypes():
    x = anb.tensor(np.ones(3, np.float32), requires_grad=True)
    w = anb.tensor(2.0, requires_grad=True)
    y = x * 1
    y[0] = w
    assert y.dtype == np.float32
    gx, gw = anb.grad((y * 3).sum(), (x, w))
    assert gx.dtype == np.float32 and gw.dtype == np.float64
    np.testing.assert_array_equal(gx.numpy(), [0, 3, 3])
    assert gw.item() == 3.0


LEAF_MESSAGE = "a leaf Variable that requires grad is being used in an in-place operation"
INPLACE_MESSAGE = (
    "one of the variables needed for gradient computation has been modified by an inplace operation"
)


def test_setitem_on_a_leaf_that_requires_grad_raises_and_changes_nothing():
    x = anb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=LEAF_MESSAGE):
        x[0] = 5.0
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0, 3.0])
    assert x._version_number == 0 and x.is_leaf


def test_setitem_on_a_leaf_under_no_grad_works_like_torch():
    x = anb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with anb.no_grad():
        x[1:] = 0.0
    np.testing.assert_array_equal(x.numpy(), [1.0, 0.0, 0.0])
    assert x.is_leaf and x.requires_grad and x.grad_fn is None
    assert x._version_number == 1
    (x * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


@pytest.mark.parametrize(
    ("index", "value", "error"),
    [(5, 1.0, IndexError), (slice(0, 2), np.ones(3), ValueError), ([0, 9], 1.0, IndexError)],
    ids=["out_of_bounds", "bad_broadcast", "array_out_of_bounds"],
)
def test_setitem_errors_leave_the_tensor_unchanged(index, value, error):
    x = anb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1
    node = y.grad_fn
    with pytest.raises(error):
        np.array([1.0, 2.0, 3.0])[index] = value  # NumPy raises the same error type
    with pytest.raises(error):
        y[index] = value
    np.testing.assert_array_equal(y.numpy(), [1.0, 2.0, 3.0])
    assert y.grad_fn is node and y._version_number == 0


def test_setitem_on_a_saved_tensor_makes_backward_raise():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = anb.exp(x)  # exp saves its output
    y[0] = 0.0
    with pytest.raises(RuntimeError, match=INPLACE_MESSAGE):
        y.sum().backward()
    z = x * 1
    w = z * z  # saves z
    z[1] = 3.0
    with pytest.raises(RuntimeError, match=INPLACE_MESSAGE):
        w.sum().backward()


# -- in-place operators --------------------------------------------------------------------

INPLACE = {
    "+=": lambda y, w: y.__iadd__(w),
    "-=": lambda y, w: y.__isub__(w),
    "*=": lambda y, w: y.__imul__(w),
    "/=": lambda y, w: y.__itruediv__(w),
    "**=": lambda y, w: y.__ipow__(w),
}
OUT_OF_PLACE = {
    "+=": operator.add,
    "-=": operator.sub,
    "*=": operator.mul,
    "/=": operator.truediv,
    "**=": operator.pow,
}
NUMPY_INPLACE = {
    "+=": np.add,
    "-=": np.subtract,
    "*=": np.multiply,
    "/=": np.divide,
    "**=": np.power,
}


@pytest.mark.parametrize("symbol", list(INPLACE))
def test_inplace_operator_values_and_recording(symbol):
    a, b = np.abs(data((2, 3))) + 0.5, np.abs(data((3,), seed=1)) + 0.5
    x = anb.tensor(a, requires_grad=True)
    y = x * 1
    buffer = y.numpy()
    out = INPLACE[symbol](y, anb.tensor(b))
    assert out is y
    assert y.numpy() is buffer
    np.testing.assert_allclose(y.numpy(), NUMPY_INPLACE[symbol](a, b), rtol=1e-15)
    assert y._version_number == 1
    assert y.grad_fn.name == NUMPY_INPLACE[symbol].__name__


@pytest.mark.parametrize("symbol", list(INPLACE))
def test_inplace_operator_gradients(symbol):
    a, b = np.abs(data((2, 3))) + 0.5, np.abs(data((3,), seed=1)) + 0.5

    def function(x, w):
        y = x * x  # non-leaf, and saved by this multiply: the in-place op must not disturb it
        INPLACE[symbol](y, w)
        return y

    check_gradients(function, [a, b])

    def with_scalar(x):
        y = x + 0.0
        INPLACE[symbol](y, 1.5)
        return y * x

    check_gradients(with_scalar, [a])


@pytest.mark.parametrize("symbol", list(INPLACE))
def test_inplace_operator_on_a_leaf_that_requires_grad_raises(symbol):
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=LEAF_MESSAGE):
        INPLACE[symbol](x, 2.0)
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    assert x._version_number == 0


@pytest.mark.parametrize("symbol", list(INPLACE))
def test_inplace_operator_on_a_leaf_under_no_grad(symbol):
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    with anb.no_grad():
        INPLACE[symbol](x, 2.0)
    np.testing.assert_allclose(x.numpy(), NUMPY_INPLACE[symbol](np.array([1.0, 2.0]), 2.0))
    assert x.is_leaf and x.requires_grad and x._version_number == 1


@pytest.mark.parametrize("symbol", list(INPLACE))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.compiled_only
def test_inplace_under_no_grad_writes_the_out_of_place_bits_into_the_buffer(symbol, dtype,
                                                                          monkeypatch):
    # ``p -= lr * g`` under no_grad: the op's kernel writes straight into p's buffer
    # (ElementwiseOp.run_pair with out) from the second call of a layout on, the same bits as the
    # out-of-place result; operands that share p's memory go the out-of-place way.
    a = (np.abs(data((4, 5))) + 0.5).astype(dtype)
    out_of_place = []
    for other in (np.abs(data((4, 5), seed=1)) + 0.5, np.abs(data((5,), seed=2)) + 0.5, 1.5):
        other = anb.tensor(other.astype(dtype)) if isinstance(other, np.ndarray) else other
        p = anb.tensor(a, requires_grad=True)
        buffer = p.numpy()
        with anb.no_grad():
            for version in (1, 2, 3):
                expected = OUT_OF_PLACE[symbol](anb.tensor(p.numpy()), other).numpy()
                monkeypatch.setattr(registry, "call",
                                    lambda *args, **attrs: out_of_place.append(args))
                assert INPLACE[symbol](p, other) is p
                monkeypatch.undo()
                assert out_of_place == []  # (the layout is known: the operators ran it)
                assert p.numpy() is buffer and p._version_number == version
                np.testing.assert_array_equal(p.numpy().view(np.uint8), expected.view(np.uint8))
        assert p.is_leaf and p.requires_grad and p.grad_fn is None
    q = anb.tensor(a)
    same = q.detach()  # q's own buffer, read while it is written
    assert same.numpy() is q.numpy()
    for _ in range(2):
        expected = OUT_OF_PLACE[symbol](anb.tensor(q.numpy()), anb.tensor(q.numpy())).numpy()
        INPLACE[symbol](q, same)
        np.testing.assert_array_equal(q.numpy().view(np.uint8), expected.view(np.uint8))


@pytest.mark.parametrize("symbol", list(INPLACE))
def test_inplace_operator_on_a_saved_tensor_makes_backward_raise(symbol):
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    z = anb.sin(y)  # saves y
    INPLACE[symbol](y, 2.0)
    with pytest.raises(RuntimeError, match=INPLACE_MESSAGE):
        z.sum().backward()
    # A tensor that nothing saved can be modified in place freely.
    u = x * 3
    INPLACE[symbol](u, 2.0)
    u.sum().backward()
    assert x.grad is not None


def test_python_operator_statements():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    y += 1
    y -= 0.5
    y *= 2
    y /= 4
    y **= 2
    expected = ((np.array([1.0, 2.0]) + 0.5) * 2 / 4) ** 2
    np.testing.assert_allclose(y.numpy(), expected)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (np.array([1.0, 2.0]) + 0.5) / 4)


def test_inplace_shape_and_dtype_errors_leave_the_tensor_unchanged():
    x = anb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1
    node = y.grad_fn
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        y += anb.ones((2, 3))
    i = anb.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match="can't be cast"):
        i /= 2
    with pytest.raises(RuntimeError, match="can't be cast"):
        i += 0.5
    np.testing.assert_array_equal(y.numpy(), [1.0, 2.0, 3.0])
    assert y.grad_fn is node and y._version_number == 0
    np.testing.assert_array_equal(i.numpy(), [1, 2, 3])
    assert i.dtype == np.int64 and i._version_number == 0


def test_inplace_keeps_the_target_dtype_and_gradient_dtypes():
    x = anb.tensor(np.ones(3, np.float32), requires_grad=True)
    w = anb.tensor(np.full(3, 2.0), requires_grad=True)
    y = x * 1
    y *= w
    assert y.dtype == np.float32
    gx, gw = anb.grad((y * y).sum(), (x, w))
    assert gx.dtype == np.float32 and gw.dtype == np.float64
    np.testing.assert_allclose(gx.numpy(), 8.0)
    np.testing.assert_allclose(gw.numpy(), 4.0)
    i = anb.tensor([1, 2])
    i += 3
    i *= anb.tensor([2, 2])
    assert i.dtype == np.int64 and i.tolist() == [8, 10]


def test_inplace_with_a_tensor_that_requires_grad_on_a_plain_leaf():
    t = anb.zeros(2)
    w = anb.tensor([1.0, 2.0], requires_grad=True)
    t += w
    assert t.grad_fn.name == "add" and not t.is_leaf
    (t * t).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 4.0])


def test_inplace_through_detach_shares_the_version_counter():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = anb.exp(x)
    d = y.detach()
    d += 1  # also changes y, which exp saved
    assert y._version_number == 1
    np.testing.assert_allclose(y.numpy(), np.exp([1.0, 2.0]) + 1)
    with pytest.raises(RuntimeError, match=INPLACE_MESSAGE):
        y.sum().backward()


def test_retained_grad_follows_the_inplace_result():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    y.retain_grad()
    y *= 3
    (y * y).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), 2 * 3 * np.array([1.0, 2.0]))
    np.testing.assert_allclose(x.grad.numpy(), 18 * np.array([1.0, 2.0]))


def test_inplace_ops_keep_their_saved_result_apart_from_the_target():
    # ``y **= e`` saves its result for e's gradient; later in-place ops on y change y, not
    # what the power node saved, so the gradient stays right and nothing raises.
    x = anb.tensor([1.5, 2.0], requires_grad=True)
    e = anb.tensor([2.0, 3.0], requires_grad=True)
    y = x * 1
    y **= e
    y += 1
    y /= 4  # divide saves its result too; the power below must not invalidate it
    y **= 2
    gx, ge = anb.grad(y.sum(), (x, e))
    p = np.array([1.5, 2.0]) ** np.array([2.0, 3.0])
    outer = 2 * (p + 1) / 4 / 4
    np.testing.assert_allclose(gx.numpy(), outer * np.array([2 * 1.5, 3 * 4.0]))
    np.testing.assert_allclose(ge.numpy(), outer * p * np.log([1.5, 2.0]))


def test_setitem_repeated_positions_last_write_wins_and_gets_the_gradient():
    want = np.zeros(3)
    want[[0, 2, 0]] = [1.0, 2.0, 3.0]
    w = anb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    t = anb.zeros(3)
    t[[0, 2, 0]] = w
    np.testing.assert_array_equal(t.numpy(), want)
    (t * anb.tensor([10.0, 20.0, 30.0])).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [0.0, 30.0, 10.0])
    check_gradients(_assigned(([1, 1, 0], slice(None), 0)), [data(), data((3, 4), seed=4)])


@pytest.mark.parametrize(
    "index",
    [
        (1, slice(None, None, -2)),
        (Ellipsis, 0),
        (None, 2, -1, slice(1, 4)),
        ([0, 0, 2], 1),
        (slice(None), [1, 1], [4, 0]),
        MASK,
        slice(2, 1),
    ],
    ids=["slices", "ellipsis", "none_0d", "repeated", "mixed", "mask", "empty"],
)
def test_batched_vjps_equal_the_stacked_single_vjps(index):
    x = anb.tensor(data(), requires_grad=True)
    w = anb.tensor(data(seed=2), requires_grad=True)
    y = x[index] * 2.0
    z = w * 1.0
    z[index] = y
    out = z * w
    v = np.random.default_rng(4).standard_normal((3,) + out.shape)
    batched = anb.grad(
        out, (x, w), grad_outputs=anb.tensor(v), is_grads_batched=True, retain_graph=True
    )
    for b in range(3):
        rows = anb.grad(out, (x, w), grad_outputs=anb.tensor(v[b]), retain_graph=True)
        for got, want in zip(batched, rows, strict=True):
            np.testing.assert_allclose(got.numpy()[b], want.numpy(), atol=1e-12)


def test_batched_vjps_with_zero_d_rows():
    x = anb.tensor(1.5, requires_grad=True)
    w = anb.tensor(2.0, requires_grad=True)
    z = anb.zeros(3) * x
    z[1] = w * x  # 0-d value: its gradient rows are 0-d
    y = x[np.array(True)] * z  # advanced index on a 0-d input
    v = np.random.default_rng(6).standard_normal((4, 3))
    gx, gw = anb.grad(y, (x, w), grad_outputs=anb.tensor(v), is_grads_batched=True)
    assert gx.shape == gw.shape == (4,)
    np.testing.assert_allclose(gw.numpy(), v[:, 1] * 1.5 * 1.5)
    np.testing.assert_allclose(gx.numpy(), v[:, 1] * 2 * 2.0 * 1.5)


# -- the cached eager path (``Op._run``) against prepare + forward --------------------------------


@settings(max_examples=25, deadline=None)
@given(
    shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4),
    data=st.data(),
    dtype=st.sampled_from([np.float32, np.float64, np.int64]),
)
def test_getitem_run_matches_the_general_path(shape, data, dtype):

    layout = data.draw(st.sampled_from(["contiguous", "strided"]), label="layout")
    x = layout_variant(np.arange(np.prod(shape)).reshape(shape).astype(dtype), layout)
    ints = [data.draw(st.integers(-n, n - 1)) for n in shape[: data.draw(st.integers(1, 3))]]
    index = data.draw(st.sampled_from([
        ints[0],
        tuple(ints),
        (None, *ints),
        (Ellipsis, data.draw(st.integers(-shape[-1], shape[-1] - 1))),
        (ints[0], None, Ellipsis),
    ]), label="index")
    got = assert_run_matches_general(REGISTRY["getitem"], [x], {"index": index})
    np.testing.assert_array_equal(got, x[index])


@pytest.mark.compiled_only
def test_cached_getitem_keeps_numpy_semantics():
    x = anb.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    assert x[1].shape == (4,)
    assert x[True].shape == (1, 3, 4)  # a bool is a mask, not the int it equals
    assert x[1].shape == (4,)
    assert x[(1, 2)].item() == 6.0
    assert x[np.int64(1)].shape == (4,)
    with pytest.raises(IndexError):
        x[3]
    with pytest.raises(IndexError):
        x[3]  # raised again: a failed index is never cached
    first, second = x[2], x[2]
    assert first.grad_fn.attrs is second.grad_fn.attrs
    (g,) = anb.grad((first * second).sum() + x[0, 1], x)
    expected = np.zeros((3, 4))
    expected[2] = 2 * np.arange(8.0, 12.0)
    expected[0, 1] = 1.0
    np.testing.assert_array_equal(g.numpy(), expected)
