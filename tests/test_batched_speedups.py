"""The GEMM split over numba's threads (``autograd_nb.ops._blas``) and where linalg uses it,
and linalg's matrix-vector products in blocks of rows: the same bits as one BLAS call and as
each thread count, close to NumPy, and OpenBLAS's own thread count restored after."""

import os
import subprocess
import sys

import numba
import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb import config
from autograd_nb.ops import _blas, linalg
from autograd_nb.ops.registry import REGISTRY, Saved

# Two threads where numba has them (else the blocks run on one).
THREADS = (1, min(2, numba.config.NUMBA_NUM_THREADS))


def _at_threads(threads, function, *args):
    previous = numba.get_num_threads()
    try:
        numba.set_num_threads(threads)
        return function(*args)
    finally:
        numba.set_num_threads(previous)


def _operands(dtype, rows, depth, columns, transpose_y, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, depth)).astype(dtype)
    y_shape = (columns, depth) if transpose_y else (depth, columns)
    y = rng.standard_normal(y_shape).astype(dtype)
    out = rng.standard_normal((rows, columns)).astype(dtype)
    return x, y, out


def test_blocks_depend_on_the_shape_alone():
    assert _blas.split_blocks(256, _blas.SPLIT_MIN_WORK - 1) == 1
    assert _blas.split_blocks(256, _blas.SPLIT_MIN_WORK) == 2
    assert _blas.split_blocks(100, 1 << 30) == 1
    assert _blas.split_blocks(1 << 20, 1 << 30) == _blas.SPLIT_MAX_BLOCKS
    starts = [_blas.block_start(300, 3, p) for p in range(4)]
    assert starts == [0, 96, 192, 300]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("transpose_y", [False, True])
@pytest.mark.parametrize("columns", [256, 389])  # two blocks; three, uneven
@pytest.mark.parametrize("own", [False, True])  # SciPy's BLAS, ops._gemm's own kernel
def test_split_gemm_same_bits_at_one_and_two_threads_and_close_to_numpy(
    dtype, transpose_y, columns, own
):
    x, y, out = _operands(dtype, 64, 128, columns, transpose_y)
    assert _blas.split_blocks(columns, 64 * 128 * columns) > 1
    gemm = _blas.product_kernel(dtype, own)  # (gemm, tiles)
    results = []
    previous = _blas.hold_blas_threads()
    try:
        for threads in THREADS:
            split = out.copy()
            _at_threads(threads, _blas.gemm_add_split, *gemm, x, y, transpose_y, split, True)
            results.append(split)
        serial = out.copy()  # the blocks on this thread (a forked child's path)
        _blas.gemm_add_split(*gemm, x, y, transpose_y, serial, False)
    finally:
        _blas.release_blas_threads(previous)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], serial)
    y_used = y.T if transpose_y else y
    expected = out.astype(np.float64) + x.astype(np.float64) @ y_used.astype(np.float64)
    tolerance = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(results[0], expected, rtol=tolerance, atol=tolerance * 10)
    if dtype == np.float64 or own:
        # OpenBLAS's dgemm sums each element in the same order whatever the call's size
        # (its sgemm does not, hence blocks by the shape alone); so does the own kernel.
        one = out.copy()
        _blas.gemm_add(*gemm, x, False, y, transpose_y, one)
        if own:
            np.testing.assert_array_equal(results[0], one)
        else:
            np.testing.assert_allclose(results[0], one, rtol=1e-14, atol=1e-13)


def test_split_gemm_reads_rows_with_a_stride():
    # One batch entry of a stacked gradient: rows of x and out with a leading dimension.
    x, y, out = _operands(np.float64, 64, 128, 256, False, seed=1)
    wide_x = np.zeros((64, 150))
    wide_x[:, :128] = x
    wide_out = np.zeros((64, 270))
    wide_out[:, :256] = out
    _blas.gemm_add_split(
        *_blas.product_kernel(np.float64), wide_x[:, :128], y, False, wide_out[:, :256], True
    )
    np.testing.assert_allclose(wide_out[:, :256], out + x @ y, rtol=1e-12, atol=1e-12)
    assert not wide_out[:, 256:].any()


