"""The Sylvester equation and the matrix square root: the ``_solve_sylvester`` and ``_sqrtm``
ops behind ``autograd_nb.scipy.linalg``.

``_solve_sylvester(a, b, q)`` is the ``X`` of ``A X + X B = Q``. With ``Y`` the solution of
the adjoint equation ``A^T Y + Y B^T = G`` (``G`` the gradient of ``X``),
``<G, dX> = <Y, A dX + dX B> = <Y, dQ - dA X - X dB>``, so

    ``Q_bar = Y``,  ``A_bar = -Y X^T``,  ``B_bar = -X^T Y``.

``_sqrtm(a)`` is the principal square root ``S`` of ``A`` (``S S = A``). From
``dS S + S dS = dA``, ``A_bar`` is the ``Y`` of ``S^T Y + Y S^T = G``:
``_solve_sylvester(S^T, S^T, G)``.

Both rules are written with ``_solve_sylvester`` itself, so both differentiate to any order.
On complex matrices the transposes are conjugate transposes (torch's convention,
:doc:`/complex`: the VJP of a linear map is its adjoint), and a real matrix whose principal
root is complex (an eigenvalue on the negative real axis) has a complex ``S``, as SciPy
returns; its gradient is the real part of the complex one (the engine's rule for a real input).

Both ops run SciPy's host implementations (``scipy.linalg.solve_sylvester``: the real Schur
forms of ``A`` and ``B`` by LAPACK's ``gees`` and the triangular equation by ``trsyl``;
``scipy.linalg.sqrtm``: Higham's real Schur method), forward and backward, in both tiers, so
tier 0 gives the same bits. Their cost is LAPACK's either way. A compiled kernel would
call ``gees`` (with its workspace query and a null eigenvalue selector), ``trsyl`` and the
back-transformations through ``scipy.linalg.cython_lapack``, which means new entries in the
routine table that every linalg driver carries (``_lapack.routines``) and new compile
time, and ``sqrtm`` would still need Higham's block recurrence written for numba: more than
these two ops earn. So neither has drivers: a program of :func:`autograd_nb.compile` that
calls them runs eagerly (with one ``CompileWarning``), and their backward runs in the Python
walk.
"""

import numpy as np

from ._linalg_common import (
    LinAlgError,
    LinalgOp,
    _accumulating,
    _check_square,
    _float_arrays,
    _mT,
)
from .registry import call


def _matrices_h(x):
    """The conjugate transposes of the matrices of ``x`` (transposes where ``x`` is real)."""
    x = np.swapaxes(x, -1, -2)
    return np.conj(x) if x.dtype.kind == "c" else x


def _tensors_h(x):
    """:func:`_matrices_h` for a Tensor, recorded."""
    x = _mT(x)
    return call("_conj", x) if x.dtype.kind == "c" else x


def _inexact_arrays(values):
    """``values`` in their common float or complex dtype (NumPy's linalg rule extended to
    complex: complex64 where every one is complex64 or float32, else complex128)."""
    arrays = [np.asarray(v) for v in values]
    if all(a.dtype.kind != "c" for a in arrays):
        return _float_arrays(arrays)
    dtype = np.result_type(*arrays)
    dtype = dtype if dtype == np.complex64 else np.dtype(np.complex128)
    return [np.ascontiguousarray(a, dtype=dtype) for a in arrays]


def _solve(a, b, q, dtype):
    """SciPy's ``X``, in ``dtype``: a C-contiguous copy (SciPy's result may be a view of
    memory owned by a capsule, which callers cannot make read-only and back)."""
    import scipy.linalg  # (deferred: its import costs 0.12 s)

    return np.array(scipy.linalg.solve_sylvester(a, b, q), dtype=dtype, order="C")


def _add(grad_input, value):
    target, done = _accumulating(grad_input, grad_input.shape, value.dtype)
    target += value
    done()


