"""Numerical ranges and finite differences, with NumPy's names and arguments: ``linspace``,
``logspace`` and ``geomspace``, differentiable in their ends (and ``logspace``'s base), and
``gradient``, differentiable in the samples and in coordinate Tensors.

Every function here is a composite, written as NumPy writes it: the same operations in the
same order (slices, differences, products, ``where``, ``concatenate``), so the values are
NumPy's and the graph is made of existing ops. It has no kernel and no VJP of its own, records
inside ``autograd_nb.compile`` programs, runs on every device those ops run on, and
differentiates to any order.

Given plain numbers and arrays (no Tensor), the ranges are NumPy's own result as a new leaf
Tensor, with the creation functions' keyword-only ``device=`` and ``requires_grad=``.
"""

import operator

import numpy as np

from .. import dtypes
from .assembly import moveaxis
from .registry import call, host_values, public
from .shape import concatenate, expand_dims

try:  # NumPy 2
    from numpy.lib.array_utils import normalize_axis_tuple as _normalize_axis_tuple
except ImportError:  # NumPy 1
    from numpy.core.numeric import normalize_axis_tuple as _normalize_axis_tuple

#: ``gradient`` of several axes: NumPy 2 returns a tuple, NumPy 1 a list.
_SEVERAL = tuple if np.lib.NumpyVersion(np.__version__) >= "2.0.0" else list


def _is_tensor(value):
    # Duck-typed: ops do not import the Tensor class (imports flow from tensor.py to ops/).
    return hasattr(value, "grad_fn") and hasattr(value, "requires_grad")


def _shape(x):
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _as_tensor(array, device=None):
    """The NumPy ``array`` as a new Tensor without grad (on ``device``, if given)."""
    array = np.asarray(array)
    result = call("reshape", array, shape=array.shape)
    return result if device is None else result.to(device)


def _created(result, device, requires_grad):
    """NumPy's ``result`` (an array, or a tuple for ``retstep``) as a creation function's."""
    if isinstance(result, tuple):
        return (_created(result[0], device, requires_grad),) + result[1:]
    result = dtypes.convert(result, None)  # (a TypeError naming an unsupported dtype)
    result = _as_tensor(result, "cpu" if device is None else device)
    return result.requires_grad_(True) if requires_grad else result


def _requested(dtype):
    """``dtype=`` as the creation functions read it: a tensor dtype (float16 asks for
    float32), a TypeError naming one that tensors lack, or None."""
    return None if dtype is None else dtypes.for_request(dtype)


def _finish(result, device, requires_grad, name):
    """``device=`` and ``requires_grad=`` on a range computed from Tensors."""
    if device is not None:
        result = result.to(device)
    if requires_grad:
        if result.requires_grad:
            raise ValueError(
                f"{name}: requires_grad=True makes the result a new leaf, but its ends are "
                "Tensors that require grad, so it already records (leave requires_grad out)"
            )
        result.requires_grad_(True)
    return result


def _end(value):
    """A range's end (or base): a Tensor as it is, anything else as a NumPy value that keeps
    NumPy's promotion (Python numbers stay weak)."""
    if _is_tensor(value) or type(value) in (int, float, bool):
        return value
    return np.asarray(value)


def _result_dtype(*values, ensure_inexact=False):
    dtype = np.result_type(*(v.dtype if _is_tensor(v) else v for v in values))
    if ensure_inexact and dtype.kind not in "fc":
        dtype = np.result_type(dtype, 0.0)
    return dtype


def _cast(value, dtype):
    """``value`` in ``dtype``: a Tensor through ``astype`` (recorded), else a NumPy array."""
    if _is_tensor(value):
        return value if value.dtype == dtype else value.astype(dtype)
    return np.asarray(value, dtype=dtype)


def _as_rows(value, shape):
    """``value`` broadcast to ``shape``, with a new first axis of length 1 (a NumPy array
    stays one: a constant that joins Tensors on any device)."""
    if not _is_tensor(value):
        return np.broadcast_to(value, shape).reshape((1,) + shape)
    return call("reshape", call("broadcast_to", value, shape=shape), shape=(1,) + shape)


