"""cumprod, logsumexp's weights, nansum, nanmean, average and ptp (autograd_nb/ops/
reductions_more.py and ``logsumexp`` in ops/reduction.py), beyond the registry-driven checks
of tests/ops/test_reduction.py: values against NumPy and SciPy, gradients against finite
differences to second order (at zeros for cumprod, at NaNs for the nan-functions), dtypes,
errors, and the same through ``autograd_nb.numpy``."""

import numpy as np
import pytest
import scipy.special
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import autograd_nb as anb
import autograd_nb.numpy as anp
from autograd_nb.ops.registry import REGISTRY, Saved
from tests.checks import check_gradients
from tests.reference import REFERENCE

fast = settings(max_examples=10, deadline=None)
shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)


def sample(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# -- cumprod -----------------------------------------------------------------------------------


@fast
@given(shape=shapes, data=st.data(), zeros=st.integers(0, 2))
def test_cumprod_values_and_gradients_with_zeros(shape, data, zeros):
    ndim = len(shape)
    axis = data.draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1)))
    x = sample(shape, seed=zeros)
    flat = x.reshape(-1)
    for k in data.draw(st.lists(st.integers(0, flat.size - 1), min_size=zeros, max_size=zeros)):
        flat[k] = 0.0
    got = anb.cumprod(anb.tensor(x), axis=axis)
    np.testing.assert_allclose(got.numpy(), np.cumprod(x, axis=axis), rtol=1e-13)
    check_gradients(lambda t: anb.cumprod(t, axis=axis), [x])


@pytest.mark.parametrize(
    "lane",
    [[2.0, 0.0, 3.0, -1.5], [0.0, 0.0, 2.0, 1.0], [1.5, 2.0, 0.5, 0.0], [0.0, 1.0, 1.0, 1.0]],
)
def test_cumprod_gradient_at_zeros_against_finite_differences(lane):
    # The kernel and the O(n^2) differentiable rule, each against finite differences, with
    # one or two zeros in a lane (first, last, adjacent): no division by the input anywhere.
    x = np.array([lane, [1.0, -2.0, 0.5, 3.0]]).T.copy()  # the lane along axis 0, inner 2
    grads = check_gradients(lambda t: anb.cumprod(t, axis=0), [x])
    assert np.all(np.isfinite(grads[0].numpy()))


def test_cumprod_kernel_and_rule_agree_at_zeros():
    x = np.array([[1.5, 0.0, 2.0, -1.0, 0.5], [0.0, 3.0, 0.0, 2.0, 1.0]])
    v = sample(x.shape, 1)
    leaf = anb.tensor(x, requires_grad=True)
    y = anb.cumprod(leaf, axis=1)
    (kernel,) = anb.grad(y, leaf, grad_outputs=anb.tensor(v), retain_graph=True)
    (rule,) = anb.grad(y, leaf, grad_outputs=anb.tensor(v), create_graph=True)
    np.testing.assert_allclose(rule.numpy(), kernel.numpy(), rtol=1e-13, atol=1e-14)
    expected = np.zeros_like(x)  # the Jacobian, column by column, with no division
    for j in range(x.shape[1]):
        others = x.copy()
        others[:, j] = 1.0
        jacobian = np.where(np.arange(5) >= j, np.cumprod(others, axis=1), 0.0)
        expected[:, j] = np.sum(v * jacobian, axis=1)
    np.testing.assert_allclose(kernel.numpy(), expected, rtol=1e-13, atol=1e-14)


def test_cumprod_dtypes_method_and_dtype_argument():
    ints = np.array([[1, 2, 3], [4, 0, -1]])
    got = anb.tensor(ints).cumprod(axis=1)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got.numpy(), np.cumprod(ints, axis=1))
    single = anb.cumprod(anb.tensor(sample((2, 3)).astype(np.float32)), axis=0)
    assert single.dtype == np.float32
    as_float = anb.cumprod(anb.tensor(ints), dtype=np.float64)
    assert as_float.dtype == np.float64
    np.testing.assert_array_equal(as_float.numpy(), np.cumprod(ints, dtype=np.float64))


def test_cumprod_vjp_accumulates_and_runs_batched():
    op = REGISTRY["cumprod"]
    x = sample((2, 5, 3))
    x[1, 2, 0] = 0.0
    arrays, attrs = op.prepare([x], {"axis": 1})
    y = op.forward(arrays, attrs)
    g = sample(y.shape, 2)
    fresh, buffer = np.zeros_like(x), np.full_like(x, 0.25)
    for target in (fresh, buffer):
        op.vjp(0, g, Saved((arrays[0],), y), attrs, target)
    np.testing.assert_allclose(buffer, fresh + 0.25, rtol=1e-14)

    leaf = anb.tensor(x, requires_grad=True)
    out = anb.cumprod(leaf, axis=1)
    v = sample((4,) + out.shape, 3)
    (batched,) = anb.grad(
        out, leaf, grad_outputs=anb.tensor(v), is_grads_batched=True, retain_graph=True
    )
    for row in range(4):
        (want,) = anb.grad(out, leaf, grad_outputs=anb.tensor(v[row]), retain_graph=True)
        np.testing.assert_allclose(batched.numpy()[row], want.numpy(), rtol=1e-12)


