"""``anb.linalg`` on complex matrices: the ops that ``solve``, ``inv``, ``det``, ``slogdet``,
``cholesky``, ``eigh``, ``svd``, ``qr`` and the norms run where an operand is complex, and
``eig``/``eigvals``, complex for real matrices too (as ``torch.linalg.eig``).

The compiled LAPACK paths of the other ``linalg_*`` modules are real-only. These ops run
NumPy's LAPACK (``numpy.linalg``, its ``z``/``c`` routines) forward and backward in both
tiers, so tier 0 gives the same bits; they have no drivers, so their backward runs in the
Python walk and a program of :func:`autograd_nb.compile` calling them runs eagerly. New numba
kernels for complex LAPACK would add compile time that these ops do not earn.

Gradients are torch's (``FunctionsManual.cpp``) in its convention (:doc:`/complex`): the real
formulas with conjugate transposes. Each VJP is written once, over a small namespace of array
functions (``_NUMPY`` for the VJP on arrays, ``_TENSORS`` for the differentiable rule, which
records autograd_nb ops, ``_csolve`` among them), so both differentiate alike, to any order.

- ``_csolve(a, b)``: ``X = A^-1 B``; ``gB = A^-H G``, ``gA = -gB X^H``.
- ``_clogdet(a)``: the complex ``log det A`` (holomorphic); ``gA = g A^-H``. ``det`` is its
  ``exp`` and ``slogdet`` its real part and ``exp(i imag)``, so their gradients follow.
- ``_ccholesky(a)``, ``_ceigh(a)``, ``_csvd(a)``, ``_cqr(a)``, ``_eig(a)``: their outputs
  packed flat along one last axis (``_parts`` takes them apart), one VJP seeing the gradients
  of all of them.

Eigenvectors and singular vectors of complex matrices are unique only up to a phase per
vector: as torch's, the backward of ``eigh``, ``eig`` and ``svd`` raises RuntimeError where
the loss depends on that phase.
"""

import collections

import numpy as np

from ._linalg_common import (
    LinalgOp,
    _accumulating,
    _check_matrix,
    _check_square,
    _dtype_of,
    _expand,
)
from .linalg import _shape_of, _size
from .linalg_sylvester import _matrices_h, _tensors_h
from .registry import call, public
from .shape import concatenate

_PHASE = ("{name}: The {what} in the complex case are specified up to multiplication by "
          "e^{{i phi}}. The specified loss function depends on this phase term, making it "
          "ill-defined.")


def complex_dtype(*dtypes):
    """The complex dtype of ``linalg`` on operands of ``dtypes``: complex64 where every one is
    complex64 or float32 (NumPy's rule), else complex128."""
    dtype = np.result_type(*dtypes)
    return dtype if dtype == np.complex64 else np.dtype(np.complex128)


class _Arrays:
    """The array functions of the VJPs, on NumPy arrays."""

    h = staticmethod(_matrices_h)
    real = staticmethod(np.real)
    imag = staticmethod(np.imag)
    conj = staticmethod(np.conj)
    tril = staticmethod(np.tril)
    triu = staticmethod(np.triu)

    @staticmethod
    def solve(a, b):
        return np.linalg.solve(a, b)

    @staticmethod
    def diagonal(x):
        return np.diagonal(x, axis1=-2, axis2=-1)

    @staticmethod
    def row(v):
        return v[..., None, :]

    @staticmethod
    def column(v):
        return v[..., :, None]

    @staticmethod
    def scalars(v, batch):
        return np.reshape(v, batch + (1, 1))

    @staticmethod
    def parts(packed, shapes):
        batch, start, out = packed.shape[:-1], 0, []
        for shape in shapes:
            size = _size(shape)
            out.append(packed[..., start:start + size].reshape(batch + shape))
            start += size
        return out


