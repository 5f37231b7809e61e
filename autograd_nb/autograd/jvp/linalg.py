"""Forward rules of the ``linalg`` family (``ops/linalg_*.py``): the real LAPACK ops, the
complex ones of ``linalg_complex`` and ``scipy.linalg``'s Sylvester solver and square root.

The formulas are the standard first-order perturbations (torch's ``FunctionsManual.cpp``
forward derivatives, in its conventions), written with the ops themselves so that they
differentiate again. A multi-output op's tangent has the op's packed layout (``_eigh``: the
eigenvalues in row 0 and the eigenvectors below; ``_svd``, ``_qr`` and the complex ops: the
factors flattened one after another along the last axis).

- Ops that read one triangle of a symmetric (Hermitian) matrix (``cholesky``, ``eigh``) take
  the tangent's symmetric (Hermitian) part, as their VJPs are symmetric: the rule is the
  transpose of the VJP for every tangent, and the derivative of the op for a symmetric one.
- Eigenvectors and singular vectors of complex matrices are unique up to a phase per vector;
  the tangents are those of torch's gauge (``diag(V^H dV)`` real, and zero for ``eigh``;
  ``diag(V^H dV) = 0`` for the SVD's right vectors), so a function of the outputs that does
  not depend on the phase gets its true derivative.

A batch of tangents stays in front of the matrices' own batch dimensions: products broadcast
it as ``matmul`` does, and a solve for a batched right-hand side moves the batch into its
columns (one solve with ``batch size * k`` columns, :func:`_in_columns`). The Sylvester
solver's rules (``_solve_sylvester``, ``_sqrtm``), whose unknown mixes columns, run once per
tangent (``batched=False``).
"""

import numpy as np

from ...ops._linalg_common import _divide_or_zero, _expand, _mT
from ...ops.linalg_complex import (
    _TENSORS,
    _eig_shapes,
    _qr_shapes,
    _svd_shapes,
    imag_part,
    real_part,
)
from ...ops.linalg_eigh import _eigh_parts
from ...ops.linalg_lu import _inv
from ...ops.linalg_qr import _qr_parts
from ...ops.linalg_svd import _svd_parts
from ...ops.linalg_sylvester import _tensors_h
from ...ops.reduction import expand_reduced
from ...ops.registry import call
from ...ops.shape import concatenate
from . import batch_shape, in_columns, jvp_rule, shifted

# -- helpers -----------------------------------------------------------------------------------


def _h(x):
    """Conjugate transposes of the matrices of ``x`` (transposes where real)."""
    return _tensors_h(x)


def _is_complex(*xs):
    return any(x is not None and np.dtype(x.dtype).kind == "c" for x in xs)


def _as_complex(x, like):
    """``x`` in the complex dtype of ``like`` (a real tangent of a complex computation)."""
    if _is_complex(x) or not _is_complex(like):
        return x
    return call("astype", x, dtype=np.dtype(like.dtype))


def _solve(a, b):
    """``A^-1 B`` for square ``a`` and matrices ``b`` (complex or real; ``b`` may carry a
    batch of tangents in front)."""
    if _is_complex(a, b):
        a = _as_complex(a, b)
        return in_columns(lambda rhs: call("_csolve", a, _as_complex(rhs, a)), b, a.ndim)
    lu = call("_lu", a)
    return in_columns(lambda rhs: call("_lu_solve", a, lu, rhs), b, a.ndim)


def _inverse(a):
    return _TENSORS.solve(a, _eye(a)) if _is_complex(a) else _inv(a)


def _eye(a):
    return np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), tuple(a.shape))


def _diagonal(x):
    """The diagonals of the matrices of ``x``, shape (..., n)."""
    return call("sum", x * np.eye(x.shape[-1], dtype=_real_dtype(x)), axis=-1)


def _diag_embed(v):
    return _expand(v, -2) * np.eye(v.shape[-1], dtype=_real_dtype(v))


def _real_dtype(x):
    return np.empty(0, dtype=x.dtype).real.dtype


def _hermitian_part(t):
    return (t + _h(t)) * 0.5


def _trace(x):
    return call("sum", x * np.eye(x.shape[-1], dtype=_real_dtype(x)), axis=(-2, -1))


def _flat(x, batch):
    return call("reshape", x, shape=tuple(batch) + (-1,))


def _packed(batch, *parts, dtype=None):
    """``parts`` flattened along one last axis, as the ops pack their outputs."""
    flat = [_flat(x, batch) for x in parts]
    if dtype is not None:
        flat = [x if np.dtype(x.dtype) == dtype else call("astype", x, dtype=dtype)
                for x in flat]
    return concatenate(flat, axis=-1)


