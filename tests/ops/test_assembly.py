"""Assembly and rearrangement (autograd_nb/ops/assembly.py): stacking, splitting, rolling,
repeating, tiling, flips, rotations, moveaxis, pad, sort, take, take_along_axis, diff,
flatten, r_ and c_. Forward against NumPy (tests/reference.py) over shapes and axes drawn by
hypothesis, gradients against finite differences to second order, NumPy's errors, and the
same functions through ``autograd_nb.numpy``."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import autograd_nb as anb
import autograd_nb.numpy as anp
from autograd_nb.ops import assembly
from autograd_nb.ops.registry import FUNCTIONS
from tests.checks import check_gradients
from tests.reference import REFERENCE

#: Every public function of ops/assembly.py.
ASSEMBLY = sorted(
    name for name, fn in FUNCTIONS.items() if getattr(fn, "__module__", None) == assembly.__name__
) + ["r_", "c_"]

shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3)
fast = settings(max_examples=10, deadline=None)


def sample(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def squared(function):
    # The functions here are linear; squaring makes their rules' own derivatives matter in
    # the second-order check.
    return lambda *tensors: anb.square(function(*tensors))


def same(got, expected):
    """``got`` (a Tensor, or a list or tuple of them) holds NumPy's ``expected``."""
    if isinstance(expected, (list, tuple)):
        assert type(got) is type(expected) and len(got) == len(expected)
        for g, e in zip(got, expected):
            same(g, e)
        return
    assert isinstance(got, anb.Tensor)
    assert got.shape == np.shape(expected), (got.shape, np.shape(expected))
    assert got.dtype == np.asarray(expected).dtype
    np.testing.assert_array_equal(got.numpy(), expected)


def check(function, arrays, second_order=True):
    """``function(module, *inputs)`` with ``anb`` and Tensors equals it with NumPy and
    arrays; its gradients pass the finite-difference checks."""
    expected = function(np, *arrays)
    same(function(anb, *(anb.tensor(a) for a in arrays)), expected)
    if not isinstance(expected, (list, tuple)):
        check_gradients(squared(lambda *ts: function(anb, *ts)), arrays, second_order=second_order)
    return expected


def test_every_function_is_registered_with_a_reference_and_an_example():
    assert {"vstack", "pad", "sort", "take_along_axis", "diff", "flatten"} <= set(ASSEMBLY)
    for name in ASSEMBLY:
        assert FUNCTIONS[name].family == "shape"
        assert name in REFERENCE
        assert getattr(anb, name) is FUNCTIONS[name]
        doc = FUNCTIONS[name].__doc__ or type(FUNCTIONS[name]).__doc__
        assert "Examples" in doc, name


# -- stacking ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["vstack", "hstack", "dstack", "column_stack"])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 3, 2)])
def test_stacking(name, shape):
    if name == "column_stack" and len(shape) > 2:
        shape = shape[:2]
    arrays = [sample(shape, 0), sample(shape, 1)]
    check(lambda m, a, b: getattr(m, name)([a, b]), arrays, second_order=len(shape) == 1)


def test_stacking_mixed_ranks_lists_and_arrays():
    a, b = sample((2, 3)), sample(3, 1)
    same(anb.vstack([anb.tensor(a), b, [1.0, 2.0, 3.0]]), np.vstack([a, b, [1.0, 2.0, 3.0]]))
    same(anb.column_stack([anb.tensor(a.T), b]), np.column_stack([a.T, b]))
    same(anb.hstack((anb.tensor(b), 4.0 * np.ones(1))), np.hstack((b, 4.0 * np.ones(1))))
    same(anb.vstack(anb.tensor(a)), np.vstack(a))  # a tensor is a sequence of rows
    same(anb.vstack([anb.tensor(a)], dtype=np.float32), np.vstack([a], dtype=np.float32))
    with pytest.raises(TypeError, match="same_kind"):
        anb.vstack([anb.tensor(a)], dtype=np.int64)


