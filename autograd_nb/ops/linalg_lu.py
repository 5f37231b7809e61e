"""``anb.linalg.solve`` and ``inv``, from LU factors (``_lapack``); what the ``linalg_*``
modules share is in ``_linalg_common``.

- ``_lu`` factors (not differentiable): LU with partial pivoting, or Cholesky for a symmetric
  positive-definite matrix (half the work; see ``_lapack.lu_factor_into``). ``_lu_solve``
  reads its factors with ``a`` itself as a second input (as ``linalg_det``'s ``_slogdet`` and
  ``_det`` do), its derivatives written in ``a``: solve's backward then costs one solve with
  the factors instead of a second factorisation, as torch's does. ``inv`` is ``_lu_solve``
  against the identity, as NumPy's ``inv`` is.
- ``_lu_solve``'s driver (``exec_spec``) makes the backward of ``solve`` and ``inv`` one
  compiled call.
"""

import numpy as np
from numba import njit

from . import _broadcast, _lapack
from . import _lapack_numpy as _twin
from ._blas import release_blas_threads_at
from ._linalg_common import (
    _ROUTINES,
    _SET,
    LinAlgError,
    LinalgOp,
    _accumulating,
    _blas_call,
    _check_square,
    _driver_ints,
    _dtype_of,
    _eye_like,
    _failing_spec,
    _float_arrays,
    _hold,
    _mT,
    _operands,
    _set_flag,
    _stacked,
)
from ._pointers import array_at
from .linalg import _shape_of
from .registry import ExecSpec, call, public


@njit(cache=True, nogil=True)
def _lu_forward(routines, a, packed):
    for i in range(a.shape[0]):
        _lapack.lu_factor_into(routines, a[i], packed[i])


@njit(cache=True, nogil=True)
def _lu_solve_forward(routines, packed, b, out, transpose):
    """``out[i] = A_i^-1 b[i]`` (``A_i^-T`` where ``transpose``); True (and stops) at an
    exactly singular ``A_i``."""
    for i in range(b.shape[0]):
        if _lapack.lu_singular(packed[i]):
            return True
        _lapack.lu_solve_into(routines, packed[i], b[i], out[i], transpose)
    return False


@njit(cache=True, nogil=True)
def _lu_solve_vjp(routines, k, packed, g, x, grad, transpose):
    """The VJPs of ``x = A^-1 b``: ``gb = A^-T g`` into ``grad`` for ``k == 2``, and
    ``-gb x^T`` for ``k == 0``. Where ``transpose`` (``x = A^-T b``): ``gb = A^-1 g`` and
    ``-x gb^T``."""
    gb = np.empty(g.shape[1:], dtype=g.dtype)
    for i in range(g.shape[0]):
        _lapack.lu_solve_into(routines, packed[i], g[i], gb, not transpose)
        if k == 2:
            _lapack.add_scaled(grad[i], 1.0, gb)
        elif transpose:
            _subtract_outer(routines, grad[i], x[i], gb)
        else:
            _subtract_outer(routines, grad[i], gb, x[i])


def _lu_solve_vjp_numpy(routines, k, packed, g, x, grad, transpose):
    """``_lu_solve_vjp``'s NumPy twin (``routines`` unused: ``_lapack_numpy`` calls them by
    the dtype)."""
    gb = np.empty(g.shape[1:], dtype=g.dtype)
    for i in range(g.shape[0]):
        _twin.lu_solve_into(packed[i], g[i], gb, not transpose)
        if k == 2:
            _twin.add_scaled(grad[i], np.float64(1.0), gb)
        elif transpose:
            _subtract_outer_numpy(grad[i], x[i], gb)
        else:
            _subtract_outer_numpy(grad[i], gb, x[i])


@njit(cache=True, nogil=True)
def _subtract_outer(routines, out, left, right):
    """``out -= left @ right.T`` for ``(n, k)`` factors: a loop over ``out`` for a few columns
    (a vector ``b``: GEMM with an inner dimension of 1 took 0.67 ms at n = 512, the loop
    about a fifth of it), else GEMM."""
    if left.shape[1] > 4:
        _lapack.gemm_add(routines, -1.0, left, False, right, True, out)
        return
    for r in range(out.shape[0]):
        row = out[r]
        for p in range(left.shape[1]):
            scale = left[r, p]
            for c in range(row.size):
                row[c] -= scale * right[c, p]