def _packed_batch(tangents, primals, output):
    """The dimensions in front of a packed output's last axis, the tangents' batch's first."""
    return batch_shape(tangents, primals) + tuple(output.shape[:-1])


def _column(x):
    return call("reshape", x, shape=tuple(x.shape) + (1,))


def _uncolumn(x):
    return call("reshape", x, shape=tuple(x.shape[:-1]))


# -- solve, inv, det, slogdet -----------------------------------------------------------------


@jvp_rule("_lu")
def _lu_jvp(tangents, primals, output, attrs):
    # The factors are not differentiable: the ops that read them (``_lu_solve``, ``_det``,
    # ``_slogdet``) take ``a`` itself as an input and differentiate in it.
    return None


@jvp_rule("_slogdet_sign")
def _slogdet_sign_jvp(tangents, primals, output, attrs):
    # Piecewise constant (and read from the factors, which carry no tangent).
    return None


@jvp_rule("_lu_solve")
def _lu_solve_jvp(tangents, primals, output, attrs):
    da, _, db = tangents
    a, lu, b = primals
    if da is None and db is None:
        return None
    transpose = attrs["transpose"]
    vector = output.ndim == lu.ndim - 1
    x = _column(output) if vector else output
    rhs = None if db is None else (_column(db) if vector else db)
    if da is not None:
        product = (_mT(da) if transpose else da) @ x
        rhs = -product if rhs is None else rhs - product
    if batch_shape(tangents, primals):  # (a column even for a vector: moved into columns)
        dx = in_columns(lambda r: call("_lu_solve", a, lu, r, transpose=transpose), rhs,
                         lu.ndim)
        return _uncolumn(dx) if vector else dx
    return call("_lu_solve", a, lu, _uncolumn(rhs) if vector else rhs, transpose=transpose)


@jvp_rule("_slogdet")
def _slogdet_jvp(tangents, primals, output, attrs):
    da = tangents[0]
    if da is None:
        return None
    a, lu = primals
    return _trace(in_columns(lambda r: call("_lu_solve", a, lu, r), da, lu.ndim))


@jvp_rule("_det")
def _det_jvp(tangents, primals, output, attrs):
    # d det(A) = det(A) tr(A^-1 dA): det times the tangent of log|det|
    dlogdet = _slogdet_jvp(tangents, primals, output, attrs)
    return None if dlogdet is None else output * dlogdet


@jvp_rule("_csolve")
def _csolve_jvp(tangents, primals, output, attrs):
    da, db = tangents
    if da is None and db is None:
        return None
    a = primals[0]
    rhs = None if db is None else _as_complex(db, output)
    if da is not None:
        product = _as_complex(da, output) @ output
        rhs = -product if rhs is None else rhs - product
    if not batch_shape(tangents, primals):
        return call("_csolve", a, rhs)
    vector = output.ndim == a.ndim - 1
    dx = in_columns(lambda r: call("_csolve", a, r), _column(rhs) if vector else rhs, a.ndim)
    return _uncolumn(dx) if vector else dx


@jvp_rule("_clogdet")
def _clogdet_jvp(tangents, primals, output, attrs):
    da = tangents[0]
    if da is None:
        return None
    return _trace(_solve(primals[0], _as_complex(da, output)))


# -- cholesky ---------------------------------------------------------------------------------


def _cholesky_tangent(lower, da):
    """``dL = L Phi(L^-1 dA L^-H)``, ``Phi`` the lower triangle with the diagonal halved, for
    the Hermitian part of ``dA``."""
    da = _hermitian_part(_as_complex(da, lower))
    n = lower.shape[-1]
    inverse = _inverse(lower)
    x = inverse @ da @ _h(inverse)
    phi = np.tril(np.ones((n, n))) - 0.5 * np.eye(n)
    return lower @ (x * phi.astype(_real_dtype(lower)))


@jvp_rule("_cholesky", "_ccholesky")
def _cholesky_jvp(tangents, primals, output, attrs):
    da = tangents[0]
    return None if da is None else _cholesky_tangent(output, da)


# -- eigh, eig --------------------------------------------------------------------------------


def _eigh_tangents(w, v, da):
    """``(dw, dV)``: ``dw = diag(V^H dA V)``, ``dV = V (P / (w_j - w_i))`` off the diagonal
    (0 on it and where two eigenvalues are equal), for the Hermitian part of ``dA``."""
    da = _hermitian_part(_as_complex(da, v))
    p = _h(v) @ da @ v
    dw = _diagonal(p)
    if _is_complex(dw):
        dw = real_part(dw)
    gaps = _expand(w, -2) - _expand(w, -1)  # [i, j]: w_j - w_i
    return dw, v @ _divide_or_zero(p, gaps)


