"""``scipy.stats.poisson``: the Poisson distribution with mean ``mu``, differentiable in ``mu``.
A count ``k`` has no derivative: asking for one raises, naming ``k``.

>>> import autograd_nb as anb
>>> from autograd_nb.scipy.stats import poisson
>>> mu = anb.tensor(2.0, requires_grad=True)
>>> anb.grad(poisson.logpmf(3, mu), mu)
(tensor(0.5),)
"""

import scipy.stats

from ... import numpy as anp
from ... import special
from ...tape import is_grad_enabled
from ...tensor import Tensor
from ._support import (
    INF,
    as_float,
    log_of_complements,
    nan_unless,
    nan_where_nan,
    where_safe,
    with_scipy_fallback,
)

_scipy = scipy.stats.poisson


def _counts(k, mu, loc):
    if isinstance(k, Tensor) and k.requires_grad and is_grad_enabled():
        raise ValueError("poisson: k is a count, with no derivative; pass it without "
                         "requires_grad (or detach it)")
    mu = as_float(mu)
    mu = nan_unless(mu >= 0, mu)
    k = (as_float(k) - loc).detach()
    return k, mu


@with_scipy_fallback(_scipy.logpmf)
def logpmf(k, mu, loc=0):
    """``xlogy(k, mu) - gammaln(k + 1) - mu`` at whole ``k >= 0`` (``k`` less ``loc``),
    ``-inf`` elsewhere."""
    k, mu = _counts(k, mu, loc)
    inside = (k >= 0) & (k == anp.floor(k))
    return where_safe(inside, lambda k: special.xlogy(k, mu) - special.gammaln(k + 1) - mu,
                      0.0, k, -INF)


@with_scipy_fallback(_scipy.pmf)
def pmf(k, mu, loc=0):
    """``exp(logpmf(k, mu, loc))``."""
    return anp.exp(logpmf(k, mu, loc))






def _cumulative(k, mu, loc, upper):
    """``P(K <= k)`` (``upper``: ``P(K > k)``) from the regularized incomplete gamma
    functions of ``floor(k) + 1`` at ``mu``, as SciPy's ``pdtr``; a NaN ``mu`` stays NaN."""
    k, mu = _counts(k, mu, loc)
    k = anp.floor(k)
    negative = k < 0
    shape = anp.where(negative, 0.0, k) + 1
    if upper:
        value = anp.where(negative, 1.0, special.gammainc(shape, mu))
    else:
        value = anp.where(negative, 0.0, special.gammaincc(shape, mu))
    return nan_where_nan(value, mu)


@with_scipy_fallback(_scipy.cdf)
def cdf(k, mu, loc=0):
    """``gammaincc(floor(k) + 1, mu)`` (``k`` less ``loc``), 0 below 0."""
    return _cumulative(k, mu, loc, upper=False)


@with_scipy_fallback(_scipy.sf)
def sf(k, mu, loc=0):
    """``gammainc(floor(k) + 1, mu)``, accurate in the upper tail; 1 below 0."""
    return _cumulative(k, mu, loc, upper=True)


@with_scipy_fallback(_scipy.logcdf)
def logcdf(k, mu, loc=0):
    """``log(cdf(k, mu, loc))``, from ``log1p(-sf)`` where the cdf is near 1."""
    return log_of_complements(_cumulative(k, mu, loc, False), _cumulative(k, mu, loc, True))


@with_scipy_fallback(_scipy.logsf)
def logsf(k, mu, loc=0):
    """``log(sf(k, mu, loc))``, from ``log1p(-cdf)`` where the sf is near 1."""
    return log_of_complements(_cumulative(k, mu, loc, True), _cumulative(k, mu, loc, False))


#: Where the sum of ``entropy`` stops: ``mu`` plus this many of its standard deviations,
#: plus :data:`_ENTROPY_MARGIN` (the terms beyond are below rounding).
_ENTROPY_SIGMAS = 20
_ENTROPY_MARGIN = 30


@with_scipy_fallback(_scipy.entropy)
def entropy(mu, loc=0):
    """``-sum(pmf(k) * logpmf(k))`` over the counts that carry the mass (SciPy sums too)."""
    mu = as_float(mu)
    largest = float(anp.max(mu).detach().numpy()) if mu.size else 0.0
    if largest != largest or largest == INF:
        last = 0
    else:
        last = int(largest + _ENTROPY_SIGMAS * largest ** 0.5 + _ENTROPY_MARGIN)
    k = anp.arange(last + 1, dtype=mu.dtype).reshape((-1,) + (1,) * mu.ndim)
    terms = logpmf(k, mu)
    mass = anp.exp(terms)
    return -anp.sum(anp.where(mass > 0, mass * terms, 0.0), axis=0) + 0.0 * as_float(loc)
