"""Reductions and scans along axes: sum, prod, max, min, logsumexp, softmax, cumsum, ...

Kernels see one canonical layout, ``(outer, n, inner)``: the reduced axes form the middle
dimension. When the requested axes are adjacent that is a free reshape; otherwise the op moves
them together with the strided-copy kernel in its forward, and scatters the gradient back the
same way in its VJP, so every axis/keepdims combination is one op on the tape.
"""


import functools
import hashlib
import inspect

import numpy as np
from numba import njit

from .. import config
from . import _broadcast, _fastmath_numpy, _kernels, _numpy_vjp, _strided, registry
from ._fastmath import exp, log  # vectorisable, unlike libm's
from ._parallel import use_threads
from .registry import ExecSpec, Op, call, cuda_twin, public, run_key


class Layout:
    """How an input of ``shape`` reduced over ``axes`` maps onto ``(outer, n, inner)``."""

    __slots__ = ("shape", "axes", "permuted", "strides", "outer", "n", "inner", "canonical",
                 "reduced")

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
            self.inner = int(np.prod(shape[first + len(axes) :], dtype=np.int64))
        else:
            kept = [d for d in range(ndim) if d not in axes]
            order = kept + list(axes)
            own = _broadcast.contiguous_strides(shape)
            self.permuted = tuple(shape[d] for d in order)
            self.strides = [own[d] for d in order]
            self.outer = int(np.prod([shape[d] for d in kept], dtype=np.int64))
            self.n = int(np.prod([shape[a] for a in axes], dtype=np.int64))
            self.inner = 1
        self.canonical = (self.outer, self.n, self.inner)
        self.reduced = (self.outer, self.inner)

    def to_canonical(self, x):
        """``x`` as a C-contiguous ``(outer, n, inner)`` array (a copy only if permuted)."""
        if self.permuted is not None:
            x = _strided.strided_copy(x, self.permuted, self.strides)
        return x.reshape(self.canonical)

    def add_back(self, canonical_grad, grad_input):
        """Accumulate a gradient computed in the canonical layout into ``grad_input``."""
        if self.permuted is None:
            _strided.accumulate(canonical_grad.reshape(-1), grad_input.reshape(-1))
        else:
            _strided.strided_scatter_add(canonical_grad, self.permuted, self.strides, grad_input)


