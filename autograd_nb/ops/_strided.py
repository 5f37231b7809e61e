"""Data-movement kernels shared by the shape and indexing families.

One strided-copy kernel pair serves transposes, broadcasts and basic slicing: the source is a
flat buffer read at ``offset + sum(index * strides)`` with ``shape`` and ``strides`` passed as
int64 arrays (in elements), so numba compiles it once per dtype whatever the number of
dimensions. Its VJP scatters back with ``+=``, which also sums over stride-0 (broadcast)
dimensions. Advanced indexing uses an explicit flat index map instead.
"""

import functools

import numpy as np
from numba import njit

from . import _broadcast
from ._pointers import array_at, serves_complex


@njit(cache=True, nogil=True)
def gather(source, offset, shape, strides, out, add=False):
    """``out[i] = source[offset + position(i) . strides]`` over the C-order positions of shape
    (``+=`` with ``add``: the compiled executor's VJP of a scatter)."""
    nd = shape.size
    inner = shape[nd - 1]
    step = strides[nd - 1]
    rows = out.size // inner if inner > 0 else 0
    for r in range(rows):
        start = _row_start(r, offset, shape, strides)
        base = r * inner
        if step == 1:  # contiguous rows (a slice's): slice views, a loop that vectorises
            row = source[start:start + inner]
            row_out = out[base:base + inner]
            if add:
                for j in range(inner):
                    row_out[j] += row[j]
            else:
                for j in range(inner):
                    row_out[j] = row[j]
        elif add:
            for j in range(inner):
                out[base + j] += source[start + j * step]
        else:
            for j in range(inner):
                out[base + j] = source[start + j * step]


@njit(cache=True, nogil=True)
def _row_start(r, offset, shape, strides):
    """Where row ``r`` of the C-order rows of ``shape`` (its last dimension is the row)
    starts: what is left of ``r`` after the inner dimensions is the outermost index, so a 2-D
    layout divides nothing."""
    nd = shape.size
    start = offset
    for d in range(nd - 2, 0, -1):
        start += (r % shape[d]) * strides[d]
        r //= shape[d]
    if nd > 1:
        start += r * strides[0]
    return start


@njit(cache=True, nogil=True)
def scatter_add(values, offset, shape, strides, target):
    """The VJP of :func:`gather`: ``target[offset + position(i) . strides] += values[i]``."""
    nd = shape.size
    inner = shape[nd - 1]
    step = strides[nd - 1]
    rows = values.size // inner if inner > 0 else 0
    for r in range(rows):
        start = _row_start(r, offset, shape, strides)
        base = r * inner
        if step == 1:
            row = target[start:start + inner]
            row_values = values[base:base + inner]
            for j in range(inner):
                row[j] += row_values[j]
        else:
            for j in range(inner):
                target[start + j * step] += values[base + j]


@njit(cache=True, nogil=True)
def assign(values, value_strides, target, offset, shape, strides):
    """``target[offset + position . strides] = values[position . value_strides]`` over the
    C-order positions of ``shape`` (a basic ``x[index] = v``, ``v`` broadcast by stride 0)."""
    nd = shape.size
    inner = shape[nd - 1]
    step = strides[nd - 1]
    value_step = value_strides[nd - 1]
    rows = 1
    for d in range(nd - 1):
        rows *= shape[d]
    if inner <= 0:
        return
    for r in range(rows):
        rem = r
        start = offset
        value_start = 0
        for d in range(nd - 2, -1, -1):
            position = rem % shape[d]
            start += position * strides[d]
            value_start += position * value_strides[d]
            rem //= shape[d]
        for j in range(inner):
            target[start + j * step] = values[value_start + j * value_step]


@njit(cache=True, nogil=True)
def take(source, index, out):
    """``out[i] = source[index[i]]`` (advanced indexing through a flat index map)."""
    for i in range(index.size):
        out[i] = source[index[i]]


@njit(cache=True, nogil=True)
def put_add(values, index, target):
    """The VJP of :func:`take`: repeated indices accumulate."""
    for i in range(index.size):
        target[index[i]] += values[i]


