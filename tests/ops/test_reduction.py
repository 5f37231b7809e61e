"""Every reduction from the registry, and the composites built on them: forward against NumPy
over axes (ints, negative, tuples, non-adjacent) and keepdims, VJP against finite differences
(kernels and differentiable rules), second derivatives, float32, ties, zeros, empty axes."""

from contextlib import nullcontext

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import autograd_nb as anb
from autograd_nb.ops.registry import FUNCTIONS, REGISTRY, Saved
from tests.checks import check_gradients
from tests.ops.test_elementwise import assert_run_matches_general, layout_variant
from tests.reference import REFERENCE

OPS = sorted(name for name, op in REGISTRY.items() if op.family == "reduction")
COMPOSITES = sorted(
    name for name, fn in FUNCTIONS.items() if fn.family == "reduction" and name not in REGISTRY
)
# Reductions over any axes (with keepdims), and the ops along one axis that keep the shape.
OVER_AXES = [n for n in OPS if not REGISTRY[n].single_axis] + COMPOSITES
ALONG_AXIS = [n for n in OPS if REGISTRY[n].single_axis]

API_NAMES = "sum mean prod max min var std logsumexp softmax log_softmax cumsum".split()


def sample(name, shape, rng):
    """Values where ``name`` is smooth: no ties for max/min, no zeros or overflow for prod."""
    if name == "prod":
        return rng.uniform(0.5, 1.5, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    if name in ("max", "min"):
        # Distinct and far apart, so finite differences never cross a tie.
        size = int(np.prod(shape, dtype=np.int64))
        return (rng.permutation(size) * 0.25 + rng.uniform(-1, 1)).reshape(shape) - size / 8
    return rng.standard_normal(shape)


def call_op(name, x, axis, keepdims, ddof=0):
    function = getattr(anb, name)
    if name in ("var", "std"):
        return function(x, axis=axis, ddof=ddof, keepdims=keepdims)
    if name in ALONG_AXIS:
        return function(x, axis=axis)
    return function(x, axis=axis, keepdims=keepdims)


def reference(name, x, axis, keepdims, ddof=0):
    if name in ("var", "std"):
        return REFERENCE[name](x, axis=axis, ddof=ddof, keepdims=keepdims)
    if name in ALONG_AXIS:
        return REFERENCE[name](x, axis=axis)
    expected = REFERENCE[name](x, axis=axis, keepdims=keepdims)
    if name == "logsumexp":
        # SciPy gives a 0-d input's keepdims result one dimension; NumPy's rule keeps it 0-d.
        expected = np.reshape(expected, np.sum(x, axis=axis, keepdims=keepdims).shape)
    return expected


def group_size(shape, axis):
    if axis is None:
        axis = tuple(range(len(shape)))
    axes = axis if isinstance(axis, tuple) else (axis,)
    return int(np.prod([shape[a] for a in axes], dtype=np.int64))


@st.composite
def shapes_and_axes(draw):
    """A shape, and an axis: None, an int (maybe negative) or a tuple (maybe non-adjacent)."""
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3))
    ndim = len(shape)
    choices = [st.none()]
    if ndim:
        choices += [st.integers(-ndim, ndim - 1), hnp.valid_tuple_axes(ndim)]
    return shape, draw(st.one_of(*choices)), draw(st.booleans())


def test_registry_has_the_api_reductions():
    assert set(API_NAMES) <= set(OPS) | set(COMPOSITES)
    assert {"sum", "prod", "max", "min", "logsumexp", "softmax", "log_softmax", "cumsum"} <= set(
        OPS
    )
    for name in API_NAMES:
        assert getattr(anb, name) is FUNCTIONS[name]
        assert name in REFERENCE
        assert FUNCTIONS[name].__doc__ and "Examples" in FUNCTIONS[name].__doc__


