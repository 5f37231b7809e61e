"""``anb.linalg.qr``: the ``_qr`` op (numba's ``np.linalg.qr``), ``Q`` and ``R`` packed in one
result (``_linalg_common`` says why). Its rule inverts ``R`` with ``linalg_lu``'s ``_inv``.
"""

import collections

import numpy as np
from numba import njit

from . import _lapack
from . import _lapack_numpy as _twin
from ._blas import release_blas_threads_at
from ._linalg_common import (
    _ROUTINES,
    _SET,
    LinalgOp,
    _accumulating,
    _blas_call,
    _check_matrix,
    _constant_like,
    _driver_ints,
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
from .linalg import _shape_of, numba_dot
from .linalg_complex import complex_qr
from .linalg_lu import _inv
from .registry import ExecSpec, call, public
from .shape import concatenate

QRResult = collections.namedtuple("QRResult", ["Q", "R"])


@njit(cache=True, nogil=True)
def _qr_forward(a, out):
    """``out[i]``: ``Q (m, k)`` then ``R (k, n)`` of ``a[i]``, raveled (``k = min(m, n)``)."""
    m, n = a.shape[1], a.shape[2]
    k = min(m, n)
    for i in range(a.shape[0]):
        q, r = np.linalg.qr(a[i])
        row = out[i]
        for x in range(m):
            for y in range(k):
                row[x * k + y] = q[x, y]
        for x in range(k):
            for y in range(n):
                row[m * k + x * n + y] = r[x, y]


@njit(cache=True, nogil=True)
def _qr_square_vjp(routines, q, r, gq, gr):
    """The VJP of ``A = Q R`` for ``m >= n`` (``R`` square, invertible):
    ``(gQ + Q copyltu(M)) R^-T``, ``M = R gR^T - gQ^T Q``, ``copyltu(M)`` the symmetric
    matrix of ``M``'s lower triangle."""
    m = np.dot(r, gr.T) - np.dot(gq.T, q)
    k = m.shape[0]
    for x in range(k):
        for y in range(x + 1, k):
            m[x, y] = m[y, x]
    b = gq + np.dot(q, m)
    _lapack.triangular_solve(routines, r, b, False, False, True)  # b R^-T
    return b


@njit(cache=True, nogil=True)
def _qr_vjp(routines, g, packed, a, grad):
    m, n = grad.shape[1], grad.shape[2]
    k = min(m, n)
    for i in range(g.shape[0]):
        q = np.ascontiguousarray(packed[i, : m * k]).reshape((m, k))
        r = np.ascontiguousarray(packed[i, m * k :]).reshape((k, n))
        gq = np.ascontiguousarray(g[i, : m * k]).reshape((m, k))
        gr = np.ascontiguousarray(g[i, m * k :]).reshape((k, n))
        if m >= n:
            _lapack.add_scaled(grad[i], 1.0, _qr_square_vjp(routines, q, r, gq, gr))
            continue
        # A = [X | Y], R = [U | V]: X = Q U is square, Y = Q V (torch's linalg_qr_backward).
        gv = np.ascontiguousarray(gr[:, m:])
        gq = gq + np.dot(np.ascontiguousarray(a[i, :, m:]), gv.T)
        u = np.ascontiguousarray(r[:, :m])
        square = _qr_square_vjp(routines, q, u, gq, np.ascontiguousarray(gr[:, :m]))
        _lapack.add_scaled(grad[i, :, :m], 1.0, square)
        _lapack.add_scaled(grad[i, :, m:], 1.0, np.dot(q, gv))


def _qr_square_vjp_numpy(q, r, gq, gr):
    m = numba_dot(r, gr.T) - numba_dot(gq.T, q)
    _twin.mirror(m, True)
    b = gq + numba_dot(q, m)
    _twin.triangular_solve(r, b, False, False, True)
    return b


def _qr_vjp_numpy(routines, g, packed, a, grad):
    """``_qr_vjp``'s NumPy twin (``routines`` unused, as in ``_lu_solve_vjp_numpy``)."""
    m, n = grad.shape[1], grad.shape[2]
    k = min(m, n)
    one = np.float64(1.0)
    for i in range(g.shape[0]):
        q, r = packed[i, : m * k].reshape((m, k)), packed[i, m * k :].reshape((k, n))
        gq, gr = g[i, : m * k].reshape((m, k)), g[i, m * k :].reshape((k, n))
        if m >= n:
            _twin.add_scaled(grad[i], one, _qr_square_vjp_numpy(q, r, gq, gr))
            continue
        gv = np.ascontiguousarray(gr[:, m:])
        gq = gq + numba_dot(np.ascontiguousarray(a[i, :, m:]), gv.T)
        square = _qr_square_vjp_numpy(q, np.ascontiguousarray(r[:, :m]), gq,
                                      np.ascontiguousarray(gr[:, :m]))
        _twin.add_scaled(grad[i, :, :m], one, square)
        _twin.add_scaled(grad[i, :, m:], one, numba_dot(q, gv))


@njit(cache=True, nogil=True)
def _qr_forward_driver(operands, ints, floats, like):
    """``_qr``'s forward in a compiled program (``forward_spec``): ``ints`` is ``[batch, m,
    n]`` then ``_driver_ints``' tail; operands the matrices, the flag (set where numba's QR
    raises: an inf or nan) and the packed factors."""
    batch, m, n = ints[0], ints[1], ints[2]
    k = min(m, n)
    a = array_at(operands[0], batch * m * n, like).reshape((batch, m, n))
    out = array_at(operands[2], batch * (m * k + k * n), like).reshape((batch, m * k + k * n))
    held = _hold(ints, batch * m * n * k)
    failed = False
    try:
        _qr_forward(a, out)
    except Exception:
        failed = True
    release_blas_threads_at(ints[_SET], held)
    _set_flag(operands[1], failed)


@njit(cache=True, nogil=True)
def _qr_driver(operands, ints, floats, like):
    """The compiled executor's driver of ``_qr``'s VJP: ``ints`` as
    ``_qr_forward_driver``'s; operands the gradient, the packed factors, the matrices and
    the target."""
    batch, m, n = ints[0], ints[1], ints[2]
    k = min(m, n)
    width = m * k + k * n
    g = array_at(operands[0], batch * width, like).reshape((batch, width))
    packed = array_at(operands[1], batch * width, like).reshape((batch, width))
    a = array_at(operands[2], batch * m * n, like).reshape((batch, m, n))
    grad = array_at(operands[3], batch * m * n, like).reshape((batch, m, n))
    held = _hold(ints, batch * m * n * k)
    _qr_vjp(ints[_ROUTINES:], g, packed, a, grad)
    release_blas_threads_at(ints[_SET], held)


def _qr_ints(a):
    m, n = a.shape[-2:]
    return _driver_ints(a.dtype, a.size // (m * n), m, n)


class Qr(LinalgOp):
    """``_qr(a)``: the reduced QR decomposition of ``a (..., m, n)``, ``Q`` then ``R`` raveled
    along the last axis. Differentiable where ``R``'s leading square block is invertible."""

    name = "_qr"
    saves = (0,)
    saves_output = True

    def prepare(self, values, attrs):
        (a,) = _float_arrays(values)
        _check_matrix(self.name, a.shape)
        return [a], {}

    def forward(self, arrays, attrs):
        (a,) = arrays
        m, n = a.shape[-2:]
        k = min(m, n)
        out = np.empty(a.shape[:-2] + (m * k + k * n,), dtype=a.dtype)
        _blas_call(_work(a.shape), _qr_forward, _stacked(a, (m, n)),
                   _stacked(out, out.shape[-1:]))
        return out

    def forward_spec(self, arrays, attrs, output):
        (a,) = arrays
        if not a.size:
            return None
        return _failing_spec(_qr_forward_driver, _qr_ints(a))

    vjp_kernel = staticmethod(_qr_vjp)
    vjp_twin = staticmethod(_qr_vjp_numpy)

    def run_vjp(self, kernel, k, grad_output, saved, attrs, grad_input):
        a, packed = saved[0], saved.output
        m, n = a.shape[-2:]
        rows = _stacked(packed, packed.shape[-1:])
        g = _stacked(np.ascontiguousarray(grad_output, dtype=a.dtype), packed.shape[-1:])
        target, done = _accumulating(grad_input, (rows.shape[0], m, n), a.dtype)
        _blas_call(_work(a.shape), kernel, _lapack.routines(a.dtype), g, rows,
                   _stacked(a, (m, n)), target)
        done()

    def exec_spec(self, k, node):
        a, packed = node.saved_inputs[0], node.saved_output
        if a.dtype != node.dtype or not a.size:
            return None
        return ExecSpec(_qr_driver, (packed, a), _qr_ints(a), ())

    def rule(self, k, grad_output, inputs, output, attrs):
        (a,) = inputs
        m, n = a.shape[-2:]
        q, r = _qr_parts(output, m, n)
        gq, gr = _qr_parts(grad_output, m, n)
        if m >= n:
            return _qr_square_rule(q, r, gq, gr)
        gv = call("getitem", gr, index=(Ellipsis, slice(m, None)))
        gq = gq + call("getitem", a, index=(Ellipsis, slice(m, None))) @ _mT(gv)
        u = call("getitem", r, index=(Ellipsis, slice(None, m)))
        gu = call("getitem", gr, index=(Ellipsis, slice(None, m)))
        left = _qr_square_rule(q, u, gq, gu)
        return concatenate([left, q @ gv], axis=-1)


Qr()


def _qr_parts(packed, m, n):
    k = min(m, n)
    batch = packed.shape[:-1]
    q = call("getitem", packed, index=(Ellipsis, slice(0, m * k)))
    r = call("getitem", packed, index=(Ellipsis, slice(m * k, None)))
    return call("reshape", q, shape=batch + (m, k)), call("reshape", r, shape=batch + (k, n))


def _qr_square_rule(q, r, gq, gr):
    m = r @ _mT(gr) - _mT(gq) @ q
    k = m.shape[-1]
    lower = np.tril(np.ones((k, k), dtype=bool))
    strict = np.tril(np.ones((k, k), dtype=bool), -1)
    sym = call("where", lower, m, 0.0) + _mT(call("where", strict, m, 0.0))
    b = gq + q @ sym
    return b @ _mT(_inv(r))


# -- the public functions ---------------------------------------------------------------------


@public("linalg.qr", method=False, family="linalg")
def qr(a, mode="reduced"):
    """QR decomposition ``a = Q @ R``, as ``numpy.linalg.qr``.

    Parameters
    ----------
    a : Tensor or array_like, shape (..., M, N)
    mode : {'reduced', 'complete', 'r'}, optional
        'reduced' (NumPy's default): ``Q (..., M, K)``, ``R (..., K, N)``, ``K = min(M, N)``;
        'r': ``R`` alone; 'complete': ``Q (..., M, M)``, ``R (..., M, N)``, which for
        ``M > N`` is not unique and has no gradient (ValueError where ``a`` requires grad).
        NumPy's 'raw' mode is not provided.

    Returns
    -------
    QRResult or Tensor

    Notes
    -----
    The gradient (reduced mode; for ``M < N`` through ``a = [X | Y]``, as torch's) needs the
    leading ``K x K`` block of ``R`` to be invertible, i.e. ``a`` of full rank ``K``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> a = anb.tensor([[3.0, 1.0], [4.0, 2.0]], requires_grad=True)
    >>> q, r = anb.linalg.qr(a)
    >>> r
    tensor([[-5. , -2.2],
            [ 0. ,  0.4]], grad_fn=<ReshapeBackward>)
    """
    (a,) = _operands("linalg.qr", a, complex_ok=True)
    shape = _shape_of(a)
    _check_matrix("linalg.qr", shape)
    m, n = shape[-2:]
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"linalg.qr: unrecognized mode {mode!r} (supported: 'reduced', "
                         "'complete', 'r')")
    if a.dtype.kind == "c":
        q, r = complex_qr(a, mode == "complete")
        return r if mode == "r" else QRResult(q, r)
    packed = call("_qr", a)
    if mode == "complete" and m > n:
        if packed.requires_grad:  # (recorded: grad mode is on and ``a`` requires grad)
            raise ValueError(
                "linalg.qr: mode='complete' has no gradient for a matrix with more rows than "
                f"columns ({m} x {n}): Q's extra columns are not unique. Use mode='reduced', "
                "or detach a"
            )
        q, r = np.linalg.qr(a.numpy() if hasattr(a, "numpy") else np.asarray(a), "complete")
        return QRResult(_constant_like(q), _constant_like(r))
    q, r = _qr_parts(packed, m, n)
    return r if mode == "r" else QRResult(q, r)