@njit(cache=True, nogil=True)
def accumulate(values, target):
    """``target += values`` over flat buffers of the same length (the VJP of a reshape)."""
    for i in range(values.size):
        target[i] += values[i]


def strided_copy(source, shape, strides, offset=0):
    """A new C-contiguous array of ``shape`` read from flat ``source`` through ``strides``."""
    out = np.empty(shape, dtype=source.dtype)
    if out.size:
        collapsed, (collapsed_strides,) = _broadcast.collapse(shape, [strides])
        gather(source.reshape(-1), offset, collapsed, collapsed_strides, out.reshape(-1))
    return out


def strided_scatter_add(values, shape, strides, target, offset=0):
    """Add ``values`` (of ``shape``) into flat ``target`` through ``strides`` (VJP of a copy)."""
    if values.size:
        collapsed, (collapsed_strides,) = _broadcast.collapse(shape, [strides])
        scatter_add(values.reshape(-1), offset, collapsed, collapsed_strides, target.reshape(-1))


# -- drivers of the compiled executor and of compiled forwards (``_pointers``'s convention) ---


@serves_complex
@njit(cache=True, nogil=True)
def accumulate_driver(operands, ints, floats, like):
    """``target += values`` over ``ints[0]`` elements (seeds, the VJP of a reshape)."""
    n = ints[0]
    accumulate(array_at(operands[0], n, like), array_at(operands[1], n, like))


@serves_complex
@njit(cache=True, nogil=True)
def scatter_add_driver(operands, ints, floats, like):
    """:func:`scatter_add` of ``values`` (``ints``: ``[n, size, offset, nd, shape.., strides..]``)
    into a target of ``size`` elements."""
    n, size, offset, nd = ints[0], ints[1], ints[2], ints[3]
    scatter_add(array_at(operands[0], n, like), offset, ints[4:4 + nd], ints[4 + nd:4 + 2 * nd],
                array_at(operands[1], size, like))


@serves_complex
@njit(cache=True, nogil=True)
def gather_add_driver(operands, ints, floats, like):
    """``target += source[offset + position . strides]`` (``ints`` as :func:`scatter_add_driver`
    with ``n`` the target's elements and ``size`` the source's)."""
    n, size, offset, nd = ints[0], ints[1], ints[2], ints[3]
    gather(array_at(operands[0], size, like), offset, ints[4:4 + nd], ints[4 + nd:4 + 2 * nd],
           array_at(operands[1], n, like), True)


_INDEX = np.empty(0, dtype=np.int64)


@serves_complex
@njit(cache=True, nogil=True)
def put_add_driver(operands, ints, floats, like):
    """:func:`put_add` of ``ints[0]`` values through a flat int64 index map into a target of
    ``ints[1]`` elements (the VJP of advanced indexing)."""
    n, size = ints[0], ints[1]
    put_add(array_at(operands[0], n, like), array_at(operands[1], n, _INDEX),
            array_at(operands[2], size, like))


@serves_complex
@njit(cache=True, nogil=True)
def take_add_driver(operands, ints, floats, like):
    """``target[i] += source[index[i]]`` over ``ints[0]`` elements of the target, from a
    source of ``ints[1]`` (the VJP of the advanced-index scatter)."""
    n, size = ints[0], ints[1]
    source = array_at(operands[0], size, like)
    index = array_at(operands[1], n, _INDEX)
    target = array_at(operands[2], n, like)
    for i in range(n):
        target[i] += source[index[i]]


# The forward drivers (``Op.forward_spec``): operands are the inputs, then the output, which
# they write in full.


@serves_complex
@njit(cache=True, nogil=True)
def copy_driver(operands, ints, floats, like):
    """``out = source`` over ``ints[0]`` elements (a reshape's copy)."""
    n = ints[0]
    array_at(operands[1], n, like)[:] = array_at(operands[0], n, like)


