"""CUDA kernels of the reductions and scans: sum, prod, max, min, logsumexp, softmax,
log_softmax, cumsum and cumprod.

The kernels see the CPU ops' canonical layout, ``(outer, n, inner)`` (see
:class:`autograd_nb.ops.reduction.Layout`): the reduced axis is the middle one. Non-adjacent
axes are first gathered into that layout with a strided-copy kernel, and gradients scattered
back the same way, as on the CPU.

Three parallel schemes cover every op:

* **Block tree reduction** (sum, prod, max, min, logsumexp, softmax, log_softmax and the VJPs
  that need a per-row total): one thread block per ``(outer, inner)`` row, blocks striding over
  the rows. The block's threads stride along ``n`` (thread ``t`` takes ``t, t + T, ...``),
  each folding its elements into a register, then combine the ``T`` partials by halving
  through shared memory (``log2 T`` steps, ``cuda.syncthreads`` between them).
* **Block scan** (cumsum and its VJP, and prod's "product of the others"): one block per row
  walks the row in tiles of ``T`` elements; each tile is scanned in shared memory by
  doubling offsets (Hillis-Steele), and a carry holds the total of the tiles before it.
* **Elementwise** (VJPs that only broadcast a per-row value: sum, logsumexp, prod): a
  grid-stride loop over the elements.

VJP kernels always take a leading batch dimension on the gradients (1 for a plain ``vjp``);
``is_grads_batched`` runs that batch as the grid's second dimension, over the same saved
values. Every VJP *accumulates* into ``grad_input``, as the CPU ops do.

Kernels whose shared arrays depend on the dtype or the block size are built by cached
factories (one compilation per dtype and size in a process); the others are module-level
``@cuda.jit(cache=True)`` kernels.
"""

import functools
import math

import numba
import numpy as np
from numba import cuda

from .. import config
from ..ops import _broadcast
from . import _device, _kernels
from ._kernels import GRID_LIMIT
from .dispatch import BatchFirst

# -- launch geometry ---------------------------------------------------------------------------


def block_size():
    """Threads per block: ``config.CUDA_THREADS_PER_BLOCK`` rounded down to a power of two
    (the tree reductions halve it)."""
    limit = max(1, int(config.CUDA_THREADS_PER_BLOCK))
    return 1 << (limit.bit_length() - 1)


def row_threads(n):
    """Threads for a block that owns one row of ``n``: a power of two, at least a warp (or
    the whole block size, if smaller) and no more than ``n`` needs."""
    limit = block_size()
    threads = min(32, limit)
    while threads < n and threads < limit:
        threads *= 2
    return threads


