"""``anb.linalg.matrix_power`` and ``multi_dot``, composites of ``matmul`` (and of
``linalg_lu``'s ``inv``), and ``numpy.linalg``'s versions of top-level functions
(``matrix_transpose``, ``vecdot``).
"""

import math
import operator

import numpy as np

from ._linalg_common import (
    LinAlgError,
    _check_square,
    _constant_like,
    _dtype_of,
    _eye_like,
    _mT,
)
from .linalg import _shape_of, dot, matmul
from .linalg_lu import inv
from .registry import call, public


@public("linalg.matrix_power", method=False, family="linalg")
def matrix_power(a, n):
    """``a`` raised to the integer power ``n``, as ``numpy.linalg.matrix_power``.

    Repeated squaring with :func:`matmul`; ``n = 0`` gives identities (constant) and ``n < 0``
    powers of :func:`inv`.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> a = anb.tensor([[1.0, 1.0], [0.0, 1.0]], requires_grad=True)
    >>> anb.linalg.matrix_power(a, 3)
    tensor([[1., 3.],
            [0., 1.]], grad_fn=<BmmBackward>)
    """
    try:
        n = operator.index(n)
    except TypeError as error:
        raise TypeError("exponent must be an integer") from error
    shape = _shape_of(a)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        _check_square("linalg.matrix_power", shape)
    if n == 0:
        return _constant_like(np.array(_eye_like(shape, _dtype_of(a))))
    if n < 0:
        a = inv(a)
        n = -n
    result, square = None, a
    while True:
        if n & 1:
            result = square if result is None else matmul(result, square)
        n >>= 1
        if not n:
            break
        square = matmul(square, square)
    return call("reshape", result, shape=shape) if result is a else result


@public("linalg.multi_dot", method=False, family="linalg")
def multi_dot(arrays, *, out=None):
    """The product of two or more matrices in the cheapest order, as
    ``numpy.linalg.multi_dot``.

    The first argument may be 1-D (a row vector) and the last 1-D (a column vector); the
    others must be 2-D. The order of the products is chosen by NumPy's dynamic programme on
    the shapes.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.linalg.multi_dot([anb.ones((2, 3)), anb.ones((3, 4)), anb.ones(4)])
    tensor([12., 12.])
    """
    if out is not None:
        raise TypeError("linalg.multi_dot: out= is not supported (Tensors are not written "
                        "in place)")
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError("Expecting at least two arrays.")
    if len(arrays) == 2:
        return dot(arrays[0], arrays[1])
    first, last = _shape_of(arrays[0]), _shape_of(arrays[-1])
    if len(first) == 1:
        arrays[0] = call("reshape", arrays[0], shape=(1,) + first)
    if len(last) == 1:
        arrays[-1] = call("reshape", arrays[-1], shape=last + (1,))
    shapes = [_shape_of(x) for x in arrays]
    for shape in shapes:
        if len(shape) != 2:
            raise LinAlgError(f"{len(shape)}-dimensional array given. Array must be "
                              "two-dimensional")
    order = _chain_order([s[0] for s in shapes] + [shapes[-1][1]])
    return _drop_vector_ends(_chain_product(arrays, order, 0, len(arrays) - 1), first, last)


def _drop_vector_ends(result, first, last):
    """``multi_dot``'s ``result`` without the axes a 1-D ``first`` or ``last`` operand (of
    these shapes) was given."""
    if len(first) == 1 and len(last) == 1:
        return call("reshape", result, shape=())
    if len(first) == 1:
        return call("reshape", result, shape=result.shape[1:])
    if len(last) == 1:
        return call("reshape", result, shape=result.shape[:1])
    return result


def _chain_order(sizes):
    """NumPy's matrix-chain order: ``split[i][j]``, where to split the product ``i..j``."""
    count = len(sizes) - 1
    cost = [[0] * count for _ in range(count)]
    split = [[0] * count for _ in range(count)]
    for length in range(1, count):
        for i in range(count - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + sizes[i] * sizes[k + 1] * sizes[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain_product(arrays, split, i, j):
    if i == j:
        return arrays[i]
    k = split[i][j]
    return matmul(_chain_product(arrays, split, i, k), _chain_product(arrays, split, k + 1, j))


# -- numpy.linalg's versions of top-level functions ---------------------------------------------


@public("linalg.matrix_transpose", method=False, family="linalg")
def matrix_transpose(x, /):
    """The matrices of ``x (..., M, N)`` transposed, as ``numpy.linalg.matrix_transpose``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.linalg.matrix_transpose(anb.ones((2, 3, 4))).shape
    (2, 4, 3)
    """
    if len(_shape_of(x)) < 2:
        raise ValueError("Input array must be at least 2-dimensional")
    return _mT(x)


@public("linalg.vecdot", method=False, family="linalg")
def vecdot(x1, x2, /, *, axis=-1):
    """Dot products of vectors along ``axis`` (broadcasting), as ``numpy.linalg.vecdot``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.linalg.vecdot(anb.tensor([[1.0, 2.0], [3.0, 4.0]]), anb.tensor([1.0, 1.0]))
    tensor([3., 7.])
    """
    return call("sum", call("multiply", x1, x2), axis=axis)
