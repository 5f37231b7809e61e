"""NumPy names of issue 44: ``gradient``, ``radians``/``degrees``/``deg2rad``/``rad2deg``,
``row_stack``, and ``linspace``/``logspace``/``geomspace`` differentiable in their ends
(autograd_nb/ops/numeric.py, elementwise.py, assembly.py). Values against NumPy over shapes
and axes drawn by hypothesis, gradients against float64 central differences, NumPy's errors,
the same functions through ``autograd_nb.numpy``, and inside ``anb.compile``."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import autograd_nb as anb
import autograd_nb.numpy as anp
from autograd_nb.ops import numeric
from autograd_nb.ops.registry import FUNCTIONS
from tests.checks import check_gradients
from tests.reference import REFERENCE

NAMES = "gradient radians degrees deg2rad rad2deg row_stack linspace logspace geomspace".split()
RANGES = ("linspace", "logspace", "geomspace")
fast = settings(max_examples=12, deadline=None)


def sample(shape, seed=0, low=-2.0, high=2.0):
    return np.random.default_rng(seed).uniform(low, high, shape)


def same(got, expected):
    """``got`` (a Tensor, or a tuple or list of them) is NumPy's ``expected``, bit for bit."""
    if isinstance(expected, (list, tuple)):
        assert type(got) is type(expected) and len(got) == len(expected)
        for g, e in zip(got, expected):
            same(g, e)
        return
    assert isinstance(got, anb.Tensor)
    assert got.shape == np.shape(expected), (got.shape, np.shape(expected))
    assert got.dtype == np.asarray(expected).dtype, (got.dtype, np.asarray(expected).dtype)
    np.testing.assert_array_equal(got.numpy(), expected)


def close(got, expected, rtol=None):
    """``got`` is NumPy's ``expected`` in shape and dtype, and in value within a few ulp (the
    ``power`` op's rounding: logspace and geomspace)."""
    assert isinstance(got, anb.Tensor)
    assert got.shape == np.shape(expected) and got.dtype == expected.dtype
    if rtol is None:
        rtol = 4 * np.finfo(expected.dtype).eps
    np.testing.assert_allclose(got.numpy(), expected, rtol=rtol, atol=0)


def raises_as_numpy(ours, theirs):
    """``ours()`` raises NumPy's exception: the same type and message as ``theirs()``."""
    with pytest.raises(Exception) as expected:
        theirs()
    with pytest.raises(type(expected.value)) as got:
        ours()
    assert str(got.value) == str(expected.value)


def stacked(result):
    return anb.stack(list(result)) if isinstance(result, (list, tuple)) else result


# -- registration --------------------------------------------------------------------------------


def test_registered_with_references_examples_and_numpy_names():
    for name in NAMES:
        function = FUNCTIONS[name]
        assert getattr(anb, name) is function
        assert name in REFERENCE
        assert "Examples" in function.__doc__, name
        assert not function.is_method and not hasattr(anb.Tensor, name), name  # as ndarray
        assert callable(getattr(anp, name)), name
    assert {n for n, f in FUNCTIONS.items() if f.__module__ == numeric.__name__} == {
        "gradient", *RANGES
    }


def test_numpy_namespace_records_on_tensors_and_is_numpys_on_arrays():
    x = anb.tensor(sample(5), requires_grad=True)
    for name, args in [("gradient", ()), ("radians", ()), ("degrees", ())]:
        assert getattr(anp, name)(x, *args).requires_grad, name
        same_numpy = getattr(anp, name)(x.numpy())
        assert isinstance(same_numpy, np.ndarray)
        np.testing.assert_array_equal(same_numpy, getattr(np, name)(x.numpy()))
    assert anp.linspace(x, 3.0, 4).requires_grad
    assert anp.logspace(0.0, x, 4).requires_grad
    assert anp.geomspace(anb.exp(x), 3.0, 4).requires_grad
    np.testing.assert_array_equal(anp.linspace(0, 1, 7), np.linspace(0, 1, 7))
    assert type(anp.linspace(0, 1, 7, retstep=True)[1]) is type(np.linspace(0, 1, 7, True, True)[1])
    np.testing.assert_array_equal(anp.logspace(0, 2, 3, base=3.0), np.logspace(0, 2, 3, base=3.0))
    np.testing.assert_array_equal(anp.geomspace(1, 8, 4), np.geomspace(1, 8, 4))
    # NumPy's own functions reach ours through __array_function__
    assert np.gradient(x).requires_grad
    assert np.linspace(x, 1.0, 3).requires_grad


