"""``anb.linalg``: NumPy's ``numpy.linalg`` functions, differentiable and batched over leading
axes as NumPy's are (``solve``, ``inv``, ``det``, ``slogdet``, ``cholesky``, ``eigh``, ``svd``,
``qr``, ``pinv``, ``lstsq``, ``norm``, ``matrix_power``, ``multi_dot``, ...). They are public
as ``"linalg.<name>"``, which :mod:`autograd_nb.linalg` shows as ``anb.linalg.<name>``.

The ops, and why each is one:

- ``_lu`` factors (not differentiable): LU with partial pivoting, or Cholesky for a symmetric
  positive-definite matrix (half the work; see ``_lapack.lu_factor_into``). ``_lu_solve``,
  ``_slogdet`` and ``_det`` read its factors with ``a`` itself as a second input, their
  derivatives written in ``a``: solve's backward then costs one solve with the factors
  instead of a second factorisation, as torch's does. ``inv`` is ``_lu_solve`` against the
  identity, as NumPy's ``inv`` is. ``_slogdet`` gives ``log|det|``; the sign, without a
  gradient, is read from the same factors.
- ``_cholesky``, ``_pinv``: one output each. ``_cholesky``'s VJP is Murray's blocked reverse
  of the factorisation (``_cholesky_adjoint``), under a quarter of the flops of torch's formula.
- ``_eigh``, ``_svd``, ``_qr``: several outputs. An op has one result, so these return their
  outputs packed in one array and the public function takes them apart with ``getitem`` (and
  ``reshape``): one decomposition per call, and one VJP that sees the gradients of all the
  outputs at once (an output left unused contributes zeros).
- ``_norm2``: the 2-norm and Frobenius norm, as a reduction (``AxisOp``): one pass each way
  (``sqrt(sum(x * x))`` is three), a zero gradient at zero (torch's subgradient), and a driver
  for the compiled executor.

Forward kernels run numba's LAPACK-backed ``np.linalg``, or SciPy's LAPACK through ``_lapack``
(the LU and Cholesky factors), per matrix of the batch. The VJP kernels are ``@njit`` too:
their matrix products are ``_lapack``'s and numba's ``np.dot`` (SciPy's BLAS, LAPACK's), where
NumPy's ``matmul`` would wake NumPy's own BLAS thread pool beside it. ``_lu_solve``,
``_slogdet``, ``_det`` and ``_cholesky`` give the compiled executor drivers of the same
kernels (``exec_spec``), so the backward of ``solve``, ``inv``, ``det``, ``slogdet`` and
``cholesky`` is one compiled call; the other ops run theirs in the Python walk.

Every op has a differentiable rule written with autograd_nb ops (for ``create_graph=True``).
Complex matrices are out of scope. CUDA tensors raise ``NotImplementedError`` naming the
function.
"""

import collections
import math
import operator

import numpy as np
from numba import njit, types
from numba.extending import overload
from numba.np.linalg import _LAPACK

from .. import config
from . import _broadcast, _lapack
from . import _lapack_numpy as _twin
from ._blas import (
    LAPACK_THREAD_CONTROLS,
    SPLIT_MIN_WORK,
    hold_blas_threads,
    hold_blas_threads_at,
    release_blas_threads,
    release_blas_threads_at,
)
from ._numpy_vjp import add_into, running_sum64
from ._pointers import array_at
from .linalg import _shape_of, _size, _target_view, dot, matmul, numba_dot
from .reduction import AxisOp, expand_reduced
from .registry import ExecSpec, Op, call, host_values, public, run_key
from .shape import concatenate, swapaxes

SlogdetResult = collections.namedtuple("SlogdetResult", ["sign", "logabsdet"])
EighResult = collections.namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
SVDResult = collections.namedtuple("SVDResult", ["U", "S", "Vh"])
QRResult = collections.namedtuple("QRResult", ["Q", "R"])

LinAlgError = np.linalg.LinAlgError


# -- helpers ------------------------------------------------------------------------------------


def _compute_dtype(*arrays):
    """NumPy's linalg dtype: float32 where every input is float32, else float64."""
    dtype = np.result_type(*arrays)
    return dtype if dtype in (np.float32, np.float64) else np.dtype(np.float64)


def _float_arrays(values):
    """``values`` as C-contiguous arrays of their common float dtype (as they are where they
    already are: the common case, a few microseconds saved per op)."""
    first = values[0]
    dtype = getattr(first, "dtype", None)
    if dtype in _FLOATS and all(
        type(v) is np.ndarray and v.dtype == dtype and v.flags.c_contiguous for v in values
    ):
        return list(values)
    arrays = [np.asarray(v) for v in values]
    dtype = _compute_dtype(*arrays)
    return [np.ascontiguousarray(a, dtype=dtype) for a in arrays]


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _stacked(x, core):
    """``x`` viewed as ``(batch,) + core`` (a tuple), its leading dimensions flattened."""
    if x.size:
        return x.reshape((-1, *core))
    return x.reshape((_size(x.shape[: x.ndim - len(core)]), *core))


def _check_square(name, shape):
    if len(shape) < 2:
        raise LinAlgError(
            f"{name}: {len(shape)}-dimensional array given. Array must be at least "
            "two-dimensional"
        )
    if shape[-1] != shape[-2]:
        raise LinAlgError(f"{name}: Last 2 dimensions of the array must be square")


