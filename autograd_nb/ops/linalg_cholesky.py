"""``anb.linalg.cholesky``: the ``_cholesky`` op, from SciPy's LAPACK (``_lapack``).

``_cholesky``'s VJP is Murray's blocked reverse of the factorisation (``_cholesky_adjoint``),
under a quarter of the flops of torch's formula, with a driver for the compiled executor
(``exec_spec``). Its rule inverts the factor with ``linalg_lu``'s ``_inv``.
"""

import numpy as np
from numba import njit

from .. import config
from . import _lapack
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
    _failing_spec,
    _float_arrays,
    _hold,
    _mT,
    _operands,
    _set_flag,
    _stacked,
    _work,
)
from ._numpy_vjp import add_into, running_sum64
from ._pointers import array_at
from .linalg import _shape_of
from .linalg_lu import _inv
from .registry import ExecSpec, call, public


@njit(cache=True, nogil=True)
def _cholesky_forward(routines, a, out):
    """``out[i]``: the lower Cholesky factor of ``a[i]``; True (and stops) where ``a[i]`` is
    not positive definite."""
    for i in range(a.shape[0]):
        if _lapack.cholesky_into(routines, a[i], out[i]) != 0:
            return True
    return False


@njit(cache=True, nogil=True)
def _cholesky_vjp(routines, g, lower, grad):
    """``grad[i] += sym(Abar)``, ``Abar`` the gradient w.r.t. the lower triangle of ``A``
    (``_cholesky_adjoint`` of ``tril(G)``: the upper triangle of ``L`` is constant) and
    ``sym(X) = (X + X^T) / 2``; the same as torch's ``L^-T sym(Phi(L^T G)) L^-1``."""
    n = lower.shape[1]
    bar = np.empty((n, n), dtype=grad.dtype)
    for i in range(g.shape[0]):
        for r in range(n):
            for c in range(n):
                bar[r, c] = g[i, r, c] if c <= r else 0
        _cholesky_adjoint(routines, lower[i], bar, CHOLESKY_BLOCKS)
        for r in range(n):  # bar + bar^T, bar lower triangular
            bar[r, r] *= 2
        _lapack.mirror(bar, True)
        _lapack.add_scaled(grad[i], 0.5, bar)


def _cholesky_vjp_numpy(routines, g, lower, grad):
    """``_cholesky_vjp``'s NumPy twin (``routines`` unused, as in ``_lu_solve_vjp_numpy``)."""
    for i in range(g.shape[0]):
        bar = np.tril(g[i])
        _cholesky_adjoint_numpy(lower[i], bar, CHOLESKY_BLOCKS)
        bar[np.diag_indices(bar.shape[0])] *= 2
        _twin.mirror(bar, True)
        _twin.add_scaled(grad[i], np.float64(0.5), bar)


def _cholesky_adjoint_numpy(lower, bar, blocks, scratch=None):
    """``_cholesky_adjoint``'s twin, in blocks of ``blocks[0]`` columns, their diagonal
    blocks reversed in blocks of ``blocks[1]`` (``_cholesky_adjoint_inner``), and those a
    column at a time."""
    if scratch is None:
        scratch = np.empty((min(lower.shape[0], blocks[0]),) * 2, dtype=bar.dtype)
    k = lower.shape[0]
    while k > 0:
        j = max(0, k - blocks[0])
        _adjoint_panel_numpy(lower, bar, j, k, scratch)
        if len(blocks) > 1:
            _cholesky_adjoint_numpy(lower[j:k, j:k], bar[j:k, j:k], blocks[1:], scratch)
        else:
            _cholesky_adjoint_block_numpy(lower[j:k, j:k], bar[j:k, j:k])
        _adjoint_left_numpy(lower, bar, j, k, scratch)
        k = j


def _adjoint_panel_numpy(lower, bar, j, k, scratch):
    r, d, c = lower[j:k, :j], lower[j:k, j:k], lower[k:, j:k]
    d_bar, b_bar, c_bar = bar[j:k, j:k], bar[k:, :j], bar[k:, j:k]
    _twin.triangular_solve(d, c_bar, False, True, False)
    _twin.gemm_add(-1.0, c_bar, False, r, False, b_bar)
    width = k - j
    product = scratch[:width, :width]
    product[...] = 0
    _twin.gemm_add(1.0, c_bar, True, c, False, product)
    d_bar[np.tril_indices(width)] -= product[np.tril_indices(width)]


