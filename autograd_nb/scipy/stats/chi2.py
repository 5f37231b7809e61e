"""``scipy.stats.chi2``: the chi-squared distribution with ``df`` degrees of freedom, the
gamma distribution with shape ``df / 2`` and scale ``2 * scale`` (:mod:`.gamma`'s functions,
with the same gradients).

>>> import autograd_nb as anb
>>> from autograd_nb.scipy.stats import chi2
>>> x = anb.tensor(3.0, requires_grad=True)
>>> anb.grad(chi2.logpdf(x, 4.0), x)
(tensor(-0.16666667),)
"""

import scipy.stats

from . import gamma
from ._support import as_float, with_scipy_fallback

_scipy = scipy.stats.chi2


def _gamma(function):
    def chi2_function(x, df, loc=0, scale=1):
        return function(x, as_float(df) / 2, loc, 2 * as_float(scale))

    return chi2_function


logpdf = with_scipy_fallback(_scipy.logpdf)(_gamma(gamma.logpdf))
pdf = with_scipy_fallback(_scipy.pdf)(_gamma(gamma.pdf))
cdf = with_scipy_fallback(_scipy.cdf)(_gamma(gamma.cdf))
sf = with_scipy_fallback(_scipy.sf)(_gamma(gamma.sf))
logcdf = with_scipy_fallback(_scipy.logcdf)(_gamma(gamma.logcdf))
logsf = with_scipy_fallback(_scipy.logsf)(_gamma(gamma.logsf))


@with_scipy_fallback(_scipy.entropy)
def entropy(df, loc=0, scale=1):
    """The entropy of the gamma distribution with shape ``df / 2`` and scale ``2 * scale``."""
    return gamma.entropy(as_float(df) / 2, loc, 2 * as_float(scale))


for _name in ("logpdf", "pdf", "cdf", "sf", "logcdf", "logsf"):
    globals()[_name].__doc__ = f"``gamma.{_name}(x, df / 2, loc, 2 * scale)``."
    globals()[_name].__name__ = globals()[_name].__qualname__ = _name