def _check_matrix(name, shape):
    if len(shape) < 2:
        raise LinAlgError(
            f"{name}: {len(shape)}-dimensional array given. Array must be at least "
            "two-dimensional"
        )


def _dtype_of(x):
    dtype = getattr(x, "dtype", None)
    if isinstance(dtype, np.dtype):
        return dtype
    return np.dtype(dtype) if dtype is not None else np.asarray(x).dtype


def _operands(name, *xs):
    """``xs`` on the CPU and in one floating dtype (NumPy's linalg rule), cast by recorded
    ``astype`` where they are not."""
    dtypes = []
    for x in xs:
        if getattr(x, "device", "cpu") != "cpu":
            raise NotImplementedError(
                f"{name} is not implemented for CUDA tensors (yet); move its operands to the "
                "CPU with .cpu()"
            )
        dtypes.append(_dtype_of(x))
    dtype = dtypes[0]
    if dtype not in _FLOATS or dtypes.count(dtype) != len(dtypes):
        dtype = _compute_dtype(*dtypes)
    return [x if d == dtype else call("astype", x, dtype=dtype) for x, d in zip(xs, dtypes)]


def _mT(x):
    """The matrices of ``x`` transposed (its last two axes swapped)."""
    return swapaxes(x, -1, -2)


def _eye_like(shape, dtype):
    """Identity matrices of ``shape`` (``(..., n, n)``), a constant array."""
    return np.broadcast_to(np.eye(shape[-1], dtype=dtype), shape)


def _accumulating(grad_input, shape, dtype):
    """``(target, done)``: ``grad_input`` viewed in ``shape`` where kernels can add into it,
    else a zeroed array, and ``done()`` adds that back."""
    target, copied = _target_view(grad_input, shape, dtype)

    def done():
        if copied:
            grad_input[...] += target.reshape(grad_input.shape)

    return target, done


def _work(shape):
    """The multiply-adds of a decomposition of matrices of ``shape``, roughly: ``batch * m *
    n * min(m, n)``."""
    m, n = shape[-2:]
    return _size(shape) * min(m, n)


def _blas_call(work, kernel, *args):
    """``kernel(*args)``, with OpenBLAS held at one thread below ``SPLIT_MIN_WORK``
    multiply-adds, as ``_bmm``'s forward: there waking its threads costs more than they save,
    and a woken thread spins on, taking a core from what runs next."""
    previous = hold_blas_threads() if work < SPLIT_MIN_WORK else None
    try:
        return kernel(*args)
    finally:
        release_blas_threads(previous)


#: A driver's int attributes (``_driver_ints``): ``_HEAD`` of the op's own, then the thread
#: controls of SciPy's OpenBLAS, LAPACK's (``_GET``, ``_SET``), then the LAPACK routines (from
#: ``_ROUTINES``).
_HEAD = 5
_GET, _SET, _ROUTINES = _HEAD, _HEAD + 1, _HEAD + 2


def _driver_ints(dtype, *head):
    """The int attributes of a driver of this family: ``head``, padded to ``_HEAD``, then
    OpenBLAS's thread controls and the addresses of ``_lapack.routines(dtype)``."""
    padding = (0,) * (_HEAD - len(head))
    routines = tuple(int(address) for address in _lapack.routines(dtype))
    return tuple(int(value) for value in head) + padding + LAPACK_THREAD_CONTROLS + routines


@njit(cache=True, nogil=True)
def _hold(ints, work):
    """``_blas_call``'s rule in a driver: OpenBLAS held at one thread below
    ``SPLIT_MIN_WORK`` multiply-adds; returns what ``release_blas_threads_at`` needs."""
    if work < SPLIT_MIN_WORK:
        return hold_blas_threads_at(ints[_GET], ints[_SET])
    return 0


class LinalgOp(Op):
    """Base of this family's ops: private, no public function or method of their own (the
    composites below are the public functions), CPU only."""

    family = "linalg"
    method = False
    #: No CUDA kernels: a CUDA tensor raises NotImplementedError naming the op.
    cpu_only = True

    def __init__(self):
        # The attrs ``prepare`` gives, per layout (shape, strides, dtype) of the arrays and
        # attrs: it checks and casts, a function of those alone.
        self._run_cache = {}
        super().__init__()

    #: The VJP kernel (``@njit``) and its NumPy twin (``Op.vjp_numpy``), which take the same
    #: arguments: :meth:`run_vjp` calls either.
    vjp_kernel = vjp_twin = None

    def make_function(self):
        return None

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        self.run_vjp(self.vjp_kernel, k, grad_output, saved, attrs, grad_input)

    def vjp_numpy(self, k, grad_output, saved, attrs, grad_input):
        self.run_vjp(self.vjp_twin, k, grad_output, saved, attrs, grad_input)

    def run_vjp(self, kernel, k, grad_output, saved, attrs, grad_input):
        """Add VJP ``k`` of ``grad_output`` into ``grad_input`` with ``kernel``."""
        raise NotImplementedError

    def run(self, arrays, attrs):
        key = run_key(attrs)
        if key is not None:
            key = (key, *[(a.shape, a.strides, a.dtype) for a in arrays])
            found = self._run_cache.get(key)
            if found is not None:
                return arrays, found, self.forward(arrays, found)
        return self.run_and_remember(key, arrays, attrs)


# -- LU: solve, inv, det, slogdet ---------------------------------------------------------------


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