class _Tensors:
    """The same functions recorded as autograd_nb ops (the differentiable rules)."""

    h = staticmethod(_tensors_h)

    @staticmethod
    def real(x):
        return real_part(x) if x.dtype.kind == "c" else x

    @staticmethod
    def imag(x):
        return imag_part(x)

    @staticmethod
    def conj(x):
        return call("_conj", x) if x.dtype.kind == "c" else x

    @staticmethod
    def tril(x, k=0):
        return x * np.tril(np.ones(x.shape[-2:]), k)

    @staticmethod
    def triu(x, k=0):
        return x * np.triu(np.ones(x.shape[-2:]), k)

    @staticmethod
    def solve(a, b):
        return call("_csolve", a, b)

    @staticmethod
    def diagonal(x):
        return call("sum", x * np.eye(x.shape[-1]), axis=-1)

    @staticmethod
    def row(v):
        return _expand(v, -2)

    @staticmethod
    def column(v):
        return _expand(v, -1)

    @staticmethod
    def scalars(v, batch):
        return call("reshape", v, shape=batch + (1, 1))

    @staticmethod
    def parts(packed, shapes):
        batch, start, out = tuple(packed.shape[:-1]), 0, []
        for shape in shapes:
            size = _size(shape)
            part = call("getitem", packed, index=(Ellipsis, slice(start, start + size)))
            out.append(call("reshape", part, shape=batch + shape))
            start += size
        return out


_NUMPY, _TENSORS = _Arrays(), _Tensors()


def real_part(x):
    """``real(x)`` of a complex Tensor, recorded."""
    return call("_real", x)


def imag_part(x):
    """``imag(x)`` of a complex Tensor, recorded."""
    return call("_imag", x)


def _diag_embed(xp, v):
    return xp.row(v) * np.eye(v.shape[-1])


def _over_gaps(x, gaps):
    """``x / gaps`` off the diagonal, 0 on it and where two values are exactly equal, as the
    real ``eigh``/``svd`` take it (right for the values and for projectors onto a repeated
    value's subspace; other functions of the vectors have no gradient there)."""
    zero = np.asarray(gaps) == 0  # a constant mask (the diagonal among them)
    return x / (gaps + zero) * ~zero


def _check_phase(name, what, imag_parts):
    """torch's check: the phase-dependent part of the gradient (``imag_parts``) must vanish,
    up to its lax tolerance (1e-2), or the loss is ill-defined."""
    if not np.allclose(imag_parts, 0.0, rtol=1e-2, atol=1e-2):
        raise RuntimeError(_PHASE.format(name=name, what=what))


def _add(grad_input, value):
    """Add ``value`` into ``grad_input`` (its real part where ``grad_input`` is real: the
    real input of an op with a complex result, torch's ``handle_r_to_c``)."""
    if grad_input.dtype.kind != "c":
        value = np.real(value)
    target, done = _accumulating(grad_input, grad_input.shape, grad_input.dtype)
    target += value
    done()


def _complex_arrays(values):
    dtype = complex_dtype(*[np.asarray(v).dtype for v in values])
    return [np.ascontiguousarray(v, dtype=dtype) for v in values]


class ComplexLinalgOp(LinalgOp):
    """Base of this module's ops: NumPy's LAPACK in both tiers (``forward`` is the twin),
    one VJP formula ``gradient(xp, k, grad_output, inputs, output, attrs)`` for both the VJP
    on arrays (``xp = _NUMPY``) and the rule (``_TENSORS``)."""

    saves = (0,)
    saves_output = True

    def forward_numpy(self, arrays, attrs):
        return self.forward(arrays, attrs)

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        inputs = [None] * self.n_inputs
        for position, i in enumerate(self.saves):
            inputs[i] = saved[position]
        g = np.asarray(grad_output, dtype=saved.output.dtype)
        value = self.gradient(_NUMPY, k, g, inputs, saved.output, attrs)
        _add(grad_input, value)

    def vjp_numpy(self, k, grad_output, saved, attrs, grad_input):
        self.vjp(k, grad_output, saved, attrs, grad_input)

    def rule(self, k, grad_output, inputs, output, attrs):
        return self.gradient(_TENSORS, k, grad_output, inputs, output, attrs)


