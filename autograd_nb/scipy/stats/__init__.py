"""SciPy's ``scipy.stats`` distributions, differentiable: ``from autograd_nb.scipy.stats import
norm``.

Each distribution is a module with SciPy's functions, arguments and defaults:

========================  ==============================================================
``norm``                  ``pdf logpdf cdf logcdf sf logsf entropy`` (``loc``, ``scale``)
``multivariate_normal``   ``pdf logpdf cdf logcdf`` (``mean``, ``cov``, ``allow_singular``;
                          ``cdf``'s ``lower_limit`` and integration options), ``entropy``
``t``                     ``pdf logpdf cdf logcdf sf logsf entropy`` (``df``, ``loc``,
                          ``scale``)
``gamma``                 ``pdf logpdf cdf logcdf sf logsf entropy`` (``a``, ``loc``,
                          ``scale``)
``beta``                  ``pdf logpdf cdf logcdf sf logsf entropy`` (``a``, ``b``,
                          ``loc``, ``scale``)
``chi2``                  ``pdf logpdf cdf logcdf sf logsf entropy`` (``df``, ``loc``,
                          ``scale``)
``poisson``               ``pmf logpmf cdf logcdf sf logsf entropy`` (``mu``, ``loc``)
``dirichlet``             ``pdf logpdf mean var entropy`` (``alpha``)
========================  ==============================================================

They are differentiable in ``x`` and in every continuous parameter, broadcast as SciPy's do,
and, where no argument is a Tensor, are SciPy's own functions (NumPy results). A parameter
outside its domain (a scale <= 0) gives SciPy's NaN, with a NaN gradient; ``x`` outside the
support gives SciPy's 0 (or ``-inf`` for a log), with a zero gradient. The ``cdf`` and
``sf`` of ``t``, ``gamma``, ``beta``, ``chi2`` and ``poisson`` are the regularized incomplete
beta and gamma functions of :mod:`autograd_nb.special` (differentiable in their shape
parameters too), the logs of each taken from the other's complement where it is near 1, so
that both tails keep their digits. ``multivariate_normal.cdf`` is SciPy's quasi-Monte Carlo
integral, its gradient closed forms in SciPy's integrals of lower dimension. The other
functions are compositions of the registry's differentiable functions, so they run on every
device those run on; inside ``anb.compile`` a function that compares a traced argument (its
domain, support or tail) runs eagerly, with one warning (``docs/compile.rst``), as does
``multivariate_normal.cdf``.

>>> import autograd_nb as anb
>>> from autograd_nb.scipy import stats
>>> loc = anb.tensor(0.5, requires_grad=True)
>>> anb.grad(stats.norm.logpdf(anb.tensor([0.0, 2.0]), loc).sum(), loc)
(tensor(1.),)
"""

from . import beta, chi2, dirichlet, gamma, multivariate_normal, norm, poisson, t

__all__ = ["beta", "chi2", "dirichlet", "gamma", "multivariate_normal", "norm", "poisson", "t"]
