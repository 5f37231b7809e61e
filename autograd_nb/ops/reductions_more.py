"""More reductions and scans, with NumPy's names: ``cumprod`` (an op), and the composites
``nansum``, ``nanmean``, ``average`` and ``ptp``.

``cumprod`` is an op of its own because its gradient, exact with zeros in the input, is a
linear recurrence along the axis: one O(n) pass backwards in a kernel, where a composite of
the existing ops needs O(n^2) (the product of the others for each output), or divides by the
input (wrong at zeros). The rest are sums, products and extrema of other ops, with NumPy's
dtype and NaN rules worked out around them.
"""

import numpy as np
from numba import njit

from . import _broadcast, _numpy_vjp
from .reduction import Cumsum, mean
from .registry import FUNCTIONS, call, constant_like, cuda_twin, host_values, public

# -- cumprod -----------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _cumprod_forward(x, out):
    outer, n, inner = x.shape
    for o in range(outer):
        for j in range(n):
            for k in range(inner):
                previous = out[o, j - 1, k] if j > 0 else 1
                out[o, j, k] = previous * x[o, j, k]


@njit(cache=True, nogil=True)
def _cumprod_vjp(g, x, y, gx):
    # dy[i]/dx[j] = y[j-1] * x[j+1] * ... * x[i] for i >= j, so gx[j] = y[j-1] * tail(j)
    # with tail(j) = g[j] + x[j+1] * tail(j+1): walked from the end, with no division, so
    # zeros in x are exact.
    outer, n, inner = gx.shape
    for o in range(outer):
        for k in range(inner):
            tail = 0.0
            for j in range(n - 1, -1, -1):
                tail += g[o, j, k]
                before = y[o, j - 1, k] if j > 0 else 1.0
                gx[o, j, k] += before * tail
                tail *= x[o, j, k]


def _numpy_cumprod_vjp(g, x, y, gx):
    # ``_cumprod_vjp``'s float64 ``tail`` walked from the end, all lanes at once.
    tail = np.zeros((gx.shape[0], gx.shape[2]), dtype=np.float64)
    for j in range(gx.shape[1] - 1, -1, -1):
        tail = tail + g[:, j]
        before = y[:, j - 1].astype(np.float64) if j > 0 else 1.0
        _numpy_vjp.add_into(gx[:, j], before * tail)
        tail = tail * x[:, j]


def _complex_cumprod_vjp(g, x, y, gx):
    # ``_cumprod_vjp`` in complex, torch's convention: the factors conjugated.
    tail = np.zeros((gx.shape[0], gx.shape[2]), dtype=gx.dtype)
    for j in range(gx.shape[1] - 1, -1, -1):
        tail = tail + g[:, j]
        before = np.conj(y[:, j - 1]) if j > 0 else 1.0
        gx[:, j] += before * tail
        tail = tail * np.conj(x[:, j])


@cuda_twin("reduction", "Cumprod")
class Cumprod(Cumsum):
    """``cumprod(x, axis=None)``: NumPy's, so ``axis=None`` scans the flattened input."""
    numpy_function = staticmethod(lambda x3: np.cumprod(x3, axis=1, dtype=x3.dtype))
    complex_numpy = (staticmethod(lambda x3: np.cumprod(x3, axis=1)),
                     staticmethod(_complex_cumprod_vjp))

    name = "cumprod"
    saves = (0,)
    saves_output = True
    forward_kernel = staticmethod(_cumprod_forward)
    vjp_kernel = staticmethod(_cumprod_vjp)
    numpy_vjp = staticmethod(_numpy_cumprod_vjp)

    def rule(self, k, grad_output, inputs, output, attrs):
        layout = attrs["layout"]
        x = call("reshape", inputs[0], shape=layout.shape)  # flattened for axis=None
        y = call("reshape", output, shape=layout.shape)
        # (complex: the conjugated derivatives of torch's convention; a real x's are x's own)
        x, y = FUNCTIONS["conj"](x), FUNCTIONS["conj"](y)
        axis = attrs["axes"][0]
        if np.any(host_values(inputs[0]) == 0):
            grad = _cumprod_vjp_at_zeros(grad_output, x, axis)
        else:
            # Without zeros, the sum over later outputs of g * y, divided by x: it stays the
            # derivative when differentiated again at this point. (The sum from the end is a
            # cumsum of the reversed lane: ``total - cumsum`` would cancel, and dividing by a
            # small x magnifies that.)
            weighted = call("multiply", grad_output, y)
            flip = (slice(None),) * axis + (slice(None, None, -1),)
            later = call("cumsum", call("getitem", weighted, index=flip), axis=axis)
            grad = call("divide", call("getitem", later, index=flip), x)
        return call("reshape", grad, shape=attrs["input_shape"])