class ComplexSolve(ComplexLinalgOp):
    """``_csolve(a, b)``: ``A^-1 B`` for ``a (..., m, m)``, ``b (..., m, k)`` of one batch
    shape."""

    name = "_csolve"
    n_inputs = 2
    saves = (0,)

    def prepare(self, values, attrs):
        a, b = _complex_arrays(values)
        _check_square("linalg.solve", a.shape)
        if b.ndim < 2 or b.shape[:-1] != a.shape[:-1]:
            raise ValueError(f"_csolve: b must have shape {a.shape[:-1]} + (k,); got "
                             f"{b.shape}")
        return [a, b], {}

    def forward(self, arrays, attrs):
        a, b = arrays
        return np.ascontiguousarray(np.linalg.solve(a, b))

    def gradient(self, xp, k, g, inputs, x, attrs):
        grad_b = xp.solve(xp.h(inputs[0]), g)
        return grad_b if k == 1 else -(grad_b @ xp.h(x))


ComplexSolve()


class ComplexLogDet(ComplexLinalgOp):
    """``_clogdet(a)``: ``log det A`` (complex: ``log|det A| + i arg det A``)."""

    name = "_clogdet"

    def prepare(self, values, attrs):
        (a,) = _complex_arrays(values)
        _check_square("linalg.det", a.shape)
        return [a], {}

    def forward(self, arrays, attrs):
        sign, logabsdet = np.linalg.slogdet(arrays[0])
        return np.asarray(logabsdet + 1j * np.angle(sign), dtype=arrays[0].dtype)

    def gradient(self, xp, k, g, inputs, output, attrs):
        a = inputs[0]
        inverse = xp.solve(a, np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape))
        return xp.scalars(g, tuple(a.shape[:-2])) * xp.h(inverse)


ComplexLogDet()


class ComplexCholesky(ComplexLinalgOp):
    """``_ccholesky(a)``: the lower factor ``L`` of Hermitian positive-definite ``a``
    (``a = L L^H``; the lower triangle is read)."""

    name = "_ccholesky"
    saves = ()

    def prepare(self, values, attrs):
        (a,) = _complex_arrays(values)
        _check_square("linalg.cholesky", a.shape)
        return [a], {}

    def forward(self, arrays, attrs):
        return np.ascontiguousarray(np.linalg.cholesky(arrays[0]))

    def gradient(self, xp, k, g, inputs, lower, attrs):
        # torch's cholesky_backward: L^-H Phi(L^H gL) L^-1, Phi the lower triangle with the
        # diagonal halved, made Hermitian
        inner = xp.tril(xp.h(lower) @ g)
        inner = 0.5 * (inner + xp.h(xp.tril(inner, -1)))
        left = xp.solve(xp.h(lower), inner)
        return xp.h(xp.solve(xp.h(lower), xp.h(left)))


ComplexCholesky()


def _eig_gradient(xp, w, v, gw, gv, hermitian, check):
    """torch's ``linalg_eig_backward``: ``V^-H (diag(gw) + (V^H gV - proj) / conj(E)) V^H``,
    ``E[i, j] = w_j - w_i``; for Hermitian ``a``, ``V^-H = V`` and the projection is onto the
    skew-Hermitian matrices."""
    vh = xp.h(v)
    vhgv = vh @ gv
    if check:
        _check_phase("linalg_eigh_backward" if hermitian else "linalg_eig_backward",
                     "eigenvectors", np.imag(np.diagonal(vhgv, axis1=-2, axis2=-1)))
    if hermitian:
        vhgv = 0.5 * (vhgv - xp.h(vhgv))
    else:
        vhgv = vhgv - vh @ (v * xp.row(xp.real(xp.diagonal(vhgv))))
    wc = xp.conj(w)
    inner = _over_gaps(vhgv, xp.row(wc) - xp.column(wc)) + _diag_embed(xp, gw)
    if hermitian:
        return v @ inner @ vh
    return xp.solve(vh, inner @ vh)