@njit(cache=True, nogil=True)
def _slogdet_forward(packed, signs, logdets):
    """``signs[i]``, ``logdets[i]``: the sign and ``log|det|`` of the factored ``A_i``, as
    NumPy's: the sign from the pivots and the signs of ``U``'s diagonal, the logarithms
    summed in order; ``(0, -inf)`` where ``U`` has an exact zero. From Cholesky's factor
    (``_lapack.is_cholesky``): ``(1, 2 sum(log(diag(L))))``."""
    n = packed.shape[1]
    for i in range(packed.shape[0]):
        sign = 1.0
        logdet = 0.0
        if _lapack.is_cholesky(packed[i]):  # det = prod(diag(L))^2
            for j in range(n):
                logdet += np.log(packed[i, j, j])
            signs[i] = sign
            logdets[i] = 2 * logdet
            continue
        for j in range(n):
            u = packed[i, j, j]
            if int(packed[i, j, n]) != j + 1:
                sign = -sign
            if u < 0:
                sign = -sign
                u = -u
            elif u == 0:
                sign = 0.0
                logdet = -np.inf
                break
            logdet += np.log(u)
        signs[i] = sign
        logdets[i] = logdet


@njit(cache=True, nogil=True)
def _add_scaled_inverse_transpose(routines, packed, scale, grad):
    """``grad[i] += scale[i] * A_i^-T`` (``_lapack.lu_inverse`` of the factors); nan where
    ``A_i`` is exactly singular (no derivative of ``log|det|`` there)."""
    n = packed.shape[1]
    inverse = np.empty((n, n), dtype=grad.dtype)
    for i in range(packed.shape[0]):
        if scale[i] == 0:
            continue
        if _lapack.lu_singular(packed[i]):
            for r in range(n):
                for c in range(n):
                    grad[i, r, c] = np.nan
            continue
        _lapack.lu_inverse(routines, packed[i], inverse)
        if _lapack.is_cholesky(packed[i]):  # (symmetric)
            _lapack.add_scaled(grad[i], scale[i], inverse)
        else:
            _lapack.add_scaled_transpose(grad[i], scale[i], inverse)


def _add_scaled_inverse_transpose_numpy(routines, packed, scale, grad):
    """``_add_scaled_inverse_transpose``'s NumPy twin (``routines`` unused, as in
    ``_lu_solve_vjp_numpy``)."""
    n = packed.shape[1]
    inverse = np.empty((n, n), dtype=grad.dtype)
    for i in range(packed.shape[0]):
        if scale[i] == 0:
            continue
        if _twin.lu_singular(packed[i]):
            grad[i] = np.nan
            continue
        _twin.lu_inverse(packed[i], inverse)
        _add_inverse(grad[i], scale[i], inverse, packed[i])


def _add_inverse(grad, scale, inverse, packed):
    """``grad += scale * A^-T`` from ``A^-1``, as ``_lapack.add_scaled`` (where ``A`` is
    symmetric: Cholesky's factors) or ``_lapack.add_scaled_transpose`` add it."""
    if _twin.is_cholesky(packed):
        _twin.add_scaled(grad, scale, inverse)
    else:
        _twin.add_scaled_transpose(grad, scale, inverse)


@njit(cache=True, nogil=True)
def _slogdet_driver(operands, ints, floats, like):
    """The compiled executor's driver of ``_slogdet``'s VJP: ``ints`` is ``[batch, n]`` then
    ``_driver_ints``' tail; operands the gradient, the factors and the target."""
    batch, n = ints[0], ints[1]
    g = array_at(operands[0], batch, like)
    packed = array_at(operands[1], batch * n * (n + 1), like).reshape((batch, n, n + 1))
    grad = array_at(operands[2], batch * n * n, like).reshape((batch, n, n))
    held = _hold(ints, batch * n * n * n)
    _add_scaled_inverse_transpose(ints[_ROUTINES:], packed, g, grad)
    release_blas_threads_at(ints[_SET], held)


