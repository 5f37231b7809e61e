"""``anb.linalg.norm``, ``vector_norm`` and ``matrix_norm``.

``_norm2``: the 2-norm and Frobenius norm, as a reduction (``AxisOp``): one pass each way
(``sqrt(sum(x * x))`` is three), a zero gradient at zero (torch's subgradient), and a driver
for the compiled executor. The other norms are composites of elementwise ops and reductions,
the matrix 2-norms and the nuclear norm of ``linalg_svd``'s ``svdvals``.
"""

import operator

import numpy as np
from numba import njit

from . import _broadcast
from ._linalg_common import _divide_or_zero, _dtype_of, _operands
from .linalg import _shape_of
from .linalg_svd import svdvals
from .reduction import AxisOp, expand_reduced
from .registry import call, public


@njit(cache=True, nogil=True)
def _norm2_forward(x, out):
    outer, n, inner = x.shape
    for o in range(outer):
        for k in range(inner):
            total = x.dtype.type(0)
            for j in range(n):
                v = x[o, j, k]
                total += v * v
            out[o, k] = np.sqrt(total)


@njit(cache=True, nogil=True)
def _norm2_vjp(g, x, y, gx):
    # x / |x|, and 0 at |x| = 0 (torch's subgradient there).
    outer, n, inner = x.shape
    for o in range(outer):
        for k in range(inner):
            if y[o, k] != 0:
                scale = g[o, k] / y[o, k]
                for j in range(n):
                    gx[o, j, k] += scale * x[o, j, k]


def _numpy_norm2_vjp(g, x, y, gx):
    scale = (g / y)[:, None, :]
    np.add(gx, scale * x, out=gx, where=(y != 0)[:, None, :], casting="unsafe")


class Norm2(AxisOp):
    """``_norm2(x, axis=None, keepdims=False)``: ``sqrt(sum(x * x))`` over ``axis``, with a
    zero gradient where the norm is 0."""

    name = "_norm2"
    family = "linalg"
    method = False
    cpu_only = True
    saves = (0,)
    saves_output = True
    forward_kernel = staticmethod(_norm2_forward)
    vjp_kernel = staticmethod(_norm2_vjp)
    numpy_vjp = staticmethod(_numpy_norm2_vjp)

    def rule(self, k, grad_output, inputs, output, attrs):
        g = expand_reduced(grad_output, attrs)
        y = expand_reduced(output, attrs)
        return g * _divide_or_zero(inputs[0], y)


Norm2()


# -- the public functions ---------------------------------------------------------------------


def _float_operand(name, x):
    """``x`` as a float or complex Tensor (integers become float64, as NumPy's norms make
    them)."""
    if getattr(x, "device", "cpu") == "cpu":
        (x,) = _operands(name, x, complex_ok=True)
    elif _dtype_of(x).kind == "c":  # (casting to float would drop the imaginary part)
        raise NotImplementedError(f"{name} is not implemented for complex CUDA tensors (yet); "
                                  "move its operand to the CPU with .cpu()")
    elif _dtype_of(x).kind != "f":
        x = call("astype", x, dtype=np.float64)
    return x


def _norm2(x, axis, keepdims):
    """``sqrt(sum(x * x))`` over ``axis``: the ``_norm2`` op on the CPU, the same from
    elementwise ops and ``sum`` (which have CUDA kernels) elsewhere. A complex ``x``'s norm
    is that of ``abs(x)`` (gradient ``x / norm``, as torch's)."""
    if _dtype_of(x).kind == "c":
        x = call("abs", x)
    if getattr(x, "device", "cpu") == "cpu":
        return call("_norm2", x, axis=axis, keepdims=keepdims)
    total = call("sum", x * x, axis=axis, keepdims=keepdims)
    return _root_or_zero(total, 2.0)


def _root_or_zero(total, p):
    """``total ** (1 / p)``, with a zero gradient where ``total`` is 0."""
    zero = total == 0
    return call("where", zero, 0.0, call("where", zero, 1.0, total) ** (1.0 / p))