def _cumprod_vjp_at_zeros(grad_output, x, axis):
    """The VJP of cumprod written with ops that differentiate again at zeros: along the
    axis, row ``j`` of an ``(n, n)`` matrix is ``x`` with ``x[j]`` replaced by one; its
    cumprod at ``i >= j`` is ``dy[i]/dx[j]`` (O(n^2) per lane, for ``create_graph`` only)."""
    ndim = len(x.shape)
    n = x.shape[axis]
    order = tuple(d for d in range(ndim) if d != axis) + (axis,)
    lanes = call("transpose", x, axes=order)
    rows = call("reshape", lanes, shape=lanes.shape[:-1] + (1, n))
    others = call("cumprod", call("where", np.eye(n, dtype=bool), 1.0, rows), axis=-1)
    g = call("transpose", grad_output, axes=order)
    g = call("reshape", g, shape=g.shape[:-1] + (1, n))
    later = np.triu(np.ones((n, n), dtype=x.dtype))  # [j, i]: i >= j
    grad = call("sum", call("multiply", others, call("multiply", g, later)), axis=-1)
    return call("transpose", grad, axes=tuple(int(d) for d in np.argsort(order)))


Cumprod()


def _with_dtype(x, dtype):
    """``x`` cast to ``dtype`` (NumPy's ``dtype=`` argument of a reduction), or as it is."""
    if dtype is None:
        return x
    dtype = np.dtype(dtype)
    if dtype.kind != "f" and hasattr(x, "detach"):
        x = x.detach()  # integer results carry no gradient
    return call("astype", x, dtype=dtype)


@public(family="reduction")
def cumprod(a, axis=None, dtype=None):
    """Cumulative product along ``axis``; ``axis=None`` scans the flattened input.

    The gradient is exact with zeros in ``a`` (it never divides by ``a``).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([2.0, 0.0, 3.0], requires_grad=True)
    >>> anb.cumprod(x)
    tensor([2., 0., 0.], grad_fn=<CumprodBackward>)
    >>> anb.grad(anb.cumprod(x).sum(), x)
    (tensor([1., 8., 0.]),)
    """
    return call("cumprod", _with_dtype(a, dtype), axis=axis)


# -- composites: NaN-skipping sums and means, weighted averages, peak to peak -----------------


def _dtype(x):
    dtype = getattr(x, "dtype", None)
    return np.dtype(dtype) if dtype is not None else np.asarray(x).dtype


@public(method=False, family="reduction")
def nansum(a, axis=None, dtype=None, keepdims=False):
    """Sum over ``axis``, NaNs counted as zero; their gradient is zero.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([1.0, float("nan"), 2.0], requires_grad=True)
    >>> anb.nansum(x)
    tensor(3., grad_fn=<SumBackward>)
    >>> anb.grad(anb.nansum(x), x)
    (tensor([1., 0., 1.]),)
    """
    a = _with_dtype(a, dtype)
    if _dtype(a).kind == "f":
        a = call("where", np.isnan(host_values(a)), 0.0, a)
    return call("sum", a, axis=axis, keepdims=keepdims)


@public(method=False, family="reduction")
def nanmean(a, axis=None, dtype=None, keepdims=False):
    """Mean over ``axis`` of the elements that are not NaN; the NaNs' gradient is zero. An
    all-NaN slice gives NaN (NumPy also warns).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([1.0, float("nan"), 2.0], requires_grad=True)
    >>> anb.nanmean(x)
    tensor(1.5, grad_fn=<DivideBackward>)
    >>> anb.grad(anb.nanmean(x), x)
    (tensor([0.5, 0. , 0.5]),)
    """
    a = _with_dtype(a, dtype)
    if _dtype(a).kind != "f":
        return mean(a, axis=axis, keepdims=keepdims)
    present = ~np.isnan(host_values(a))
    total = call("sum", call("where", present, a, 0.0), axis=axis, keepdims=keepdims)
    count = np.sum(present, axis=axis, keepdims=keepdims).astype(_dtype(a))
    return call("divide", total, count)