@pytest.mark.parametrize("name", ["atleast_1d", "atleast_2d", "atleast_3d"])
@pytest.mark.parametrize("shape", [(), (2,), (2, 3), (2, 3, 1, 2)])
def test_atleast(name, shape):
    x = sample(shape)
    check(lambda m, t: getattr(m, name)(t), [x], second_order=False)
    got = getattr(anb, name)(anb.tensor(x), anb.tensor(2.0))
    same(got, getattr(np, name)(x, 2.0))


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_append(axis):
    a, b = sample((2, 3)), sample((2, 3), 1)
    check(lambda m, x, y: m.append(x, y, axis=axis), [a, b], second_order=axis == 1)


# -- r_ and c_ ---------------------------------------------------------------------------------


R_CASES = [
    lambda m, x, y: m.r_[x, y],
    lambda m, x, y: m.r_[x, 0.5, y, 1:4],
    lambda m, x, y: m.r_[x, 0:1:3j, -2.0, y],
    lambda m, x, y: m.r_["0,2", x, y],
    lambda m, x, y: m.r_["0,2,0", x, y],
    lambda m, x, y: m.r_["1,2,0", x, y],
    lambda m, x, y: m.r_["-1", x[None], y[None]],
    lambda m, x, y: m.c_[x, y],
    lambda m, x, y: m.c_[x, 1:4, y * 2.0],
    lambda m, x, y: m.c_[x[:, None], y],
]


@pytest.mark.parametrize("case", range(len(R_CASES)))
def test_r_and_c(case):
    check(R_CASES[case], [sample(3), sample(3, 1)], second_order=case == 1)


def test_r_and_c_without_tensors_are_numpys():
    assert type(anb.r_[1:3, 5.0]) is np.ndarray
    np.testing.assert_array_equal(anp.c_[np.ones(2), np.zeros(2)], np.c_[np.ones(2), np.zeros(2)])
    with pytest.raises(NotImplementedError, match="matrix"):
        anb.r_["r", anb.ones(2)]
    with pytest.raises(ValueError, match="first entry"):
        anb.r_[anb.ones(2), "0,2"]


def test_r_keeps_float32_with_python_scalars():
    got = anb.r_[anb.ones(2, dtype=np.float32), 3.0]
    assert got.dtype == np.float32


# -- splitting ---------------------------------------------------------------------------------


@fast
@given(shape=shapes, data=st.data())
def test_split_and_array_split(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[axis]
    sections = data.draw(st.integers(1, 4))
    points = sorted(data.draw(st.lists(st.integers(-n - 1, n + 1), max_size=3)))
    x = sample(shape)
    for how in (sections, points):
        check(lambda m, t, how=how: m.array_split(t, how, axis=axis), [x])
    if n % sections == 0:
        check(lambda m, t: m.split(t, sections, axis=axis), [x])
    # The pieces, joined again, give x's gradient back (each piece's scatters add up).
    check_gradients(
        lambda t: (
            anb.concatenate([p * 2.0 for p in anb.array_split(t, points, axis=axis)], axis=axis)
            ** 2
        ),
        [x],
        second_order=False,
    )


@pytest.mark.parametrize(
    "name, shape", [("hsplit", (4,)), ("hsplit", (2, 4)), ("vsplit", (4, 2)), ("dsplit", (1, 2, 4))]
)
def test_directional_splits(name, shape):
    x = sample(shape)
    check(lambda m, t: getattr(m, name)(t, 2), [x])
    check(lambda m, t: getattr(m, name)(t, [1, 3]), [x])


# -- roll, repeat, tile ------------------------------------------------------------------------


@fast
@given(shape=shapes, data=st.data())
def test_roll(shape, data):
    ndim = len(shape)
    axes = data.draw(
        st.one_of(
            st.none(),
            st.integers(-ndim, ndim - 1),
            st.lists(st.integers(-ndim, ndim - 1), min_size=1, max_size=3),
        )
    )
    count = 1 if axes is None or isinstance(axes, int) else len(axes)
    shifts = data.draw(st.lists(st.integers(-7, 7), min_size=count, max_size=count))
    shift = shifts[0] if count == 1 and not isinstance(axes, list) else shifts
    check(
        lambda m, t: m.roll(t, shift, axis=axes),
        [sample(shape)],
        second_order=data.draw(st.booleans()),
    )


@fast
@given(shape=shapes, data=st.data())
def test_repeat(shape, data):
    ndim = len(shape)
    axis = data.draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1)))
    n = int(np.prod(shape)) if axis is None else shape[axis]
    repeats = data.draw(
        st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), min_size=n, max_size=n))
    )
    check(
        lambda m, t: m.repeat(t, repeats, axis=axis),
        [sample(shape)],
        second_order=data.draw(st.booleans()),
    )


