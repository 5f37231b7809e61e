"""``anb.linalg.pinv`` and ``lstsq``: the ``_pinv`` op (numba's ``np.linalg.pinv``), with
Golub and Pereyra's gradient, and its complex twin ``_cpinv`` (NumPy's LAPACK, as the other
complex cases of :mod:`.linalg_complex`); ``lstsq`` is ``pinv(a) @ b`` and ``linalg_svd``'s
``svdvals``.
"""

import numpy as np
from numba import njit

from . import _lapack
from . import _lapack_numpy as _twin
from ._blas import release_blas_threads_at
from ._linalg_common import (
    _SET,
    LinAlgError,
    LinalgOp,
    _accumulating,
    _blas_call,
    _check_matrix,
    _constant_like,
    _driver_ints,
    _dtype_of,
    _failing_spec,
    _float_arrays,
    _hold,
    _mT,
    _operands,
    _set_flag,
    _stacked,
    _work,
)
from ._pointers import array_at
from .linalg import _shape_of, matmul, numba_dot
from .linalg_complex import ComplexLinalgOp, _complex_arrays
from .linalg_svd import svdvals
from .registry import ExecSpec, call, public


@njit(cache=True, nogil=True)
def _pinv_forward(a, out, rcond):
    for i in range(a.shape[0]):
        _lapack.copy_into(out[i], np.linalg.pinv(a[i], rcond))


@njit(cache=True, nogil=True)
def _pinv_vjp(g, a, p, grad):
    """Golub and Pereyra's derivative of ``P = pinv(A)`` (constant rank):
    ``-P^T G P^T + (I - A P) G^T P P^T + P^T P G^T (I - P A)``."""
    for i in range(g.shape[0]):
        pt = np.ascontiguousarray(p[i].T)
        gt = np.ascontiguousarray(g[i].T)
        total = -np.dot(np.dot(pt, g[i]), pt)
        left = gt - np.dot(a[i], np.dot(p[i], gt))  # (I - A P) G^T
        total += np.dot(left, np.dot(p[i], pt))
        right = gt - np.dot(np.dot(gt, p[i]), a[i])  # G^T (I - P A)
        total += np.dot(np.dot(pt, p[i]), right)
        _lapack.add_scaled(grad[i], 1.0, total)


def _pinv_vjp_numpy(g, a, p, grad):
    """``_pinv_vjp``'s NumPy twin."""
    for i in range(g.shape[0]):
        pt = np.ascontiguousarray(p[i].T)
        gt = np.ascontiguousarray(g[i].T)
        total = -numba_dot(numba_dot(pt, g[i]), pt)
        total += numba_dot(gt - numba_dot(a[i], numba_dot(p[i], gt)), numba_dot(p[i], pt))
        right = gt - numba_dot(numba_dot(gt, p[i]), a[i])
        total += numba_dot(numba_dot(pt, p[i]), right)
        _twin.add_scaled(grad[i], np.float64(1.0), total)


@njit(cache=True, nogil=True)
def _pinv_forward_driver(operands, ints, floats, like):
    """``_pinv``'s forward in a compiled program (``forward_spec``): ``ints`` is ``[batch,
    m, n]`` then ``_driver_ints``' tail, ``floats`` ``[rcond]``; operands the matrices, the
    flag (set where numba's ``pinv`` raises: an inf or nan, or no convergence) and the
    pseudo-inverses."""
    batch, m, n = ints[0], ints[1], ints[2]
    a = array_at(operands[0], batch * m * n, like).reshape((batch, m, n))
    out = array_at(operands[2], batch * n * m, like).reshape((batch, n, m))
    held = _hold(ints, batch * m * n * min(m, n))
    failed = False
    try:
        _pinv_forward(a, out, floats[0])
    except Exception:
        failed = True
    release_blas_threads_at(ints[_SET], held)
    _set_flag(operands[1], failed)