class SolveSylvester(LinalgOp):
    """``_solve_sylvester(a, b, q)``: ``X`` of ``A X + X B = Q`` for ``a (..., m, m)``,
    ``b (..., n, n)``, ``q (..., m, n)`` of one batch shape."""

    name = "_solve_sylvester"
    n_inputs = 3
    saves = (0, 1)
    saves_output = True

    def prepare(self, values, attrs):
        a, b, q = _inexact_arrays(values)
        for name, x in (("a", a), ("b", b)):
            if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
                raise ValueError(f"solve_sylvester: {name} must be square; got shape "
                                 f"{x.shape}")
        m, n = a.shape[-1], b.shape[-1]
        if q.ndim < 2 or q.shape[-2:] != (m, n):
            raise ValueError(f"solve_sylvester: q must have shape (..., {m}, {n}) for a "
                             f"{a.shape} and b {b.shape}; got {q.shape}")
        if not a.shape[:-2] == b.shape[:-2] == q.shape[:-2]:
            raise ValueError("_solve_sylvester: a, b and q must have one batch shape")
        return [a, b, q], {}

    def forward(self, arrays, attrs):
        a, b, q = arrays
        return _solve(a, b, q, a.dtype)

    def forward_numpy(self, arrays, attrs):
        return self.forward(arrays, attrs)

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        a, b, x = saved[0], saved[1], saved.output
        g = np.ascontiguousarray(grad_output, dtype=x.dtype)
        y = _solve(_matrices_h(a), _matrices_h(b), g, x.dtype)
        if k == 0:
            y = -np.matmul(y, _matrices_h(x))
        elif k == 1:
            y = -np.matmul(_matrices_h(x), y)
        _add(grad_input, y)

    def vjp_numpy(self, k, grad_output, saved, attrs, grad_input):
        self.vjp(k, grad_output, saved, attrs, grad_input)

    def rule(self, k, grad_output, inputs, output, attrs):
        a, b, _ = inputs
        y = call("_solve_sylvester", _tensors_h(a), _tensors_h(b), grad_output)
        if k == 0:
            return -(y @ _tensors_h(output))
        if k == 1:
            return -(_tensors_h(output) @ y)
        return y


SolveSylvester()


class Sqrtm(LinalgOp):
    """``_sqrtm(a)``: the principal square roots of ``a (..., n, n)``: complex where ``a`` is,
    or where a real ``a`` has no real root (SciPy's result), else real."""

    name = "_sqrtm"
    saves_output = True

    def prepare(self, values, attrs):
        (a,) = _inexact_arrays(values)
        try:
            _check_square("sqrtm", a.shape)
        except LinAlgError:
            if a.ndim < 2:
                raise LinAlgError("The input array must be at least two-dimensional") from None
            raise LinAlgError("Last 2 dimensions of the array must be square") from None
        return [a], {}

    def forward(self, arrays, attrs):
        (a,) = arrays
        import scipy.linalg  # (deferred: its import costs 0.12 s)

        root = scipy.linalg.sqrtm(a)
        dtype = a.dtype
        if np.iscomplexobj(root) and dtype.kind != "c":  # no real root: SciPy's complex one
            dtype = np.result_type(dtype, np.complex64)
        return np.array(root, dtype=dtype, order="C")  # a copy, as ``_solve``'s

    def forward_numpy(self, arrays, attrs):
        return self.forward(arrays, attrs)

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        s = saved.output
        g = np.ascontiguousarray(grad_output, dtype=s.dtype)
        _add(grad_input, _solve(_matrices_h(s), _matrices_h(s), g, s.dtype))

    def vjp_numpy(self, k, grad_output, saved, attrs, grad_input):
        self.vjp(k, grad_output, saved, attrs, grad_input)

    def rule(self, k, grad_output, inputs, output, attrs):
        root_h = _tensors_h(output)
        return call("_solve_sylvester", root_h, root_h, grad_output)


Sqrtm()
