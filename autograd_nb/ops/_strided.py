"""Data-movement kernels shared by the shape and indexing families.

One strided-copy kernel pair serves transposes, broadcasts and basic slicing: the source is a
flat buffer read at ``offset + sum(index * strides)`` with ``shape`` and ``strides`` passed as
int64 arrays (in elements), so numba compiles it once per dtype whatever the number of
dimensions. Its VJP scatters back with ``+=``, which also sums over stride-0 (broadcast)
dimensions. Advanced indexing uses an explicit flat index map instead.
"""

import numpy as np
from numba import njit

from . import _broadcast


@njit(cache=True, nogil=True)
def gather(source, offset, shape, strides, out):
    """``out[i] = source[offset + position(i) . strides]`` over the C-order positions of shape."""
    nd = shape.size
    inner = shape[nd - 1]
    step = strides[nd - 1]
    rows = out.size // inner if inner > 0 else 0
    for r in range(rows):
        rem = r
        start = offset
        for d in range(nd - 2, -1, -1):
            start += (rem % shape[d]) * strides[d]
            rem //= shape[d]
        base = r * inner
        for j in range(inner):
            out[base + j] = source[start + j * step]


@njit(cache=True, nogil=True)
def scatter_add(values, offset, shape, strides, target):
    """The VJP of :func:`gather`: ``target[offset + position(i) . strides] += values[i]``."""
    nd = shape.size
    inner = shape[nd - 1]
    step = strides[nd - 1]
    rows = values.size // inner if inner > 0 else 0
    for r in range(rows):
        rem = r
        start = offset
        for d in range(nd - 2, -1, -1):
            start += (rem % shape[d]) * strides[d]
            rem //= shape[d]
        base = r * inner
        for j in range(inner):
            target[start + j * step] += values[base + j]


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