def test_repeat_is_a_method_and_takes_a_0d_input():
    x = sample((2, 3))
    same(anb.tensor(x).repeat(2, axis=1), x.repeat(2, axis=1))
    same(anb.repeat(anb.tensor(1.5), 3), np.repeat(1.5, 3))
    with pytest.raises(ValueError):
        anb.repeat(anb.tensor(x), [1, 2], axis=1)
    with pytest.raises(TypeError):
        anb.repeat(anb.tensor(x), 1.5)


@fast
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3), data=st.data())
def test_tile(shape, data):
    reps = data.draw(st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), max_size=4)))
    check(lambda m, t: m.tile(t, reps), [sample(shape)], second_order=data.draw(st.booleans()))


# -- flips, rotations, moveaxis ----------------------------------------------------------------


@fast
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3), data=st.data())
def test_flip(shape, data):
    ndim = len(shape)
    axis = data.draw(
        st.one_of(
            st.none(),
            st.integers(-ndim, ndim - 1) if ndim else st.none(),
            hnp.valid_tuple_axes(ndim),
        )
    )
    check(lambda m, t: m.flip(t, axis), [sample(shape)], second_order=False)


def test_flipud_fliplr():
    x = sample((2, 3, 2))
    check(lambda m, t: m.flipud(t), [x])
    check(lambda m, t: m.fliplr(t), [x], second_order=False)


@pytest.mark.parametrize("k", [-1, 0, 1, 2, 3, 5])
@pytest.mark.parametrize("axes", [(0, 1), (1, 0), (2, 0), (-1, 1)])
def test_rot90(k, axes):
    check(lambda m, t: m.rot90(t, k, axes), [sample((2, 3, 2))], second_order=k == 1)


@pytest.mark.parametrize(
    "source, destination", [(0, -1), (-1, 0), ((0, 1), (2, 0)), ([2, 0], [0, 1]), ((), ())]
)
def test_moveaxis(source, destination):
    check(
        lambda m, t: m.moveaxis(t, source, destination),
        [sample((2, 3, 4))],
        second_order=source == 0,
    )


# -- pad ---------------------------------------------------------------------------------------


@fast
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3), data=st.data())
def test_pad(shape, data):
    mode = data.draw(st.sampled_from(["constant", "edge", "reflect", "symmetric", "wrap"]))
    width = st.integers(0, 4)
    forms = [width, st.tuples(width, width)]
    if shape:  # (NumPy reads an empty list as floats)
        forms.append(st.lists(st.tuples(width, width), min_size=len(shape), max_size=len(shape)))
    pad_width = data.draw(st.one_of(*forms))
    kwargs = {}
    if mode == "constant" and data.draw(st.booleans()):
        kwargs["constant_values"] = data.draw(
            st.one_of(st.floats(-3, 3), st.tuples(st.floats(-3, 3), st.floats(-3, 3)))
        )
    check(
        lambda m, t: m.pad(t, pad_width, mode, **kwargs),
        [sample(shape)],
        second_order=data.draw(st.booleans()),
    )


def test_pad_constant_from_a_tensor_gets_the_padding_gradient():
    x = sample((2, 3))
    check_gradients(
        lambda t, c: anb.pad(t, ((1, 0), (2, 1)), constant_values=c) ** 2, [x, np.array(0.5)]
    )


