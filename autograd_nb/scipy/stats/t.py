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
from ._support import (
    INF,
    as_float,
    betaln,
    log_of_complements,
    nan_unless,
    with_scipy_fallback,
)

_scipy = scipy.stats.t
_LOG_PI = math.log(math.pi)
#: From here on ``log(gamma(n + 1/2) / gamma(n))`` comes from its asymptotic series, which is
#: accurate to rounding there; the difference of two ``gammaln`` loses digits as ``n`` grows
#: (3e-9 relative at ``n = 1e7``).
_SERIES_FROM = 100.0
#: Below this ``|z|`` the cdf is its Taylor series at 0 to ``z**3`` (the next term is below
#: rounding): the incomplete beta forms, functions of ``z**2``, have an infinite factor times
#: a zero one in their chain rule at ``z = 0``.
_CDF_SERIES_BELOW = 1e-5
#: Beyond this ``|z|`` (or ``z**2 >= df``) the cdf is taken from its tail form, whose value is
#: then small and keeps its digits; inside, from the central form (Boost's split, with a
#: bound on ``|z|`` for large ``df``, where the central form's tail would cancel).
_CDF_CENTRAL_BELOW = 2.0
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
    value = (_log_density_at_zero(safe_df)
             - (safe_df + 1) / 2 * anp.log1p(z * z / safe_df))
    return anp.where(finite, value, norm.logpdf(z)) - anp.log(scale)


@with_scipy_fallback(_scipy.pdf)
def pdf(x, df, loc=0, scale=1):
    """The density ``exp(logpdf(x, df, loc, scale))``."""
    return anp.exp(logpdf(x, df, loc, scale))


def _log_density_at_zero(df):
    return _log_gamma_ratio(0.5 * df) - 0.5 * (anp.log(df) + _LOG_PI)


def _standard_cdf(z, df):
    """``P(T <= z)``. In the tails (``|z| >= 2`` or ``z**2 >= df``) the tail probability
    ``betainc(df / 2, 1 / 2, df / (df + z**2)) / 2``; in the middle ``1/2 +- betainc(1 / 2,
    df / 2, z**2 / (df + z**2)) / 2``; its Taylor series near 0; the normal's at ``df =
    inf``. Each form is evaluated at a safe point where another is taken, so that no
    infinite derivative of an untaken form reaches a gradient."""
    finite = df != INF
    df = anp.where(finite, df, 1.0)
    z2 = z * z
    magnitude = anp.abs(z)
    near_zero = magnitude < _CDF_SERIES_BELOW
    central = (z2 < df) & (magnitude < _CDF_CENTRAL_BELOW)
    sign = anp.where(z < 0, -1.0, 1.0)

    z_tail = anp.where(central, _CDF_CENTRAL_BELOW + df, z)
    tail = 0.5 * special.betainc(0.5 * df, 0.5, df / (df + z_tail * z_tail))
    tails = anp.where(z < 0, tail, 1 - tail)

    z_middle = anp.where(central & ~near_zero, z, 1.0)
    middle2 = z_middle * z_middle
    middle = 0.5 + sign * 0.5 * special.betainc(0.5, 0.5 * df, middle2 / (df + middle2))

    z_series = anp.where(near_zero, z, 0.0)
    series = 0.5 + z_series * anp.exp(_log_density_at_zero(df)) * (
        1 - (df + 1) / (6 * df) * z_series * z_series)

    value = anp.where(central, anp.where(near_zero, series, middle), tails)
    return anp.where(finite, value, norm.cdf(z))


@with_scipy_fallback(_scipy.cdf)
def cdf(x, df, loc=0, scale=1):
    """``P(T <= z)``, ``z = (x - loc) / scale``: the regularized incomplete beta function
    ``betainc(df / 2, 1 / 2, df / (df + z**2)) / 2`` below 0, one less it above."""
    z, df, _ = _standard(x, df, loc, scale)
    return _standard_cdf(z, df)


@with_scipy_fallback(_scipy.sf)
def sf(x, df, loc=0, scale=1):
    """The survival function ``cdf(-z)``, accurate in the upper tail."""
    z, df, _ = _standard(x, df, loc, scale)
    return _standard_cdf(-z, df)


@with_scipy_fallback(_scipy.logcdf)
def logcdf(x, df, loc=0, scale=1):
    """``log(cdf(x, df, loc, scale))``, from ``log1p(-sf)`` where the cdf is near 1."""
    z, df, _ = _standard(x, df, loc, scale)
    return log_of_complements(_standard_cdf(z, df), _standard_cdf(-z, df))


@with_scipy_fallback(_scipy.logsf)
def logsf(x, df, loc=0, scale=1):
    """``log(sf(x, df, loc, scale))``, from ``log1p(-cdf)`` where the sf is near 1."""
    z, df, _ = _standard(x, df, loc, scale)
    return log_of_complements(_standard_cdf(-z, df), _standard_cdf(z, df))

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
