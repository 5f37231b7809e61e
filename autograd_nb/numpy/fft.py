"""``numpy.fft``'s names, differentiable: ``np.fft.rfft(t)`` with
``import autograd_nb.numpy as np``.

The transforms (``fft``, ``ifft``, ``fft2``, ``ifft2``, ``fftn``, ``ifftn``, ``rfft``,
``irfft``, ``rfft2``, ``irfft2``, ``rfftn``, ``irfftn``, ``hfft``, ``ihfft``) and
``fftshift``/``ifftshift`` record when given Tensors, with NumPy's arguments (``n``/``s``,
``axis``/``axes``, ``norm``), defaults and errors; on inputs that hold no Tensor each is
NumPy's own. ``fftfreq`` and ``rfftfreq`` have no gradient: they are NumPy's, giving Tensors
without grad where given a Tensor.

The transforms are NumPy's pocketfft, forward and backward, in both tiers: there is no numba
kernel for an FFT (:mod:`autograd_nb.ops.fft` has the ops and their VJPs). Gradients follow
torch's convention for complex numbers (``z.grad = dL/dx + i dL/dy`` for a real loss ``L``;
a real input keeps the real part of its gradient): the gradient of ``fft`` is ``n * ifft``
of the output's gradient for ``norm="backward"``; those of ``rfft`` and ``irfft`` are
torch's ``fft_r2c_backward`` and ``fft_c2r_backward``, which weigh the bins that stand for
two frequencies of the full spectrum; every gradient is itself a call of these transforms,
so ``create_graph=True`` differentiates again. CUDA tensors raise ``NotImplementedError``.

>>> import autograd_nb as anb
>>> import autograd_nb.numpy as np
>>> x = anb.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
>>> (np.abs(np.fft.rfft(x)) ** 2).sum().backward()
>>> x.grad  # the zero-frequency and Nyquist bins count once, the others twice
tensor([12., 20., 20., 28.])
>>> np.fft.fftfreq(4)
array([ 0.  ,  0.25, -0.5 , -0.25])
"""

import numpy

from ..ops.registry import FUNCTIONS
from ._wrap import constant, differentiable, not_provided

#: The names of ``numpy.fft``'s public functions.
NUMPY_NAMES = frozenset(numpy.fft.__all__)

#: The functions with no gradient: their values come from ``n`` and ``d`` alone.
CONSTANTS = frozenset({"fftfreq", "rfftfreq"})


def tensor_implementation(name):
    """What ``numpy.fft.<name>`` runs on Tensors, or None where autograd_nb has nothing."""
    if name not in NUMPY_NAMES:
        return None
    if name in CONSTANTS:
        return constant(f"numpy.fft.{name}", getattr(numpy.fft, name), grad_refused_from=0)
    return FUNCTIONS.get("fft." + name)


def provided():
    """The ``numpy.fft`` names this namespace provides, sorted."""
    return sorted(name for name in NUMPY_NAMES if tensor_implementation(name) is not None)


def __getattr__(name):
    if name.startswith("__") or not hasattr(numpy.fft, name):
        raise AttributeError(f"module 'autograd_nb.numpy.fft' has no attribute {name!r}")
    ours = tensor_implementation(name)
    if ours is None:
        raise not_provided(f"numpy.fft.{name}")
    if name not in CONSTANTS:
        wrapped = differentiable(f"numpy.fft.{name}", ours, getattr(numpy.fft, name))
        wrapped.__doc__, wrapped.__wrapped__ = ours.__doc__, ours  # (help() and the docs)
        ours = wrapped
    globals()[name] = ours
    return ours


def __dir__():
    return sorted(set(globals()) | set(provided()))