@jvp_rule("_eigh")
def _eigh_jvp(tangents, primals, output, attrs):
    da = tangents[0]
    if da is None:
        return None
    w, v = _eigh_parts(output)
    dw, dv = _eigh_tangents(w, v, da)
    return concatenate([_expand(dw, -2), dv], axis=-2)


@jvp_rule("_ceigh")
def _ceigh_jvp(tangents, primals, output, attrs):
    da = tangents[0]
    if da is None:
        return None
    w, v = _TENSORS.parts(output, _eig_shapes(output.shape[-1]))
    dw, dv = _eigh_tangents(real_part(w), v, da)
    return _packed(_packed_batch(tangents, primals, output), dw, dv, dtype=np.dtype(output.dtype))


@jvp_rule("_eig")
def _eig_jvp(tangents, primals, output, attrs):
    # torch's linalg_eig_jvp: dP = V^-1 dA V, dw = diag(dP), dV = V (dP / (w_j - w_i)) off
    # the diagonal, then the unit norm of each column kept: dV -= V re(diag(V^H dV)).
    da = tangents[0]
    if da is None:
        return None
    w, v = _TENSORS.parts(output, _eig_shapes(output.shape[-1]))
    p = _solve(v, _as_complex(da, v) @ v)
    dw = _diagonal(p)
    gaps = _expand(w, -2) - _expand(w, -1)
    dv = v @ _divide_or_zero(p, gaps)
    dv = dv - v * _expand(real_part(_diagonal(_h(v) @ dv)), -2)
    return _packed(_packed_batch(tangents, primals, output), dw, dv)


# -- svd --------------------------------------------------------------------------------------


def _svd_tangents(u, s, vh, da):
    """``(dU, dS, dVh)`` of the reduced SVD ``A = U diag(S) Vh``: with ``P = U^H dA V`` and
    ``E[i, j] = s_j^2 - s_i^2``, ``dS = re(diag(P))``, ``U^H dU = (P S + S P^H) / E`` (plus
    ``i im(P_ii) / s_i`` on the diagonal), ``V^H dV = (S P + P^H S) / E``, and the parts
    outside the factors' column spaces ``(I - U U^H) dA V / S``, ``(I - V V^H) dA^H U / S``."""
    da = _as_complex(da, u)
    m, n = u.shape[-2], vh.shape[-1]
    k = s.shape[-1]
    v = _h(vh)
    p = _h(u) @ da @ v
    ds = _diagonal(p)
    if _is_complex(ds):
        ds = real_part(ds)
    row, column = _expand(s, -2), _expand(s, -1)
    squares = s * s
    gaps = _expand(squares, -2) - _expand(squares, -1)
    ph = _h(p)
    omega_u = _divide_or_zero(p * row + column * ph, gaps)
    omega_v = _divide_or_zero(column * p + ph * row, gaps)
    if _is_complex(p):  # the phase of each pair of vectors: carried by U's
        phase = imag_part(_diagonal(p)) / s
        omega_u = omega_u + _diag_embed(phase) * 1j
    du = u @ omega_u
    dv = v @ omega_v
    inverse = _divide_or_zero(np.ones((), dtype=_real_dtype(s)), s)
    if m > k:
        outside = da @ (v * _expand(inverse, -2))
        du = du + outside - u @ (_h(u) @ outside)
    if n > k:
        outside = _h(da) @ (u * _expand(inverse, -2))
        dv = dv + outside - v @ (vh @ outside)
    return du, ds, _h(dv)


@jvp_rule("_svd")
def _svd_jvp(tangents, primals, output, attrs):
    da = tangents[0]
    if da is None:
        return None
    m, n = attrs["matrix"]
    if attrs["full_matrices"] and m != n:
        raise RuntimeError(
            "linalg.svd: full_matrices=True has no derivative for a matrix that is not square "
            f"({m} x {n}): the extra columns of U or rows of Vh are not unique. Pass "
            "full_matrices=False"
        )
    u, s, vh = _svd_parts(output, m, n, False)
    du, ds, dvh = _svd_tangents(u, s, vh, da)
    return _packed(_packed_batch(tangents, primals, output), du, ds, dvh)


@jvp_rule("_csvd")
def _csvd_jvp(tangents, primals, output, attrs):
    da = tangents[0]
    if da is None:
        return None
    u, s, vh = _TENSORS.parts(output, _svd_shapes(attrs["m"], attrs["n"]))
    du, ds, dvh = _svd_tangents(u, real_part(s), vh, da)
    return _packed(_packed_batch(tangents, primals, output), du, ds, dvh,
                   dtype=np.dtype(output.dtype))


