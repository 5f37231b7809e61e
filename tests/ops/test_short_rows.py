"""Fast paths for short rows and contiguous strided rows give the bits of the general loops.

* The strided VJP kernels of elementwise ops (``_kernels._short_rows``): a 2-D layout with
  rows of at most ``config.SHORT_ROW`` elements runs its own loops; the same kernel over the same
  layout written as 3-D (a leading dimension of 1, which the general loop walks) is the
  reference, bit for bit.
* The strided VJPs over rows where every operand has stride 1 (``_kernels._unit_rows``: a
  bias's gradient), against additions in the general loop's order.
* ``_strided.gather`` / ``scatter_add`` over rows of stride 1, against a Python loop in the
  general loop's order.
* ``sum`` over short rows: forward against a running sum, VJP against broadcasting.
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import autograd_nb as anb
from autograd_nb.ops import _strided
from autograd_nb.ops.registry import REGISTRY

#: (formula's VJP, the input it reads): multiply's VJP of ``a`` reads ``b``, and the reverse.
_MULTIPLY_VJPS = ((0, 1), (1, 0))


def _strides(shape, broadcast):
    """Element strides of a C-contiguous operand of ``shape`` with the dimensions in
    ``broadcast`` of size 1 (stride 0)."""
    strides, step = [], 1
    for d in reversed(range(len(shape))):
        if d in broadcast:
            strides.append(0)
        else:
            strides.append(step)
            step *= shape[d]
    return strides[::-1], step


def _run_vjp(k, shape, read_broadcast, target_broadcast, g, x, lead):
    """Multiply's ``vjp{k}_strided`` into a zeroed target; ``lead``: the layout as 3-D."""
    kernel = getattr(REGISTRY["multiply"].kernels, f"vjp{k}_strided")
    x_strides, _ = _strides(shape, read_broadcast)
    t_strides, t_size = _strides(shape, target_broadcast)
    target = np.zeros(t_size)
    dims = ([1] if lead else []) + list(shape)
    pad = [0] if lead else []
    kernel(g, x, np.array(pad + x_strides, dtype=np.int64), target,
           np.array(pad + t_strides, dtype=np.int64), np.array(dims, dtype=np.int64),
           np.zeros(0))
    return target


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 70),
    inner=st.integers(1, anb.config.SHORT_ROW + 1),
    read_broadcast=st.sampled_from([(), (0,), (1,)]),
    target_broadcast=st.sampled_from([(), (0,), (1,), (0, 1)]),
    vjp=st.sampled_from(_MULTIPLY_VJPS),
    seed=st.integers(0, 2**16),
)
def test_short_row_vjps_match_the_general_loop(rows, inner, read_broadcast, target_broadcast,
                                               vjp, seed):
    k, _ = vjp
    shape = (rows, inner)
    rng = np.random.default_rng(seed)
    g = rng.standard_normal(rows * inner)
    # Signed zeros too: the order of additions decides their sign.
    g[rng.random(g.size) < 0.2] = -0.0
    _, x_size = _strides(shape, read_broadcast)
    x = rng.standard_normal(x_size)
    fast = _run_vjp(k, shape, read_broadcast, target_broadcast, g, x, lead=False)
    general = _run_vjp(k, shape, read_broadcast, target_broadcast, g, x, lead=True)
    assert np.array_equal(fast.view(np.int64), general.view(np.int64))
    # And the value: the gradient of a broadcast multiply, summed to the target's shape.
    full = g.reshape(shape) * np.broadcast_to(
        x.reshape([1 if d in read_broadcast else n for d, n in enumerate(shape)]), shape)
    axes = tuple(target_broadcast)
    expected = full.sum(axis=axes, keepdims=True).reshape(-1) if axes else full.reshape(-1)
    np.testing.assert_allclose(fast, expected, rtol=1e-12, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 40),
    inner=st.integers(anb.config.SHORT_ROW + 1, 40),
    read_broadcast=st.sampled_from([(), (0,), (1,)]),
    target_broadcast=st.sampled_from([(), (0,)]),
    vjp=st.sampled_from(_MULTIPLY_VJPS),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**16),
)
def test_rows_of_stride_one_add_in_the_general_loops_order(rows, inner, read_broadcast,
                                                           target_broadcast, vjp, dtype, seed):
    """``_kernels._unit_rows``: a VJP whose operands all have stride 1 along the row (a
    bias's gradient: the target broadcast over rows) reads slice views; each target element
    still gets its products added row after row, from zero (``np.add.accumulate`` is that
    order), bit for bit."""
    k, _ = vjp
    shape = (rows, inner)
    rng = np.random.default_rng(seed)
    g = rng.standard_normal(rows * inner).astype(dtype)
    g[rng.random(g.size) < 0.2] = -0.0
    x_strides, x_size = _strides(shape, read_broadcast)
    t_strides, t_size = _strides(shape, target_broadcast)
    x = rng.standard_normal(x_size).astype(dtype)
    target = np.zeros(t_size, dtype=dtype)
    getattr(REGISTRY["multiply"].kernels, f"vjp{k}_strided")(
        g, x, np.array(x_strides, dtype=np.int64), target, np.array(t_strides, dtype=np.int64),
        np.array(shape, dtype=np.int64), np.zeros(0))
    products = g.reshape(shape) * np.broadcast_to(
        x.reshape([1 if d in read_broadcast else n for d, n in enumerate(shape)]), shape)
    zero = np.zeros((1, inner), dtype=dtype)
    expected = np.add.accumulate(np.concatenate([zero, products]), axis=0)[-1] if (
        target_broadcast) else products.reshape(-1) + zero.reshape(-1)[0]
    assert target.dtype == dtype
    np.testing.assert_array_equal(target.view(np.uint8), expected.view(np.uint8))