def test_pad_keeps_integers_and_refuses_what_it_lacks():
    same(anb.pad(anb.tensor([1, 2]), 1, constant_values=7), np.pad([1, 2], 1, constant_values=7))
    with pytest.raises(NotImplementedError, match="linear_ramp"):
        anb.pad(anb.ones(3), 1, mode="linear_ramp")
    with pytest.raises(NotImplementedError, match="odd"):
        anb.pad(anb.ones(3), 1, mode="reflect", reflect_type="odd")
    with pytest.raises(ValueError, match="unsupported keyword arguments"):
        anb.pad(anb.ones(3), 1, mode="edge", constant_values=1.0)
    with pytest.raises(ValueError, match="negative"):
        anb.pad(anb.ones(3), -1)
    with pytest.raises(TypeError, match="integral"):
        anb.pad(anb.ones(3), 1.5)


# -- sort, take, take_along_axis ---------------------------------------------------------------


@fast
@given(shape=shapes, data=st.data())
def test_sort(shape, data):
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    # Distinct values, far apart: finite differences never cross a tie.
    size = int(np.prod(shape))
    x = (np.random.default_rng(size).permutation(size) * 0.5).reshape(shape)
    check(lambda m, t: m.sort(t, axis=axis), [x], second_order=data.draw(st.booleans()))


def test_sort_puts_nans_last_and_tied_values_take_one_gradient_each():
    x = np.array([2.0, np.nan, 1.0, 2.0])
    same(anb.sort(anb.tensor(x)), np.sort(x))
    leaf = anb.tensor([2.0, 1.0, 2.0], requires_grad=True)
    (g,) = anb.grad(anb.sort(leaf), leaf, grad_outputs=anb.tensor([1.0, 10.0, 100.0]))
    np.testing.assert_array_equal(g.numpy(), [10.0, 1.0, 100.0])  # argsort's stable order
    with pytest.raises(ValueError, match="no fields"):
        anb.sort(leaf, order="x")


@fast
@given(shape=shapes, data=st.data())
def test_take(shape, data):
    ndim = len(shape)
    axis = data.draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1)))
    n = int(np.prod(shape)) if axis is None else shape[axis]
    mode = data.draw(st.sampled_from(["raise", "wrap", "clip"]))
    span = st.integers(-n, n - 1) if mode == "raise" else st.integers(-2 * n, 2 * n)
    indices = data.draw(
        st.one_of(
            span,
            hnp.arrays(
                np.int64, hnp.array_shapes(min_dims=1, max_dims=2, max_side=3), elements=span
            ),
        )
    )
    check(
        lambda m, t: m.take(t, indices, axis=axis, mode=mode),
        [sample(shape)],
        second_order=data.draw(st.booleans()),
    )


def test_take_method_errors_and_integer_tensors_as_indices():
    x = sample((2, 3))
    same(anb.tensor(x).take([0, 5]), x.take([0, 5]))
    same(anb.take(anb.tensor(x), anb.tensor([2, 0]), axis=1), np.take(x, [2, 0], axis=1))
    with pytest.raises(IndexError):
        anb.take(anb.tensor(x), 6)
    with pytest.raises(TypeError):
        anb.take(anb.tensor(x), [0.5])
    with pytest.raises(ValueError, match="clipmode"):
        anb.take(anb.tensor(x), 0, mode="nearest")


@fast
@given(shape=shapes, data=st.data())
def test_take_along_axis(shape, data):
    ndim = len(shape)
    axis = data.draw(st.integers(-ndim, ndim - 1))
    index_shape = list(shape)
    index_shape[axis] = data.draw(st.integers(0, 4))
    for d in range(ndim):
        if d != axis % ndim and data.draw(st.booleans()):
            index_shape[d] = 1  # broadcast against the input
    n = shape[axis]
    indices = data.draw(hnp.arrays(np.int64, tuple(index_shape), elements=st.integers(-n, n - 1)))
    check(
        lambda m, t: m.take_along_axis(t, indices, axis=axis),
        [sample(shape)],
        second_order=data.draw(st.booleans()),
    )