@functools.lru_cache(maxsize=4096)
def _layout(shape, axes):
    """:class:`Layout` of ``shape`` over ``axes``, cached: programs repeat their reductions,
    and a layout is immutable."""
    return Layout(shape, axes)


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
    #: The VJP kernel takes an ``(n, inner)`` scratch row in place of ``y`` (prod).
    exec_scratch = False

    def __init__(self):
        # The attrs ``prepare`` gives, per (shape, strides, dtype, attrs) of the input.
        self._run_cache = {}
        super().__init__()

    def result_dtype(self, x):
        return x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)

    #: The complex case in NumPy (docs/complex.rst), ``(forward(x3), vjp(g, x3, y, gx3))``
    #: over the canonical arrays as ``numpy_function`` and ``numpy_vjp``, the VJP in torch's
    #: convention; None: complex operands raise TypeError.
    complex_numpy = None

    def prepare(self, values, attrs):
        (x,) = values
        x = np.asarray(x)
        if x.dtype.kind == "c":
            if self.complex_numpy is None:
                raise registry.complex_error(self.name, x.dtype)
            x = np.asarray(x, order="C")
        else:
            x = np.asarray(x, dtype=self.result_dtype(x), order="C")
        axis = attrs.get("axis")
        if self.single_axis:
            if x.ndim == 0 and axis in (0, -1):
                axis = None
            elif not isinstance(axis, (int, np.integer)):
                raise TypeError(f"{self.name}() takes a single integer axis, got {axis!r}")
        axes = _broadcast.normalize_axis(axis, x.ndim)
        keepdims = bool(attrs.get("keepdims", False))
        layout = _layout(x.shape, axes)
        shape = _broadcast.reduced_shape(x.shape, axes, keepdims) if self.reduces else x.shape
        extra = {k: v for k, v in attrs.items() if k not in ("axis", "keepdims")}
        return [x], dict(extra, axes=axes, keepdims=keepdims, layout=layout, shape=shape)

    def _run(self, arrays, attrs):
        # Every prepare here is a function of the input's shape, strides and dtype and of the
        # attrs; when it took the input as it is, the next call with the same key skips it.
        key = run_key(attrs) if len(arrays) == 1 else None
        if key is not None:
            x = arrays[0]
            key = (x.shape, x.strides, x.dtype, key)
            found = self._run_cache.get(key)
            if found is not None:
                return arrays, found, self.forward(arrays, found)
        return self._run_and_remember(key, arrays, attrs)

    def forward(self, arrays, attrs):
        layout = attrs["layout"]
        x = arrays[0]
        x3 = x.reshape(layout.canonical) if layout.permuted is None else layout.to_canonical(x)
        out = np.empty(layout.reduced if self.reduces else layout.canonical, dtype=x3.dtype)
        self.run_forward(x3, out, attrs)
        if not self.reduces and layout.permuted is not None:
            return _unpermute(out, layout)
        return out.reshape(attrs["shape"])

    def run_forward(self, x3, out, attrs):
        if x3.dtype.kind == "c":
            out[...] = self.complex_numpy[0](x3).reshape(out.shape)
            return
        self.forward_kernel(x3, out)

    #: ``f(x3)`` of the canonical ``(outer, n, inner)`` input in NumPy (reducing axis 1, or
    #: along it), for :meth:`forward_numpy`; None: no NumPy tier.
    numpy_function = None

    def forward_numpy(self, arrays, attrs):
        layout = attrs["layout"]
        x = arrays[0]
        if self.numpy_function is None or layout.permuted is not None or x.dtype.kind != "f":
            return None
        if layout.n == 0:
            return None  # (empty reductions: the kernels' zeros, or their error)
        with np.errstate(all="ignore"):
            value = self.numpy_function(x.reshape(layout.canonical))
        out = np.empty(attrs["shape"], dtype=x.dtype)
        out[...] = value.reshape(attrs["shape"])
        return out

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
        if gx3.dtype.kind == "c":
            self.complex_numpy[1](g, x3, y, gx3)
            return
        self.vjp_kernel(g, x3 if x3 is not None else gx3, y if y is not None else g, gx3)

    #: ``vjp_kernel`` in NumPy, ``numpy_vjp(g, x3, y, gx3)`` over the same canonical arrays
    #: (``ops/_numpy_vjp.py``: the kernel's typing and order), for :meth:`vjp_numpy`; None:
    #: no twin (tier 0's backward then walks the differentiable rules). A subclass with its
    #: own ``vjp_kernel`` sets its own.
    numpy_vjp = None

    def has_vjp_numpy(self, k, saved, attrs):
        return self.numpy_vjp is not None

    def vjp_numpy(self, k, grad_output, saved, attrs, grad_input):
        if grad_input.dtype.kind == "c":  # (the complex case is NumPy's in both tiers)
            self.vjp(k, grad_output, saved, attrs, grad_input)
            return
        # ``vjp`` with the twin; non-adjacent axes moved together by a transposed copy and
        # the canonical gradient added back through the inverse one (one addition per
        # element, as ``Layout.add_back``'s scatter).
        layout = attrs["layout"]
        x = saved[0]
        order = None
        if layout.permuted is not None:
            order = [d for d in range(len(layout.shape)) if d not in attrs["axes"]]
            order += list(attrs["axes"])
            x = x.transpose(order) if x is not None else None
        x3 = np.ascontiguousarray(x).reshape(layout.canonical) if x is not None else None
        y = saved.output
        row = layout.reduced if self.reduces else layout.canonical
        g = grad_output.reshape(row)
        y = y.reshape(row) if y is not None else None
        target = grad_input.reshape(layout.canonical) if order is None else np.zeros(
            layout.canonical, dtype=grad_input.dtype)
        with np.errstate(all="ignore"):
            self.numpy_vjp(g, x3, y, target)
        if order is not None:
            grad_input += target.reshape(layout.permuted).transpose(np.argsort(order))

    def vjp_batched(self, k, grad_outputs, saved, attrs, grad_inputs):
        """The batch as a prange over the op's own VJP kernel (saved values shared), or as
        the same loop on this thread where this process may not start a parallel region."""
        layout = attrs["layout"]
        if (
            layout.permuted is not None
            or type(self).run_vjp is not AxisOp.run_vjp
            or grad_outputs.size < config.PARALLEL_MIN_ELEMENTS
            or grad_inputs.dtype.kind == "c"
        ):
            super().vjp_batched(k, grad_outputs, saved, attrs, grad_inputs)
            return
        batch = grad_outputs.shape[0]
        canonical = (layout.outer, layout.n, layout.inner)
        row = (layout.outer, layout.inner) if self.reduces else canonical
        g = grad_outputs.reshape((batch,) + row)
        gx = grad_inputs.reshape((batch,) + canonical)
        x3 = saved[0].reshape(canonical) if saved[0] is not None else gx[0]
        y = saved.output.reshape(row) if saved.output is not None else g[0]
        module = self.batched_module
        kernel = module.batched if use_threads(grad_outputs.size) else module.batched_serial
        kernel(g, x3, y, gx)

    @property
    def batched_module(self):
        """The generated drivers over ``vjp_kernel``, one module per op, cached on disk:
        ``batched``, a ``prange`` over the batch, and ``batched_serial``, the same loop on one
        thread (each compiles on its first call)."""
        module = getattr(self, "_batched_module", None)
        if module is None:
            kernel = type(self).vjp_kernel
            name = kernel.py_func.__name__
            # The driver links the kernel in: its source hash keys the driver's cache.
            digest = hashlib.sha1(inspect.getsource(kernel.py_func).encode()).hexdigest()
            source = BATCHED_DRIVER.format(module=kernel.py_func.__module__, name=name,
                                           digest=digest)
            module = self._batched_module = _kernels.load_module(f"{self.name}_batched", source)
        return module

    def exec_spec(self, k, node):
        layout = node.attrs["layout"]
        if layout.permuted is not None or (
            type(self).run_vjp is not AxisOp.run_vjp and not self.exec_scratch
        ):
            return None
        operands = []
        if 0 in self.saves:
            operands.append(node.saved_inputs[0])
        if self.saves_output:
            operands.append(node.saved_output)
        return ExecSpec(self.exec_driver, operands, (layout.outer, layout.n, layout.inner), ())

    @property
    def exec_driver(self):
        """The compiled executor's driver of this op's VJP kernel (generated, cached)."""
        driver = getattr(self, "_exec_driver", None)
        if driver is None:
            kernel = type(self).vjp_kernel
            function = kernel.py_func
            digest = hashlib.sha1(inspect.getsource(function).encode()).hexdigest()
            row = "outer * inner" if self.reduces else "outer * n * inner"
            row_shape = "(outer, inner)" if self.reduces else "(outer, n, inner)"
            lines = [f"    g = array_at(operands[0], {row}, like).reshape({row_shape})"]
            j = 1
            x = y = "gx"
            if 0 in self.saves:
                lines.append(f"    x = array_at(operands[{j}], full, like).reshape(shape)")
                x, j = "x", j + 1
            if self.saves_output:
                lines.append(f"    y = array_at(operands[{j}], {row}, like).reshape({row_shape})")
                y, j = "y", j + 1
            elif self.exec_scratch:
                lines.append("    y = np.empty((n, inner), dtype=like.dtype)")
                y = "y"
            lines.append(f"    gx = array_at(operands[{j}], full, like).reshape(shape)")
            source = EXEC_DRIVER.format(
                module=function.__module__, name=function.__name__, digest=digest,
                body="\n".join(lines), x=x, y=y if y != "gx" else "g",
            )
            module = _kernels.load_module(f"{self.name}_exec", source)
            driver = self._exec_driver = module.driver
        return driver

    def forward_spec(self, arrays, attrs, output):
        layout = attrs["layout"]
        if output.dtype.kind == "c":
            return None  # (NumPy's complex case, no kernel: the program runs eagerly)
        # The drivers call ``forward_kernel`` alone: no other ``run_forward``, and no
        # unpermuting of a result of the input's shape (those ops take one axis: never).
        if type(self).run_forward is not AxisOp.run_forward or (
            layout.permuted is not None and not self.reduces
        ):
            return None
        ints = (layout.outer, layout.n, layout.inner)
        module = self.forward_module
        if layout.permuted is None:
            return module.driver, ints, ()
        collapsed, (strides,) = _broadcast.collapse(layout.permuted, [layout.strides])
        ints += (len(collapsed), *collapsed.tolist(), *strides.tolist())
        return module.permuted, ints, ()

    @property
    def forward_module(self):
        """A compiled program's drivers of this op's forward kernel (generated, cached):
        ``driver`` over the canonical layout, ``permuted`` gathering the input into it first
        (``ints``: ``[outer, n, inner, nd, shape.., strides..]``, collapsed, in elements)."""
        module = getattr(self, "_forward_module", None)
        if module is None:
            function = type(self).forward_kernel.py_func
            # The drivers link in the kernel, the helpers of its module and ``gather``: numba's
            # cache of them does not see edits to those modules, whose sources key it here.
            source = inspect.getsource(inspect.getmodule(function)) + inspect.getsource(_strided)
            row = "(outer, inner)" if self.reduces else "(outer, n, inner)"
            source = FORWARD_DRIVER.format(
                module=function.__module__, name=function.__name__,
                digest=hashlib.sha1(source.encode()).hexdigest(), row=row,
                row_size="inner" if self.reduces else "n * inner",
            )
            module = self._forward_module = _kernels.load_module(f"{self.name}_forward", source)
        return module

    def make_function(self):
        return None