# -- logsumexp's weights -----------------------------------------------------------------------


@st.composite
def weighted_problems(draw):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3))
    ndim = len(shape)
    axis = draw(
        st.one_of(
            st.none(),
            *(
                [st.integers(-ndim, ndim - 1), hnp.valid_tuple_axes(ndim, min_size=1)]
                if ndim
                else []
            ),
        )
    )
    # b: the same shape, or one that broadcasts against it
    b_shape = tuple(1 if draw(st.booleans()) else n for n in shape)[draw(st.integers(0, ndim)) :]
    return shape, b_shape, axis, draw(st.booleans())


@fast
@given(problem=weighted_problems(), seed=st.integers(0, 2**16))
def test_logsumexp_weights_against_scipy(problem, seed):
    shape, b_shape, axis, keepdims = problem
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 3
    b = rng.uniform(0.2, 2.0, b_shape)
    got = anb.logsumexp(anb.tensor(x), axis=axis, b=anb.tensor(b), keepdims=keepdims)
    expected = REFERENCE["logsumexp"](x, axis=axis, b=b, keepdims=keepdims)
    assert got.shape == np.shape(expected)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)
    check_gradients(
        lambda t, w: anb.logsumexp(t, axis=axis, b=w, keepdims=keepdims),
        [x, b],
        second_order=seed % 2 == 0,
    )


def test_logsumexp_signs_zero_weights_and_float32():
    x = np.array([[1.0, 2.0, 3.0], [np.inf, 0.5, -1.0]])
    b = np.array([[1.0, -3.0, 0.5], [0.0, 2.0, 1.0]])  # a zero weight on an infinite x
    got, sign = anb.logsumexp(anb.tensor(x), axis=1, b=b, return_sign=True)
    want, want_sign = scipy.special.logsumexp(x, axis=1, b=b, return_sign=True)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-13)
    np.testing.assert_array_equal(sign.numpy(), want_sign)
    assert not sign.requires_grad
    finite = x[:1]
    check_gradients(
        lambda t, w: anb.logsumexp(t, axis=1, b=w, return_sign=True)[0], [finite, b[:1]]
    )
    # a constant zero weight leaves its element out of the gradient too
    leaf = anb.tensor(x, requires_grad=True)
    (g,) = anb.grad(anb.logsumexp(leaf, axis=1, b=b, return_sign=True)[0].sum(), leaf)
    assert g.numpy()[1, 0] == 0.0 and np.all(np.isfinite(g.numpy()))
    single = anb.logsumexp(anb.tensor(x[:1].astype(np.float32)), b=2.0)
    assert single.dtype == np.float32
    np.testing.assert_allclose(single.numpy(), scipy.special.logsumexp(x[:1], b=2.0), rtol=1e-6)


def test_logsumexp_return_sign_without_weights_and_the_old_path():
    x = sample((2, 3))
    got, sign = anb.logsumexp(anb.tensor(x), axis=0, return_sign=True)
    np.testing.assert_allclose(got.numpy(), scipy.special.logsumexp(x, axis=0), rtol=1e-13)
    np.testing.assert_array_equal(sign.numpy(), np.ones(3))
    assert anb.logsumexp(anb.tensor(x)).grad_fn is None  # no grad: nothing recorded
    leaf = anb.tensor(x, requires_grad=True)
    assert anb.logsumexp(leaf, axis=1).grad_fn.name == "logsumexp"  # b=None: the one op


# -- nansum, nanmean ---------------------------------------------------------------------------


