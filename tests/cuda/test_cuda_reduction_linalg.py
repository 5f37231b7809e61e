"""The CUDA reductions, scans and tiled matmul against the CPU ops.

For every reduction op and ``_bmm``: the forward result, the VJP (which accumulates into a
non-zero gradient buffer) and the batched VJP on the device equal the CPU op's, to float
tolerance, in float32 and float64. Block and tile sizes are patched small, so rows and
matrices span several blocks and tiles and end in partial ones; under the simulator
(``NUMBA_ENABLE_CUDASIM=1``) the sizes stay tiny.
"""

import sys

import numba
import numba.cuda
import numpy as np
import pytest

if not numba.cuda.is_available():
    pytest.skip(
        "CUDA is not available (NUMBA_ENABLE_CUDASIM=1 runs these tests in the simulator)",
        allow_module_level=True,
    )

from hypothesis import given, settings
from hypothesis import strategies as st
from numba import cuda

from autograd_nb import config
from autograd_nb.cuda import dispatch, linalg, reduction
from autograd_nb.ops.registry import REGISTRY, Saved

KERNELS = {
    "sum": reduction.Sum,
    "prod": reduction.Prod,
    "max": reduction.Max,
    "min": reduction.Min,
    "logsumexp": reduction.LogSumExp,
    "softmax": reduction.Softmax,
    "log_softmax": reduction.LogSoftmax,
    "cumsum": reduction.Cumsum,
    "cumprod": reduction.Cumprod,
}

#: Batch of gradient vectors in the batched-VJP checks.
BATCH = 2


@pytest.fixture(autouse=True, scope="module")
def small_launches():
    """Blocks of 4 threads and 4x4 tiles (module-scoped: hypothesis tests share it).

    The simulator runs each CUDA thread as a Python thread and releases a barrier only
    when its polling thread sees every thread waiting; a short GIL switch interval cuts
    that wait (measured: 4x faster than the default 5 ms).
    """
    saved = config.CUDA_THREADS_PER_BLOCK, config.CUDA_MATMUL_TILE, sys.getswitchinterval()
    config.CUDA_THREADS_PER_BLOCK, config.CUDA_MATMUL_TILE = 4, 4
    if numba.config.ENABLE_CUDASIM:
        sys.setswitchinterval(1e-4)
    yield
    config.CUDA_THREADS_PER_BLOCK, config.CUDA_MATMUL_TILE, interval = saved
    sys.setswitchinterval(interval)


def tolerance(dtype):
    if np.dtype(dtype) == np.float32:
        return {"rtol": 2e-5, "atol": 2e-6}
    return {"rtol": 1e-11, "atol": 1e-13}


def close(got, want, dtype):
    np.testing.assert_allclose(got, want, **tolerance(dtype))


def saved_for(op, arrays, output, to_device=False):
    """What the engine keeps for ``op``: the inputs in ``op.saves`` and, if
    ``op.saves_output``, the result; None elsewhere."""
    move = cuda.to_device if to_device else (lambda a: a)
    inputs = [move(a) if k in op.saves else None for k, a in enumerate(arrays)]
    return Saved(inputs, move(output) if op.saves_output else None)


def check_op(name, kernels, values, attrs, rng, inputs=None):
    """Forward, vjp and vjp_batched of ``kernels`` (the CUDA side of op ``name``) against
    the CPU op, for the inputs ``inputs`` (default: all differentiable ones)."""
    op = REGISTRY[name]
    arrays, attrs = op.prepare(values, attrs)
    dtype = arrays[0].dtype
    want = op.forward(arrays, attrs)
    device_arrays = [cuda.to_device(a) for a in arrays]
    got = kernels.forward(op, device_arrays, attrs).copy_to_host()
    assert got.shape == want.shape and got.dtype == want.dtype
    close(got, want, dtype)

    cpu_saved = saved_for(op, arrays, want)
    device_saved = saved_for(op, device_arrays, want, to_device=True)
    grad_output = rng.standard_normal(want.shape).astype(want.dtype)
    grad_outputs = rng.standard_normal((BATCH,) + want.shape).astype(want.dtype)
    for k in inputs if inputs is not None else range(len(values)):
        shape = np.shape(values[k])
        start = rng.standard_normal(shape).astype(dtype)  # VJPs accumulate onto it
        expected = start.copy()
        op.vjp(k, grad_output, cpu_saved, attrs, expected)
        device_grad = cuda.to_device(start)
        kernels.vjp(op, k, cuda.to_device(grad_output), device_saved, attrs, device_grad)
        close(device_grad.copy_to_host(), expected, dtype)

        starts = rng.standard_normal((BATCH,) + shape).astype(dtype)
        expected = starts.copy()
        for b in range(BATCH):  # the batched VJP is the row-by-row one
            op.vjp(k, grad_outputs[b, ...], cpu_saved, attrs, expected[b, ...])
        device_grads = cuda.to_device(starts)
        kernels.vjp_batched(op, k, cuda.to_device(grad_outputs), device_saved, attrs, device_grads)
        close(device_grads.copy_to_host(), expected, dtype)


