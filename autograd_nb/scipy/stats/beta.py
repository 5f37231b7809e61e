"""``scipy.stats.beta``: the beta distribution with shapes ``a`` and ``b`` on
``[loc, loc + scale]``, differentiable in ``x``, ``a``, ``b``, ``loc`` and ``scale``.

>>> import autograd_nb as anb
>>> from autograd_nb.scipy.stats import beta
>>> x = anb.tensor(0.25, requires_grad=True)
>>> anb.grad(beta.logpdf(x, 2.0, 3.0), x)
(tensor(1.33333333),)
"""

import scipy.stats

from ... import numpy as anp
from ... import special
from ._support import (
    INF,
    as_float,
    betaln,
    log_of_complements,
    nan_unless,
    nan_where_nan,
    where_safe,
    with_scipy_fallback,
    xlog1py,
    xlogy,
)

_scipy = scipy.stats.beta


def _standard(x, a, b, loc, scale):
    a, b, scale = as_float(a), as_float(b), as_float(scale)
    a = nan_unless(a > 0, a)
    b = nan_unless(b > 0, b)
    scale = nan_unless(scale > 0, scale)
    return (as_float(x) - loc) / scale, a, b, scale


@with_scipy_fallback(_scipy.logpdf)
def logpdf(x, a, b, loc=0, scale=1):
    """``xlogy(a - 1, y) + xlog1py(b - 1, -y) - betaln(a, b) - log(scale)`` on ``0 <= y <=
    1``, ``y = (x - loc) / scale``; ``-inf`` outside."""
    y, a, b, scale = _standard(x, a, b, loc, scale)
    inside = (y >= 0) & (y <= 1)
    value = where_safe(inside, lambda y: xlogy(a - 1, y) + xlog1py(b - 1, -y), 0.5,
                       y, -INF)
    return value - betaln(a, b) - anp.log(scale)


@with_scipy_fallback(_scipy.pdf)
def pdf(x, a, b, loc=0, scale=1):
    """The density ``exp(logpdf(x, a, b, loc, scale))``."""
    return anp.exp(logpdf(x, a, b, loc, scale))






def _regularized(y, a, b, upper):
    """``betainc(a, b, y)`` (``upper``: ``betainc(b, a, 1 - y)``, accurate near ``y = 1``) on
    ``0 < y < 1``, 0 or 1 outside; a NaN ``y``, ``a`` or ``b`` stays NaN, with its gradient."""
    below, above = y <= 0, y >= 1
    inside = anp.where(below | above, 0.5, y)
    if upper:
        value = anp.where(below, 1.0, anp.where(above, 0.0, special.betainc(b, a, 1 - inside)))
    else:
        value = anp.where(below, 0.0, anp.where(above, 1.0, special.betainc(a, b, inside)))
    return nan_where_nan(value, a, b)


@with_scipy_fallback(_scipy.cdf)
def cdf(x, a, b, loc=0, scale=1):
    """The regularized incomplete beta function ``betainc(a, b, y)``, ``y = (x - loc) /
    scale``; 0 below the support, 1 above."""
    y, a, b, _ = _standard(x, a, b, loc, scale)
    return _regularized(y, a, b, upper=False)


@with_scipy_fallback(_scipy.sf)
def sf(x, a, b, loc=0, scale=1):
    """``betainc(b, a, 1 - y)``, accurate in the upper tail; 1 below the support, 0 above."""
    y, a, b, _ = _standard(x, a, b, loc, scale)
    return _regularized(y, a, b, upper=True)


@with_scipy_fallback(_scipy.logcdf)
def logcdf(x, a, b, loc=0, scale=1):
    """``log(cdf(x, a, b, loc, scale))``, from ``log1p(-sf)`` where the cdf is near 1."""
    y, a, b, _ = _standard(x, a, b, loc, scale)
    return log_of_complements(_regularized(y, a, b, False), _regularized(y, a, b, True))


@with_scipy_fallback(_scipy.logsf)
def logsf(x, a, b, loc=0, scale=1):
    """``log(sf(x, a, b, loc, scale))``, from ``log1p(-cdf)`` where the sf is near 1."""
    y, a, b, _ = _standard(x, a, b, loc, scale)
    return log_of_complements(_regularized(y, a, b, True), _regularized(y, a, b, False))


@with_scipy_fallback(_scipy.entropy)
def entropy(a, b, loc=0, scale=1):
    """``betaln(a, b) - (a - 1) digamma(a) - (b - 1) digamma(b) + (a + b - 2) digamma(a + b)
    + log(scale)``."""
    _, a, b, scale = _standard(0.0, a, b, loc, scale)
    psi = special.digamma
    return (betaln(a, b) - (a - 1) * psi(a) - (b - 1) * psi(b) + (a + b - 2) * psi(a + b)
            + anp.log(scale))