# -- radians, degrees, deg2rad, rad2deg ---------------------------------------------------------


@fast
@given(hnp.arrays(st.sampled_from([np.float32, np.float64]), hnp.array_shapes(max_dims=3),
                  elements=st.floats(-1e6, 1e6, width=32)))
@pytest.mark.parametrize("name", ["radians", "degrees", "deg2rad", "rad2deg"])
def test_angle_conversions_are_numpys(name, x):
    same(getattr(anb, name)(anb.tensor(x)), getattr(np, name)(x))
    same(getattr(anp, name)(anb.tensor(x)), getattr(np, name)(x))


@pytest.mark.parametrize("name", ["radians", "degrees", "deg2rad", "rad2deg"])
def test_angle_conversion_gradients(name):
    check_gradients(lambda t: anb.square(getattr(anb, name)(t)), [sample((2, 3)) * 50])
    assert getattr(anb, name)(anb.tensor([1, 2])).dtype == np.float64  # (integers: floats)


# -- row_stack -----------------------------------------------------------------------------------


ROW_STACK_WARNING = [
    (DeprecationWarning, "`row_stack` alias is deprecated. Use `np.vstack` directly.")
]


def _numpy_row_stack(*args, **kwargs):
    """NumPy's ``row_stack`` and its warnings (NumPy 2.5 has none: ``vstack``, and NumPy 2's
    deprecation, which anb.row_stack still gives)."""
    if not hasattr(np, "row_stack"):
        return np.vstack(*args, **kwargs), ROW_STACK_WARNING
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = np.row_stack(*args, **kwargs)
    return result, [(w.category, str(w.message)) for w in caught]


@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 3, 2)])
def test_row_stack_is_vstack_and_warns_as_numpy(shape):
    a, b = sample(shape, 0), sample(shape, 1)
    expected, numpy_warnings = _numpy_row_stack([a, b])
    for module in (anb, anp) if hasattr(np, "row_stack") else (anb,):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = module.row_stack([anb.tensor(a), b])
        same(got, expected)
        assert [(w.category, str(w.message)) for w in caught] == numpy_warnings
        assert all(w.filename == __file__ for w in caught)  # pointed at the caller
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        check_gradients(lambda x, y: anb.square(anb.row_stack([x, y])), [a, b],
                        second_order=len(shape) == 1)
        same(anb.row_stack([anb.tensor(a)], dtype=np.float32),
             _numpy_row_stack([a], dtype=np.float32)[0])


# -- gradient ------------------------------------------------------------------------------------


@st.composite
def gradient_cases(draw):
    """A shape, the axes, one spacing per axis (None: NumPy's default of 1), the edge order."""
    edge_order = draw(st.sampled_from([1, 2]))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=edge_order + 1, max_side=5))
    ndim = len(shape)
    axis = draw(st.one_of(
        st.none(),
        st.integers(-ndim, ndim - 1),
        st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True).map(tuple),
    ))
    axes = range(ndim) if axis is None else np.atleast_1d(np.array(axis) % ndim)
    kinds = draw(st.sampled_from(["none", "one scalar", "per axis"]))
    if kinds == "none":
        spacing = ()
    elif kinds == "one scalar":
        spacing = (draw(st.sampled_from([0.5, 2, np.float64(0.3)])),)
    else:
        spacing = tuple(draw(st.sampled_from(["scalar", "even", "uneven", "integers"]))
                        for _ in axes)
        spacing = tuple(_spacing(kind, shape[a], draw) for kind, a in zip(spacing, axes))
    return shape, axis, spacing, edge_order


def _spacing(kind, length, draw):
    if kind == "scalar":
        return draw(st.sampled_from([0.25, 3.0]))
    if kind == "even":
        return np.arange(length) * 0.5 - 1.0
    if kind == "integers":
        return np.arange(length) ** 2
    return np.cumsum(np.random.default_rng(length).uniform(0.2, 1.5, length))


@fast
@given(gradient_cases(), st.sampled_from([np.float64, np.float32]))
def test_gradient_values_are_numpys(case, dtype):
    shape, axis, spacing, edge_order = case
    f = sample(shape).astype(dtype)
    expected = np.gradient(f, *spacing, axis=axis, edge_order=edge_order)
    same(anb.gradient(anb.tensor(f), *spacing, axis=axis, edge_order=edge_order), expected)
    same(anp.gradient(anb.tensor(f), *spacing, axis=axis, edge_order=edge_order), expected)