def with_nans(shape, seed, lanes_whole=True):
    """Values with NaNs, but (``lanes_whole``) none of them all NaN along the last axis."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    x[rng.random(shape) < 0.3] = np.nan
    if lanes_whole and x.ndim:
        x[..., 0] = rng.standard_normal(shape[:-1])
    elif not x.ndim and np.isnan(x):
        x = np.float64(0.5)
    return x


@pytest.mark.parametrize("name", ["nansum", "nanmean"])
@fast
@given(shape=shapes, data=st.data(), keepdims=st.booleans(), seed=st.integers(0, 2**16))
def test_nan_reductions(name, shape, data, keepdims, seed):
    ndim = len(shape)
    axis = data.draw(st.one_of(st.none(), st.just(-1), st.just(tuple({0, ndim - 1}))))
    x = with_nans(shape, seed)
    function = getattr(anb, name)
    got = function(anb.tensor(x), axis=axis, keepdims=keepdims)
    expected = REFERENCE[name](x, axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)
    grads = check_gradients(
        lambda t: function(t, axis=axis, keepdims=keepdims), [x], second_order=seed % 2 == 0
    )
    assert np.all(grads[0].numpy()[np.isnan(x)] == 0.0)


def test_nanmean_of_an_all_nan_slice_is_nan_with_zero_gradient():
    x = np.array([[np.nan, np.nan], [1.0, np.nan]])
    leaf = anb.tensor(x, requires_grad=True)
    y = anb.nanmean(leaf, axis=1)
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        expected = np.nanmean(x, axis=1)
    np.testing.assert_array_equal(y.numpy(), expected)
    (g,) = anb.grad(y, leaf, grad_outputs=anb.ones_like(y))
    np.testing.assert_array_equal(g.numpy(), [[0.0, 0.0], [1.0, 0.0]])


def test_nan_reductions_of_integers_and_dtype():
    ints = np.array([[1, 2], [3, 4]])
    assert anb.nansum(anb.tensor(ints)).dtype == np.int64
    assert anb.nanmean(anb.tensor(ints), axis=0).dtype == np.float64
    got = anb.nansum(anb.tensor(ints), axis=0, dtype=np.float32)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.numpy(), np.nansum(ints, axis=0, dtype=np.float32))


# -- average -----------------------------------------------------------------------------------

AVERAGE_CASES = [
    # (a's shape, weights' shape, axis, keepdims)
    ((3, 4), (3, 4), None, False),
    ((3, 4), (3, 4), 1, True),
    ((3, 4), (4,), 1, False),
    ((3, 4), (3,), -2, True),
    ((2, 3, 4), (2, 4), (0, 2), False),
    ((2, 3, 4), (4, 2), (2, 0), True),
    ((2, 3, 4), (2, 3, 4), (1, 2), False),
]


@pytest.mark.parametrize("shape, w_shape, axis, keepdims", AVERAGE_CASES)
def test_average_with_weights(shape, w_shape, axis, keepdims):
    x = sample(shape)
    w = np.random.default_rng(1).uniform(0.5, 2.0, w_shape)
    got, total = anb.average(
        anb.tensor(x), axis=axis, weights=anb.tensor(w), returned=True, keepdims=keepdims
    )
    want, want_total = np.average(x, axis=axis, weights=w, returned=True, keepdims=keepdims)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-13)
    assert total.shape == want_total.shape
    np.testing.assert_allclose(total.numpy(), want_total, rtol=1e-13)
    check_gradients(
        lambda t, u: anb.average(t, axis=axis, weights=u, keepdims=keepdims),
        [x, w],
        second_order=len(shape) == 2,
    )


def test_average_without_weights_returned_and_errors():
    x = sample((2, 3))
    got, count = anb.average(anb.tensor(x), axis=1, returned=True)
    want, want_count = np.average(x, axis=1, returned=True)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-13)
    np.testing.assert_array_equal(count.numpy(), want_count)
    assert count.dtype == want_count.dtype
    with pytest.raises(ZeroDivisionError, match="sum to zero"):
        anb.average(anb.tensor(x), axis=1, weights=np.array([1.0, -1.0, 0.0]))
    with pytest.raises(TypeError, match="Axis must be specified"):
        anb.average(anb.tensor(x), weights=np.ones(3))
    with pytest.raises(ValueError, match="consistent with shape"):
        anb.average(anb.tensor(x), axis=0, weights=np.ones(3))
    ints = np.array([[1, 2], [3, 5]])
    np.testing.assert_array_equal(
        anb.average(anb.tensor(ints), axis=0, weights=[1, 3]).numpy(),
        np.average(ints, axis=0, weights=[1, 3]),
    )


# -- ptp, amax and amin ------------------------------------------------------------------------


def test_ptp_and_the_numpy_aliases_amax_amin():
    x = (np.random.default_rng(2).permutation(12) * 0.5).reshape(3, 4)  # no ties
    for axis in (None, 0, (0, 1)):
        np.testing.assert_array_equal(
            anb.ptp(anb.tensor(x), axis=axis, keepdims=True).numpy(),
            np.ptp(x, axis=axis, keepdims=True),
        )
    check_gradients(lambda t: anb.ptp(t, axis=1), [x])
    check_gradients(lambda t: anp.amax(t, axis=0) - anp.amin(t, axis=1)[:, None], [x])


# -- through autograd_nb.numpy -----------------------------------------------------------------


def test_through_the_numpy_namespace():
    x = with_nans((3, 4), 5)
    w = np.linspace(1.0, 2.0, 4)

    def function(a, weights):
        filled = anp.where(anp.isnan(a), 0.0, a)
        return (
            anp.nansum(a, axis=0)
            + anp.nanmean(a, axis=0)
            + anp.ptp(filled, axis=0)
            + anp.cumprod(filled, axis=0)[-1]
            + anp.average(filled, axis=0) * weights
            + anp.average(filled, axis=1, weights=weights).sum()
        )

    expected = function(x, w)
    assert type(expected) is np.ndarray
    got = function(anb.tensor(x, requires_grad=True), anb.tensor(w))
    assert got.requires_grad
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)
    check_gradients(function, [x, w], second_order=False)
    assert np.cumprod(anb.tensor(x, requires_grad=True), axis=1).requires_grad  # NEP 18