def _rows(y, start, stop):
    return call("getitem", y, index=(slice(start, stop),))


# -- linspace, logspace, geomspace -------------------------------------------------------------


@public(method=False, family="numeric")
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None, requires_grad=False):
    """``num`` evenly spaced values from ``start`` to ``stop``, as ``numpy.linspace``;
    differentiable in ``start`` and ``stop``.

    Parameters
    ----------
    start, stop : scalar, array_like or Tensor
        The ends; arrays broadcast together, and the values run along a new axis ``axis``.
    num : int
        Number of values (non-negative).
    endpoint : bool
        Whether ``stop`` is the last value (it then is exactly ``stop``).
    retstep : bool
        Also return the step ``(stop - start) / (num - 1)`` (``/ num`` without the endpoint;
        NaN where it is undefined): a Tensor, differentiable, where the ends are Tensors.
    dtype : dtype, optional
        The result's dtype; unless given, NumPy's (float64 for Python numbers and integers,
        the ends' floating dtype otherwise). An integer dtype rounds down (gradient 0).
    axis : int
        Where the new axis goes, for array ends.
    device : {"cpu", "cuda"}, optional, keyword-only
        Where the result lives: the ends' device unless given (``"cpu"`` for numbers).
    requires_grad : bool, keyword-only
        Make the result a leaf that requires grad (not with ends that require grad).

    Returns
    -------
    Tensor, or (Tensor, step) with ``retstep``

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.linspace(0, 1, 5)
    tensor([0.  , 0.25, 0.5 , 0.75, 1.  ])
    >>> stop = anb.tensor(2.0, requires_grad=True)
    >>> y = anb.linspace(0.0, stop, 3)
    >>> y
    tensor([0., 1., 2.], grad_fn=<ConcatenateBackward>)
    >>> anb.grad(y.sum(), stop)
    (tensor(1.5),)
    """
    dtype = _requested(dtype)
    if not (_is_tensor(start) or _is_tensor(stop)):
        made = np.linspace(start, stop, num, endpoint, retstep, dtype, axis)
        return _created(made, device, requires_grad)
    result = _linspace(start, stop, num, endpoint, retstep, dtype, axis)
    if retstep:
        return _finish(result[0], device, requires_grad, "linspace"), result[1]
    return _finish(result, device, requires_grad, "linspace")


def _linspace(start, stop, num, endpoint, retstep, dtype, axis):
    """``numpy.linspace``'s steps, on Tensors."""
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    div = (num - 1) if endpoint else num
    start, stop = _end(start), _end(stop)
    computed = _result_dtype(start, stop, ensure_inexact=True)
    dtype = computed if dtype is None else np.dtype(dtype)
    start, stop = _cast(start, computed), _cast(stop, computed)
    delta = call("subtract", stop, start)
    y = np.arange(0, num, dtype=computed).reshape((-1,) + (1,) * len(delta.shape))
    if div > 0:
        step = call("divide", delta, div)
        # NumPy divides first wherever a step is 0 (underflowed, gh-5437). The same choice,
        # by ops (``astype(bool)`` is "!= 0", NaN included), so that nothing reads a value.
        step_is_zero = call("where", call("astype", step, dtype=np.bool_), 0.0, 1.0)
        any_step_zero = call("astype", call("max", step_is_zero), dtype=np.bool_)
        y = call("where", any_step_zero, call("multiply", y / div, delta),
                 call("multiply", y, step))
    else:
        step = np.nan  # 0 values, or 1 with the endpoint: no step
        y = call("multiply", y, delta)
    y = call("add", y, start)
    if endpoint and num > 1:
        y = concatenate([_rows(y, None, -1), _as_rows(stop, _shape(delta))], axis=0)
    if axis != 0:
        y = moveaxis(y, 0, axis)
    if dtype.kind in "iu":
        y = call("floor", y)
    if y.dtype != dtype:
        y = y.astype(dtype)
    return (y, step) if retstep else y


