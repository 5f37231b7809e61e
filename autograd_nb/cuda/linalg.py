"""CUDA kernels of the linear-algebra primitive ``_bmm``: ``(batch, m, k) @ (batch, k, n)``.

matmul, dot, outer and einsum are composites over ``_bmm`` (see
:mod:`autograd_nb.ops.linalg`), so this one tiled kernel serves all of them.

**Tiled matmul.** A block of ``T x T`` threads (``T = config.CUDA_MATMUL_TILE``) computes a
``T x T`` tile of one product. It walks the shared dimension in steps of ``T``: each thread
loads one element of the left operand's tile and one of the right's into shared memory,
the block synchronises, and each thread adds the ``T`` products of its row of the first tile
and its column of the second to a register, so each element loaded from global memory is
used ``T`` times. The grid is ``(column tiles, row tiles, batch)``, with grid-stride loops
over row tiles and the batch beyond CUDA's grid limits.

The same kernel serves the VJPs by reading an operand transposed (index swap, no copy) and
adding into the gradient: ``grad_a += g @ b^T`` and ``grad_b += a^T @ g``. An operand with
fewer batch entries than the product is reused cyclically (entry ``z % batch``), which lets
``is_grads_batched`` fold the batch of gradients into the GEMM batch: ``(B * batch, m, n)``
gradients against the ``batch`` saved operands, in one launch.

The issue allows handing large products to CuPy's GEMM through the CUDA Array Interface; that
is not done here (CuPy was not available to test it), so every product runs this kernel.
"""

import functools

import numba
import numpy as np
from numba import cuda

from .. import config
from . import _device, _kernels
from ._kernels import GRID_LIMIT
from .dispatch import BatchFirst


def tile_size():
    """The square tile's side, ``config.CUDA_MATMUL_TILE``."""
    return max(1, int(config.CUDA_MATMUL_TILE))


@cuda.jit(device=True)
def _load(source, z, row, col, rows, cols, transposed, zero):
    """Element ``(row, col)`` of ``source[z]`` (of ``source[z].T`` if ``transposed``), or
    ``zero`` outside the ``rows x cols`` matrix: the padding of partial tiles."""
    if row >= rows or col >= cols:
        return zero
    if transposed:
        return source[z, col, row]
    return source[z, row, col]


@cuda.jit(device=True)
def _load_conjugate(source, z, row, col, rows, cols, transposed, zero):
    """:func:`_load`, conjugated where ``transposed``: a complex VJP's ``g b^H``, ``a^H g``."""
    value = _load(source, z, row, col, rows, cols, transposed, zero)
    if transposed:
        return value.conjugate()
    return value


@functools.cache
def _matmul_kernel(dtype, tile):
    """``out[z] (+)= op(a[z % len(a)]) @ op(b[z % len(b)])``, where ``op`` transposes when
    the flag says so; products summed in ``dtype``.

    Thread ``(ty, tx)`` owns ``out[z, row0 + ty, col0 + tx]``. Loads let ``tx`` run along the
    operand's last (contiguous) axis, so a warp reads consecutive addresses: for a
    transposed operand the thread stores its element at the mirrored place of the tile. The
    tiles have one padding column, so those mirrored stores hit distinct memory banks.
    """
    slot = numba.from_dtype(np.dtype(dtype))
    padded = (tile, tile + 1)  # a compile-time constant shape
    # (complex: a transposed operand is conjugated; the forward transposes none)
    load = _load_conjugate if np.dtype(dtype).kind == "c" else _load

    @cuda.jit
    def kernel(a, b, out, transpose_a, transpose_b, accumulate, zero):
        tile_a = cuda.shared.array(padded, slot)
        tile_b = cuda.shared.array(padded, slot)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        batch, m, n = out.shape
        depth = a.shape[1] if transpose_a else a.shape[2]
        col0 = cuda.blockIdx.x * tile
        row_tiles = (m + tile - 1) // tile
        for z in range(cuda.blockIdx.z, batch, cuda.gridDim.z):
            za = z % a.shape[0]
            zb = z % b.shape[0]
            for row_tile in range(cuda.blockIdx.y, row_tiles, cuda.gridDim.y):
                row0 = row_tile * tile
                acc = zero
                for start in range(0, depth, tile):
                    # op(a)[row0:, start:] and op(b)[start:, col0:], each element loaded once.
                    if transpose_a:
                        tile_a[tx, ty] = load(a, za, row0 + tx, start + ty, m, depth, True, zero)
                    else:
                        tile_a[ty, tx] = load(a, za, row0 + ty, start + tx, m, depth, False, zero)
                    if transpose_b:
                        tile_b[tx, ty] = load(b, zb, start + tx, col0 + ty, depth, n, True, zero)
                    else:
                        tile_b[ty, tx] = load(b, zb, start + ty, col0 + tx, depth, n, False, zero)
                    cuda.syncthreads()
                    for q in range(tile):
                        acc += tile_a[ty, q] * tile_b[q, tx]
                    cuda.syncthreads()  # the tiles are read before the next step loads
                row = row0 + ty
                col = col0 + tx
                if row < m and col < n:
                    if accumulate:
                        out[z, row, col] += acc
                    else:
                        out[z, row, col] = acc

    return kernel


