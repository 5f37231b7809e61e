"""The cached eager forward for small arrays: a Python number beside a Tensor
(``ElementwiseOp._run_with_constants``), broadcasting binary ops, the arithmetic operators'
shortcut (``tensor._binary``), ``concatenate`` and slicing. A cache hit gives what a miss
gives, and arguments that compare equal but prepare differently do not share an entry."""

import warnings

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb.ops.registry import REGISTRY

BINARY = sorted(
    name for name, op in REGISTRY.items() if op.family == "elementwise" and op.n_inputs == 2
)


def general(op, values):
    """``prepare`` then ``forward``: what a cached run must reproduce."""
    arrays, attrs = op.prepare(list(values), {})
    return arrays, attrs, op.forward(arrays, attrs)


def assert_same_run(got, expected):
    got_arrays, got_attrs, got_out = got
    arrays, attrs, out = expected
    for g, e in zip(got_arrays, arrays, strict=True):
        assert type(g) is np.ndarray and g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_array_equal(g, e)
    assert got_attrs["shape"] == attrs["shape"] and got_attrs["shapes"] == attrs["shapes"]
    assert type(got_out) is np.ndarray and got_out.flags.c_contiguous
    assert got_out.dtype == out.dtype and got_out.shape == out.shape
    assert got_out.tobytes() == out.tobytes()


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("scalar", [0.5, 2, -3.0])
def test_a_python_number_beside_an_array_runs_as_the_general_path(name, dtype, scalar):
    op = REGISTRY[name]
    op._run_cache.clear()
    x = (np.arange(6).reshape(3, 2) % 4 + 1).astype(dtype)
    for values in ([x, scalar], [scalar, x]):
        expected = general(op, values)
        for _ in range(3):  # the miss that fills the cache, then hits
            assert_same_run(op._run_with_constants(list(values), {}), expected)


def test_number_types_and_array_dtypes_do_not_share_an_entry():
    op = REGISTRY["add"]
    op._run_cache.clear()
    ints = np.arange(3)
    floats = np.arange(3.0)
    singles = np.arange(3, dtype=np.float32)
    cases = [(ints, 2), (ints, 2.0), (floats, 2), (singles, 2.0), (singles, 2), (ints, True)]
    for _ in range(2):
        for array, number in cases:
            expected = general(op, [array, number])
            assert_same_run(op._run_with_constants([array, number], {}), expected)
            reflected = general(op, [number, array])
            assert_same_run(op._run_with_constants([number, array], {}), reflected)
    # ``int + 2.0`` computes in float64 and ``int + 2`` in int64: the first does not stand in
    # for the second.
    assert op._run_with_constants([ints, 2.0], {})[2].dtype == np.float64
    assert op._run_with_constants([ints, 2], {})[2].dtype == np.int64
    assert op._run_with_constants([singles, 2.0], {})[2].dtype == np.float32


def test_strided_arrays_beside_a_number_are_not_cached_as_contiguous_ones():
    op = REGISTRY["multiply"]
    op._run_cache.clear()
    x = np.arange(12.0).reshape(3, 4)
    for values in ([x, 3.0], [x[:, ::2], 3.0], [x.T, 3.0], [x, 3.0]):
        assert_same_run(op._run_with_constants(list(values), {}), general(op, values))


def test_an_out_of_range_number_raises_on_a_hit_as_on_a_miss():
    op = REGISTRY["add"]
    op._run_cache.clear()
    x = np.arange(3)
    op._run_with_constants([x, 1], {})  # fills the (int, int64 array) entry
    with pytest.raises(OverflowError):
        op._run_with_constants([x, 2**70], {})


@pytest.mark.parametrize("shapes", [((3, 1), (3, 2)), ((1, 2), (3, 1)), ((2, 3), (3,))])
def test_broadcast_runs_read_their_cached_layout(shapes):
    op = REGISTRY["multiply"]
    op._run_cache.clear()
    rng = np.random.default_rng(0)
    for _ in range(3):
        values = [rng.standard_normal(s) for s in shapes]
        assert_same_run(op._run(list(values), {}), general(op, values))
        # the same shapes with other strides: a different entry
        strided = [np.repeat(v, 2, axis=-1)[..., ::2] for v in values]
        assert_same_run(op._run(list(strided), {}), general(op, strided))


# -- through Tensors --------------------------------------------------------------------------


def test_operators_with_numbers_record_what_apply_records():
    x = anb.tensor(np.linspace(0.5, 2.0, 6).reshape(3, 2), requires_grad=True)
    results = []
    for _ in range(3):
        y = 10.0 * (x - 1.0) / x * 2 - 0.5 + x**2
        results.append(y)
    for y in results[1:]:
        np.testing.assert_array_equal(y.numpy(), results[0].numpy())
        assert y.grad_fn.attrs is results[0].grad_fn.attrs  # the plan cache's fast path
    (g,) = anb.grad(results[-1].sum(), x)
    data = x.numpy()
    np.testing.assert_allclose(g.numpy(), 20 / data**2 + 2 * data)
    assert (x - 1.0).grad_fn.next_functions == (x, None)  # the number: no edge
    assert (1.0 - x).grad_fn.next_functions == (None, x)