# -- qr ---------------------------------------------------------------------------------------


def _qr_square_tangents(q, r, da):
    """``(dQ, dR)`` of ``A = Q R`` with ``m >= n``: ``C = Q^H dA R^-1`` is ``Q^H dQ`` (skew-
    Hermitian) plus ``dR R^-1`` (upper, with a real diagonal), which splits it."""
    da_rinv = _h(_solve(_h(r), _h(da)))
    c = _h(q) @ da_rinv
    k = c.shape[-1]
    strict = np.tril(np.ones((k, k), dtype=_real_dtype(c)), -1)
    lower = c * strict
    omega = lower - _h(lower)
    if _is_complex(c):
        omega = omega + _diag_embed(imag_part(_diagonal(c))) * 1j
    upper = c - omega
    return da_rinv - q @ upper, upper @ r


def _qr_tangents(q, r, da, m, n):
    da = _as_complex(da, q)
    if m >= n:
        return _qr_square_tangents(q, r, da)
    # the wide case, as torch's: A = [X | Y], R = [U | V], X = Q U, V = Q^H Y
    dx = call("getitem", da, index=(Ellipsis, slice(None), slice(None, m)))
    dy = call("getitem", da, index=(Ellipsis, slice(None), slice(m, None)))
    u = call("getitem", r, index=(Ellipsis, slice(None), slice(None, m)))
    rest = call("getitem", r, index=(Ellipsis, slice(None), slice(m, None)))
    dq, du = _qr_square_tangents(q, u, dx)
    y = q @ rest
    dv = _h(dq) @ y + _h(q) @ dy
    return dq, concatenate([du, dv], axis=-1)


@jvp_rule("_qr")
def _qr_jvp(tangents, primals, output, attrs):
    da = tangents[0]
    if da is None:
        return None
    m, n = primals[0].shape[-2:]
    q, r = _qr_parts(output, m, n)
    dq, dr = _qr_tangents(q, r, da, m, n)
    return _packed(_packed_batch(tangents, primals, output), dq, dr)


@jvp_rule("_cqr")
def _cqr_jvp(tangents, primals, output, attrs):
    da = tangents[0]
    if da is None:
        return None
    m, n = attrs["m"], attrs["n"]
    q, r = _TENSORS.parts(output, _qr_shapes(m, n))
    dq, dr = _qr_tangents(q, r, da, m, n)
    return _packed(_packed_batch(tangents, primals, output), dq, dr)


# -- pinv, norms ------------------------------------------------------------------------------


@jvp_rule("_pinv", "_cpinv")
def _pinv_jvp(tangents, primals, output, attrs):
    # Golub and Pereyra, at constant rank (H: the conjugate transpose; T where real):
    # dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P
    da = tangents[0]
    if da is None:
        return None
    (a,) = primals
    p = output
    pt, dat = _h(p), _h(da)
    total = -(p @ da @ p)
    total = total + (p @ pt) @ (dat - (dat @ a) @ p)
    return total + (dat - p @ (a @ dat)) @ (pt @ p)


@jvp_rule("_norm2")
def _norm2_jvp(tangents, primals, output, attrs):
    # d||x|| = <x, dx> / ||x||, 0 at 0 (the VJP's subgradient)
    dx = tangents[0]
    if dx is None:
        return None
    x = primals[0]
    scaled = _divide_or_zero(x, expand_reduced(output, attrs))
    axes = shifted(tuple(attrs["axes"]), batch_shape(tangents, primals))
    return call("sum", scaled * dx, axis=axes, keepdims=attrs["keepdims"])


# -- solve_sylvester, sqrtm -------------------------------------------------------------------


@jvp_rule("_solve_sylvester", batched=False)
def _solve_sylvester_jvp(tangents, primals, output, attrs):
    # A X + X B = Q: A dX + dX B = dQ - dA X - X dB
    da, db, dq = tangents
    if da is None and db is None and dq is None:
        return None
    a, b, _ = primals
    x = output
    rhs = None if dq is None else _as_complex(dq, x)
    for term in (None if da is None else _as_complex(da, x) @ x,
                 None if db is None else x @ _as_complex(db, x)):
        if term is not None:
            rhs = -term if rhs is None else rhs - term
    return call("_solve_sylvester", a, b, rhs)


@jvp_rule("_sqrtm", batched=False)
def _sqrtm_jvp(tangents, primals, output, attrs):
    # S dS + dS S = dA
    da = tangents[0]
    if da is None:
        return None
    return call("_solve_sylvester", output, output, _as_complex(da, output))