class ComplexEigh(ComplexLinalgOp):
    """``_ceigh(a, upper=False)``: ``(..., n + n * n)``, the (real) eigenvalues of Hermitian
    ``a`` then its eigenvectors (columns), flattened."""

    name = "_ceigh"
    saves = ()

    def prepare(self, values, attrs):
        (a,) = _complex_arrays(values)
        _check_square("linalg.eigh", a.shape)
        return [a], {"upper": bool(attrs.get("upper", False))}

    def forward(self, arrays, attrs):
        (a,) = arrays
        w, v = np.linalg.eigh(a, "U" if attrs["upper"] else "L")
        return _pack(a.dtype, a.shape[:-2], w, v)

    def gradient(self, xp, k, g, inputs, packed, attrs):
        shapes = _eig_shapes(packed.shape[-1])
        w, v = xp.parts(packed, shapes)
        gw, gv = xp.parts(g, shapes)
        return _eig_gradient(xp, xp.real(w), v, xp.real(gw), gv, True, xp is _NUMPY)


ComplexEigh()


class Eig(ComplexLinalgOp):
    """``_eig(a)``: ``(..., n + n * n)``, the eigenvalues of ``a`` (complex, for real ``a``
    too) then its eigenvectors (unit columns), flattened."""

    name = "_eig"
    saves = ()

    def prepare(self, values, attrs):
        (a,) = values
        a = np.asarray(a)
        if a.dtype.kind != "c":
            dtype = np.float32 if a.dtype == np.float32 else np.float64
            a = np.ascontiguousarray(a, dtype=dtype)
        else:
            (a,) = _complex_arrays([a])
        _check_square("linalg.eig", a.shape)
        return [a], {}

    def forward(self, arrays, attrs):
        (a,) = arrays
        w, v = np.linalg.eig(a)
        return _pack(complex_dtype(a.dtype, np.complex64), a.shape[:-2], w, v)

    def gradient(self, xp, k, g, inputs, packed, attrs):
        shapes = _eig_shapes(packed.shape[-1])
        w, v = xp.parts(packed, shapes)
        gw, gv = xp.parts(g, shapes)
        return _eig_gradient(xp, w, v, gw, gv, False, xp is _NUMPY)


Eig()


def _pack(dtype, batch, *arrays):
    flat = [x.reshape(batch + (-1,)) for x in arrays]
    return np.ascontiguousarray(np.concatenate(flat, axis=-1), dtype=dtype)


def _eig_shapes(size):
    n = int(round((-1 + (1 + 4 * size) ** 0.5) / 2))  # size = n + n * n
    return [(n,), (n, n)]


def _svd_shapes(m, n):
    k = min(m, n)
    return [(m, k), (k,), (k, n)]


class ComplexSvd(ComplexLinalgOp):
    """``_csvd(a)``: ``U (m, k)``, ``S (k)``, ``Vh (k, n)`` (the reduced SVD), flattened."""

    name = "_csvd"
    saves = ()

    def prepare(self, values, attrs):
        (a,) = _complex_arrays(values)
        _check_matrix("linalg.svd", a.shape)
        return [a], {"m": a.shape[-2], "n": a.shape[-1]}

    def forward(self, arrays, attrs):
        (a,) = arrays
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        return _pack(a.dtype, a.shape[:-2], u, s, vh)

    def gradient(self, xp, k, g, inputs, packed, attrs):
        m, n = attrs["m"], attrs["n"]
        u, s, vh = xp.parts(packed, _svd_shapes(m, n))
        gu, gs, gvh = xp.parts(g, _svd_shapes(m, n))
        return _svd_gradient(xp, u, xp.real(s), vh, gu, xp.real(gs), gvh, xp is _NUMPY)


ComplexSvd()


def _svd_gradient(xp, u, s, vh, gu, gs, gvh, check):
    """torch's ``svd_backward`` (reduced SVD, distinct nonzero singular values)."""
    m, n = u.shape[-2], vh.shape[-1]
    uhgu = xp.h(u) @ gu
    uhgu = uhgu - xp.h(uhgu)
    vhgv = vh @ xp.h(gvh)
    vhgv = vhgv - xp.h(vhgv)
    if check:
        imag_u = np.imag(np.diagonal(uhgu, axis1=-2, axis2=-1))
        imag_v = np.imag(np.diagonal(vhgv, axis1=-2, axis2=-1))
        _check_phase("svd_backward", "singular vectors", imag_u + imag_v)
    squares = s * s
    inner = _over_gaps(uhgu * xp.row(s) + xp.column(s) * vhgv,
                       xp.row(squares) - xp.column(squares))
    inner = inner + _diag_embed(xp, gs) + _diag_embed(xp, xp.imag(xp.diagonal(uhgu)) / s) * 0.5j
    if m > n:
        gus = gu / xp.row(s)
        return (u @ inner + gus - u @ (xp.h(u) @ gus)) @ vh
    if m < n:
        sgvh = gvh / xp.column(s)
        return u @ (inner @ vh + sgvh - (sgvh @ xp.h(vh)) @ vh)
    return u @ inner @ vh