def _axes_in_order(axis, ndim):
    """``axis`` as a tuple of non-negative axes in the caller's order (NumPy's
    ``normalize_axis_tuple``): ``average`` lays its weights out in that order."""
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    result = tuple(_broadcast.normalize_axis((a,), ndim)[0] for a in axes)
    if len(set(result)) != len(result):
        raise ValueError("repeated axis")
    return result


def _laid_out_weights(weights, shape, axes):
    """Weights of the shape of ``a`` along ``axes`` reshaped to broadcast against ``a``
    (with ops for a Tensor, with NumPy for constants)."""
    if axes is None:
        raise TypeError("Axis must be specified when shapes of a and weights differ.")
    if tuple(np.shape(weights)) != tuple(shape[ax] for ax in axes):
        raise ValueError(
            "Shape of weights must be consistent with shape of a along specified axis."
        )
    order = tuple(int(d) for d in np.argsort(axes))
    laid_out = tuple(n if d in axes else 1 for d, n in enumerate(shape))
    if not hasattr(weights, "grad_fn"):
        return np.transpose(weights, order).reshape(laid_out)
    if len(axes) > 1:
        weights = call("transpose", weights, axes=order)
    return call("reshape", weights, shape=laid_out)


@public(method=False, family="reduction")
def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """Weighted average over ``axis``: ``sum(a * weights) / sum(weights)``, differentiable in
    both (without weights: the mean).

    Parameters
    ----------
    a : Tensor or array_like
    axis : None, int or tuple of int, optional
    weights : Tensor or array_like, optional
        Of ``a``'s shape, or of the shape of ``a`` along ``axis``.
    returned : bool, optional
        Also return the sum of the weights (broadcast to the result's shape).
    keepdims : bool, optional

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> w = anb.tensor([3.0, 1.0], requires_grad=True)
    >>> anb.average(x, axis=1, weights=w)
    tensor([1.25, 3.25], grad_fn=<DivideBackward>)
    >>> anb.average(x, axis=0, returned=True)
    (tensor([2., 3.]), tensor([2., 2.]))
    """
    shape = tuple(np.shape(a)) if not hasattr(a, "shape") else tuple(a.shape)
    axes = None if axis is None else _axes_in_order(axis, len(shape))
    if weights is None:
        result = mean(a, axis=axes, keepdims=keepdims)
        if not returned:
            return result
        count = np.full(result.shape, _size(shape) / max(_size(result.shape), 1), result.dtype)
        return result, constant_like(result, count)
    if not hasattr(weights, "grad_fn"):
        weights = np.asarray(weights)  # constants: their sum is a NumPy array
    if tuple(np.shape(weights)) != shape:
        weights = _laid_out_weights(weights, shape, axes)
    if hasattr(weights, "grad_fn"):
        scale = call("sum", weights, axis=axes, keepdims=keepdims)
    else:
        scale = np.sum(weights, axis=axes, keepdims=keepdims)
    if np.any(host_values(scale) == 0.0):
        raise ZeroDivisionError("Weights sum to zero, can't be normalized")
    total = call("sum", call("multiply", a, weights), axis=axes, keepdims=keepdims)
    result = call("divide", total, scale)
    if not returned:
        return result
    if hasattr(scale, "grad_fn"):
        if scale.shape != result.shape:
            scale = call("broadcast_to", scale, shape=result.shape)
        return result, scale
    scale = np.broadcast_to(scale, result.shape).astype(result.dtype)
    return result, constant_like(result, scale)


def _size(shape):
    return int(np.prod(shape, dtype=np.int64))


@public(method=False, family="reduction")
def ptp(a, axis=None, out=None, keepdims=False):
    """Peak to peak, ``max - min`` over ``axis``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.ptp(anb.tensor([[1.0, 5.0], [2.0, 2.5]]), axis=1)
    tensor([4. , 0.5])
    """
    if out is not None:
        raise TypeError("ptp: out= is not supported (the result is a new Tensor)")
    highest = call("max", a, axis=axis, keepdims=keepdims)
    return call("subtract", highest, call("min", a, axis=axis, keepdims=keepdims))