def _blocks(count, threads=1):
    """Blocks along one grid dimension for ``count`` items of ``threads`` each (at least 1)."""
    return max(1, min(GRID_LIMIT, -(-count // threads)))


def _numba_type(dtype):
    return numba.from_dtype(np.dtype(dtype))


# -- device building blocks --------------------------------------------------------------------


@cuda.jit(device=True)
def _add(a, b):
    return a + b


@cuda.jit(device=True)
def _multiply(a, b):
    return a * b


@cuda.jit(device=True)
def _larger(a, b):
    # NaN wins, as in NumPy's max.
    if b > a or b != b:
        return b
    return a


@cuda.jit(device=True)
def _smaller(a, b):
    if b < a or b != b:
        return b
    return a


COMBINE = {"sum": _add, "prod": _multiply, "max": _larger, "min": _smaller}


@functools.cache
def block_reducer(combine):
    """A device function ``reduce(shared, value)``: ``combine`` over the ``value`` of every
    thread of the block, returned to all of them. ``shared`` holds one slot per thread.

    A tree: in each step the lower half of the active slots absorbs the upper half.
    """

    @cuda.jit(device=True)
    def reduce(shared, value):
        tid = cuda.threadIdx.x
        shared[tid] = value
        cuda.syncthreads()
        step = cuda.blockDim.x // 2
        while step > 0:
            if tid < step:
                shared[tid] = combine(shared[tid], shared[tid + step])
            cuda.syncthreads()
            step //= 2
        total = shared[0]
        cuda.syncthreads()  # everyone has read the total before the slots are reused
        return total

    return reduce


@functools.cache
def tile_scanner(combine):
    """A device function ``scan(shared, value, carry, identity)`` over one tile of a row,
    one ``value`` per thread: returns ``(inclusive, exclusive, carry)``, each with the
    ``carry`` of the tiles before folded in; the new carry includes this whole tile.

    Hillis-Steele: at offset ``d`` (1, 2, 4, ...) each slot absorbs the slot ``d`` before it.
    """

    @cuda.jit(device=True)
    def scan(shared, value, carry, identity):
        tid = cuda.threadIdx.x
        size = cuda.blockDim.x
        shared[tid] = value
        cuda.syncthreads()
        offset = 1
        while offset < size:
            before = shared[tid - offset] if tid >= offset else identity
            cuda.syncthreads()  # all reads of this step happen before any write
            shared[tid] = combine(before, shared[tid])
            cuda.syncthreads()
            offset *= 2
        inclusive = combine(carry, shared[tid])
        exclusive = combine(carry, shared[tid - 1]) if tid > 0 else carry
        carry = combine(carry, shared[size - 1])
        cuda.syncthreads()
        return inclusive, exclusive, carry

    return scan


def _rows(shape3):
    """``outer * inner``: the rows of an ``(outer, n, inner)`` layout."""
    return shape3[0] * shape3[2]


# -- non-adjacent axes: gathered into the layout, gradients scattered back ---------------------


def to_canonical(device_x, layout):
    """``device_x`` as an ``(outer, n, inner)`` array: a view, or a gathered copy when the
    reduced axes are not adjacent."""
    shape3 = (layout.outer, layout.n, layout.inner)
    if layout.permuted is None:
        return device_x.reshape(shape3)
    out = _device.empty(shape3, device_x.dtype)
    permuted = layout.permuted
    own = _broadcast.contiguous_strides(permuted)
    _kernels.copy_strided(device_x, 0, layout.strides, out, 0, own, permuted)
    return out


def add_back(device_canonical, layout, device_grads):
    """Accumulate a batch of canonical-layout gradients into ``device_grads`` (batch, ...)."""
    batch = device_grads.shape[0]
    row = device_grads.size // batch if batch else 0
    shape = (batch,) + tuple(layout.permuted)
    strides = [row] + list(layout.strides)
    own = _broadcast.contiguous_strides(shape)
    _kernels.add_strided(device_canonical, 0, own, device_grads, 0, strides, shape)


# -- the op classes: layout handling shared by every axis op -----------------------------------


class AxisKernels(BatchFirst):
    """The CUDA side of :class:`autograd_nb.ops.reduction.AxisOp`: layout handling around
    ``run_forward(op, x3, attrs) -> out`` and the batched, accumulating
    ``run_vjp(op, g, x3, y, gx, attrs)`` of each subclass.

    In ``run_vjp``, ``gx`` is ``(batch, outer, n, inner)``; ``g`` is ``(batch, outer, inner)``
    for reductions and ``(batch, outer, n, inner)`` otherwise; ``x3`` and ``y`` (each None
    when the op does not save it) are the canonical saved input and result, shared by the
    batch.
    """

    @classmethod
    def forward(cls, op, arrays, attrs):
        layout = attrs["layout"]
        x3 = to_canonical(arrays[0], layout)
        out = cls.run_forward(op, x3, attrs)
        if not op.reduces and layout.permuted is not None:
            unpermuted = _device.zeros((1,) + layout.shape, out.dtype)
            add_back(out, layout, unpermuted)
            return unpermuted.reshape(layout.shape)
        return out.reshape(attrs["shape"])

    @classmethod
    def vjp_batched(cls, op, k, grad_outputs, saved, attrs, grad_inputs):
        layout = attrs["layout"]
        batch = grad_outputs.shape[0]
        shape3 = (layout.outer, layout.n, layout.inner)
        if batch == 0 or grad_inputs.size == 0:
            return
        x3 = to_canonical(saved[0], layout) if saved[0] is not None else None
        y = saved.output
        if op.reduces:
            g = grad_outputs.reshape((batch, layout.outer, layout.inner))
            y = y.reshape((layout.outer, layout.inner)) if y is not None else None
        else:
            # Single-axis ops (softmax, cumsum): their layout is never permuted.
            g = grad_outputs.reshape((batch,) + shape3)
            y = y.reshape(shape3) if y is not None else None
        if layout.permuted is None:
            cls.run_vjp(op, g, x3, y, grad_inputs.reshape((batch,) + shape3), attrs)
            return
        canonical = _device.zeros((batch,) + shape3, grad_inputs.dtype)
        cls.run_vjp(op, g, x3, y, canonical, attrs)
        add_back(canonical, layout, grad_inputs)


def _reduced_out(x3):
    return _device.empty((x3.shape[0], x3.shape[2]), x3.dtype)


def _launch_rows(kernel, shape3, batch, *args):
    """One block per row (and per batch entry, along the grid's y), rows strided."""
    threads = row_threads(shape3[1])
    _kernels.launch_grid(kernel, (_blocks(_rows(shape3)), _blocks(batch)), threads, *args)


def _launch_elements(kernel, shape3, batch, *args):
    """A grid-stride loop over the elements of ``shape3``, the batch along the grid's y."""
    threads = block_size()
    size = shape3[0] * shape3[1] * shape3[2]
    _kernels.launch_grid(kernel, (_blocks(size, threads), _blocks(batch)), threads, *args)


# -- sum, prod, max, min: one tree reduction per row -------------------------------------------


@functools.cache
def _reduce_kernel(kind, dtype, threads):
    """``out[o, c, k] = combine over j in chunk c of x[o, j, k]``, from ``identity``: one
    block per ``(o, c, k)``; the chunks split long rows across blocks."""
    combine = COMBINE[kind]
    reduce = block_reducer(combine)
    slot = _numba_type(dtype)

    @cuda.jit
    def kernel(x, identity, chunk, out):
        partials = cuda.shared.array(threads, slot)
        outer, n, inner = x.shape
        chunks = out.shape[1]
        tid = cuda.threadIdx.x
        for item in range(cuda.blockIdx.x, outer * chunks * inner, cuda.gridDim.x):
            o = item // (chunks * inner)
            c = (item // inner) % chunks
            k = item % inner
            acc = identity
            for j in range(c * chunk + tid, min(n, (c + 1) * chunk), cuda.blockDim.x):
                acc = combine(acc, x[o, j, k])
            total = reduce(partials, acc)
            if tid == 0:
                out[o, c, k] = total

    return kernel


def _identity(kind, dtype):
    """The value a row starts from: 0 for sum, 1 for prod, the far end of the dtype's range
    for max and min (their rows are never empty)."""
    dtype = np.dtype(dtype)
    if kind in ("sum", "prod"):
        return dtype.type(kind == "prod")
    lowest = kind == "max"
    if dtype.kind == "f":
        return dtype.type(-np.inf if lowest else np.inf)
    if dtype.kind == "b":
        return dtype.type(not lowest)
    info = np.iinfo(dtype)
    return dtype.type(info.min if lowest else info.max)


def _chunks(rows, n, threads):
    """How many blocks share each row of ``n``: one where the rows alone launch
    ``config.CUDA_REDUCTION_SPLIT_BELOW_BLOCKS`` blocks, else chunks of at least
    ``config.CUDA_REDUCTION_ELEMENTS_PER_THREAD`` elements per thread of the block."""
    split_below = config.CUDA_REDUCTION_SPLIT_BELOW_BLOCKS
    if rows >= split_below:
        return 1
    by_work = -(-n // (threads * config.CUDA_REDUCTION_ELEMENTS_PER_THREAD))
    return max(1, min(by_work, -(-split_below // rows)))


def _reduce_pass(kind, x3, chunks):
    """One launch: ``x3`` reduced to ``(outer, chunks, inner)``."""
    outer, n, inner = x3.shape
    out = _device.empty((outer, chunks, inner), x3.dtype)
    kernel = _reduce_kernel(kind, x3.dtype, block_size())
    chunk = -(-n // chunks)
    _kernels.launch_grid(kernel, _blocks(out.size), row_threads(chunk), x3,
                         _identity(kind, x3.dtype), chunk, out)
    return out


def reduce_rows(kind, x3):
    """``kind`` (sum, prod, max, min) over the middle axis of ``x3``: ``(outer, inner)``.

    Few long rows take two passes: blocks reduce chunks of each row to partial results,
    which one block per row then reduces.
    """
    outer, n, inner = x3.shape
    if outer * inner == 0:
        return _reduced_out(x3)
    chunks = _chunks(outer * inner, n, row_threads(n))
    if chunks > 1:
        x3 = _reduce_pass(kind, x3, chunks)
    return _reduce_pass(kind, x3, 1).reshape((outer, inner))


@cuda.jit(cache=True)
def _broadcast_vjp_kernel(g, gx):
    # gx[b, o, j, k] += g[b, o, k]
    batch, outer, n, inner = gx.shape
    start = cuda.grid(1)
    for b in range(cuda.blockIdx.y, batch, cuda.gridDim.y):
        for i in range(start, outer * n * inner, cuda.blockDim.x * cuda.gridDim.x):
            o = i // (n * inner)
            k = i % inner
            gx[b, o, (i // inner) % n, k] += g[b, o, k]


class Sum(AxisKernels):
    """``sum``: a tree reduction per row; its VJP broadcasts the gradient back."""

    takes_complex = True  # (a tree of additions; the VJP broadcasts)

    @staticmethod
    def run_forward(op, x3, attrs):
        return reduce_rows("sum", x3)

    @staticmethod
    def run_vjp(op, g, x3, y, gx, attrs):
        _launch_elements(_broadcast_vjp_kernel, gx.shape[1:], gx.shape[0], g, gx)


@functools.cache
def _others_kernel(dtype, threads):
    """``others[o, j, k]``: the product of the row's elements other than ``j``, as an
    exclusive prefix-product scan times an exclusive suffix-product scan (no division, so
    zeros are exact, as on the CPU)."""
    scan = tile_scanner(_multiply)
    slot = _numba_type(dtype)

    @cuda.jit
    def kernel(x, one, others):
        shared = cuda.shared.array(threads, slot)
        outer, n, inner = x.shape
        tid = cuda.threadIdx.x
        size = cuda.blockDim.x
        for row in range(cuda.blockIdx.x, outer * inner, cuda.gridDim.x):
            o = row // inner
            k = row - o * inner
            carry = one
            for start in range(0, n, size):
                j = start + tid
                value = x[o, j, k] if j < n else one
                _, before, carry = scan(shared, value, carry, one)
                if j < n:
                    others[o, j, k] = before
            cuda.syncthreads()  # the prefixes are written before the suffix pass reads them
            carry = one
            for start in range(0, n, size):
                j = n - 1 - (start + tid)  # the same scan, walking the row from its end
                value = x[o, j, k] if j >= 0 else one
                _, after, carry = scan(shared, value, carry, one)
                if j >= 0:
                    others[o, j, k] = others[o, j, k] * after

    return kernel


@cuda.jit(cache=True)
def _scaled_vjp_kernel(g, weights, gx):
    # gx[b, o, j, k] += g[b, o, k] * weights[o, j, k]
    batch, outer, n, inner = gx.shape
    start = cuda.grid(1)
    for b in range(cuda.blockIdx.y, batch, cuda.gridDim.y):
        for i in range(start, outer * n * inner, cuda.blockDim.x * cuda.gridDim.x):
            o = i // (n * inner)
            j = (i // inner) % n
            k = i % inner
            gx[b, o, j, k] += g[b, o, k] * weights[o, j, k]


@cuda.jit(cache=True)
def _scaled_conj_vjp_kernel(g, weights, gx):
    # gx[b, o, j, k] += g[b, o, k] * conj(weights[o, j, k]) (torch's complex convention)
    batch, outer, n, inner = gx.shape
    start = cuda.grid(1)
    for b in range(cuda.blockIdx.y, batch, cuda.gridDim.y):
        for i in range(start, outer * n * inner, cuda.blockDim.x * cuda.gridDim.x):
            o = i // (n * inner)
            j = (i // inner) % n
            k = i % inner
            gx[b, o, j, k] += g[b, o, k] * weights[o, j, k].conjugate()


class Prod(AxisKernels):
    """``prod``: a tree reduction per row. The VJP scans each row once for the product of
    the others (prefix times suffix, shared by a whole batch), then scales the gradient
    (by its conjugate, for complex ``x``: ``g * conj(d prod / d x_j)``)."""

    takes_complex = True

    @staticmethod
    def run_forward(op, x3, attrs):
        return reduce_rows("prod", x3)

    @staticmethod
    def run_vjp(op, g, x3, y, gx, attrs):
        others = _device.empty(x3.shape, x3.dtype)
        kernel = _others_kernel(x3.dtype, block_size())
        one = x3.dtype.type(1)
        _launch_rows(kernel, x3.shape, 1, x3, one, others)
        scale = _scaled_conj_vjp_kernel if x3.dtype.kind == "c" else _scaled_vjp_kernel
        _launch_elements(scale, x3.shape, gx.shape[0], g, others, gx)


@functools.cache
def _extremum_vjp_kernel(threads):
    """Per row, count the elements equal to the result (NaNs, if it is NaN) by a tree
    reduction, and give each of them an equal share of the gradient (as the CPU op)."""
    reduce = block_reducer(_add)

    @cuda.jit
    def kernel(g, x, y, gx):
        counts = cuda.shared.array(threads, numba.int64)
        outer, n, inner = x.shape
        tid = cuda.threadIdx.x
        for b in range(cuda.blockIdx.y, g.shape[0], cuda.gridDim.y):
            for row in range(cuda.blockIdx.x, outer * inner, cuda.gridDim.x):
                o = row // inner
                k = row - o * inner
                target = y[o, k]
                is_nan = target != target
                hits = 0
                for j in range(tid, n, cuda.blockDim.x):
                    v = x[o, j, k]
                    if v == target or (is_nan and v != v):
                        hits += 1
                share = g[b, o, k] / reduce(counts, hits)
                for j in range(tid, n, cuda.blockDim.x):
                    v = x[o, j, k]
                    if v == target or (is_nan and v != v):
                        gx[b, o, j, k] += share

    return kernel


class Extremum(AxisKernels):
    """``max`` / ``min``: a NaN-propagating tree reduction per row; the VJP splits the
    gradient evenly between the tied extrema."""

    kind = None

    @classmethod
    def run_forward(cls, op, x3, attrs):
        return reduce_rows(cls.kind, x3)

    @staticmethod
    def run_vjp(op, g, x3, y, gx, attrs):
        kernel = _extremum_vjp_kernel(block_size())
        _launch_rows(kernel, x3.shape, gx.shape[0], g, x3, y, gx)


class Max(Extremum):
    kind = "max"


class Min(Extremum):
    kind = "min"


# -- logsumexp, softmax, log_softmax: a max and a sum of exponentials per row ------------------


_reduce_larger = block_reducer(_larger)
_reduce_sum = block_reducer(_add)


@cuda.jit(device=True)
def _row_max_and_total(x, o, k, partials, totals):
    """The row's maximum (NaN if any is NaN) and ``sum(exp(x - max))`` in float64, both
    by tree reductions; every thread of the block gets them."""
    n = x.shape[1]
    tid = cuda.threadIdx.x
    top = -math.inf
    for j in range(tid, n, cuda.blockDim.x):
        top = _larger(top, x[o, j, k])
    top = _reduce_larger(partials, top)
    total = 0.0
    for j in range(tid, n, cuda.blockDim.x):
        total += math.exp(x[o, j, k] - top)
    return top, _reduce_sum(totals, total)


@functools.cache
def _logsumexp_kernel(dtype, threads):
    slot = _numba_type(dtype)

    @cuda.jit
    def kernel(x, out):
        partials = cuda.shared.array(threads, slot)
        totals = cuda.shared.array(threads, numba.float64)
        outer, n, inner = x.shape
        for row in range(cuda.blockIdx.x, outer * inner, cuda.gridDim.x):
            o = row // inner
            k = row - o * inner
            top, total = _row_max_and_total(x, o, k, partials, totals)
            if cuda.threadIdx.x == 0:
                # Empty or all -inf, an inf, or a NaN: the maximum is the answer.
                if -math.inf < top < math.inf:
                    out[o, k] = top + math.log(total)
                else:
                    out[o, k] = top

    return kernel


@functools.cache
def _softmax_kernel(dtype, threads):
    slot = _numba_type(dtype)

    @cuda.jit
    def kernel(x, out):
        partials = cuda.shared.array(threads, slot)
        totals = cuda.shared.array(threads, numba.float64)
        outer, n, inner = x.shape
        for row in range(cuda.blockIdx.x, outer * inner, cuda.gridDim.x):
            o = row // inner
            k = row - o * inner
            top, total = _row_max_and_total(x, o, k, partials, totals)
            scale = 1.0 / total
            for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
                out[o, j, k] = math.exp(x[o, j, k] - top) * scale

    return kernel


@functools.cache
def _log_softmax_kernel(dtype, threads):
    slot = _numba_type(dtype)

    @cuda.jit
    def kernel(x, out):
        partials = cuda.shared.array(threads, slot)
        totals = cuda.shared.array(threads, numba.float64)
        outer, n, inner = x.shape
        for row in range(cuda.blockIdx.x, outer * inner, cuda.gridDim.x):
            o = row // inner
            k = row - o * inner
            top, total = _row_max_and_total(x, o, k, partials, totals)
            shift = top + math.log(total)
            for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
                out[o, j, k] = x[o, j, k] - shift

    return kernel


_EXP_KERNELS = {
    "logsumexp": _logsumexp_kernel,
    "softmax": _softmax_kernel,
    "log_softmax": _log_softmax_kernel,
}


def _run_exp_forward(kind, x3, out):
    if out.size:
        kernel = _EXP_KERNELS[kind](x3.dtype, block_size())
        _launch_rows(kernel, x3.shape, 1, x3, out)
    return out


@cuda.jit(cache=True)
def _logsumexp_vjp_kernel(g, x, y, gx):
    # gx[b, o, j, k] += g[b, o, k] * exp(x[o, j, k] - y[o, k])
    batch, outer, n, inner = gx.shape
    start = cuda.grid(1)
    for b in range(cuda.blockIdx.y, batch, cuda.gridDim.y):
        for i in range(start, outer * n * inner, cuda.blockDim.x * cuda.gridDim.x):
            o = i // (n * inner)
            j = (i // inner) % n
            k = i % inner
            gx[b, o, j, k] += g[b, o, k] * math.exp(x[o, j, k] - y[o, k])


class LogSumExp(AxisKernels):
    """``logsumexp``: tree reductions for the row's maximum, then for ``sum(exp(x - max))``;
    the VJP is elementwise, ``g * exp(x - result)``."""

    @staticmethod
    def run_forward(op, x3, attrs):
        return _run_exp_forward("logsumexp", x3, _reduced_out(x3))

    @staticmethod
    def run_vjp(op, g, x3, y, gx, attrs):
        _launch_elements(_logsumexp_vjp_kernel, x3.shape, gx.shape[0], g, x3, y, gx)


@functools.cache
def _softmax_vjp_kernel(log, threads):
    """softmax: ``gx += y * (g - sum(g * y))``; log_softmax: ``gx += g - exp(y) * sum(g)``;
    the row's sum by a float64 tree reduction."""
    reduce = block_reducer(_add)

    @cuda.jit
    def kernel(g, y, gx):
        totals = cuda.shared.array(threads, numba.float64)
        batch, outer, n, inner = gx.shape
        tid = cuda.threadIdx.x
        for b in range(cuda.blockIdx.y, batch, cuda.gridDim.y):
            for row in range(cuda.blockIdx.x, outer * inner, cuda.gridDim.x):
                o = row // inner
                k = row - o * inner
                total = 0.0
                for j in range(tid, n, cuda.blockDim.x):
                    total += g[b, o, j, k] if log else g[b, o, j, k] * y[o, j, k]
                total = reduce(totals, total)
                for j in range(tid, n, cuda.blockDim.x):
                    if log:
                        gx[b, o, j, k] += g[b, o, j, k] - math.exp(y[o, j, k]) * total
                    else:
                        gx[b, o, j, k] += y[o, j, k] * (g[b, o, j, k] - total)

    return kernel


class SoftmaxKernels(AxisKernels):
    """``softmax`` / ``log_softmax``: per row, tree reductions for the maximum and the sum of
    exponentials, then one pass writing the result; the VJP needs one more row sum."""

    kind = None

    @classmethod
    def run_forward(cls, op, x3, attrs):
        out = _device.empty(x3.shape, x3.dtype)
        return _run_exp_forward(cls.kind, x3, out)

    @classmethod
    def run_vjp(cls, op, g, x3, y, gx, attrs):
        kernel = _softmax_vjp_kernel(cls.kind == "log_softmax", block_size())
        _launch_rows(kernel, y.shape, gx.shape[0], g, y, gx)


class Softmax(SoftmaxKernels):
    kind = "softmax"


class LogSoftmax(SoftmaxKernels):
    kind = "log_softmax"


# -- cumsum: a block scan per row --------------------------------------------------------------


@functools.cache
def _cumsum_kernel(dtype, threads, reverse, accumulate):
    """Inclusive sum-scan of each row of ``src`` (``(batch, outer, n, inner)``, or a
    3-d array read with batch 0), written or (``accumulate``) added into ``dst``; ``reverse``
    scans from the row's end (the VJP). Partial sums are kept in ``dtype``."""
    scan = tile_scanner(_add)
    slot = _numba_type(dtype)

    @cuda.jit
    def kernel(src, zero, dst):
        shared = cuda.shared.array(threads, slot)
        batch, outer, n, inner = dst.shape
        tid = cuda.threadIdx.x
        size = cuda.blockDim.x
        for b in range(cuda.blockIdx.y, batch, cuda.gridDim.y):
            for row in range(cuda.blockIdx.x, outer * inner, cuda.gridDim.x):
                o = row // inner
                k = row - o * inner
                carry = zero
                for start in range(0, n, size):
                    j = n - 1 - (start + tid) if reverse else start + tid
                    inside = 0 <= j < n
                    value = src[b, o, j, k] if inside else zero
                    running, _, carry = scan(shared, value, carry, zero)
                    if inside:
                        if accumulate:
                            dst[b, o, j, k] += running
                        else:
                            dst[b, o, j, k] = running

    return kernel


class Cumsum(AxisKernels):
    """``cumsum``: a block scan per row; the VJP is the same scan from the row's end,
    accumulated into the gradient (partial sums in float64, as the CPU's; complex128 for a
    complex gradient)."""

    takes_complex = True

    @staticmethod
    def run_forward(op, x3, attrs):
        out = _device.empty(x3.shape, x3.dtype)
        if out.size:
            kernel = _cumsum_kernel(x3.dtype, block_size(), False, False)
            src = x3.reshape((1,) + x3.shape)
            _launch_rows(kernel, x3.shape, 1, src, x3.dtype.type(0), out.reshape(src.shape))
        return out

    @staticmethod
    def run_vjp(op, g, x3, y, gx, attrs):
        wide = np.complex128 if "c" in (g.dtype.kind, gx.dtype.kind) else np.float64
        kernel = _cumsum_kernel(wide, block_size(), True, True)
        _launch_rows(kernel, gx.shape[1:], gx.shape[0], g, wide(0), gx)


# -- cumprod: a block scan per row; its VJP a recurrence along each row ------------------------


@functools.cache
def _cumprod_kernel(dtype, threads):
    """Inclusive product-scan of each row of ``x`` (``(outer, n, inner)``) into ``out``."""
    scan = tile_scanner(_multiply)
    slot = _numba_type(dtype)

    @cuda.jit
    def kernel(x, one, out):
        shared = cuda.shared.array(threads, slot)
        outer, n, inner = x.shape
        tid = cuda.threadIdx.x
        size = cuda.blockDim.x
        for row in range(cuda.blockIdx.x, outer * inner, cuda.gridDim.x):
            o = row // inner
            k = row - o * inner
            carry = one
            for start in range(0, n, size):
                j = start + tid
                inside = j < n
                value = x[o, j, k] if inside else one
                running, _, carry = scan(shared, value, carry, one)
                if inside:
                    out[o, j, k] = running

    return kernel


@cuda.jit(cache=True)
def _cumprod_vjp_kernel(g, x, y, gx):
    # One thread per (batch, row), walking it from the end as the CPU kernel does:
    # gx[j] += conj(y[j - 1]) * tail(j), tail(j) = g[j] + conj(x[j + 1]) * tail(j + 1), the
    # conjugates being torch's convention on complex values and the identity on real ones
    # (numba types ``tail`` and ``before`` complex where the arrays are).
    batch, outer, n, inner = gx.shape
    rows = outer * inner
    for i in range(cuda.grid(1), batch * rows, cuda.blockDim.x * cuda.gridDim.x):
        b = i // rows
        row = i - b * rows
        o = row // inner
        k = row - o * inner
        tail = 0.0
        for j in range(n - 1, -1, -1):
            tail += g[b, o, j, k]
            before = y[o, j - 1, k].conjugate() if j > 0 else 1.0
            gx[b, o, j, k] += before * tail
            tail *= x[o, j, k].conjugate()


class Cumprod(AxisKernels):
    """``cumprod``: a block scan per row (of products). The VJP is a linear recurrence along
    each row (no division, so zeros are exact): one thread walks a row, rows in parallel."""

    takes_complex = True

    @staticmethod
    def run_forward(op, x3, attrs):
        out = _device.empty(x3.shape, x3.dtype)
        if out.size:
            kernel = _cumprod_kernel(x3.dtype, block_size())
            _launch_rows(kernel, x3.shape, 1, x3, x3.dtype.type(1), out)
        return out

    @staticmethod
    def run_vjp(op, g, x3, y, gx, attrs):
        threads = block_size()
        rows = gx.shape[0] * gx.shape[1] * gx.shape[3]
        _kernels.launch_grid(_cumprod_vjp_kernel, _blocks(rows, threads), threads, g, x3, y,
                             gx)