@public(method=False, family="numeric")
def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0, *,
             device=None, requires_grad=False):
    """``base ** linspace(start, stop, num)``, as ``numpy.logspace``; differentiable in
    ``start``, ``stop`` and ``base``.

    Parameters
    ----------
    start, stop : scalar, array_like or Tensor
        The exponents of the first and the last value.
    num : int
    endpoint : bool
    base : scalar, array_like or Tensor
        Broadcasts with the ends (an array base adds its own axes, as NumPy's).
    dtype : dtype, optional
    axis : int
    device : {"cpu", "cuda"}, optional, keyword-only
    requires_grad : bool, keyword-only
        As :func:`linspace`'s.

    Returns
    -------
    Tensor

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.logspace(0, 3, 4)
    tensor([   1.,   10.,  100., 1000.])
    >>> base = anb.tensor(2.0, requires_grad=True)
    >>> anb.grad(anb.logspace(0.0, 2.0, 3, base=base).sum(), base)
    (tensor(5.),)
    """
    dtype = _requested(dtype)
    if not (_is_tensor(start) or _is_tensor(stop) or _is_tensor(base)):
        made = np.logspace(start, stop, num, endpoint, base, dtype, axis)
        return _created(made, device, requires_grad)
    start, stop, base = _end(start), _end(stop), _end(base)
    if not isinstance(base, (float, int)) and len(_shape(base)):
        # An array base broadcasts with the ends first: it may change what ``axis`` means.
        ndmax = len(np.broadcast_shapes(_shape(start), _shape(stop), _shape(base)))
        start, stop, base = (_at_least(v, ndmax) for v in (start, stop, base))
        base = expand_dims(base, axis)
    y = _linspace(start, stop, num, endpoint, False, None, axis)
    y = call("power", base, y)
    if dtype is not None and y.dtype != np.dtype(dtype):
        y = y.astype(dtype)
    return _finish(y, device, requires_grad, "logspace")


def _at_least(value, ndim):
    """``value`` with at least ``ndim`` dimensions, ones in front (``np.array(ndmin=)``)."""
    shape = _shape(value)
    if len(shape) >= ndim:
        return value
    shape = (1,) * (ndim - len(shape)) + shape
    return call("reshape", value, shape=shape) if _is_tensor(value) else np.reshape(value, shape)


@public(method=False, family="numeric")
def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0, *, device=None,
              requires_grad=False):
    """``num`` values from ``start`` to ``stop`` in a geometric progression, as
    ``numpy.geomspace``; differentiable in ``start`` and ``stop``.

    The ends may be negative (the sequence keeps ``start``'s sign) but not zero: a zero end
    raises ValueError, as NumPy's. (That check reads the ends' values, so inside
    ``autograd_nb.compile`` a geomspace of Tensor ends runs eagerly.)

    Parameters
    ----------
    start, stop : scalar, array_like or Tensor
    num : int
    endpoint : bool
    dtype : dtype, optional
        Unless given, NumPy's: at least float64.
    axis : int
    device : {"cpu", "cuda"}, optional, keyword-only
    requires_grad : bool, keyword-only
        As :func:`linspace`'s.

    Returns
    -------
    Tensor

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.geomspace(1, 1000, 4)
    tensor([   1.,   10.,  100., 1000.])
    >>> stop = anb.tensor(16.0, requires_grad=True)
    >>> anb.grad(anb.geomspace(1.0, stop, 3).sum(), stop)
    (tensor(1.125),)
    """
    dtype = _requested(dtype)
    if not (_is_tensor(start) or _is_tensor(stop)):
        made = np.geomspace(start, stop, num, endpoint, dtype, axis)
        return _created(made, device, requires_grad)
    start, stop = _end(start), _end(stop)
    if np.any(host_values(start) == 0) or np.any(host_values(stop) == 0):
        raise ValueError("Geometric sequence cannot include zero")
    computed = np.result_type(
        *(v.dtype if _is_tensor(v) else v for v in (start, stop)), float(num), np.zeros((), dtype)
    )
    dtype = computed if dtype is None else np.dtype(dtype)
    start, stop = _cast(start, computed), _cast(stop, computed)
    # As NumPy: rotate start to the positive reals, and undo it at the end.
    out_sign = call("sign", start)
    start = call("divide", start, out_sign)
    stop = call("divide", stop, out_sign)
    result = _linspace(call("log10", start), call("log10", stop), num, endpoint, False, None, 0)
    result = call("power", 10.0, result)
    if result.dtype != computed:
        result = result.astype(computed)
    # The ends exactly (``10 ** log10(x)`` need not be ``x``).
    shape = _shape(result)[1:]
    if num > 0:
        parts = [_as_rows(start, shape)]
        if num > 1 and endpoint:
            parts += [_rows(result, 1, -1), _as_rows(stop, shape)]
        else:
            parts.append(_rows(result, 1, None))
        result = concatenate(parts, axis=0)
    result = call("multiply", result, out_sign)
    if axis != 0:
        result = moveaxis(result, 0, axis)
    if result.dtype != dtype:
        result = result.astype(dtype)
    return _finish(result, device, requires_grad, "geomspace")