def _adjoint_left_numpy(lower, bar, j, k, scratch):
    r, b = lower[j:k, :j], lower[k:, :j]
    r_bar, d_bar, c_bar = bar[j:k, :j], bar[j:k, j:k], bar[k:, j:k]
    _twin.gemm_add(-1.0, c_bar, True, b, False, r_bar)
    width = k - j
    product = scratch[:width, :width]
    strict = np.tril_indices(width, -1)
    product[strict] = d_bar[strict]
    product.T[strict] = d_bar[strict]
    product[np.diag_indices(width)] = 2 * d_bar.diagonal()
    _twin.gemm_add(-1.0, product, False, r, False, r_bar)


def _cholesky_adjoint_block_numpy(lower, bar):
    """``_cholesky_adjoint_block``'s twin: per column, ``total``'s float32 products summed
    in float64 in turn, ``d_bar`` in float64, and the row of ``R_bar`` receiving its terms
    in the loop's order."""
    lower = np.ascontiguousarray(lower)
    result = np.ascontiguousarray(bar)
    m = lower.shape[0]
    for j in range(m - 1, -1, -1):
        d = lower[j, j]
        column = lower[j + 1 :, j]
        total = float(running_sum64(column * result[j + 1 :, j], 0))
        d_bar = (float(result[j, j]) - total / float(d)) / float(d)
        result[j + 1 :, j] /= d
        row, r = result[j, :j], lower[j, :j]
        add_into(row, -(np.float64(d_bar) * r))
        terms = result[j + 1 :, j, None] * lower[j + 1 :, :j]
        row[...] = np.subtract.accumulate(np.concatenate([row[None], terms]), axis=0)[-1]
        result[j + 1 :, :j] -= result[j + 1 :, j, None] * r
        result[j, j] = d_bar / 2
    bar[...] = result


@njit(cache=True, nogil=True)
def _cholesky_adjoint(routines, lower, bar, blocks):
    """Murray's blocked reverse of the Cholesky factorisation ("Differentiation of the
    Cholesky decomposition", 2016), in place: ``bar``, the gradient w.r.t. ``L`` (lower
    triangular), becomes the gradient w.r.t. the lower triangle of ``A = L L^T``.

    The forward it reverses factors a block of columns at a time: a diagonal block ``D =
    chol(A_D - R R^T)`` and the panel below it ``C = (A_C - B R^T) D^-T``, ``R`` and ``B``
    the factor's columns to their left. Reversed from the last block, the work is ``2 n^3 /
    3`` flops, nearly all GEMM, where torch's ``L^-T sym(Phi(L^T G)) L^-1`` takes ``3 n^3``.
    Blocks of ``blocks[0]`` columns, their diagonal blocks reversed the same way in blocks of
    ``blocks[1]``, and those a column at a time."""
    k = lower.shape[0]
    width = min(k, blocks[0])
    scratch = np.empty((width, width), dtype=bar.dtype)
    while k > 0:
        j = max(0, k - blocks[0])
        _adjoint_panel(routines, lower, bar, j, k, scratch)
        _cholesky_adjoint_inner(routines, lower[j:k, j:k], bar[j:k, j:k], scratch, blocks[1])
        _adjoint_left(routines, lower, bar, j, k, scratch)
        k = j


@njit(cache=True, nogil=True)
def _cholesky_adjoint_inner(routines, lower, bar, scratch, block):
    """``_cholesky_adjoint`` of a diagonal block, in blocks of ``block`` columns."""
    k = lower.shape[0]
    while k > 0:
        j = max(0, k - block)
        _adjoint_panel(routines, lower, bar, j, k, scratch)
        _cholesky_adjoint_block(lower[j:k, j:k], bar[j:k, j:k])
        _adjoint_left(routines, lower, bar, j, k, scratch)
        k = j


@njit(cache=True, nogil=True)
def _adjoint_panel(routines, lower, bar, j, k, scratch):
    """The reverse of ``C = (A_C - B R^T) D^-T`` for the block of columns ``j:k``:
    ``C_bar`` becomes ``A_C``'s gradient ``C_bar D^-1``, then ``B_bar -= C_bar R`` and
    ``D_bar -= tril(C_bar^T C)``."""
    r, d, c = lower[j:k, :j], lower[j:k, j:k], lower[k:, j:k]
    d_bar, b_bar, c_bar = bar[j:k, j:k], bar[k:, :j], bar[k:, j:k]
    _lapack.triangular_solve(routines, d, c_bar, False, True, False)
    _lapack.gemm_add(routines, -1.0, c_bar, False, r, False, b_bar)
    width = k - j
    product = scratch[:width, :width]
    product[...] = 0
    _lapack.gemm_add(routines, 1.0, c_bar, True, c, False, product)
    for p in range(width):
        for q in range(p + 1):
            d_bar[p, q] -= product[p, q]