def test_every_reduction_and_linalg_op_has_cuda_kernels():
    ops = {name for name, op in REGISTRY.items() if op.family == "reduction"}
    assert ops == set(KERNELS)
    for name, kernels in dict(KERNELS, _bmm=linalg.BatchedMatmul).items():
        assert isinstance(dispatch.lookup(REGISTRY[name]), kernels)


# -- reductions --------------------------------------------------------------------------------

# (shape, attrs): inner > 1, rows longer than a block (4) and not a multiple of it, several
# non-adjacent axes (gathered), all axes, a 0-d input, and a reduced axis of length 1.
REDUCE_CASES = [
    ((3, 5, 2), {"axis": 1}),
    ((2, 19), {"axis": -1, "keepdims": True}),
    ((2, 3, 4), {"axis": (0, 2)}),
    ((4, 3), {"axis": None}),
    ((), {"axis": None}),
    ((5, 1, 2), {"axis": 1}),
]
SINGLE_AXIS_CASES = [
    ((3, 5, 2), {"axis": 1}),
    ((2, 19), {"axis": -1}),
    ((5, 1, 2), {"axis": 1}),
]
REDUCTIONS = ["sum", "prod", "max", "min", "logsumexp"]


def _inputs(shape, dtype, rng, name):
    x = rng.standard_normal(shape)
    if name == "prod":
        x = 0.5 + rng.random(shape)  # products of tens of normals vanish below tolerance
    return np.asarray(x, dtype=dtype)


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("shape, attrs", REDUCE_CASES)
def test_reduction_float64(name, shape, attrs):
    rng = np.random.default_rng(0)
    x = _inputs(shape, np.float64, rng, name)
    check_op(name, KERNELS[name], [x], attrs, rng)


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "cumsum", "cumprod"])
@pytest.mark.parametrize("shape, attrs", SINGLE_AXIS_CASES)
def test_axis_op_float64(name, shape, attrs):
    rng = np.random.default_rng(1)
    check_op(name, KERNELS[name], [rng.standard_normal(shape)], attrs, rng)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_float32(name):
    rng = np.random.default_rng(2)
    x = _inputs((3, 10, 2), np.float32, rng, name)
    check_op(name, KERNELS[name], [x], {"axis": 1}, rng)


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min"])
def test_long_rows_split_across_blocks(name, monkeypatch):
    # One element per thread: rows of 23 go to 6 blocks each, then a second pass.
    monkeypatch.setattr(config, "CUDA_REDUCTION_ELEMENTS_PER_THREAD", 1)
    assert reduction._chunks(3, 23, reduction.row_threads(23)) == 6
    rng = np.random.default_rng(13)
    check_op(name, KERNELS[name], [_inputs((3, 23), np.float64, rng, name)], {"axis": 1}, rng)


def test_cumsum_of_the_flattened_input():
    rng = np.random.default_rng(3)
    check_op("cumsum", KERNELS["cumsum"], [rng.standard_normal((3, 4))], {"axis": None}, rng)


def test_cumprod_gradient_is_exact_at_zeros():
    rng = np.random.default_rng(14)
    x = rng.standard_normal((3, 9, 2))
    x[0, 4, 0] = 0.0
    x[1, 2, 1] = x[1, 6, 1] = 0.0
    check_op("cumprod", KERNELS["cumprod"], [x], {"axis": 1}, rng)
    check_op("cumprod", KERNELS["cumprod"], [x], {"axis": None}, rng)


def test_prod_gradient_is_exact_at_zeros():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 11))
    x[0, 3] = 0.0  # one zero: only its own gradient survives
    x[1, 2] = x[1, 9] = 0.0  # two zeros: every gradient in the row is 0
    check_op("prod", KERNELS["prod"], [x], {"axis": 1}, rng)


@pytest.mark.parametrize("name", ["max", "min"])
def test_extrema_share_ties_and_propagate_nan(name):
    rng = np.random.default_rng(5)
    x = rng.integers(-2, 3, size=(4, 10)).astype(np.float64)  # many ties per row
    x[2, 7] = np.nan
    check_op(name, KERNELS[name], [x], {"axis": 1}, rng)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # the simulator's inf - inf
def test_exp_reductions_at_infinities():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 9))
    x[0] = -np.inf
    x[1, 4] = np.inf
    x[2, 0] = np.nan
    op = REGISTRY["logsumexp"]
    arrays, attrs = op.prepare([x], {"axis": 1})
    got = KERNELS["logsumexp"].forward(op, [cuda.to_device(arrays[0])], attrs)
    np.testing.assert_array_equal(got.copy_to_host(), op.forward(arrays, attrs))


