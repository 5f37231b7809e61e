"""N-dimensional convolution: the ``_convolve`` op behind ``autograd_nb.scipy.signal``.

``_convolve(a, b, mode)`` is the direct convolution of two arrays of the same number of
dimensions, ``"full"`` (every overlap) or ``"valid"`` (where ``b`` lies wholly inside ``a``,
which is at least as large in every dimension). SciPy's ``"same"`` is a centred slice of
``"full"``, as SciPy computes it, and lives in the public function.

Both VJPs are ``_convolve`` again, of the gradient with an input reversed along every axis
(the flip of a C-ordered array is its flat buffer reversed):

- ``full``: ``a_bar = valid(g, flip(b))``, ``b_bar = valid(g, flip(a))``;
- ``valid``: ``a_bar = full(g, flip(b))``, ``b_bar = valid(flip(a), g)``.

Every one of them meets ``valid``'s size rule, so the rules are the op itself and
differentiate to any order. One kernel, ``_convolve_add``, does all the work (the forward and
the four VJPs), compiled once per dtype; its NumPy twin adds the same products in the same
order (a block per element of the second operand, or a sequential sum per element of the
result where that is the smaller), so tier 0 gives the kernel's bits. A
replayed program (:func:`autograd_nb.compile`) runs the kernel through
``_convolve_forward_driver``, and the compiled backward executor its VJPs through
``_convolve_vjp_driver``. On CUDA the twin in :mod:`autograd_nb.cuda.signal` runs the same
sum, one thread per element of the result.
"""

import numpy as np
from numba import njit

from ._linalg_common import _accumulating, _float_arrays
from ._pointers import array_at
from .assembly import flip
from .registry import ExecSpec, Op, call, cuda_twin

MODES = ("full", "valid")


def output_shape(a_shape, b_shape, mode):
    """The shape of ``_convolve(a, b, mode)``."""
    if mode == "full":
        return tuple(m + n - 1 for m, n in zip(a_shape, b_shape, strict=True))
    return tuple(m - n + 1 for m, n in zip(a_shape, b_shape, strict=True))


def _shift(b_shape, mode):
    """The offset ``s`` of ``out[n] += b[k] * a[n + s - k]``: 0 for ``full``, ``b``'s extent
    less one for ``valid``."""
    return np.array([0 if mode == "full" else n - 1 for n in b_shape], dtype=np.int64)


@njit(cache=True, nogil=True)
def _convolve_add(a, a_shape, b, b_shape, out, out_shape, shift):
    """``out[n] += sum_k b[k] * a[n + shift - k]`` over the elements ``k`` of ``b`` in C
    order and the ``n`` where that index lies inside ``a``. Flat C-ordered arrays, their
    shapes as int64 arrays (at least one dimension)."""
    nd = a_shape.shape[0]
    a_strides = _strides(a_shape)
    out_strides = _strides(out_shape)
    k = np.zeros(nd, np.int64)
    lo = np.zeros(nd, np.int64)
    hi = np.zeros(nd, np.int64)
    for flat in range(b.size):
        rest = flat
        for d in range(nd - 1, -1, -1):
            k[d] = rest % b_shape[d]
            rest //= b_shape[d]
        empty = False
        for d in range(nd):
            lo[d] = max(0, k[d] - shift[d])
            hi[d] = min(out_shape[d], a_shape[d] + k[d] - shift[d])
            empty = empty or hi[d] <= lo[d]
        if not empty:
            _add_block(b[flat], a, a_strides, out, out_strides, k, lo, hi, shift)