def _subtract_outer_numpy(out, left, right):
    if left.shape[1] > 4:
        _twin.gemm_add(-1.0, left, False, right, True, out)
        return
    for p in range(left.shape[1]):  # (each element's terms in the loop's order)
        out -= left[:, p, None] * right[None, :, p]


@njit(cache=True, nogil=True)
def _lu_solve_driver(operands, ints, floats, like):
    """The compiled executor's driver of ``_lu_solve``'s VJPs: ``ints`` is ``[k, batch, n,
    columns, transpose]`` then ``_driver_ints``' tail; operands the gradient, the factors,
    the result and the target."""
    k, batch, n, columns = ints[0], ints[1], ints[2], ints[3]
    g = array_at(operands[0], batch * n * columns, like).reshape((batch, n, columns))
    packed = array_at(operands[1], batch * n * (n + 1), like).reshape((batch, n, n + 1))
    x = array_at(operands[2], batch * n * columns, like).reshape((batch, n, columns))
    width = n if k == 0 else columns
    grad = array_at(operands[3], batch * n * width, like).reshape((batch, n, width))
    held = _hold(ints, batch * n * n * columns)
    _lu_solve_vjp(ints[_ROUTINES:], k, packed, g, x, grad, ints[4] != 0)
    release_blas_threads_at(ints[_SET], held)


@njit(cache=True, nogil=True)
def _lu_forward_driver(operands, ints, floats, like):
    """``_lu``'s forward in a compiled program (``forward_spec``): ``ints`` is ``[batch, n]``
    then ``_driver_ints``' tail; operands the matrices and the packed factors."""
    batch, n = ints[0], ints[1]
    a = array_at(operands[0], batch * n * n, like).reshape((batch, n, n))
    packed = array_at(operands[1], batch * n * (n + 1), like).reshape((batch, n, n + 1))
    held = _hold(ints, batch * n * n * n)
    _lu_forward(ints[_ROUTINES:], a, packed)
    release_blas_threads_at(ints[_SET], held)


@njit(cache=True, nogil=True)
def _lu_solve_forward_driver(operands, ints, floats, like):
    """``_lu_solve``'s forward in a compiled program: ``ints`` is ``[batch, n, columns,
    transpose]`` then ``_driver_ints``' tail; operands ``a`` (unread), the factors, ``b``,
    the flag (set where a matrix is singular) and the result."""
    batch, n, columns = ints[0], ints[1], ints[2]
    packed = array_at(operands[1], batch * n * (n + 1), like).reshape((batch, n, n + 1))
    b = array_at(operands[2], batch * n * columns, like).reshape((batch, n, columns))
    out = array_at(operands[4], batch * n * columns, like).reshape((batch, n, columns))
    held = _hold(ints, batch * n * n * columns)
    singular = _lu_solve_forward(ints[_ROUTINES:], packed, b, out, ints[3] != 0)
    release_blas_threads_at(ints[_SET], held)
    _set_flag(operands[3], singular)


