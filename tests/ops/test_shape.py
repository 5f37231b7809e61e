"""Shape ops and composites: forward against NumPy (tests/reference.py), gradients against
finite differences (kernels, differentiable rules, second order), NumPy's edge cases (negative
axes, tuple axes, axis=None) and its errors, dtypes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import autograd_nb as anb
from autograd_nb.ops.registry import FUNCTIONS, REGISTRY
from tests.checks import check_gradients
from tests.ops.test_elementwise import assert_run_matches_general, layout_variant
from tests.reference import REFERENCE

SHAPE_FUNCTIONS = (
    "reshape transpose swapaxes expand_dims squeeze broadcast_to concatenate stack ravel".split()
)

shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=3)
nonempty = hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=3)
fast = settings(max_examples=12, deadline=None)


def squared(function):
    # Shape ops are linear; squaring the result makes their rules' own derivatives matter in
    # the second-order check (the gradient then depends on the input).
    return lambda *tensors: anb.square(function(*tensors))


def check_against_numpy(name, arrays, *args, **kwargs):
    got = getattr(anb, name)(*(anb.tensor(a) for a in arrays), *args, **kwargs)
    expected = REFERENCE[name](*arrays, *args, **kwargs)
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got.numpy(), expected)
    return got


def test_registry_has_the_api_shape_functions():
    for name in SHAPE_FUNCTIONS:
        assert FUNCTIONS[name].family == "shape"
        assert name in REFERENCE
        assert FUNCTIONS[name].__doc__ and "Examples" in FUNCTIONS[name].__doc__


# -- reshape, ravel ----------------------------------------------------------------------------


@fast
@given(shape=shapes, data=st.data())
def test_reshape(shape, data):
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape)
    new_shape = list(data.draw(st.permutations(shape)))
    if new_shape and x.size and data.draw(st.booleans()):
        new_shape[data.draw(st.integers(0, len(new_shape) - 1))] = -1
    check_against_numpy("reshape", [x], tuple(new_shape))
    check_gradients(squared(lambda t: anb.reshape(t, tuple(new_shape))), [x])


@pytest.mark.parametrize(
    "shape, new_shape",
    [
        ((2, 3), 6),
        ((2, 3), (3, -1)),
        ((2, 3), (3, -2)),
        ((1,), ()),
        ((), (1, 1)),
        ((0, 3), (-1, 3)),
    ],
)
def test_reshape_forms(shape, new_shape):
    x = np.arange(float(np.prod(shape, dtype=int))).reshape(shape)
    check_against_numpy("reshape", [x], new_shape)


def test_reshape_method_takes_varargs_and_tuples():
    x = anb.arange(6.0)
    assert x.reshape(2, 3).shape == x.reshape((2, 3)).shape == (2, 3)
    assert x.reshape(-1).shape == (6,)


@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 1, 2)])
def test_ravel(shape):
    x = np.random.default_rng(0).standard_normal(shape)
    check_against_numpy("ravel", [x])
    check_gradients(squared(anb.ravel), [x])


# -- transpose, swapaxes -----------------------------------------------------------------------


@fast
@given(shape=nonempty, data=st.data())
def test_transpose_with_negative_axes(shape, data):
    ndim = len(shape)
    axes = data.draw(st.permutations(range(ndim)))
    axes = tuple(a - ndim if data.draw(st.booleans()) else a for a in axes)
    x = np.random.default_rng(ndim).standard_normal(shape)
    check_against_numpy("transpose", [x], axes)
    check_gradients(squared(lambda t: anb.transpose(t, axes)), [x])


def test_transpose_default_reverses_and_methods():
    x = np.random.default_rng(1).standard_normal((2, 3, 4))
    check_against_numpy("transpose", [x])
    t = anb.tensor(x)
    np.testing.assert_array_equal(t.T.numpy(), x.T)
    np.testing.assert_array_equal(t.transpose().numpy(), x.transpose())
    np.testing.assert_array_equal(t.transpose(1, 0, 2).numpy(), x.transpose(1, 0, 2))
    np.testing.assert_array_equal(t.transpose((2, 0, 1)).numpy(), x.transpose((2, 0, 1)))
    np.testing.assert_array_equal(t.transpose([-1, 0, 1]).numpy(), x.transpose([-1, 0, 1]))
    assert anb.transpose(anb.tensor(2.0)).shape == ()


@pytest.mark.parametrize("axis1, axis2", [(0, 2), (-1, 0), (1, -2), (2, 2)])
def test_swapaxes(axis1, axis2):
    x = np.random.default_rng(2).standard_normal((2, 3, 4))
    check_against_numpy("swapaxes", [x], axis1, axis2)
    np.testing.assert_array_equal(
        anb.tensor(x).swapaxes(axis1, axis2).numpy(), np.swapaxes(x, axis1, axis2)
    )
    check_gradients(squared(lambda t: anb.swapaxes(t, axis1, axis2)), [x])


# -- expand_dims, squeeze ----------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, -1, 2, (0, 1), (0, -1), (-1, -4), [1, 3]])
def test_expand_dims(axis):
    x = np.random.default_rng(3).standard_normal((2, 3))
    check_against_numpy("expand_dims", [x], axis)
    check_gradients(squared(lambda t: anb.expand_dims(t, axis)), [x])


def test_expand_dims_of_arrays_and_lists():
    assert anb.expand_dims(np.ones(3), 0).shape == (1, 3)
    assert anb.expand_dims([1.0, 2.0], -1).shape == (2, 1)


@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), (-1, 0), (-4, -1)])
def test_squeeze(axis):
    x = np.random.default_rng(4).standard_normal((1, 3, 1, 1))
    check_against_numpy("squeeze", [x], axis)
    check_gradients(squared(lambda t: anb.squeeze(t, axis)), [x])


def test_squeeze_everything_gives_0d():
    check_against_numpy("squeeze", [np.ones((1, 1))])
    check_against_numpy("squeeze", [np.ones(())])


# -- broadcast_to ------------------------------------------------------------------------------


@fast
@given(target=shapes, data=st.data())
def test_broadcast_to(target, data):
    # Drop some leading dimensions and set some of the others to 1.
    lead = data.draw(st.integers(0, len(target)))
    shape = tuple(1 if data.draw(st.booleans()) else n for n in target[lead:])
    x = np.random.default_rng(len(shape)).standard_normal(shape)
    check_against_numpy("broadcast_to", [x], target)
    check_gradients(squared(lambda t: anb.broadcast_to(t, target)), [x])


def test_broadcast_to_takes_an_int():
    check_against_numpy("broadcast_to", [np.array(2.0)], 3)


# -- concatenate, stack ------------------------------------------------------------------------


@fast
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=3), data=st.data())
def test_concatenate(shape, data):
    ndim = len(shape)
    axis = data.draw(st.integers(-ndim, ndim - 1))
    lengths = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    rng = np.random.default_rng(sum(lengths))
    arrays = []
    for n in lengths:
        piece = list(shape)
        piece[axis] = n
        arrays.append(rng.standard_normal(piece))
    expected = np.concatenate(arrays, axis=axis)
    got = anb.concatenate([anb.tensor(a) for a in arrays], axis=axis)
    np.testing.assert_array_equal(got.numpy(), expected)
    check_gradients(squared(lambda *ts: anb.concatenate(ts, axis=axis)), arrays)


def test_concatenate_axis_none_flattens():
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(s) for s in [(2, 3), (4,), (), (1, 2, 1)]]
    got = anb.concatenate([anb.tensor(a) for a in arrays], axis=None)
    np.testing.assert_array_equal(got.numpy(), REFERENCE["concatenate"](arrays, axis=None))
    check_gradients(squared(lambda *ts: anb.concatenate(ts, axis=None)), arrays)


def test_concatenate_of_one_tensor_joins_its_rows():
    x = np.random.default_rng(6).standard_normal((3, 2, 2))
    got = anb.concatenate(anb.tensor(x), axis=1)
    np.testing.assert_array_equal(got.numpy(), np.concatenate(x, axis=1))
    check_gradients(squared(lambda t: anb.concatenate(t, axis=-1)), [x])


def test_concatenate_mixes_tensors_arrays_and_lists():
    got = anb.concatenate([anb.tensor([1.0, 2.0]), np.array([3.0]), [4.0, 5.0]])
    np.testing.assert_array_equal(got.numpy(), [1, 2, 3, 4, 5])


@fast
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3), data=st.data())
def test_stack(shape, data):
    ndim = len(shape)
    axis = data.draw(st.integers(-ndim - 1, ndim))
    count = data.draw(st.integers(1, 3))
    rng = np.random.default_rng(count + ndim)
    arrays = [rng.standard_normal(shape) for _ in range(count)]
    got = anb.stack([anb.tensor(a) for a in arrays], axis=axis)
    expected = REFERENCE["stack"](arrays, axis=axis)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got.numpy(), expected)
    check_gradients(squared(lambda *ts: anb.stack(ts, axis=axis)), arrays)


@pytest.mark.parametrize("name", ["concatenate", "stack"])
def test_join_dtypes(name):
    join = getattr(anb, name)
    a = anb.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    b = anb.tensor(np.full((2, 3), 2.0, np.float32), requires_grad=True)
    assert join([a, b]).dtype == np.float32
    c = anb.tensor(np.full((2, 3), 3.0), requires_grad=True)
    y = join([a, c], axis=1)
    assert y.dtype == np.float64
    v = np.random.default_rng(7).standard_normal(y.shape)
    ga, gc = anb.grad(y, (a, c), grad_outputs=anb.tensor(v))
    assert ga.dtype == np.float32 and gc.dtype == np.float64
    expected = getattr(np, name)([np.zeros((2, 3)), np.ones((2, 3))], axis=1)
    np.testing.assert_allclose(
        gc.numpy(), np.sum(v * expected, axis=1).reshape(2, 3) if name == "stack" else v[:, 3:]
    )
    ints = join([anb.tensor([1, 2]), anb.tensor([3, 4])])
    assert ints.dtype == np.int64
    np.testing.assert_array_equal(ints.numpy(), getattr(np, name)([[1, 2], [3, 4]]))


def test_concatenate_gradient_accumulates_over_repeated_inputs():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = anb.concatenate([x, x * 3, x])
    (g,) = anb.grad(y.sum(), x)
    np.testing.assert_array_equal(g.numpy(), [5.0, 5.0])
    assert y.grad_fn.name == "concatenate"


# -- float32 -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, args",
    [
        ("reshape", ((3, 2),)),
        ("transpose", ()),
        ("swapaxes", (0, 1)),
        ("expand_dims", (1,)),
        ("squeeze", ()),
        ("broadcast_to", ((4, 2, 3),)),
        ("ravel", ()),
    ],
)
def test_float32_stays_float32(name, args):
    x = anb.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    y = getattr(anb, name)(x, *args)
    assert y.dtype == np.float32
    (g,) = anb.grad(y.sum(), x)
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g.numpy(), np.full((2, 3), y.size / x.size, np.float32))


# -- errors ------------------------------------------------------------------------------------

x23 = np.ones((2, 3))

ERRORS = [
    # (function, args, exception, phrase of the message)
    ("reshape", (x23, (4, 2)), ValueError, "cannot reshape array of size 6 into shape"),
    ("reshape", (x23, (-1, -1)), ValueError, "can only specify one unknown dimension"),
    ("reshape", (x23, (4, -1)), ValueError, "cannot reshape array of size 6"),
    ("transpose", (x23, (0, 2)), np.exceptions.AxisError, "axis 2 is out of bounds"),
    ("transpose", (x23, (0, 0)), ValueError, "repeated axis in transpose"),
    ("transpose", (x23, (0,)), ValueError, "axes don't match array"),
    ("swapaxes", (x23, 0, 2), np.exceptions.AxisError, "axis2: axis 2 is out of bounds"),
    ("swapaxes", (x23, -3, 0), np.exceptions.AxisError, "axis1: axis -3 is out of bounds"),
    ("expand_dims", (x23, 3), np.exceptions.AxisError, "axis 3 is out of bounds"),
    ("expand_dims", (x23, (0, 0)), ValueError, "repeated axis"),
    ("squeeze", (x23, 0), ValueError, "cannot select an axis to squeeze out"),
    ("squeeze", (x23, 2), np.exceptions.AxisError, "axis 2 is out of bounds"),
    ("broadcast_to", (x23, (3,)), ValueError, "shape (2, 3) to shape (3,)"),
    ("broadcast_to", (x23, (4, 3)), ValueError, "cannot broadcast"),
    ("broadcast_to", (x23, (-1, 3)), ValueError, "must be non-negative"),
    ("concatenate", ([],), ValueError, "need at least one array to concatenate"),
    (
        "concatenate",
        ([x23, np.ones(3)],),
        ValueError,
        "the array at index 0 has 2 dimension(s) and the array at index 1 has 1 dimension(s)",
    ),
    (
        "concatenate",
        ([x23, np.ones((2, 4))],),
        ValueError,
        "along dimension 1, the array at index 0 has size 3 and the array at index 1 has size 4",
    ),
    ("concatenate", ([np.ones(()), np.ones(())],), ValueError, "zero-dimensional arrays"),
    ("concatenate", ([x23, x23], 2), np.exceptions.AxisError, "axis 2 is out of bounds"),
    ("stack", ([],), ValueError, "need at least one array to stack"),
    ("stack", ([x23, np.ones((3, 2))],), ValueError, "all input arrays must have the same shape"),
    ("stack", ([x23, x23], -4), np.exceptions.AxisError, "axis -4 is out of bounds"),
]


@pytest.mark.parametrize("name, args, error, phrase", ERRORS)
def test_errors_match_numpy(name, args, error, phrase):
    with pytest.raises(error) as numpy_error:
        REFERENCE[name](*args)
    tensor_args = tuple(
        anb.tensor(a)
        if isinstance(a, np.ndarray)
        else [anb.tensor(p) for p in a]
        if isinstance(a, list)
        else a
        for a in args
    )
    with pytest.raises(error) as ours:
        getattr(anb, name)(*tensor_args)
    assert phrase in str(ours.value), str(ours.value)
    assert type(ours.value) is type(numpy_error.value)


def test_errors_leave_the_graph_alone():
    x = anb.tensor(np.ones((2, 3)), requires_grad=True)
    y = x * 2
    with pytest.raises(ValueError):
        anb.concatenate([y, anb.ones(4)])
    (g,) = anb.grad(y.sum(), x)
    np.testing.assert_array_equal(g.numpy(), np.full((2, 3), 2.0))


# -- batched VJPs ------------------------------------------------------------------------------

BATCHED_CASES = [
    # (function of tensors, input shapes); 0-d inputs included, whose rows are 0-d too
    (lambda t: anb.reshape(t, (1, 1)), [()]),
    (lambda t: anb.reshape(t, (3, 2)), [(2, 3)]),
    (lambda t: anb.transpose(t, (2, 0, 1)), [(2, 3, 2)]),
    (lambda t: anb.transpose(t), [()]),
    (lambda t: anb.broadcast_to(t, (2, 3)), [()]),
    (lambda t: anb.broadcast_to(t, (4, 2, 3)), [(2, 1)]),
    (lambda t: anb.squeeze(t), [(1, 3, 1)]),
    (lambda t: t.astype(np.float32), [(2, 3)]),
    (lambda a, b: anb.concatenate([a, b], axis=1), [(2, 3), (2, 1)]),
    (lambda a, b: anb.concatenate([a, b], axis=None), [(), (2, 2)]),
    (lambda a, b: anb.stack([a, b], axis=-1), [(2, 3), (2, 3)]),
    (lambda a, b: anb.stack([a, b]), [(), ()]),
]


@pytest.mark.parametrize("function, input_shapes", BATCHED_CASES)
def test_batched_vjps_match_rows(function, input_shapes):
    rng = np.random.default_rng(10)
    tensors = [anb.tensor(rng.standard_normal(s), requires_grad=True) for s in input_shapes]
    y = function(*tensors)
    v = rng.standard_normal((3,) + y.shape).astype(y.dtype)
    batched = anb.grad(
        y, tensors, grad_outputs=anb.tensor(v), is_grads_batched=True, retain_graph=True
    )
    for row in range(v.shape[0]):
        expected = anb.grad(y, tensors, grad_outputs=anb.tensor(v[row]), retain_graph=True)
        for got, want in zip(batched, expected, strict=True):
            assert got.shape == (3,) + want.shape
            np.testing.assert_allclose(got.numpy()[row], want.numpy(), rtol=1e-6)


# -- the cached eager path (``Op._run``) against prepare + forward --------------------------------


@fast
@given(
    shape=shapes,
    count=st.integers(1, 4),
    data=st.data(),
    dtype=st.sampled_from([np.float32, np.float64, np.int64]),
)
def test_stack_run_matches_the_general_path(shape, count, data, dtype):

    axis = data.draw(st.integers(-len(shape) - 1, len(shape)), label="axis")
    layout = data.draw(st.sampled_from(["contiguous", "strided"]), label="layout")
    rng = np.random.default_rng(count)
    arrays = [layout_variant((10 * rng.standard_normal(shape)).astype(dtype), layout)
              for _ in range(count)]
    got = assert_run_matches_general(REGISTRY["stack"], arrays, {"axis": axis})
    np.testing.assert_array_equal(got, np.stack(arrays, axis=axis))


@fast
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=3), data=st.data())
def test_concatenate_run_matches_the_general_path(shape, data):

    axis = data.draw(st.sampled_from([None, *range(-len(shape), len(shape))]), label="axis")
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(shape), rng.standard_normal(shape)]
    got = assert_run_matches_general(REGISTRY["concatenate"], arrays, {"axis": axis})
    np.testing.assert_array_equal(got, np.concatenate(arrays, axis=axis))


def test_stack_errors_stay_after_a_cached_call():
    a = anb.tensor(np.ones((1, 3)))
    assert anb.stack([a, a], axis=1).shape == (1, 2, 3)  # length-1 dims before the new axis
    with pytest.raises(ValueError, match="all input arrays must have the same shape"):
        anb.stack([a, anb.tensor(np.ones((3, 1)))])
    with pytest.raises(np.exceptions.AxisError):
        anb.stack([a, a], axis=3)
    with pytest.raises(ValueError, match="need at least one array to stack"):
        anb.stack([])


def test_stacked_scalars_record_one_node_sharing_attrs():
    xs = [anb.tensor(float(v), requires_grad=True) for v in range(4)]
    first, second = anb.stack(xs), anb.stack(xs[::-1])
    np.testing.assert_array_equal(first.numpy(), [0.0, 1.0, 2.0, 3.0])
    assert first.grad_fn.attrs is second.grad_fn.attrs
    assert first.grad_fn.next_functions == tuple(xs)
    grads = anb.grad((first * anb.tensor([1.0, 2.0, 3.0, 4.0])).sum(), xs)
    assert [g.item() for g in grads] == [1.0, 2.0, 3.0, 4.0]