@pytest.mark.parametrize("name", OVER_AXES)
@settings(max_examples=12, deadline=None)
@given(case=shapes_and_axes(), ddof=st.integers(0, 1), seed=st.integers(0, 2**16))
def test_reduction_over_axes(name, case, ddof, seed):
    shape, axis, keepdims = case
    rng = np.random.default_rng(seed)
    x = sample(name, shape, rng)
    n = group_size(shape, axis)
    ddof = ddof if name in ("var", "std") and n > ddof else 0
    expected = reference(name, x, axis, keepdims, ddof)
    got = call_op(name, anb.tensor(x), axis, keepdims, ddof)
    assert got.shape == np.shape(expected)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)
    check_gradients(
        lambda t: call_op(name, t, axis, keepdims, ddof), [x], second_order=seed % 2 == 0
    )


@st.composite
def shapes_and_one_axis(draw, allow_none):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3))
    ndim = len(shape)
    axis = st.integers(-ndim, ndim - 1)
    return shape, draw(st.one_of(st.none(), axis) if allow_none else axis)


@pytest.mark.parametrize("name", ALONG_AXIS)
@settings(max_examples=12, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_op_along_one_axis(name, data, seed):
    shape, axis = data.draw(shapes_and_one_axis(allow_none=name == "cumsum"))
    x = sample(name, shape, np.random.default_rng(seed))
    expected = reference(name, x, axis, False)
    got = call_op(name, anb.tensor(x), axis, False)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)
    check_gradients(lambda t: call_op(name, t, axis, False), [x], second_order=seed % 2 == 0)


# Non-adjacent and unsorted axes take the permuted layout: checked for every op, every time.
@pytest.mark.parametrize("name", OVER_AXES)
@pytest.mark.parametrize("axis", [(0, 2), (-1, 0), (2, 0, 1), -2])
@pytest.mark.parametrize("keepdims", [False, True])
def test_permuted_axes(name, axis, keepdims):
    x = sample(name, (2, 3, 4), np.random.default_rng(4))
    expected = reference(name, x, axis, keepdims)
    got = call_op(name, anb.tensor(x), axis, keepdims)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)
    check_gradients(
        lambda t: call_op(name, t, axis, keepdims), [x], second_order=keepdims and axis == (0, 2)
    )


@pytest.mark.parametrize("name", OPS + COMPOSITES)
def test_float32_stays_float32(name):
    rng = np.random.default_rng(5)
    x = sample(name, (3, 4), rng).astype(np.float32)
    axis = -1 if name in ALONG_AXIS else 0
    got = call_op(name, anb.tensor(x), axis, False)
    assert got.dtype == np.float32
    expected = reference(name, x.astype(np.float64), axis, False)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-6)

    leaf = anb.tensor(x, requires_grad=True)
    y = call_op(name, leaf, axis, False)
    v = anb.tensor(rng.standard_normal(y.shape).astype(np.float32))
    (kernel,) = anb.grad(y, leaf, grad_outputs=v, retain_graph=True)
    (rule,) = anb.grad(y, leaf, grad_outputs=v, create_graph=True)
    assert kernel.dtype == rule.dtype == np.float32
    np.testing.assert_allclose(rule.numpy(), kernel.numpy(), rtol=1e-5, atol=1e-6)

    exact_leaf = anb.tensor(x.astype(np.float64), requires_grad=True)
    exact_y = call_op(name, exact_leaf, axis, False)
    (exact,) = anb.grad(exact_y, exact_leaf, grad_outputs=anb.tensor(v.numpy().astype(np.float64)))
    np.testing.assert_allclose(kernel.numpy(), exact.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "cumsum"])
def test_integers_keep_their_dtype_like_numpy(name):
    x = np.array([[3, -1, 2], [4, 4, 0]])
    for axis in (None, 0, 1):
        got = call_op(name, anb.tensor(x), axis, False)
        expected = reference(name, x, axis, False)
        assert got.dtype == np.asarray(expected).dtype == np.int64
        np.testing.assert_array_equal(got.numpy(), expected)


