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
from ._support import INF, as_float, nan_unless, where_safe, with_scipy_fallback, xlogy

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






@with_scipy_fallback(_scipy.entropy)
def entropy(a, loc=0, scale=1):
    """``a + gammaln(a) + (1 - a) digamma(a) + log(scale)``."""
    _, a, scale = _standard(0.0, a, loc, scale)
    return a + special.gammaln(a) + (1 - a) * special.digamma(a) + anp.log(scale)
