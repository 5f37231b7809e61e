"""SciPy's BLAS reached from compiled code: the GEMM function pointers, a GEMM that adds into
its output (``gemm_add``), and the same GEMM in column blocks over numba's threads
(``gemm_add_split``).

Threads follow numba (``NUMBA_NUM_THREADS``, ``numba.set_num_threads``), not OpenBLAS: the split
GEMM is a ``prange`` over blocks of output columns, each one single-threaded BLAS call, and
OpenBLAS's own thread count is held at one while it runs (``hold_blas_threads``, restored by
``release_blas_threads``): with OpenBLAS and numba at two threads each, their threads took
the cores from each other (``compare.py --workloads jacobian_batched``; docs/benchmarking.rst,
"How the tunables were chosen").

Where the OpenBLAS thread controls are not found (another BLAS behind SciPy), nothing is held
and BLAS keeps its own threading.

Every product takes a *kernel pair*, two arguments (``gemm, tiles = product_kernel(dtype)``):
the BLAS GEMM's pointer and the address of ``_gemm``'s own AVX-512 kernel where that does the
product instead (0: BLAS; ``config.GEMM_KERNEL``, by default where the CPU has AVX-512 and the
BLAS runs kernels without it: see ``own_kernel_preferred``).
"""

import ctypes

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import get_cython_function_address, intrinsic

from .. import config
from ._gemm import own_fits, own_gemm_add, tiles_address

# The pointers are arguments of the compiled functions, not globals, so numba still caches
# those on disk.
_GEMM_TYPE = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 13))
GEMM = {
    np.dtype(np.float64): _GEMM_TYPE(
        get_cython_function_address("scipy.linalg.cython_blas", "dgemm")
    ),
    np.dtype(np.float32): _GEMM_TYPE(
        get_cython_function_address("scipy.linalg.cython_blas", "sgemm")
    ),
}

_BLAS_CALLS = {}


def blas_function(name, dtype):
    """SciPy's BLAS ``?dot``, ``?gemv`` or ``?gemm`` (``name``: "dot", "gemv", "gemm") for
    ``dtype``, the one numba's ``np.dot`` calls, by ctypes, every argument an address (tier 0's
    products, ``linalg._numba_dot``)."""
    dtype = np.dtype(dtype)
    if name == "gemm":
        return GEMM[dtype]
    key = ("s" if dtype == np.float32 else "d") + name
    function = _BLAS_CALLS.get(key)
    if function is None:
        scalar = ctypes.c_float if dtype == np.float32 else ctypes.c_double
        result, count = (scalar, 5) if name == "dot" else (None, 11)
        prototype = ctypes.CFUNCTYPE(result, *[ctypes.c_void_p] * count)
        address = get_cython_function_address("scipy.linalg.cython_blas", key)
        function = _BLAS_CALLS[key] = prototype(address)
    return function


class ByAddress:
    """Arguments of a call from Python to a ``blas_function`` (Fortran: every argument an
    address): each value made here lives as long as this object, so keep it until the call
    returns. ``scalar`` values are of ``dtype`` (float32 or float64)."""

    def __init__(self, dtype):
        self._scalar = ctypes.c_float if np.dtype(dtype) == np.float32 else ctypes.c_double
        self._kept = []

    def _at(self, value):
        self._kept.append(value)
        return ctypes.addressof(value)

    def int(self, value):
        return self._at(ctypes.c_int(value))

    def char(self, value):
        return self._at(ctypes.c_char(value))

    def scalar(self, value):
        return self._at(self._scalar(value))


# ``config.GEMM_SPLIT_*``, read once, at import: numba compiles them into the functions below,
# and the Python callers read these copies so that both agree.
SPLIT_MIN_WORK = config.GEMM_SPLIT_MIN_WORK
SPLIT_WIDTH = config.GEMM_SPLIT_WIDTH
SPLIT_MAX_BLOCKS = config.GEMM_SPLIT_MAX_BLOCKS

#: Blocks start at multiples of this many columns. BLAS kernels step over rows and columns in
#: groups of a fixed width (4 to 16 in OpenBLAS's x86 kernels) and a leftover group runs an
#: edge kernel that may sum in another order: a block edge inside a group changes the last
#: bits around it (measured: float64 row blocks of 21 rows).
SPLIT_ALIGN = 16


