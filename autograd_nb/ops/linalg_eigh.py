"""``anb.linalg.eigh`` and ``eigvalsh``: the ``_eigh`` op, LAPACK's ``?syevd`` called as
NumPy's ``eigh`` calls it (the ``_syevd`` overload, defined here before the kernel that calls
it), its eigenvalues and eigenvectors packed in one result (``_linalg_common`` says why).
"""

import collections

import numpy as np
from numba import njit, types
from numba.extending import overload

from . import _lapack
from . import _lapack_numpy as _twin
from ._blas import release_blas_threads_at
from ._linalg_common import (
    _SET,
    LinAlgError,
    LinalgOp,
    _accumulating,
    _blas_call,
    _check_square,
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
from .linalg import _shape_of, numba_dot
from .linalg_complex import complex_eigh_parts
from .registry import ExecSpec, call, public

EighResult = collections.namedtuple("EighResult", ["eigenvalues", "eigenvectors"])


_UPPER = ord("U")
_LOWER = ord("L")


@njit(cache=True, nogil=True)
def _eigh_forward(a, out, upper):
    """``out[i, 0]``: the eigenvalues (ascending), ``out[i, 1:]``: the eigenvectors (columns)
    of the symmetric ``a[i]``, read from its lower triangle (upper where ``upper``).

    As NumPy's ``eigh``: ``?syevd`` on a column-major copy, told the triangle. (The upper
    triangle of ``a`` is the lower of ``a.T``, but LAPACK reduces the two triangles in
    different orders: other signs, other last bits.)"""
    n = a.shape[2]
    if n == 0:
        return
    uplo = _UPPER if upper else _LOWER
    # Column-major: the transpose of a row-major buffer.
    work = np.empty((n, n), dtype=a.dtype).T
    for i in range(a.shape[0]):
        _check_finite(a[i])
        _lapack.copy_into(work, a[i])
        if _syevd(work, out[i, 0], uplo) != 0:
            raise LinAlgError("Eigenvalues did not converge")
        _lapack.copy_into(out[i, 1:], work)


@njit(cache=True, nogil=True)
def _check_finite(x):
    """Raise where ``x`` holds an inf or nan, in either triangle, as numba's
    ``np.linalg.eigh`` does (NumPy's gives nan, or ignores one in the triangle it does not
    read)."""
    for r in range(x.shape[0]):
        for c in range(x.shape[1]):
            if not np.isfinite(x[r, c]):
                raise LinAlgError("Array must not contain infs or NaNs.")


def _syevd(a, w, uplo):
    """LAPACK's ``?syevd`` on the column-major square ``a``, in place (its eigenvectors), the
    eigenvalues into ``w``; ``uplo`` is ``ord("L")`` or ``ord("U")``. Returns LAPACK's
    ``info``. Compiled code only (an ``overload``)."""
    raise NotImplementedError("_syevd runs in compiled code")


@overload(_syevd)
def _syevd_typed(a, w, uplo):
    # numba's own wrapper, the one its np.linalg.eigh calls: SciPy's LAPACK, with the
    # workspace queried and allocated in C. (Imported as this compiles: numba loads it with
    # its target context, and importing it at import took 0.05 s.)
    from numba.np.linalg import _LAPACK

    routine = _LAPACK().numba_ez_xxxevd(a.dtype)
    kind = ord("d" if a.dtype == types.float64 else "s")
    vectors = ord("V")

    def syevd(a, w, uplo):
        n = a.shape[0]
        return routine(kind, vectors, uplo, n, a.ctypes, n, w.ctypes)

    return syevd


@njit(cache=True, nogil=True)
def _eigh_vjp(g, packed, grad):
    """``grad[i] += V (diag(gw) + F o (V^T gV - gV^T V) / 2) V^T``, ``F[r, c] = 1 / (w_c -
    w_r)``, and 0 where two eigenvalues are equal (see ``linalg.eigh``)."""
    n = packed.shape[2]
    inner = np.empty((n, n), dtype=grad.dtype)
    for i in range(g.shape[0]):
        w = packed[i, 0]
        v = np.ascontiguousarray(packed[i, 1:])
        m = np.dot(v.T, np.ascontiguousarray(g[i, 1:]))
        for r in range(n):
            for c in range(n):
                gap = w[c] - w[r]
                if r == c:
                    inner[r, c] = g[i, 0, r]
                elif gap == 0:
                    inner[r, c] = 0
                else:
                    inner[r, c] = 0.5 * (m[r, c] - m[c, r]) / gap
        _lapack.add_scaled(grad[i], 1.0, np.dot(np.dot(v, inner), v.T))


def _eigh_vjp_numpy(g, packed, grad):
    """``_eigh_vjp``'s NumPy twin: ``0.5 * ...`` in float64 (numba's float literal), stored
    in ``inner``'s dtype."""
    n = packed.shape[2]
    for i in range(g.shape[0]):
        w = packed[i, 0]
        v = np.ascontiguousarray(packed[i, 1:])
        m = numba_dot(v.T, np.ascontiguousarray(g[i, 1:]))
        gap = w[None, :] - w[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            inner = (np.float64(0.5) * (m - m.T) / gap).astype(grad.dtype)
        inner[gap == 0] = 0
        inner[np.diag_indices(n)] = g[i, 0]
        _twin.add_scaled(grad[i], np.float64(1.0), numba_dot(numba_dot(v, inner), v.T))


@njit(cache=True, nogil=True)
def _eigh_forward_driver(operands, ints, floats, like):
    """``_eigh``'s forward in a compiled program (``forward_spec``): ``ints`` is ``[batch,
    n, upper]`` then ``_driver_ints``' tail; operands the matrices, the flag (set where
    ``_eigh_forward`` raises: an inf or nan, or no convergence) and the packed result."""
    batch, n = ints[0], ints[1]
    a = array_at(operands[0], batch * n * n, like).reshape((batch, n, n))
    out = array_at(operands[2], batch * (n + 1) * n, like).reshape((batch, n + 1, n))
    held = _hold(ints, batch * n * n * n)
    failed = False
    try:
        _eigh_forward(a, out, ints[2] != 0)
    except Exception:
        failed = True
    release_blas_threads_at(ints[_SET], held)
    _set_flag(operands[1], failed)


@njit(cache=True, nogil=True)
def _eigh_driver(operands, ints, floats, like):
    """The compiled executor's driver of ``_eigh``'s VJP: ``ints`` as
    ``_eigh_forward_driver``'s; operands the gradient, the packed result and the target."""
    batch, n = ints[0], ints[1]
    g = array_at(operands[0], batch * (n + 1) * n, like).reshape((batch, n + 1, n))
    packed = array_at(operands[1], batch * (n + 1) * n, like).reshape((batch, n + 1, n))
    grad = array_at(operands[2], batch * n * n, like).reshape((batch, n, n))
    held = _hold(ints, batch * n * n * n)
    _eigh_vjp(g, packed, grad)
    release_blas_threads_at(ints[_SET], held)


class Eigh(LinalgOp):
    """``_eigh(a, upper=False)``: ``(..., n + 1, n)``, the eigenvalues in row 0 and the
    eigenvectors below."""

    name = "_eigh"
    saves_output = True

    def prepare(self, values, attrs):
        (a,) = _float_arrays(values)
        _check_square(self.name, a.shape)
        return [a], {"upper": bool(attrs.get("upper", False))}

    def forward(self, arrays, attrs):
        (a,) = arrays
        n = a.shape[-1]
        out = np.empty(a.shape[:-2] + (n + 1, n), dtype=a.dtype)
        _blas_call(_work(a.shape), _eigh_forward, _stacked(a, (n, n)),
                   _stacked(out, (n + 1, n)), attrs["upper"])
        return out

    def forward_spec(self, arrays, attrs, output):
        (a,) = arrays
        if not a.size:
            return None
        n = a.shape[-1]
        return _failing_spec(_eigh_forward_driver,
                             _driver_ints(a.dtype, a.size // (n * n), n, attrs["upper"]))

    vjp_kernel = staticmethod(_eigh_vjp)
    vjp_twin = staticmethod(_eigh_vjp_numpy)

    def run_vjp(self, kernel, k, grad_output, saved, attrs, grad_input):
        packed = saved.output
        n = packed.shape[-1]
        g = _stacked(np.ascontiguousarray(grad_output, dtype=packed.dtype), (n + 1, n))
        target, done = _accumulating(grad_input, (g.shape[0], n, n), packed.dtype)
        _blas_call(_work(target.shape), kernel, g, _stacked(packed, (n + 1, n)), target)
        done()

    def exec_spec(self, k, node):
        packed = node.saved_output
        n = packed.shape[-1]
        if packed.dtype != node.dtype or not packed.size or not n:
            return None
        return ExecSpec(_eigh_driver, (packed,),
                        _driver_ints(packed.dtype, packed.size // ((n + 1) * n), n), ())

    def rule(self, k, grad_output, inputs, output, attrs):
        w, v = _eigh_parts(output)
        gw, gv = _eigh_parts(grad_output)
        m = _mT(v) @ gv
        gaps = _expand(w, -2) - _expand(w, -1)  # [r, c]: w_c - w_r
        inner = _divide_or_zero((m - _mT(m)) * 0.5, gaps)
        inner = inner + _expand(gw, -1) * np.eye(w.shape[-1], dtype=w.dtype)
        return v @ inner @ _mT(v)


Eigh()


def _eigh_parts(packed):
    values = call("getitem", packed, index=(Ellipsis, 0, slice(None)))
    vectors = call("getitem", packed, index=(Ellipsis, slice(1, None), slice(None)))
    return values, vectors


# -- the public functions ---------------------------------------------------------------------


@public("linalg.eigh", method=False, family="linalg")
def eigh(a, UPLO="L"):  # noqa: N803 - NumPy's name
    """Eigenvalues and eigenvectors of symmetric matrices, as ``numpy.linalg.eigh``.

    Parameters
    ----------
    a : Tensor or array_like, shape (..., M, M)
    UPLO : {'L', 'U'}, optional
        Which triangle of ``a`` is read. Either is LAPACK's ``?syevd`` called as NumPy calls
        it, so the results are NumPy's, the eigenvectors' signs too, where NumPy's LAPACK is
        the same build as SciPy's (which numba calls).

    Returns
    -------
    EighResult
        ``(eigenvalues, eigenvectors)``: Tensors of shapes (..., M), ascending, and
        (..., M, M), the eigenvectors in columns.

    Raises
    ------
    LinAlgError
        Where ``a`` holds an inf or nan, in either triangle (NumPy's ``eigh`` gives nan or
        raises), or LAPACK does not converge.

    Notes
    -----
    The gradient is symmetric (as ``cholesky``'s): ``V (diag(gw) + F o sym) V^T`` with
    ``F[i, j] = 1 / (w_j - w_i)`` and ``sym`` the antisymmetric part of ``V^T gV``.

    Degenerate eigenvalues: the eigenvalues' gradient is always defined. An eigenvector of a
    repeated eigenvalue is not unique, and neither is its derivative. Where two computed
    eigenvalues are exactly equal, their term is taken as zero: that is the true gradient of
    any function that does not depend on the choice of basis within the eigenspace
    (eigenvalues, projectors ``V V^T``, ``V f(w) V^T``), and there is no gradient otherwise.
    Eigenvalues that are close but not equal give large gradients, as torch's and JAX's.
    The eigenvectors' signs are LAPACK's: a function of them should not depend on the signs.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> a = anb.tensor([[2.0, 1.0], [1.0, 2.0]], requires_grad=True)
    >>> w, v = anb.linalg.eigh(a)
    >>> w
    tensor([1., 3.], grad_fn=<GetitemBackward>)
    >>> anb.grad(w[1], a)
    (tensor([[0.5, 0.5],
            [0.5, 0.5]]),)
    """
    (a,) = _operands("linalg.eigh", a, complex_ok=True)
    _check_square("linalg.eigh", _shape_of(a))
    if UPLO not in ("L", "U"):
        raise ValueError("UPLO argument must be 'L' or 'U'")
    if a.dtype.kind == "c":
        return EighResult(*complex_eigh_parts(call("_ceigh", a, upper=UPLO == "U")))
    return EighResult(*_eigh_parts(call("_eigh", a, upper=UPLO == "U")))


@public("linalg.eigvalsh", method=False, family="linalg")
def eigvalsh(a, UPLO="L"):  # noqa: N803 - NumPy's name
    """The eigenvalues of symmetric matrices (ascending), as ``numpy.linalg.eigvalsh``; see
    :func:`eigh`.

    They are ``eigh``'s eigenvalues, computed with the eigenvectors (which the gradient
    needs): NumPy's ``eigvalsh`` computes them without, and can differ in the last bits.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.linalg.eigvalsh(anb.tensor([[2.0, 1.0], [1.0, 2.0]]))
    tensor([1., 3.])
    """
    return eigh(a, UPLO).eigenvalues