@pytest.mark.parametrize("name", ["mean", "var", "std", "logsumexp", "softmax", "log_softmax"])
def test_integers_give_float64(name):
    x = np.array([[3, -1, 2], [4, 4, 0]])
    got = call_op(name, anb.tensor(x), -1, False)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got.numpy(), reference(name, x, -1, False), rtol=1e-12)


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_ties_split_the_gradient_evenly(name, axis):
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0], [-1.0, 0.0, 3.0]])
    if name == "min":
        x = -x
    y = REFERENCE[name](x, axis=axis, keepdims=True)
    hits = x == y
    expected = hits / hits.sum(axis=axis, keepdims=True)  # torch.amax's gradient for ones

    leaf = anb.tensor(x, requires_grad=True)
    out = call_op(name, leaf, axis, False)
    ones = anb.ones_like(out)
    (kernel,) = anb.grad(out, leaf, grad_outputs=ones, retain_graph=True)
    (rule,) = anb.grad(out, leaf, grad_outputs=ones, create_graph=True)
    np.testing.assert_allclose(kernel.numpy(), expected, rtol=1e-15)
    np.testing.assert_allclose(rule.numpy(), expected, rtol=1e-15)


def test_max_propagates_nan_and_routes_its_gradient_there():
    x = anb.tensor([[1.0, np.nan, 3.0], [1.0, 2.0, 0.0]], requires_grad=True)
    y = anb.max(x, axis=1)
    np.testing.assert_array_equal(y.numpy(), np.max(x.numpy(), axis=1))
    (g,) = anb.grad(y.sum(), x)
    np.testing.assert_array_equal(g.numpy(), [[0, 1, 0], [0, 1, 0]])


@pytest.mark.parametrize(
    "x",
    [
        [[0.0, 2.0, 3.0], [1.5, -2.0, 0.5]],  # one zero
        [[0.0, 2.0, 0.0], [1.5, -2.0, 0.5]],  # two zeros in a group
        [[0.0, 0.0, 0.0], [0.0, -2.0, 0.5]],  # three zeros in a group, one in another
    ],
)
@pytest.mark.parametrize("axis", [None, 1, 0])
def test_prod_with_zeros(x, axis):
    x = np.array(x)
    got = anb.prod(anb.tensor(x), axis=axis)
    np.testing.assert_array_equal(got.numpy(), np.prod(x, axis=axis))
    check_gradients(lambda t: anb.prod(t, axis=axis), [x])


def test_prod_with_zeros_over_non_adjacent_axes():
    x = np.random.default_rng(6).uniform(0.5, 1.5, size=(2, 3, 2))
    x[0, 1, 0] = 0.0
    x[1, 2, 1] = x[1, 0, 1] = 0.0
    check_gradients(lambda t: anb.prod(t, axis=(0, 2), keepdims=True), [x])


def test_logsumexp_is_stable():
    x = np.array([[1000.0, 1000.0, -1000.0], [-np.inf, -np.inf, -np.inf]])
    got = anb.logsumexp(anb.tensor(x), axis=1)
    np.testing.assert_allclose(got.numpy(), REFERENCE["logsumexp"](x, axis=1))
    np.testing.assert_allclose(anb.softmax(anb.tensor(x[:1])).numpy(), REFERENCE["softmax"](x[:1]))
    np.testing.assert_allclose(
        anb.log_softmax(anb.tensor(x[:1])).numpy(), REFERENCE["log_softmax"](x[:1])
    )


@pytest.mark.parametrize("name", ["sum", "prod", "logsumexp", "mean"])
@pytest.mark.parametrize("shape, axis", [((0,), None), ((0, 3), 0), ((3, 0), 1), ((2, 0), None)])
def test_empty_reductions_match_numpy(name, shape, axis):
    x = np.zeros(shape)
    warns = pytest.warns(RuntimeWarning) if name == "mean" else nullcontext()
    with np.errstate(all="ignore"), warns:
        # SciPy's logsumexp fails on empty n-d input with axis=None: reduce the flat input.
        flat = name == "logsumexp" and axis is None
        expected = reference(name, x.ravel() if flat else x, axis, False)
    leaf = anb.tensor(x, requires_grad=True)
    got = call_op(name, leaf, axis, False)
    assert got.shape == np.shape(expected)
    np.testing.assert_array_equal(got.numpy(), expected)
    (g,) = anb.grad(got, leaf, grad_outputs=anb.ones_like(got))
    assert g.shape == shape


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("shape, axis", [((0,), None), ((0, 3), 0), ((3, 0), 1)])
def test_extremum_of_empty_raises_like_numpy(name, shape, axis):
    x = np.zeros(shape)
    with pytest.raises(ValueError, match="zero-size array") as numpy_error:
        REFERENCE[name](x, axis=axis)
    with pytest.raises(ValueError, match="zero-size array") as ours:
        call_op(name, anb.tensor(x), axis, False)
    assert str(ours.value) == str(numpy_error.value)