@njit(cache=True, nogil=True)
def gemm_add(gemm, tiles, x, transpose_x, y, transpose_y, out):
    """``out += x' @ y'``, where ``x'`` is ``x`` or ``x.T`` (``y'`` likewise), by the kernel
    pair ``gemm, tiles`` (``product_kernel``): ``_gemm``'s own kernel where ``tiles`` is not 0
    and ``out`` is large enough for its tiles (``_gemm.own_fits``), else BLAS.

    Every operand is a 2-D array whose rows are contiguous (any row stride). BLAS is
    column-major: the row-major ``out`` is its ``out.T = y'.T @ x'.T``, which swaps the
    operands and reads each stored matrix as its own transpose.
    """
    if _added_without_blas(tiles, x, transpose_x, y, transpose_y, out):
        return
    ints, flags, one = _blas_arguments(x, transpose_x, y, transpose_y, out)
    gemm(
        flags[0:1].ctypes,
        flags[1:2].ctypes,
        ints[0:1].ctypes,
        ints[1:2].ctypes,
        ints[2:3].ctypes,
        one.ctypes,
        y.ctypes,
        ints[3:4].ctypes,
        x.ctypes,
        ints[4:5].ctypes,
        one.ctypes,
        out.ctypes,
        ints[5:6].ctypes,
    )


@njit(cache=True, nogil=True)
def gemm_add_at(address, tiles, x, transpose_x, y, transpose_y, out):
    """``gemm_add`` with BLAS's GEMM given by its address (``gemm_address``): for drivers,
    which receive it among their int attributes. Adds into ``out`` directly (BLAS's beta is
    1), with no product buffer and no second pass over ``out``."""
    if _added_without_blas(tiles, x, transpose_x, y, transpose_y, out):
        return
    ints, flags, one = _blas_arguments(x, transpose_x, y, transpose_y, out)
    at, f, o = ints.ctypes.data, flags.ctypes.data, one.ctypes.data
    _call_gemm_at(address, f, f + 1, at, at + 4, at + 8, o, y.ctypes.data, at + 12,
                  x.ctypes.data, at + 16, o, out.ctypes.data, at + 20)


@njit(cache=True, nogil=True)
def _added_without_blas(tiles, x, transpose_x, y, transpose_y, out):
    """``out += x' @ y'`` where it needs no BLAS call (an empty product, or one that
    ``_gemm``'s own kernel takes: see ``gemm_add``), and whether it did."""
    rows, columns = out.shape
    depth = x.shape[0] if transpose_x else x.shape[1]
    if rows == 0 or columns == 0 or depth == 0:
        return True
    if tiles != 0 and own_fits(out):
        own_gemm_add(x, transpose_x, y, transpose_y, out, tiles)
        return True
    return False