def test_small_products_stay_on_one_block():
    x, y, out = _operands(np.float64, 8, 8, 8, False)
    assert _blas.split_blocks(out.shape[1], 8 * 8 * 8) == 1
    # (and a product past the threshold does split, so the check above can fail)
    wide = 4 * _blas.SPLIT_WIDTH
    assert _blas.split_blocks(wide, _blas.SPLIT_MIN_WORK * 4) > 1
    expected = out + x @ y
    _blas.gemm_add_split(*_blas.product_kernel(np.float64), x, y, False, out, True)
    np.testing.assert_allclose(out, expected, rtol=1e-13)


def _thread_counts():
    """The own thread count of each OpenBLAS in use (products', SciPy's), or None where none
    has OpenBLAS's controls."""
    counts = [blas.get_threads() for blas in _blas.libraries() if blas.get_threads is not None]
    return counts or None


def test_blas_thread_count_is_held_at_one_and_restored():
    _blas.scipy_blas()  # (loaded: libraries() lists it)
    if _thread_counts() is None:
        pytest.skip("no OpenBLAS thread controls in this BLAS")
    libraries = [blas for blas in _blas.libraries() if blas.get_threads is not None]
    before = _thread_counts()
    try:
        for blas in libraries:  # (two threads, so that holding has something to change)
            blas.set_threads(2)
        previous = _blas.hold_blas_threads()
        assert _thread_counts() == [1] * len(libraries)
        _blas.release_blas_threads(previous)
        assert _thread_counts() == [2] * len(libraries)
    finally:
        for blas, count in zip(libraries, before):
            blas.set_threads(count)


@pytest.mark.parametrize("entries", [1, 6])
def test_batched_vjp_one_gemm_per_entry_same_bits_at_one_and_two_threads(entries):
    # (vectors, batch, m, n) grad_outputs with m, n > 1 over several batch entries: one GEMM
    # per vector and entry, a prange over them when large enough.
    rng = np.random.default_rng(5)
    vectors, m, inner, n = 8, 48, 64, 40
    a = rng.standard_normal((entries, m, inner))
    b = rng.standard_normal((entries, inner, n))
    g = rng.standard_normal((vectors, entries, m, n))
    op = REGISTRY["_bmm"]
    saved = Saved([a, b], None)
    for k, shape in ((0, a.shape), (1, b.shape)):
        results = []
        for threads in THREADS:
            grad = np.zeros((vectors,) + shape)
            _at_threads(threads, op.vjp_batched, k, g, saved, {}, grad)
            results.append(grad)
        np.testing.assert_array_equal(results[0], results[1])
        if k == 0:
            expected = np.einsum("vimn,ikn->vimk", g, b)
        else:
            expected = np.einsum("imk,vimn->vikn", a, g)
        np.testing.assert_allclose(results[0], expected, rtol=1e-12, atol=1e-12)


def test_forward_products_restore_blas_threads():
    if _thread_counts() is None:
        pytest.skip("no OpenBLAS thread controls in this BLAS")
    before = _thread_counts()
    w = anb.tensor(np.random.default_rng(6).standard_normal((64, 32)))
    x = anb.tensor(np.ones(32))
    np.testing.assert_allclose((w @ x).numpy(), w.numpy() @ x.numpy(), rtol=1e-13)
    assert _thread_counts() == before



