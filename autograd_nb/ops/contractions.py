"""Contractions and matrix structure with NumPy's names: ``tensordot``, ``inner``, ``kron``,
``cross``, ``trace``, ``diagonal``, ``diag``, ``tril``, ``triu`` (and ``numpy.linalg``'s
``trace`` and ``diagonal``, over the last two axes).

All are composites, with no kernel or VJP of their own: ``tensordot`` and ``inner`` are one
``einsum`` (a single ``_bmm`` node between transposes), ``kron`` one broadcast ``multiply``,
``cross`` products of ``getitem`` components, ``diagonal`` one integer-array ``getitem``,
and ``diag``, ``tril`` and ``triu`` a ``where`` with a constant mask (not a product with it:
an ``inf`` outside the triangle must give 0, as NumPy's). Their gradients, of any order, and
their CUDA support come from those ops.
"""

import operator
import warnings

import numpy as np

from . import _broadcast
from .linalg import _shape_of, einsum
from .registry import call, public
from .shape import concatenate, stack

#: einsum's labels, one per dimension.
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _tensordot_axes(axes, a_ndim, b_ndim):
    """NumPy's ``axes`` argument as two lists of non-negative axes."""
    try:
        a_axes, b_axes = axes
        a_axes = [a_axes] if isinstance(a_axes, int) else list(a_axes)
        b_axes = [b_axes] if isinstance(b_axes, int) else list(b_axes)
    except TypeError:
        count = operator.index(axes)
        if count < 0:
            raise ValueError("tensordot: axes must be non-negative") from None
        a_axes = list(range(a_ndim - count, a_ndim))
        b_axes = list(range(count))
    if len(a_axes) != len(b_axes):
        raise ValueError("shape-mismatch for sum")
    a_axes = [_broadcast.normalize_axis(x, a_ndim)[0] for x in a_axes]
    b_axes = [_broadcast.normalize_axis(x, b_ndim)[0] for x in b_axes]
    return a_axes, b_axes


@public(method=False, family="linalg")
def tensordot(a, b, axes=2):
    """Sum products over the given axes, as ``numpy.tensordot``.

    Parameters
    ----------
    a, b : Tensor or array_like
    axes : int or (sequence, sequence), optional
        ``N``: the last ``N`` axes of ``a`` with the first ``N`` of ``b``; or the two lists
        of axes to sum over.

    Returns
    -------
    Tensor
        ``a``'s remaining axes, then ``b``'s.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.tensordot(anb.ones((3, 4, 5)), anb.ones((4, 5, 2))).shape
    (3, 2)
    >>> anb.tensordot(anb.ones((3, 4)), anb.ones((2, 3)), axes=([0], [1])).shape
    (4, 2)
    """
    a_shape, b_shape = _shape_of(a), _shape_of(b)
    a_axes, b_axes = _tensordot_axes(axes, len(a_shape), len(b_shape))
    if len(a_shape) + len(b_shape) > len(_LETTERS):
        raise ValueError("tensordot: too many dimensions")
    for i, j in zip(a_axes, b_axes, strict=True):
        if a_shape[i] != b_shape[j]:
            raise ValueError("shape-mismatch for sum")
    a_labels = list(_LETTERS[: len(a_shape)])
    b_labels = list(_LETTERS[len(a_shape) : len(a_shape) + len(b_shape)])
    for i, j in zip(a_axes, b_axes, strict=True):
        b_labels[j] = a_labels[i]
    output = [a_labels[d] for d in range(len(a_shape)) if d not in a_axes]
    output += [b_labels[d] for d in range(len(b_shape)) if d not in b_axes]
    return einsum(f"{''.join(a_labels)},{''.join(b_labels)}->{''.join(output)}", a, b)


@public(method=False, family="linalg")
def inner(a, b, /):
    """Inner product over the last axes, as ``numpy.inner`` (a product where one is 0-d).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.inner(anb.tensor([1.0, 2.0]), anb.tensor([[1.0, 1.0], [2.0, 0.0]]))
    tensor([3., 2.])
    """
    if not _shape_of(a) or not _shape_of(b):
        return call("multiply", a, b)
    return tensordot(a, b, axes=([-1], [-1]))


