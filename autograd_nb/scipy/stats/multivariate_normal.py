"""``scipy.stats.multivariate_normal``: the multivariate normal distribution, differentiable in
``x``, ``mean`` and ``cov``, with SciPy's shapes (``x``'s last axis holds the components;
``cov`` a scalar, a diagonal or a matrix; the result squeezed) and SciPy's rule for a
singular ``cov``: its eigenvalues below ``1e6 * eps * max|eigenvalue|`` (``1e3`` in float32)
count as zero; with ``allow_singular=False`` such a ``cov`` raises ``LinAlgError``, with
``allow_singular=True`` the density is taken on the support (``-inf`` off it), through the
pseudo-inverse and the pseudo-determinant. ``cdf`` and ``logcdf`` are SciPy's integrals, with
SciPy's checks of ``cov``; their gradients are closed forms in SciPy's integrals of lower
dimension (:func:`cdf`).

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
from ...autograd.function import Function
from ...ops.registry import host_values
from ...tensor import Tensor
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


# -- the distribution function ------------------------------------------------------------------


@with_scipy_fallback(_scipy.cdf)
def cdf(x, mean=None, cov=1, allow_singular=False, maxpts=None, abseps=1e-5, releps=1e-5, *,
        lower_limit=None, rng=None):
    """The distribution function ``P(lower_limit < X <= x)``, differentiable in ``x``,
    ``mean``, ``cov`` and ``lower_limit``.

    The value is SciPy's (:func:`scipy.stats.multivariate_normal.cdf`, called with these
    arguments); each derivative is a closed form in SciPy's distribution functions of lower
    dimension, taken with the same ``maxpts``, ``abseps``, ``releps`` and ``rng``.

    Parameters
    ----------
    x : array_like or Tensor
        Quantiles, the last axis holding the components (SciPy's shapes).
    mean : array_like or Tensor, optional
        The mean (zero by default).
    cov : array_like or Tensor, optional
        The covariance: a scalar (times the identity), a diagonal or a matrix.
    allow_singular : bool, optional
        As SciPy's: a singular ``cov`` raises ``LinAlgError`` unless True.
    maxpts, abseps, releps : optional
        SciPy's integration options (the most points, default ``1000000 * dim``; the absolute
        and relative tolerances). SciPy's integral meets ``abseps``.
    lower_limit : array_like or Tensor, optional
        The lower limits of the box, broadcast with ``x`` (``-inf`` by default). Where a lower
        limit exceeds its ``x`` the integral is signed, as SciPy's.
    rng : None, int or numpy.random.Generator, optional
        SciPy's randomness of the quasi-Monte Carlo integral (dimension 3 and above; 1 and 2
        are exact): every integral, the value's and those of the gradient, is SciPy's call
        with this ``rng``, so a seed makes the value and the gradient reproducible.

    Returns
    -------
    Tensor
        ``P`` at each point of the broadcast of ``x`` and ``lower_limit``, squeezed as SciPy's.

    Raises
    ------
    ValueError
        When ``x``'s last axis is not the dimension, or for SciPy's errors in ``cov``.
    numpy.linalg.LinAlgError
        For a singular ``cov`` without ``allow_singular``.

    Notes
    -----
    With ``Y`` the centred variable and ``phi_S`` the density of ``Y_S``:

    * ``dP/dx_i = phi_i(x_i) P(rest | Y_i = x_i)``, and ``dP/dlower_i`` likewise at the lower
      limit with a minus sign; ``dP/dmean`` is minus the sum of the two;
    * ``dP/dcov = H / 2`` with ``H`` the Hessian of ``P`` in ``mean`` (Plackett's identity):
      ``H_ij = phi_ij(x_i, x_j) P(rest | Y_i = x_i, Y_j = x_j)`` (and the box's other
      corners), ``H_ii`` from ``sum_j cov_ij d^2P/dx_i dx_j = -(x_i - mean_i) dP/dx_i``. The
      gradient is symmetric, the convention of ``logpdf`` here and of torch: each entry of
      ``cov`` an input, ``cov`` used as the symmetric matrix it is (a change of the symmetric
      pair ``cov_ij = cov_ji`` by ``e`` changes ``P`` by ``(G_ij + G_ji) e``).

    So a gradient in ``x`` costs ``d`` integrals of dimension ``d - 1`` per point, one in
    ``cov`` those and ``d (d - 1) / 2`` of dimension ``d - 2`` (twice and four times as many
    with finite lower limits). SciPy's integrals of dimensions 1 and 2 are exact, so up to
    dimension 3 the gradient is exact; beyond, each term carries SciPy's error, at most about
    ``abseps`` times a density. It is the derivative of the exact ``P``, not of SciPy's
    estimate of it.

    The gradient is differentiable again (``create_graph=True``): it is written with this
    function and autograd_nb's ops, so every order is a sum of such integrals. With
    ``allow_singular=True`` and a singular ``cov`` the terms are the same formulas (the
    conditional integrals SciPy's, singular ones allowed); one whose marginal block is
    singular (of one component for ``x``, of two for ``cov``) is NaN or infinite. Inside
    :func:`autograd_nb.compile` a call makes its signature run eagerly, with one
    ``CompileWarning`` (the integral is SciPy's).

    Examples
    --------
    Two independent components: ``P = ndtr(x_0) ndtr(x_1 / 2)``, its gradient in ``x_0``
    ``phi(x_0) ndtr(x_1 / 2)``:

    >>> import autograd_nb as anb
    >>> from autograd_nb.scipy.stats import multivariate_normal
    >>> x = anb.tensor([0.0, 1.0], requires_grad=True)
    >>> p = multivariate_normal.cdf(x, [0.0, 0.0], [1.0, 4.0])
    >>> round(p.item(), 6)
    0.345731
    >>> [round(g, 6) for g in anb.grad(p, x)[0].tolist()]
    [0.275854, 0.088016]
    """
    probability, dtype = _probability(x, mean, cov, allow_singular, maxpts, abseps, releps,
                                      lower_limit, rng)
    return _as_dtype(_squeezed(probability), dtype)


@with_scipy_fallback(_scipy.logcdf)
def logcdf(x, mean=None, cov=1, allow_singular=False, maxpts=None, abseps=1e-5, releps=1e-5,
           *, lower_limit=None, rng=None):
    """``log(cdf(...))``, as SciPy's (the log of its integral), differentiable as :func:`cdf`.

    The arguments are :func:`cdf`'s. The gradient is ``cdf``'s divided by the value. Where
    the signed integral (a lower limit above its ``x``) is negative, SciPy's result is
    complex; here that raises a ValueError.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> from autograd_nb.scipy.stats import multivariate_normal
    >>> x = anb.tensor([0.0, 0.0], requires_grad=True)
    >>> logp = multivariate_normal.logcdf(x, cov=[[1.0, 0.5], [0.5, 1.0]])
    >>> round(logp.item(), 6)  # log(1/3)
    -1.098612
    >>> [round(g, 6) for g in anb.grad(logp, x)[0].tolist()]  # 3 phi(0) / 2 each
    [0.598413, 0.598413]
    """
    probability, dtype = _probability(x, mean, cov, allow_singular, maxpts, abseps, releps,
                                      lower_limit, rng)
    if numpy.any(host_values(probability) < 0):
        raise ValueError(
            "logcdf: the signed integral is negative at some point (a lower_limit above its "
            "x in an odd number of components), where SciPy's logcdf is complex; the real "
            "part is logcdf of the box with those limits swapped")
    return _as_dtype(_squeezed(anp.log(probability)), dtype)


def _as_dtype(value, dtype):
    return value if value.dtype == dtype else value.astype(dtype)


def _probability(x, mean, cov, allow_singular, maxpts, abseps, releps, lower_limit, rng):
    """The unsqueezed box probabilities (the broadcast shape of ``x`` and ``lower_limit``
    less its last axis, in float64) and the dtype of the result."""
    dim, mean, cov = _parameters(mean, cov)
    x = _quantiles(x, dim)
    if x.shape[-1] != dim:
        raise ValueError(f"x: the last axis must hold the {dim} components, but x has shape "
                         f"{x.shape}")
    parts = [x, mean, cov]
    lower = None if lower_limit is None else as_float(lower_limit)
    if lower is not None:
        parts.append(lower)
    dtype = numpy.result_type(*[p.dtype for p in parts])
    x, mean, cov = (_as_dtype(p, numpy.float64) for p in (x, mean, cov))
    shape = x.shape
    upper = x - mean
    if lower is not None:
        shape = numpy.broadcast_shapes(x.shape, lower.shape)
        lower = anp.broadcast_to(_as_dtype(lower, numpy.float64) - mean, shape)
        lower = lower.reshape(-1, dim)
    upper = anp.broadcast_to(upper, shape).reshape(-1, dim)
    options = dict(maxpts=maxpts, abseps=abseps, releps=releps, rng=rng)
    probability = _BoxProbability.apply(dict(options, allow_singular=allow_singular),
                                        upper, lower, cov)
    return probability.reshape(shape[:-1]), dtype


class _BoxProbability(Function):
    """``P(lower < Y <= upper)`` for ``Y ~ N(0, cov)``, at each row of ``upper (n, d)`` (and
    of ``lower``, or ``-inf``): SciPy's integral forward, the closed forms of :func:`cdf`
    backward, written with this op itself so that they differentiate again."""

    @staticmethod
    def forward(ctx, options, upper, lower, cov):
        ctx.options = options
        ctx.save_for_backward(upper, lower, cov)
        limit = None if lower is None else lower.numpy()
        # (SciPy's bivariate integral divides by a zero variance of a singular cov, and
        # gives the right limit)
        with numpy.errstate(divide="ignore", invalid="ignore"):
            values = _scipy.cdf(upper.numpy(), None, cov.numpy(), lower_limit=limit,
                                **options)
        return Tensor._make(numpy.array(values, dtype=numpy.float64).reshape(upper.shape[0]))

    @staticmethod
    def backward(ctx, grad_output):
        upper, lower, cov = ctx.saved_tensors
        _, wants_upper, wants_lower, wants_cov = ctx.needs_input_grad
        # the later integrals are of conditional distributions: definite where cov is
        box = _Box(upper, lower, cov, dict(ctx.options, allow_singular=True))
        grads = [None, None, None, None]
        if wants_upper or wants_cov:
            faces = [box.face(i, box.corners(i)[0]) for i in range(box.dim)]
            grads[1] = grad_output[:, None] * anp.stack(faces, axis=-1)
        if lower is not None and (wants_lower or wants_cov):
            lower_faces = [box.face(i, box.corners(i)[1]) for i in range(box.dim)]
            grads[2] = -grad_output[:, None] * anp.stack(lower_faces, axis=-1)
        if wants_cov:
            grads[3] = 0.5 * box.weighted_hessian(grad_output)
        return tuple(grads[k] if ctx.needs_input_grad[k] else None for k in range(4))


class _Corner:
    """One limit of one component at every point: its values (zeros where they are not
    finite), where they are finite, and its sign in the box's integral."""

    def __init__(self, values, sign):
        self.finite = numpy.isfinite(host_values(values))
        self.values = anp.where(self.finite, values, 0.0)
        self.sign = sign


class _Box:
    """The terms of :func:`cdf`'s derivatives for centred limits ``upper`` and ``lower``
    (``(n, d)``, ``lower`` None for ``-inf``) and ``cov``."""

    def __init__(self, upper, lower, cov, options):
        self.upper, self.lower, self.cov, self.options = upper, lower, cov, options
        self.dim = upper.shape[-1]
        self._faces = {}

    def corners(self, i):
        found = [_Corner(self.upper[:, i], 1.0)]
        if self.lower is not None:
            found.append(_Corner(self.lower[:, i], -1.0))
        return found

    def _conditional(self, given, values):
        """The density of ``Y_given`` at ``values (n, k)`` times the probability of the
        box's other components given ``Y_given = values``."""
        block = self.cov[given][:, given]
        if len(given) == 1:
            determinant = block[0, 0]
            inverse = 1 / block
        else:
            determinant = block[0, 0] * block[1, 1] - block[0, 1] * block[1, 0]
            inverse = anp.stack([anp.stack([block[1, 1], -block[0, 1]]),
                                 anp.stack([-block[1, 0], block[0, 0]])]) / determinant
        quadratic = anp.sum(anp.matmul(values, inverse) * values, axis=-1)
        density = anp.exp(-0.5 * quadratic) / anp.sqrt(
            (2 * math.pi) ** len(given) * determinant)
        rest = [k for k in range(self.dim) if k not in given]
        if not rest:
            return density
        weights = anp.matmul(self.cov[rest][:, given], inverse)  # (d - k, k)
        shift = anp.matmul(values, weights.T)
        conditional = self.cov[rest][:, rest] - anp.matmul(weights, self.cov[given][:, rest])
        lower = None if self.lower is None else self.lower[:, rest] - shift
        probability = _BoxProbability.apply(self.options, self.upper[:, rest] - shift, lower,
                                            conditional)
        return density * probability

    def face(self, i, corner):
        """``dP/dlimit_i`` at ``corner`` (up to its sign): the density of ``Y_i`` there times
        the probability of the rest given it; zero at an infinite limit."""
        key = (i, corner.sign)
        if key not in self._faces:
            term = self._conditional([i], corner.values[:, None])
            self._faces[key] = anp.where(corner.finite, term, 0.0)
        return self._faces[key]

    def edge(self, i, j, corner_i, corner_j):
        """``d^2P/dlimit_i dlimit_j`` at two corners (up to their signs)."""
        finite = corner_i.finite & corner_j.finite
        values = anp.stack([corner_i.values, corner_j.values], axis=-1)
        return anp.where(finite, self._conditional([i, j], values), 0.0)

    def weighted_hessian(self, weights):
        """``sum_n weights_n H_n``, ``H`` the Hessian of ``P`` in the mean (and in the
        limits): off the diagonal from the edges, on it from Plackett's identity
        ``cov_ii D_i = -c F_i - sum_j cov_ij (edges)`` at each corner ``c`` of ``i``."""
        dim = self.dim
        corners = [self.corners(i) for i in range(dim)]
        entries = [[None] * dim for _ in range(dim)]
        slopes = {(i, k): -c.values * self.face(i, c)
                  for i in range(dim) for k, c in enumerate(corners[i])}
        for i in range(dim):
            for j in range(i + 1, dim):
                total = 0.0
                for a, corner_i in enumerate(corners[i]):
                    for b, corner_j in enumerate(corners[j]):
                        term = self.edge(i, j, corner_i, corner_j)
                        total = total + corner_i.sign * corner_j.sign * term
                        slopes[i, a] = slopes[i, a] - self.cov[i, j] * corner_j.sign * term
                        slopes[j, b] = slopes[j, b] - self.cov[j, i] * corner_i.sign * term
                entries[i][j] = entries[j][i] = anp.sum(weights * total)
        for i in range(dim):
            diagonal = sum(c.sign * slopes[i, k] for k, c in enumerate(corners[i]))
            entries[i][i] = anp.sum(weights * diagonal) / self.cov[i, i]
        return anp.stack([anp.stack(row) for row in entries])