@njit(cache=True, nogil=True)
def _pinv_driver(operands, ints, floats, like):
    """The compiled executor's driver of ``_pinv``'s VJP: ``ints`` as
    ``_pinv_forward_driver``'s; operands the gradient, the matrices, the pseudo-inverses and
    the target."""
    batch, m, n = ints[0], ints[1], ints[2]
    g = array_at(operands[0], batch * n * m, like).reshape((batch, n, m))
    a = array_at(operands[1], batch * m * n, like).reshape((batch, m, n))
    p = array_at(operands[2], batch * n * m, like).reshape((batch, n, m))
    grad = array_at(operands[3], batch * m * n, like).reshape((batch, m, n))
    held = _hold(ints, batch * m * n * min(m, n))
    _pinv_vjp(g, a, p, grad)
    release_blas_threads_at(ints[_SET], held)


def _pinv_ints(a):
    m, n = a.shape[-2:]
    return _driver_ints(a.dtype, a.size // (m * n), m, n)


class Pinv(LinalgOp):
    """``_pinv(a, rcond)``: the pseudo-inverses of ``a (..., m, n)``, singular values below
    ``rcond`` times the largest taken as zero."""

    name = "_pinv"
    saves = (0,)
    saves_output = True

    def prepare(self, values, attrs):
        (a,) = _float_arrays(values)
        _check_matrix(self.name, a.shape)
        return [a], {"rcond": float(attrs["rcond"])}

    def forward(self, arrays, attrs):
        (a,) = arrays
        m, n = a.shape[-2:]
        out = np.empty(a.shape[:-2] + (n, m), dtype=a.dtype)
        if out.size:
            _blas_call(_work(a.shape), _pinv_forward, _stacked(a, (m, n)),
                       _stacked(out, (n, m)), attrs["rcond"])
        return out

    def forward_spec(self, arrays, attrs, output):
        (a,) = arrays
        if not a.size:
            return None
        return _failing_spec(_pinv_forward_driver, _pinv_ints(a), (attrs["rcond"],))

    vjp_kernel = staticmethod(_pinv_vjp)
    vjp_twin = staticmethod(_pinv_vjp_numpy)

    def run_vjp(self, kernel, k, grad_output, saved, attrs, grad_input):
        a, p = saved[0], saved.output
        m, n = a.shape[-2:]
        g = _stacked(np.ascontiguousarray(grad_output, dtype=a.dtype), (n, m))
        target, done = _accumulating(grad_input, (g.shape[0], m, n), a.dtype)
        if g.size:
            _blas_call(_work(a.shape), kernel, g, _stacked(a, (m, n)),
                       _stacked(p, (n, m)), target)
        done()

    def exec_spec(self, k, node):
        a, p = node.saved_inputs[0], node.saved_output
        if a.dtype != node.dtype or not a.size:
            return None
        return ExecSpec(_pinv_driver, (a, p), _pinv_ints(a), ())

    def rule(self, k, grad_output, inputs, output, attrs):
        (a,) = inputs
        p, g = output, grad_output
        pt, gt = _mT(p), _mT(g)
        total = -(pt @ g @ pt)
        total = total + (gt - a @ (p @ gt)) @ (p @ pt)
        return total + (pt @ p) @ (gt - (gt @ p) @ a)


Pinv()


class ComplexPinv(ComplexLinalgOp):
    """``_cpinv(a, rcond)``: :class:`Pinv` of complex ``a``, NumPy's ``pinv`` forward, and
    Golub and Pereyra's derivative with conjugate transposes (torch's ``pinv_backward``):
    ``-P^H G P^H + (I - A P) G^H P P^H + P^H P G^H (I - P A)``."""

    name = "_cpinv"

    def prepare(self, values, attrs):
        (a,) = _complex_arrays(values)
        _check_matrix("linalg.pinv", a.shape)
        return [a], {"rcond": float(attrs["rcond"])}

    def forward(self, arrays, attrs):
        return np.ascontiguousarray(np.linalg.pinv(arrays[0], attrs["rcond"]))

    def gradient(self, xp, k, g, inputs, p, attrs):
        (a,) = inputs
        ph, gh = xp.h(p), xp.h(g)
        total = -(ph @ g @ ph)
        total = total + (gh - a @ (p @ gh)) @ (p @ ph)
        return total + (ph @ p) @ (gh - (gh @ p) @ a)


ComplexPinv()


# -- the public functions ---------------------------------------------------------------------


@public("linalg.pinv", method=False, family="linalg")
def pinv(a, rcond=None, hermitian=False, *, rtol=np._NoValue):
    """The Moore-Penrose pseudo-inverses of ``a (..., M, N)``, as ``numpy.linalg.pinv``.

    Parameters
    ----------
    a : Tensor or array_like
    rcond, rtol : float, optional
        Singular values at most ``rcond`` times the largest are taken as zero; NumPy's
        defaults: ``1e-15``, or ``max(M, N) * eps`` for ``rtol=None``.
    hermitian : bool, optional
        Accepted for NumPy's signature; the general SVD runs either way.

    Notes
    -----
    The gradient is Golub and Pereyra's, true where the rank does not change near ``a``
    (full rank, or singular values far from the cut-off). A complex ``a`` runs NumPy's
    LAPACK, its gradient in torch's convention (:doc:`/complex`).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.linalg.pinv(anb.tensor([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]]))
    tensor([[1. , 0. , 0. ],
            [0. , 0.5, 0. ]])
    """
    (a,) = _operands("linalg.pinv", a, complex_ok=True)
    shape = _shape_of(a)
    _check_matrix("linalg.pinv", shape)
    if rcond is None:
        if rtol is np._NoValue:
            rcond = 1e-15
        elif rtol is None:
            rcond = max(shape[-2:]) * np.finfo(_dtype_of(a)).eps
        else:
            rcond = rtol
    elif rtol is not np._NoValue:
        raise ValueError("`rtol` and `rcond` can't be both set.")
    return call("_cpinv" if _dtype_of(a).kind == "c" else "_pinv", a, rcond=float(rcond))


@public("linalg.lstsq", method=False, family="linalg")
def lstsq(a, b, rcond=None):
    """Least-squares solution of ``a @ x = b``, as ``numpy.linalg.lstsq``.

    Parameters
    ----------
    a : Tensor or array_like, shape (M, N)
    b : Tensor or array_like, shape (M,) or (M, K)
    rcond : float, optional
        Singular values at most ``rcond`` times the largest are taken as zero; None:
        ``max(M, N)`` times float64's eps (NumPy's).

    Returns
    -------
    x : Tensor, shape (N,) or (N, K)
        The minimum-norm solution, ``pinv(a, rcond) @ b``.
    residuals : Tensor, shape (1,), (K,) or (0,)
        The squared norms of ``b - a @ x``'s columns where ``a`` has rank ``N < M``, else
        empty (real for complex operands, as NumPy's).
    rank : int
    s : Tensor, shape (min(M, N),)
        ``a``'s singular values.

    Notes
    -----
    Every Tensor result is differentiable (``x`` through :func:`pinv`, valid where the rank
    does not change near ``a``).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> a = anb.tensor([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]], requires_grad=True)
    >>> x, residuals, rank, s = anb.linalg.lstsq(a, anb.tensor([1.0, 2.0, 2.0]))
    >>> x, rank
    (tensor([1.16666667, 0.5       ], grad_fn=<BmmBackward>), 2)
    """
    a, b = _operands("linalg.lstsq", a, b, complex_ok=True)
    a_shape, b_shape = _shape_of(a), _shape_of(b)
    if len(a_shape) != 2 or len(b_shape) not in (1, 2):
        raise LinAlgError(
            f"linalg.lstsq: a must be 2-dimensional and b 1- or 2-dimensional, got shapes "
            f"{a_shape} and {b_shape}"
        )
    m, n = a_shape
    if b_shape[0] != m:
        raise LinAlgError("Incompatible dimensions")
    if rcond is None:
        rcond = np.finfo(np.float64).eps * max(m, n)
    s = svdvals(a)
    values = s.numpy()
    rank = int(np.sum(values > rcond * values.max())) if values.size else 0
    x = matmul(pinv(a, rcond=rcond), b)
    if rank == n and m > n:
        residual = b - matmul(a, x)
        if _dtype_of(residual).kind == "c":  # (|r|^2: real, as NumPy's)
            residual = call("abs", residual)
        residuals = call("sum", residual * residual, axis=0)
        if len(b_shape) == 1:
            residuals = call("reshape", residuals, shape=(1,))
    else:
        residuals = _constant_like(np.zeros(0, dtype=_dtype_of(s)))
    return x, residuals, rank, s