def test_take_along_axis_none_and_errors():
    x = sample((2, 3))
    check(lambda m, t: m.take_along_axis(t, np.array([5, 0, 0]), axis=None), [x])
    with pytest.raises(ValueError, match="same number of dimensions"):
        anb.take_along_axis(anb.tensor(x), np.array([0]), axis=0)
    with pytest.raises(IndexError, match="integer"):
        anb.take_along_axis(anb.tensor(x), np.zeros((1, 3)), axis=0)


# -- diff, flatten -----------------------------------------------------------------------------


@fast
@given(shape=shapes, data=st.data())
def test_diff(shape, data):
    ndim = len(shape)
    axis = data.draw(st.integers(-ndim, ndim - 1))
    n = data.draw(st.integers(0, 3))
    kwargs = {}
    if data.draw(st.booleans()):
        kwargs["prepend"] = 0.5
    if data.draw(st.booleans()):
        edge = list(shape)
        edge[axis] = 2
        kwargs["append"] = sample(tuple(edge), 3)
    check(
        lambda m, t: m.diff(t, n, axis=axis, **kwargs),
        [sample(shape)],
        second_order=data.draw(st.booleans()),
    )


def test_diff_of_integers_booleans_and_errors():
    same(anb.diff(anb.tensor([1, 4, 9])), np.diff([1, 4, 9]))
    same(anb.diff(anb.tensor([True, True, False])), np.diff([True, True, False]))
    check_gradients(lambda t, p: anb.diff(t, prepend=p) ** 2, [sample(3), np.array(0.25)])
    with pytest.raises(ValueError, match="at least one dimensional"):
        anb.diff(anb.tensor(1.0))
    with pytest.raises(ValueError, match="non-negative"):
        anb.diff(anb.ones(3), -1)


@pytest.mark.parametrize("order", ["C", "F", "A", "K"])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 1, 3)])
def test_flatten(order, shape):
    x = sample(shape)
    same(anb.tensor(x).flatten(order), x.flatten(order))
    check_gradients(squared(lambda t: t.flatten(order)), [x], second_order=order == "F")


# -- NumPy's errors ----------------------------------------------------------------------------

x23 = sample((2, 3))
ERRORS = [
    ("split", (x23, 4, 1), ValueError, "equal division"),
    ("array_split", (x23, 0), ValueError, "number sections must be larger than 0"),
    ("split", (x23, 2, 2), IndexError, ""),
    ("hsplit", (np.ones(()), 1), ValueError, "1 or more dimensions"),
    ("vsplit", (np.ones(3), 1), ValueError, "2 or more dimensions"),
    ("dsplit", (x23, 1), ValueError, "3 or more dimensions"),
    ("flipud", (np.ones(()),), ValueError, "Input must be >= 1-d."),
    ("fliplr", (np.ones(3),), ValueError, "Input must be >= 2-d."),
    ("rot90", (x23, 1, (0, 0)), ValueError, "Axes must be different."),
    ("rot90", (x23, 1, (0, 3)), ValueError, "out of range"),
    ("rot90", (x23, 1, (0,)), ValueError, "len(axes) must be 2."),
    ("moveaxis", (x23, 0, 2), np.exceptions.AxisError, "destination: axis 2 is out of bounds"),
    ("moveaxis", (x23, (0, 1), 0), ValueError, "same number of elements"),
    ("moveaxis", (x23, (0, 0), (0, 1)), ValueError, "repeated axis in `source` argument"),
    ("roll", (x23, 1, 2), np.exceptions.AxisError, "out of bounds"),
    ("roll", (x23, [[1]], 0), ValueError, "scalars or 1D sequences"),
    ("take_along_axis", (x23, np.zeros((2, 2), int), None), ValueError, "single dimension"),
    ("diff", (np.ones(()),), ValueError, "at least one dimensional"),
    ("pad", (x23, -1), ValueError, "negative values"),
    ("append", (x23, np.ones(2), 0), ValueError, "dimension"),
]


