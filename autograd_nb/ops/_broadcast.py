"""Broadcasting and axis helpers, written once and shared by every op family."""

import functools
import operator

import numpy as np

from .registry import call


def broadcast_shapes(*shapes):
    """NumPy's broadcast of ``shapes``; ValueError naming the shapes when they don't fit."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        listed = ", ".join(str(tuple(s)) for s in shapes)
        raise ValueError(f"operands could not be broadcast together with shapes {listed}") from None


def contiguous_strides(shape):
    """Element (not byte) strides of a C-contiguous array of ``shape``."""
    strides = []
    step = 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def broadcast_strides(shape, out_shape):
    """Element strides that read a C-contiguous array of ``shape`` as ``out_shape``.

    Dimensions that are broadcast (missing, or 1 against n) get stride 0.
    """
    pad = len(out_shape) - len(shape)
    own = contiguous_strides(shape)
    strides = [0] * pad
    for n, step in zip(shape, own):
        strides.append(0 if n == 1 else step)
    return strides


def collapse(out_shape, strides_list):
    """Merge adjacent dimensions that every operand walks contiguously.

    Returns ``(shape, strides_list)`` as int64 arrays with at least one dimension, so strided
    kernels loop over as few and as long rows as the layout allows.
    """
    shape = [int(n) for n in out_shape if n != 1] if out_shape else []
    keep = [i for i, n in enumerate(out_shape) if n != 1]
    strides_list = [[s[i] for i in keep] for s in strides_list]
    if not shape:
        shape = [1]
        strides_list = [[0] for _ in strides_list]
    merged_shape = [shape[0]]
    merged = [[s[0]] for s in strides_list]
    for d in range(1, len(shape)):
        n = shape[d]
        if all(m[-1] == s[d] * n for m, s in zip(merged, strides_list)):
            merged_shape[-1] *= n
            for m, s in zip(merged, strides_list):
                m[-1] = s[d]
        else:
            merged_shape.append(n)
            for m, s in zip(merged, strides_list):
                m.append(s[d])
    as_array = np.asarray
    return as_array(merged_shape, np.int64), [as_array(m, np.int64) for m in merged]


@functools.lru_cache(maxsize=4096)
def layout(out_shape, shapes):
    """Collapsed shape and per-operand strides that read arrays of ``shapes`` as ``out_shape``.

    Cached: a program repeats the same few layouts, and this is per-op Python work.
    """
    strides = [broadcast_strides(shape, out_shape) for shape in shapes]
    return collapse(out_shape, strides)


@functools.lru_cache(maxsize=4096)
def broadcast_shapes_cached(shapes):
    """:func:`broadcast_shapes` of a tuple of shapes, cached."""
    return broadcast_shapes(*shapes)


def normalize_axis(axis, ndim):
    """Canonical, sorted tuple of non-negative axes; None means all of them."""
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    result = []
    for a in axes:
        a = operator.index(a)  # as NumPy: TypeError for ``axis=1.0``, never a silent int()
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(a, ndim)
        a %= ndim
        if a in result:
            raise ValueError("duplicate value in 'axis'")
        result.append(a)
    return tuple(sorted(result))


def reduced_shape(shape, axes, keepdims):
    """Shape of a reduction of ``shape`` over ``axes``."""
    if keepdims:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def sum_to_shape(tensor, shape):
    """Sum a gradient Tensor down to ``shape`` (the inverse of broadcasting it there).

    Used by the differentiable rules: leading dimensions the input did not have are summed
    away, and dimensions where it had 1 are summed with ``keepdims``.
    """
    shape = tuple(shape)
    if tensor.shape == shape:
        return tensor
    lead = tensor.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and tensor.shape[lead + i] != 1
    )
    if axes:
        tensor = call("sum", tensor, axis=axes, keepdims=True)
    return call("reshape", tensor, shape=shape)