def _qr_shapes(m, n):
    k = min(m, n)
    return [(m, k), (k, n)]


class ComplexQr(ComplexLinalgOp):
    """``_cqr(a)``: ``Q (m, k)``, ``R (k, n)`` (reduced), flattened."""

    name = "_cqr"
    saves = ()

    def prepare(self, values, attrs):
        (a,) = _complex_arrays(values)
        _check_matrix("linalg.qr", a.shape)
        return [a], {"m": a.shape[-2], "n": a.shape[-1]}

    def forward(self, arrays, attrs):
        (a,) = arrays
        q, r = np.linalg.qr(a)
        return _pack(a.dtype, a.shape[:-2], q, r)

    def gradient(self, xp, k, g, inputs, packed, attrs):
        m, n = attrs["m"], attrs["n"]
        q, r = xp.parts(packed, _qr_shapes(m, n))
        gq, gr = xp.parts(g, _qr_shapes(m, n))
        if m >= n:
            return _qr_gradient(xp, q, r, gq, gr)
        # torch's wide case: a = [X | Y], r = [U | V], X = Q U
        rx, ry = (call("getitem", r, index=(Ellipsis, slice(None), part)) if xp is _TENSORS
                  else r[..., :, part] for part in (slice(None, m), slice(m, None)))
        gx, gy = (call("getitem", gr, index=(Ellipsis, slice(None), part)) if xp is _TENSORS
                  else gr[..., :, part] for part in (slice(None, m), slice(m, None)))
        a_y = q @ ry
        grad_x = _qr_gradient(xp, q, rx, gq + a_y @ xp.h(gy), gx)
        grad_y = q @ gy
        if xp is _TENSORS:
            return concatenate([grad_x, grad_y], axis=-1)
        return np.concatenate([grad_x, grad_y], axis=-1)


ComplexQr()


def _qr_gradient(xp, q, r, gq, gr):
    """torch's ``linalg_qr_backward`` for ``m >= n``: ``(gQ + Q syminvadj(triu(gR R^H -
    Q^H gQ))) R^-H``, ``syminvadj(X) = X + X^H`` with its diagonal's real part halved."""
    upper = xp.triu(gr @ xp.h(r) - xp.h(q) @ gq)
    sym = upper + xp.h(upper) - _diag_embed(xp, xp.real(xp.diagonal(upper)))
    b = gq + q @ sym
    return xp.h(xp.solve(r, xp.h(b)))


# -- what the public functions of the other modules call on complex operands ------------------


def complex_eigh_parts(packed):
    """``(w, V)`` of ``_ceigh``'s packed result, ``w`` real."""
    w, v = _TENSORS.parts(packed, _eig_shapes(packed.shape[-1]))
    return real_part(w), v


def complex_svd(a, full):
    """``(U, S, Vh)`` of a complex Tensor ``a`` (reduced; full where ``full``, which has no
    gradient)."""
    m, n = a.shape[-2:]
    packed = call("_csvd", a)
    if full:  # the extra columns are not unique: no gradient, as the real svd's
        if packed.requires_grad:  # (recorded: grad mode is on and ``a`` requires grad)
            raise ValueError(
                "linalg.svd: full_matrices=True has no gradient for a matrix that is not "
                f"square ({m} x {n}): the extra columns of U or rows of Vh are not unique. "
                "Pass full_matrices=False"
            )
        return tuple(_constant(x) for x in np.linalg.svd(np.asarray(a), full_matrices=True))
    u, s, vh = _TENSORS.parts(packed, _svd_shapes(m, n))
    return u, real_part(s), vh