@pytest.mark.parametrize(
    "name, dtype", [("sum", np.int64), ("prod", np.int32), ("max", np.bool_), ("min", np.int64)]
)
def test_integer_and_bool_forward(name, dtype):
    x = np.random.default_rng(7).integers(-3, 4, size=(3, 11)).astype(dtype)
    op = REGISTRY[name]
    arrays, attrs = op.prepare([x], {"axis": 1})
    got = KERNELS[name].forward(op, [cuda.to_device(arrays[0])], attrs).copy_to_host()
    want = op.forward(arrays, attrs)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@st.composite
def axis_problems(draw):
    name = draw(st.sampled_from(sorted(KERNELS)))
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    if REGISTRY[name].single_axis:
        attrs = {"axis": draw(st.integers(-len(shape), len(shape) - 1))}
    else:
        axes = draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)))
        attrs = {"axis": tuple(axes) or None, "keepdims": draw(st.booleans())}
    return name, shape, attrs, draw(st.sampled_from([np.float32, np.float64]))


@settings(max_examples=8, deadline=None)
@given(axis_problems())
def test_axis_ops_match_the_cpu(problem):
    name, shape, attrs, dtype = problem
    rng = np.random.default_rng(8)
    check_op(name, KERNELS[name], [_inputs(shape, dtype, rng, name)], attrs, rng)


# -- _bmm --------------------------------------------------------------------------------------

# (batch, m, k, n): none a multiple of the 4x4 tile, one-element matrices, a long shared axis.
MATMUL_CASES = [(2, 5, 3, 6), (1, 1, 1, 1), (3, 2, 9, 5)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("batch, m, k, n", MATMUL_CASES)
def test_bmm(batch, m, k, n, dtype):
    rng = np.random.default_rng(9)
    a = rng.standard_normal((batch, m, k)).astype(dtype)
    b = rng.standard_normal((batch, k, n)).astype(dtype)
    check_op("_bmm", linalg.BatchedMatmul, [a, b], {}, rng)


@pytest.mark.parametrize(
    "a_shape, b_shape, views",
    [
        ((4, 3), (3,), ((1, 4, 3), (1, 3, 1), (4,))),  # matmul: matrix @ vector
        ((5,), (6,), ((1, 5, 1), (1, 1, 6), (5, 6))),  # outer
        ((2, 4, 3), (3, 5), ((1, 8, 3), (1, 3, 5), (2, 4, 5))),  # a batch folded into rows
    ],
)
def test_bmm_through_views(a_shape, b_shape, views):
    # matmul, dot, outer and einsum record one _bmm that reads its operands as views: the
    # device result comes in the view's shape, the gradients in the operands' shapes.
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    check_op("_bmm", linalg.BatchedMatmul, [a, b], {"views": views}, rng)


def test_bmm_gradient_into_a_narrower_input():
    # float32 @ float64 is computed in float64; a's gradient slot stays float32.
    rng = np.random.default_rng(10)
    a = rng.standard_normal((2, 3, 5)).astype(np.float32)
    b = rng.standard_normal((2, 5, 4))
    op = REGISTRY["_bmm"]
    arrays, attrs = op.prepare([a, b], {})
    grad_output = rng.standard_normal((2, 3, 4))
    expected = np.zeros(a.shape, dtype=np.float32)
    op.vjp(0, grad_output, Saved(arrays, None), attrs, expected)
    device_grad = cuda.to_device(np.zeros(a.shape, dtype=np.float32))
    device_saved = Saved([cuda.to_device(v) for v in arrays], None)
    linalg.BatchedMatmul.vjp(op, 0, cuda.to_device(grad_output), device_saved, attrs, device_grad)
    close(device_grad.copy_to_host(), expected, np.float32)


@pytest.mark.parametrize("kind", ["empty shared axis", "bool"])
def test_bmm_forward_edge_cases(kind):
    rng = np.random.default_rng(11)
    if kind == "bool":
        a, b = rng.random((2, 3, 5)) > 0.6, rng.random((2, 5, 4)) > 0.6
    else:
        a, b = np.ones((2, 3, 0)), np.ones((2, 0, 4))
    op = REGISTRY["_bmm"]
    arrays, attrs = op.prepare([a, b], {})
    got = linalg.BatchedMatmul.forward(op, [cuda.to_device(v) for v in arrays], attrs)
    want = op.forward(arrays, attrs)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.copy_to_host(), want)


@settings(max_examples=5, deadline=None)
@given(st.tuples(*(st.integers(1, 5) for _ in range(4))))
def test_bmm_matches_the_cpu(dims):
    batch, m, k, n = dims
    rng = np.random.default_rng(12)
    a, b = rng.standard_normal((batch, m, k)), rng.standard_normal((batch, k, n))
    check_op("_bmm", linalg.BatchedMatmul, [a, b], {}, rng)