class LuFactor(LinalgOp):
    """``_lu(a)``: the LU factors of the square matrices ``a (..., n, n)``, packed as
    ``(..., n, n + 1)`` (see ``_lapack``). Not differentiable: the ops that read the factors
    also take ``a``, and their derivatives are written in ``a``."""

    name = "_lu"
    differentiable = (False,)

    def prepare(self, values, attrs):
        (a,) = _float_arrays(values)
        _check_square(self.name, a.shape)
        return [a], {}

    def forward(self, arrays, attrs):
        (a,) = arrays
        n = a.shape[-1]
        packed = np.empty(a.shape[:-1] + (n + 1,), dtype=a.dtype)
        _blas_call(a.size * n, _lu_forward, _lapack.routines(a.dtype), _stacked(a, (n, n)),
                   _stacked(packed, (n, n + 1)))
        return packed

    def forward_spec(self, arrays, attrs, output):
        (a,) = arrays
        if not a.size:
            return None
        n = a.shape[-1]
        return _lu_forward_driver, _driver_ints(a.dtype, a.size // (n * n), n), ()

    def run_vjp(self, kernel, k, grad_output, saved, attrs, grad_input):
        raise AssertionError("_lu is not differentiable: no node records it")

    def rule(self, k, grad_output, inputs, output, attrs):
        raise AssertionError("_lu is not differentiable: no node records it")


LuFactor()


class LuSolve(LinalgOp):
    """``_lu_solve(a, lu, b, transpose=False)``: ``a^-1 b`` (``a^-T b`` where ``transpose``)
    for ``a (..., n, n)``, ``lu = _lu(a)`` and ``b`` of the same batch: matrices ``(..., n,
    k)``, or vectors ``(..., n)`` (one dimension fewer than ``a``; no reshapes around the op,
    as ``solve``'s common case)."""

    name = "_lu_solve"
    n_inputs = 3
    differentiable = (True, False, True)
    saves = (0, 1)
    saves_output = True

    def prepare(self, values, attrs):
        a, lu, b = _float_arrays(values)
        n = a.shape[-1]
        rows = a.shape[:-1]  # the batch and n: b's leading dimensions, matrices or vectors
        if (lu.shape != rows + (n + 1,) or b.ndim not in (a.ndim, a.ndim - 1)
                or b.shape[: len(rows)] != rows):
            raise ValueError(
                f"_lu_solve needs a (..., n, n), its factors and b (..., n, k) or (..., n) of "
                f"one batch, got {a.shape}, {lu.shape}, {b.shape}"
            )
        return [a, lu, b], {"transpose": bool(attrs.get("transpose", False))}

    def forward(self, arrays, attrs):
        _, lu, b = arrays
        n, columns = _columns(lu, b)
        out = np.empty(b.shape, dtype=b.dtype)
        singular = _blas_call(lu.size // (n + 1) * n * columns, _lu_solve_forward,
                              _lapack.routines(b.dtype), _stacked(lu, (n, n + 1)),
                              _stacked(b, (n, columns)), _stacked(out, (n, columns)),
                              attrs["transpose"])
        if singular:
            raise LinAlgError("Singular matrix")
        return out

    def forward_spec(self, arrays, attrs, output):
        _, lu, b = arrays
        if not b.size:
            return None
        n, columns = _columns(lu, b)
        return _failing_spec(_lu_solve_forward_driver, _driver_ints(
            b.dtype, b.size // (n * columns), n, columns, attrs["transpose"]))

    vjp_kernel = staticmethod(_lu_solve_vjp)
    vjp_twin = staticmethod(_lu_solve_vjp_numpy)

    def run_vjp(self, kernel, k, grad_output, saved, attrs, grad_input):
        lu, x = saved[1], saved.output
        n, columns = _columns(lu, x)
        shape = (n, n) if k == 0 else (n, columns)
        g = np.ascontiguousarray(grad_output, dtype=x.dtype)
        target, done = _accumulating(grad_input, (lu.size // (n * n + n),) + shape, x.dtype)
        _blas_call(lu.size // (n + 1) * n * columns, kernel, _lapack.routines(x.dtype), k,
                   _stacked(lu, (n, n + 1)), _stacked(g, (n, columns)),
                   _stacked(x, (n, columns)), target, attrs["transpose"])
        done()

    def exec_spec(self, k, node):
        lu, x = node.saved_inputs[1], node.saved_output
        if x.dtype != node.dtype or not x.size:
            return None
        n, columns = _columns(lu, x)
        ints = _driver_ints(x.dtype, k, x.size // (n * columns), n, columns,
                            node.attrs["transpose"])
        return ExecSpec(_lu_solve_driver, (lu, x), ints, ())

    def rule(self, k, grad_output, inputs, output, attrs):
        a, lu, _ = inputs
        transpose = attrs["transpose"]
        gb = call("_lu_solve", a, lu, grad_output, transpose=not transpose)
        if k == 2:
            return gb
        if output.ndim < a.ndim:  # vectors: an outer product
            gb = call("reshape", gb, shape=gb.shape + (1,))
            output = call("reshape", output, shape=output.shape + (1,))
        return -(output @ _mT(gb)) if transpose else -(gb @ _mT(output))


def _columns(lu, b):
    """``(n, k)``: the order of the factored matrices and the columns of ``b`` (or of the
    result), 1 for vectors."""
    return lu.shape[-2], (b.shape[-1] if b.ndim == lu.ndim else 1)


LuSolve()


# -- the public functions ---------------------------------------------------------------------


def _inv(a):
    """``inv(a)`` for a CPU Tensor of float or complex dtype (the rules' and composites'
    own)."""
    if a.dtype.kind == "c":
        return call("_csolve", a, _eye_like(tuple(a.shape), a.dtype))
    lu = call("_lu", a)
    return call("_lu_solve", a, lu, _eye_like(tuple(a.shape), a.dtype))


@public("linalg.solve", method=False, family="linalg")
def solve(a, b):
    """Solve the linear systems ``a @ x = b``, as ``numpy.linalg.solve``.

    Parameters
    ----------
    a : Tensor or array_like, shape (..., M, M)
    b : Tensor or array_like, shape (M,) or (..., M, K)
        A 1-D ``b`` is one vector (for every matrix of ``a``); otherwise its last two axes
        are matrices and the leading ones broadcast against ``a``'s (NumPy 2's rule).

    Returns
    -------
    Tensor
        ``x``, of shape (..., M) or (..., M, K).

    Raises
    ------
    numpy.linalg.LinAlgError
        If a matrix of ``a`` is singular or not square.

    Notes
    -----
    ``a`` is factored once (LU with partial pivoting; Cholesky where ``a`` is symmetric
    positive definite, as MATLAB's ``mldivide``) and the backward reuses the factors: the
    gradients are ``gb = a^-T g`` and ``ga = -gb x^T``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> a = anb.tensor([[3.0, 1.0], [1.0, 2.0]], requires_grad=True)
    >>> x = anb.linalg.solve(a, anb.tensor([9.0, 8.0]))
    >>> x
    tensor([2., 3.], grad_fn=<LuSolveBackward>)
    >>> anb.grad(x.sum(), a)
    (tensor([[-0.4, -0.6],
            [-0.8, -1.2]]),)
    """
    a, b = _operands("linalg.solve", a, b, complex_ok=True)
    a_shape, b_shape = _shape_of(a), _shape_of(b)
    _check_square("linalg.solve", a_shape)
    vector = len(b_shape) == 1
    if vector or b_shape[-2] != a_shape[-1]:
        if b_shape[0 if vector else -2] != a_shape[-1]:
            raise ValueError(
                f"linalg.solve: b's dimension {b_shape[0 if vector else -2]} does not match "
                f"a's {a_shape[-1]} (shapes {a_shape} and {b_shape})"
            )
    if vector:  # one vector for every matrix of a
        if len(a_shape) > 2:
            b = call("broadcast_to", b, shape=a_shape[:-1])
        if _dtype_of(a).kind == "c":
            column = call("reshape", b, shape=a_shape[:-1] + (1,))
            return call("reshape", call("_csolve", a, column), shape=a_shape[:-1])
        return call("_lu_solve", a, call("_lu", a), b)
    batch = _broadcast.broadcast_shapes(a_shape[:-2], b_shape[:-2])
    if a_shape[:-2] != batch:
        a = call("broadcast_to", a, shape=batch + a_shape[-2:])
    if b_shape[:-2] != batch:
        b = call("broadcast_to", b, shape=batch + b_shape[-2:])
    if _dtype_of(a).kind == "c":
        return call("_csolve", a, b)
    return call("_lu_solve", a, call("_lu", a), b)


@public("linalg.inv", method=False, family="linalg")
def inv(a):
    """The inverses of the square matrices ``a (..., M, M)``, as ``numpy.linalg.inv``.

    Raises ``numpy.linalg.LinAlgError`` for a singular matrix. The gradient is
    ``-inv(a)^T g inv(a)^T``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> a = anb.tensor([[2.0, 0.0], [0.0, 4.0]], requires_grad=True)
    >>> anb.linalg.inv(a)
    tensor([[0.5 , 0.  ],
            [0.  , 0.25]], grad_fn=<LuSolveBackward>)
    >>> anb.grad(anb.linalg.inv(a).sum(), a)
    (tensor([[-0.25  , -0.125 ],
            [-0.125 , -0.0625]]),)
    """
    (a,) = _operands("linalg.inv", a, complex_ok=True)
    _check_square("linalg.inv", _shape_of(a))
    return _inv(a)