EXEC_DRIVER = """# Generated by autograd_nb.ops.reduction; do not edit. Kernel source {digest}.
import numpy as np
from numba import njit

from autograd_nb.ops._pointers import array_at
from {module} import {name} as kernel


@njit(cache=True, nogil=True)
def driver(operands, ints, floats, like):
    outer, n, inner = ints[0], ints[1], ints[2]
    full = outer * n * inner
    shape = (outer, n, inner)
{body}
    kernel(g, {x}, {y}, gx)
"""


FORWARD_DRIVER = """# Generated by autograd_nb.ops.reduction; do not edit. Kernel module {digest}.
import numpy as np
from numba import njit

from autograd_nb.ops._pointers import array_at
from autograd_nb.ops._strided import gather
from {module} import {name} as kernel


@njit(cache=True, nogil=True)
def driver(operands, ints, floats, like):
    outer, n, inner = ints[0], ints[1], ints[2]
    x = array_at(operands[0], outer * n * inner, like).reshape((outer, n, inner))
    out = array_at(operands[1], outer * {row_size}, like).reshape({row})
    kernel(x, out)


@njit(cache=True, nogil=True)
def permuted(operands, ints, floats, like):
    outer, n, inner, nd = ints[0], ints[1], ints[2], ints[3]
    source = array_at(operands[0], outer * n * inner, like)
    x = np.empty((outer, n, inner), dtype=like.dtype)
    if x.size:
        gather(source, 0, ints[4:4 + nd], ints[4 + nd:4 + 2 * nd], x.reshape(-1))
    out = array_at(operands[1], outer * {row_size}, like).reshape({row})
    kernel(x, out)
"""


BATCHED_DRIVER = """# Generated by autograd_nb.ops.reduction; do not edit. Kernel source {digest}.
from numba import njit, prange
from {module} import {name} as kernel


@njit(cache=True, nogil=True, parallel=True)
def batched(g, x, y, gx):
    for b in prange(g.shape[0]):
        kernel(g[b], x, y, gx[b])


@njit(cache=True, nogil=True)
def batched_serial(g, x, y, gx):
    for b in range(g.shape[0]):
        kernel(g[b], x, y, gx[b])
"""


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


def _running_sum(x3):
    """The sums along axis 1 of ``x3`` in the kernels' order: one after another, from 0."""
    return np.add.accumulate(x3, axis=1)[:, -1] + x3.dtype.type(0)  # (0 + -0 is +0)


