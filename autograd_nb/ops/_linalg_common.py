"""What ``anb.linalg``'s decompositions share: their operands' checks and casts, ``LinalgOp``
(their ops' base), the layout of their drivers' ints, and the helpers of their rules.

``anb.linalg``: NumPy's ``numpy.linalg`` functions, differentiable and batched over leading
axes as NumPy's are. They are public as ``"linalg.<name>"``, which :mod:`autograd_nb.linalg`
shows as ``anb.linalg.<name>``. One module per family, each with its ops and its public
functions:

- ``linalg_lu``: ``_lu``, ``_lu_solve``; ``solve``, ``inv``.
- ``linalg_det``: ``_slogdet``, ``_det`` (from ``_lu``'s factors); ``det``, ``slogdet``.
- ``linalg_cholesky``: ``_cholesky``; ``cholesky``.
- ``linalg_eigh``: ``_eigh``; ``eigh``, ``eigvalsh``.
- ``linalg_svd``: ``_svd``; ``svd``, ``svdvals``.
- ``linalg_qr``: ``_qr``; ``qr``.
- ``linalg_pinv``: ``_pinv``; ``pinv``, ``lstsq``.
- ``linalg_norms``: ``_norm2``; ``norm``, ``vector_norm``, ``matrix_norm``.
- ``linalg_products``: composites of ``matmul`` and ``inv``: ``matrix_power``, ``multi_dot``;
  and ``matrix_transpose``, ``vecdot``.

``_eigh``, ``_svd``, ``_qr`` have several outputs. An op has one result, so these return
their outputs packed in one array and the public function takes them apart with ``getitem``
(and ``reshape``): one decomposition per call, and one VJP that sees the gradients of all the
outputs at once (an output left unused contributes zeros).

Forward kernels run numba's LAPACK-backed ``np.linalg``, or SciPy's LAPACK through ``_lapack``
(the LU and Cholesky factors), per matrix of the batch. The VJP kernels are ``@njit`` too:
their matrix products are ``_lapack``'s and numba's ``np.dot`` (SciPy's BLAS, LAPACK's), where
NumPy's ``matmul`` would wake NumPy's own BLAS thread pool beside it. The differentiable ops
give the compiled executor drivers of the same kernels (``exec_spec``), so a backward through
them is one compiled call, and every op gives ``anb.compile``'s programs a driver of its
forward kernel (``forward_spec``). A forward that eager raises from (a singular matrix, one
that is not positive definite, an inf or nan that numba's LAPACK wrappers refuse, no
convergence) sets a flag instead (``_set_flag``, ``_failing_spec``): the program checks it
after its table, keeps nothing, and records fn again, eagerly, which raises.

Every op has a differentiable rule written with autograd_nb ops (for ``create_graph=True``).
Complex matrices go to ``linalg_complex``'s ops (NumPy's LAPACK; ``pinv`` and ``lstsq`` of a
complex matrix raise TypeError). CUDA tensors raise ``NotImplementedError`` naming the
function.
"""

import numpy as np
from numba import njit

from . import _lapack, registry
from ._blas import (
    SPLIT_MIN_WORK,
    hold_blas_threads,
    hold_blas_threads_at,
    lapack_thread_controls,
    release_blas_threads,
)
from ._pointers import array_at
from .linalg import _size, _target_view
from .registry import Op, call, run_key
from .shape import swapaxes

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


def _operands(name, *xs, complex_ok=False):
    """``xs`` on the CPU and in one floating dtype (NumPy's linalg rule), cast by recorded
    ``astype`` where they are not. With ``complex_ok``, complex operands are accepted and all
    are cast to their common complex dtype (complex64 from complex64 and float32 alone, else
    complex128, as NumPy's); without, a complex operand raises TypeError naming ``name``."""
    dtypes = []
    for x in xs:
        if getattr(x, "device", "cpu") != "cpu":
            raise NotImplementedError(
                f"{name} is not implemented for CUDA tensors (yet); move its operands to the "
                "CPU with .cpu()"
            )
        dtypes.append(_dtype_of(x))
    complex_dtypes = [d for d in dtypes if d.kind == "c"]
    if complex_dtypes and not complex_ok:
        raise registry.complex_error(name, complex_dtypes[0])  # (not yet: docs/complex.rst)
    dtype = dtypes[0]
    if complex_dtypes:
        dtype = np.result_type(*dtypes)
        dtype = dtype if dtype == np.complex64 else np.dtype(np.complex128)
    elif dtype not in _FLOATS or dtypes.count(dtype) != len(dtypes):
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
    return (tuple(int(value) for value in head) + padding + lapack_thread_controls()
            + routines)


@njit(cache=True, nogil=True)
def _hold(ints, work):
    """``_blas_call``'s rule in a driver: OpenBLAS held at one thread below
    ``SPLIT_MIN_WORK`` multiply-adds; returns what ``release_blas_threads_at`` needs."""
    if work < SPLIT_MIN_WORK:
        return hold_blas_threads_at(ints[_GET], ints[_SET])
    return 0


_FLAG = np.empty(0, dtype=np.uint8)


@njit(cache=True, nogil=True)
def _set_flag(address, failed):
    """A failing forward driver's flag (``Op.forward_spec``): 1 where it ``failed``, else
    0."""
    array_at(address, 1, _FLAG)[0] = 1 if failed else 0


def _failing_spec(driver, ints, floats=()):
    """A forward spec whose driver may fail where eager raises (its operands the inputs, a
    flag it sets, and the output: ``Op.forward_spec``)."""
    return driver, ints, floats, True


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

    def _run(self, arrays, attrs):
        key = run_key(attrs)
        if key is not None:
            key = (key, *[(a.shape, a.strides, a.dtype) for a in arrays])
            found = self._run_cache.get(key)
            if found is not None:
                return arrays, found, self.forward(arrays, found)
        return self._run_and_remember(key, arrays, attrs)


# -- helpers of the rules and composites ------------------------------------------------------


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


def _constant_like(array):
    """The NumPy ``array`` as a Tensor without grad (``astype`` to its own dtype: reshape's
    shape checks cost 10 us a call where this costs 1.5)."""
    return call("astype", array, dtype=array.dtype)
