"""Discrete Fourier transforms: the ops behind ``autograd_nb.numpy.fft``.

Four ops, each a one-axis transform or a zero padding, whose VJPs are written with each other,
so every rule is a differentiable call of these ops and differentiates to any order:

- ``_fft_resize(x, axis, n)``: ``x`` truncated or zero-padded to ``n`` along ``axis`` (what
  NumPy does to an input of another length than ``n``). Its adjoint is the resize back:
  truncation is the adjoint of zero-padding and zero-padding that of truncation.
- ``_fft_c2c(x, n, axis, norm, inverse)``: ``numpy.fft.fft`` (or ``ifft``). With ``F`` the
  DFT matrix of the transform, ``F^H`` is the opposite transform under the swapped norm
  (``backward`` <-> ``forward``, ``ortho`` stays): the VJP of ``fft(norm="backward")`` is
  ``n * ifft(g)``, then the resize back to the input's length.
- ``_fft_r2c(x, n, axis, norm, double, conj)``: ``numpy.fft.rfft``: the first ``n//2 + 1``
  bins of ``F x`` for real ``x``; ``double`` multiplies the bins that stand for two of the
  full spectrum (all but the zero frequency and, for even ``n``, the Nyquist bin) by 2, and
  ``conj`` conjugates the result (``ihfft``). The adjoint of taking half the spectrum is
  zero-padding it back, so ``x_bar = Re(F^H pad(g))`` (torch's ``fft_r2c_backward``). That is
  ``irfft`` of ``g`` with its two-sided bins halved: ``irfft`` adds each of them twice (as
  ``c_k`` and ``conj(c_k)``), and drops the imaginary parts of the zero-frequency and Nyquist
  bins, exactly as the real part does.
- ``_fft_c2r(x, n, axis, norm, halve, conj)``: ``numpy.fft.irfft`` to ``n`` points of the
  (optionally conjugated, ``hfft``; optionally halved) half spectrum ``x``. ``y_j =
  sum_k w_k Re(x_k e^(2 pi i jk/n)) / n`` with ``w_k`` 2 on the two-sided bins, so
  ``x_bar_k = w_k rfft(y_bar)_k / n``: ``rfft`` of the gradient (the swapped norm) with
  the two-sided bins doubled (torch's ``fft_c2r_backward``).

Gradients follow torch's convention for complex numbers: for a real loss ``L`` of ``z = x +
iy``, ``z.grad = dL/dx + i dL/dy``, so the VJP of a linear map ``A`` is ``A^H g``, that of
``conj`` is ``conj(g)``, and a real input keeps the real part of the complex gradient.

The n-dimensional transforms (``fftn``, ``rfftn``, ...) are composites: one-axis transforms
in the order NumPy applies them, so forward results are NumPy's to the bit.

There is no numba kernel for an FFT here: every op runs NumPy's pocketfft (``numpy.fft``),
forward and backward, in both tiers (``forward_numpy`` and ``vjp_numpy`` are ``forward`` and
``vjp``), so tier 0 gives the same bits. None has a replay or executor driver: a program of
:func:`autograd_nb.compile` that calls one runs eagerly (with one ``CompileWarning``), and
their backward runs in the Python walk. CUDA tensors raise ``NotImplementedError``.
"""

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from .registry import Op, call

NORMS = ("backward", "ortho", "forward")
#: The norm of the adjoint transform: ``F^H`` is the opposite transform under this norm.
SWAPPED = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def check_norm(norm):
    """``norm`` as one of ``NORMS`` (None is ``"backward"``), or NumPy's ValueError."""
    if norm is None:
        return "backward"
    if isinstance(norm, str) and norm in SWAPPED:
        return norm
    raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or '
                     '"forward".')


def check_points(n):
    """``n`` (points of a transform) as an int, or NumPy's ValueError where it is below 1."""
    n = int(n)
    if n < 1:
        raise ValueError(f"Invalid number of FFT data points ({n}) specified.")
    return n


# -- the math, on NumPy arrays (both tiers) ------------------------------------------------------


def resize(x, axis, n):
    """``x`` truncated or zero-padded to ``n`` along ``axis`` (a new array)."""
    m = x.shape[axis]
    if n <= m:
        index = [slice(None)] * x.ndim
        index[axis] = slice(0, n)
        return np.array(x[tuple(index)], order="C")
    shape = list(x.shape)
    shape[axis] = n
    out = np.zeros(shape, dtype=x.dtype)
    index = [slice(None)] * x.ndim
    index[axis] = slice(0, m)
    out[tuple(index)] = x
    return out


