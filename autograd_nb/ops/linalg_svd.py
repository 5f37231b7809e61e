"""``anb.linalg.svd`` and ``svdvals``: the ``_svd`` op (numba's ``np.linalg.svd``), ``U``,
``S`` and ``Vh`` packed in one result (``_linalg_common`` says why), with Townsend's gradient.
"""

import collections

import numpy as np
from numba import njit

from . import _lapack
from . import _lapack_numpy as _twin
from ._blas import release_blas_threads_at
from ._linalg_common import (
    _SET,
    LinalgOp,
    _accumulating,
    _blas_call,
    _check_matrix,
    _divide_or_zero,
    _driver_ints,
    _expand,
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
from .linalg import _shape_of, _size, numba_dot
from .linalg_complex import complex_svd
from .registry import ExecSpec, call, public

SVDResult = collections.namedtuple("SVDResult", ["U", "S", "Vh"])


def _svd_sizes(m, n, full):
    """``(U, S, Vh)`` shapes of the SVD of an ``m x n`` matrix."""
    k = min(m, n)
    if full:
        return (m, m), (k,), (n, n)
    return (m, k), (k,), (k, n)


@njit(cache=True, nogil=True)
def _svd_forward(a, out, full):
    """``out[i]``: ``U``, ``S`` and ``Vh`` of ``a[i]``, raveled one after another."""
    for i in range(a.shape[0]):
        u, s, vh = np.linalg.svd(a[i], full)
        row = out[i]
        p = 0
        for r in range(u.shape[0]):
            for c in range(u.shape[1]):
                row[p] = u[r, c]
                p += 1
        for j in range(s.size):
            row[p] = s[j]
            p += 1
        for r in range(vh.shape[0]):
            for c in range(vh.shape[1]):
                row[p] = vh[r, c]
                p += 1


@njit(cache=True, nogil=True)
def _svd_vjp(g, packed, grad, m, n):
    """Townsend's SVD gradient (``linalg.svd``'s Notes) for the reduced (or square) SVD."""
    k = min(m, n)
    for i in range(g.shape[0]):
        u = np.ascontiguousarray(packed[i, : m * k]).reshape((m, k))
        s = packed[i, m * k : m * k + k]
        vh = np.ascontiguousarray(packed[i, m * k + k :]).reshape((k, n))
        gu = np.ascontiguousarray(g[i, : m * k]).reshape((m, k))
        gs = g[i, m * k : m * k + k]
        gvh = np.ascontiguousarray(g[i, m * k + k :]).reshape((k, n))
        ut_gu = np.dot(u.T, gu)
        vt_gv = np.dot(vh, gvh.T)
        inner = np.empty((k, k), dtype=grad.dtype)
        inverse = np.zeros(k, dtype=grad.dtype)
        for r in range(k):
            if s[r] != 0:
                inverse[r] = 1 / s[r]
            for c in range(k):
                gap = s[c] * s[c] - s[r] * s[r]
                if r == c:
                    inner[r, c] = gs[r]
                elif gap == 0:
                    inner[r, c] = 0
                else:
                    j = (ut_gu[r, c] - ut_gu[c, r]) / gap
                    q = (vt_gv[r, c] - vt_gv[c, r]) / gap
                    inner[r, c] = j * s[c] + s[r] * q
        total = np.dot(np.dot(u, inner), vh)
        if m > k:  # (I - U U^T) gU S^-1 V^T
            total += np.dot((gu - np.dot(u, ut_gu)) * inverse, vh)
        if n > k:  # U S^-1 gV^T (I - V V^T)
            total += np.dot(u * inverse, gvh - np.dot(vt_gv.T, vh))
        _lapack.add_scaled(grad[i], 1.0, total)


def _svd_vjp_numpy(g, packed, grad, m, n):
    """``_svd_vjp``'s NumPy twin: ``1 / s`` in float64 (numba's int over a float), stored in
    ``inverse``'s dtype; the rest in the dtype."""
    k = min(m, n)
    for i in range(g.shape[0]):
        u, s, vh = packed[i, : m * k].reshape((m, k)), packed[i, m * k : m * k + k], \
            packed[i, m * k + k :].reshape((k, n))
        gu, gs, gvh = g[i, : m * k].reshape((m, k)), g[i, m * k : m * k + k], \
            g[i, m * k + k :].reshape((k, n))
        ut_gu = numba_dot(u.T, gu)
        vt_gv = numba_dot(vh, gvh.T)
        inverse = np.zeros(k, dtype=grad.dtype)
        inverse[s != 0] = 1 / s[s != 0].astype(np.float64)
        squares = s * s
        gap = squares[None, :] - squares[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            inner = (ut_gu - ut_gu.T) / gap * s[None, :] + s[:, None] * ((vt_gv - vt_gv.T) / gap)
        inner[gap == 0] = 0
        inner[np.diag_indices(k)] = gs
        total = numba_dot(numba_dot(u, inner), vh)
        if m > k:
            total += numba_dot((gu - numba_dot(u, ut_gu)) * inverse, vh)
        if n > k:
            total += numba_dot(u * inverse, gvh - numba_dot(vt_gv.T, vh))
        _twin.add_scaled(grad[i], np.float64(1.0), total)


@njit(cache=True, nogil=True)
def _svd_forward_driver(operands, ints, floats, like):
    """``_svd``'s forward in a compiled program (``forward_spec``): ``ints`` is ``[batch, m,
    n, width, full]`` then ``_driver_ints``' tail; operands the matrices, the flag (set where
    numba's SVD raises: an inf or nan, or no convergence) and the packed factors."""
    batch, m, n, width = ints[0], ints[1], ints[2], ints[3]
    a = array_at(operands[0], batch * m * n, like).reshape((batch, m, n))
    out = array_at(operands[2], batch * width, like).reshape((batch, width))
    held = _hold(ints, batch * m * n * min(m, n))
    failed = False
    try:
        _svd_forward(a, out, ints[4] != 0)
    except Exception:
        failed = True
    release_blas_threads_at(ints[_SET], held)
    _set_flag(operands[1], failed)


@njit(cache=True, nogil=True)
def _svd_driver(operands, ints, floats, like):
    """The compiled executor's driver of ``_svd``'s VJP: ``ints`` as
    ``_svd_forward_driver``'s; operands the gradient, the packed factors and the target."""
    batch, m, n, width = ints[0], ints[1], ints[2], ints[3]
    g = array_at(operands[0], batch * width, like).reshape((batch, width))
    packed = array_at(operands[1], batch * width, like).reshape((batch, width))
    grad = array_at(operands[2], batch * m * n, like).reshape((batch, m, n))
    held = _hold(ints, batch * m * n * min(m, n))
    _svd_vjp(g, packed, grad, m, n)
    release_blas_threads_at(ints[_SET], held)


class Svd(LinalgOp):
    """``_svd(a, full_matrices=False)``: ``U``, ``S`` and ``Vh`` of ``a (..., m, n)`` raveled
    one after another along the last axis. Differentiable where the factors are unique (the
    reduced SVD, or a square ``a``: ``linalg.svd`` checks)."""

    name = "_svd"
    saves_output = True

    def prepare(self, values, attrs):
        (a,) = _float_arrays(values)
        _check_matrix(self.name, a.shape)
        return [a], {"full_matrices": bool(attrs.get("full_matrices", False)),
                     "matrix": a.shape[-2:]}

    def forward(self, arrays, attrs):
        (a,) = arrays
        m, n = a.shape[-2:]
        width = sum(_size(shape) for shape in _svd_sizes(m, n, attrs["full_matrices"]))
        out = np.empty(a.shape[:-2] + (width,), dtype=a.dtype)
        _blas_call(_work(a.shape), _svd_forward, _stacked(a, (m, n)), _stacked(out, (width,)),
                   attrs["full_matrices"])
        return out

    def _ints(self, packed, attrs):
        m, n = attrs["matrix"]
        width = packed.shape[-1]
        return _driver_ints(packed.dtype, packed.size // width, m, n, width,
                            attrs["full_matrices"])

    def forward_spec(self, arrays, attrs, output):
        if not arrays[0].size:
            return None
        return _failing_spec(_svd_forward_driver, self._ints(output, attrs))

    vjp_kernel = staticmethod(_svd_vjp)
    vjp_twin = staticmethod(_svd_vjp_numpy)

    def run_vjp(self, kernel, k, grad_output, saved, attrs, grad_input):
        packed = saved.output
        m, n = grad_input.shape[-2:]
        rows = _stacked(packed, packed.shape[-1:])
        g = _stacked(np.ascontiguousarray(grad_output, dtype=packed.dtype), packed.shape[-1:])
        target, done = _accumulating(grad_input, (rows.shape[0], m, n), packed.dtype)
        _blas_call(_work(target.shape), kernel, g, rows, target, m, n)
        done()

    def exec_spec(self, k, node):
        packed = node.saved_output
        if (packed.dtype != node.dtype or not packed.size
                or node.attrs["full_matrices"]):  # (no gradient: ``svd`` raises first)
            return None
        return ExecSpec(_svd_driver, (packed,), self._ints(packed, node.attrs), ())

    def rule(self, k, grad_output, inputs, output, attrs):
        m, n = attrs["matrix"]
        u, s, vh = _svd_parts(output, m, n, False)
        gu, gs, gvh = _svd_parts(grad_output, m, n, False)
        ut_gu = _mT(u) @ gu
        vt_gv = vh @ _mT(gvh)
        gaps = _expand(s * s, -2) - _expand(s * s, -1)  # [r, c]: s_c^2 - s_r^2
        j = _divide_or_zero(ut_gu - _mT(ut_gu), gaps)
        q = _divide_or_zero(vt_gv - _mT(vt_gv), gaps)
        k = min(m, n)
        inner = j * _expand(s, -2) + _expand(s, -1) * q
        inner = inner + _expand(gs, -1) * np.eye(k, dtype=s.dtype)
        total = u @ inner @ vh
        inverse = _divide_or_zero(np.ones((), dtype=s.dtype), s)
        if m > k:
            total = total + ((gu - u @ ut_gu) * _expand(inverse, -2)) @ vh
        if n > k:
            total = total + (u * _expand(inverse, -2)) @ (gvh - _mT(vt_gv) @ vh)
        return total


Svd()


def _svd_parts(packed, m, n, full):
    """``U``, ``S`` and ``Vh`` taken from ``_svd``'s packed result."""
    batch = packed.shape[:-1]
    parts = []
    start = 0
    for shape in _svd_sizes(m, n, full):
        size = _size(shape)
        part = call("getitem", packed, index=(Ellipsis, slice(start, start + size)))
        parts.append(call("reshape", part, shape=batch + shape))
        start += size
    return parts


# -- the public functions ---------------------------------------------------------------------


@public("linalg.svd", method=False, family="linalg")
def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """Singular value decomposition ``a = U @ diag(S) @ Vh``, as ``numpy.linalg.svd``.

    Parameters
    ----------
    a : Tensor or array_like, shape (..., M, N)
    full_matrices : bool, optional
        NumPy's default, True, gives ``U (..., M, M)`` and ``Vh (..., N, N)``; False gives
        ``U (..., M, K)`` and ``Vh (..., K, N)``, ``K = min(M, N)``. For a matrix that is not
        square the extra columns of the full factors are not unique, so they have no
        gradient: differentiating requires ``full_matrices=False`` then (as torch does), and
        asking for the full factors of a Tensor that requires grad raises ValueError.
    compute_uv : bool, optional
        Whether to return ``U`` and ``Vh``; False returns ``S`` alone (differentiable for
        any ``full_matrices``).
    hermitian : bool, optional
        Accepted for NumPy's signature; the general SVD runs either way.

    Returns
    -------
    SVDResult or Tensor
        ``(U, S, Vh)``, ``S`` descending; or ``S`` alone.

    Notes
    -----
    The gradient is Townsend's (2016), with ``F[i, j] = 1 / (s_j^2 - s_i^2)``. It assumes
    distinct singular values, and nonzero ones where ``M != N`` and ``U`` or ``Vh`` is used.
    Where two singular values are exactly equal their term is taken as zero (the true
    gradient of functions that do not depend on the basis of the singular subspace, such as
    ``S`` itself, ``pinv`` or ``U @ Vh``), and a zero singular value's ``1 / s`` as zero; any
    other function has no gradient there. Close singular values give large gradients. The
    signs of the singular vectors are LAPACK's: a function of ``U`` and ``Vh`` should not
    depend on them (flipping a column of ``U`` and the row of ``Vh`` together).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> a = anb.tensor([[3.0, 0.0], [0.0, -2.0]], requires_grad=True)
    >>> anb.linalg.svd(a, compute_uv=False)
    tensor([3., 2.], grad_fn=<ReshapeBackward>)
    >>> u, s, vh = anb.linalg.svd(a, full_matrices=False)
    >>> anb.grad(s.sum(), a)
    (tensor([[ 1.,  0.],
            [ 0., -1.]]),)
    """
    (a,) = _operands("linalg.svd", a, complex_ok=True)
    shape = _shape_of(a)
    _check_matrix("linalg.svd", shape)
    m, n = shape[-2:]
    full = bool(full_matrices) and compute_uv and m != n
    if a.dtype.kind == "c":
        parts = complex_svd(a, full)
        return SVDResult(*parts) if compute_uv else parts[1]
    packed = call("_svd", a, full_matrices=full)
    if full and packed.requires_grad:  # (recorded: grad mode is on and ``a`` requires grad)
        raise ValueError(
            "linalg.svd: full_matrices=True has no gradient for a matrix that is not square "
            f"({m} x {n}): the extra columns of U or rows of Vh are not unique. Pass "
            "full_matrices=False"
        )
    parts = _svd_parts(packed, m, n, full)
    return SVDResult(*parts) if compute_uv else parts[1]


@public("linalg.svdvals", method=False, family="linalg")
def svdvals(x, /):
    """The singular values of ``x (..., M, N)``, descending, as ``numpy.linalg.svdvals``;
    see :func:`svd`.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.linalg.svdvals(anb.tensor([[0.0, 2.0], [1.0, 0.0]]))
    tensor([2., 1.])
    """
    return svd(x, compute_uv=False)