def complex_qr(a, complete):
    """``(Q, R)`` of a complex Tensor ``a`` (reduced; complete where ``complete``, which for
    ``m > n`` has no gradient)."""
    m, n = a.shape[-2:]
    packed = call("_cqr", a)
    if complete and m > n:
        if packed.requires_grad:
            raise ValueError(
                "linalg.qr: mode='complete' has no gradient for a matrix with more rows than "
                f"columns ({m} x {n}): Q's extra columns are not unique. Use mode='reduced', "
                "or detach a"
            )
        return tuple(_constant(x) for x in np.linalg.qr(np.asarray(a), "complete"))
    return tuple(_TENSORS.parts(packed, _qr_shapes(m, n)))


def _constant(array):
    array = np.ascontiguousarray(array)
    return call("astype", array, dtype=array.dtype)


# -- the public functions ---------------------------------------------------------------------


EigResult = collections.namedtuple("EigResult", ["eigenvalues", "eigenvectors"])


def _eig_operand(name, a):
    if getattr(a, "device", "cpu") != "cpu":
        raise NotImplementedError(
            f"{name} is not implemented for CUDA tensors (yet); move its operand to the CPU "
            "with .cpu()"
        )
    dtype = _dtype_of(a)
    if dtype.kind not in "fcbiu" or dtype == np.float16:
        raise TypeError(f"{name}: unsupported dtype {dtype} (supported: float32, float64, "
                        "complex64, complex128, and integers, which become float64)")
    shape = _shape_of(a)
    _check_square(name, shape)
    return a


@public("linalg.eig", method=False, family="linalg")
def eig(a):
    """Eigenvalues and right eigenvectors of square matrices, as ``numpy.linalg.eig`` and
    ``torch.linalg.eig``: complex for real ``a`` too.

    Parameters
    ----------
    a : Tensor or array_like, shape (..., M, M)

    Returns
    -------
    EigResult
        ``(eigenvalues, eigenvectors)``: complex Tensors of shapes (..., M) and (..., M, M),
        the eigenvectors in columns of norm 1 (LAPACK's ``geev``, through NumPy). Unlike
        NumPy, whose result is real where every eigenvalue is real, the dtype is always
        complex (complex64 for float32 or complex64 ``a``, else complex128), as torch's.

    Notes
    -----
    The gradient is torch's: ``V^-H (diag(gw) + (V^H gV - V^H V diag(re(V^H gV))) / conj(E))
    V^H`` with ``E[i, j] = w_j - w_i``, its real part for real ``a``. An eigenvector is unique
    only up to a complex phase, so a loss must not depend on it (``abs(V)``, ``w``, ``V
    diag(w) V^-1`` are fine); where it does, the backward raises RuntimeError, as torch's.
    Repeated eigenvalues have no eigenvector gradient.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> a = anb.tensor([[2.0, 0.0], [0.0, 3.0]], requires_grad=True)
    >>> w, v = anb.linalg.eig(a)
    >>> w
    tensor([2.+0.j, 3.+0.j], dtype=complex128, grad_fn=<ReshapeBackward>)
    >>> anb.grad(anb.real(w).sum(), a)
    (tensor([[1., 0.],
            [0., 1.]]),)
    """
    return _eig_result("linalg.eig", a)


def _eig_result(name, a):
    a = _eig_operand(name, a)
    packed = call("_eig", a)
    w, v = _TENSORS.parts(packed, _eig_shapes(packed.shape[-1]))
    return EigResult(w, v)


@public("linalg.eigvals", method=False, family="linalg")
def eigvals(a):
    """The (complex) eigenvalues of square matrices, as ``numpy.linalg.eigvals``; see
    :func:`eig` (they are computed with the eigenvectors, which the gradient needs).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.linalg.eigvals(anb.tensor([[0.0, -1.0], [1.0, 0.0]]))
    tensor([0.+1.j, 0.-1.j], dtype=complex128)
    """
    return _eig_result("linalg.eigvals", a).eigenvalues