@fast
@given(gradient_cases())
def test_gradient_differentiates_in_f(case):
    shape, axis, spacing, edge_order = case

    def function(f):
        return anb.square(stacked(anb.gradient(f, *spacing, axis=axis, edge_order=edge_order)))

    check_gradients(function, [sample(shape)], second_order=False)


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient_differentiates_in_coordinate_tensors(edge_order):
    f = sample((4, 5))
    x = np.cumsum(sample(5, 1, 0.3, 1.2))
    y = np.array([0.0, 0.5, 1.5, 1.75])

    def function(f, x, h):
        return stacked(anb.gradient(f, h, x, edge_order=edge_order))

    check_gradients(function, [f, x, np.array(0.7)])
    check_gradients(lambda y: anb.gradient(anb.tensor(f), y, axis=0, edge_order=edge_order),
                    [y])
    # Tensor coordinates take the general formulas: NumPy's values to rounding
    for coordinates in (x, np.arange(5.0)):
        got = anb.gradient(anb.tensor(f), anb.tensor(coordinates), axis=1, edge_order=edge_order)
        expected = np.gradient(f, coordinates, axis=1, edge_order=edge_order)
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)
    got = anb.gradient(f, anb.tensor(x, requires_grad=True), axis=1)  # f an array
    assert got.requires_grad
    np.testing.assert_allclose(got.numpy(), np.gradient(f, x, axis=1), rtol=1e-12)


def test_gradient_results_and_dtypes_follow_numpy():
    ints = np.array([[1, 4, 9], [16, 25, 36]])
    same(anb.gradient(anb.tensor(ints)), np.gradient(ints))
    same(anb.gradient(anb.tensor(ints), axis=-1), np.gradient(ints, axis=-1))
    same(anb.gradient(anb.tensor(ints), axis=(1, 0)), np.gradient(ints, axis=(1, 0)))
    assert anb.gradient(anb.tensor(2.0)) == np.gradient(np.array(2.0)) == ()
    f32 = sample(6).astype(np.float32)
    x64 = np.cumsum(sample(6, 2, 0.5, 1.0))
    same(anb.gradient(anb.tensor(f32), x64), np.gradient(f32, x64))
    same(anb.gradient(anb.tensor(f32), np.float64(0.1)), np.gradient(f32, np.float64(0.1)))
    same(anb.gradient(anb.tensor(sample(2)), edge_order=1), np.gradient(sample(2)))
    same(anb.gradient(sample((3, 4)).tolist()), np.gradient(sample((3, 4))))


GRADIENT_ERRORS = [
    ((sample((3, 4)), 1.0, 2.0, 3.0), {}),  # invalid number of arguments
    ((sample((3, 4)), np.ones((3, 4)), 1.0), {}),  # distances not 1-d
    ((sample((3, 4)), np.arange(4.0), 1.0), {}),  # distances of the wrong length
    ((sample(4),), {"edge_order": 3}),
    ((sample(2),), {"edge_order": 2}),  # too small
    ((sample((1, 3)),), {}),  # too small along axis 0
    ((sample((3, 4)),), {"axis": 2}),  # AxisError
    ((sample((3, 4)),), {"axis": (0, -2)}),  # repeated axis
    ((sample((3, 4)),), {"axis": 1.0}),
    ((sample((1, 3)), [0.0], 1.0), {}),  # one coordinate: NumPy's IndexError
    ((np.array([True, False, True]),), {}),
]


@pytest.mark.parametrize(("args", "kwargs"), GRADIENT_ERRORS)
def test_gradient_errors_are_numpys(args, kwargs):
    tensors = (anb.tensor(args[0]),) + args[1:]
    raises_as_numpy(lambda: anb.gradient(*tensors, **kwargs),
                    lambda: np.gradient(*args, **kwargs))


def test_gradient_coordinate_tensor_errors():
    f = anb.tensor(sample((3, 4)))
    with pytest.raises(ValueError, match="distances must be either scalars or 1d"):
        anb.gradient(f, anb.ones((3, 4)), 1.0)
    with pytest.raises(ValueError, match="must match the length"):
        anb.gradient(f, anb.ones(4), 1.0)


# -- linspace, logspace, geomspace ---------------------------------------------------------------


@st.composite
def range_cases(draw):
    """Broadcastable start and stop shapes, num, endpoint and a valid axis."""
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3))
    start_shape, stop_shape = shapes.input_shapes
    ndim = len(shapes.result_shape) + 1
    axis = draw(st.integers(-ndim, ndim - 1))
    num = draw(st.integers(0, 6))
    return start_shape, stop_shape, num, draw(st.booleans()), axis


