"""``scipy.stats.multivariate_normal``: the multivariate normal distribution, differentiable in
``x``, ``mean`` and ``cov``, with SciPy's shapes (``x``'s last axis holds the components;
``cov`` a scalar, a diagonal or a matrix; the result squeezed) and SciPy's rule for a
singular ``cov``: its eigenvalues below ``1e6 * eps * max|eigenvalue|`` (``1e3`` in float32)
count as zero; with ``allow_singular=False`` such a ``cov`` raises ``LinAlgError``, with
``allow_singular=True`` the density is taken on the support (``-inf`` off it), through the
pseudo-inverse and the pseudo-determinant.

A ``cov`` of full rank goes through its Cholesky factor, whose gradient is defined for every
positive definite matrix. A singular one goes through ``eigh``, whose gradient is not defined
where nonzero eigenvalues repeat (as for every eigendecomposition's).

>>> import autograd_nb as anb
>>> from autograd_nb.scipy.stats import multivariate_normal
>>> x = anb.tensor([0.5, -1.0], requires_grad=True)
>>> anb.grad(multivariate_normal.logpdf(x, cov=[[2.0, 0.5], [0.5, 1.0]]), x)
(tensor([-0.57142857,  1.28571429]),)
"""

import math

import numpy
import scipy.stats

from ... import numpy as anp
from ...ops.registry import host_values
from ._support import INF, as_float, with_scipy_fallback

_scipy = scipy.stats.multivariate_normal
_LOG_2PI = math.log(2 * math.pi)
#: SciPy's cut-off for eigenvalues counted as zero, in units of the dtype's eps times the
#: largest eigenvalue's magnitude.
_CUTOFF = {"f": 1e3, "d": 1e6}


def _parameters(mean, cov):
    """``dim``, ``mean`` and ``cov`` as SciPy makes them: ``cov`` a scalar (times the
    identity), a diagonal or a ``(dim, dim)`` matrix."""
    cov = as_float(cov)
    if mean is None:
        dim = 1 if cov.ndim < 2 else cov.shape[0]
        mean = anp.zeros(dim, dtype=cov.dtype)
    else:
        mean = as_float(mean).reshape(-1)
        dim = mean.shape[0]
    if cov.ndim == 0:
        cov = cov * anp.eye(dim, dtype=cov.dtype)
    elif cov.ndim == 1:
        if cov.shape[0] != dim:
            raise ValueError(f"Array 'cov' must be of shape ({dim}, {dim}) or a vector of "
                             f"length {dim}, not {cov.shape}")
        cov = anp.diag(cov)
    elif cov.ndim > 2 or cov.shape != (dim, dim):
        raise ValueError(f"Array 'cov' must be at most two-dimensional, of shape ({dim}, "
                         f"{dim}), but cov.shape = {cov.shape}")
    return dim, mean, cov


def _quantiles(x, dim):
    x = as_float(x)
    if x.ndim == 0:
        return x.reshape(1)
    if x.ndim == 1:
        return x.reshape((-1, 1) if dim == 1 else (1, -1))
    return x


class _Factored:
    """``cov``'s rank, log (pseudo-)determinant and Mahalanobis distances, with SciPy's
    checks (run on the eigenvalues of its values)."""

    def __init__(self, cov, allow_singular):
        values = host_values(cov)
        spectrum, vectors = numpy.linalg.eigh(values)
        eps = _CUTOFF[values.dtype.char.lower()] * numpy.finfo(values.dtype).eps * numpy.max(
            numpy.abs(spectrum))
        if numpy.min(spectrum) < -eps:
            raise ValueError("The input matrix must be symmetric positive semidefinite.")
        kept = spectrum > eps
        self.rank = int(kept.sum())
        if self.rank < len(spectrum) and not allow_singular:
            raise numpy.linalg.LinAlgError(
                "When `allow_singular is False`, the input matrix must be symmetric positive "
                "definite.")
        self.cov, self.kept, self.support_eps = cov, kept, 1e3 * eps
        self.off_support = vectors[:, ~kept]
        if self.rank == len(spectrum):
            self.factor = anp.linalg.cholesky(cov)
            self.log_det = 2 * anp.sum(anp.log(anp.diagonal(self.factor)))
        else:
            spectrum, vectors = anp.linalg.eigh(cov)
            inverse = anp.where(kept, 1 / anp.where(kept, spectrum, 1.0), 0.0)
            self.factor = vectors * anp.sqrt(inverse)
            self.log_det = anp.sum(anp.where(kept, anp.log(anp.where(kept, spectrum, 1.0)), 0.0))

    def mahalanobis(self, dev):
        if self.rank == len(self.kept):
            flat = dev.reshape(-1, dev.shape[-1])
            root = anp.linalg.solve(self.factor, flat.T)
            return anp.sum(root * root, axis=0).reshape(dev.shape[:-1])
        root = anp.matmul(dev, self.factor)
        return anp.sum(root * root, axis=-1)

    def in_support(self, dev):
        if self.rank == len(self.kept):
            return None
        residual = numpy.linalg.norm(host_values(dev) @ self.off_support, axis=-1)
        return residual < self.support_eps


def _squeezed(out):
    return out.squeeze()


@with_scipy_fallback(_scipy.logpdf)
def logpdf(x, mean=None, cov=1, allow_singular=False):
    """``-(rank log(2 pi) + log pdet(cov) + (x - mean) pinv(cov) (x - mean)) / 2``."""
    dim, mean, cov = _parameters(mean, cov)
    factored = _Factored(cov, allow_singular)
    dev = _quantiles(x, dim) - mean
    out = -0.5 * (factored.rank * _LOG_2PI + factored.log_det + factored.mahalanobis(dev))
    inside = factored.in_support(dev)
    if inside is not None:
        out = anp.where(inside, out, -INF)
    return _squeezed(out)


@with_scipy_fallback(_scipy.pdf)
def pdf(x, mean=None, cov=1, allow_singular=False):
    """``exp(logpdf(x, mean, cov, allow_singular))``."""
    return anp.exp(logpdf(x, mean, cov, allow_singular))


@with_scipy_fallback(_scipy.entropy)
def entropy(mean=None, cov=1):
    """``(rank (1 + log(2 pi)) + log pdet(cov)) / 2`` (a singular ``cov`` allowed, as in
    SciPy)."""
    _, _, cov = _parameters(mean, cov)
    factored = _Factored(cov, allow_singular=True)
    return 0.5 * (factored.rank * (1 + _LOG_2PI) + factored.log_det)