def test_operators_follow_grad_mode_and_leaves():
    x = anb.tensor(np.ones((2, 2)), requires_grad=True)
    c = anb.tensor(np.full((2, 2), 3.0))
    for _ in range(2):
        y = x * c
        assert y.grad_fn.next_functions == (x, None)
        assert (c * c).grad_fn is None and not (c + 1.0).requires_grad
        with anb.no_grad():
            assert (x * c).grad_fn is None and (2.0 * x).grad_fn is None


def test_an_inplace_change_after_a_cached_op_still_fails_backward():
    x = anb.tensor(np.linspace(1, 2, 4), requires_grad=True)
    for _ in range(2):
        a = x * 1.0
        y = 3.0 * a * a  # saves a
        a += 1.0
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_cached_division_by_zero_warns_no_more_than_the_general_path():
    x = anb.tensor(np.array([1.0, 0.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            assert np.isinf((1.0 / x).numpy()[1])
            assert np.isinf((x / x[1:]).numpy()[0])


def test_numpy_array_operands_take_apply():
    x = anb.tensor(np.arange(3.0), requires_grad=True)
    array = np.arange(3.0)
    for _ in range(2):
        y = x * array
        np.testing.assert_array_equal(y.numpy(), array * array)
        assert y.grad_fn.next_functions == (x, None)
        np.testing.assert_array_equal((array - x).numpy(), np.zeros(3))


# -- concatenate and slicing ------------------------------------------------------------------


def test_concatenate_hits_give_what_misses_give():
    op = REGISTRY["concatenate"]
    op._run_cache.clear()
    a = np.arange(6.0).reshape(3, 2)
    row = np.zeros((1, 2))
    for values, axis in [([a, row], 0), ([row, a], 0), ([a, a], 1), ([a, row], None),
                         ([a, a, row], 0), ([a.T, a.T], 1)]:
        expected = np.concatenate(values, axis=axis)
        for _ in range(2):
            arrays, attrs, out = op._run(list(values), {"axis": axis})
            assert out.flags.c_contiguous and out.dtype == expected.dtype
            np.testing.assert_array_equal(out, expected)


@pytest.mark.compiled_only
def test_concatenate_bool_and_numpy_int_axes_are_not_keyed_as_ints():
    op = REGISTRY["concatenate"]
    op._run_cache.clear()
    a = np.arange(6.0).reshape(3, 2)
    op._run([a, a], {"axis": 1})
    for axis in (True, np.int64(1)):
        _, _, out = op._run([a, a], {"axis": axis})
        np.testing.assert_array_equal(out, np.concatenate([a, a], axis=1))
    assert len(op._run_cache) == 1  # prepared afresh each time, never cached


def test_concatenate_of_tensors_and_a_constant_shares_attrs_and_gradients():
    x = anb.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    zero = anb.tensor(np.zeros((1, 2)))
    joined = [anb.concatenate([x * 2.0, zero]) for _ in range(2)]
    assert joined[0].grad_fn.attrs is joined[1].grad_fn.attrs
    (g,) = anb.grad((joined[1] * joined[1]).sum(), x)
    np.testing.assert_allclose(g.numpy(), 8 * x.numpy())


@pytest.mark.parametrize("index", [slice(1, None), slice(None, -1), slice(np.int64(1), None),
                                   slice(None, None, 2), slice(True, None)])
def test_slices_hit_the_cache_as_numpy_indexes(index):
    x = anb.tensor(np.arange(8.0).reshape(4, 2), requires_grad=True)
    for _ in range(2):
        y = x[index]
        np.testing.assert_array_equal(y.numpy(), x.numpy()[index])
    (g,) = anb.grad(y.sum(), x)
    expected = np.zeros((4, 2))
    expected[index] = 1.0
    np.testing.assert_array_equal(g.numpy(), expected)


@pytest.mark.compiled_only
def test_a_number_beside_an_array_skips_prepare_once_cached(monkeypatch):
    op = REGISTRY["multiply"]
    op._run_cache.clear()
    op._run_with_constants([2.0, np.ones((2, 3))], {})
    op._run_with_constants([np.ones((2, 3)), 2], {})
    monkeypatch.setattr(op, "prepare", lambda *args: pytest.fail("prepare ran again"))
    x = np.arange(6.0).reshape(2, 3)
    (scalar, _), _, out = op._run_with_constants([3.0, x], {})
    assert scalar.shape == () and scalar.dtype == x.dtype
    np.testing.assert_array_equal(out, 3.0 * x)
    np.testing.assert_array_equal(op._run_with_constants([x, 5], {})[2], x * 5)