class SlogDet(LinalgOp):
    """``_slogdet(a, lu)``: ``log|det a|`` of ``a (..., n, n)`` from its factors (the sign,
    without a gradient, is ``slogdet``'s, from the factors too)."""

    name = "_slogdet"
    n_inputs = 2
    differentiable = (True, False)
    saves = (0, 1)

    def prepare(self, values, attrs):
        a, lu = _float_arrays(values)
        return [a, lu], {}

    def forward(self, arrays, attrs):
        _, lu = arrays
        n = lu.shape[-2]
        out = np.empty(lu.shape[:-2], dtype=lu.dtype)
        _slogdet_forward(_stacked(lu, (n, n + 1)), np.empty(out.size, dtype=lu.dtype),
                         out.reshape(-1))
        return out

    vjp_kernel = staticmethod(_add_scaled_inverse_transpose)
    vjp_twin = staticmethod(_add_scaled_inverse_transpose_numpy)

    def run_vjp(self, kernel, k, grad_output, saved, attrs, grad_input):
        lu = saved[1]
        n = lu.shape[-2]
        packed = _stacked(lu, (n, n + 1))
        scale = np.ascontiguousarray(grad_output, dtype=lu.dtype).reshape(-1)
        target, done = _accumulating(grad_input, (packed.shape[0], n, n), lu.dtype)
        _blas_call(_work(target.shape), kernel,
                   _lapack.routines(lu.dtype), packed, scale, target)
        done()

    def exec_spec(self, k, node):
        lu = node.saved_inputs[1]
        n = lu.shape[-2]
        if lu.dtype != node.dtype or not lu.size:
            return None
        return ExecSpec(_slogdet_driver, (lu,),
                        _driver_ints(lu.dtype, lu.size // (n * (n + 1)), n), ())

    def rule(self, k, grad_output, inputs, output, attrs):
        a, lu = inputs
        inverse_t = call("_lu_solve", a, lu, _eye_like(a.shape, a.dtype), transpose=True)
        return call("reshape", grad_output, shape=grad_output.shape + (1, 1)) * inverse_t


SlogDet()


@njit(cache=True, nogil=True)
def _det_forward(packed, out):
    """NumPy's determinant: ``sign * exp(log|det|)`` (``_slogdet_forward``)."""
    signs = np.empty(out.size, dtype=out.dtype)
    _slogdet_forward(packed, signs, out)
    for i in range(out.size):
        out[i] = signs[i] * np.exp(out[i])


@njit(cache=True, nogil=True)
def _cofactors(a):
    """The cofactor matrix of ``a`` (``adj(a).T``, which is ``det(a) a^-T``), valid for a
    singular ``a`` too: for ``a = U S V^T``, ``det(U) det(V) U diag(prod_{j!=i} s_j) V^T``."""
    u, s, vh = np.linalg.svd(a)
    n = s.size
    others = np.ones(n, dtype=a.dtype)
    run = 1.0
    for j in range(n):
        others[j] = run
        run *= s[j]
    run = 1.0
    for j in range(n - 1, -1, -1):
        others[j] *= run
        run *= s[j]
    sign = np.linalg.det(u) * np.linalg.det(vh)
    return sign * np.dot(u * others, vh)


@njit(cache=True, nogil=True)
def _det_vjp(routines, a, packed, det, g, grad):
    """``grad[i] += g[i] * det_i * A_i^-T``; the cofactors (``_cofactors``) where the
    determinant is 0 (singular, or below the smallest float)."""
    n = a.shape[1]
    inverse = np.empty((n, n), dtype=grad.dtype)
    for i in range(a.shape[0]):
        if g[i] == 0:
            continue
        if det[i] != 0 and np.isfinite(det[i]):
            _lapack.lu_inverse(routines, packed[i], inverse)
            if _lapack.is_cholesky(packed[i]):  # (symmetric)
                _lapack.add_scaled(grad[i], g[i] * det[i], inverse)
            else:
                _lapack.add_scaled_transpose(grad[i], g[i] * det[i], inverse)
        else:
            _lapack.add_scaled(grad[i], g[i], _cofactors(np.ascontiguousarray(a[i])))


def _det_vjp_numpy(routines, a, packed, det, g, grad):
    """``_det_vjp``'s NumPy twin where every determinant is finite and not 0 (the cofactors'
    SVD is numba's own: ``Det.has_vjp_numpy``)."""
    n = a.shape[1]
    inverse = np.empty((n, n), dtype=grad.dtype)
    for i in range(a.shape[0]):
        if g[i] == 0:
            continue
        _twin.lu_inverse(packed[i], inverse)
        _add_inverse(grad[i], g[i] * det[i], inverse, packed[i])


@njit(cache=True, nogil=True)
def _det_driver(operands, ints, floats, like):
    """The compiled executor's driver of ``_det``'s VJP: ``ints`` is ``[batch, n]`` then
    ``_driver_ints``' tail; operands the gradient, the matrices, their factors, the
    determinants and the target."""
    batch, n = ints[0], ints[1]
    g = array_at(operands[0], batch, like)
    a = array_at(operands[1], batch * n * n, like).reshape((batch, n, n))
    packed = array_at(operands[2], batch * n * (n + 1), like).reshape((batch, n, n + 1))
    det = array_at(operands[3], batch, like)
    grad = array_at(operands[4], batch * n * n, like).reshape((batch, n, n))
    held = _hold(ints, batch * n * n * n)
    _det_vjp(ints[_ROUTINES:], a, packed, det, g, grad)
    release_blas_threads_at(ints[_SET], held)


class Det(LinalgOp):
    """``_det(a, lu)``: the determinants of ``a (..., n, n)`` from their factors."""

    name = "_det"
    n_inputs = 2
    differentiable = (True, False)
    saves = (0, 1)
    saves_output = True

    def prepare(self, values, attrs):
        a, lu = _float_arrays(values)
        return [a, lu], {}

    def forward(self, arrays, attrs):
        _, lu = arrays
        n = lu.shape[-2]
        out = np.empty(lu.shape[:-2], dtype=lu.dtype)
        _det_forward(_stacked(lu, (n, n + 1)), out.reshape(-1))
        return out

    vjp_kernel = staticmethod(_det_vjp)
    vjp_twin = staticmethod(_det_vjp_numpy)

    def run_vjp(self, kernel, k, grad_output, saved, attrs, grad_input):
        a, lu = saved[0], saved[1]
        n = a.shape[-1]
        det = saved.output.reshape(-1)
        g = np.ascontiguousarray(grad_output, dtype=a.dtype).reshape(-1)
        target, done = _accumulating(grad_input, (det.size, n, n), a.dtype)
        _blas_call(_work(a.shape), kernel, _lapack.routines(a.dtype), _stacked(a, (n, n)),
                   _stacked(lu, (n, n + 1)), det, g, target)
        done()

    def has_vjp_numpy(self, k, saved, attrs):
        # (not where a determinant is 0 or infinite: the cofactors, from numba's SVD)
        det = saved.output
        return bool(np.isfinite(det).all() and (det != 0).all())

    def exec_spec(self, k, node):
        a, lu = node.saved_inputs
        det = node.saved_output
        n = a.shape[-1]
        if a.dtype != node.dtype or not a.size:
            return None
        return ExecSpec(_det_driver, (a, lu, det), _driver_ints(a.dtype, det.size, n), ())

    def rule(self, k, grad_output, inputs, output, attrs):
        a, lu = inputs
        inverse_t = call("_lu_solve", a, lu, _eye_like(a.shape, a.dtype), transpose=True)
        scale = grad_output * output
        return call("reshape", scale, shape=scale.shape + (1, 1)) * inverse_t


Det()


# -- Cholesky ---------------------------------------------------------------------------------


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


# -- eigh -------------------------------------------------------------------------------------

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
    # workspace queried and allocated in C.
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

    vjp_kernel = staticmethod(_eigh_vjp)
    vjp_twin = staticmethod(_eigh_vjp_numpy)

    def run_vjp(self, kernel, k, grad_output, saved, attrs, grad_input):
        packed = saved.output
        n = packed.shape[-1]
        g = _stacked(np.ascontiguousarray(grad_output, dtype=packed.dtype), (n + 1, n))
        target, done = _accumulating(grad_input, (g.shape[0], n, n), packed.dtype)
        _blas_call(_work(target.shape), kernel, g, _stacked(packed, (n + 1, n)), target)
        done()

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


def _expand(x, axis):
    return call("reshape", x, shape=_broadcast_axis(x.shape, axis))


def _broadcast_axis(shape, axis):
    shape = list(shape)
    shape.insert(len(shape) + 1 + axis if axis < 0 else axis, 1)
    return tuple(shape)


def _divide_or_zero(numerator, denominator):
    """``numerator / denominator`` and 0 where the denominator is 0, with derivatives free of
    nan (the division sees 1 there)."""
    zero = denominator == 0
    safe = call("where", zero, 1.0, denominator)
    return call("where", zero, 0.0, numerator / safe)


# -- svd --------------------------------------------------------------------------------------


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


# -- qr ---------------------------------------------------------------------------------------


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


# -- pinv -------------------------------------------------------------------------------------


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

    def rule(self, k, grad_output, inputs, output, attrs):
        (a,) = inputs
        p, g = output, grad_output
        pt, gt = _mT(p), _mT(g)
        total = -(pt @ g @ pt)
        total = total + (gt - a @ (p @ gt)) @ (p @ pt)
        return total + (pt @ p) @ (gt - (gt @ p) @ a)


Pinv()


# -- the 2-norm as a reduction ------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _norm2_forward(x, out):
    outer, n, inner = x.shape
    for o in range(outer):
        for k in range(inner):
            total = x.dtype.type(0)
            for j in range(n):
                v = x[o, j, k]
                total += v * v
            out[o, k] = np.sqrt(total)


@njit(cache=True, nogil=True)
def _norm2_vjp(g, x, y, gx):
    # x / |x|, and 0 at |x| = 0 (torch's subgradient there).
    outer, n, inner = x.shape
    for o in range(outer):
        for k in range(inner):
            if y[o, k] != 0:
                scale = g[o, k] / y[o, k]
                for j in range(n):
                    gx[o, j, k] += scale * x[o, j, k]


def _numpy_norm2_vjp(g, x, y, gx):
    scale = (g / y)[:, None, :]
    np.add(gx, scale * x, out=gx, where=(y != 0)[:, None, :], casting="unsafe")


class Norm2(AxisOp):
    """``_norm2(x, axis=None, keepdims=False)``: ``sqrt(sum(x * x))`` over ``axis``, with a
    zero gradient where the norm is 0."""

    name = "_norm2"
    family = "linalg"
    method = False
    cpu_only = True
    saves = (0,)
    saves_output = True
    forward_kernel = staticmethod(_norm2_forward)
    vjp_kernel = staticmethod(_norm2_vjp)
    numpy_vjp = staticmethod(_numpy_norm2_vjp)

    def rule(self, k, grad_output, inputs, output, attrs):
        g = expand_reduced(grad_output, attrs)
        y = expand_reduced(output, attrs)
        return g * _divide_or_zero(inputs[0], y)


Norm2()


# -- the public functions ---------------------------------------------------------------------


def _inv(a):
    """``inv(a)`` for a CPU Tensor of float dtype (the rules' and composites' own)."""
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
    a, b = _operands("linalg.solve", a, b)
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
        return call("_lu_solve", a, call("_lu", a), b)
    batch = _broadcast.broadcast_shapes(a_shape[:-2], b_shape[:-2])
    if a_shape[:-2] != batch:
        a = call("broadcast_to", a, shape=batch + a_shape[-2:])
    if b_shape[:-2] != batch:
        b = call("broadcast_to", b, shape=batch + b_shape[-2:])
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
    (a,) = _operands("linalg.inv", a)
    _check_square("linalg.inv", _shape_of(a))
    return _inv(a)


@public("linalg.det", method=False, family="linalg")
def det(a):
    """The determinants of the square matrices ``a (..., M, M)``, as ``numpy.linalg.det``.

    Notes
    -----
    The gradient is ``g * det(a) * inv(a)^T``, and at a singular matrix the cofactor matrix
    (computed from an SVD), as torch's. The differentiable rule (``create_graph=True``) needs
    an invertible ``a``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> a = anb.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> anb.linalg.det(a)
    tensor(-2., grad_fn=<DetBackward>)
    >>> anb.grad(anb.linalg.det(a), a)
    (tensor([[ 4., -3.],
            [-2.,  1.]]),)
    """
    (a,) = _operands("linalg.det", a)
    _check_square("linalg.det", _shape_of(a))
    return call("_det", a, call("_lu", a))


@public("linalg.slogdet", method=False, family="linalg")
def slogdet(a):
    """Sign and natural logarithm of the absolute determinant, as ``numpy.linalg.slogdet``.

    Parameters
    ----------
    a : Tensor or array_like, shape (..., M, M)

    Returns
    -------
    SlogdetResult
        ``(sign, logabsdet)``, a named tuple of Tensors of shape (...). ``sign`` has no
        gradient (it is piecewise constant); ``logabsdet``'s gradient is ``g * inv(a)^T``
        (nan at a singular matrix, where ``logabsdet`` is ``-inf``).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> a = anb.tensor([[2.0, 1.0], [1.0, -3.0]], requires_grad=True)
    >>> sign, logabsdet = anb.linalg.slogdet(a)
    >>> sign, logabsdet
    (tensor(-1.), tensor(1.94591015, grad_fn=<SlogdetBackward>))
    >>> anb.grad(logabsdet, a)
    (tensor([[ 0.42857143,  0.14285714],
            [ 0.14285714, -0.28571429]]),)
    """
    (a,) = _operands("linalg.slogdet", a)
    _check_square("linalg.slogdet", _shape_of(a))
    lu = call("_lu", a)
    logabsdet = call("_slogdet", a, lu)
    factors = host_values(lu)
    n = factors.shape[-2]
    signs = np.empty(logabsdet.shape, dtype=factors.dtype)
    _slogdet_forward(_stacked(factors, (n, n + 1)), signs.reshape(-1),
                     np.empty(signs.size, dtype=factors.dtype))
    return SlogdetResult(_constant_like(signs), logabsdet)  # (the sign: no gradient)


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
    (a,) = _operands("linalg.cholesky", a)
    _check_square("linalg.cholesky", _shape_of(a))
    if upper:
        return _mT(call("_cholesky", _mT(a)))
    return call("_cholesky", a)


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
    (a,) = _operands("linalg.eigh", a)
    _check_square("linalg.eigh", _shape_of(a))
    if UPLO not in ("L", "U"):
        raise ValueError("UPLO argument must be 'L' or 'U'")
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
    (a,) = _operands("linalg.svd", a)
    shape = _shape_of(a)
    _check_matrix("linalg.svd", shape)
    m, n = shape[-2:]
    full = bool(full_matrices) and compute_uv and m != n
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
    (a,) = _operands("linalg.qr", a)
    shape = _shape_of(a)
    _check_matrix("linalg.qr", shape)
    m, n = shape[-2:]
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"linalg.qr: unrecognized mode {mode!r} (supported: 'reduced', "
                         "'complete', 'r')")
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


def _constant_like(array):
    """The NumPy ``array`` as a Tensor without grad (``astype`` to its own dtype: reshape's
    shape checks cost 10 us a call where this costs 1.5)."""
    return call("astype", array, dtype=array.dtype)


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
    (full rank, or singular values far from the cut-off).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.linalg.pinv(anb.tensor([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]]))
    tensor([[1. , 0. , 0. ],
            [0. , 0.5, 0. ]])
    """
    (a,) = _operands("linalg.pinv", a)
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
    return call("_pinv", a, rcond=float(rcond))


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
        empty.
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
    a, b = _operands("linalg.lstsq", a, b)
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
        residuals = call("sum", residual * residual, axis=0)
        if len(b_shape) == 1:
            residuals = call("reshape", residuals, shape=(1,))
    else:
        residuals = _constant_like(np.zeros(0, dtype=_dtype_of(x)))
    return x, residuals, rank, s


@public("linalg.matrix_power", method=False, family="linalg")
def matrix_power(a, n):
    """``a`` raised to the integer power ``n``, as ``numpy.linalg.matrix_power``.

    Repeated squaring with :func:`matmul`; ``n = 0`` gives identities (constant) and ``n < 0``
    powers of :func:`inv`.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> a = anb.tensor([[1.0, 1.0], [0.0, 1.0]], requires_grad=True)
    >>> anb.linalg.matrix_power(a, 3)
    tensor([[1., 3.],
            [0., 1.]], grad_fn=<BmmBackward>)
    """
    try:
        n = operator.index(n)
    except TypeError as error:
        raise TypeError("exponent must be an integer") from error
    shape = _shape_of(a)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        _check_square("linalg.matrix_power", shape)
    if n == 0:
        return _constant_like(np.array(_eye_like(shape, _dtype_of(a))))
    if n < 0:
        a = inv(a)
        n = -n
    result, square = None, a
    while True:
        if n & 1:
            result = square if result is None else matmul(result, square)
        n >>= 1
        if not n:
            break
        square = matmul(square, square)
    return call("reshape", result, shape=shape) if result is a else result


@public("linalg.multi_dot", method=False, family="linalg")
def multi_dot(arrays, *, out=None):
    """The product of two or more matrices in the cheapest order, as
    ``numpy.linalg.multi_dot``.

    The first argument may be 1-D (a row vector) and the last 1-D (a column vector); the
    others must be 2-D. The order of the products is chosen by NumPy's dynamic programme on
    the shapes.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.linalg.multi_dot([anb.ones((2, 3)), anb.ones((3, 4)), anb.ones(4)])
    tensor([12., 12.])
    """
    if out is not None:
        raise TypeError("linalg.multi_dot: out= is not supported (Tensors are not written "
                        "in place)")
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError("Expecting at least two arrays.")
    if len(arrays) == 2:
        return dot(arrays[0], arrays[1])
    first, last = _shape_of(arrays[0]), _shape_of(arrays[-1])
    if len(first) == 1:
        arrays[0] = call("reshape", arrays[0], shape=(1,) + first)
    if len(last) == 1:
        arrays[-1] = call("reshape", arrays[-1], shape=last + (1,))
    shapes = [_shape_of(x) for x in arrays]
    for shape in shapes:
        if len(shape) != 2:
            raise LinAlgError(f"{len(shape)}-dimensional array given. Array must be "
                              "two-dimensional")
    order = _chain_order([s[0] for s in shapes] + [shapes[-1][1]])
    return _drop_vector_ends(_chain_product(arrays, order, 0, len(arrays) - 1), first, last)


def _drop_vector_ends(result, first, last):
    """``multi_dot``'s ``result`` without the axes a 1-D ``first`` or ``last`` operand (of
    these shapes) was given."""
    if len(first) == 1 and len(last) == 1:
        return call("reshape", result, shape=())
    if len(first) == 1:
        return call("reshape", result, shape=result.shape[1:])
    if len(last) == 1:
        return call("reshape", result, shape=result.shape[:1])
    return result


def _chain_order(sizes):
    """NumPy's matrix-chain order: ``split[i][j]``, where to split the product ``i..j``."""
    count = len(sizes) - 1
    cost = [[0] * count for _ in range(count)]
    split = [[0] * count for _ in range(count)]
    for length in range(1, count):
        for i in range(count - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + sizes[i] * sizes[k + 1] * sizes[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain_product(arrays, split, i, j):
    if i == j:
        return arrays[i]
    k = split[i][j]
    return matmul(_chain_product(arrays, split, i, k), _chain_product(arrays, split, k + 1, j))


# -- norms ------------------------------------------------------------------------------------


def _float_operand(name, x):
    """``x`` as a float Tensor (integers become float64, as NumPy's norms make them)."""
    if getattr(x, "device", "cpu") == "cpu":
        (x,) = _operands(name, x)
    elif _dtype_of(x).kind != "f":
        x = call("astype", x, dtype=np.float64)
    return x


def _norm2(x, axis, keepdims):
    """``sqrt(sum(x * x))`` over ``axis``: the ``_norm2`` op on the CPU, the same from
    elementwise ops and ``sum`` (which have CUDA kernels) elsewhere."""
    if getattr(x, "device", "cpu") == "cpu":
        return call("_norm2", x, axis=axis, keepdims=keepdims)
    total = call("sum", x * x, axis=axis, keepdims=keepdims)
    return _root_or_zero(total, 2.0)


def _root_or_zero(total, p):
    """``total ** (1 / p)``, with a zero gradient where ``total`` is 0."""
    zero = total == 0
    return call("where", zero, 0.0, call("where", zero, 1.0, total) ** (1.0 / p))


def _vector_norm(x, ord, axis, keepdims):  # noqa: A002 - NumPy's name
    if ord is None or ord == 2:
        return _norm2(x, axis, keepdims)
    if isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    if ord == np.inf:
        return call("max", call("abs", x), axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return call("min", call("abs", x), axis=axis, keepdims=keepdims)
    if ord == 0:  # the count of nonzeros: no gradient
        return call("sum", call("astype", x != 0, dtype=_dtype_of(x)), axis=axis,
                    keepdims=keepdims)
    if ord == 1:
        return call("sum", call("abs", x), axis=axis, keepdims=keepdims)
    p = float(ord)
    return _root_or_zero(call("sum", call("abs", x) ** p, axis=axis, keepdims=keepdims), p)


def _matrix_norm(x, ord, row, column, keepdims):  # noqa: A002 - NumPy's name
    ndim = len(_shape_of(x))
    kept_shape = list(_shape_of(x))
    kept_shape[row] = kept_shape[column] = 1
    if ord in (2, -2, "nuc"):
        others = [d for d in range(ndim) if d not in (row, column)]
        values = svdvals(call("transpose", x, axes=tuple(others) + (row, column)))
        reduce = {2: "max", -2: "min", "nuc": "sum"}[ord]
        result = call(reduce, values, axis=-1)
    elif ord in (1, -1):
        column -= column > row
        summed = call("sum", call("abs", x), axis=row)
        result = call("max" if ord == 1 else "min", summed, axis=column)
    elif ord in (np.inf, -np.inf):
        row -= row > column
        summed = call("sum", call("abs", x), axis=column)
        result = call("max" if ord == np.inf else "min", summed, axis=row)
    elif ord in (None, "fro", "f"):
        return _norm2(x, (row, column), keepdims)
    else:
        raise ValueError("Invalid norm order for matrices.")
    if keepdims:
        result = call("reshape", result, shape=tuple(kept_shape))
    return result


@public("linalg.norm", method=False, family="linalg")
def norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002 - NumPy's name
    """Vector or matrix norm, as ``numpy.linalg.norm``.

    Parameters
    ----------
    x : Tensor or array_like
    ord : {None, 'fro', 'nuc', inf, -inf, 0, 1, -1, 2, -2} or float, optional
        Vectors: ``None``/2 the 2-norm, ``inf``/``-inf`` the largest/smallest absolute
        value, 0 the number of nonzeros (no gradient), other ``p``
        ``sum(abs(x) ** p) ** (1 / p)``. Matrices: ``None``/'fro' Frobenius, 'nuc' the sum
        of the singular values, 2/-2 the largest/smallest singular value, 1/-1 and
        ``inf``/``-inf`` the largest/smallest absolute column/row sum.
    axis : None, int or 2-tuple of int, optional
        None: ``x`` is 1-D or 2-D (or ``ord`` is None: the 2-norm of all elements); an int:
        vector norms along it; two: matrix norms over them.
    keepdims : bool, optional

    Returns
    -------
    Tensor

    Notes
    -----
    The 2-norm's gradient is ``x / norm(x)``, and 0 where the norm is 0 (as torch's
    subgradient); so are the gradients of the other ``p``-norms there. The matrix 2-norms
    and the nuclear norm are differentiable through :func:`svd`'s singular values.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([3.0, 4.0], requires_grad=True)
    >>> anb.linalg.norm(x)
    tensor(5., grad_fn=<Norm2Backward>)
    >>> anb.grad(anb.linalg.norm(x), x)
    (tensor([0.6, 0.8]),)
    >>> anb.grad(anb.linalg.norm(x * 0.0), x)
    (tensor([0., 0.]),)
    >>> anb.linalg.norm(anb.tensor([[1.0, -2.0], [3.0, 4.0]]), ord=1)
    tensor(6.)
    """
    x = _float_operand("linalg.norm", x)
    ndim = len(_shape_of(x))
    if axis is None:
        flat = ord is None or (ord in ("f", "fro") and ndim == 2) or (ord == 2 and ndim == 1)
        if flat:
            return _norm2(x, None, keepdims)
        axis = tuple(range(ndim))
    elif not isinstance(axis, tuple):
        axis = (operator.index(axis),)
    if len(axis) == 1:
        return _vector_norm(x, ord, axis[0], keepdims)
    if len(axis) == 2:
        row, column = (_broadcast.normalize_axis(a, ndim)[0] for a in axis)
        if row == column:
            raise ValueError("Duplicate axes given.")
        return _matrix_norm(x, ord, row, column, keepdims)
    raise ValueError("Improper number of dimensions to norm.")


@public("linalg.vector_norm", method=False, family="linalg")
def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):  # noqa: A002 - NumPy's name
    """Vector norms over ``axis`` (None: all elements, as one vector; a tuple: those axes
    together), as ``numpy.linalg.vector_norm``; orders as :func:`norm`'s for vectors.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.linalg.vector_norm(anb.tensor([[3.0, 0.0], [0.0, -4.0]]), ord=1)
    tensor(7.)
    """
    x = _float_operand("linalg.vector_norm", x)
    shape = _shape_of(x)
    axes = _broadcast.normalize_axis(axis, len(shape))
    if len(axes) == 1 or not shape:
        return _vector_norm(x, ord, axes[0] if axes else None, keepdims)
    kept = [d for d in range(len(shape)) if d not in axes]
    moved = call("transpose", x, axes=tuple(kept) + axes)
    merged = call("reshape", moved, shape=tuple(shape[d] for d in kept) + (-1,))
    result = _vector_norm(merged, ord, -1, False)
    if keepdims:
        result = call("reshape", result, shape=_broadcast.reduced_shape(shape, axes, True))
    return result


@public("linalg.matrix_norm", method=False, family="linalg")
def matrix_norm(x, /, *, keepdims=False, ord="fro"):  # noqa: A002 - NumPy's name
    """Matrix norms over the last two axes, as ``numpy.linalg.matrix_norm``; orders as
    :func:`norm`'s for matrices.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.linalg.matrix_norm(anb.tensor([[3.0, 0.0], [0.0, -4.0]]), ord="nuc")
    tensor(7.)
    """
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


# -- numpy.linalg's versions of top-level functions ---------------------------------------------


@public("linalg.matrix_transpose", method=False, family="linalg")
def matrix_transpose(x, /):
    """The matrices of ``x (..., M, N)`` transposed, as ``numpy.linalg.matrix_transpose``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.linalg.matrix_transpose(anb.ones((2, 3, 4))).shape
    (2, 4, 3)
    """
    if len(_shape_of(x)) < 2:
        raise ValueError("Input array must be at least 2-dimensional")
    return _mT(x)


@public("linalg.vecdot", method=False, family="linalg")
def vecdot(x1, x2, /, *, axis=-1):
    """Dot products of vectors along ``axis`` (broadcasting), as ``numpy.linalg.vecdot``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.linalg.vecdot(anb.tensor([[1.0, 2.0], [3.0, 4.0]]), anb.tensor([1.0, 1.0]))
    tensor([3., 7.])
    """
    return call("sum", call("multiply", x1, x2), axis=axis)