def test_short_row_vjp_through_the_executor_matches_eager():
    """A ``(m, 1) * (m, 2)`` product's gradients, compiled backward against the Python walk
    (``anb.grad`` runs the compiled executor; ``create_graph`` the differentiable rules)."""
    rng = np.random.default_rng(3)
    column = anb.tensor(rng.standard_normal((63, 1)), requires_grad=True)
    matrix = anb.tensor(rng.standard_normal((63, 2)), requires_grad=True)
    weights = anb.tensor(rng.standard_normal((63, 2)))
    loss = anb.sum(column * matrix * weights)
    grads = anb.grad(loss, (column, matrix))
    np.testing.assert_allclose(grads[0].numpy(), (matrix.numpy() * weights.numpy()).sum(
        axis=1, keepdims=True), rtol=1e-13)
    np.testing.assert_array_equal(grads[1].numpy(), column.numpy() * weights.numpy())


def _gather_reference(source, offset, shape, strides, out, add):
    """:func:`_strided.gather` as a Python loop, in the general loop's order."""
    for r, index in enumerate(np.ndindex(*shape)):
        at = offset + sum(i * s for i, s in zip(index, strides))
        if add:
            out[r] += source[at]
        else:
            out[r] = source[at]


def _scatter_reference(values, offset, shape, strides, target):
    for r, index in enumerate(np.ndindex(*shape)):
        target[offset + sum(i * s for i, s in zip(index, strides))] += values[r]


_layouts = st.lists(st.integers(1, 5), min_size=1, max_size=4).flatmap(
    lambda shape: st.tuples(
        st.just(tuple(shape)),
        st.lists(st.sampled_from([0, 1]), min_size=len(shape) - 1, max_size=len(shape) - 1),
        st.sampled_from([0, 1, 2]),
        st.integers(0, 3),
    )
)


def _layout_strides(shape, broadcast, step):
    """Strides with the innermost ``step`` (1: the fast path) and outer dimensions of a
    source laid out after it, or broadcast (0) where ``broadcast`` says so."""
    strides, size = [step], max(step, 1) * shape[-1]
    for d in range(len(shape) - 2, -1, -1):
        strides.append(0 if broadcast[d] else size)
        size *= 1 if broadcast[d] else shape[d]
    return strides[::-1], size


@settings(max_examples=60, deadline=None)
@given(layout=_layouts, seed=st.integers(0, 2**16))
def test_gather_and_scatter_add_match_the_python_loop(layout, seed):
    shape, broadcast, step, offset = layout
    strides, size = _layout_strides(shape, broadcast, step)
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    source = rng.standard_normal(offset + size + 1)
    shape_array = np.array(shape, dtype=np.int64)
    strides_array = np.array(strides, dtype=np.int64)
    for add in (False, True):
        out = rng.standard_normal(n)
        expected = out.copy()
        _strided.gather(source, offset, shape_array, strides_array, out, add)
        _gather_reference(source, offset, shape, strides, expected, add)
        assert np.array_equal(out.view(np.int64), expected.view(np.int64))
    values = rng.standard_normal(n)
    target = rng.standard_normal(offset + size + 1)
    expected = target.copy()
    _strided.scatter_add(values, offset, shape_array, strides_array, target)
    _scatter_reference(values, offset, shape, strides, expected)
    assert np.array_equal(target.view(np.int64), expected.view(np.int64))


@settings(max_examples=30, deadline=None)
@given(
    rows=st.integers(0, 40),
    n=st.integers(1, 10),
    dtype=st.sampled_from([np.float64, np.float32, np.int64]),
    seed=st.integers(0, 2**16),
)
def test_sum_of_short_rows(rows, n, dtype, seed):
    rng = np.random.default_rng(seed)
    values = (rng.standard_normal((rows, n)) * 10).astype(dtype)
    x = anb.tensor(values, requires_grad=dtype != np.int64)
    y = anb.sum(x, axis=1, keepdims=True)
    # Short rows: one running sum from zero, in order (eight sums, then the tail, beyond).
    expected = np.zeros((rows, 1), dtype=y.numpy().dtype)
    for r in range(rows):
        if n < 8:
            total = expected.dtype.type(0)
            for j in range(n):
                total += values[r, j]
            expected[r, 0] = total
        else:
            expected[r, 0] = y.numpy()[r, 0]
    assert np.array_equal(y.numpy(), expected)
    np.testing.assert_allclose(y.numpy(), values.sum(axis=1, keepdims=True), rtol=1e-5)
    if dtype == np.int64:
        return
    g = rng.standard_normal((rows, 1)).astype(dtype)
    (grad,) = anb.grad(y, x, grad_outputs=anb.tensor(g))
    np.testing.assert_array_equal(grad.numpy(), np.broadcast_to(g, (rows, n)))