@serves_complex
@njit(cache=True, nogil=True)
def gather_driver(operands, ints, floats, like):
    """``out = source[offset + position . strides]`` (:func:`gather`; ``ints`` as
    :func:`scatter_add_driver`, ``n`` the output's elements and ``size`` the source's)."""
    n, size, offset, nd = ints[0], ints[1], ints[2], ints[3]
    gather(array_at(operands[0], size, like), offset, ints[4:4 + nd], ints[4 + nd:4 + 2 * nd],
           array_at(operands[1], n, like))


@serves_complex
@njit(cache=True, nogil=True)
def take_driver(operands, ints, floats, like):
    """``out[i] = source[offsets[i]]`` (:func:`take`): ``ints`` is ``[n, size, offsets..]``,
    ``n`` flat offsets into a source of ``size`` elements."""
    n, size = ints[0], ints[1]
    take(array_at(operands[0], size, like), ints[2:2 + n], array_at(operands[1], n, like))


@serves_complex
@njit(cache=True, nogil=True)
def scatter_driver(operands, ints, floats, like):
    """Zeros, then :func:`scatter_add` of the values through a strided layout (``ints`` as
    :func:`scatter_add_driver`): the adjoint of a basic selection."""
    n, size, offset, nd = ints[0], ints[1], ints[2], ints[3]
    target = array_at(operands[1], size, like)
    target[:] = 0
    scatter_add(array_at(operands[0], n, like), offset, ints[4:4 + nd], ints[4 + nd:4 + 2 * nd],
                target)


@serves_complex
@njit(cache=True, nogil=True)
def put_driver(operands, ints, floats, like):
    """Zeros, then :func:`put_add` of ``n`` values at flat offsets (``ints``: ``[n, size,
    offsets..]``, ``size`` the target's elements; repeated offsets accumulate in order)."""
    n, size = ints[0], ints[1]
    target = array_at(operands[1], size, like)
    target[:] = 0
    put_add(array_at(operands[0], n, like), ints[2:2 + n], target)


@serves_complex
@njit(cache=True, nogil=True)
def assign_strided_driver(operands, ints, floats, like):
    """``out = x`` then :func:`assign` of ``v`` (``x[index] = v`` for a basic index):
    ``ints`` is ``[size, value_size, offset, nd, shape.., strides.., value_strides..]``."""
    size, value_size, offset, nd = ints[0], ints[1], ints[2], ints[3]
    out = array_at(operands[2], size, like)
    out[:] = array_at(operands[0], size, like)
    assign(array_at(operands[1], value_size, like), ints[4 + 2 * nd:4 + 3 * nd], out, offset,
           ints[4:4 + nd], ints[4 + nd:4 + 2 * nd])


@serves_complex
@njit(cache=True, nogil=True)
def assign_offsets_driver(operands, ints, floats, like):
    """``out = x`` then ``out[targets[i]] = v[sources[i]]`` (``x[index] = v`` for an advanced
    index): ``ints`` is ``[size, value_size, count, targets.., sources..]``."""
    size, value_size, count = ints[0], ints[1], ints[2]
    out = array_at(operands[2], size, like)
    out[:] = array_at(operands[0], size, like)
    values = array_at(operands[1], value_size, like)
    for i in range(count):
        out[ints[3 + i]] = values[ints[3 + count + i]]


@functools.lru_cache(maxsize=4096)
def strided_ints(n, size, offset, shape, strides):
    """The ``ints`` of :func:`scatter_add_driver` / :func:`gather_add_driver`, collapsed
    (``shape`` and ``strides`` as tuples; cached, as programs repeat their layouts)."""
    collapsed, (collapsed_strides,) = _broadcast.collapse(shape, [list(strides)])
    return (n, size, offset, len(collapsed), *collapsed.tolist(), *collapsed_strides.tolist())


def assign_ints(size, value_size, offset, shape, strides, value_strides):
    """The ``ints`` of :func:`assign_strided_driver`, collapsed."""
    collapsed, (collapsed_strides, collapsed_values) = _broadcast.collapse(
        shape, [list(strides), list(value_strides)]
    )
    return (size, value_size, offset, len(collapsed), *collapsed.tolist(),
            *collapsed_strides.tolist(), *collapsed_values.tolist())