@njit(cache=True, nogil=True)
def _strides(shape):
    """The element strides of a C-ordered array of ``shape``."""
    strides = np.ones(shape.shape[0], np.int64)
    for d in range(shape.shape[0] - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    return strides


@njit(cache=True, nogil=True)
def _add_block(weight, a, a_strides, out, out_strides, k, lo, hi, shift):
    """``out[n] += weight * a[n + shift - k]`` for ``n`` in the block ``[lo, hi)``, its
    last axis the inner loop."""
    nd = lo.shape[0]
    last = nd - 1
    length = hi[last] - lo[last]
    n = lo.copy()
    while True:
        o = 0
        s = 0
        for d in range(nd):
            o += n[d] * out_strides[d]
            s += (n[d] + shift[d] - k[d]) * a_strides[d]
        for j in range(length):
            out[o + j] += weight * a[s + j]
        d = last - 1
        while d >= 0:
            n[d] += 1
            if n[d] < hi[d]:
                break
            n[d] = lo[d]
            d -= 1
        if d < 0:
            return


def _convolve_add_numpy(a, b, out, shift):
    """``_convolve_add``'s twin on n-d arrays: each element of ``out`` receives its products
    in the order of ``b``'s elements, as in the kernel. By blocks of ``out`` per element of
    ``b``, or, where ``b`` has more elements than ``out`` (a VJP's), per element of ``out``
    by a sequential ``add.accumulate`` of its products."""
    if b.size <= out.size:
        _by_element_of_b(a, b, out, shift)
    else:
        _by_element_of_out(a, b, out, shift)


def _by_element_of_b(a, b, out, shift):
    for k in np.ndindex(b.shape):
        lo = [max(0, kd - s) for kd, s in zip(k, shift)]
        hi = [min(o, m + kd - s) for o, m, kd, s in zip(out.shape, a.shape, k, shift)]
        if any(h <= low for low, h in zip(lo, hi)):
            continue
        target = tuple(slice(low, h) for low, h in zip(lo, hi))
        source = tuple(slice(low + s - kd, h + s - kd)
                       for low, h, s, kd in zip(lo, hi, shift, k))
        out[target] += b[k] * a[source]


def _by_element_of_out(a, b, out, shift):
    for n in np.ndindex(out.shape):
        # the k with 0 <= n + shift - k < len(a), in C order, and the a they meet, reversed
        lo = [max(0, nd + s - m + 1) for nd, s, m in zip(n, shift, a.shape)]
        hi = [min(len_b, nd + s + 1) for nd, s, len_b in zip(n, shift, b.shape)]
        if any(h <= low for low, h in zip(lo, hi)):
            continue
        weights = b[tuple(slice(low, h) for low, h in zip(lo, hi))]
        source = a[tuple(slice(nd + s - low, None if nd + s - h < 0 else nd + s - h, -1)
                         for nd, s, low, h in zip(n, shift, lo, hi))]
        terms = np.concatenate([out[n].reshape(1), (weights * source).reshape(-1)])
        out[n] = np.add.accumulate(terms)[-1]


def _reversed(x):
    """``x`` reversed along every axis, C-contiguous."""
    return np.ascontiguousarray(x.reshape(-1)[::-1]).reshape(x.shape)


def _run(kernel, a, b, out, mode):
    """``out += _convolve(a, b, mode)`` with the kernel or (``kernel`` None) its twin."""
    shift = _shift(b.shape, mode)
    if kernel is None:
        _convolve_add_numpy(a, b, out, shift)
        return
    shape = np.array(a.shape, dtype=np.int64)
    kernel(a.reshape(-1), shape, b.reshape(-1), np.array(b.shape, dtype=np.int64),
           out.reshape(-1), np.array(out.shape, dtype=np.int64), shift)


@njit(cache=True, nogil=True)
def _convolve_forward_driver(operands, ints, floats, like):
    """``_convolve``'s forward in a replayed program (:meth:`Convolve.forward_spec`):
    operands ``a``, ``b`` and the output; ``ints`` the number of dimensions, then the shapes
    of ``a``, ``b`` and the output and the shift, each of that length."""
    nd = ints[0]
    a_shape = ints[1 : 1 + nd].copy()
    b_shape = ints[1 + nd : 1 + 2 * nd].copy()
    out_shape = ints[1 + 2 * nd : 1 + 3 * nd].copy()
    shift = ints[1 + 3 * nd : 1 + 4 * nd].copy()
    a = array_at(operands[0], np.prod(a_shape), like)
    b = array_at(operands[1], np.prod(b_shape), like)
    out = array_at(operands[2], np.prod(out_shape), like)
    out[:] = 0
    _convolve_add(a, a_shape, b, b_shape, out, out_shape, shift)


@njit(cache=True, nogil=True)
def _convolve_vjp_driver(operands, ints, floats, like):
    """The compiled executor's driver of ``_convolve``'s VJPs (:meth:`Convolve.exec_spec`):
    operands the gradient, ``a``, ``b`` and the target; ``ints`` the number of dimensions,
    ``k``, whether the mode is ``full``, then the shapes of ``a``, ``b`` and the gradient.
    The module's table, as ``_vjp_operands``."""
    nd, k, full = ints[0], ints[1], ints[2] != 0
    a_shape = ints[3 : 3 + nd].copy()
    b_shape = ints[3 + nd : 3 + 2 * nd].copy()
    g_shape = ints[3 + 2 * nd : 3 + 3 * nd].copy()
    g = array_at(operands[0], np.prod(g_shape), like)
    a = array_at(operands[1], np.prod(a_shape), like)
    b = array_at(operands[2], np.prod(b_shape), like)
    first, first_shape = g, g_shape
    if k == 0:
        second, second_shape, out_shape, valid = b[::-1].copy(), b_shape, a_shape, full
    elif full:
        second, second_shape, out_shape, valid = a[::-1].copy(), a_shape, b_shape, True
    else:
        first, first_shape = a[::-1].copy(), a_shape
        second, second_shape, out_shape, valid = g, g_shape, b_shape, True
    shift = second_shape - 1 if valid else np.zeros(nd, np.int64)
    target = array_at(operands[3], np.prod(out_shape), like)
    _convolve_add(first, first_shape, second, second_shape, target, out_shape, shift)


def _vjp_operands(k, g, a, b, mode):
    """The operands and mode of VJP ``k`` as a convolution (the module's table)."""
    if k == 0:
        return g, _reversed(b), "valid" if mode == "full" else "full"
    if mode == "full":
        return g, _reversed(a), "valid"
    return _reversed(a), g, "valid"


@cuda_twin("signal", "Convolve")
class Convolve(Op):
    """``_convolve(a, b, mode)``: the n-d convolution of ``a`` and ``b`` (the same number of
    dimensions, at least one), ``mode`` ``"full"`` or ``"valid"`` (``a`` at least as large as
    ``b`` in every dimension)."""

    name = "_convolve"
    family = "signal"
    n_inputs = 2
    saves = (0, 1)
    method = False

    def make_function(self):
        return None

    def prepare(self, values, attrs):
        a, b = _float_arrays(values)
        mode = attrs.get("mode", "full")
        if mode not in MODES:
            raise ValueError(f"_convolve: mode must be one of {MODES}, not {mode!r}")
        if a.ndim != b.ndim or a.ndim == 0:
            raise ValueError("_convolve: a and b must have the same number of dimensions, "
                             f"at least one; got shapes {a.shape} and {b.shape}")
        if a.size == 0 or b.size == 0:
            raise ValueError("_convolve: a and b must not be empty")
        if mode == "valid" and any(m < n for m, n in zip(a.shape, b.shape)):
            raise ValueError(f"_convolve: for mode 'valid', a {a.shape} must be at least as "
                             f"large as b {b.shape} in every dimension")
        return [a, b], {"mode": mode}

    def _forward(self, kernel, arrays, attrs):
        a, b = arrays
        out = np.zeros(output_shape(a.shape, b.shape, attrs["mode"]), dtype=a.dtype)
        _run(kernel, a, b, out, attrs["mode"])
        return out

    def forward(self, arrays, attrs):
        return self._forward(_convolve_add, arrays, attrs)

    def forward_numpy(self, arrays, attrs):
        return self._forward(None, arrays, attrs)

    def forward_spec(self, arrays, attrs, output):
        a, b = arrays
        ints = (a.ndim, *a.shape, *b.shape, *output.shape, *_shift(b.shape, attrs["mode"]))
        return _convolve_forward_driver, ints, ()

    def _vjp(self, kernel, k, grad_output, saved, attrs, grad_input):
        a, b = saved[0], saved[1]
        g = np.ascontiguousarray(grad_output, dtype=a.dtype)
        first, second, mode = _vjp_operands(k, g, a, b, attrs["mode"])
        target, done = _accumulating(grad_input, grad_input.shape, a.dtype)
        _run(kernel, first, second, target, mode)
        done()

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        self._vjp(_convolve_add, k, grad_output, saved, attrs, grad_input)

    def vjp_numpy(self, k, grad_output, saved, attrs, grad_input):
        self._vjp(None, k, grad_output, saved, attrs, grad_input)

    def exec_spec(self, k, node):
        a, b = node.saved_inputs
        if a.dtype != node.dtype:
            return None
        g_shape = output_shape(a.shape, b.shape, node.attrs["mode"])
        ints = (a.ndim, k, node.attrs["mode"] == "full", *a.shape, *b.shape, *g_shape)
        return ExecSpec(_convolve_vjp_driver, (a, b), ints, ())

    def rule(self, k, grad_output, inputs, output, attrs):
        a, b = inputs
        mode = attrs["mode"]
        if k == 0:
            return call("_convolve", grad_output, flip(b),
                        mode="valid" if mode == "full" else "full")
        if mode == "full":
            return call("_convolve", grad_output, flip(a), mode="valid")
        return call("_convolve", flip(a), grad_output, mode="valid")


Convolve()