# -- gradient ----------------------------------------------------------------------------------


@public(method=False, family="numeric")
def gradient(f, *varargs, axis=None, edge_order=1):
    """The gradient of sampled values ``f`` along each axis, as ``numpy.gradient``: second
    order central differences inside, first or second order one-sided ones at the edges.
    Differentiable in ``f`` and in spacings and coordinates given as Tensors.

    Parameters
    ----------
    f : Tensor or array_like
        The samples (integers become float64).
    *varargs : scalar or 1-D array_like or Tensor, optional
        The spacing: none (1 along every axis), one scalar for every axis, or one entry per
        axis of ``axis``: a scalar step, or the samples' coordinates along that axis.
        NumPy takes the uniform formulas where coordinates are evenly spaced; coordinates
        given as a Tensor always take the general ones (the same values to rounding), so
        that their gradient is the general formulas' and nothing reads their values.
    axis : None, int or tuple of int
        The axes to differentiate along (None: all, in order).
    edge_order : {1, 2}
        The order of the differences at the edges.

    Returns
    -------
    Tensor, or a tuple of Tensors (NumPy 1: a list) for several axes
        Each of ``f``'s shape.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> f = anb.tensor([1.0, 2.0, 4.0, 7.0, 11.0], requires_grad=True)
    >>> anb.gradient(f)
    tensor([1. , 1.5, 2.5, 3.5, 4. ], grad_fn=<ConcatenateBackward>)
    >>> anb.gradient(f, 2.0, edge_order=2)
    tensor([0.25, 0.75, 1.25, 1.75, 2.25], grad_fn=<ConcatenateBackward>)
    >>> x = anb.tensor([0.0, 1.0, 1.5, 3.5, 4.0], requires_grad=True)
    >>> anb.gradient(f, x)
    tensor([1. , 3. , 3.5, 6.7, 8. ], grad_fn=<ConcatenateBackward>)
    >>> [g.shape for g in anb.gradient(anb.ones((2, 3)))]
    [(2, 3), (2, 3)]
    """
    device = _device_of(f, varargs)
    f = f if _is_tensor(f) else _as_tensor(np.asanyarray(f), device)
    shape = _shape(f)
    axes = tuple(range(len(shape))) if axis is None else _normalize_axis_tuple(axis, len(shape))
    spacings = _spacings(varargs, shape, axes)
    if edge_order > 2:
        raise ValueError("'edge_order' greater than 2 not supported")
    if f.dtype == np.bool_:
        raise TypeError(
            "numpy boolean subtract, the `-` operator, is not supported, use the bitwise_xor, "
            "the `^` operator, or the logical_xor function instead."
        )
    if f.dtype.kind not in "fc":
        f = f.astype(np.float64)
    results = [_derivative(f, a, dx, edge_order) for a, dx in zip(axes, spacings)]
    return results[0] if len(axes) == 1 else _SEVERAL(results)


def _device_of(f, varargs):
    for value in (f,) + varargs:
        if _is_tensor(value):
            return value.device
    return None


def _spacings(varargs, shape, axes):
    """``gradient``'s spacing per axis: a scalar (a number, a NumPy scalar, a 0-d Tensor) or
    the 1-D differences of the coordinates, as NumPy works them out."""
    if not varargs:
        return [1.0] * len(axes)
    if len(varargs) == 1 and len(_shape(varargs[0])) == 0:
        return list(varargs) * len(axes)
    if len(varargs) != len(axes):
        raise TypeError("invalid number of arguments")
    return [_steps(d, shape[a]) for d, a in zip(varargs, axes)]


