"""NumPy twins of the VJP kernels' accumulation, for tier 0's backward (``Op.vjp_numpy``).

A VJP kernel adds into its target one element at a time, ``target[i] += value``: the sum is
computed in the type numba gives it (a float32 target plus a float64 value adds in float64)
and rounded once to the target's dtype, and an element that receives several values (a
broadcast input, a repeated index) receives them in the kernel's loop order. The helpers here
do the same with NumPy: the addition through a ufunc whose loop is chosen by both operands'
dtypes and whose output is cast (``casting="unsafe"``), and repeated targets through
sequential adds (``np.add.accumulate`` along the order where the dtypes agree, a Python loop
over the repeats where they do not), never through NumPy's pairwise sums.
"""

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ._blas import ByAddress, gemm_function


def add_into(target, values):
    """``target += values`` elementwise (broadcasting ``values``), computed in the dtype of
    both (as numba computes ``target[i] += value``) and rounded once to ``target``'s."""
    np.add(target, values, out=target, casting="unsafe")


def running_sum64(values, axis):
    """The sums along ``axis`` as a kernel's ``total = 0.0; total += v`` makes them: one after
    another, in float64 (``-0.0`` sums to ``+0.0``, as from ``0.0``)."""
    if values.shape[axis] == 0:
        return np.zeros(np.delete(values.shape, axis), dtype=np.float64)
    running = np.add.accumulate(values.astype(np.float64), axis=axis)
    return np.take(running, -1, axis=axis) + 0.0


def scatter_add(values, shape, strides, target, offset=0):
    """``target[offset + position . strides] += values[position]`` over the C-order positions
    of ``shape`` (``target`` flat, strides in elements, 0 on broadcast dimensions): each target
    element receives its values in C order, as ``_strided.scatter_add`` and the strided VJP
    kernels add them."""
    shape = [int(n) for n in shape]
    strides = [int(s) for s in strides]
    if values.size == 0:
        return
    values = values.reshape(shape)
    repeated = [d for d in range(len(shape)) if strides[d] == 0 and shape[d] > 1]
    kept = [d for d in range(len(shape)) if d not in repeated]
    item = target.itemsize
    view = as_strided(target[offset:], shape=[shape[d] for d in kept],
                      strides=[strides[d] * item for d in kept])
    if not repeated:
        add_into(view, values.reshape(view.shape))
        return
    # Each target element's values, in their C order over the repeated dimensions.
    rows = values.transpose(repeated + kept).reshape((-1,) + view.shape)
    if rows.dtype == view.dtype:
        start = view[np.newaxis]
        view[...] = np.add.accumulate(np.concatenate([start, rows]), axis=0)[-1]
        return
    for row in rows:
        add_into(view, row)


def gemm_add(x, transpose_x, y, transpose_y, out, alpha=1.0, beta=1.0, blas=None):
    """``out = alpha * x' @ y' + beta * out`` by BLAS's GEMM, through ctypes: the call of
    ``_blas.gemm_add`` (beta 1), ``_blas.gemm_set`` (beta 0) and ``_lapack.gemm_add`` (``blas``
    ``_blas.scipy_blas()``; by default the products' BLAS, ``_blas.PRODUCTS``) with the same
    arguments, so the same bits. Every operand is a 2-D array with contiguous rows; nothing is
    done where ``out`` is empty, and ``out`` is cleared where the inner dimension is 0 and beta
    is 0."""
    rows, columns = out.shape
    depth = x.shape[0] if transpose_x else x.shape[1]
    if rows == 0 or columns == 0 or depth == 0:
        if beta == 0.0:
            out[...] = 0
        return
    item = out.itemsize
    gemm, int_type = gemm_function(out.dtype, blas)
    by = ByAddress(out.dtype, int_type)

    def leading(matrix):
        return by.int(max(matrix.strides[0] // item, matrix.shape[1], 1))

    gemm(
        by.char(b"T" if transpose_y else b"N"), by.char(b"T" if transpose_x else b"N"),
        by.int(columns), by.int(rows), by.int(depth), by.scalar(alpha), y.ctypes.data,
        leading(y), x.ctypes.data, leading(x), by.scalar(beta), out.ctypes.data, leading(out),
    )


def gemm_set(x, transpose_x, y, transpose_y, out):
    """``out[...] = x' @ y'`` as ``_blas.gemm_set`` computes it by BLAS (beta 0)."""
    gemm_add(x, transpose_x, y, transpose_y, out, beta=0.0)