def test_extremum_over_a_non_empty_axis_of_an_empty_array():
    x = np.zeros((0, 3))
    np.testing.assert_array_equal(anb.max(anb.tensor(x), axis=1).numpy(), np.max(x, axis=1))


@pytest.mark.parametrize("name", ALONG_AXIS)
def test_ops_along_an_axis_of_empty_arrays(name):
    x = np.zeros((3, 0))
    leaf = anb.tensor(x, requires_grad=True)
    got = call_op(name, leaf, -1, False)
    # The softmax references take a maximum, which NumPy refuses over an empty axis; the
    # result of an op that keeps the shape is the input's shape, empty.
    assert got.shape == x.shape
    if name == "cumsum":
        np.testing.assert_array_equal(got.numpy(), reference(name, x, -1, False))
    (g,) = anb.grad(got, leaf, grad_outputs=anb.ones_like(got))
    assert g.shape == x.shape


def test_cumsum_axis_none_flattens_like_numpy():
    x = np.arange(6.0).reshape(2, 3)
    got = anb.cumsum(anb.tensor(x))
    np.testing.assert_array_equal(got.numpy(), np.cumsum(x))
    check_gradients(anb.cumsum, [x])
    for axis in (None, 0, -1):
        scalar = np.float64(2.5)
        got = anb.cumsum(anb.tensor(scalar), axis=axis)
        np.testing.assert_array_equal(got.numpy(), np.cumsum(scalar, axis=axis))


def test_single_axis_ops_reject_tuples():
    for name in ALONG_AXIS:
        with pytest.raises(TypeError, match="single integer axis"):
            getattr(anb, name)(anb.ones((2, 3)), axis=(0, 1))


def test_bad_axes_raise_like_numpy():
    x = anb.ones((2, 3))
    with pytest.raises(np.exceptions.AxisError):
        anb.sum(x, axis=2)
    with pytest.raises(ValueError, match="duplicate"):
        anb.max(x, axis=(0, -2))


@pytest.mark.parametrize("ddof", [1, 2, 3])
def test_var_ddof_like_numpy(ddof):
    x = np.random.default_rng(7).standard_normal((2, 3))
    warns = pytest.warns(RuntimeWarning) if ddof >= 3 else nullcontext()
    with np.errstate(all="ignore"), warns:
        expected = np.var(x, axis=1, ddof=ddof)
    np.testing.assert_allclose(anb.var(anb.tensor(x), axis=1, ddof=ddof).numpy(), expected)
    if ddof < 3:
        check_gradients(lambda t: anb.std(t, axis=1, ddof=ddof), [x])


def test_tensor_methods():
    x = np.random.default_rng(8).standard_normal((2, 3))
    t = anb.tensor(x)
    np.testing.assert_allclose(t.mean(axis=0).numpy(), x.mean(axis=0))
    np.testing.assert_allclose(t.max().numpy(), x.max())
    np.testing.assert_allclose(t.std(axis=1, keepdims=True).numpy(), x.std(axis=1, keepdims=True))
    np.testing.assert_allclose(t.cumsum(axis=0).numpy(), x.cumsum(axis=0))


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("axis", [1, (0, 2)])
def test_vjp_kernels_accumulate_into_the_gradient_buffer(name, axis):
    op = REGISTRY[name]
    if op.single_axis and isinstance(axis, tuple):
        axis = 0
    x = sample(name, (2, 3, 4), np.random.default_rng(9))
    arrays, attrs = op.prepare([x], {"axis": axis, "keepdims": False})
    output = op.forward(arrays, attrs)
    saved = Saved(
        tuple(a if k in op.saves else None for k, a in enumerate(arrays)),
        output if op.saves_output else None,
    )
    grad_output = np.random.default_rng(10).standard_normal(output.shape)
    fresh = np.zeros_like(x)
    op.vjp(0, grad_output, saved, attrs, fresh)
    assert np.any(fresh != 0)
    buffer = np.full_like(x, 0.5)
    op.vjp(0, grad_output, saved, attrs, buffer)
    np.testing.assert_allclose(buffer, fresh + 0.5, rtol=1e-14)