def _steps(distances, length):
    given = distances
    if not _is_tensor(distances):
        distances = np.asanyarray(distances)
    if len(_shape(distances)) == 0:
        return given
    if len(_shape(distances)) != 1:
        raise ValueError("distances must be either scalars or 1d")
    if _shape(distances)[0] != length:
        raise ValueError(
            "when 1d, distances must match the length of the corresponding dimension"
        )
    if distances.dtype.kind not in "fc":
        distances = distances.astype(np.float64)
    if _is_tensor(distances):
        if length < 2:
            raise IndexError("index 0 is out of bounds for axis 0 with size 0")
        return call("subtract", _rows(distances, 1, None), _rows(distances, None, -1))
    steps = np.diff(distances)
    # As NumPy: evenly spaced coordinates take the uniform formulas.
    return steps[0] if (steps == steps[0]).all() else steps


def _derivative(f, axis, dx, edge_order):
    """``f``'s derivative along ``axis`` with the spacing ``dx``: the interior and the two
    edges, joined."""
    shape = _shape(f)
    if shape[axis] < edge_order + 1:
        raise ValueError(
            "Shape of array too small to calculate a numerical gradient, "
            "at least (edge_order + 1) elements are required."
        )
    if edge_order != 1 and shape[axis] < 3:  # (NumPy reads f[2] for any other order)
        raise IndexError(f"index 2 is out of bounds for axis {axis} with size {shape[axis]}")

    def part(start, stop):
        return call("getitem", f, index=(slice(None),) * axis + (slice(start, stop),))

    uniform = len(_shape(dx)) == 0
    pieces = []
    if edge_order == 1:
        first = (part(1, 2) - part(0, 1)) / (dx if uniform else dx[0])
        last = (part(-1, None) - part(-2, -1)) / (dx if uniform else dx[-1])
    else:
        first = _combination(part(0, 1), part(1, 2), part(2, 3), *_first_weights(dx, uniform))
        last = _combination(part(-3, -2), part(-2, -1), part(-1, None),
                            *_last_weights(dx, uniform))
    pieces.append(first)
    if shape[axis] > 2:
        if uniform:
            pieces.append((part(2, None) - part(None, -2)) / (2.0 * dx))
        else:
            weights = _interior_weights(dx, axis, len(shape))
            pieces.append(_combination(part(None, -2), part(1, -1), part(2, None), *weights))
    pieces.append(last)
    pieces = [p if p.dtype == f.dtype else p.astype(f.dtype) for p in pieces]
    return concatenate(pieces, axis=axis)


def _combination(f0, f1, f2, a, b, c):
    """``a * f0 + b * f1 + c * f2``, in NumPy's order."""
    return a * f0 + b * f1 + c * f2


def _interior_weights(dx, axis, ndim):
    dx1, dx2 = dx[0:-1], dx[1:]
    a = -(dx2) / (dx1 * (dx1 + dx2))
    b = (dx2 - dx1) / (dx1 * dx2)
    c = dx1 / (dx2 * (dx1 + dx2))
    shape = (1,) * axis + (-1,) + (1,) * (ndim - axis - 1)
    return [w.reshape(shape) for w in (a, b, c)]


def _first_weights(dx, uniform):
    if uniform:
        return -1.5 / dx, 2.0 / dx, -0.5 / dx
    dx1, dx2 = dx[0], dx[1]
    return (-(2.0 * dx1 + dx2) / (dx1 * (dx1 + dx2)), (dx1 + dx2) / (dx1 * dx2),
            -dx1 / (dx2 * (dx1 + dx2)))


def _last_weights(dx, uniform):
    if uniform:
        return 0.5 / dx, -2.0 / dx, 1.5 / dx
    dx1, dx2 = dx[-2], dx[-1]
    return (dx2 / (dx1 * (dx1 + dx2)), -(dx2 + dx1) / (dx1 * dx2),
            (2.0 * dx2 + dx1) / (dx2 * (dx1 + dx2)))
