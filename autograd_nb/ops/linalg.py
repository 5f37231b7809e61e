"""Linear algebra: one batched-matmul primitive, ``(batch, m, k) @ (batch, k, n)``, and the
NumPy functions composed from it (matmul with its 1-D and batch-broadcasting rules, dot, outer,
einsum). The forward and the VJPs call BLAS's GEMM directly (the VJPs accumulating in place;
the batched ones split over numba's threads: see ``_blas``), the products' BLAS of
``_blas.PRODUCTS`` (``config.BLAS``), or, where ``_blas.own_kernel_preferred`` says so (an
AVX-512 CPU whose BLAS runs narrower kernels), ``_gemm``'s own kernel for every product wide
enough for its tiles. Small products and integer dtypes, which BLAS does not serve, go
through plain loops.

The composites record only shape ops, ``_bmm``, ``sum``, ``multiply`` and ``getitem``, so their
gradients (of any order) come from those ops' rules.
"""

import math

import numpy as np
from numba import njit, prange

from .. import config
from . import _broadcast, _gemm, _numpy_vjp, _rank_one
from ._blas import (
    SPLIT_MIN_WORK,
    THREAD_CONTROLS,
    ByAddress,
    blas_function,
    gemm_add,
    gemm_add_split,
    gemm_address,
    gemm_set,
    hold_blas_threads,
    hold_blas_threads_at,
    own_kernel,
    own_kernel_preferred,
    product_kernel,
    release_blas_threads,
    release_blas_threads_at,
)
from ._gemm import own_fits, own_gemm_add
from ._parallel import parallel_allowed, threads_started
from ._pointers import array_at
from .registry import (
    FUNCTIONS,
    ExecSpec,
    Op,
    VJPStrategy,
    call,
    call_view,
    cuda_twin,
    public,
    remember,
)

# Matrix-vector products (``W @ x``: one batch entry, one column) of
# ``config.MATVEC_SPLIT_MIN`` up to ``config.MATVEC_SPLIT_MAX`` multiply-adds run as blocks of
# rows over numba's threads (``_matvec``): below, a parallel region costs more than it saves;
# above, BLAS's kernel, which reads four rows at once, beats one row at a time, and OpenBLAS
# threads the largest itself (``_forward_blas``).

#: ``config.MATVEC_MAX_BLOCKS`` and ``config.SMALL_PRODUCT`` (at most this many multiply-adds
#: per batch entry run as plain loops), read once, at import: they are compiled in, and the
#: Python paths read these copies so that they agree with the compiled ones.
MATVEC_MAX_BLOCKS = config.MATVEC_MAX_BLOCKS
SMALL_PRODUCT = config.SMALL_PRODUCT


# The BLAS-sized products below take ``tiles``: the address of ``_gemm``'s own kernel where it
# does each product that fits it (``_blas.own_kernel``), 0 for BLAS; and ``gemm``: the address
# of BLAS's GEMM (``_blas.gemm_address``).


@njit(cache=True, nogil=True)
def _bmm_forward(a, b, out, tiles, gemm):
    for i in range(a.shape[0]):
        gemm_set(gemm, tiles, a[i], False, b[i], False, out[i])


# The VJPs add each product straight into the target (BLAS's beta = 1, ``gemm_add_at``), as
# the own kernel does: a product into a scratch buffer and then ``target += scratch`` cost a
# second pass over the target (784 x 512 float32 weight gradient of a batch of 256: 1,556 ->
# 1,309 us, docs/benchmarking.rst, "Where a compiled step's time goes").


@njit(cache=True, nogil=True)
def _bmm_vjp_a(gemm, g, b, grad_a, tiles, overwrite):
    # grad_a[i] += g[i] @ b[i].T (``gemm``: ``_blas.gemm_address``); with ``overwrite``,
    # grad_a[i] = ... (BLAS's beta = 0: the bits of adding into zeros)
    for i in range(g.shape[0]):
        if overwrite:
            gemm_set(gemm, tiles, g[i], False, b[i], True, grad_a[i])
        else:
            gemm_add(gemm, tiles, g[i], False, b[i], True, grad_a[i])


@njit(cache=True, nogil=True)
def _bmm_vjp_b(gemm, g, a, grad_b, tiles, overwrite):
    # grad_b[i] += a[i].T @ g[i] (``overwrite``: as ``_bmm_vjp_a``)
    for i in range(g.shape[0]):
        if overwrite:
            gemm_set(gemm, tiles, a[i], True, g[i], False, grad_b[i])
        else:
            gemm_add(gemm, tiles, a[i], True, g[i], False, grad_b[i])


@njit(cache=True, nogil=True)
def _one_hot_rows(rows, columns):
    """Whether every row of ``rows`` has at most one nonzero; if so ``columns[r]`` is row
    ``r``'s (-1: none). Stops at the first row with two, so a dense ``rows`` costs ~nothing."""
    for r in range(rows.shape[0]):
        row = rows[r]
        count = 0
        for j in range(row.size):  # a count, not a search: it vectorises
            count += row[j] != 0
        if count > 1:
            return False
        columns[r] = -1
        if count:
            j = 0
            while row[j] == 0:
                j += 1
            columns[r] = j
    return True


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def _all_finite(x):
    # 0 * inf and 0 * nan are nan, 0 * anything else 0; reassociating the sum (and only
    # that) lets it vectorise.
    total = 0.0
    for r in range(x.shape[0]):
        row = x[r]
        for j in range(row.size):
            total += row[j] * 0.0
    return total == 0.0


@njit(cache=True, nogil=True)
def _one_hot_add(x, y, transpose_y, out, columns):
    """``out += x @ y'`` (``y'``: ``y`` or ``y.T``) row by row where every row of ``x`` has at
    most one nonzero, and True; False (nothing written) otherwise.

    That is the Jacobian's case: the seed of ``jacobian`` (an identity) through elementwise
    VJPs reaches a matmul as one-hot rows, and ``x[r, j] * y'[j]`` replaces a row of the
    product, O(rows * columns) instead of O(rows * depth * columns). Checked on every call,
    for any ``x``. Same result as the GEMM: the other terms are exact zeros (with a
    non-finite ``y``, whose ``0 * inf`` is nan, it returns False and the GEMM runs).
    """
    if x.shape[0] <= 1 or not _one_hot_rows(x, columns) or not _all_finite(y):
        return False
    for r in range(out.shape[0]):
        j = columns[r]
        if j < 0:
            continue
        scale = x[r, j]
        row = out[r]
        if transpose_y:
            for c in range(row.size):
                row[c] += scale * y[c, j]
        else:
            source = y[j]
            for c in range(row.size):
                row[c] += scale * source[c]
    return True


@njit(cache=True, nogil=True)
def _product_add(gemm, tiles, x, y, transpose_y, out, columns, parallel):
    """``out += x @ y'`` (``y'``: ``y`` or ``y.T``): row by row where every row of ``x`` has at
    most one nonzero (``_one_hot_add``), else the GEMM split over numba's threads where
    ``parallel`` (see ``_blas.gemm_add_split``)."""
    if not _one_hot_add(x, y, transpose_y, out, columns):
        gemm_add_split(gemm, tiles, x, y, transpose_y, out, parallel)


@njit(cache=True, nogil=True)
def _stack_add(gemm, tiles, x, y, transpose_y, out, columns):
    """``_product_add`` on this thread alone, for the compiled executor's blocks of batch rows:
    one-hot rows row by row, else the own kernel where it fits, else BLAS (``gemm_set``) into
    a scratch buffer that is added to ``out``."""
    if _one_hot_add(x, y, transpose_y, out, columns):
        return
    if tiles != 0 and own_fits(out):
        own_gemm_add(x, False, y, transpose_y, out, tiles)
        return
    scratch = np.empty(out.shape, dtype=out.dtype)
    gemm_set(gemm, 0, np.ascontiguousarray(x), False, y, transpose_y, scratch)
    out += scratch


@njit(cache=True, nogil=True)
def _bmm_vjp_batched(gemm, tiles, k, g, factor, grad, parallel):
    """Both VJPs of ``_bmm`` for a stack of ``vectors`` grad_outputs ``g (vectors, batch, m,
    n)``, accumulated into ``grad`` (C-contiguous) by BLAS, with no copies: ``factor`` is
    ``b`` for ``k == 0`` (``grad[v, i] += g[v, i] @ b[i].T``), ``a`` for ``k == 1``
    (``grad[v, i] += a[i].T @ g[v, i]``).

    Where the vectors' rows line up with one stride (one batch entry, or one row / column
    per entry: the Jacobian of ``W @ x``) they are stacked into one product per batch entry,
    ``(vectors * m, n) @ b[i].T`` or ``(vectors, m) @ a[i]`` (see ``_product_add``);
    otherwise one product per vector and entry. Over numba's threads where ``parallel``,
    else on this thread: the same bits.
    """
    vectors, batch, m, n = g.shape
    columns = np.empty(vectors * m, dtype=np.int64)
    if k == 0:
        if batch == 1:
            _product_add(gemm, tiles, g.reshape((vectors * m, n)), factor[0], True,
                         grad.reshape((vectors * m, grad.shape[3])), columns, parallel)
        elif m == 1:
            for i in range(batch):
                _product_add(gemm, tiles, g[:, i, 0, :], factor[i], True, grad[:, i, 0, :],
                             columns, parallel)
        else:
            _gemm_add_each(gemm, tiles, k, g, factor, grad, parallel)
    elif n == 1:
        for i in range(batch):
            _product_add(gemm, tiles, g[:, i, :, 0], factor[i], False, grad[:, i, :, 0],
                         columns, parallel)
    else:
        _gemm_add_each(gemm, tiles, k, g, factor, grad, parallel)