def batched_product(a, b, out, dtype, transpose_a=False, transpose_b=False, accumulate=False):
    """Launch the tiled kernel: ``out (batch, m, n) (+)= op(a) @ op(b)`` per batch entry.

    ``a`` and ``b`` are 3-d device arrays whose batch length divides ``out``'s; ``op``
    transposes the last two axes where asked (and conjugates them, for complex ``dtype``:
    the VJPs). Products are summed in ``dtype``.
    """
    batch, m, n = out.shape
    if out.size == 0:
        return
    tile = tile_size()
    zero = np.dtype(dtype).type(0)
    grid = (-(-n // tile), min(GRID_LIMIT, -(-m // tile)), min(GRID_LIMIT, batch))
    kernel = _matmul_kernel(np.dtype(dtype), tile)
    _kernels.launch_grid(kernel, grid, (tile, tile), a, b, out, transpose_a, transpose_b,
                         accumulate, zero)


@cuda.jit(cache=True)
def _nonzero_kernel(counts, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = counts[i] != 0


def _as_bool(counts):
    """Booleans from the int64 products of bool operands (an OR of ANDs: any count > 0)."""
    out = _device.empty(counts.shape, np.bool_)
    _kernels.launch(_nonzero_kernel, out.size, _kernels.flat(counts), _kernels.flat(out))
    return out


class BatchedMatmul(BatchFirst):
    """``_bmm`` on the GPU: the tiled kernel for the product and for both VJPs.

    Products are summed in the saved operands' dtype, as on the CPU; the VJPs accumulate
    straight into ``grad_input`` (whatever its float dtype: the kernel casts on store), and
    the batched VJP is one launch over ``B * batch`` products.
    """

    takes_complex = True  # (the VJPs conjugate: g b^H, a^H g)

    @staticmethod
    def forward(op, arrays, attrs):
        a, b = arrays
        out = _device.empty((a.shape[0], a.shape[1], b.shape[2]), a.dtype)
        # An empty shared axis gives zeros: the tile loop adds nothing.
        batched_product(a, b, out, a.dtype)
        if out.dtype != attrs["dtype"]:
            out = _as_bool(out)
        views = attrs.get("views")  # (see the CPU op: the result in matmul's shape)
        return out if views is None else out.reshape(views[2])

    @staticmethod
    def vjp_batched(op, k, grad_outputs, saved, attrs, grad_inputs):
        a, b = saved[0], saved[1]
        if grad_outputs.size == 0 or grad_inputs.size == 0:
            return
        # The gradients come in the operands' own shapes (``views``): read them as the
        # saved (batch, m, k) and (batch, k, n).
        vectors = grad_outputs.shape[0]
        batch, m = a.shape[0], a.shape[1]
        n = b.shape[2]
        g = grad_outputs.reshape((vectors * batch, m, n))
        target = grad_inputs.reshape((vectors * batch,) + saved[k].shape[1:])
        if k == 0:  # grad_a (batch, m, k) += g @ b^T
            batched_product(g, b, target, a.dtype, transpose_b=True, accumulate=True)
        else:  # grad_b (batch, k, n) += a^T @ g
            batched_product(a, g, target, a.dtype, transpose_a=True, accumulate=True)