def _vector_norm(x, ord, axis, keepdims):  # noqa: A002 - NumPy's name
    if ord is None or ord == 2:
        return _norm2(x, axis, keepdims)
    if isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    if ord == np.inf:
        return call("max", call("abs", x), axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return call("min", call("abs", x), axis=axis, keepdims=keepdims)
    if ord == 0:  # the count of nonzeros: no gradient
        return call("sum", call("astype", x != 0, dtype=_dtype_of(x)), axis=axis,
                    keepdims=keepdims)
    if ord == 1:
        return call("sum", call("abs", x), axis=axis, keepdims=keepdims)
    p = float(ord)
    return _root_or_zero(call("sum", call("abs", x) ** p, axis=axis, keepdims=keepdims), p)


def _matrix_norm(x, ord, row, column, keepdims):  # noqa: A002 - NumPy's name
    ndim = len(_shape_of(x))
    kept_shape = list(_shape_of(x))
    kept_shape[row] = kept_shape[column] = 1
    if ord in (2, -2, "nuc"):
        others = [d for d in range(ndim) if d not in (row, column)]
        values = svdvals(call("transpose", x, axes=tuple(others) + (row, column)))
        reduce = {2: "max", -2: "min", "nuc": "sum"}[ord]
        result = call(reduce, values, axis=-1)
    elif ord in (1, -1):
        column -= column > row
        summed = call("sum", call("abs", x), axis=row)
        result = call("max" if ord == 1 else "min", summed, axis=column)
    elif ord in (np.inf, -np.inf):
        row -= row > column
        summed = call("sum", call("abs", x), axis=column)
        result = call("max" if ord == np.inf else "min", summed, axis=row)
    elif ord in (None, "fro", "f"):
        return _norm2(x, (row, column), keepdims)
    else:
        raise ValueError("Invalid norm order for matrices.")
    if keepdims:
        result = call("reshape", result, shape=tuple(kept_shape))
    return result


@public("linalg.norm", method=False, family="linalg")
def norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002 - NumPy's name
    """Vector or matrix norm, as ``numpy.linalg.norm``.

    Parameters
    ----------
    x : Tensor or array_like
    ord : {None, 'fro', 'nuc', inf, -inf, 0, 1, -1, 2, -2} or float, optional
        Vectors: ``None``/2 the 2-norm, ``inf``/``-inf`` the largest/smallest absolute
        value, 0 the number of nonzeros (no gradient), other ``p``
        ``sum(abs(x) ** p) ** (1 / p)``. Matrices: ``None``/'fro' Frobenius, 'nuc' the sum
        of the singular values, 2/-2 the largest/smallest singular value, 1/-1 and
        ``inf``/``-inf`` the largest/smallest absolute column/row sum.
    axis : None, int or 2-tuple of int, optional
        None: ``x`` is 1-D or 2-D (or ``ord`` is None: the 2-norm of all elements); an int:
        vector norms along it; two: matrix norms over them.
    keepdims : bool, optional

    Returns
    -------
    Tensor

    Notes
    -----
    The 2-norm's gradient is ``x / norm(x)``, and 0 where the norm is 0 (as torch's
    subgradient); so are the gradients of the other ``p``-norms there. The matrix 2-norms
    and the nuclear norm are differentiable through :func:`svd`'s singular values.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([3.0, 4.0], requires_grad=True)
    >>> anb.linalg.norm(x)
    tensor(5., grad_fn=<Norm2Backward>)
    >>> anb.grad(anb.linalg.norm(x), x)
    (tensor([0.6, 0.8]),)
    >>> anb.grad(anb.linalg.norm(x * 0.0), x)
    (tensor([0., 0.]),)
    >>> anb.linalg.norm(anb.tensor([[1.0, -2.0], [3.0, 4.0]]), ord=1)
    tensor(6.)
    """
    x = _float_operand("linalg.norm", x)
    ndim = len(_shape_of(x))
    if axis is None:
        flat = ord is None or (ord in ("f", "fro") and ndim == 2) or (ord == 2 and ndim == 1)
        if flat:
            return _norm2(x, None, keepdims)
        axis = tuple(range(ndim))
    elif not isinstance(axis, tuple):
        axis = (operator.index(axis),)
    if len(axis) == 1:
        return _vector_norm(x, ord, axis[0], keepdims)
    if len(axis) == 2:
        row, column = (_broadcast.normalize_axis(a, ndim)[0] for a in axis)
        if row == column:
            raise ValueError("Duplicate axes given.")
        return _matrix_norm(x, ord, row, column, keepdims)
    raise ValueError("Improper number of dimensions to norm.")


@public("linalg.vector_norm", method=False, family="linalg")
def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):  # noqa: A002 - NumPy's name
    """Vector norms over ``axis`` (None: all elements, as one vector; a tuple: those axes
    together), as ``numpy.linalg.vector_norm``; orders as :func:`norm`'s for vectors.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.linalg.vector_norm(anb.tensor([[3.0, 0.0], [0.0, -4.0]]), ord=1)
    tensor(7.)
    """
    x = _float_operand("linalg.vector_norm", x)
    shape = _shape_of(x)
    axes = _broadcast.normalize_axis(axis, len(shape))
    if len(axes) == 1 or not shape:
        return _vector_norm(x, ord, axes[0] if axes else None, keepdims)
    kept = [d for d in range(len(shape)) if d not in axes]
    moved = call("transpose", x, axes=tuple(kept) + axes)
    merged = call("reshape", moved, shape=tuple(shape[d] for d in kept) + (-1,))
    result = _vector_norm(merged, ord, -1, False)
    if keepdims:
        result = call("reshape", result, shape=_broadcast.reduced_shape(shape, axes, True))
    return result


@public("linalg.matrix_norm", method=False, family="linalg")
def matrix_norm(x, /, *, keepdims=False, ord="fro"):  # noqa: A002 - NumPy's name
    """Matrix norms over the last two axes, as ``numpy.linalg.matrix_norm``; orders as
    :func:`norm`'s for matrices.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.linalg.matrix_norm(anb.tensor([[3.0, 0.0], [0.0, -4.0]]), ord="nuc")
    tensor(7.)
    """
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)
