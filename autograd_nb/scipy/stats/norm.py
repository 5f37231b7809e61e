"""``scipy.stats.norm``: the normal distribution, differentiable in ``x``, ``loc`` and ``scale``.

>>> import autograd_nb as anb
>>> from autograd_nb.scipy.stats import norm
>>> x = anb.tensor([0.0, 1.0], requires_grad=True)
>>> anb.grad(norm.logpdf(x, loc=0.5, scale=2.0).sum(), x)
(tensor([ 0.125, -0.125]),)
"""

import math

import numpy
import scipy.stats

from ... import numpy as anp
from ... import special
from ...tensor import Tensor
from ._support import as_float, nan_unless, with_scipy_fallback

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
_ENTROPY_1 = 0.5 * math.log(2 * math.pi * math.e)
_scipy = scipy.stats.norm


def _standard(x, loc, scale):
    """``(x - loc) / scale`` and ``scale``, NaN where ``scale <= 0`` (SciPy's nan)."""
    if not isinstance(scale, Tensor):
        return _standard_fixed_scale(x, loc, scale)
    scale = as_float(scale)
    scale = nan_unless(scale > 0, scale)
    return (as_float(x) - loc) / scale, scale


def _standard_fixed_scale(x, loc, scale):
    """:func:`_standard` for a constant ``scale`` (the usual prior): its domain check and
    reciprocal are NumPy's, so the graph holds the ops of ``x`` and ``loc`` alone (two, or one
    for ``loc=0``, where there were five), and ``scale`` is returned as a constant."""
    scale = numpy.asarray(scale)
    if not numpy.issubdtype(scale.dtype, numpy.floating):
        scale = scale.astype(numpy.float64)
    scale = numpy.where(scale > 0, scale, numpy.nan)
    x = as_float(x)
    shifted = x if _is_zero(loc) and isinstance(x, Tensor) else x - loc
    return shifted * _weak(1.0 / scale, shifted), scale


def _is_zero(value):
    return not isinstance(value, Tensor) and numpy.ndim(value) == 0 and value == 0


def _weak(constant, tensor):
    """A 0-d float64 ``constant`` as a Python float where ``tensor`` is float64 (the same
    result, and the ops' fast path for Python numbers); as it is elsewhere, where a Python
    float would not promote a float32 ``tensor`` to float64 as the constant does."""
    if constant.ndim == 0 and isinstance(tensor, Tensor) and tensor.dtype == numpy.float64:
        return float(constant)
    return constant


@with_scipy_fallback(_scipy.logpdf)
def logpdf(x, loc=0, scale=1):
    """The log density ``-((x - loc) / scale)**2 / 2 - log(scale) - log(2 pi) / 2``."""
    z, scale = _standard(x, loc, scale)
    if isinstance(scale, Tensor):
        return -0.5 * z * z - anp.log(scale) - _LOG_SQRT_2PI
    return -0.5 * z * z - _weak(numpy.log(scale) + _LOG_SQRT_2PI, z)


@with_scipy_fallback(_scipy.pdf)
def pdf(x, loc=0, scale=1):
    """The density ``exp(logpdf(x, loc, scale))``."""
    return anp.exp(logpdf(x, loc, scale))


@with_scipy_fallback(_scipy.cdf)
def cdf(x, loc=0, scale=1):
    """The distribution function ``ndtr((x - loc) / scale)``."""
    return special.ndtr(_standard(x, loc, scale)[0])


@with_scipy_fallback(_scipy.logcdf)
def logcdf(x, loc=0, scale=1):
    """``log(cdf(x, loc, scale))``, accurate far in the lower tail (``log_ndtr``)."""
    return special.log_ndtr(_standard(x, loc, scale)[0])


@with_scipy_fallback(_scipy.sf)
def sf(x, loc=0, scale=1):
    """The survival function ``1 - cdf``, accurate in the upper tail."""
    return special.ndtr(-_standard(x, loc, scale)[0])


@with_scipy_fallback(_scipy.logsf)
def logsf(x, loc=0, scale=1):
    """``log(sf(x, loc, scale))``, accurate far in the upper tail."""
    return special.log_ndtr(-_standard(x, loc, scale)[0])


@with_scipy_fallback(_scipy.entropy)
def entropy(loc=0, scale=1):
    """The differential entropy ``log(2 pi e) / 2 + log(scale)`` (``loc`` does not enter)."""
    _, scale = _standard(0.0, loc, scale)
    return _ENTROPY_1 + anp.log(scale) + 0.0 * as_float(loc)