@pytest.mark.parametrize(
    "name, args, error, phrase", ERRORS, ids=[f"{e[0]}-{i}" for i, e in enumerate(ERRORS)]
)
def test_errors_match_numpy(name, args, error, phrase):
    with pytest.raises(error) as numpy_error:
        REFERENCE[name](*args)
    tensor_args = tuple(anb.tensor(a) if isinstance(a, np.ndarray) else a for a in args)
    with pytest.raises(error) as ours:
        getattr(anb, name)(*tensor_args)
    assert phrase in str(ours.value), str(ours.value)
    assert isinstance(ours.value, type(numpy_error.value))


# -- through autograd_nb.numpy, on arrays and on Tensors ---------------------------------------

NAMESPACE_CASES = {
    "vstack pad": lambda x, y: anp.pad(anp.vstack([x, y]), 1, mode="reflect"),
    "split roll": lambda x, y: anp.roll(anp.hstack(anp.split(x * y, 3, axis=1)), 1),
    "sort diff": lambda x, y: anp.diff(anp.sort(x + 3 * y, axis=None)),
    "take repeat tile": lambda x, y: (
        anp.take(anp.tile(anp.repeat(x, 2, axis=0), 2), [1, 7]) * anp.flip(y)[0, :2]
    ),
    "r_ rot90 moveaxis": lambda x, y: anp.r_[anp.rot90(x).ravel(), anp.moveaxis(y, 0, 1)[0]],
    "take_along_axis argsort": lambda x, y: anp.take_along_axis(x, anp.argsort(y, axis=1), 1) * y,
}


@pytest.mark.parametrize("name", list(NAMESPACE_CASES))
def test_through_the_numpy_namespace(name):
    function = NAMESPACE_CASES[name]
    rng = np.random.default_rng(11)
    x, y = rng.permutation(6).reshape(2, 3) * 1.0, rng.permutation(6).reshape(2, 3) * 0.1
    expected = function(x, y)
    assert type(expected) is np.ndarray  # NumPy's own on arrays
    got = function(anb.tensor(x, requires_grad=True), anb.tensor(y))
    assert got.requires_grad
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-13)
    check_gradients(lambda a, b: function(a, b) ** 2, [x, y], second_order=False)


def test_numpys_own_functions_dispatch_on_tensors():
    x = anb.tensor(sample((2, 3)), requires_grad=True)
    y = np.roll(np.pad(x, 1), 1, axis=0)
    assert isinstance(y, anb.Tensor) and y.requires_grad
    assert np.sort(x, axis=0).requires_grad and np.diff(x).requires_grad
    assert np.take(x, [0, 2]).requires_grad and np.tile(x, 2).requires_grad


# -- batched VJPs ------------------------------------------------------------------------------

BATCHED = [
    (lambda t: anb.roll(t, 1, axis=0), (3, 2)),
    (lambda t: anb.tile(t, (2, 1)), (3, 2)),
    (lambda t: anb.repeat(t, [2, 0, 1], axis=0), (3, 2)),
    (lambda t: anb.pad(t, 1, mode="edge"), (3, 2)),
    (lambda t: anb.pad(t, 1), (3, 2)),
    (lambda t: anb.sort(t, axis=0), (3, 2)),
    (lambda t: anb.diff(t, 2, axis=0), (3, 2)),
]


@pytest.mark.parametrize("case", range(len(BATCHED)))
def test_batched_vjps_match_rows(case):
    function, shape = BATCHED[case]
    rng = np.random.default_rng(case)
    x = anb.tensor(rng.standard_normal(shape), requires_grad=True)
    y = function(x)
    v = rng.standard_normal((3,) + y.shape)
    (batched,) = anb.grad(
        y, x, grad_outputs=anb.tensor(v), is_grads_batched=True, retain_graph=True
    )
    for row in range(3):
        (want,) = anb.grad(y, x, grad_outputs=anb.tensor(v[row]), retain_graph=True)
        np.testing.assert_allclose(batched.numpy()[row], want.numpy(), rtol=1e-12)
