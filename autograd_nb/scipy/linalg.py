"""SciPy's ``scipy.linalg.solve_sylvester`` and ``sqrtm``, differentiable, and ``det``,
``inv``, ``cholesky`` and ``svdvals`` under SciPy's signatures:
``from autograd_nb.scipy import linalg``.

``solve_sylvester`` and ``sqrtm`` are the registry's ``_solve_sylvester`` and ``_sqrtm`` ops
(``autograd_nb/ops/linalg_sylvester.py``), which run SciPy's own routines and whose rules are
written with ``_solve_sylvester``, so both differentiate to any order. They batch over
leading axes as SciPy 1.17's do. Where no argument is a Tensor they are SciPy's functions
(NumPy results). Complex matrices are taken too, and a real matrix whose principal root is
complex gets SciPy's complex root (:doc:`/complex`). Neither op has a replay driver: a
program of :func:`autograd_nb.compile` that calls them runs eagerly, with a warning.

``det``, ``inv``, ``cholesky`` and ``svdvals`` are ``anb.linalg``'s under SciPy's
signatures (``cholesky`` gives the upper factor by default, as SciPy's; ``overwrite_a`` is
accepted and changes nothing; ``check_finite`` raises SciPy's ValueError, which reads the
values: pass ``check_finite=False`` inside :func:`autograd_nb.compile`). SciPy's
``solve``, ``eigh``, ``svd``, ``qr``, ``lu``, ``pinv`` and ``lstsq`` are not repeated here:
their SciPy signatures (``assume_a``, ``transposed``, a second matrix ``b`` of ``eigh``,
``eigvals_only``, ``qr``'s ``mode="full"`` and ``pivoting``, ``lu``'s permutation) go beyond
what ``anb.linalg`` computes or differ from NumPy's, which ``anb.linalg`` follows.

>>> import autograd_nb as anb
>>> from autograd_nb.scipy import linalg
>>> a = anb.tensor([[4.0, 0.0], [0.0, 9.0]], requires_grad=True)
>>> linalg.sqrtm(a)
tensor([[2., 0.],
        [0., 3.]], grad_fn=<SqrtmBackward>)
"""

import warnings

import numpy as np
import scipy.linalg

from .. import linalg as _linalg
from ..ops.registry import call, host_values
from ._operands import float_operands, holds_tensor

__all__ = ["cholesky", "det", "inv", "solve_sylvester", "sqrtm", "svdvals"]

#: SciPy's marker of an argument not given (``disp``, ``blocksize``).
_NOT_GIVEN = object()


def _broadcast(tensors):
    """``tensors`` broadcast to one batch shape, each keeping its core (last two) axes."""
    batch = np.broadcast_shapes(*(t.shape[:-2] for t in tensors))
    return [t if t.shape[:-2] == batch else call("broadcast_to", t, shape=batch + t.shape[-2:])
            for t in tensors]


def solve_sylvester(a, b, q):
    """The solution ``X`` of the Sylvester equation ``A X + X B = Q``, as
    ``scipy.linalg.solve_sylvester``.

    Parameters
    ----------
    a : Tensor or array_like, shape (..., M, M)
    b : Tensor or array_like, shape (..., N, N)
    q : Tensor or array_like, shape (..., M, N)
        Differentiable, all three; their leading axes broadcast.

    Returns
    -------
    Tensor, shape (..., M, N)

    Raises
    ------
    ValueError
        If ``a`` or ``b`` is not square, or ``q``'s shape does not fit them.

    Notes
    -----
    With ``Y`` the solution of ``A^H Y + Y B^H = G`` (``G`` the gradient of ``X``; ``^H`` the
    conjugate transpose, the transpose for real matrices), the gradients are ``Q_bar = Y``,
    ``A_bar = -Y X^H``, ``B_bar = -X^H Y``. Where ``A`` and ``-B`` share an eigenvalue the
    equation is singular, and the values are SciPy's (typically huge). Complex and real
    matrices may be mixed: all are made complex first (SciPy's own function, given a complex
    ``A`` and a real ``B`` with complex eigenvalues, returns an ``X`` that does not solve the
    equation: a residual of 2e-2 measured with SciPy 1.17).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> from autograd_nb.scipy import linalg
    >>> q = anb.tensor([[2.0, 4.0], [6.0, 8.0]], requires_grad=True)
    >>> x = linalg.solve_sylvester(anb.eye(2), anb.eye(2), q)
    >>> x
    tensor([[1., 2.],
            [3., 4.]], grad_fn=<SolveSylvesterBackward>)
    >>> anb.grad(x.sum(), q)
    (tensor([[0.5, 0.5],
            [0.5, 0.5]]),)
    """
    if not holds_tensor((a, b, q)):
        return scipy.linalg.solve_sylvester(a, b, q)
    a, b, q = float_operands("linalg.solve_sylvester", ("a", "b", "q"), (a, b, q),
                             complex=True)
    for name, x in (("a", a), ("b", b), ("q", q)):
        if x.ndim < 2:
            raise ValueError(f"solve_sylvester: {name} must be at least two-dimensional; "
                             f"got shape {x.shape}")
    return call("_solve_sylvester", *_broadcast([a, b, q]))


