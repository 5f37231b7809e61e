"""SciPy's ``scipy.signal.convolve`` and ``correlate``, differentiable in both inputs:
``from autograd_nb.scipy import signal``.

Both are the registry's ``_convolve`` op (``autograd_nb/ops/signal.py``: a direct n-d
convolution, compiled, with a NumPy twin), whose VJPs are ``_convolve`` again, so they
differentiate to any order; ``"same"`` is a centred slice of ``"full"``, and ``correlate``
convolves with ``in2`` reversed, as SciPy's own definitions are. Where no argument is a
Tensor they are SciPy's functions (NumPy results).

The values are the direct sum's whatever ``method`` says (SciPy's ``"fft"`` differs from it
in the last bits only). Inside :func:`autograd_nb.compile` they replay, forward and backward,
as every op with drivers does. On CUDA Tensors the direct sum runs on the device
(:mod:`autograd_nb.cuda.signal`).

>>> import autograd_nb as anb
>>> from autograd_nb.scipy import signal
>>> x = anb.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> signal.convolve(x, anb.tensor([0.0, 1.0, 0.5]))
tensor([0. , 1. , 2.5, 4. , 1.5], grad_fn=<ConvolveBackward>)
"""

import scipy.signal

from ..ops.registry import call
from ._operands import float_operands, holds_tensor

_MODES = ("valid", "same", "full")
_METHODS = ("auto", "direct", "fft")

__all__ = ["convolve", "correlate"]


def _check_flags(mode, method):
    if mode not in _MODES:
        raise ValueError(f"Acceptable mode flags are 'valid', 'same', or 'full', "
                         f"not mode={mode}")
    if method not in _METHODS:
        raise ValueError("Acceptable method flags are 'auto', 'direct', or 'fft'.")


def _valid_order(shape1, shape2):
    """Whether ``in1`` and ``in2`` swap for ``"valid"`` (SciPy's rule and error)."""
    larger = all(m >= n for m, n in zip(shape1, shape2, strict=True))
    smaller = all(m <= n for m, n in zip(shape1, shape2, strict=True))
    if not (larger or smaller):
        raise ValueError("For 'valid' mode, one must be at least as large as the other in "
                         "every dimension")
    return not larger


def _centered(x, shape):
    """The centred block of ``shape`` of ``x`` (SciPy's ``_centered``)."""
    index = tuple(slice((n - m) // 2, (n - m) // 2 + m) for n, m in zip(x.shape, shape,
                                                                        strict=True))
    return call("getitem", x, index=index)


def _convolve(name, in1, in2, mode, method, same_dims_message):
    _check_flags(mode, method)
    a, b = float_operands(f"signal.{name}", ("in1", "in2"), (in1, in2), cuda=True)
    if a.ndim == b.ndim == 0:
        return a * b
    if a.ndim != b.ndim:
        raise ValueError(same_dims_message)
    if a.size == 0 or b.size == 0:
        raise ValueError(f"signal.{name}: in1 and in2 must not be empty; got shapes "
                         f"{a.shape} and {b.shape}")
    if name == "correlate":
        b = call("getitem", b, index=(slice(None, None, -1),) * b.ndim)
    if mode == "valid":
        if _valid_order(a.shape, b.shape):
            a, b = b, a
        return call("_convolve", a, b, mode="valid")
    # Convolution commutes: the kernel loops over the elements of its second operand.
    first, second = (a, b) if a.size >= b.size else (b, a)
    full = call("_convolve", first, second, mode="full")
    return full if mode == "full" else _centered(full, a.shape)


def convolve(in1, in2, mode="full", method="auto"):
    """Convolve two N-dimensional arrays, as ``scipy.signal.convolve``.

    Parameters
    ----------
    in1, in2 : Tensor or array_like
        Arrays of the same number of dimensions (or both 0-d), differentiable. float32
        where both are float32, else float64.
    mode : {'full', 'valid', 'same'}, optional
        ``'full'``: every overlap; ``'valid'``: where one lies wholly inside the other (which
        must be at least as large in every dimension); ``'same'``: the centre of ``'full'``
        of ``in1``'s shape.
    method : {'auto', 'direct', 'fft'}, optional
        Checked as SciPy checks it; the values are always the direct sum's.

    Returns
    -------
    Tensor

    Raises
    ------
    ValueError
        For SciPy's errors (a bad ``mode`` or ``method``, different numbers of dimensions,
        ``'valid'`` where neither input is as large as the other in every dimension), and
        for an empty input.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> from autograd_nb.scipy import signal
    >>> a = anb.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> y = signal.convolve(a, anb.ones((2, 2)), mode="valid")
    >>> y
    tensor([[10.]], grad_fn=<ConvolveBackward>)
    >>> anb.grad(y.sum(), a)
    (tensor([[1., 1.],
            [1., 1.]]),)
    """
    if not holds_tensor((in1, in2)):
        return scipy.signal.convolve(in1, in2, mode, method)
    return _convolve("convolve", in1, in2, mode, method,
                     "volume and kernel should have the same dimensionality")


def correlate(in1, in2, mode="full", method="auto"):
    """Cross-correlate two N-dimensional arrays, as ``scipy.signal.correlate``:
    ``convolve(in1, in2 reversed along every axis, mode)``.

    Parameters
    ----------
    in1, in2 : Tensor or array_like
    mode : {'full', 'valid', 'same'}, optional
    method : {'auto', 'direct', 'fft'}, optional
        As :func:`convolve`'s.

    Returns
    -------
    Tensor

    Examples
    --------
    >>> import autograd_nb as anb
    >>> from autograd_nb.scipy import signal
    >>> signal.correlate(anb.tensor([1.0, 2.0, 3.0]), anb.tensor([0.0, 1.0, 0.5]))
    tensor([0.5, 2. , 3.5, 3. , 0. ])
    """
    if not holds_tensor((in1, in2)):
        return scipy.signal.correlate(in1, in2, mode, method)
    return _convolve("correlate", in1, in2, mode, method,
                     "in1 and in2 should have the same dimensionality")