@njit(cache=True, nogil=True)
def _bmm_vjp_rows(gemm, tiles, k, g, factor, grad):
    """``_bmm_vjp_batched`` for one block of rows of a batch, on this thread: the stacked
    cases as one product (``_stack_add``), the others one product per row and entry."""
    vectors, batch, m, n = g.shape
    columns = np.empty(vectors * m, dtype=np.int64)
    if k == 0 and batch == 1:
        _stack_add(gemm, tiles, g.reshape((vectors * m, n)), factor[0], True,
                   grad.reshape((vectors * m, grad.shape[3])), columns)
    elif k == 0 and m == 1:
        for i in range(batch):
            _stack_add(gemm, tiles, g[:, i, 0, :], factor[i], True, grad[:, i, 0, :], columns)
    elif k == 1 and n == 1:
        for i in range(batch):
            _stack_add(gemm, tiles, g[:, i, :, 0], factor[i], False, grad[:, i, :, 0],
                       columns)
    elif k == 0:
        for v in range(vectors):
            _bmm_vjp_a(gemm, g[v], factor, grad[v], tiles, False)
    else:
        for v in range(vectors):
            _bmm_vjp_b(gemm, g[v], factor, grad[v], tiles, False)


@njit(cache=True, nogil=True)
def _gemm_add_one(gemm, tiles, k, g, factor, grad, e):
    """Product ``e`` (vector ``e // batch``, entry ``e % batch``) of ``_gemm_add_each``."""
    batch = g.shape[1]
    v = e // batch
    i = e % batch
    if k == 0:
        gemm_add(gemm, tiles, g[v, i], False, factor[i], True, grad[v, i])
    else:
        gemm_add(gemm, tiles, factor[i], True, g[v, i], False, grad[v, i])


@njit(cache=True, nogil=True)
def _gemm_add_each(gemm, tiles, k, g, factor, grad, parallel):
    """One GEMM per vector and batch entry, as a ``prange`` over them where ``parallel`` and
    they add up to enough work (each writes its own ``grad[v, i]``: the same bits at every
    thread count, and on this thread)."""
    vectors, batch, m, n = g.shape
    inner = factor.shape[2] if k == 0 else factor.shape[1]
    count = vectors * batch
    if parallel and count > 1 and count * m * inner * n >= SPLIT_MIN_WORK:
        _gemm_add_each_parallel(gemm, tiles, k, g, factor, grad)
    else:
        for e in range(count):
            _gemm_add_one(gemm, tiles, k, g, factor, grad, e)


@njit(cache=True, nogil=True, parallel=True)
def _gemm_add_each_parallel(gemm, tiles, k, g, factor, grad):
    for e in prange(g.shape[0] * g.shape[1]):
        _gemm_add_one(gemm, tiles, k, g, factor, grad, e)


@njit(cache=True, nogil=True)
def _bmm_vjp_batched_loops(k, g, factor, grad):
    """``_bmm_vjp_batched`` as plain loops, for products too small for BLAS and integers."""
    for v in range(g.shape[0]):
        if k == 0:
            _bmm_vjp_a_loops(g[v], factor, grad[v])
        else:
            _bmm_vjp_b_loops(g[v], factor, grad[v])


@njit(cache=True, nogil=True)
def _rank_one_forward(a, b, out):
    # ``out[i] = a[i] @ b[i]`` for an inner dimension of 1: a vectorised row loop (NumPy's
    # broadcast multiply runs this pattern at a third of the speed).
    for i in range(out.shape[0]):
        for r in range(out.shape[1]):
            x = a[i, r, 0]
            source = b[i, 0]
            row = out[i, r]
            for c in range(row.size):
                row[c] = x * source[c]


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _dot_rows(a, x, out, start, stop):
    # ``out[r] = a[r] @ x`` for rows ``start:stop``. Reassociating lets each row's sum
    # vectorise; a row's sum is the same whatever block it falls in, so every thread count
    # gives the same bits.
    for r in range(start, stop):
        row = a[r]
        total = out.dtype.type(0)
        for p in range(x.size):
            total += row[p] * x[p]
        out[r] = total


