"""``scipy.stats.dirichlet``: the Dirichlet distribution with concentrations ``alpha``,
differentiable in ``x`` and ``alpha``. As in SciPy, the *first* axis of ``x`` holds the
components (``x`` of shape ``(K,)`` or ``(K, N)``, or ``K - 1`` rows, the last one then being
one less the sum), and the checks on ``x`` and ``alpha`` are SciPy's own (run on their values).

>>> import autograd_nb as anb
>>> from autograd_nb.scipy.stats import dirichlet
>>> alpha = anb.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> anb.grad(dirichlet.logpdf([0.2, 0.3, 0.5], alpha), alpha)
(tensor([0.67389542, 0.07936053, 0.09018615]),)
"""

import scipy.stats

from ... import numpy as anp
from ... import special
from ...ops.registry import host_values
from ._support import as_float, with_scipy_fallback, xlogy

_scipy = scipy.stats.dirichlet


def _log_normalizer(alpha):
    return anp.sum(special.gammaln(alpha)) - special.gammaln(anp.sum(alpha))


def _checked(x, alpha):
    """``x`` (with its last component added where it has ``K - 1``) and ``alpha``, after
    SciPy's checks on their values (its errors, raised by SciPy)."""
    _scipy.logpdf(host_values(x), host_values(alpha))
    x, alpha = as_float(x), as_float(alpha)
    if x.shape[0] != alpha.shape[0]:
        x = anp.concatenate([x, (1 - anp.sum(x, axis=0))[None]], axis=0)
    return x, alpha


@with_scipy_fallback(_scipy.logpdf)
def logpdf(x, alpha):
    """``sum(xlogy(alpha - 1, x), axis=0) - (sum(gammaln(alpha)) - gammaln(sum(alpha)))``."""
    x, alpha = _checked(x, alpha)
    alpha_column = alpha.reshape(alpha.shape + (1,) * (x.ndim - 1))
    return anp.sum(xlogy(alpha_column - 1, x), axis=0) - _log_normalizer(alpha)


@with_scipy_fallback(_scipy.pdf)
def pdf(x, alpha):
    """``exp(logpdf(x, alpha))``."""
    return anp.exp(logpdf(x, alpha))


def _parameters(alpha):
    _scipy.mean(host_values(alpha))  # (SciPy's checks of alpha)
    return as_float(alpha)


@with_scipy_fallback(_scipy.mean)
def mean(alpha):
    """``alpha / sum(alpha)``."""
    alpha = _parameters(alpha)
    return alpha / anp.sum(alpha)


@with_scipy_fallback(_scipy.var)
def var(alpha):
    """``alpha (a0 - alpha) / (a0**2 (a0 + 1))``, ``a0 = sum(alpha)``."""
    alpha = _parameters(alpha)
    total = anp.sum(alpha)
    return alpha * (total - alpha) / (total * total * (total + 1))


@with_scipy_fallback(_scipy.entropy)
def entropy(alpha):
    """``log B(alpha) + (a0 - K) digamma(a0) - sum((alpha - 1) digamma(alpha))``."""
    alpha = _parameters(alpha)
    total = anp.sum(alpha)
    psi = special.digamma
    return (_log_normalizer(alpha) + (total - alpha.shape[0]) * psi(total)
            - anp.sum((alpha - 1) * psi(alpha)))
