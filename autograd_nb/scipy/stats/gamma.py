"""``scipy.stats.gamma``: the gamma distribution with shape ``a``, differentiable in ``x``,
``a``, ``loc`` and ``scale``.

>>> import autograd_nb as anb
>>> from autograd_nb.scipy.stats import gamma
>>> a = anb.tensor(2.0, requires_grad=True)
>>> anb.grad(gamma.logpdf(1.5, a), a)
(tensor(-0.01731923),)
"""

import scipy.stats

from ... import numpy as anp
from ... import special
from ._support import (
    INF,
    as_float,
    log_of_complements,
    nan_unless,
    nan_where_nan,
    where_safe,
    with_scipy_fallback,
    xlogy,
)

_scipy = scipy.stats.gamma


def _standard(x, a, loc, scale):
    a, scale = as_float(a), as_float(scale)
    a = nan_unless(a > 0, a)
    scale = nan_unless(scale > 0, scale)
    return (as_float(x) - loc) / scale, a, scale


@with_scipy_fallback(_scipy.logpdf)
def logpdf(x, a, loc=0, scale=1):
    """``xlogy(a - 1, y) - y - gammaln(a) - log(scale)`` at ``y = (x - loc) / scale >= 0``,
    ``-inf`` below the support."""
    y, a, scale = _standard(x, a, loc, scale)
    inside = y >= 0
    value = where_safe(inside, lambda y: xlogy(a - 1, y) - y, 1.0, y, -INF)
    return value - special.gammaln(a) - anp.log(scale)


@with_scipy_fallback(_scipy.pdf)
def pdf(x, a, loc=0, scale=1):
    """The density ``exp(logpdf(x, a, loc, scale))``."""
    return anp.exp(logpdf(x, a, loc, scale))






def _regularized(function, y, a, outside):
    """``function(a, y)`` (``gammainc`` or ``gammaincc``) for ``y > 0``, ``outside`` at
    ``y <= 0``; a NaN ``y`` (an invalid ``scale``) or ``a`` stays NaN, with its gradient."""
    below = y <= 0
    value = anp.where(below, outside, function(a, anp.where(below, 1.0, y)))
    return nan_where_nan(value, a)


@with_scipy_fallback(_scipy.cdf)
def cdf(x, a, loc=0, scale=1):
    """The regularized lower incomplete gamma function ``gammainc(a, y)``, ``y = (x - loc) /
    scale``; 0 below the support."""
    y, a, _ = _standard(x, a, loc, scale)
    return _regularized(special.gammainc, y, a, 0.0)


@with_scipy_fallback(_scipy.sf)
def sf(x, a, loc=0, scale=1):
    """``gammaincc(a, y)``, accurate in the upper tail; 1 below the support."""
    y, a, _ = _standard(x, a, loc, scale)
    return _regularized(special.gammaincc, y, a, 1.0)


@with_scipy_fallback(_scipy.logcdf)
def logcdf(x, a, loc=0, scale=1):
    """``log(cdf(x, a, loc, scale))``, from ``log1p(-sf)`` where the cdf is near 1."""
    y, a, _ = _standard(x, a, loc, scale)
    lower = _regularized(special.gammainc, y, a, 0.0)
    return log_of_complements(lower, _regularized(special.gammaincc, y, a, 1.0))


@with_scipy_fallback(_scipy.logsf)
def logsf(x, a, loc=0, scale=1):
    """``log(sf(x, a, loc, scale))``, from ``log1p(-cdf)`` where the sf is near 1."""
    y, a, _ = _standard(x, a, loc, scale)
    upper = _regularized(special.gammaincc, y, a, 1.0)
    return log_of_complements(upper, _regularized(special.gammainc, y, a, 0.0))


@with_scipy_fallback(_scipy.entropy)
def entropy(a, loc=0, scale=1):
    """``a + gammaln(a) + (1 - a) digamma(a) + log(scale)``."""
    _, a, scale = _standard(0.0, a, loc, scale)
    return a + special.gammaln(a) + (1 - a) * special.digamma(a) + anp.log(scale)