def _scaled_two_sided(x, axis, n, factor):
    """A copy of the half spectrum ``x`` (of a real signal of ``n`` points) whose two-sided
    bins, ``1 .. (n + 1)//2 - 1`` along ``axis``, are multiplied by ``factor``."""
    out = np.array(x, order="C")
    index = [slice(None)] * x.ndim
    index[axis] = slice(1, (n + 1) // 2)
    out[tuple(index)] *= factor
    return out


def c2c(x, n, axis, norm, inverse):
    transform = np.fft.ifft if inverse else np.fft.fft
    return np.ascontiguousarray(transform(x, n, axis, norm))


def c2c_vjp(g, m, n, axis, norm, inverse):
    """``R_m F^H g``: the adjoint transform, resized back to the input's ``m`` points."""
    adjoint = c2c(g, n, axis, SWAPPED[norm], not inverse)
    return adjoint if m == n else resize(adjoint, axis, m)


def r2c(x, n, axis, norm, double, conj):
    out = np.fft.rfft(x, n, axis, norm)
    if double:
        out = _scaled_two_sided(out, axis, n, 2)
    if conj:
        np.conjugate(out, out=out)
    return np.ascontiguousarray(out)


def r2c_vjp(g, m, n, axis, norm, double, conj):
    """``R_m Re(F^H pad(D C g))``: ``irfft`` under the swapped norm of ``g`` conjugated
    where the forward conjugated, its two-sided bins halved unless the forward doubled
    them, resized back to the input's ``m`` points."""
    adjoint = c2r(g, n, axis, SWAPPED[norm], not double, conj)
    return adjoint if m == n else resize(adjoint, axis, m)


def c2r(x, n, axis, norm, halve, conj):
    if conj:
        x = np.conjugate(x)
    if halve:
        x = _scaled_two_sided(x, axis, n, 0.5)
    return np.ascontiguousarray(np.fft.irfft(x, n, axis, norm))


def c2r_vjp(g, m, n, axis, norm, halve, conj):
    """``R_m C H D rfft(g)``: ``rfft`` under the swapped norm, the two-sided bins doubled
    unless the forward halved them, conjugated where the forward conjugated, resized back to
    the input's ``m`` bins."""
    adjoint = r2c(g, n, axis, SWAPPED[norm], not halve, conj)
    return adjoint if m == n // 2 + 1 else resize(adjoint, axis, m)


# -- the ops ---------------------------------------------------------------------------------


def _array(value):
    """``value`` as a C-contiguous array of a float or complex dtype (integers and bools as
    float64, as NumPy's transforms take them)."""
    array = np.asarray(value)
    if array.dtype.kind not in "fc":
        array = array.astype(np.float64)
    return np.ascontiguousarray(array)


def _add(grad_input, value):
    """Accumulate ``value`` into ``grad_input``; a real input keeps the real part."""
    if grad_input.dtype.kind != "c" and value.dtype.kind == "c":
        value = value.real
    grad_input += value


def _real_if(x, value):
    """``value``, or its real part where the input ``x`` is real (torch's rule for a real
    input meeting a complex gradient)."""
    if np.dtype(x.dtype).kind != "c" and np.dtype(value.dtype).kind == "c":
        return call("real", value)
    return value


class FftOp(Op):
    """Base of this family's ops: private (the public functions are the composites of
    ``autograd_nb.numpy.fft``), CPU only, NumPy's pocketfft in both tiers."""

    family = "fft"
    method = False

    def make_function(self):
        return None

    def forward_numpy(self, arrays, attrs):
        return self.forward(arrays, attrs)

    def vjp_numpy(self, k, grad_output, saved, attrs, grad_input):
        self.vjp(k, grad_output, saved, attrs, grad_input)

    def _axis(self, x, axis):
        return normalize_axis_index(int(axis), x.ndim)


class FftResize(FftOp):
    """``_fft_resize(x, axis, n)``: ``x`` truncated or zero-padded to ``n`` along ``axis``."""

    name = "_fft_resize"

    def prepare(self, values, attrs):
        (x,) = [_array(v) for v in values]
        axis = self._axis(x, attrs["axis"])
        return [x], {"axis": axis, "n": check_points(attrs["n"]), "m": x.shape[axis]}

    def forward(self, arrays, attrs):
        return resize(arrays[0], attrs["axis"], attrs["n"])

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        _add(grad_input, resize(np.asarray(grad_output), attrs["axis"], attrs["m"]))

    def rule(self, k, grad_output, inputs, output, attrs):
        return call("_fft_resize", grad_output, axis=attrs["axis"], n=attrs["m"])


FftResize()


class _Transform(FftOp):
    """A one-axis transform of ``n`` points along ``axis``: the shared ``prepare``."""

    def prepare(self, values, attrs):
        (x,) = [_array(v) for v in values]
        axis = self._axis(x, attrs["axis"])
        prepared = dict(attrs, axis=axis, norm=check_norm(attrs.get("norm")),
                        m=x.shape[axis])
        prepared["n"] = check_points(self.default_points(x.shape[axis])
                                     if attrs.get("n") is None else attrs["n"])
        return [self.cast(x)], prepared

    def default_points(self, m):
        return m

    def cast(self, x):
        return x


class FftC2C(_Transform):
    """``_fft_c2c(x, n, axis, norm, inverse)``: ``numpy.fft.fft`` (``ifft`` where
    ``inverse``) of ``n`` points along ``axis``."""

    name = "_fft_c2c"

    def forward(self, arrays, attrs):
        return c2c(arrays[0], attrs["n"], attrs["axis"], attrs["norm"], attrs["inverse"])

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        _add(grad_input, c2c_vjp(np.asarray(grad_output), attrs["m"], attrs["n"],
                                 attrs["axis"], attrs["norm"], attrs["inverse"]))

    def rule(self, k, grad_output, inputs, output, attrs):
        adjoint = call("_fft_c2c", grad_output, n=attrs["n"], axis=attrs["axis"],
                       norm=SWAPPED[attrs["norm"]], inverse=not attrs["inverse"])
        return _real_if(inputs[0], _resized(adjoint, attrs["axis"], attrs["n"], attrs["m"]))


FftC2C()


class FftR2C(_Transform):
    """``_fft_r2c(x, n, axis, norm, double, conj)``: ``numpy.fft.rfft`` of the real ``x``,
    its two-sided bins doubled where ``double``, conjugated where ``conj``."""

    name = "_fft_r2c"

    def prepare(self, values, attrs):
        (x,) = [np.asarray(v) for v in values]
        if x.dtype.kind == "c":
            raise TypeError("rfft: the input must be real; got a complex array "
                            f"({x.dtype}): use fft for complex input")
        arrays, prepared = super().prepare(values, attrs)
        prepared.setdefault("double", False)
        prepared.setdefault("conj", False)
        return arrays, prepared

    def forward(self, arrays, attrs):
        return r2c(arrays[0], attrs["n"], attrs["axis"], attrs["norm"], attrs["double"],
                   attrs["conj"])

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        _add(grad_input, r2c_vjp(np.asarray(grad_output), attrs["m"], attrs["n"],
                                 attrs["axis"], attrs["norm"], attrs["double"],
                                 attrs["conj"]))

    def rule(self, k, grad_output, inputs, output, attrs):
        n = attrs["n"]
        adjoint = call("_fft_c2r", grad_output, n=n, axis=attrs["axis"],
                       norm=SWAPPED[attrs["norm"]], halve=not attrs["double"],
                       conj=attrs["conj"])
        return _resized(adjoint, attrs["axis"], n, attrs["m"])


FftR2C()


class FftC2R(_Transform):
    """``_fft_c2r(x, n, axis, norm, halve, conj)``: ``numpy.fft.irfft`` to ``n`` points of
    the half spectrum ``x`` (conjugated first where ``conj``, its two-sided bins halved where
    ``halve``); ``n`` defaults to ``2 * (m - 1)``, ``m`` the bins along ``axis``."""

    name = "_fft_c2r"

    def prepare(self, values, attrs):
        arrays, prepared = super().prepare(values, attrs)
        prepared.setdefault("halve", False)
        prepared.setdefault("conj", False)
        return arrays, prepared

    def default_points(self, m):
        return 2 * (m - 1)

    def forward(self, arrays, attrs):
        return c2r(arrays[0], attrs["n"], attrs["axis"], attrs["norm"], attrs["halve"],
                   attrs["conj"])

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        _add(grad_input, c2r_vjp(np.asarray(grad_output), attrs["m"], attrs["n"],
                                 attrs["axis"], attrs["norm"], attrs["halve"],
                                 attrs["conj"]))

    def rule(self, k, grad_output, inputs, output, attrs):
        n = attrs["n"]
        adjoint = call("_fft_r2c", grad_output, n=n, axis=attrs["axis"],
                       norm=SWAPPED[attrs["norm"]], double=not attrs["halve"],
                       conj=attrs["conj"])
        return _real_if(inputs[0], _resized(adjoint, attrs["axis"], n // 2 + 1, attrs["m"]))


FftC2R()


def _resized(x, axis, length, m):
    """``x`` (of ``length`` points along ``axis``) resized to ``m``, recorded where they
    differ."""
    return x if length == m else call("_fft_resize", x, axis=axis, n=m)