@njit(cache=True, nogil=True)
def _blas_arguments(x, transpose_x, y, transpose_y, out):
    """The sizes and leading dimensions (int32), the transpositions (``"T"``/``"N"``) and
    the scalar 1 (alpha and beta) of ``gemm_add``'s BLAS call."""
    rows, columns = out.shape
    item = out.itemsize
    ints = np.empty(6, dtype=np.int32)
    ints[0] = columns
    ints[1] = rows
    ints[2] = x.shape[0] if transpose_x else x.shape[1]
    ints[3] = max(y.strides[0] // item, y.shape[1], 1)
    ints[4] = max(x.strides[0] // item, x.shape[1], 1)
    ints[5] = max(out.strides[0] // item, columns, 1)
    flags = np.empty(2, dtype=np.uint8)
    flags[0] = 84 if transpose_y else 78  # "T" or "N"
    flags[1] = 84 if transpose_x else 78
    return ints, flags, np.ones(1, dtype=out.dtype)


@intrinsic
def _call_gemm_at(typingctx, address, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12):
    """Call the Fortran GEMM at ``address`` with its 13 pointer arguments."""

    def codegen(context, builder, signature, args):
        pointer = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [pointer] * 13)
        target = builder.inttoptr(args[0], fnty.as_pointer())
        builder.call(target, [builder.inttoptr(a, pointer) for a in args[1:]])
        return context.get_dummy_value()

    return types.void(*([types.int64] * 14)), codegen


_GEMM_ADDRESS = {dtype: ctypes.cast(gemm, ctypes.c_void_p).value for dtype, gemm in GEMM.items()}


def gemm_address(dtype):
    """The address of SciPy's GEMM for ``dtype`` (float32 or float64), for ``gemm_add_at``."""
    return _GEMM_ADDRESS[np.dtype(dtype)]


@njit(cache=True, nogil=True)
def split_blocks(length, work):
    """How many blocks ``gemm_add_split`` cuts ``length`` output columns into, for a product of
    ``work`` multiply-adds: a function of the shape alone, never of the thread count, so every
    thread count computes the same blocks and gives the same bits (BLAS may choose its kernel
    by the product's size: float32 results changed in the last bits when one call became
    two)."""
    if work < SPLIT_MIN_WORK:
        return 1
    return max(1, min(SPLIT_MAX_BLOCKS, length // SPLIT_WIDTH))


@njit(cache=True, nogil=True)
def block_start(length, blocks, p):
    """Where block ``p`` of ``blocks`` starts: a multiple of ``SPLIT_ALIGN`` (or ``length``)."""
    if p >= blocks:
        return length
    return length * p // blocks // SPLIT_ALIGN * SPLIT_ALIGN


@njit(cache=True, nogil=True)
def _gemm_add_block(gemm, tiles, x, y, transpose_y, out, blocks, p):
    """Block ``p`` of ``blocks`` of ``gemm_add_split``'s product."""
    columns = out.shape[1]
    start = block_start(columns, blocks, p)
    stop = block_start(columns, blocks, p + 1)
    part = y[start:stop] if transpose_y else y[:, start:stop]
    gemm_add(gemm, tiles, x, False, part, transpose_y, out[:, start:stop])


@njit(cache=True, nogil=True, parallel=True)
def _gemm_add_blocks(gemm, tiles, x, y, transpose_y, out, blocks):
    for p in prange(blocks):
        _gemm_add_block(gemm, tiles, x, y, transpose_y, out, blocks, p)


@njit(cache=True, nogil=True)
def gemm_add_split(gemm, tiles, x, y, transpose_y, out, parallel):
    """``out += x @ y'`` (``y'``: ``y`` or ``y.T``) as ``gemm_add``, in blocks of output
    columns (``split_blocks``) run as a ``prange`` over numba's threads where ``parallel``
    (see ``_parallel.parallel_allowed``), else one after the other on this thread; the same
    bits at every thread count and on this thread. Call between ``hold_blas_threads`` and
    ``release_blas_threads``.
    """
    blocks = split_blocks(out.shape[1], out.shape[0] * x.shape[1] * out.shape[1])
    if blocks == 1:
        gemm_add(gemm, tiles, x, False, y, transpose_y, out)
    elif parallel:
        _gemm_add_blocks(gemm, tiles, x, y, transpose_y, out, blocks)
    else:
        for p in range(blocks):
            _gemm_add_block(gemm, tiles, x, y, transpose_y, out, blocks, p)


# -- OpenBLAS's own thread count ---------------------------------------------------------------


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def _blas_library():
    """The shared library that holds SciPy's ``dgemm`` (found by its address), or None."""
    try:
        dladdr = ctypes.CDLL(None).dladdr
    except (OSError, AttributeError):  # no dladdr (Windows)
        return None
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    info = _DlInfo()
    address = get_cython_function_address("scipy.linalg.cython_blas", "dgemm")
    if not dladdr(ctypes.c_void_p(address), ctypes.byref(info)) or not info.dli_fname:
        return None
    try:
        return ctypes.CDLL(info.dli_fname.decode())
    except OSError:
        return None


def _thread_controls():
    """OpenBLAS's ``(get_num_threads, set_num_threads)`` in SciPy's BLAS, or ``(None, None)``.

    SciPy's wheels prefix OpenBLAS's symbols (``scipy_openblas_...``, with ``64_`` after them
    in the ILP64 build)."""
    library = _blas_library()
    if library is None:
        return None, None
    for prefix in ("scipy_openblas", "openblas"):
        for suffix in ("", "64_"):
            get = getattr(library, f"{prefix}_get_num_threads{suffix}", None)
            set_ = getattr(library, f"{prefix}_set_num_threads{suffix}", None)
            if get is not None and set_ is not None:
                get.argtypes, get.restype = [], ctypes.c_int
                set_.argtypes, set_.restype = [ctypes.c_int], None
                return get, set_
    return None, None


_get_blas_threads, _set_blas_threads = _thread_controls()


def hold_blas_threads():
    """Set OpenBLAS's own thread count to one; returns what ``release_blas_threads`` needs to
    restore it (``None``: nothing to restore)."""
    if _get_blas_threads is None:
        return None
    previous = _get_blas_threads()
    if previous == 1:
        return None
    _set_blas_threads(1)
    return previous


def release_blas_threads(previous):
    """Undo ``hold_blas_threads``."""
    if previous is not None:
        _set_blas_threads(previous)


def _address(function):
    return 0 if function is None else ctypes.cast(function, ctypes.c_void_p).value


#: The addresses of OpenBLAS's ``(get_num_threads, set_num_threads)`` (0 where not found), for
#: compiled code that holds the thread count itself (``hold_blas_threads_at``): the compiled
#: forward's drivers, which no Python runs around.
THREAD_CONTROLS = (_address(_get_blas_threads), _address(_set_blas_threads))


@intrinsic
def _call_get(typingctx, address):
    """Call the C function ``int f(void)`` at ``address``."""

    def codegen(context, builder, signature, args):
        function_type = ir.FunctionType(ir.IntType(32), [])
        result = builder.call(builder.inttoptr(args[0], function_type.as_pointer()), [])
        return builder.sext(result, ir.IntType(64))

    return types.int64(types.int64), codegen


@intrinsic
def _call_set(typingctx, address, value):
    """Call the C function ``void f(int)`` at ``address`` with ``value``."""

    def codegen(context, builder, signature, args):
        function_type = ir.FunctionType(ir.VoidType(), [ir.IntType(32)])
        target = builder.inttoptr(args[0], function_type.as_pointer())
        builder.call(target, [builder.trunc(args[1], ir.IntType(32))])
        return context.get_dummy_value()

    return types.void(types.int64, types.int64), codegen


@njit(cache=True, nogil=True)
def hold_blas_threads_at(get, set_):
    """``hold_blas_threads`` from compiled code, through the addresses ``THREAD_CONTROLS``;
    returns what ``release_blas_threads_at`` needs (0: nothing to restore)."""
    if get == 0 or set_ == 0:
        return 0
    previous = _call_get(get)
    if previous == 1:
        return 0
    _call_set(set_, 1)
    return previous


@njit(cache=True, nogil=True)
def release_blas_threads_at(set_, previous):
    """Undo ``hold_blas_threads_at``."""
    if previous != 0:
        _call_set(set_, previous)


# -- which kernel does a product ---------------------------------------------------------------

#: OpenBLAS's names (``openblas_get_corename``) of the x86 kernel sets that use AVX-512.
AVX512_CORES = ("skylakex", "cooperlake", "sapphirerapids")


def _blas_core():
    """The name of the kernel set SciPy's OpenBLAS runs (``Haswell``, ``SkylakeX``, ...), or
    None where it is not OpenBLAS."""
    library = _blas_library()
    if library is None:
        return None
    for name in ("scipy_openblas_get_corename", "scipy_openblas_get_corename64_",
                 "openblas_get_corename"):
        function = getattr(library, name, None)
        if function is not None:
            function.argtypes, function.restype = [], ctypes.c_char_p
            core = function()
            return core.decode() if core else None
    return None


def _compiles_for_avx512():
    """Whether numba compiles for a CPU with AVX-512: the host's features, or those named by
    ``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES`` (a portable ``generic`` build has none)."""
    import llvmlite.binding as llvm
    from numba.core import config as numba_config

    if numba_config.CPU_FEATURES is not None:
        return "+avx512f" in numba_config.CPU_FEATURES.split(",")
    if numba_config.CPU_NAME not in (None, "host"):
        return False
    return bool(llvm.get_host_cpu_features().get("avx512f", False))


#: What ``"auto"`` chose, worked out once: the own kernel where numba compiles for AVX-512 and
#: SciPy's OpenBLAS runs a kernel set without it.
_AUTO = None


def own_kernel_preferred():
    """Whether products go to ``_gemm``'s own kernel, by ``config.GEMM_KERNEL``: ``"own"``,
    ``"blas"``, or ``"auto"`` (own where numba compiles for AVX-512 and SciPy's OpenBLAS runs
    kernels without it, e.g. under ``OPENBLAS_CORETYPE=Haswell`` on an AVX-512 CPU)."""
    global _AUTO
    choice = config.GEMM_KERNEL
    if choice == "own":
        return True
    if choice == "blas":
        return False
    if choice != "auto":
        raise ValueError(
            f"autograd_nb.config.GEMM_KERNEL must be 'auto', 'own' or 'blas', got {choice!r}"
        )
    if _AUTO is None:
        core = _blas_core()
        _AUTO = bool(
            core is not None and core.lower() not in AVX512_CORES and _compiles_for_avx512()
        )
    return _AUTO


def own_kernel(dtype, own=None):
    """The address of ``_gemm``'s tiles for ``dtype`` where the own kernel does the products
    (``own``, by default ``own_kernel_preferred()``), else 0: the ``tiles`` argument of the
    compiled products."""
    if own is None:
        own = own_kernel_preferred()
    return tiles_address(dtype) if own else 0


def product_kernel(dtype, own=None):
    """The kernel pair every product of ``dtype`` (float32 or float64) takes: ``(SciPy's
    GEMM, own_kernel(dtype, own))``."""
    return GEMM[np.dtype(dtype)], own_kernel(dtype, own)