def _numpy_sum(x3):
    """``_sum_forward`` in NumPy, in its order: a contiguous row of 8 or more in eight
    running sums combined pairwise, then the rest in turn; anything else in turn."""
    outer, n, inner = x3.shape
    if inner != 1 or n < 8:
        return _running_sum(x3)
    whole = n - n % 8
    s = _running_sum(x3[:, :whole, 0].reshape(outer, whole // 8, 8))
    total = ((s[:, 0] + s[:, 1]) + (s[:, 2] + s[:, 3])) + (
        (s[:, 4] + s[:, 5]) + (s[:, 6] + s[:, 7])
    )
    for j in range(whole, n):
        total += x3[:, j, 0]
    return total


@njit(cache=True, nogil=True)
def _row_sum(x, o, zero):
    # Eight running sums: independent additions vectorise, and the error grows more slowly
    # than with one (NumPy sums contiguous rows in blocks of eight too).
    n = x.shape[1]
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = zero
    whole = n - n % 8
    for j in range(0, whole, 8):
        s0 += x[o, j, 0]
        s1 += x[o, j + 1, 0]
        s2 += x[o, j + 2, 0]
        s3 += x[o, j + 3, 0]
        s4 += x[o, j + 4, 0]
        s5 += x[o, j + 5, 0]
        s6 += x[o, j + 6, 0]
        s7 += x[o, j + 7, 0]
    total = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    for j in range(whole, n):
        total += x[o, j, 0]
    return total


@njit(cache=True, nogil=True)
def _sum_forward(x, out):
    outer, n, inner = x.shape
    for o in range(outer):
        if inner == 1:  # a contiguous row: sum in registers, not through ``out``
            out[o, 0] = 0
            if n < 8:
                # Short rows (``(m, 2)``): one running sum, inline (a call per row cost more
                # than the row): the same bits, as ``_row_sum``'s eight would each stay zero.
                total = out[o, 0]
                for j in range(n):
                    total += x[o, j, 0]
                out[o, 0] = total
            else:
                out[o, 0] = _row_sum(x, o, out[o, 0])
            continue
        for k in range(inner):
            out[o, k] = 0
        for j in range(n):
            for k in range(inner):
                out[o, k] += x[o, j, k]


@njit(cache=True, nogil=True)
def _sum_vjp(g, x, y, gx):
    outer, n, inner = gx.shape
    if inner == 1:  # (a sum along the last axis): one read of ``g`` per row
        for o in range(outer):
            grad = g[o, 0]
            for j in range(n):
                gx[o, j, 0] += grad
        return
    for o in range(outer):
        for j in range(n):
            for k in range(inner):
                gx[o, j, k] += g[o, k]


def _numpy_sum_vjp(g, x, y, gx):
    gx += g[:, None, :]  # (one addition per element, in the dtype)


@cuda_twin("reduction", "Sum")
class Sum(AxisOp):
    """``sum(x, axis=None, keepdims=False)``."""

    numpy_function = staticmethod(_numpy_sum)

    name = "sum"
    forward_kernel = staticmethod(_sum_forward)
    vjp_kernel = staticmethod(_sum_vjp)
    numpy_vjp = staticmethod(_numpy_sum_vjp)
    complex_numpy = (staticmethod(lambda x3: x3.sum(axis=1)), staticmethod(_numpy_sum_vjp))

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


# -- helpers shared by the differentiable rules -------------------------------------------------


def _reduce(name, tensor, attrs):
    """``name`` (sum, prod) over the op's axes, keeping them as length 1."""
    return call(name, tensor, axis=attrs["axes"], keepdims=True)


def _group_size(shape, axis):
    """Number of elements that each result of a reduction over ``axis`` combines."""
    axes = _broadcast.normalize_axis(axis, len(shape))
    return int(np.prod([shape[a] for a in axes], dtype=np.int64))


# -- prod --------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _prod_forward(x, out):
    outer, n, inner = x.shape
    for o in range(outer):
        if inner == 1:
            out[o, 0] = 1
            product = out[o, 0]  # a one of the output's dtype
            for j in range(n):
                product *= x[o, j, 0]
            out[o, 0] = product
            continue
        for k in range(inner):
            out[o, k] = 1
        for j in range(n):
            for k in range(inner):
                out[o, k] *= x[o, j, k]


@njit(cache=True, nogil=True)
def _prod_vjp(g, x, scratch, gx):
    # The product of the others is prefix(j) * suffix(j): no division, so zeros are exact.
    # ``scratch`` (n, inner) first holds the suffix products; walking forward, each row, once
    # used, is overwritten with the prefix product that the next row needs.
    outer, n, inner = gx.shape
    if n == 0:
        return
    for o in range(outer):
        for k in range(inner):
            scratch[n - 1, k] = 1
        for j in range(n - 1, 0, -1):
            for k in range(inner):
                scratch[j - 1, k] = scratch[j, k] * x[o, j, k]
        for k in range(inner):
            gx[o, 0, k] += g[o, k] * scratch[0, k]
            scratch[0, k] = x[o, 0, k]
        for j in range(1, n):
            for k in range(inner):
                prefix = scratch[j - 1, k]
                gx[o, j, k] += g[o, k] * prefix * scratch[j, k]
                scratch[j, k] = prefix * x[o, j, k]


def _numpy_prod_vjp(g, x, y, gx):
    # ``_prod_vjp``'s products, in the dtype, each in its order: the suffix products from the
    # end (``1 * x[n-1]`` first), the prefix products from the start, ``g * prefix * suffix``.
    n = gx.shape[1]
    if n == 0:
        return
    one = np.ones_like(x[:, :1])
    suffix = np.concatenate([np.multiply.accumulate(x[:, :0:-1], axis=1)[:, ::-1], one], 1)
    prefix = np.multiply.accumulate(x, axis=1)
    gx[:, 0] += g * suffix[:, 0]
    gx[:, 1:] += g[:, None, :] * prefix[:, :-1] * suffix[:, 1:]


def _product_of_others(x, attrs):
    """Per element, the product of the other elements of its group, written with ops so that
    it differentiates again at zeros too: each group becomes an ``(n, n)`` matrix whose
    diagonal is replaced by ones, then a product along its rows (O(n^2) per group)."""
    layout = attrs["layout"]
    shape, axes, n = layout.shape, attrs["axes"], layout.n
    order = tuple(d for d in range(len(shape)) if d not in axes) + tuple(axes)
    rows = call("transpose", x, axes=order)
    rows = call("reshape", rows, shape=(layout.outer * layout.inner, 1, n))
    others = call("where", np.eye(n, dtype=bool), 1.0, rows)
    others = call("prod", others, axis=2)
    others = call("reshape", others, shape=tuple(shape[d] for d in order))
    return call("transpose", others, axes=tuple(int(d) for d in np.argsort(order)))


def _complex_prod_vjp(g, x, y, gx):
    """Complex ``prod``'s VJP over ``(outer, n, inner)``: ``g`` times the conjugate of the
    product of the others (torch's convention), from the products before and after each
    element, so zeros need no division."""
    ones = np.ones_like(x[:, :1, :])
    before = np.cumprod(np.concatenate([ones, x[:, :-1, :]], axis=1), axis=1)
    after = np.cumprod(np.concatenate([ones, x[:, :0:-1, :]], axis=1), axis=1)[:, ::-1, :]
    gx += g[:, None, :] * np.conj(before * after)


@cuda_twin("reduction", "Prod")
class Prod(AxisOp):
    """``prod(x, axis=None, keepdims=False)``."""
    numpy_function = staticmethod(lambda x3: x3.prod(axis=1))

    name = "prod"
    saves = (0,)
    forward_kernel = staticmethod(_prod_forward)
    vjp_kernel = staticmethod(_prod_vjp)
    numpy_vjp = staticmethod(_numpy_prod_vjp)
    complex_numpy = (staticmethod(lambda x3: x3.prod(axis=1)), staticmethod(_complex_prod_vjp))

    def result_dtype(self, x):
        return x.dtype if x.dtype.kind in "fiu" else np.dtype(np.int64)

    exec_scratch = True

    def run_vjp(self, g, x3, y, gx3, attrs):
        if gx3.dtype.kind == "c":
            _complex_prod_vjp(g, x3, y, gx3)
            return
        scratch = np.empty(gx3.shape[1:], dtype=gx3.dtype)
        self.vjp_kernel(g, x3, scratch, gx3)

    def rule(self, k, grad_output, inputs, output, attrs):
        (x,) = inputs
        grad = expand_reduced(grad_output, attrs)
        # (complex: the conjugate derivative, torch's convention; a real x's is itself)
        conj = registry.FUNCTIONS["conj"]
        if np.any(registry.host_values(x) == 0):
            return call("multiply", grad, conj(_product_of_others(x, attrs)))
        # Without zeros, prod / x is the product of the others, and stays so when
        # differentiated again at this point.
        return call("divide", call("multiply", grad, conj(_reduce("prod", x, attrs))), conj(x))


Prod()


@public(family="reduction")
def prod(x, axis=None, keepdims=False):
    """Product of elements over ``axis`` (None: all; an int or a tuple).

    The gradient is exact with zeros in ``x`` (it never divides by ``x``).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([[1.0, 2.0], [3.0, 0.0]], requires_grad=True)
    >>> anb.prod(x, axis=1)
    tensor([2., 0.], grad_fn=<ProdBackward>)
    >>> anb.grad(anb.prod(x), x)
    (tensor([[0., 0.],
           [0., 6.]]),)
    """
    return call("prod", x, axis=axis, keepdims=keepdims)


# -- max, min ----------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _max_forward(x, out):
    outer, n, inner = x.shape
    for o in range(outer):
        if inner == 1:
            best = x[o, 0, 0]
            for j in range(1, n):
                v = x[o, j, 0]
                if v > best or v != v:
                    best = v
            out[o, 0] = best
            continue
        for k in range(inner):
            out[o, k] = x[o, 0, k]
        for j in range(1, n):
            for k in range(inner):
                v = x[o, j, k]
                if v > out[o, k] or v != v:  # NaN propagates, as in NumPy
                    out[o, k] = v


@njit(cache=True, nogil=True)
def _min_forward(x, out):
    outer, n, inner = x.shape
    for o in range(outer):
        if inner == 1:
            best = x[o, 0, 0]
            for j in range(1, n):
                v = x[o, j, 0]
                if v < best or v != v:
                    best = v
            out[o, 0] = best
            continue
        for k in range(inner):
            out[o, k] = x[o, 0, k]
        for j in range(1, n):
            for k in range(inner):
                v = x[o, j, k]
                if v < out[o, k] or v != v:
                    out[o, k] = v


@njit(cache=True, nogil=True, error_model="numpy")
def _extremum_vjp(g, x, y, gx):
    # Ties share the gradient evenly (torch.amax/amin); a NaN result goes to the NaNs.
    outer, n, inner = gx.shape
    for o in range(outer):
        for k in range(inner):
            target = y[o, k]
            is_nan = target != target
            count = 0
            for j in range(n):
                v = x[o, j, k]
                if v == target or (is_nan and v != v):
                    count += 1
            share = g[o, k] / count
            for j in range(n):
                v = x[o, j, k]
                if v == target or (is_nan and v != v):
                    gx[o, j, k] += share


def _numpy_extremum_vjp(g, x, y, gx):
    # ``g / count`` as numba divides a float by an int64: in float64.
    target = y[:, None, :]
    hits = (x == target) | ((target != target) & (x != x))
    share = g / np.sum(hits, axis=1)
    np.add(gx, share[:, None, :], out=gx, where=hits, casting="unsafe")


class Extremum(AxisOp):
    """Base of ``max`` and ``min``: NumPy's dtypes and empty-axis error, torch's tie split."""

    saves = (0,)
    saves_output = True
    vjp_kernel = staticmethod(_extremum_vjp)
    numpy_vjp = staticmethod(_numpy_extremum_vjp)
    ufunc_name = None

    def result_dtype(self, x):
        return x.dtype if x.dtype.kind in "fiub" else np.dtype(np.float64)

    def prepare(self, values, attrs):
        arrays, attrs = super().prepare(values, attrs)
        if attrs["layout"].n == 0:
            raise ValueError(
                f"zero-size array to reduction operation {self.ufunc_name} which has no identity"
            )
        return arrays, attrs

    def rule(self, k, grad_output, inputs, output, attrs):
        # Which elements attain the extremum is constant almost everywhere: a NumPy weight.
        x = registry.host_values(inputs[0])
        kept = _broadcast.reduced_shape(x.shape, attrs["axes"], True)
        y = registry.host_values(output).reshape(kept)
        hits = (x == y) | (np.isnan(x) & np.isnan(y))
        share = hits / np.sum(hits, axis=attrs["axes"], keepdims=True)
        grad = expand_reduced(grad_output, attrs)
        return call("multiply", grad, share.astype(x.dtype))


@cuda_twin("reduction", "Max")
class Max(Extremum):
    """``max(x, axis=None, keepdims=False)``."""
    numpy_function = staticmethod(lambda x3: x3.max(axis=1))

    name = "max"
    ufunc_name = "maximum"
    forward_kernel = staticmethod(_max_forward)


@cuda_twin("reduction", "Min")
class Min(Extremum):
    """``min(x, axis=None, keepdims=False)``."""
    numpy_function = staticmethod(lambda x3: x3.min(axis=1))

    name = "min"
    ufunc_name = "minimum"
    forward_kernel = staticmethod(_min_forward)


Max()
Min()


@public(family="reduction")
def max(x, axis=None, keepdims=False):  # noqa: A001 - NumPy's name
    """Largest element over ``axis`` (None: all; an int or a tuple).

    Tied maxima share the gradient evenly (as ``torch.amax``). An empty axis raises
    ValueError, as in NumPy.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([[1.0, 5.0], [5.0, 2.0]], requires_grad=True)
    >>> anb.max(x, axis=0)
    tensor([5., 5.], grad_fn=<MaxBackward>)
    >>> anb.grad(anb.max(x), x)
    (tensor([[0. , 0.5],
           [0.5, 0. ]]),)
    """
    return call("max", x, axis=axis, keepdims=keepdims)


@public(family="reduction")
def min(x, axis=None, keepdims=False):  # noqa: A001 - NumPy's name
    """Smallest element over ``axis`` (None: all; an int or a tuple).

    Tied minima share the gradient evenly (as ``torch.amin``). An empty axis raises
    ValueError, as in NumPy.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.min(anb.tensor([[3.0, 1.0], [0.5, 2.0]]), axis=1, keepdims=True)
    tensor([[1. ],
            [0.5]])
    """
    return call("min", x, axis=axis, keepdims=keepdims)


# -- logsumexp ---------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _lane_max(x, o, k):
    """Maximum of ``x[o, :, k]``, NaN if any is NaN, -inf if empty (stabilises exp sums)."""
    top = -np.inf
    for j in range(x.shape[1]):
        v = x[o, j, k]
        if v > top or v != v:
            top = v
    return top


@njit(cache=True, nogil=True, error_model="numpy")
def _logsumexp_forward(x, out):
    outer, n, inner = x.shape
    for o in range(outer):
        for k in range(inner):
            top = _lane_max(x, o, k)
            if not (-np.inf < top < np.inf):  # empty or all -inf, an inf, or a NaN
                out[o, k] = top
                continue
            total = 0.0
            for j in range(n):
                total += exp(x[o, j, k] - top)
            out[o, k] = top + log(total)


@njit(cache=True, nogil=True, error_model="numpy")
def _logsumexp_vjp(g, x, y, gx):
    outer, n, inner = gx.shape
    for o in range(outer):
        for j in range(n):
            for k in range(inner):
                gx[o, j, k] += g[o, k] * exp(x[o, j, k] - y[o, k])


def _numpy_logsumexp_vjp(g, x, y, gx):
    gx += g[:, None, :] * _fastmath_numpy.exp(x - y[:, None, :])


@cuda_twin("reduction", "LogSumExp")
class LogSumExp(AxisOp):
    """``logsumexp(x, axis=None, keepdims=False)``."""

    name = "logsumexp"
    saves = (0,)
    saves_output = True
    forward_kernel = staticmethod(_logsumexp_forward)
    vjp_kernel = staticmethod(_logsumexp_vjp)
    numpy_vjp = staticmethod(_numpy_logsumexp_vjp)

    def rule(self, k, grad_output, inputs, output, attrs):
        (x,) = inputs
        grad = expand_reduced(grad_output, attrs)
        return call("multiply", grad, call("exp", x - expand_reduced(output, attrs)))


LogSumExp()


@public(family="reduction")
def logsumexp(x, axis=None, b=None, keepdims=False, return_sign=False):
    """``log(sum(b * exp(x)))`` over ``axis``, computed stably (the maximum is taken out
    first), with the arguments of ``scipy.special.logsumexp``.

    Parameters
    ----------
    x : Tensor or array_like
    axis : None, int or tuple of int, optional
    b : Tensor or array_like, optional
        Weights, broadcast against ``x`` and differentiable. Where a constant weight is 0 the
        element is left out (as in SciPy: an infinite ``x`` there does not make a NaN).
    keepdims : bool, optional
    return_sign : bool, optional
        Return ``(log(abs(s)), sign(s))`` for the weighted sum ``s``, which negative weights
        can make negative (its log is then NaN).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.logsumexp(anb.tensor([1000.0, 1000.0]))
    tensor(1000.69314718)
    >>> anb.logsumexp(anb.tensor([0.0, 0.0]), b=anb.tensor([3.0, 1.0]))
    tensor(1.38629436)
    >>> anb.logsumexp(anb.tensor([0.0, 0.0]), b=[1.0, -2.0], return_sign=True)
    (tensor(0.), tensor(-1.))
    """
    if b is None and not return_sign:
        return call("logsumexp", x, axis=axis, keepdims=keepdims)
    return _weighted_logsumexp(x, axis, b, keepdims, return_sign)


def _weighted_logsumexp(x, axis, b, keepdims, return_sign):
    """``logsumexp`` with weights (a composite): the shift is the largest ``x`` of nonzero
    weight, a constant, so ops that record do the rest."""
    values = registry.host_values(x)
    weights = registry.host_values(1.0 if b is None else b)
    # SciPy's dtype: Python scalar weights are weak (float32 stays float32).
    weak = b is None or type(b) in (int, float)
    dtype = np.result_type(values.dtype, np.float16, *(() if weak else (weights.dtype,)))
    shape = _broadcast.broadcast_shapes(values.shape, weights.shape)
    axes = _broadcast.normalize_axis(axis, len(shape))
    values = np.broadcast_to(values, shape)
    if b is not None and not getattr(b, "requires_grad", False):
        # A constant zero weight leaves its element out. (A differentiable one keeps it: the
        # result's derivative in that weight is not zero.)
        left_out = np.broadcast_to(weights == 0, shape)
        if np.any(left_out):
            values = np.where(left_out, -np.inf, values)
            x = call("where", left_out, -np.inf, x)
    with np.errstate(invalid="ignore"):
        shift = np.max(values, axis=axes, keepdims=True, initial=-np.inf)
    shift = np.where(np.isfinite(shift), shift, 0).astype(dtype)
    terms = call("exp", call("subtract", x, shift))
    if b is not None:
        terms = call("multiply", b, terms)
    total = call("sum", terms, axis=axes, keepdims=True)
    if return_sign:
        sign = call("sign", total.detach())
        total = call("abs", total)
    result = call("add", call("log", total), shift)
    if not keepdims:
        reduced = _broadcast.reduced_shape(shape, axes, False)
        result = call("reshape", result, shape=reduced)
        sign = call("reshape", sign, shape=reduced) if return_sign else None
    return (result, sign) if return_sign else result


# -- softmax, log_softmax ----------------------------------------------------------------------


# The forwards compute a block of outer slices at a time: each lane's maximum, the differences
# ``x - top`` into a float64 scratch, then their exponentials in one loop over the whole block,
# which LLVM vectorises (a lane's own loop, over ``n``, is often a handful of elements: the
# (256, 10) logits of ``mlp_train_step``: 26 -> 18 us a kernel, docs/benchmarking.rst, "Softmax
# in blocks"). Then each lane's sum, in the order of ``j`` from 0.0 as before, so the same
# bits as the lane-by-lane loops that small inputs still run (``_softmax_lanes``).

#: Elements of a block's scratch, at most (and one outer slice at least).
_SOFTMAX_BLOCK = 4096
#: Inputs of at most this many elements run lane by lane, with no scratch to allocate.
_SOFTMAX_LANES = 64


@njit(cache=True, nogil=True)
def _softmax_rows(n, inner):
    """Outer slices per block (this module's ``max`` and ``min`` are NumPy's: not here)."""
    size = n * inner
    return _SOFTMAX_BLOCK // size if 0 < size <= _SOFTMAX_BLOCK else 1


@njit(cache=True, nogil=True, error_model="numpy")
def _softmax_exps(x, o0, rows, top, e, total):
    """For the ``rows`` outer slices from ``o0``: ``top[r * inner + k]`` each lane's maximum,
    ``e[(r * n + j) * inner + k] = exp(x[o0 + r, j, k] - top[..])`` in float64 and
    ``total[r * inner + k]`` the sum of a lane's ``e`` over ``j``, in turn from 0.0."""
    _, n, inner = x.shape
    for r in range(rows):
        for k in range(inner):
            top[r * inner + k] = _lane_max(x, o0 + r, k)
        for j in range(n):
            at = (r * n + j) * inner
            for k in range(inner):
                e[at + k] = x[o0 + r, j, k] - top[r * inner + k]
    for i in range(rows * n * inner):
        e[i] = exp(e[i])
    for r in range(rows):
        for k in range(inner):
            lane = 0.0
            for j in range(n):
                lane += e[(r * n + j) * inner + k]
            total[r * inner + k] = lane


@njit(cache=True, nogil=True, error_model="numpy")
def _softmax_lanes(x, out):
    """``_softmax_forward`` lane by lane, with no scratch: the same values, for small inputs
    (``fastest_autograd``'s softmax of four scalars, run a hundred times a step: the scratch's
    allocations cost it 6%)."""
    outer, n, inner = x.shape
    for o in range(outer):
        for k in range(inner):
            top = _lane_max(x, o, k)
            total = 0.0
            for j in range(n):
                e = exp(x[o, j, k] - top)
                out[o, j, k] = e
                total += e
            scale = 1.0 / total
            for j in range(n):
                out[o, j, k] *= scale


@njit(cache=True, nogil=True, error_model="numpy")
def _softmax_blocks(x, out, log_softmax):
    """The forward of ``softmax`` (``log_softmax`` False) or ``log_softmax`` in blocks of
    outer slices (see ``_softmax_exps``)."""
    outer, n, inner = x.shape
    rows = _softmax_rows(n, inner)
    e = np.empty(rows * n * inner)
    top = np.empty(rows * inner)
    total = np.empty(rows * inner)
    for o0 in range(0, outer, rows):
        m = rows if outer - o0 > rows else outer - o0
        _softmax_exps(x, o0, m, top, e, total)
        for i in range(m * inner):  # the shift, or the scale
            total[i] = top[i] + log(total[i]) if log_softmax else 1.0 / total[i]
        for r in range(m):
            for j in range(n):
                at = (r * n + j) * inner
                for k in range(inner):
                    if log_softmax:
                        out[o0 + r, j, k] = x[o0 + r, j, k] - total[r * inner + k]
                    else:  # (e rounded to out's dtype, then scaled)
                        out[o0 + r, j, k] = e[at + k]
                        out[o0 + r, j, k] *= total[r * inner + k]


@njit(cache=True, nogil=True, error_model="numpy")
def _softmax_either(x, out, log_softmax):
    """``softmax`` or ``log_softmax`` along axis 1: lane by lane up to ``_SOFTMAX_LANES``
    elements, else in blocks."""
    outer, n, inner = x.shape
    if outer * n * inner > _SOFTMAX_LANES:
        _softmax_blocks(x, out, log_softmax)
    elif log_softmax:
        _log_softmax_lanes(x, out)
    else:
        _softmax_lanes(x, out)


@njit(cache=True, nogil=True, error_model="numpy")
def _softmax_forward(x, out):
    _softmax_either(x, out, False)


@njit(cache=True, nogil=True, error_model="numpy")
def _softmax_vjp(g, x, y, gx):
    # gx += y * (g - sum(g * y))
    outer, n, inner = gx.shape
    for o in range(outer):
        for k in range(inner):
            dot = 0.0
            for j in range(n):
                dot += g[o, j, k] * y[o, j, k]
            for j in range(n):
                gx[o, j, k] += y[o, j, k] * (g[o, j, k] - dot)


@njit(cache=True, nogil=True, error_model="numpy")
def _log_softmax_lanes(x, out):
    """``_log_softmax_forward`` lane by lane (see ``_softmax_lanes``)."""
    outer, n, inner = x.shape
    for o in range(outer):
        for k in range(inner):
            top = _lane_max(x, o, k)
            total = 0.0
            for j in range(n):
                total += exp(x[o, j, k] - top)
            shift = top + log(total)
            for j in range(n):
                out[o, j, k] = x[o, j, k] - shift


@njit(cache=True, nogil=True, error_model="numpy")
def _log_softmax_forward(x, out):
    _softmax_either(x, out, True)


@njit(cache=True, nogil=True, error_model="numpy")
def _log_softmax_vjp(g, x, y, gx):
    # gx += g - exp(y) * sum(g)
    outer, n, inner = gx.shape
    for o in range(outer):
        for k in range(inner):
            total = 0.0
            for j in range(n):
                total += g[o, j, k]
            for j in range(n):
                gx[o, j, k] += g[o, j, k] - exp(y[o, j, k]) * total


def _numpy_softmax(x3, log):
    # The kernels' steps along axis 1, in float64 as there (``_lane_max`` starts from a
    # float64 -inf, so a float32 lane's maximum is a float64): ``_fastmath``'s exp of each
    # difference, their sum in turn, then a scale (of the exponentials rounded to the
    # result's dtype) or a shift.
    top = x3.max(axis=1, keepdims=True).astype(np.float64)
    e = _fastmath_numpy.exp(x3 - top)
    total = _running_sum(e)[:, None]
    if log:
        return x3 - (top + _fastmath_numpy.log(total))
    return e.astype(x3.dtype) * (1.0 / total)


def _numpy_softmax_vjp(g, x, y, gx):
    # The kernel's float64 ``dot`` of the products (each in the dtype), one after another.
    dot = _numpy_vjp.running_sum64(g * y, axis=1)
    _numpy_vjp.add_into(gx, y * (g - dot[:, None, :]))


def _numpy_log_softmax_vjp(g, x, y, gx):
    total = _numpy_vjp.running_sum64(g, axis=1)
    _numpy_vjp.add_into(gx, g - _fastmath_numpy.exp(y) * total[:, None, :])


@cuda_twin("reduction", "Softmax")
class Softmax(AxisOp):
    """``softmax(x, axis=-1)``."""
    numpy_function = staticmethod(lambda x3: _numpy_softmax(x3, log=False))

    name = "softmax"
    reduces = False
    single_axis = True
    saves_output = True
    forward_kernel = staticmethod(_softmax_forward)
    vjp_kernel = staticmethod(_softmax_vjp)
    numpy_vjp = staticmethod(_numpy_softmax_vjp)

    def rule(self, k, grad_output, inputs, output, attrs):
        dot = _reduce("sum", call("multiply", grad_output, output), attrs)
        return call("multiply", output, grad_output - dot)


@cuda_twin("reduction", "LogSoftmax")
class LogSoftmax(AxisOp):
    """``log_softmax(x, axis=-1)``."""
    numpy_function = staticmethod(lambda x3: _numpy_softmax(x3, log=True))

    name = "log_softmax"
    reduces = False
    single_axis = True
    saves_output = True
    forward_kernel = staticmethod(_log_softmax_forward)
    vjp_kernel = staticmethod(_log_softmax_vjp)
    numpy_vjp = staticmethod(_numpy_log_softmax_vjp)

    def rule(self, k, grad_output, inputs, output, attrs):
        total = _reduce("sum", grad_output, attrs)
        return grad_output - call("multiply", total, call("exp", output))


SOFTMAX = Softmax()
LogSoftmax()


@public(family="reduction")
def softmax(x, axis=-1):
    """``exp(x) / sum(exp(x))`` along one ``axis``, computed stably.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.softmax(anb.tensor([[0.0, 0.0], [0.0, 1000.0]]))
    tensor([[0.5, 0.5],
            [0. , 1. ]])
    """
    return registry._dispatch(SOFTMAX, (x,), {"axis": axis})  # ``call`` without the lookup


@public(family="reduction")
def log_softmax(x, axis=-1):
    """``x - logsumexp(x)`` along one ``axis``: the log of :func:`softmax`, computed stably.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.log_softmax(anb.tensor([0.0, 0.0]))
    tensor([-0.69314718, -0.69314718])
    """
    return call("log_softmax", x, axis=axis)


# -- cumsum ------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _cumsum_forward(x, out):
    outer, n, inner = x.shape
    for o in range(outer):
        for j in range(n):
            for k in range(inner):
                previous = out[o, j - 1, k] if j > 0 else 0
                out[o, j, k] = previous + x[o, j, k]


@njit(cache=True, nogil=True)
def _cumsum_vjp(g, x, y, gx):
    # The transpose of a cumulative sum is the cumulative sum from the end.
    outer, n, inner = gx.shape
    for o in range(outer):
        for k in range(inner):
            running = 0.0
            for j in range(n - 1, -1, -1):
                running += g[o, j, k]
                gx[o, j, k] += running


def _numpy_cumsum_vjp(g, x, y, gx):
    # The float64 running sum from the end (``running = 0.0``, so never -0.0).
    running = np.add.accumulate(g[:, ::-1].astype(np.float64), axis=1)[:, ::-1] + 0.0
    _numpy_vjp.add_into(gx, running)


def _complex_cumsum_vjp(g, x, y, gx):
    gx += np.cumsum(g[:, ::-1], axis=1)[:, ::-1]  # (the sums from the end, in complex)


@cuda_twin("reduction", "Cumsum")
class Cumsum(AxisOp):
    """``cumsum(x, axis=None)``: NumPy's, so ``axis=None`` scans the flattened input."""
    numpy_function = staticmethod(lambda x3: np.cumsum(x3, axis=1, dtype=x3.dtype))

    name = "cumsum"
    reduces = False
    single_axis = True
    forward_kernel = staticmethod(_cumsum_forward)
    vjp_kernel = staticmethod(_cumsum_vjp)
    numpy_vjp = staticmethod(_numpy_cumsum_vjp)
    complex_numpy = (staticmethod(lambda x3: np.cumsum(x3, axis=1)),
                     staticmethod(_complex_cumsum_vjp))

    def result_dtype(self, x):
        return x.dtype if x.dtype.kind in "fiu" else np.dtype(np.int64)

    def prepare(self, values, attrs):
        (x,) = values
        x = np.asarray(x)
        input_shape = x.shape
        attrs = dict(attrs)
        if attrs.get("axis") is None or x.ndim == 0:  # NumPy scans a 0-d input as 1-d
            x = x.reshape(-1)
            attrs["axis"] = 0 if attrs.get("axis") is None else attrs["axis"]
        arrays, attrs = super().prepare([x], attrs)
        return arrays, dict(attrs, input_shape=input_shape)

    def rule(self, k, grad_output, inputs, output, attrs):
        # Reverse cumulative sum without a flip: total - cumsum(g) + g.
        grad = grad_output
        if attrs["axes"]:
            total = _reduce("sum", grad, attrs)
            running = call("cumsum", grad, axis=attrs["axes"][0])
            grad = total - running + grad
        return call("reshape", grad, shape=attrs["input_shape"])


Cumsum()


@public(family="reduction")
def cumsum(x, axis=None):
    """Cumulative sum along ``axis``; ``axis=None`` scans the flattened input (as NumPy).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> anb.cumsum(x)
    tensor([ 1.,  3.,  6., 10.], grad_fn=<CumsumBackward>)
    >>> anb.grad(anb.cumsum(x, axis=1).sum(), x)
    (tensor([[2., 1.],
           [2., 1.]]),)
    """
    return call("cumsum", x, axis=axis)


# -- composites: no kernel and no VJP of their own ---------------------------------------------


def _divide_by_count(total, count):
    # NumPy divides by a count that can be 0 (an empty mean, ddof >= n): nan or inf.
    return call("divide", total, count)


@public(family="reduction")
def mean(x, axis=None, keepdims=False):
    """Arithmetic mean over ``axis`` (None: all; an int or a tuple); integers give float64.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.mean(anb.tensor([[1, 2], [3, 5]]), axis=0)
    tensor([2. , 3.5])
    """
    total = call("sum", x, axis=axis, keepdims=keepdims)
    return _divide_by_count(total, _group_size(np.shape(x), axis))


@public(family="reduction")
def var(x, axis=None, ddof=0, keepdims=False):
    """Variance over ``axis``: ``sum((x - mean(x)) ** 2) / (n - ddof)``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.var(anb.tensor([1.0, 2.0, 3.0, 4.0]))
    tensor(1.25)
    >>> anb.var(anb.tensor([1.0, 2.0, 3.0, 4.0]), ddof=1)
    tensor(1.66666667)
    """
    deviation = call("subtract", x, mean(x, axis=axis, keepdims=True))
    if getattr(deviation, "dtype", None) is not None and deviation.dtype.kind == "c":
        # NumPy's complex variance is real: the mean of |x - mean|^2.
        deviation = call("abs", deviation)
    total = call("sum", call("square", deviation), axis=axis, keepdims=keepdims)
    count = _group_size(np.shape(x), axis) - ddof
    return _divide_by_count(total, count if count > 0 else 0)


@public(family="reduction")
def std(x, axis=None, ddof=0, keepdims=False):
    """Standard deviation over ``axis``: ``sqrt(var(x, axis, ddof))``.

    Where the standard deviation is 0 (one element, or equal elements) its gradient is taken
    as 0, to every order, as torch's (``sqrt``'s derivative is infinite there).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.std(anb.tensor([[1.0, 3.0], [2.0, 2.0]]), axis=1)
    tensor([1., 0.])
    >>> x = anb.tensor([2.0, 2.0], requires_grad=True)
    >>> anb.grad(anb.std(x), x)
    (tensor([0., 0.]),)
    """
    return call("_std_root", var(x, axis=axis, ddof=ddof, keepdims=keepdims))
