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

There is no numba kernel for an FFT here: every op runs pocketfft, forward and backward, in
both tiers (``forward_numpy`` and ``vjp_numpy`` are ``forward`` and ``vjp``), so tier 0 gives
the same bits. ``scipy.fft`` runs the same pocketfft as ``numpy.fft`` with less Python around
each call (an ``rfft`` of 4,096 points: ~15.5 us against ~17.5 us; its ``irfft``: ~17 against
~20 us; docs/benchmarking.rst, burgers_spectral), ``workers`` at its default of one thread.
The two give the same bits in double precision along the last axis under the ``backward`` and
``forward`` norms (for ``fft``/``ifft``, of a complex input: of a real one ``scipy.fft`` runs a
real transform); there ``scipy.fft`` runs, elsewhere ``numpy.fft``, so every result is NumPy's
to the bit.
"""

import operator
import warnings

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from .assembly import roll
from .registry import Op, call, public

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


def _two_sided(ndim, axis, n):
    """The index of the two-sided bins of a half spectrum of ``n`` points along ``axis``:
    ``1 .. (n + 1)//2 - 1``, all but the zero frequency and (even ``n``) the Nyquist bin."""
    index = [slice(None)] * ndim
    index[axis] = slice(1, (n + 1) // 2)
    return tuple(index)


def _library(x, axis, norm):
    """``scipy.fft`` where it gives NumPy's bits (faster, module docstring), else
    ``numpy.fft``."""
    # (float64 and complex128 by their type characters, cheaper to test than the dtypes)
    if x.dtype.char in "dD" and norm != "ortho" and axis in (-1, x.ndim - 1):
        import scipy.fft  # (deferred: it imports scipy.special, 0.19 s of import)

        return scipy.fft
    return np.fft


def c2c(x, n, axis, norm, inverse):
    library = _library(x, axis, norm) if x.dtype.kind == "c" else np.fft
    transform = library.ifft if inverse else library.fft
    return np.ascontiguousarray(transform(x, n, axis, norm))


def c2c_vjp(g, m, n, axis, norm, inverse):
    """``R_m F^H g``: the adjoint transform, resized back to the input's ``m`` points."""
    adjoint = c2c(g, n, axis, SWAPPED[norm], not inverse)
    return adjoint if m == n else resize(adjoint, axis, m)


def r2c(x, n, axis, norm, double, conj):
    out = np.ascontiguousarray(_library(x, axis, norm).rfft(x, n, axis, norm))
    if double:  # (in place: ``out`` is new)
        out[_two_sided(out.ndim, axis, n)] *= 2
    if conj:
        np.conjugate(out, out=out)
    return out


def r2c_vjp(g, m, n, axis, norm, double, conj):
    """``R_m Re(F^H pad(D C g))``: ``irfft`` under the swapped norm of ``g`` conjugated
    where the forward conjugated, its two-sided bins halved unless the forward doubled
    them, resized back to the input's ``m`` points."""
    adjoint = c2r(g, n, axis, SWAPPED[norm], not double, conj)
    return adjoint if m == n else resize(adjoint, axis, m)


def c2r(x, n, axis, norm, halve, conj):
    if conj:
        x = np.conjugate(x)
    elif halve:
        x = np.array(x, order="C")  # (a copy: ``x`` is the caller's)
    if halve:
        x[_two_sided(x.ndim, axis, n)] *= 0.5
    return np.ascontiguousarray(_library(x, axis, norm).irfft(x, n, axis, norm))


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
    """Accumulate ``value`` into ``grad_input``; a real input keeps the real part (the
    kernels' walk gives it its real buffer: ``Op.real_input_vjp``; the rules leave that to the
    engine, which keeps it for every op)."""
    if grad_input.dtype.kind != "c" and value.dtype.kind == "c":
        value = value.real
    grad_input += value


class FftOp(Op):
    """Base of this family's ops: private (the public functions are the composites of
    ``autograd_nb.numpy.fft``), CPU only, NumPy's pocketfft in both tiers."""

    family = "fft"
    method = False
    #: No CUDA kernels (the public functions raise NotImplementedError on CUDA tensors).
    cpu_only = True
    real_input_vjp = True  # (``_add``)

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
        return _resized(adjoint, attrs["axis"], attrs["n"], attrs["m"])


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
        return _resized(adjoint, attrs["axis"], n // 2 + 1, attrs["m"])


FftC2R()


def _resized(x, axis, length, m):
    """``x`` (of ``length`` points along ``axis``) resized to ``m``, recorded where they
    differ."""
    return x if length == m else call("_fft_resize", x, axis=axis, n=m)


# -- the public functions (``autograd_nb.numpy.fft``) -----------------------------------------


def _shape(a):
    shape = getattr(a, "shape", None)
    return shape if type(shape) is tuple else np.shape(a)


def _on_cpu(name, a):
    if getattr(a, "device", "cpu") != "cpu":
        raise NotImplementedError(
            f"numpy.fft.{name} is not implemented for CUDA tensors (yet): autograd_nb runs "
            "NumPy's pocketfft on the host; move the operand to the CPU with .cpu()")
    return a


def _points_or_none(n):
    return None if n is None else check_points(n)


def _one_axis(name, op, a, n, axis, norm, **flags):
    _on_cpu(name, a)
    return call(op, a, n=_points_or_none(n), axis=axis, norm=check_norm(norm), **flags)


def _nd_args(shape, s, axes, invreal=False):
    """NumPy's ``_cook_nd_args``: the points and axes of an n-dimensional transform
    (``s`` entries of -1 take the axis's length; None keeps the 1-D default)."""
    shapeless = s is None
    if shapeless:
        s = list(shape) if axes is None else [shape[axis] for axis in axes]
    s = list(s)
    if axes is None:
        if not shapeless:
            warnings.warn(_AXES_NONE, DeprecationWarning, stacklevel=5)
        axes = list(range(-len(s), 0))
    axes = list(axes)
    if len(s) != len(axes):
        raise ValueError("Shape and axes have different lengths.")
    if invreal and shapeless:
        s[-1] = (shape[axes[-1]] - 1) * 2
    if None in s:
        warnings.warn(_S_NONE, DeprecationWarning, stacklevel=5)
    s = [shape[axis] if points == -1 else points for points, axis in zip(s, axes)]
    for points, axis in zip(s, axes):  # every error before anything records
        normalize_axis_index(operator.index(axis), len(shape))
        _points_or_none(points)
    return s, axes


_AXES_NONE = (
    "`axes` should not be `None` if `s` is not `None` (Deprecated in NumPy 2.0). In a future "
    "version of NumPy, this will raise an error and `s[i]` will correspond to the size along "
    "the transformed axis specified by `axes[i]`. To retain current behaviour, pass a "
    "sequence [0, ..., k-1] to `axes` for an array of dimension k.")
_S_NONE = (
    "Passing an array containing `None` values to `s` is deprecated in NumPy 2.0 and will "
    "raise an error in a future version of NumPy. To use the default behaviour of the "
    "corresponding 1-D transform, pass the value matching the default for its `n` "
    "parameter. To use the default behaviour for every axis, the `s` argument can be "
    "omitted.")


def _c2c_nd(name, a, s, axes, norm, inverse):
    _on_cpu(name, a)
    norm = check_norm(norm)
    s, axes = _nd_args(_shape(a), s, axes)
    for points, axis in zip(reversed(s), reversed(axes)):
        a = call("_fft_c2c", a, n=points, axis=axis, norm=norm, inverse=inverse)
    return a


def _r2c_nd(name, a, s, axes, norm):
    _on_cpu(name, a)
    norm = check_norm(norm)
    s, axes = _nd_args(_shape(a), s, axes)
    a = call("_fft_r2c", a, n=s[-1], axis=axes[-1], norm=norm)
    for ii in range(len(axes) - 2, -1, -1):
        a = call("_fft_c2c", a, n=s[ii], axis=axes[ii], norm=norm, inverse=False)
    return a


def _c2r_nd(name, a, s, axes, norm):
    _on_cpu(name, a)
    norm = check_norm(norm)
    s, axes = _nd_args(_shape(a), s, axes, invreal=True)
    for ii in range(len(axes) - 1):
        a = call("_fft_c2c", a, n=s[ii], axis=axes[ii], norm=norm, inverse=True)
    return call("_fft_c2r", a, n=s[-1], axis=axes[-1], norm=norm)


@public("fft.fft", method=False, family="fft")
def fft(a, n=None, axis=-1, norm=None):
    """The one-dimensional discrete Fourier transform, as ``numpy.fft.fft``.

    Parameters
    ----------
    a : Tensor or array_like
        Real or complex.
    n : int, optional
        Points of the transform: ``a`` is truncated or zero-padded to ``n`` along ``axis``
        (default: its length there).
    axis : int, optional
        The axis transformed (default -1).
    norm : {"backward", "ortho", "forward"}, optional
        NumPy's normalization (None is ``"backward"``: no scaling forward, ``1/n`` inverse).

    Returns
    -------
    Tensor
        Complex. Its gradient is ``n * ifft(g)`` for ``norm="backward"`` (the conjugate
        transpose), truncated or zero-padded back to ``a``'s length, its real part for a
        real ``a``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> import autograd_nb.numpy as np
    >>> x = anb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> y = np.fft.fft(x)
    >>> y
    tensor([ 6. +0.j       , -1.5+0.8660254j, -1.5-0.8660254j], dtype=complex128,
           grad_fn=<FftC2cBackward>)
    >>> (np.abs(y) ** 2).sum().backward()
    >>> x.grad  # Parseval: |fft(x)|^2 sums to 3 |x|^2
    tensor([ 6., 12., 18.])
    """
    return _one_axis("fft", "_fft_c2c", a, n, axis, norm, inverse=False)


@public("fft.ifft", method=False, family="fft")
def ifft(a, n=None, axis=-1, norm=None):
    """The one-dimensional inverse discrete Fourier transform, as ``numpy.fft.ifft``.

    Parameters are those of :func:`fft`; its gradient is ``fft(g) / n`` for
    ``norm="backward"``, resized back to ``a``'s length.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> import autograd_nb.numpy as np
    >>> np.fft.ifft(anb.tensor([6.0, 0.0, 0.0]))
    tensor([2.+0.j, 2.+0.j, 2.+0.j], dtype=complex128)
    """
    return _one_axis("ifft", "_fft_c2c", a, n, axis, norm, inverse=True)


@public("fft.rfft", method=False, family="fft")
def rfft(a, n=None, axis=-1, norm=None):
    """The discrete Fourier transform of a real input, its ``n//2 + 1`` non-negative
    frequencies, as ``numpy.fft.rfft``.

    Parameters are those of :func:`fft`; ``a`` must be real. The gradient is torch's
    ``fft_r2c_backward``: the real part of the full transform's adjoint applied to the
    gradient padded with zeros to ``n`` bins (``irfft`` of the gradient with the bins that
    stand for two frequencies halved, times ``n`` for ``norm="backward"``).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> import autograd_nb.numpy as np
    >>> x = anb.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    >>> np.fft.rfft(x)
    tensor([10.+0.j, -2.+2.j, -2.+0.j], dtype=complex128, grad_fn=<FftR2cBackward>)
    >>> (np.abs(np.fft.rfft(x)) ** 2).sum().backward()
    >>> x.grad  # the zero-frequency and Nyquist bins count once, the others twice
    tensor([12., 20., 20., 28.])
    """
    return _one_axis("rfft", "_fft_r2c", a, n, axis, norm)


@public("fft.irfft", method=False, family="fft")
def irfft(a, n=None, axis=-1, norm=None):
    """The inverse of :func:`rfft`: ``n`` real points from a half spectrum, as
    ``numpy.fft.irfft``.

    Parameters
    ----------
    a : Tensor or array_like
        The half spectrum (complex, or real).
    n : int, optional
        Points of the output (default ``2 * (m - 1)``, ``m`` the length of ``a`` along
        ``axis``); ``a`` is truncated or zero-padded to ``n//2 + 1`` bins.
    axis : int, optional
    norm : {"backward", "ortho", "forward"}, optional

    Returns
    -------
    Tensor
        Real. Its gradient is torch's ``fft_c2r_backward``: ``rfft`` of the gradient (divided
        by ``n`` for ``norm="backward"``) with the bins that stand for two frequencies
        doubled. The imaginary parts of the zero-frequency bin (and, for even ``n``, of the
        Nyquist bin) do not reach the output, and their gradient is zero.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> import autograd_nb.numpy as np
    >>> np.fft.irfft(anb.tensor([10.0, -2.0 + 2.0j, -2.0]))
    tensor([1., 2., 3., 4.])
    """
    return _one_axis("irfft", "_fft_c2r", a, n, axis, norm)


@public("fft.hfft", method=False, family="fft")
def hfft(a, n=None, axis=-1, norm=None):
    """The transform of a signal with Hermitian symmetry (a real spectrum), as
    ``numpy.fft.hfft``: ``irfft(conj(a), n, axis)`` under the swapped norm.

    Parameters are those of :func:`irfft`.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> import autograd_nb.numpy as np
    >>> np.fft.hfft(anb.tensor([1.0, 2.0, 3.0]))
    tensor([ 8., -2.,  0., -2.])
    """
    norm = SWAPPED[check_norm(norm)]
    return _one_axis("hfft", "_fft_c2r", a, n, axis, norm, conj=True)


@public("fft.ihfft", method=False, family="fft")
def ihfft(a, n=None, axis=-1, norm=None):
    """The inverse of :func:`hfft`, as ``numpy.fft.ihfft``: ``conj(rfft(a, n, axis))`` under
    the swapped norm; ``a`` real.

    Parameters are those of :func:`rfft`.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> import autograd_nb.numpy as np
    >>> np.fft.ihfft(anb.tensor([8.0, -2.0, 0.0, -2.0]))
    tensor([1.-0.j, 2.-0.j, 3.-0.j], dtype=complex128)
    """
    norm = SWAPPED[check_norm(norm)]
    return _one_axis("ihfft", "_fft_r2c", a, n, axis, norm, conj=True)


@public("fft.fftn", method=False, family="fft")
def fftn(a, s=None, axes=None, norm=None):
    """The n-dimensional discrete Fourier transform, as ``numpy.fft.fftn``: :func:`fft`
    along each of ``axes``, the last first.

    Parameters
    ----------
    a : Tensor or array_like
    s : sequence of int, optional
        Points along each of ``axes`` (-1: the axis's length); default the input's shape.
    axes : sequence of int, optional
        Default: all axes, or the last ``len(s)`` where ``s`` is given (NumPy's deprecated
        rule, with its warning).
    norm : {"backward", "ortho", "forward"}, optional

    Examples
    --------
    >>> import autograd_nb as anb
    >>> import autograd_nb.numpy as np
    >>> np.fft.fftn(anb.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor([[10.+0.j, -2.+0.j],
            [-4.+0.j,  0.+0.j]], dtype=complex128)
    """
    return _c2c_nd("fftn", a, s, axes, norm, inverse=False)


@public("fft.ifftn", method=False, family="fft")
def ifftn(a, s=None, axes=None, norm=None):
    """The n-dimensional inverse discrete Fourier transform, as ``numpy.fft.ifftn``.

    Parameters are those of :func:`fftn`.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> import autograd_nb.numpy as np
    >>> np.fft.ifftn(anb.tensor([[4.0, 0.0], [0.0, 0.0]]))
    tensor([[1.+0.j, 1.+0.j],
            [1.+0.j, 1.+0.j]], dtype=complex128)
    """
    return _c2c_nd("ifftn", a, s, axes, norm, inverse=True)


@public("fft.fft2", method=False, family="fft")
def fft2(a, s=None, axes=(-2, -1), norm=None):
    """The two-dimensional discrete Fourier transform, as ``numpy.fft.fft2``: :func:`fftn`
    over the last two axes by default.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> import autograd_nb.numpy as np
    >>> np.fft.fft2(anb.ones((2, 2)))
    tensor([[4.+0.j, 0.+0.j],
            [0.+0.j, 0.+0.j]], dtype=complex128)
    """
    return _c2c_nd("fft2", a, s, axes, norm, inverse=False)


@public("fft.ifft2", method=False, family="fft")
def ifft2(a, s=None, axes=(-2, -1), norm=None):
    """The two-dimensional inverse discrete Fourier transform, as ``numpy.fft.ifft2``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> import autograd_nb.numpy as np
    >>> np.fft.ifft2(anb.tensor([[4.0, 0.0], [0.0, 0.0]]))
    tensor([[1.+0.j, 1.+0.j],
            [1.+0.j, 1.+0.j]], dtype=complex128)
    """
    return _c2c_nd("ifft2", a, s, axes, norm, inverse=True)


@public("fft.rfftn", method=False, family="fft")
def rfftn(a, s=None, axes=None, norm=None):
    """The n-dimensional discrete Fourier transform of a real input, as
    ``numpy.fft.rfftn``: :func:`rfft` along the last of ``axes``, then :func:`fft` along
    the others.

    Parameters are those of :func:`fftn`.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> import autograd_nb.numpy as np
    >>> np.fft.rfftn(anb.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor([[10.+0.j, -2.+0.j],
            [-4.+0.j,  0.+0.j]], dtype=complex128)
    """
    return _r2c_nd("rfftn", a, s, axes, norm)


@public("fft.irfftn", method=False, family="fft")
def irfftn(a, s=None, axes=None, norm=None):
    """The inverse of :func:`rfftn`, as ``numpy.fft.irfftn``: :func:`ifft` along all but the
    last of ``axes``, then :func:`irfft` along it (by default to ``2 * (m - 1)`` points).

    Parameters are those of :func:`fftn`.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> import autograd_nb.numpy as np
    >>> np.fft.irfftn(anb.tensor([[10.0, -2.0], [-4.0, 0.0]]))
    tensor([[1., 2.],
            [3., 4.]])
    """
    return _c2r_nd("irfftn", a, s, axes, norm)


@public("fft.rfft2", method=False, family="fft")
def rfft2(a, s=None, axes=(-2, -1), norm=None):
    """:func:`rfftn` over the last two axes by default, as ``numpy.fft.rfft2``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> import autograd_nb.numpy as np
    >>> np.fft.rfft2(anb.ones((2, 3))).shape
    (2, 2)
    """
    return _r2c_nd("rfft2", a, s, axes, norm)


@public("fft.irfft2", method=False, family="fft")
def irfft2(a, s=None, axes=(-2, -1), norm=None):
    """:func:`irfftn` over the last two axes by default, as ``numpy.fft.irfft2``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> import autograd_nb.numpy as np
    >>> np.fft.irfft2(anb.ones((2, 2))).shape
    (2, 2)
    """
    return _c2r_nd("irfft2", a, s, axes, norm)


def _shifts(shape, axes, sign):
    if axes is None:
        axes = tuple(range(len(shape)))
        return [sign * (dim // 2) for dim in shape], axes
    if isinstance(axes, (int, np.integer)):
        return sign * (shape[axes] // 2), axes
    return [sign * (shape[axis] // 2) for axis in axes], axes


@public("fft.fftshift", method=False, family="fft")
def fftshift(x, axes=None):
    """The zero frequency moved to the centre, as ``numpy.fft.fftshift``: a ``roll`` by half
    of each axis's length (its gradient rolls back).

    Parameters
    ----------
    x : Tensor or array_like
    axes : int or sequence of int, optional
        Default: every axis.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> import autograd_nb.numpy as np
    >>> np.fft.fftshift(anb.arange(5.0))
    tensor([3., 4., 0., 1., 2.])
    """
    shift, axes = _shifts(_shape(x), axes, 1)
    return roll(x, shift, axes)


@public("fft.ifftshift", method=False, family="fft")
def ifftshift(x, axes=None):
    """The inverse of :func:`fftshift`, as ``numpy.fft.ifftshift``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> import autograd_nb.numpy as np
    >>> np.fft.ifftshift(anb.tensor([3.0, 4.0, 0.0, 1.0, 2.0]))
    tensor([0., 1., 2., 3., 4.])
    """
    shift, axes = _shifts(_shape(x), axes, -1)
    return roll(x, shift, axes)