@pytest.mark.parametrize("name", OPS + COMPOSITES)
@pytest.mark.parametrize("axis", [1, 0])
def test_infinities_and_nans_like_numpy(name, axis):
    x = np.array([[np.inf, 1.0, 2.0], [3.0, -np.inf, 0.5], [np.nan, 1.0, 1.0], [1.0, 2.0, 3.0]])
    if name in ALONG_AXIS:
        x = x.T.copy() if axis == 0 else x
    with np.errstate(all="ignore"):
        expected = reference(name, x, axis, False)
    got = call_op(name, anb.tensor(x), axis, False)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, equal_nan=True)


# -- the cached eager path (``Op._run``) against prepare + forward --------------------------------


@pytest.mark.parametrize("name", OPS)
@settings(max_examples=10, deadline=None)
@given(
    shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3),
    data=st.data(),
    dtype=st.sampled_from([np.float32, np.float64]),
)
def test_run_matches_the_general_path(name, shape, data, dtype):

    op = REGISTRY[name]
    ndim = len(shape)
    if op.single_axis:
        choices = [-1, 0] if ndim == 0 else list(range(-ndim, ndim))
        attrs = {"axis": data.draw(st.sampled_from(choices), label="axis")}
        if name == "cumsum":
            attrs = {"axis": data.draw(st.sampled_from([None, *choices]), label="axis")}
    else:
        axis = data.draw(st.sampled_from([None, *range(-ndim, ndim)]), label="axis")
        attrs = {"axis": axis, "keepdims": data.draw(st.booleans(), label="keepdims")}
    layout = data.draw(st.sampled_from(["contiguous", "strided"]), label="layout")
    x = layout_variant(sample(name, shape, np.random.default_rng(0)).astype(dtype), layout)
    assert_run_matches_general(op, [x], attrs)


def test_axis_errors_stay_after_a_cached_call():
    x = anb.tensor(np.ones((2, 3)))
    anb.softmax(x, axis=1)
    anb.softmax(x, axis=1)
    with pytest.raises(TypeError, match="single integer axis"):
        anb.softmax(x, axis=1.0)  # equal to 1, keyed apart
    with pytest.raises(np.exceptions.AxisError):
        anb.softmax(x, axis=2)
    np.testing.assert_array_equal(anb.sum(x, axis=True).numpy(), [3.0, 3.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1000, 10, 1), (3, 300, 7), (5, 4097, 1), (2, 3, 40),
                                   (0, 5, 3), (4, 0, 2)])
def test_softmax_blocks_give_the_bits_of_the_lane_by_lane_loops(shape, dtype):
    # Inputs above ``_SOFTMAX_LANES`` elements run in blocks of outer slices (several blocks
    # for (1000, 10, 1); one slice wider than a block for (5, 4097, 1)); the lane-by-lane
    # loops, which small inputs run, are the reference: the same bits, non-finite lanes too.
    from autograd_nb.ops import reduction

    rng = np.random.default_rng(11)
    x = (rng.standard_normal(shape) * 30).astype(dtype)
    if x.size:
        flat = x.reshape(-1)
        flat[::97] = np.inf
        flat[5::211] = -np.inf
        flat[7::389] = np.nan
    for blocks, lanes in ((reduction._softmax_forward, reduction._softmax_lanes),
                          (reduction._log_softmax_forward, reduction._log_softmax_lanes)):
        by_blocks, by_lanes = np.empty_like(x), np.empty_like(x)
        with np.errstate(all="ignore"):
            blocks(x, by_blocks)
            lanes(x, by_lanes)
        bits = f"u{x.itemsize}"
        np.testing.assert_array_equal(by_blocks.view(bits), by_lanes.view(bits))