@public(method=False, family="linalg")
def kron(a, b):
    """Kronecker product, as ``numpy.kron``: blocks of ``b`` scaled by ``a``'s elements.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.kron(anb.tensor([1.0, 10.0]), anb.tensor([1.0, 2.0, 3.0]))
    tensor([ 1.,  2.,  3., 10., 20., 30.])
    """
    a_shape, b_shape = _shape_of(a), _shape_of(b)
    ndim = max(len(a_shape), len(b_shape))
    a_shape = (1,) * (ndim - len(a_shape)) + a_shape
    b_shape = (1,) * (ndim - len(b_shape)) + b_shape
    # (a0, 1, a1, 1, ...) * (1, b0, 1, b1, ...) -> (a0, b0, a1, b1, ...) -> (a0 b0, a1 b1, ...)
    spread_a = tuple(n for pair in zip(a_shape, (1,) * ndim, strict=True) for n in pair)
    spread_b = tuple(n for pair in zip((1,) * ndim, b_shape, strict=True) for n in pair)
    product = call("multiply", call("reshape", a, shape=spread_a),
                   call("reshape", b, shape=spread_b))
    return call("reshape", product, shape=tuple(m * n for m, n in zip(a_shape, b_shape,
                                                                          strict=True)))


def _move_to_end(x, axis):
    ndim = len(_shape_of(x))
    (axis,) = _broadcast.normalize_axis(axis, ndim)
    if axis == ndim - 1:
        return x
    return call("transpose", x, axes=tuple(d for d in range(ndim) if d != axis) + (axis,))


def _component(x, j, length):
    """Component ``j`` along the last axis of ``x``; 0 past ``length`` (a 2-vector's z)."""
    return call("getitem", x, index=(Ellipsis, j)) if j < length else 0.0


@public(method=False, family="linalg")
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """Cross products of 3-vectors (and 2-vectors), as ``numpy.cross``.

    Parameters
    ----------
    a, b : Tensor or array_like
        The vectors lie along ``axisa`` / ``axisb`` (both ``axis`` where given), of length 3
        or 2; the other dimensions broadcast.
    axisa, axisb, axisc, axis : int, optional

    Returns
    -------
    Tensor
        The cross products along ``axisc``; for two 2-vectors, their z component alone.
        2-vectors are NumPy's rule, which NumPy 2 deprecates: they warn as NumPy's do.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.cross(anb.tensor([1.0, 0.0, 0.0]), anb.tensor([0.0, 1.0, 0.0]))
    tensor([0., 0., 1.])
    """
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = _move_to_end(a, axisa), _move_to_end(b, axisb)
    n, m = _shape_of(a)[-1], _shape_of(b)[-1]
    if n not in (2, 3) or m not in (2, 3):
        raise ValueError("incompatible dimensions for cross product\n"
                         "(dimension must be 2 or 3)")
    if n == 2 or m == 2:
        warnings.warn("Arrays of 2-dimensional vectors are deprecated. Use arrays of "
                      "3-dimensional vectors instead. (deprecated in NumPy 2.0)",
                      DeprecationWarning, stacklevel=2)
    a0, a1, a2 = (_component(a, j, n) for j in range(3))
    b0, b1, b2 = (_component(b, j, m) for j in range(3))
    z = a0 * b1 - a1 * b0
    if n == m == 2:
        return z
    x = a1 * b2 - a2 * b1 if n == 3 and m == 3 else (a1 * b2 if m == 3 else -(a2 * b1))
    y = a2 * b0 - a0 * b2 if n == 3 and m == 3 else (-(a0 * b2) if m == 3 else a2 * b0)
    parts = [call("broadcast_to", p, shape=_shape_of(z)) if _shape_of(p) != _shape_of(z)
             else p for p in (x, y, z)]
    result = stack(parts, axis=-1)
    ndim = len(_shape_of(result))
    (axisc,) = _broadcast.normalize_axis(axisc, ndim)
    if axisc != ndim - 1:
        order = list(range(ndim - 1))
        order.insert(axisc, ndim - 1)
        result = call("transpose", result, axes=tuple(order))
    return result


@public(family="linalg")
def diagonal(a, offset=0, axis1=0, axis2=1):
    """The diagonal (``offset`` above it, below for negative) of the matrices on ``axis1``
    and ``axis2``, as ``numpy.diagonal``: those axes removed, the diagonal last. A copy.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.diagonal(anb.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor([1., 4.])
    >>> anb.diagonal(anb.ones((2, 3, 4)), offset=1, axis1=1, axis2=2).shape
    (2, 3)
    """
    shape = _shape_of(a)
    ndim = len(shape)
    if ndim < 2:
        raise ValueError("diag requires an array of at least two dimensions")
    first = _broadcast.normalize_axis(axis1, ndim)[0]
    second = _broadcast.normalize_axis(axis2, ndim)[0]
    if first == second:
        raise ValueError("axis1 and axis2 cannot be the same")
    offset = operator.index(offset)
    rows, columns = shape[first], shape[second]
    length = max(0, min(rows + min(offset, 0), columns - max(offset, 0)))
    steps = np.arange(length, dtype=np.int64)
    others = [d for d in range(ndim) if d not in (first, second)]
    if others + [first, second] != list(range(ndim)):
        a = call("transpose", a, axes=tuple(others) + (first, second))
    index = (Ellipsis, steps + max(-offset, 0), steps + max(offset, 0))
    return call("getitem", a, index=index)


