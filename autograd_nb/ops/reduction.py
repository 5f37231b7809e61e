"""Reductions and scans along axes: sum, prod, max, min, logsumexp, softmax, cumsum, ...

Kernels see one canonical layout, ``(outer, n, inner)``: the reduced axes form the middle
dimension. When the requested axes are adjacent that is a free reshape; otherwise the op moves
them together with the strided-copy kernel in its forward, and scatters the gradient back the
same way in its VJP, so every axis/keepdims combination is one op on the tape.
"""

import numpy as np
from numba import njit

from . import _broadcast, _strided
from .registry import Op, call, public


class Layout:
    """How an input of ``shape`` reduced over ``axes`` maps onto ``(outer, n, inner)``."""

    __slots__ = ("shape", "axes", "permuted", "strides", "outer", "n", "inner")

    def __init__(self, shape, axes):
        self.shape = tuple(shape)
        self.axes = axes
        ndim = len(shape)
        adjacent = not axes or list(axes) == list(range(axes[0], axes[0] + len(axes)))
        if adjacent:
            first = axes[0] if axes else ndim
            self.permuted = None
            self.outer = int(np.prod(shape[:first], dtype=np.int64))
            self.n = int(np.prod([shape[a] for a in axes], dtype=np.int64))
            self.inner = int(np.prod(shape[first + len(axes):], dtype=np.int64))
        else:
            kept = [d for d in range(ndim) if d not in axes]
            order = kept + list(axes)
            own = _broadcast.contiguous_strides(shape)
            self.permuted = tuple(shape[d] for d in order)
            self.strides = [own[d] for d in order]
            self.outer = int(np.prod([shape[d] for d in kept], dtype=np.int64))
            self.n = int(np.prod([shape[a] for a in axes], dtype=np.int64))
            self.inner = 1

    def to_canonical(self, x):
        """``x`` as a C-contiguous ``(outer, n, inner)`` array (a copy only if permuted)."""
        if self.permuted is not None:
            x = _strided.strided_copy(x, self.permuted, self.strides)
        return x.reshape(self.outer, self.n, self.inner)

    def add_back(self, canonical_grad, grad_input):
        """Accumulate a gradient computed in the canonical layout into ``grad_input``."""
        if self.permuted is None:
            _strided.accumulate(canonical_grad.reshape(-1), grad_input.reshape(-1))
        else:
            _strided.strided_scatter_add(canonical_grad, self.permuted, self.strides, grad_input)


class AxisOp(Op):
    """Base of ops over axes. Subclasses set ``forward_kernel`` and ``vjp_kernel``.

    ``reduces``: the result drops the axes (sum) rather than keeping the input's shape
    (softmax, cumsum). Kernels: ``forward_kernel(x3, out)`` and
    ``vjp_kernel(g, x3, y, gx3)`` with ``x3``/``gx3`` of shape ``(outer, n, inner)`` and
    ``out``/``g``/``y`` of shape ``(outer, inner)`` (reductions) or ``(outer, n, inner)``.
    """

    family = "reduction"
    n_inputs = 1
    reduces = True
    single_axis = False  # softmax, cumsum: one axis only

    def result_dtype(self, x):
        return x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)

    def prepare(self, values, attrs):
        (x,) = values
        x = np.asarray(x)
        x = np.asarray(x, dtype=self.result_dtype(x), order="C")
        axis = attrs.get("axis")
        if self.single_axis:
            if x.ndim == 0 and axis in (0, -1):
                axis = None
            elif not isinstance(axis, (int, np.integer)):
                raise TypeError(f"{self.name}() takes a single integer axis, got {axis!r}")
        axes = _broadcast.normalize_axis(axis, x.ndim)
        keepdims = bool(attrs.get("keepdims", False))
        layout = Layout(x.shape, axes)
        shape = _broadcast.reduced_shape(x.shape, axes, keepdims) if self.reduces else x.shape
        extra = {k: v for k, v in attrs.items() if k not in ("axis", "keepdims")}
        return [x], dict(extra, axes=axes, keepdims=keepdims, layout=layout, shape=shape)

    def forward(self, arrays, attrs):
        layout = attrs["layout"]
        x3 = layout.to_canonical(arrays[0])
        if self.reduces:
            out = np.empty((layout.outer, layout.inner), dtype=x3.dtype)
        else:
            out = np.empty((layout.outer, layout.n, layout.inner), dtype=x3.dtype)
        self.run_forward(x3, out, attrs)
        if not self.reduces and layout.permuted is not None:
            return _unpermute(out, layout)
        return out.reshape(attrs["shape"])

    def run_forward(self, x3, out, attrs):
        self.forward_kernel(x3, out)

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        layout = attrs["layout"]
        x3 = layout.to_canonical(saved[0]) if saved[0] is not None else None
        y = saved.output
        if self.reduces:
            g = grad_output.reshape(layout.outer, layout.inner)
            y = y.reshape(layout.outer, layout.inner) if y is not None else None
        else:
            g = layout.to_canonical(grad_output)
            y = layout.to_canonical(y) if y is not None else None
        if layout.permuted is None:
            self.run_vjp(g, x3, y, grad_input.reshape(layout.outer, layout.n, layout.inner), attrs)
            return
        canonical = np.zeros((layout.outer, layout.n, layout.inner), dtype=grad_input.dtype)
        self.run_vjp(g, x3, y, canonical, attrs)
        layout.add_back(canonical, grad_input)

    def run_vjp(self, g, x3, y, gx3, attrs):
        self.vjp_kernel(g, x3 if x3 is not None else gx3, y if y is not None else g, gx3)

    def make_function(self):
        return None


def _unpermute(canonical, layout):
    """Undo the permutation of an axis op whose result keeps the input's shape."""
    out = np.zeros(layout.shape, dtype=canonical.dtype)
    layout.add_back(canonical, out)
    return out


def expand_reduced(tensor, attrs):
    """A reduction's result (or its grad) reshaped with the reduced axes kept as length 1,
    so that it broadcasts against the input."""
    if attrs["keepdims"]:
        return tensor
    shape = _broadcast.reduced_shape(attrs["layout"].shape, attrs["axes"], True)
    return call("reshape", tensor, shape=shape)


# -- sum ---------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _sum_forward(x, out):
    outer, n, inner = x.shape
    for o in range(outer):
        for k in range(inner):
            out[o, k] = 0
        for j in range(n):
            for k in range(inner):
                out[o, k] += x[o, j, k]


@njit(cache=True, nogil=True)
def _sum_vjp(g, x, y, gx):
    outer, n, inner = gx.shape
    for o in range(outer):
        for j in range(n):
            for k in range(inner):
                gx[o, j, k] += g[o, k]


class Sum(AxisOp):
    """``sum(x, axis=None, keepdims=False)``."""

    name = "sum"
    forward_kernel = staticmethod(_sum_forward)
    vjp_kernel = staticmethod(_sum_vjp)

    def result_dtype(self, x):
        return x.dtype if x.dtype.kind in "fiu" else np.dtype(np.int64)

    def rule(self, k, grad_output, inputs, output, attrs):
        grad = expand_reduced(grad_output, attrs)
        return call("broadcast_to", grad, shape=attrs["layout"].shape)


Sum()


@public(family="reduction")
def sum(x, axis=None, keepdims=False):  # noqa: A001 - NumPy's name
    """Sum of elements over ``axis`` (None: all; an int or a tuple).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.sum(anb.ones((2, 3)), axis=0)
    tensor([2., 2., 2.])
    """
    return call("sum", x, axis=axis, keepdims=keepdims)