@fast
@given(range_cases(), st.sampled_from([np.float64, np.float32]), st.booleans())
def test_linspace_values_are_numpys(case, dtype, retstep):
    start_shape, stop_shape, num, endpoint, axis = case
    start, stop = sample(start_shape, 0).astype(dtype), sample(stop_shape, 1).astype(dtype)
    expected = np.linspace(start, stop, num, endpoint, retstep, axis=axis)
    got = anb.linspace(anb.tensor(start, requires_grad=dtype == np.float64), stop, num,
                       endpoint, retstep, axis=axis)
    if retstep:
        got, step = got
        expected, expected_step = expected
        if isinstance(step, float):
            assert np.isnan(step) and np.isnan(expected_step)
        else:
            np.testing.assert_array_equal(step.numpy(), expected_step)
    same(got, expected)


@fast
@given(range_cases())
def test_linspace_gradients(case):
    start_shape, stop_shape, num, endpoint, axis = case
    check_gradients(lambda a, b: anb.linspace(a, b, num, endpoint, axis=axis),
                    [sample(start_shape, 0), sample(stop_shape, 1)], second_order=False)


@pytest.mark.parametrize("num", [0, 1, 2, 5])
def test_linspace_gradients_at_equal_ends(num):
    # a zero step takes NumPy's other formula (HIPS autograd's test_linspace checks there)
    for start, stop in ([1.2, 3.4], [1.2, -3.4], [1.2, 1.2]):
        check_gradients(lambda a, b: anb.linspace(a, b, num),
                        [np.array(start), np.array(stop)], second_order=False)
        same(anb.linspace(anb.tensor(start), stop, num), np.linspace(start, stop, num))


def test_linspace_follows_numpy_at_the_edges():
    cases = [
        ((0.0, 5e-324 * 10, 40), {}),  # steps that underflow to 0 (NumPy's gh-5437)
        (([0.0, 1.0], [2.0, 1.0], 5), {}),  # one step 0: NumPy divides first for all
        ((1, 2, 1), {}),
        ((0, 10, 0), {}),
        ((np.float32(0.1), 3, 5), {}),  # a float32 end, a Python int
        ((0.5, [1, 2, 3], 4), {"dtype": np.int64}),  # rounded down
        ((0, 1, 4), {"endpoint": False, "retstep": True}),
        ((0, 1, 1), {"retstep": True}),
    ]
    for args, kwargs in cases:
        expected = np.linspace(*args, **kwargs)
        got = anb.linspace(anb.tensor(np.asarray(args[0])), *args[1:], **kwargs)
        same(got[0] if kwargs.get("retstep") else got,
             expected[0] if kwargs.get("retstep") else expected)
    x = anb.tensor([0.5], requires_grad=True)
    (g,) = anb.grad(anb.linspace(x, 2.0, 5, dtype=np.int64).astype(np.float64).sum()
                    + anb.linspace(x, 2.0, 5).sum(), x, allow_unused=True)
    np.testing.assert_array_equal(g.numpy(), [2.5])  # the int64 copy has gradient 0


def test_linspace_keeps_the_creation_keywords():
    t = anb.linspace(0, 1, 5, requires_grad=True)
    assert t.is_leaf and t.requires_grad and t.device == "cpu"
    assert anb.linspace(0, 1, 3, dtype=np.float32).dtype == np.float32
    assert anb.linspace(0, 1, 5, device="cpu").device == "cpu"
    start = anb.tensor(0.0)
    leaf = anb.linspace(start, 1.0, 3, requires_grad=True)  # ends without grad: a leaf
    assert leaf.is_leaf and leaf.requires_grad
    with pytest.raises(ValueError, match="requires_grad=True"):
        anb.linspace(anb.tensor(0.0, requires_grad=True), 1.0, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="unknown device"):
        anb.linspace(start, 1.0, 3, device="tpu")
    with pytest.raises(RuntimeError, match="floating point"):
        anb.linspace(0, 5, 6, dtype=np.int64, requires_grad=True)
    assert anb.linspace(0, 1, 3, dtype=np.float16).dtype == np.float32  # as anb.tensor's
    np.testing.assert_array_equal(anb.linspace(0, 1j, 3).numpy(), np.linspace(0, 1j, 3))
    with pytest.raises(TypeError, match="longdouble|float128"):
        anb.linspace(0, 1, 3, dtype=np.longdouble)