@njit(cache=True, nogil=True)
def _adjoint_left(routines, lower, bar, j, k, scratch):
    """The reverse of ``R``'s part in the block of columns ``j:k`` (``D_bar`` reversed
    through the factorisation of ``A_D - R R^T`` already): ``R_bar -= C_bar^T B + (D_bar +
    D_bar^T) R``."""
    r, b = lower[j:k, :j], lower[k:, :j]
    r_bar, d_bar, c_bar = bar[j:k, :j], bar[j:k, j:k], bar[k:, j:k]
    _lapack.gemm_add(routines, -1.0, c_bar, True, b, False, r_bar)
    width = k - j
    product = scratch[:width, :width]
    for p in range(width):
        for q in range(p):
            product[p, q] = d_bar[p, q]
            product[q, p] = d_bar[p, q]
        product[p, p] = 2 * d_bar[p, p]
    _lapack.gemm_add(routines, -1.0, product, False, r, False, r_bar)


@njit(cache=True, nogil=True)
def _cholesky_adjoint_block(lower, bar):
    """``_cholesky_adjoint`` of one diagonal block, a column at a time (Murray's unblocked
    reverse): column ``j`` of ``L`` is ``c = (a_c - B r) / d`` below ``d = sqrt(a_jj - r.r)``,
    ``r`` and ``B`` the columns to its left. On contiguous copies of the blocks: loops over
    views with strides numba does not know run several times slower."""
    lower = np.ascontiguousarray(lower)
    result = np.ascontiguousarray(bar)
    m = lower.shape[0]
    for j in range(m - 1, -1, -1):
        d = lower[j, j]
        total = 0.0
        for i in range(j + 1, m):
            total += lower[i, j] * result[i, j]
        d_bar = (result[j, j] - total / d) / d
        for i in range(j + 1, m):
            result[i, j] /= d
        row = result[j, :j]
        r = lower[j, :j]
        for q in range(j):
            row[q] -= d_bar * r[q]
        for i in range(j + 1, m):
            c_bar = result[i, j]
            b = lower[i, :j]
            for q in range(j):
                row[q] -= c_bar * b[q]
        for i in range(j + 1, m):
            c_bar = result[i, j]
            b_bar = result[i, :j]
            for q in range(j):
                b_bar[q] -= c_bar * r[q]
        result[j, j] = d_bar / 2
    _lapack.copy_into(bar, result)


#: Columns per block of ``_cholesky_adjoint``, and per block of its diagonal blocks
#: (``config.CHOLESKY_BLOCKS``, read once, at import: it is compiled in).
CHOLESKY_BLOCKS = config.CHOLESKY_BLOCKS


@njit(cache=True, nogil=True)
def _cholesky_driver(operands, ints, floats, like):
    """The compiled executor's driver of ``_cholesky``'s VJP: ``ints`` is ``[batch, n]`` then
    ``_driver_ints``' tail; operands the gradient, the factors and the target."""
    batch, n = ints[0], ints[1]
    g = array_at(operands[0], batch * n * n, like).reshape((batch, n, n))
    lower = array_at(operands[1], batch * n * n, like).reshape((batch, n, n))
    grad = array_at(operands[2], batch * n * n, like).reshape((batch, n, n))
    held = _hold(ints, batch * n * n * n)
    _cholesky_vjp(ints[_ROUTINES:], g, lower, grad)
    release_blas_threads_at(ints[_SET], held)


@njit(cache=True, nogil=True)
def _cholesky_forward_driver(operands, ints, floats, like):
    """``_cholesky``'s forward in a compiled program (``forward_spec``): ``ints`` is
    ``[batch, n]`` then ``_driver_ints``' tail; operands the matrices, the flag (set where
    one is not positive definite) and the factors."""
    batch, n = ints[0], ints[1]
    a = array_at(operands[0], batch * n * n, like).reshape((batch, n, n))
    out = array_at(operands[2], batch * n * n, like).reshape((batch, n, n))
    held = _hold(ints, batch * n * n * n)
    failed = _cholesky_forward(ints[_ROUTINES:], a, out)
    release_blas_threads_at(ints[_SET], held)
    _set_flag(operands[1], failed)