@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("rows, depth", [(512, 256), (128, 512), (45, 2047), (4099, 31)])
def test_matrix_vector_products_run_in_row_blocks_same_bits_at_one_and_two_threads(
    dtype, rows, depth
):
    # Between MATVEC_SPLIT_MIN and MATVEC_SPLIT_MAX multiply-adds, ``W @ x`` runs as blocks of
    # rows over numba's threads (rows neither a multiple of 32 nor of a vector's width here).
    assert config.MATVEC_SPLIT_MIN <= rows * depth < config.MATVEC_SPLIT_MAX
    rng = np.random.default_rng(rows + depth)
    w_data = rng.standard_normal((rows, depth)).astype(dtype)
    x_data = rng.standard_normal(depth).astype(dtype)
    v = rng.standard_normal(rows).astype(dtype)
    assert linalg._split_matvec(w_data[None], x_data[None, :, None])

    def product_and_gradients():
        w = anb.tensor(w_data, requires_grad=True)
        x = anb.tensor(x_data, requires_grad=True)
        y = w @ x
        return (y.numpy(), *(g.numpy() for g in anb.grad(y, (w, x), grad_outputs=v)))

    y1, gw1, gx1 = _at_threads(1, product_and_gradients)
    y2, gw2, gx2 = _at_threads(THREADS[1], product_and_gradients)
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_array_equal(gx1, gx2)
    # On this thread alone (before numba's threads start, or in a forked child) and in blocks
    # over the threads: the same bits.
    alone = np.empty(rows, dtype)
    linalg._dot_rows(w_data, x_data, alone, 0, rows)
    for threads in THREADS:
        blocks = np.empty(rows, dtype)
        _at_threads(threads, linalg._matvec_blocks, w_data, x_data, blocks)
        np.testing.assert_array_equal(blocks, alone)
    np.testing.assert_array_equal(y1, alone)
    assert y1.dtype == dtype
    wide = w_data.astype(np.float64)
    expected = wide @ x_data.astype(np.float64)
    bound = np.abs(wide) @ np.abs(x_data.astype(np.float64))  # the sum's rounding scale
    tolerance = 8 * depth * np.finfo(dtype).eps
    assert np.all(np.abs(y1 - expected) <= tolerance * bound)
    np.testing.assert_allclose(gw1, np.outer(v, x_data), rtol=1e-6 if dtype == np.float32 else 0)
    np.testing.assert_allclose(gx1, v @ w_data, rtol=1e-4 if dtype == np.float32 else 1e-12)


def test_the_matrix_vector_split_reads_its_bounds_from_config(monkeypatch):
    a, b = np.zeros((1, 512, 256)), np.zeros((1, 256, 1))
    assert linalg._split_matvec(a, b)
    monkeypatch.setattr(config, "MATVEC_SPLIT_MIN", 512 * 256 + 1)
    assert not linalg._split_matvec(a, b)


def test_only_single_float_matrix_vector_products_of_the_middle_sizes_split():
    def split(a_shape, b_shape, dtype=np.float64):
        return linalg._split_matvec(np.zeros(a_shape, dtype), np.zeros(b_shape, dtype))

    k = 256
    low = config.MATVEC_SPLIT_MIN // k
    high = config.MATVEC_SPLIT_MAX // k
    assert split((1, low, k), (1, k, 1))
    assert not split((1, low - 1, k), (1, k, 1))  # BLAS, one call
    assert split((1, high - 1, k), (1, k, 1))
    assert not split((1, high, k), (1, k, 1))  # BLAS, which reads four rows at once
    assert not split((2, low, k), (2, k, 1))  # a stack of products
    assert not split((1, low, k), (1, k, 2))  # a matrix product
    assert not split((1, low, k), (1, k, 1), np.int64)