@njit(cache=True, nogil=True, parallel=True)
def _matvec_blocks(a, x, out):
    """``out = a @ x`` (a matrix and a vector) in blocks of rows over numba's threads."""
    rows = a.shape[0]
    blocks = max(1, min(MATVEC_MAX_BLOCKS, rows // 32))
    for q in prange(blocks):
        _dot_rows(a, x, out, rows * q // blocks, rows * (q + 1) // blocks)


def _split_matvec(a, b):
    """Whether ``_bmm(a, b)`` is a float matrix-vector product of the size ``_matvec``
    serves (``config.MATVEC_SPLIT_MIN`` to ``MATVEC_SPLIT_MAX`` multiply-adds)."""
    return (a.shape[0] == 1 and b.shape[2] == 1 and a.dtype.kind == "f"
            and config.MATVEC_SPLIT_MIN <= a.shape[1] * a.shape[2] < config.MATVEC_SPLIT_MAX)


def _matvec(a, x, out):
    """``out = a @ x``: in blocks of rows over numba's threads where they already run in this
    process, else on this thread; the same bits either way (each row is one ``_dot_rows``).

    A forward pass never starts the threads itself: once GNU OpenMP has run a parallel region,
    a child ``fork()``ed from the process (``multiprocessing``'s default on Linux) is
    terminated when it starts one. So a program that only runs forward passes stays safe to
    fork, as it was when BLAS did these products; and a child forked after the threads
    started keeps to its own thread here.
    """
    if threads_started():
        _matvec_blocks(a, x, out)
    else:
        _dot_rows(a, x, out, 0, a.shape[0])


@njit(cache=True, nogil=True)
def _bmm_forward_loops(a, b, out):
    batch, m, k = a.shape
    n = b.shape[2]
    for i in range(batch):
        for r in range(m):
            for c in range(n):
                out[i, r, c] = 0
            for p in range(k):
                x = a[i, r, p]
                for c in range(n):
                    out[i, r, c] += x * b[i, p, c]


@njit(cache=True, nogil=True)
def _bmm_vjp_a_loops(g, b, grad_a):
    batch, m, n = g.shape
    k = b.shape[1]
    for i in range(batch):
        for r in range(m):
            for p in range(k):
                total = grad_a[i, r, p]
                for c in range(n):
                    total += g[i, r, c] * b[i, p, c]
                grad_a[i, r, p] = total


@njit(cache=True, nogil=True)
def _bmm_vjp_b_loops(g, a, grad_b):
    batch, m, n = g.shape
    k = a.shape[2]
    for i in range(batch):
        for r in range(m):
            for p in range(k):
                x = a[i, r, p]
                for c in range(n):
                    grad_b[i, p, c] += x * g[i, r, c]


def _blas(dtype, m, k, n):
    return dtype.kind == "f" and m * k * n > SMALL_PRODUCT


_INT64 = np.empty(0, dtype=np.int64)

#: The paths of ``BatchedMatmul.forward`` (``_forward_path``), also its forward driver's.
_EMPTY, _ZEROS, _RANK_ONE, _MATVEC, _BLAS, _LOOPS = range(6)


def _forward_path(a, b):
    """Which kernel ``_bmm``'s forward runs for ``a (batch, m, k) @ b (batch, k, n)``."""
    if not (a.shape[0] and a.shape[1] and b.shape[2]):
        return _EMPTY
    if a.shape[2] == 0:
        return _ZEROS
    if a.shape[2] == 1:  # rank one (``outer``): one product per element, as NumPy's
        return _RANK_ONE
    if _split_matvec(a, b):
        return _MATVEC
    if _blas(a.dtype, *a.shape[1:], b.shape[2]):
        return _BLAS
    return _LOOPS


@njit(cache=True, nogil=True)
def _forward_small(path, a, b, out):
    """The paths of ``_bmm``'s forward that every dtype takes (no BLAS)."""
    if path == _ZEROS:
        for i in range(out.shape[0]):
            out[i] = 0
    elif path == _RANK_ONE:
        _rank_one_forward(a, b, out)
    elif path == _LOOPS:
        _bmm_forward_loops(a, b, out)


@njit(cache=True, nogil=True)
def _bmm_forward_driver(operands, ints, floats, like):
    """``_bmm``'s forward driver (``Op.forward_spec``) for floats: ``ints`` is ``[path, batch,
    m, inner, n, tiles, get, set, gemm]``, ``path`` as ``_forward_path``, ``get``/``set``
    OpenBLAS's thread controls (``_blas.THREAD_CONTROLS``), held at one thread below
    ``SPLIT_MIN_WORK`` as ``_forward_blas`` does (the thread count changes BLAS's bits),
    ``gemm`` BLAS's (``_blas.gemm_address``). A matrix-vector product runs on this thread:
    ``_matvec``'s blocks give the same bits."""
    path, batch, m, inner, n = ints[0], ints[1], ints[2], ints[3], ints[4]
    if path == _MATVEC:
        _dot_rows(array_at(operands[0], m * inner, like).reshape((m, inner)),
                  array_at(operands[1], inner, like), array_at(operands[2], m, like), 0, m)
        return
    a = array_at(operands[0], batch * m * inner, like).reshape((batch, m, inner))
    b = array_at(operands[1], batch * inner * n, like).reshape((batch, inner, n))
    out = array_at(operands[2], batch * m * n, like).reshape((batch, m, n))
    if path != _BLAS:
        _forward_small(path, a, b, out)
        return
    held = 0
    if batch * m * inner * n < SPLIT_MIN_WORK:
        held = hold_blas_threads_at(ints[6], ints[7])
    _bmm_forward(a, b, out, ints[5], ints[8])
    release_blas_threads_at(ints[7], held)


@njit(cache=True, nogil=True)
def _bmm_forward_int_driver(operands, ints, floats, like):
    """``_bmm``'s forward driver for integers (``ints`` as ``_bmm_forward_driver``'s)."""
    path, batch, m, inner, n = ints[0], ints[1], ints[2], ints[3], ints[4]
    a = array_at(operands[0], batch * m * inner, like).reshape((batch, m, inner))
    b = array_at(operands[1], batch * inner * n, like).reshape((batch, inner, n))
    out = array_at(operands[2], batch * m * n, like).reshape((batch, m, n))
    _forward_small(path, a, b, out)


@njit(cache=True, nogil=True)
def _bmm_forward_bool_driver(operands, ints, floats, like):
    """``_bmm``'s forward driver for booleans, computed as int64 (``prepare``'s operands) and
    given as bool: a positive count of products is True."""
    path, batch, m, inner, n = ints[0], ints[1], ints[2], ints[3], ints[4]
    a = array_at(operands[0], batch * m * inner, _INT64).reshape((batch, m, inner))
    b = array_at(operands[1], batch * inner * n, _INT64).reshape((batch, inner, n))
    counts = np.empty((batch, m, n), dtype=np.int64)
    _forward_small(path, a, b, counts)
    out = array_at(operands[2], batch * m * n, like)
    flat = counts.reshape(-1)
    for i in range(out.size):
        out[i] = flat[i] != 0


def _numba_dot(a, b, out):
    """``np.dot(a, b, out)`` as numba compiles it for matrices (``m, k, n > 0``; ``a`` and
    ``b`` C-ordered, or Fortran-ordered as a transposed C array is), from Python: the same
    BLAS call with the same arguments (numba's ``dot_3_mm``: a dot product, a matrix-vector
    product either way, or the product as its transpose in Fortran order, ``out.T = b.T @
    a.T``, an operand in the other order transposed), so the same bits, and nothing to
    compile. (An array in both orders has a dimension of 1, where numba's choice of order
    changes no value.)"""
    (m, k), n = a.shape, b.shape[1]
    fortran_a, fortran_b = not a.flags.c_contiguous, not b.flags.c_contiguous
    by = ByAddress(a.dtype)
    one, zero, step = by.scalar(1.0), by.scalar(0.0), by.int(1)
    if m == 1 and n == 1:
        out[0, 0] = blas_function("dot", a.dtype)(by.int(k), a.ctypes.data, step,
                                                   b.ctypes.data, step)
    elif n == 1:
        rows, columns = (m, k) if fortran_a else (k, m)
        blas_function("gemv", a.dtype)(by.char(b"n" if fortran_a else b"t"), by.int(rows),
                                        by.int(columns), one, a.ctypes.data, by.int(rows),
                                        b.ctypes.data, step, zero, out.ctypes.data, step)
    elif m == 1:
        rows, columns = (k, n) if fortran_b else (n, k)
        blas_function("gemv", a.dtype)(by.char(b"t" if fortran_b else b"n"), by.int(rows),
                                        by.int(columns), one, b.ctypes.data, by.int(rows),
                                        a.ctypes.data, step, zero, out.ctypes.data, step)
    else:
        blas_function("gemm", a.dtype)(
            by.char(b"t" if fortran_b else b"n"), by.char(b"t" if fortran_a else b"n"),
            by.int(n), by.int(m), by.int(k), one, b.ctypes.data, by.int(k if fortran_b else n),
            a.ctypes.data, by.int(m if fortran_a else k), zero, out.ctypes.data, by.int(n))


def numba_dot(a, b):
    """``np.dot(a, b)`` of two matrices as numba compiles it (``_numba_dot``; zeros where a
    dimension is 0), from Python: tier 0's twin of a kernel's ``np.dot``."""
    (m, k), n = a.shape, b.shape[1]
    out = np.zeros((m, n), dtype=a.dtype)
    if m and k and n:
        _numba_dot(a, b, out)
    return out


def _one_hot_add_numpy(x, y, transpose_y, out):
    """``_one_hot_add`` in NumPy: ``out[r] += x[r, j] * y'[j]`` for the one nonzero ``j`` of
    each row of ``x`` where every row has at most one and ``y`` is finite, and True; else
    False, nothing written."""
    if x.shape[0] <= 1:
        return False
    nonzero = x != 0  # (nan counts, as in the kernel's count)
    counts = np.count_nonzero(nonzero, axis=1)
    if counts.max(initial=0) > 1 or not np.isfinite(y).all():
        return False
    rows = np.flatnonzero(counts)
    columns = np.argmax(nonzero[rows], axis=1)
    source = y.T if transpose_y else y
    out[rows] += x[rows, columns][:, None] * source[columns]
    return True


def _stack_add_numpy(x, y, transpose_y, out):
    """``_stack_add`` in NumPy, BLAS's kernels through ctypes (the own kernel's products
    compile: ``has_vjp_numpy_rows``)."""
    if _one_hot_add_numpy(x, y, transpose_y, out):
        return
    scratch = np.empty(out.shape, dtype=out.dtype)
    _numpy_vjp.gemm_set(np.ascontiguousarray(x), False, y, transpose_y, scratch)
    out += scratch


def _bmm_vjp_rows_numpy(k, blas, g, factor, target):
    """``_bmm_vjp_rows`` (``blas``) or ``_bmm_vjp_batched_loops`` in NumPy, by BLAS's
    kernels: ``g (rows, batch, m, n)``, ``factor`` the other operand, ``target`` per row."""
    rows, batch, m, n = g.shape
    if blas and k == 0 and batch == 1:
        _stack_add_numpy(g.reshape((rows * m, n)), factor[0], True,
                         target.reshape((rows * m, target.shape[-1])))
    elif blas and k == 0 and m == 1:
        for i in range(batch):
            _stack_add_numpy(g[:, i, 0, :], factor[i], True, target[:, i, 0, :])
    elif blas and k == 1 and n == 1:
        for i in range(batch):
            _stack_add_numpy(g[:, i, :, 0], factor[i], False, target[:, i, :, 0])
    else:
        for v in range(rows):
            for i in range(batch):
                _add_product_numpy(k, blas, g[v, i], factor[i], target[v, i])


def _add_product_numpy(k, blas, g, factor, target):
    """One product of ``_bmm``'s VJP ``k`` in NumPy: ``target += g @ factor.T`` (k 0) or
    ``factor.T @ g`` (k 1), by BLAS's GEMM adding into the target (through ctypes, the same
    call with the same arguments), or as the loops, in their order."""
    if blas and k == 0:
        _numpy_vjp.gemm_add(g, False, factor, True, target)
    elif blas:
        _numpy_vjp.gemm_add(factor, True, g, False, target)
    elif k == 0:  # (as ``_bmm_vjp_a_loops``: the sum over c in the dtype, in turn)
        for c in range(g.shape[1]):
            target += g[:, c, None] * factor[None, :, c]
    else:  # (``_bmm_vjp_b_loops``: over r in turn)
        for r in range(g.shape[0]):
            target += factor[r, :, None] * g[r, None, :]


def _forward_blas(a, b, out):
    """``_bmm_forward``, on one thread below ``SPLIT_MIN_WORK`` multiply-adds.

    Above it, OpenBLAS's own threads, as the non-batched VJPs (the compiled executor's) use
    them. Below, OpenBLAS would still wake its threads for a matrix-vector product (at two
    threads, 512 x 256 was one before ``_matvec`` took those), and a woken thread spins on,
    taking a core from the numba loops of the backward that follows.
    """
    tiles = own_kernel(a.dtype)
    if a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2] >= SPLIT_MIN_WORK:
        _bmm_forward(a, b, out, tiles, gemm_address(a.dtype))
        return
    previous = hold_blas_threads()
    try:
        _bmm_forward(a, b, out, tiles, gemm_address(a.dtype))
    finally:
        release_blas_threads(previous)


def _add_vjp_a(g, b, grad_a):
    """``grad_a[i] += g[i] @ b[i].T`` over the batch, through BLAS or loops by size."""
    m, n = g.shape[1:]
    if _blas(g.dtype, m, b.shape[1], n):
        _bmm_vjp_a(gemm_address(g.dtype), g, b, grad_a, own_kernel(g.dtype), False)
    else:
        _bmm_vjp_a_loops(g, b, grad_a)


def _add_vjp_b(g, a, grad_b):
    """``grad_b[i] += a[i].T @ g[i]`` over the batch, through BLAS or loops by size."""
    m, n = g.shape[1:]
    if _blas(g.dtype, m, a.shape[2], n):
        _bmm_vjp_b(gemm_address(g.dtype), g, a, grad_b, own_kernel(g.dtype), False)
    else:
        _bmm_vjp_b_loops(g, a, grad_b)


@njit(cache=True, nogil=True)
def _bmm_driver(operands, ints, floats, like):
    """The compiled executor's driver of ``_bmm``'s VJPs: ``ints`` is ``[k, batch, m, inner,
    n, blas, tiles, gemm, set]`` (``tiles``: see ``_bmm_forward``; ``gemm``: BLAS's, by
    ``_blas.gemm_address``; ``set``: 1 where the driver writes the target instead of adding
    into it, ``Op.exec_set_spec``); operands the gradient, the other factor and the
    target."""
    k, batch, m, inner, n, blas = ints[0], ints[1], ints[2], ints[3], ints[4], ints[5]
    tiles, gemm, overwrite = ints[6], ints[7], ints[8]
    g = array_at(operands[0], batch * m * n, like).reshape((batch, m, n))
    if k == 0:
        b = array_at(operands[1], batch * inner * n, like).reshape((batch, inner, n))
        grad_a = array_at(operands[2], batch * m * inner, like).reshape((batch, m, inner))
        if blas:
            _bmm_vjp_a(gemm, g, b, grad_a, tiles, overwrite != 0)
            return
        if overwrite:
            grad_a[...] = 0
        _bmm_vjp_a_loops(g, b, grad_a)
    else:
        a = array_at(operands[1], batch * m * inner, like).reshape((batch, m, inner))
        grad_b = array_at(operands[2], batch * inner * n, like).reshape((batch, inner, n))
        if blas:
            _bmm_vjp_b(gemm, g, a, grad_b, tiles, overwrite != 0)
            return
        if overwrite:
            grad_b[...] = 0
        _bmm_vjp_b_loops(g, a, grad_b)


@njit(cache=True, nogil=True)
def _bmm_rows_driver(operands, ints, floats, like):
    """``_bmm_driver`` for a block of batch rows (``Op.exec_rows_spec``): ``operands[3]`` rows
    of gradients and targets, stacked into one product where they line up
    (``_bmm_vjp_rows``)."""
    k, batch, m, inner, n = ints[0], ints[1], ints[2], ints[3], ints[4]
    tiles, gemm = ints[6], ints[7]
    rows = operands[3]
    g = array_at(operands[0], rows * batch * m * n, like).reshape((rows, batch, m, n))
    if k == 0:
        factor = array_at(operands[1], batch * inner * n, like).reshape((batch, inner, n))
        grad = array_at(operands[2], rows * batch * m * inner, like)
        grad = grad.reshape((rows, batch, m, inner))
    else:
        factor = array_at(operands[1], batch * m * inner, like).reshape((batch, m, inner))
        grad = array_at(operands[2], rows * batch * inner * n, like)
        grad = grad.reshape((rows, batch, inner, n))
    stacked = rows if (batch == 1 or (m if k == 0 else n) == 1) else 1
    if stacked * m * inner * n > SMALL_PRODUCT:
        _bmm_vjp_rows(gemm, tiles, k, g, factor, grad)
    else:
        _bmm_vjp_batched_loops(k, g, factor, grad)


@njit(cache=True, nogil=True)
def _joint_entries(g, a, b, out, overwrite):
    """``_rank_one.joint_add`` per batch entry: ``g (batch, m, n)``, ``a (batch, m, 1)``,
    ``b (batch, 1, n)``, ``out (batch, n)``."""
    for i in range(g.shape[0]):
        _rank_one.joint_add(g[i], a[i, :, 0], b[i, 0], out[i], overwrite)


@njit(cache=True, nogil=True)
def _joint_driver(operands, ints, floats, like):
    """The compiled executor's driver of ``_bmm``'s joint VJP (``RankOneVJPs.joint``):
    ``ints`` is ``[batch, n, overwrite]``; operands the gradient, both factors and the
    target."""
    batch, n, overwrite = ints[0], ints[1], ints[2]
    g = array_at(operands[0], batch * n * n, like).reshape((batch, n, n))
    a = array_at(operands[1], batch * n, like).reshape((batch, n, 1))
    b = array_at(operands[2], batch * n, like).reshape((batch, 1, n))
    out = array_at(operands[3], batch * n, like).reshape((batch, n))
    _joint_entries(g, a, b, out, overwrite != 0)


@njit(cache=True, nogil=True)
def _pair_entries(g, a, b, out_a, out_b, overwrite_a, overwrite_b):
    """``_rank_one.pair_add`` per batch entry: ``g (batch, m, n)``, ``a (batch, m, 1)``,
    ``b (batch, 1, n)``, ``out_a (batch, m)``, ``out_b (batch, n)``."""
    for i in range(g.shape[0]):
        _rank_one.pair_add(g[i], a[i, :, 0], b[i, 0], out_a[i], out_b[i], overwrite_a,
                           overwrite_b)


@njit(cache=True, nogil=True)
def _pair_driver(operands, ints, floats, like):
    """The driver of ``_bmm``'s split VJP (``RankOneVJPs.split``: ``outer(x, y)``):
    ``ints`` is ``[batch, m, n, overwrite_a, overwrite_b]``; operands the gradient, both
    factors and both targets."""
    batch, m, n = ints[0], ints[1], ints[2]
    g = array_at(operands[0], batch * m * n, like).reshape((batch, m, n))
    a = array_at(operands[1], batch * m, like).reshape((batch, m, 1))
    b = array_at(operands[2], batch * n, like).reshape((batch, 1, n))
    out_a = array_at(operands[3], batch * m, like).reshape((batch, m))
    out_b = array_at(operands[4], batch * n, like).reshape((batch, n))
    _pair_entries(g, a, b, out_a, out_b, ints[3] != 0, ints[4] != 0)


@njit(cache=True, nogil=True)
def _dot_joint_driver(operands, ints, floats, like):
    """The driver of ``_bmm``'s joint VJP of a dot product of one tensor with itself
    (``_rank_one.joint_scale_add``): ``ints`` is ``[batch, K, overwrite]``; operands the
    gradient ``(batch,)``, both factors and the target."""
    batch, n, overwrite = ints[0], ints[1], ints[2]
    g = array_at(operands[0], batch, like)
    x = array_at(operands[1], batch * n, like).reshape((batch, n))
    out = array_at(operands[3], batch * n, like).reshape((batch, n))
    _rank_one.joint_scale_add(g, x, out, overwrite != 0)


class RankOneVJPs(VJPStrategy):
    """``_bmm``'s VJPs of a rank-one product or a dot product in one pass over the gradient
    (``_rank_one``). Joint, of one tensor with itself: a rank-one product (``outer(x, x)``:
    a column (n, 1) times a row (1, n)) or a dot product (``einsum("ij,ij->", x, x)``: a row
    (1, K) times a column (K, 1)). Split, of two tensors (``outer(x, y)``), each into its own
    gradient (``_rank_one.pair_add``)."""

    @staticmethod
    def _joint_kind(a, b):
        if a.shape[2] == 1 and a.shape[1] == b.shape[2]:
            return "outer"
        if a.shape[1] == 1 and b.shape[2] == 1:
            return "dot"
        return None

    def joint(self, op, ks, node):
        a, b = node.saved_inputs
        return (ks == (0, 1) and a.dtype == b.dtype == node.dtype and a.dtype.kind == "f"
                and a.size > 0 and self._joint_kind(a, b) is not None)

    def vjp_joint(self, op, ks, grad_output, saved, attrs, grad_input):
        self._joint(_joint_entries, _rank_one.joint_scale_add, grad_output, saved, grad_input)

    def vjp_joint_numpy(self, op, ks, grad_output, saved, attrs, grad_input):
        def entries(g, a, b, out, overwrite):
            for i in range(g.shape[0]):
                _rank_one.joint_add_numpy(g[i], a[i, :, 0], b[i, 0], out[i], overwrite)

        self._joint(entries, _rank_one.joint_scale_add_numpy, grad_output, saved, grad_input)

    def _joint(self, outer_entries, dot, grad_output, saved, grad_input):
        a, b = saved[0], saved[1]
        batch = a.shape[0]
        g = np.ascontiguousarray(grad_output, dtype=a.dtype)
        if self._joint_kind(a, b) == "outer":
            n = a.shape[1]
            target, copied = _target_view(grad_input, (batch, n), a.dtype)
            outer_entries(g.reshape((batch, n, n)), a, b, target, False)
        else:
            n = a.shape[2]
            target, copied = _target_view(grad_input, (batch, n), a.dtype)
            dot(g.reshape(batch), a.reshape((batch, n)), target, False)
        if copied:
            grad_input += target.reshape(grad_input.shape)

    def exec_joint_spec(self, op, ks, node, overwrite):
        a, b = node.saved_inputs
        if self._joint_kind(a, b) == "outer":
            return ExecSpec(_joint_driver, (a, b), (a.shape[0], a.shape[1], int(overwrite)),
                            ())
        return ExecSpec(_dot_joint_driver, (a, b), (a.shape[0], a.shape[2], int(overwrite)),
                        ())

    def split(self, op, node):
        a, b = node.saved_inputs
        return (a.dtype == b.dtype == node.dtype and a.dtype.kind == "f" and a.size > 0
                and b.size > 0 and a.shape[2] == 1)

    def vjp_split(self, op, grad_output, saved, attrs, grad_inputs):
        self._split(_pair_entries, grad_output, saved, grad_inputs)

    def vjp_split_numpy(self, op, grad_output, saved, attrs, grad_inputs):
        def entries(g, a, b, out_a, out_b, overwrite_a, overwrite_b):
            for i in range(g.shape[0]):
                _rank_one.pair_add_numpy(g[i], a[i, :, 0], b[i, 0], out_a[i], out_b[i],
                                         overwrite_a, overwrite_b)

        self._split(entries, grad_output, saved, grad_inputs)

    def _split(self, entries, grad_output, saved, grad_inputs):
        a, b = saved[0], saved[1]
        batch, m, n = a.shape[0], a.shape[1], b.shape[2]
        g = np.ascontiguousarray(grad_output, dtype=a.dtype).reshape((batch, m, n))
        target_a, copied_a = _target_view(grad_inputs[0], (batch, m), a.dtype)
        target_b, copied_b = _target_view(grad_inputs[1], (batch, n), a.dtype)
        entries(g, a, b, target_a, target_b, False, False)
        for grad_input, target, copied in ((grad_inputs[0], target_a, copied_a),
                                           (grad_inputs[1], target_b, copied_b)):
            if copied:
                grad_input += target.reshape(grad_input.shape)

    def exec_split_spec(self, op, node, overwrites):
        a, b = node.saved_inputs
        ints = (a.shape[0], a.shape[1], b.shape[2]) + tuple(int(o) for o in overwrites)
        return ExecSpec(_pair_driver, (a, b), ints, ())


@cuda_twin("linalg", "BatchedMatmul")
class BatchedMatmul(Op):
    """``_bmm(a, b)``: ``a (batch, m, k) @ b (batch, k, n)``, the primitive of this family.

    With the attribute ``views=(a_shape, b_shape, out_shape)`` the operands may come in any
    shape of the same size: the op reads them as ``a_shape`` and ``b_shape`` (views of the
    C-contiguous buffers, no copy) and gives its result in ``out_shape``, and its VJPs hand
    gradients back in the operands' own shapes. That is how ``matmul``, ``dot``, ``outer``
    and ``einsum`` record one node per product instead of a product between reshapes.
    """

    name = "_bmm"
    family = "linalg"
    n_inputs = 2
    saves = (0, 1)
    method = False
    vjp_strategy = RankOneVJPs()

    def __init__(self):
        # The attrs per operand layouts and views: a program repeats its products, and a hit
        # skips ``prepare`` (and gives the plan cache the same attrs object each step).
        self._run_cache = {}
        super().__init__()

    def _run(self, arrays, attrs):
        key = None
        if len(arrays) == 2 and len(attrs) == ("views" in attrs):
            a, b = arrays
            views = attrs.get("views")
            if type(a) is np.ndarray and type(b) is np.ndarray:
                key = (a.shape, a.strides, a.dtype, b.shape, b.strides, b.dtype, views)
                try:
                    found = self._run_cache.get(key)
                except TypeError:  # views that do not hash (lists): no caching
                    found = key = None
                if found is not None:
                    if views is not None:
                        views = found["views"]
                        arrays = [a.reshape(views[0]), b.reshape(views[1])]
                    return arrays, found, self.forward(arrays, found)
        prepared, attrs = self.prepare(arrays, attrs)
        output = self.forward(prepared, attrs)
        if key is not None and all(
            p.dtype == v.dtype and v.flags.c_contiguous for p, v in zip(prepared, arrays)
        ):
            remember(self._run_cache, key, attrs)  # prepare took the buffers as they are
        return prepared, attrs, output

    def prepare(self, values, attrs):
        a, b = (np.asarray(v) for v in values)
        dtype = np.result_type(a, b)
        if dtype.kind == "b":
            compute = np.dtype(np.int64)  # OR of ANDs: a positive count of products
        elif dtype.kind in "iu":
            compute = dtype
        elif dtype.kind == "c":
            compute = dtype  # (NumPy's complex products: docs/complex.rst)
        else:
            compute = dtype if dtype in (np.float32, np.float64) else np.dtype(np.float64)
            dtype = compute
        a = np.asarray(a, dtype=compute, order="C")
        b = np.asarray(b, dtype=compute, order="C")
        prepared = {"dtype": dtype}
        views = attrs.get("views")
        if views is not None:
            a, b, prepared = _read_as_views(a, b, views, prepared)
        if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
            raise ValueError(
                f"_bmm needs (batch, m, k) and (batch, k, n), got {a.shape}, {b.shape}"
            )
        if views is not None and _size(views[2]) != a.shape[0] * a.shape[1] * b.shape[2]:
            raise ValueError(f"_bmm: the result's view {views[2]} does not hold "
                             f"{(a.shape[0], a.shape[1], b.shape[2])}")
        return [a, b], prepared

    def forward(self, arrays, attrs):
        a, b = arrays
        if a.dtype.kind == "c":  # NumPy's product (BLAS's zgemm), in both tiers
            out = np.matmul(a, b)
            views = attrs.get("views")
            return out if views is None else out.reshape(views[2])
        out = np.empty((a.shape[0], a.shape[1], b.shape[2]), dtype=a.dtype)
        path = _forward_path(a, b)
        if path == _ZEROS:
            out[...] = 0
        elif path == _RANK_ONE:
            _rank_one_forward(a, b, out)
        elif path == _MATVEC:
            _matvec(a[0], b[0, :, 0], out[0, :, 0])
        elif path == _BLAS:
            _forward_blas(a, b, out)
        elif path == _LOOPS:
            _bmm_forward_loops(a, b, out)
        views = attrs.get("views")
        if views is not None:
            out = out.reshape(views[2])
        return out if out.dtype == attrs["dtype"] else out.astype(attrs["dtype"])

    def forward_numpy(self, arrays, attrs):
        # ``forward``'s paths in their order of operations; not ``_matvec``'s reassociated
        # (vectorised) sums or the own AVX-512 tiles (``_gemm.own_fits``): those compile.
        a, b = arrays
        path = _forward_path(a, b)
        own_tiles = path == _BLAS and own_kernel_preferred() and _gemm.own_fits_shape(
            a.shape[1], b.shape[2], a.dtype.itemsize)
        if a.dtype.kind != "f" or path == _MATVEC or own_tiles:
            return None
        out = np.zeros((a.shape[0], a.shape[1], b.shape[2]), dtype=a.dtype)
        if path == _RANK_ONE:
            np.multiply(a, b, out=out)
        elif path == _LOOPS:
            for p in range(a.shape[2]):  # (as ``_bmm_forward_loops``: p outermost)
                out += a[:, :, p : p + 1] * b[:, p : p + 1, :]
        elif path == _BLAS:
            previous = None
            if a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2] < SPLIT_MIN_WORK:
                previous = hold_blas_threads()  # (as ``_forward_blas``)
            try:
                for i in range(a.shape[0]):
                    _numpy_vjp.gemm_set(a[i], False, b[i], False, out[i])
            finally:
                release_blas_threads(previous)
        views = attrs.get("views")
        return out if views is None else out.reshape(views[2])

    def forward_spec(self, arrays, attrs, output):
        # (The drivers read flat buffers: the views need nothing of them.)
        a, b = arrays
        if a.dtype.kind == "c":
            return None  # (NumPy's complex product: the program runs eagerly)
        path = _forward_path(a, b)
        batch, m, inner = a.shape
        ints = [path, batch, m, inner, b.shape[2], 0, *THREAD_CONTROLS]
        if output.dtype == np.bool_:
            return _bmm_forward_bool_driver, ints, ()
        if a.dtype.kind != "f":
            return _bmm_forward_int_driver, ints, ()
        if path == _BLAS:
            ints[5] = own_kernel(a.dtype)  # chosen when recorded, as ``exec_spec``'s
        return _bmm_forward_driver, ints + [gemm_address(a.dtype)], ()

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        a, b = saved[0], saved[1]
        if grad_output.size == 0 or grad_input.size == 0:
            return
        if a.dtype.kind == "c":
            _complex_bmm_vjp(k, grad_output, a, b, grad_input)
            return
        g = grad_output.astype(a.dtype, copy=False).reshape((a.shape[0], a.shape[1], b.shape[2]))
        target, copied = _target_view(grad_input, saved[k].shape, a.dtype)
        if k == 0:
            _add_vjp_a(g, b, target)
        else:
            _add_vjp_b(g, a, target)
        if copied:  # the input was cast up for the product, or its buffer is strided
            grad_input += target.reshape(grad_input.shape)

    def has_vjp_numpy(self, k, saved, attrs):
        # ``vjp``'s paths but the own AVX-512 tiles (complex: NumPy's, as ``vjp``'s).
        a, b = saved[0], saved[1]
        if a.dtype.kind == "c":
            return True
        return a.dtype.kind == "f" and not (
            _blas(a.dtype, a.shape[1], a.shape[2], b.shape[2]) and own_kernel(a.dtype)
        )

    def vjp_numpy(self, k, grad_output, saved, attrs, grad_input):
        a, b = saved[0], saved[1]
        m, inner, n = a.shape[1], a.shape[2], b.shape[2]
        if grad_output.size == 0 or grad_input.size == 0:
            return
        if a.dtype.kind == "c":
            _complex_bmm_vjp(k, grad_output, a, b, grad_input)
            return
        blas = _blas(a.dtype, m, inner, n)
        g = grad_output.astype(a.dtype, copy=False).reshape((a.shape[0], m, n))
        target, copied = _target_view(grad_input, saved[k].shape, a.dtype)
        factor = b if k == 0 else a
        for i in range(a.shape[0]):
            _add_product_numpy(k, blas, g[i], factor[i], target[i])
        if copied:
            grad_input += target.reshape(grad_input.shape)

    def has_vjp_numpy_rows(self, k, saved, attrs):
        # (Where the own AVX-512 kernel does the products, ``vjp_numpy_rows`` runs the rows
        # driver's compiled products: they have no twin, and the forward compiled them.)
        return saved[0].dtype.kind == "f"

    def vjp_numpy_rows(self, k, grad_outputs, saved, attrs, grad_inputs):
        # ``_bmm_rows_driver``'s products: the rows stacked into one where they line up
        # (``_stack_add``), else one per row and entry; BLAS or the loops by the block's size.
        inner = saved[0].shape[2]

        def products(g, factor, target, stacked):
            _, _, m, n = g.shape
            blas = stacked * m * inner * n > SMALL_PRODUCT
            if blas and own_kernel(g.dtype):  # (the own kernel where a product fits it)
                _bmm_vjp_rows(gemm_address(g.dtype), own_kernel(g.dtype), k, g, factor,
                              target)
            else:
                _bmm_vjp_rows_numpy(k, blas, g, factor, target)

        _on_rows(k, grad_outputs, saved, grad_inputs, products)

    def vjp_batched(self, k, grad_outputs, saved, attrs, grad_inputs):
        # All vectors at once, straight into the gradient buffer (see _bmm_vjp_batched).
        inner = saved[0].shape[2]
        if saved[0].dtype.kind == "c":
            for v in range(grad_outputs.shape[0]):
                self.vjp(k, grad_outputs[v, ...], saved, attrs, grad_inputs[v, ...])
            return

        def products(g, factor, target, stacked):
            # Stacked, the vectors make one product large enough for BLAS where one alone
            # is not.
            if _blas(g.dtype, stacked * g.shape[2], inner, g.shape[3]):
                previous = hold_blas_threads()
                try:
                    gemm, tiles = product_kernel(g.dtype)
                    _bmm_vjp_batched(gemm, tiles, k, g, factor, target, parallel_allowed())
                finally:
                    release_blas_threads(previous)
            else:
                _bmm_vjp_batched_loops(k, g, factor, target)

        _on_rows(k, grad_outputs, saved, grad_inputs, products)

    def exec_spec(self, k, node):
        # (The driver reads flat buffers: the views need nothing of it.)
        a, b = node.saved_inputs
        if a.dtype != node.dtype or a.dtype.kind == "c" or not (a.size and b.size):
            return None  # (complex: BLAS's complex GEMM of NumPy, no driver)
        batch, m, inner = a.shape
        n = b.shape[2]
        blas = _blas(a.dtype, m, inner, n)
        tiles = own_kernel(a.dtype) if blas else 0  # chosen when planned: a cached plan keeps it
        operands = (b if k == 0 else a,)
        return ExecSpec(_bmm_driver, operands,
                        (k, batch, m, inner, n, blas, tiles, gemm_address(a.dtype), 0), ())

    def exec_set_spec(self, k, node):
        # (BLAS with beta 0: BLAS clears the target just before its product, in the cache)
        spec = self.exec_spec(k, node)
        if spec is None:
            return None
        return spec._replace(ints=spec.ints[:8] + (1,))

    def exec_rows_spec(self, k, node):
        spec = self.exec_spec(k, node)
        if spec is None:
            return None
        a = node.saved_inputs[0]
        ints = list(spec[2])
        ints[6] = own_kernel(a.dtype)  # (0 where exec_spec chose loops for one row)
        return ExecSpec(_bmm_rows_driver, spec.saved, tuple(ints), ())

    def rule(self, k, grad_output, inputs, output, attrs):
        a, b = inputs
        views = attrs.get("views")
        if views is not None:  # the product of the views, its gradient in input k's shape
            a = call("reshape", a, shape=views[0])
            b = call("reshape", b, shape=views[1])
            grad_output = call("reshape", grad_output, shape=(views[0][0], views[0][1],
                                                              views[1][2]))
        # (conj: torch's convention for complex operands; a real one's is itself)
        conj = FUNCTIONS["conj"]
        if k == 0:
            grad = call("_bmm", grad_output, call("transpose", conj(b), axes=(0, 2, 1)))
        else:
            grad = call("_bmm", call("transpose", conj(a), axes=(0, 2, 1)), grad_output)
        if views is not None:
            grad = call("reshape", grad, shape=attrs["input_shapes"][k])
        return grad

    def make_function(self):
        return None


def _complex_bmm_vjp(k, grad_output, a, b, grad_input):
    """``_bmm``'s VJP ``k`` for complex operands in NumPy, torch's convention: ``g @ b^H``
    into ``a``'s gradient, ``a^H @ g`` into ``b``'s (in the operands' own shapes)."""
    g = grad_output.reshape((a.shape[0], a.shape[1], b.shape[2]))
    if k == 0:
        product = np.matmul(g, np.conj(b).transpose(0, 2, 1))
    else:
        product = np.matmul(np.conj(a).transpose(0, 2, 1), g)
    grad_input += product.reshape(grad_input.shape)


def _read_as_views(a, b, views, attrs):
    """``a`` and ``b`` (C-contiguous) in the shapes ``views`` names, and the attrs that record
    them and the operands' own shapes; ValueError where a size differs."""
    try:
        a_view, b_view, out_view = (tuple(int(n) for n in v) for v in views)
    except (TypeError, ValueError):
        raise ValueError(f"_bmm: views must be three shapes, got {views!r}") from None
    for name, x, view in (("a", a, a_view), ("b", b, b_view)):
        if x.size != _size(view):
            raise ValueError(f"_bmm: cannot read {name} of shape {x.shape} as {view}")
    attrs = dict(attrs, views=(a_view, b_view, out_view), input_shapes=(a.shape, b.shape))
    return a.reshape(a_view), b.reshape(b_view), attrs


def _on_rows(k, grad_outputs, saved, grad_inputs, products):
    """``_bmm``'s VJP ``k`` for a stack of rows of grad_outputs: ``products(g, factor,
    target, stacked)`` on ``_batched_operands``, added back into ``grad_inputs`` where the
    target is a copy."""
    if grad_outputs.size == 0 or grad_inputs.size == 0:
        return
    g, target, copied, factor, stacked = _batched_operands(k, grad_outputs, saved,
                                                           grad_inputs)
    products(g, factor, target, stacked)
    if copied:
        grad_inputs += target.reshape(grad_inputs.shape)


def _batched_operands(k, grad_outputs, saved, grad_inputs):
    """``(g, target, copied, factor, stacked)`` of ``_bmm``'s VJP ``k`` for a stack of rows of
    grad_outputs: ``g`` as ``(rows, batch, m, n)``, the target per row in input ``k``'s shape
    (``_target_view``), the other factor, and how many rows one product stacks (all of them
    where they line up: one batch entry, or one row or column per entry; else 1)."""
    a, b = saved[0], saved[1]
    rows = grad_outputs.shape[0]
    batch, m, _ = a.shape
    n = b.shape[2]
    g = np.ascontiguousarray(grad_outputs, dtype=a.dtype).reshape((rows, batch, m, n))
    target, copied = _target_view(grad_inputs, (rows,) + saved[k].shape, a.dtype)
    stacked = rows if (batch == 1 or (m if k == 0 else n) == 1) else 1
    return g, target, copied, b if k == 0 else a, stacked


def _target_view(grad_input, shape, dtype):
    """``(target, copied)``: ``grad_input`` read in ``shape`` (a view) where it is
    C-contiguous of ``dtype``; else a zeroed array of ``shape`` to add back afterwards."""
    if grad_input.dtype == dtype and grad_input.flags.c_contiguous:
        return grad_input.reshape(shape), False
    return np.zeros(shape, dtype=dtype), True


BatchedMatmul()


def _reshaped(x, shape):
    """``x`` in ``shape``, recording a reshape only when the shape changes.

    A CPU Tensor's reshape is a view of its buffer that shares its version counter: an
    in-place change of ``x`` afterwards is then seen by the saved-buffer check of the node
    that saved the view, as torch's is. The views stay inside the composites (``einsum``).
    """
    shape = tuple(int(n) for n in shape)
    return x if _shape_of(x) == shape else call_view("reshape", x, shape=shape)


def _shape_of(x):
    # A Tensor's (or array's) own shape tuple: np.shape() of a Tensor costs ~1 us a call.
    shape = getattr(x, "shape", None)
    return shape if type(shape) is tuple else tuple(np.shape(x))


def _size(shape):
    # math.prod of Python ints: np.prod costs ~3 us a call, and matmul asks several times.
    return math.prod(int(n) for n in shape)


# -- matmul ------------------------------------------------------------------------------------


@public(family="linalg")
def matmul(a, b):
    """Matrix product with NumPy's rules.

    Parameters
    ----------
    a, b : Tensor or array_like
        At least one dimension each. A 1-D ``a`` is a row and a 1-D ``b`` a column (the added
        dimension is removed from the result); dimensions before the last two are batch
        dimensions and broadcast against each other.

    Returns
    -------
    Tensor
        Of shape ``batch + (m,) + (n,)``; 0-d for two 1-D operands.

    Raises
    ------
    ValueError
        For a 0-d operand, core dimensions that differ, or batch dimensions that do not
        broadcast (the message names both shapes).

    Notes
    -----
    The product saves its operands themselves (views of CPU buffers, not copies), so changing
    one in place between this call and the backward raises the in-place error at backward,
    as in torch.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.ones((2, 3), requires_grad=True)
    >>> out = anb.matmul(x, anb.ones((3, 4)))
    >>> out.shape
    (2, 4)
    >>> anb.matmul(anb.ones((5, 1, 2, 3)), anb.ones((4, 3, 2))).shape
    (5, 4, 2, 2)
    >>> anb.matmul(anb.tensor([1.0, 2.0]), anb.tensor([3.0, 4.0]))
    tensor(11.)
    """
    a_shape, b_shape = _shape_of(a), _shape_of(b)
    views = _matmul_views.get((a_shape, b_shape))
    if views is not None:  # these shapes were checked and read as one product before
        return call("_bmm", a, b, views=views)
    for position, shape in enumerate((a_shape, b_shape)):
        if not shape:
            raise ValueError(
                f"matmul: Input operand {position} does not have enough dimensions (has 0, "
                "gufunc core with signature (n?,k),(k,m?)->(n?,m?) requires 1)"
            )
    a_core = a_shape[-2:] if len(a_shape) > 1 else (1,) + a_shape
    b_core = b_shape[-2:] if len(b_shape) > 1 else b_shape + (1,)
    (m, k), (k2, n) = a_core, b_core
    if k != k2:
        raise ValueError(
            f"matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc "
            f"signature (n?,k),(k,m?)->(n?,m?) (size {k2} is different from {k}); "
            f"shapes {a_shape} and {b_shape}"
        )
    a_batch, b_batch = a_shape[:-2], b_shape[:-2]
    try:
        # (No batch dimensions, the common case: nothing to broadcast.)
        batch = (a_batch or b_batch) and _broadcast.broadcast_shapes(a_batch, b_batch)
    except ValueError:
        raise ValueError(
            f"matmul: operands could not be broadcast together with shapes {a_shape} and "
            f"{b_shape} (batch dimensions {a_batch} and {b_batch})"
        ) from None
    size = _size(batch)
    shape = batch + ((m,) if len(a_shape) > 1 else ()) + ((n,) if len(b_shape) > 1 else ())
    if _size(b_batch) == 1:
        # One right-hand matrix for every batch entry: fold the batch into a's rows, one
        # product (batch * m, k) @ (k, n), and nothing broadcast.
        views = (_ints((1, size * m, k)), _ints((1, k, n)), _ints(shape))
        remember(_matmul_views, (a_shape, b_shape), views)
        return call("_bmm", a, b, views=views)
    a = _broadcast_batch(a, a_shape, batch + a_core)
    b = _broadcast_batch(b, b_shape, batch + b_core)
    return _product(a, b, (size, m, k), (size, k, n), shape)


#: The views of ``matmul``'s one-product case by operand shapes: a program repeats its
#: products, and a hit skips the checks and shape arithmetic (~3 us a call).
_matmul_views = {}


def _product(a, b, a_view, b_view, shape):
    """One ``_bmm`` node: ``a`` read as ``a_view``, ``b`` as ``b_view``, the result in
    ``shape`` (see ``BatchedMatmul``)."""
    views = (_ints(a_view), _ints(b_view), _ints(shape))
    return call("_bmm", a, b, views=views)


def _ints(shape):
    return tuple([int(n) for n in shape])


def _broadcast_batch(x, shape, full):
    if _size(shape) != _size(full):
        # ``full`` ends in the core (m, k) or (k, n); a 1-D operand here is always ``a``,
        # whose (k,) broadcasts as the row (1, k).
        x = call("broadcast_to", x, shape=full)
    return x


# -- dot and outer -----------------------------------------------------------------------------


@public(family="linalg")
def dot(a, b):
    """Dot product of two tensors, as ``numpy.dot``.

    Parameters
    ----------
    a, b : Tensor or array_like

    Returns
    -------
    Tensor
        If either is 0-d, their product. If ``b`` is 1-D, the sum product over the last
        axis of ``a`` and ``b`` (for two 1-D tensors a 0-d inner product). Otherwise the sum
        product over the last axis of ``a`` and the second-to-last of ``b``, of shape
        ``a.shape[:-1] + b.shape[:-2] + b.shape[-1:]`` (a tensor product over the other
        dimensions, not matmul's batch broadcasting).

    Raises
    ------
    ValueError
        When the summed dimensions differ (the message names both shapes).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> anb.dot(x, x)
    tensor(14., grad_fn=<BmmBackward>)
    >>> anb.dot(anb.ones((2, 3, 4)), anb.ones((5, 4, 6))).shape
    (2, 3, 5, 6)
    """
    a_shape, b_shape = _shape_of(a), _shape_of(b)
    if not a_shape or not b_shape:
        return call("multiply", a, b)
    axis = max(len(b_shape) - 2, 0)
    if a_shape[-1] != b_shape[axis]:
        raise ValueError(
            f"shapes {_plain(a_shape)} and {_plain(b_shape)} not aligned: {a_shape[-1]} "
            f"(dim {len(a_shape) - 1}) != {b_shape[axis]} (dim {axis})"
        )
    if len(b_shape) == 1:
        return matmul(a, b)
    k, n = b_shape[-2:]
    rows = _size(a_shape[:-1])
    if len(b_shape) > 2:
        # (..., k, n) -> (k, ..., n): b's leading dimensions become columns of one product.
        last = len(b_shape) - 1
        b = call("transpose", b, axes=(last - 1,) + tuple(range(last - 1)) + (last,))
    return _product(a, b, (1, rows, k), (1, k, _size(b_shape[:-2]) * n),
                    a_shape[:-1] + b_shape[:-2] + (n,))


def _plain(shape):
    # NumPy's spelling of a shape in dot's message: "(3,)" and "(2,3)".
    return "(" + ",".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


@public(method=False, family="linalg")
def outer(a, b):
    """Outer product of two tensors, flattened first, as ``numpy.outer``.

    Parameters
    ----------
    a, b : Tensor or array_like
        Of sizes ``M`` and ``N``, any shapes.

    Returns
    -------
    Tensor
        Of shape ``(M, N)``: ``out[i, j] = a.ravel()[i] * b.ravel()[j]``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    >>> y = anb.outer(x, x)
    >>> anb.grad(y, x, grad_outputs=anb.ones_like(y))
    (tensor([20., 20., 20., 20.]),)
    """
    # One ``_bmm`` node: a column (M, 1) times a row (1, N), through views. Each element is the
    # one product a[i] * b[j], as NumPy's; the VJPs are a matrix-vector product each.
    shapes = (_shape_of(a), _shape_of(b))
    views = _outer_views.get(shapes)
    if views is None:
        m, n = _size(shapes[0]), _size(shapes[1])
        views = ((1, m, 1), (1, 1, n), (m, n))
        remember(_outer_views, shapes, views)
    return call("_bmm", a, b, views=views)


#: ``outer``'s views by operand shapes (``_product``'s, made once: ~1 us of a small call).
_outer_views = {}


# -- einsum ------------------------------------------------------------------------------------


@public(method=False, family="linalg")
def einsum(subscripts, *operands, optimize=False):
    """Einstein summation, as ``numpy.einsum``.

    Parameters
    ----------
    subscripts : str
        Comma-separated letter labels, one term per operand, and optionally ``->`` and the
        output's labels. Without ``->`` the output holds the labels that appear exactly once,
        in alphabetical order (upper case first), after any ``...``. A label repeated within
        one term takes a diagonal (``'ii->i'``, and ``'ii'`` is a trace); labels missing from
        the output are summed over. ``...`` stands for the dimensions not labelled, which
        broadcast against each other as in NumPy (so do dimensions of length one). The
        interleaved form ``einsum(a, [0, 1], b, [1, 2], [0, 2])`` is accepted too.
    *operands : Tensor or array_like
    optimize : bool, optional
        Accepted for NumPy compatibility and ignored: operands are contracted pairwise, left
        to right, each pair as one batched matrix product.

    Returns
    -------
    Tensor

    Examples
    --------
    >>> import autograd_nb as anb
    >>> a = anb.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> anb.einsum("ii", a)
    tensor(5., grad_fn=<SumBackward>)
    >>> anb.einsum("ij,jk->ik", a, a)
    tensor([[ 7., 10.],
            [15., 22.]], grad_fn=<BmmBackward>)
    >>> anb.einsum("...j,j", anb.ones((4, 3, 2)), anb.ones(2)).shape
    (4, 3)
    >>> anb.grad(anb.einsum("ij,ij->", a, a), a)
    (tensor([[2., 4.],
            [6., 8.]]),)
    """
    if not isinstance(subscripts, str):
        subscripts, operands = _from_interleaved((subscripts,) + operands)
    terms, output = _parse(subscripts, len(operands))
    shapes = [tuple(np.shape(x)) for x in operands]
    labels, ellipsis_ndim = _label_operands(terms, shapes)
    output = _output_labels(terms, output, labels, ellipsis_ndim)
    _check_sizes(labels, shapes)

    prepared = []
    for i, (x, own) in enumerate(zip(operands, labels, strict=True)):
        elsewhere = set(output).union(*(labels[j] for j in range(len(labels)) if j != i))
        prepared.append(_reduce_operand(x, own, elsewhere))
    result, result_labels = prepared[0]
    for i in range(1, len(prepared)):
        keep = set(output).union(*(own for _, own in prepared[i + 1 :]))
        result, result_labels = _contract(result, result_labels, *prepared[i], keep)
    if result_labels != output:
        order = tuple(result_labels.index(label) for label in output)
        result = call("transpose", result, axes=order)
    elif result is operands[0]:  # nothing to do: still a new Tensor, as NumPy's new array
        result = call("reshape", result, shape=tuple(np.shape(result)))
    return result


_ELLIPSIS = "..."


def _from_interleaved(args):
    """``(a, [0, 1], b, [1, 2], [0, 2])`` -> ``("Ab,bc->Ac", (a, b))`` (NumPy's sublists)."""
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

    def term(sublist):
        parts = []
        for item in sublist:
            if item is Ellipsis:
                parts.append(_ELLIPSIS)
            elif isinstance(item, (int, np.integer)) and 0 <= item < len(letters):
                parts.append(letters[int(item)])
            else:
                raise ValueError(f"subscript {item!r} is not within the valid range [0, 52)")
        return "".join(parts)

    operands = args[0::2]
    inputs = ",".join(term(s) for s in args[1::2])
    if len(args) % 2:
        return inputs + "->" + term(args[-1]), operands[:-1]
    return inputs, operands


def _parse_term(term, where):
    """Labels of one term: letters, and ``_ELLIPSIS`` for ``...`` (at most once)."""
    parsed = []
    rest = term
    while rest:
        if rest.startswith(_ELLIPSIS) and _ELLIPSIS not in parsed:
            parsed.append(_ELLIPSIS)
            rest = rest[3:]
            continue
        char, rest = rest[0], rest[1:]
        if char == ".":
            raise ValueError(
                "einstein sum subscripts string contains a '.' that is not part of an "
                f"ellipsis ('...') in {where}"
            )
        if not (char.isascii() and char.isalpha()):
            raise ValueError(
                f"invalid subscript '{char}' in einstein sum subscripts string, subscripts "
                "must be letters"
            )
        parsed.append(char)
    return parsed


def _parse(subscripts, n_operands):
    if not n_operands:
        raise ValueError("must specify the einstein sum subscripts string and at least one operand")
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        inputs, output = subscripts.split("->", 1)
    else:
        inputs, output = subscripts, None
    terms = inputs.split(",")
    if len(terms) < n_operands:
        raise ValueError(
            "more operands provided to einstein sum function than specified in the "
            "subscripts string"
        )
    if len(terms) > n_operands:
        raise ValueError(
            "fewer operands provided to einstein sum function than specified in the "
            "subscripts string"
        )
    terms = [_parse_term(t, f"operand {i}") for i, t in enumerate(terms)]
    if output is not None:
        output = _parse_term(output, "the output")
    return terms, output


def _label_operands(terms, shapes):
    """Each operand's labels, one per dimension, with ``...`` expanded.

    The dimensions under ``...`` get integer labels: the ellipsis block of the widest operand
    is ``0 .. E-1``, and narrower ones take its last labels (NumPy aligns them on the right).
    """
    counts = []
    for i, (term, shape) in enumerate(zip(terms, shapes, strict=True)):
        letters = len(term) - (_ELLIPSIS in term)
        if letters > len(shape):
            raise ValueError(
                f"einstein sum subscripts string contains too many subscripts for operand {i}"
            )
        if _ELLIPSIS not in term and letters < len(shape):
            raise ValueError(
                "operand has more dimensions than subscripts given in einstein sum, but no "
                "'...' ellipsis provided to broadcast the extra dimensions."
            )
        counts.append(len(shape) - letters)
    ellipsis_ndim = max(counts, default=0)
    labels = []
    for term, count in zip(terms, counts, strict=True):
        own = []
        for label in term:
            if label == _ELLIPSIS:
                own.extend(range(ellipsis_ndim - count, ellipsis_ndim))
            else:
                own.append(label)
        labels.append(own)
    return labels, ellipsis_ndim


def _output_labels(terms, output, labels, ellipsis_ndim):
    if output is None:
        letters = [label for term in terms for label in term if label != _ELLIPSIS]
        once = sorted(label for label in set(letters) if letters.count(label) == 1)
        return list(range(ellipsis_ndim)) + once
    seen = {label for own in labels for label in own}
    result = []
    for label in output:
        if label == _ELLIPSIS:
            result.extend(range(ellipsis_ndim))
            continue
        if label not in seen:
            raise ValueError(
                "einstein sum subscripts string included output subscript "
                f"'{label}' which never appeared in an input"
            )
        if label in result:
            raise ValueError(
                f"einstein sum subscripts string includes output subscript '{label}' multiple times"
            )
        result.append(label)
    if ellipsis_ndim and _ELLIPSIS not in output:
        raise ValueError(
            "output has more dimensions than subscripts given in einstein sum, but no '...' "
            "ellipsis provided to broadcast the extra dimensions."
        )
    return result


def _check_sizes(labels, shapes):
    """A label's lengths must be equal within an operand, and 1 or one length across them."""
    sizes = {}
    for i, (own, shape) in enumerate(zip(labels, shapes, strict=True)):
        mine = {}
        for label, n in zip(own, shape, strict=True):
            if label in mine and mine[label] != n:
                raise ValueError(
                    f"dimensions in operand {i} for collapsing index '{label}' don't match "
                    f"({mine[label]} != {n})"
                )
            mine[label] = n
        for label, n in mine.items():
            if sizes.get(label, 1) not in (1, n) and n != 1:
                listed = " ".join(str(s) for s in shapes)
                name = "'...'" if isinstance(label, int) else f"'{label}'"
                raise ValueError(
                    "einsum: operands could not be broadcast together: subscript "
                    f"{name} has lengths {sizes[label]} and {n}; operand shapes {listed}"
                )
            sizes[label] = _joint(sizes.get(label, 1), n)


def _joint(n, m):
    """The length of two broadcast against each other (1 gives way, also to 0)."""
    return m if n == 1 else n


def _reduce_operand(x, own, elsewhere):
    """Take the diagonals of repeated labels and sum labels used nowhere else."""
    unique = list(dict.fromkeys(own))
    if len(unique) < len(own):
        # One integer-array index: axis d reads arange(n) laid along its label's position
        # among ``unique``, so the result has one dimension per unique label.
        shape = tuple(np.shape(x))
        index = []
        for label, n in zip(own, shape, strict=True):
            layout = [1] * len(unique)
            layout[unique.index(label)] = n
            index.append(np.arange(n, dtype=np.int64).reshape(layout))
        x = call("getitem", x, index=tuple(index))
        own = unique
    summed = tuple(d for d, label in enumerate(own) if label not in elsewhere)
    if summed:
        x = call("sum", x, axis=summed)
        own = [label for label in own if label in elsewhere]
    return x, list(own)


def _contract(x, x_labels, y, y_labels, keep):
    """Contract two operands over their shared labels not in ``keep``.

    The result's labels are: shared ones kept (batch), then x's own, then y's own. With
    nothing to sum this is a broadcast ``multiply``; otherwise one ``_bmm`` of
    ``(batch, x's own, summed) @ (batch, summed, y's own)``.
    """
    batch = [label for label in x_labels if label in y_labels and label in keep]
    summed = [label for label in x_labels if label in y_labels and label not in keep]
    left = [label for label in x_labels if label not in y_labels]
    right = [label for label in y_labels if label not in x_labels]
    x_shape = dict(zip(x_labels, np.shape(x), strict=True))
    y_shape = dict(zip(y_labels, np.shape(y), strict=True))

    if not summed:
        x = _permuted(x, x_labels, batch + left)
        y = _permuted(y, y_labels, batch + right)
        x = _reshaped(x, [x_shape[label] for label in batch + left] + [1] * len(right))
        y = _reshaped(
            y,
            [y_shape[label] for label in batch]
            + [1] * len(left)
            + [y_shape[label] for label in right],
        )
        return call("multiply", x, y), batch + left + right

    # A shared label of length 1 on one side broadcasts against the other's length.
    shared = batch + summed
    lengths = {**x_shape, **y_shape}
    lengths.update({label: _joint(x_shape[label], y_shape[label]) for label in shared})
    x = _broadcast_labels(x, x_labels, x_shape, lengths)
    y = _broadcast_labels(y, y_labels, y_shape, lengths)

    def product(group):
        return _size([lengths[label] for label in group])

    x = _permuted(x, x_labels, batch + left + summed)
    y = _permuted(y, y_labels, batch + summed + right)
    labels = batch + left + right
    out = _product(x, y, (product(batch), product(left), product(summed)),
                   (product(batch), product(summed), product(right)),
                   [lengths[label] for label in labels])
    return out, labels


def _permuted(x, labels, order):
    if labels == order:
        return x
    return call("transpose", x, axes=tuple(labels.index(label) for label in order))


def _broadcast_labels(x, labels, shape, lengths):
    """``x`` broadcast where its length is 1 and the other operand's is longer."""
    target = tuple(lengths[label] for label in labels)
    if target == tuple(shape[label] for label in labels):
        return x
    return call("broadcast_to", x, shape=target)