@public(family="linalg")
def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """Sum along a diagonal (see :func:`diagonal`), as ``numpy.trace``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> a = anb.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> anb.trace(a)
    tensor(5., grad_fn=<SumBackward>)
    >>> anb.grad(anb.trace(a), a)
    (tensor([[1., 0.],
            [0., 1.]]),)
    """
    if out is not None:
        raise TypeError("trace: out= is not supported (Tensors are not written in place)")
    result = call("sum", diagonal(a, offset, axis1, axis2), axis=-1)
    return result if dtype is None else call("astype", result, dtype=dtype)


def _where_mask(mask, x):
    """``x`` where ``mask`` (a constant), else 0, in ``x``'s dtype."""
    zero = np.zeros((), dtype=_dtype_of(x))
    return call("where", mask, x, zero)


def _dtype_of(x):
    dtype = getattr(x, "dtype", None)
    return np.dtype(dtype) if dtype is not None else np.asarray(x).dtype


@public(method=False, family="linalg")
def diag(v, k=0):
    """The ``k``-th diagonal of a 2-D ``v``, or the square matrix with the 1-D ``v`` on its
    ``k``-th diagonal, as ``numpy.diag``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.diag(anb.tensor([1.0, 2.0]))
    tensor([[1., 0.],
            [0., 2.]])
    >>> anb.diag(anb.tensor([[1.0, 2.0], [3.0, 4.0]]), k=1)
    tensor([2.])
    """
    shape = _shape_of(v)
    k = operator.index(k)
    if len(shape) == 2:
        return diagonal(v, k)
    if len(shape) != 1:
        raise ValueError("Input must be 1- or 2-d.")
    size = shape[0] + abs(k)
    if k:  # v in columns k.. (k > 0) or ..-k: padded with zeros to the matrix's width
        zeros = np.zeros(abs(k), dtype=_dtype_of(v))
        v = concatenate([zeros, v] if k > 0 else [v, zeros])
    mask = np.eye(size, k=k, dtype=bool)
    return _where_mask(mask, call("reshape", v, shape=(1, size)))


@public(method=False, family="linalg")
def tril(m, k=0):
    """``m`` with the elements above the ``k``-th diagonal set to zero (over the last two
    axes), as ``numpy.tril``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.tril(anb.ones((2, 3)))
    tensor([[1., 0., 0.],
            [1., 1., 0.]])
    """
    shape = _shape_of(m)
    if not shape:
        raise ValueError("tril: the input must be at least 1-dimensional")
    return _where_mask(np.tri(*shape[-2:], k=operator.index(k), dtype=bool), m)


@public(method=False, family="linalg")
def triu(m, k=0):
    """``m`` with the elements below the ``k``-th diagonal set to zero (over the last two
    axes), as ``numpy.triu``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.triu(anb.ones((2, 3)), k=1)
    tensor([[0., 1., 1.],
            [0., 0., 1.]])
    """
    shape = _shape_of(m)
    if not shape:
        raise ValueError("triu: the input must be at least 1-dimensional")
    return _where_mask(~np.tri(*shape[-2:], k=operator.index(k) - 1, dtype=bool), m)


@public("linalg.trace", method=False, family="linalg")
def linalg_trace(x, /, *, offset=0, dtype=None):
    """Sums along the diagonals of the matrices on the *last* two axes, as
    ``numpy.linalg.trace`` (``numpy.trace`` takes the first two).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.linalg.trace(anb.ones((3, 2, 2)))
    tensor([2., 2., 2.])
    """
    return trace(x, offset, -2, -1, dtype)


@public("linalg.diagonal", method=False, family="linalg")
def linalg_diagonal(x, /, *, offset=0):
    """The diagonals of the matrices on the *last* two axes, as ``numpy.linalg.diagonal``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.linalg.diagonal(anb.ones((3, 2, 2))).shape
    (3, 2)
    """
    return diagonal(x, offset, -2, -1)