class Cholesky(LinalgOp):
    """``_cholesky(a)``: the lower Cholesky factors of ``a (..., n, n)`` (its lower triangle
    read), with the symmetric gradient."""

    name = "_cholesky"
    saves_output = True

    def prepare(self, values, attrs):
        (a,) = _float_arrays(values)
        _check_square(self.name, a.shape)
        return [a], {}

    def forward(self, arrays, attrs):
        (a,) = arrays
        n = a.shape[-1]
        out = np.empty(a.shape, dtype=a.dtype)
        failed = _blas_call(a.size * n, _cholesky_forward, _lapack.routines(a.dtype),
                            _stacked(a, (n, n)), _stacked(out, (n, n)))
        if failed:
            raise LinAlgError("Matrix is not positive definite")
        return out

    def forward_spec(self, arrays, attrs, output):
        (a,) = arrays
        if not a.size:
            return None
        n = a.shape[-1]
        return _failing_spec(_cholesky_forward_driver,
                             _driver_ints(a.dtype, a.size // (n * n), n))

    vjp_kernel = staticmethod(_cholesky_vjp)
    vjp_twin = staticmethod(_cholesky_vjp_numpy)

    def run_vjp(self, kernel, k, grad_output, saved, attrs, grad_input):
        lower = saved.output
        n = lower.shape[-1]
        g = _stacked(np.ascontiguousarray(grad_output, dtype=lower.dtype), (n, n))
        target, done = _accumulating(grad_input, g.shape, lower.dtype)
        _blas_call(_work(g.shape), kernel, _lapack.routines(lower.dtype), g,
                   _stacked(lower, (n, n)), target)
        done()

    def exec_spec(self, k, node):
        lower = node.saved_output
        n = lower.shape[-1]
        if lower.dtype != node.dtype or not lower.size:
            return None
        return ExecSpec(_cholesky_driver, (lower,),
                        _driver_ints(lower.dtype, lower.size // (n * n), n), ())

    def rule(self, k, grad_output, inputs, output, attrs):
        n = output.shape[-1]
        phi = np.tril(np.ones((n, n), dtype=output.dtype)) - 0.5 * np.eye(n, dtype=output.dtype)
        p = (_mT(output) @ grad_output) * phi
        inverse = _inv(output)
        x = _mT(inverse) @ p @ inverse
        return (x + _mT(x)) * 0.5


Cholesky()


# -- the public functions ---------------------------------------------------------------------


@public("linalg.cholesky", method=False, family="linalg")
def cholesky(a, /, *, upper=False):
    """The Cholesky factors of symmetric positive-definite matrices, as
    ``numpy.linalg.cholesky``.

    Parameters
    ----------
    a : Tensor or array_like, shape (..., M, M)
        Only the lower triangle is read (the upper one where ``upper``).
    upper : bool, optional
        Return the upper factor ``U`` (``a = U^T U``) instead of the lower ``L``
        (``a = L L^T``).

    Returns
    -------
    Tensor

    Raises
    ------
    numpy.linalg.LinAlgError
        If a matrix is not positive definite.

    Notes
    -----
    The gradient is symmetric, as torch's: ``a`` is taken as a symmetric matrix, so a
    perturbation of one triangle is one of the other too. For a gradient w.r.t. only the
    triangle read, use ``tril(g + g.T) - diag(diag(g))`` of the returned ``g``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> a = anb.tensor([[4.0, 2.0], [2.0, 5.0]], requires_grad=True)
    >>> anb.linalg.cholesky(a)
    tensor([[2., 0.],
            [1., 2.]], grad_fn=<CholeskyBackward>)
    """
    (a,) = _operands("linalg.cholesky", a, complex_ok=True)
    _check_square("linalg.cholesky", _shape_of(a))
    if a.dtype.kind == "c":  # a = L L^H; upper: a = U^H U, U = L^H of a^T's L
        if upper:
            return call("_conj", _mT(call("_ccholesky", call("_conj", _mT(a)))))
        return call("_ccholesky", a)
    if upper:
        return _mT(call("_cholesky", _mT(a)))
    return call("_cholesky", a)