def sqrtm(A, disp=_NOT_GIVEN, blocksize=_NOT_GIVEN):
    """The principal matrix square root ``S`` of ``A`` (``S @ S = A``), as
    ``scipy.linalg.sqrtm``.

    Parameters
    ----------
    A : Tensor or array_like, shape (..., N, N)
        Real or complex matrices, differentiable.
    disp, blocksize
        SciPy's deprecated arguments, as SciPy takes them: each warns
        (``DeprecationWarning``), ``blocksize`` is unused, and ``disp=False`` returns
        ``(S, errest)`` with SciPy's error estimate (a float, not differentiable).

    Returns
    -------
    Tensor, shape (..., N, N)
        Complex where ``A`` is, and where a real ``A`` has no real principal root (an
        eigenvalue on the negative real axis): SciPy's complex root then.

    Raises
    ------
    numpy.linalg.LinAlgError
        If ``A`` is not at least two-dimensional and square.

    Notes
    -----
    The gradient is ``A_bar = solve_sylvester(S^H, S^H, G)`` (from ``dS S + S dS = dA``; the
    conjugate transposes are transposes for real ``S``), a composition that differentiates
    again. For a real ``A`` with a complex root it is the real part of that, torch's
    convention (:doc:`/complex`).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> from autograd_nb.scipy import linalg
    >>> a = anb.tensor([[4.0, 1.0], [0.0, 9.0]], requires_grad=True)
    >>> s = linalg.sqrtm(a)
    >>> s
    tensor([[2. , 0.2],
            [0. , 3. ]], grad_fn=<SqrtmBackward>)

    The gradient of ``trace(sqrtm(A))`` is ``inv(S).T / 2``:

    >>> anb.grad(anb.trace(s), a)
    (tensor([[ 0.25      ,  0.        ],
            [-0.01666667,  0.16666667]]),)
    """
    given = {k: v for k, v in (("disp", disp), ("blocksize", blocksize)) if v is not _NOT_GIVEN}
    if not holds_tensor((A,)):
        return scipy.linalg.sqrtm(A, **given)
    if given:
        warnings.warn(f"sqrtm: the {' and '.join(given)} argument is deprecated in SciPy "
                      "1.16.0 and will be removed in SciPy 1.18.0", DeprecationWarning,
                      stacklevel=2)
    (a,) = float_operands("linalg.sqrtm", ("A",), (A,), complex=True)
    root = call("_sqrtm", a)
    if given.get("disp", True):
        return root
    values, target = root.detach().numpy(), a.detach().numpy()
    errest = float(np.linalg.norm(values @ values - target, "fro") ** 2
                   / np.linalg.norm(target, "fro"))
    return root, errest


def _checked(a, check_finite):
    """``a`` as a floating Tensor, after SciPy's ``check_finite`` test."""
    (a,) = float_operands("linalg", ("a",), (a,))
    if check_finite and not np.isfinite(host_values(a)).all():
        raise ValueError("array must not contain infs or NaNs")
    return a


def det(a, overwrite_a=False, check_finite=True):
    """The determinants of ``a (..., M, M)``, as ``scipy.linalg.det``: ``anb.linalg.det``,
    in float64 whatever ``a``'s dtype (SciPy's result dtype).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> from autograd_nb.scipy import linalg
    >>> linalg.det(anb.tensor([[2.0, 1.0], [1.0, 3.0]]))
    tensor(5.)
    """
    if not holds_tensor((a,)):
        return scipy.linalg.det(a, overwrite_a, check_finite)
    return _linalg.det(_checked(a, check_finite).astype(np.float64))


def inv(a, overwrite_a=False, check_finite=True, *, assume_a=None, lower=False):
    """The inverses of ``a (..., M, M)``, as ``scipy.linalg.inv``: ``anb.linalg.inv``.

    ``assume_a`` may be None, ``"general"`` or ``"gen"`` (the whole matrix is read); SciPy's
    structured options, which read part of it, raise NotImplementedError for Tensors.
    ``lower`` matters only to those.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> from autograd_nb.scipy import linalg
    >>> linalg.inv(anb.tensor([[2.0, 0.0], [0.0, 4.0]]))
    tensor([[0.5 , 0.  ],
            [0.  , 0.25]])
    """
    if not holds_tensor((a,)):
        return scipy.linalg.inv(a, overwrite_a, check_finite, assume_a=assume_a, lower=lower)
    if assume_a not in (None, "general", "gen"):
        raise NotImplementedError(f"linalg.inv: assume_a={assume_a!r} is not implemented for "
                                  "Tensors; None and 'general' are")
    return _linalg.inv(_checked(a, check_finite))


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """The Cholesky factor of ``a (..., M, M)``, as ``scipy.linalg.cholesky``: the upper
    ``U`` (``a = U^T U``, the upper triangle read) unless ``lower``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> from autograd_nb.scipy import linalg
    >>> linalg.cholesky(anb.tensor([[4.0, 2.0], [2.0, 5.0]]))
    tensor([[2., 1.],
            [0., 2.]])
    """
    if not holds_tensor((a,)):
        return scipy.linalg.cholesky(a, lower, overwrite_a, check_finite)
    return _linalg.cholesky(_checked(a, check_finite), upper=not lower)


def svdvals(a, overwrite_a=False, check_finite=True):
    """The singular values of ``a (..., M, N)``, in decreasing order, as
    ``scipy.linalg.svdvals``: ``anb.linalg.svdvals``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> from autograd_nb.scipy import linalg
    >>> linalg.svdvals(anb.tensor([[3.0, 0.0], [0.0, -4.0]]))
    tensor([4., 3.])
    """
    if not holds_tensor((a,)):
        return scipy.linalg.svdvals(a, overwrite_a, check_finite)
    return _linalg.svdvals(_checked(a, check_finite))