def _mlp_jacobian(threads, seed=4):
    rng = np.random.default_rng(seed)
    w1 = anb.tensor(rng.standard_normal((256, 128)) * 128**-0.5)
    w2 = anb.tensor(rng.standard_normal((128, 256)) * 256**-0.5)
    x = anb.tensor(rng.standard_normal(128), requires_grad=True)
    previous = numba.get_num_threads()
    try:
        numba.set_num_threads(threads)
        y = anb.tanh(w2 @ anb.tanh(w1 @ x))
        (jac,) = anb.grad(y, x, grad_outputs=anb.eye(128, dtype="float64"), is_grads_batched=True)
        dense = rng.standard_normal((128, 128))
        y = anb.tanh(w2 @ anb.tanh(w1 @ x))
        (vjps,) = anb.grad(y, x, grad_outputs=anb.tensor(dense), is_grads_batched=True)
    finally:
        numba.set_num_threads(previous)
    h = np.tanh(w1.numpy() @ x.numpy())
    out = np.tanh(w2.numpy() @ h)
    closed = ((1 - out**2)[:, None] * w2.numpy()) @ ((1 - h**2)[:, None] * w1.numpy())
    return jac.numpy(), vjps.numpy(), closed, dense @ closed


@pytest.mark.parametrize("choice", ["own", "blas"])  # ops._gemm's kernel, SciPy's BLAS
def test_batched_jacobian_through_the_split_gemm_one_and_two_threads_identical(
    monkeypatch, choice
):
    # 128 x 256 @ 256 x 128, the dense GEMM of the second VJP, is split.
    monkeypatch.setattr(config, "GEMM_KERNEL", choice)
    assert 128 * 256 * 128 >= _blas.SPLIT_MIN_WORK
    jac1, vjps1, closed, expected_vjps = _mlp_jacobian(1)
    jac2, vjps2, _, _ = _mlp_jacobian(min(2, numba.config.NUMBA_NUM_THREADS))
    np.testing.assert_array_equal(jac1, jac2)
    np.testing.assert_array_equal(vjps1, vjps2)
    np.testing.assert_allclose(jac1, closed, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(vjps1, expected_vjps, rtol=1e-10, atol=1e-12)


_FORK_SCRIPT = """
import multiprocessing, sys
import numba, numpy as np
import autograd_nb as anb
from autograd_nb.ops import _parallel, linalg

w = anb.tensor(np.random.default_rng(0).standard_normal((512, 256)))
x = anb.tensor(np.ones(256))
expected = (w @ x).numpy()
if sys.argv[1] == "threads started":
    linalg._matvec_blocks(w.numpy(), x.numpy(), np.empty(512))
started = _parallel.threads_started()

def child(queue):
    queue.put(((w @ x).numpy(), _parallel.threads_started()))

context = multiprocessing.get_context("fork")
queue = context.Queue()
process = context.Process(target=child, args=(queue,))
process.start()
got, child_started = queue.get(timeout=60)
process.join(60)
assert process.exitcode == 0, process.exitcode
assert (got == expected).all()
print(started, child_started)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() on this platform")
@pytest.mark.slow
@pytest.mark.parametrize("parent", ["forward only", "threads started"])
def test_matrix_vector_products_leave_a_forked_child_able_to_compute_them(parent):
    # GNU OpenMP terminates a forked child that starts a parallel region once its parent ran
    # one. A forward pass never starts numba's threads (the parent's stay unstarted), and a
    # child of a parent whose threads did start computes on its own thread.
    done = subprocess.run([sys.executable, "-c", _FORK_SCRIPT, parent], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(parent == "threads started"), "False"]


@pytest.mark.parametrize(
    "preset, expected",
    [
        ({}, ("PASSIVE", "3000")),  # GNU OpenMP spins briefly; other runtimes sleep at once
        ({"OMP_WAIT_POLICY": "ACTIVE"}, ("ACTIVE", None)),  # the user's policy, no spin added
        ({"GOMP_SPINCOUNT": "50"}, ("PASSIVE", "50")),
        ({"AUTOGRAD_NB_OMP_DEFAULTS": "0"}, ("None", "None")),  # opted out: nothing set
    ],
)
def test_openmp_wait_settings_set_at_import_keep_the_users(preset, expected):
    unset = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "AUTOGRAD_NB_OMP_DEFAULTS")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(preset)
    code = (
        "import os, autograd_nb; "
        "print(os.environ.get('OMP_WAIT_POLICY'), os.environ.get('GOMP_SPINCOUNT'))"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == [str(value) for value in expected]
