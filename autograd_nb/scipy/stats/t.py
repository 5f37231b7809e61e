"""``scipy.stats.t``: Student's t distribution with ``df`` degrees of freedom, differentiable in
``x``, ``df``, ``loc`` and ``scale``.

>>> import autograd_nb as anb
>>> from autograd_nb.scipy.stats import t
>>> df = anb.tensor(3.0, requires_grad=True)
>>> anb.grad(t.logpdf(1.0, df), df)
(tensor(0.04930614),)
"""

import math

import scipy.stats

from ... import numpy as anp
from ... import special
from . import norm
from ._support import INF, as_float, betaln, nan_unless, with_scipy_fallback

_scipy = scipy.stats.t
_LOG_PI = math.log(math.pi)
#: From here on ``log(gamma(n + 1/2) / gamma(n))`` comes from its asymptotic series, which is
#: accurate to rounding there; the difference of two ``gammaln`` loses digits as ``n`` grows
#: (3e-9 relative at ``n = 1e7``).
_SERIES_FROM = 100.0
#: SciPy's switch to the asymptotic entropy.
_ENTROPY_SERIES_FROM = 100.0


def _log_gamma_ratio(n):
    """``log(gamma(n + 1/2) / gamma(n))`` (SciPy's ``log(poch(n, 1/2))``)."""
    large = n >= _SERIES_FROM

    def series(n):
        inverse = 1 / n
        inverse2 = inverse * inverse
        return 0.5 * anp.log(n) + inverse * (
            -1 / 8 + inverse2 * (1 / 192 + inverse2 * (1 / 640 - inverse2 * 17 / 14336))
        )

    def direct(n):
        return special.gammaln(n + 0.5) - special.gammaln(n)

    return anp.where(large, series(anp.where(large, n, _SERIES_FROM)),
                     direct(anp.where(large, 1.0, n)))


def _standard(x, df, loc, scale):
    df, scale = as_float(df), as_float(scale)
    df = nan_unless(df > 0, df)
    scale = nan_unless(scale > 0, scale)
    return (as_float(x) - loc) / scale, df, scale


@with_scipy_fallback(_scipy.logpdf)
def logpdf(x, df, loc=0, scale=1):
    """``log(gamma((df + 1) / 2) / gamma(df / 2)) - log(df pi) / 2 - (df + 1) / 2 *
    log1p(z**2 / df) - log(scale)``, ``z = (x - loc) / scale``; the normal's at ``df = inf``."""
    z, df, scale = _standard(x, df, loc, scale)
    finite = df != INF
    safe_df = anp.where(finite, df, 1.0)
    value = (_log_gamma_ratio(0.5 * safe_df) - 0.5 * (anp.log(safe_df) + _LOG_PI)
             - (safe_df + 1) / 2 * anp.log1p(z * z / safe_df))
    return anp.where(finite, value, norm.logpdf(z)) - anp.log(scale)


@with_scipy_fallback(_scipy.pdf)
def pdf(x, df, loc=0, scale=1):
    """The density ``exp(logpdf(x, df, loc, scale))``."""
    return anp.exp(logpdf(x, df, loc, scale))







@with_scipy_fallback(_scipy.entropy)
def entropy(df, loc=0, scale=1):
    """SciPy's formula: ``(df + 1) / 2 * (digamma((df + 1) / 2) - digamma(df / 2)) +
    log(sqrt(df) * beta(df / 2, 1 / 2))``, its asymptotic series from ``df = 100``, plus
    ``log(scale)``."""
    _, df, scale = _standard(0.0, df, loc, scale)
    large = df >= _ENTROPY_SERIES_FROM

    def regular(df):
        half, half1 = df / 2, (df + 1) / 2
        return (half1 * (special.digamma(half1) - special.digamma(half))
                + 0.5 * anp.log(df) + betaln(half, 0.5))

    def asymptotic(df):
        inverse = 1 / df
        return norm.entropy() + inverse * (1 + inverse * (1 / 4 + inverse * (
            -1 / 6 + inverse * (-1 / 8 + inverse * (3 / 10 + inverse / 4)))))

    value = anp.where(large, asymptotic(anp.where(large, df, _ENTROPY_SERIES_FROM)),
                      regular(anp.where(large, 1.0, df)))
    return value + anp.log(scale)