@pytest.mark.parametrize("num", [-1, 2.5])
def test_range_errors_are_numpys(num):
    for name in RANGES:
        raises_as_numpy(lambda name=name: getattr(anb, name)(anb.tensor(1.0), 2.0, num),
                        lambda name=name: getattr(np, name)(1.0, 2.0, num))
    with pytest.raises(ValueError, match="could not be broadcast"):
        anb.linspace(anb.ones(2), anb.ones(3), 4)
    raises_as_numpy(lambda: anb.linspace(anb.ones(2), 3.0, 4, axis=2),
                    lambda: np.linspace(np.ones(2), 3.0, 4, axis=2))


@fast
@given(range_cases())
def test_logspace_values_and_gradients(case):
    start_shape, stop_shape, num, endpoint, axis = case
    start, stop = sample(start_shape, 0), sample(stop_shape, 1)
    expected = np.logspace(start, stop, num, endpoint, 2.0, axis=axis)
    close(anb.logspace(anb.tensor(start), stop, num, endpoint, 2.0, axis=axis), expected)
    close(anb.logspace(start, stop, num, endpoint, anb.tensor(2.0), axis=axis), expected)
    check_gradients(lambda a, b, c: anb.logspace(a, b, num, endpoint, c, axis=axis),
                    [start, stop, np.array(2.0)], second_order=False)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_logspace_array_base(axis):
    start, stop, base = sample((2, 1)), sample(3, 1), np.array([1.5, 2.5, 3.0])
    expected = np.logspace(start, stop, 4, base=base, axis=axis)
    close(anb.logspace(anb.tensor(start), stop, 4, base=anb.tensor(base), axis=axis), expected)
    check_gradients(lambda a, b, c: anb.logspace(a, b, 4, base=c, axis=axis),
                    [start, stop, base], second_order=False)


@fast
@given(range_cases(), st.sampled_from([1.0, -1.0]))
def test_geomspace_values_and_gradients(case, sign):
    start_shape, stop_shape, num, endpoint, axis = case
    start = sign * sample(start_shape, 0, 0.5, 3.0)
    stop = sign * sample(stop_shape, 1, 0.5, 3.0)
    expected = np.geomspace(start, stop, num, endpoint, axis=axis)
    got = anb.geomspace(anb.tensor(start), anb.tensor(stop), num, endpoint, axis=axis)
    close(got, expected)
    if num:  # the ends exactly
        np.testing.assert_array_equal(np.take(got.numpy(), [0], axis),
                                      np.take(expected, [0], axis))
    if num > 1 and endpoint:
        np.testing.assert_array_equal(np.take(got.numpy(), [-1], axis),
                                      np.take(expected, [-1], axis))
    check_gradients(lambda a, b: anb.geomspace(a, b, num, endpoint, axis=axis), [start, stop],
                    second_order=False)


def test_geomspace_dtypes_and_errors():
    f32 = np.array([1.0, 2.0], np.float32)
    close(anb.geomspace(anb.tensor(f32), 8.0, 4), np.geomspace(f32, 8.0, 4))  # float64
    close(anb.geomspace(anb.tensor(f32), 8.0, 4, dtype=np.float32),
          np.geomspace(f32, 8.0, 4, dtype=np.float32))
    for ends in [(0.0, 1.0), ([1.0, 0.0], 2.0), (1.0, 0.0)]:
        raises_as_numpy(lambda ends=ends: anb.geomspace(anb.tensor(ends[0]), ends[1], 3),
                        lambda ends=ends: np.geomspace(*ends, 3))


def test_ranges_and_gradient_record_inside_compile():
    def function(f, x, s):
        g0, g1 = anb.gradient(f, 0.5, x, edge_order=2)
        return ((g0 * g1).sum() + anb.square(anb.linspace(s, 2.0, 5, axis=-1)).sum()
                + anb.logspace(s, 1.0, 3, base=2.0).sum())

    compiled = anb.compile(function, strict=True)
    rng = np.random.default_rng(5)
    for step in range(3):
        f = anb.tensor(rng.standard_normal((4, 5)), requires_grad=True)
        x = anb.tensor(np.cumsum(rng.uniform(0.2, 1.0, 5)), requires_grad=True)
        # the second call has a zero step: the replay takes NumPy's other formula as eager does
        s = anb.tensor([0.5, 2.0 if step == 1 else 1.0], requires_grad=True)
        got = compiled(f, x, s)
        expected = function(f, x, s)
        assert got.item() == expected.item()
        for a, b in zip(anb.grad(got, [f, x, s]), anb.grad(expected, [f, x, s])):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert compiled.cache_info().eager == 0
