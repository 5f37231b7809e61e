"""BLAS reached from compiled code: the GEMM that every product calls, a GEMM that adds into its
output (``gemm_add``), the same GEMM in column blocks over numba's threads (``gemm_add_split``),
and the BLAS libraries' own thread counts.

**Which BLAS.** Products call the GEMM of :data:`PRODUCTS`, chosen once at import by
``config.BLAS``: by default (``"auto"``) Intel MKL where its runtime library is installed (the
``mkl`` extra, a conda environment) and the CPU is Intel's, else the OpenBLAS that NumPy's
wheel bundles where there is one (``numpy.libs``, ``numpy/.dylibs``), else SciPy's
(``scipy.linalg.cython_blas``). Here MKL ran ``mlp_train_step``'s products 6% faster than
NumPy's OpenBLAS, and NumPy's, the newer build, 3% faster than SciPy's (docs/benchmarking.rst,
"Intel MKL for the products", "Which BLAS does the products"). Everything else, numba's
``np.dot``, LAPACK and their NumPy twins, stays on SciPy's (:func:`scipy_blas`). A product and
its tier-0 twin always call the same library, so they give the same bits. SciPy's is looked up
when first needed: importing ``scipy.linalg`` costs 0.12 s (docs/benchmarking.rst, "Import
time"), which a process that runs no LAPACK routine never pays.

MKL runs its threads on GNU OpenMP where that loads (:func:`_choose_mkl_threads`), which is not
fork-safe: a child forked from such a process runs MKL on one thread and numba's kernels as
their serial twins (:func:`_serial_mkl_in_child`).

NumPy's OpenBLAS has 64-bit integer arguments (ILP64) and SciPy's 32-bit ones. The compiled
callers store every integer argument as an int64; a 32-bit library reads its first four bytes,
which on a little-endian machine (every machine numba compiles for) hold the same value.

Threads follow numba (``NUMBA_NUM_THREADS``, ``numba.set_num_threads``), not OpenBLAS: the split
GEMM is a ``prange`` over blocks of output columns, each one single-threaded BLAS call, and
OpenBLAS's own thread count (of every OpenBLAS loaded here) is held at one while it runs
(``hold_blas_threads``, restored by ``release_blas_threads``): with OpenBLAS and numba at two
threads each, their threads took the cores from each other (``compare.py --workloads
jacobian_batched``; docs/benchmarking.rst, "How the tunables were chosen").

MKL's thread count is held the same way (``MKL_Get_Max_Threads``, ``MKL_Set_Num_Threads``).
Where no thread controls are found (another BLAS), nothing is held and BLAS keeps its own
threading.

Every product takes a *kernel pair*, two arguments (``gemm, tiles = product_kernel(dtype)``):
the address of :data:`PRODUCTS`' GEMM and the address of ``_gemm``'s own AVX-512 kernel where
that does the product instead (0: BLAS; ``config.GEMM_KERNEL``, by default where the CPU has
AVX-512 and the BLAS runs kernels without it: see ``own_kernel_preferred``).
"""

import ctypes
import functools
import glob
import os
import platform
import sys
from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import get_cython_function_address, intrinsic

from .. import config
from . import _parallel
from ._gemm import own_fits, own_gemm_add, tiles_address

_FLOATS = (np.dtype(np.float64), np.dtype(np.float32))


class Blas(NamedTuple):
    """A BLAS library as the products use it."""

    #: ``"mkl"`` (Intel MKL), ``"numpy"`` (NumPy's bundled OpenBLAS) or ``"scipy"`` (SciPy's
    #: ``cython_blas``).
    name: str
    #: dtype (float64, float32) -> the address of its Fortran ``?gemm``.
    gemm: dict
    #: Whether its integer arguments are 64-bit (ILP64).
    int64: bool
    #: OpenBLAS's ``get_num_threads``, ``set_num_threads`` and ``get_corename`` (ctypes
    #: functions; MKL's first two), or None where the library has none.
    get_threads: object
    set_threads: object
    get_core: object


def _function(library, names, restype, argtypes=()):
    """The first of ``names`` that ``library`` exports, as a ctypes function, or None."""
    for name in names:
        function = getattr(library, name, None) if library is not None else None
        if function is not None:
            function.argtypes, function.restype = list(argtypes), restype
            return function
    return None


def _openblas_controls(library, suffixes):
    """``(get_num_threads, set_num_threads, get_corename)`` of an OpenBLAS (None each where
    absent). Wheels prefix OpenBLAS's symbols (``scipy_openblas_...``), with ``64_`` after them
    in the ILP64 build."""
    def names(what):
        return [f"{prefix}_{what}{suffix}" for prefix in ("scipy_openblas", "openblas")
                for suffix in suffixes]

    get = _function(library, names("get_num_threads"), ctypes.c_int)
    set_ = _function(library, names("set_num_threads"), None, [ctypes.c_int])
    if get is None or set_ is None:
        get = set_ = None
    return get, set_, _function(library, names("get_corename"), ctypes.c_char_p)


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def _library_at(address):
    """The shared library that holds ``address`` (by ``dladdr``), or None."""
    try:
        dladdr = ctypes.CDLL(None).dladdr
    except (OSError, AttributeError):  # no dladdr (Windows)
        return None
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    info = _DlInfo()
    if not dladdr(ctypes.c_void_p(address), ctypes.byref(info)) or not info.dli_fname:
        return None
    try:
        return ctypes.CDLL(info.dli_fname.decode())
    except OSError:
        return None


@functools.cache
def scipy_blas():
    """SciPy's BLAS (``scipy.linalg.cython_blas``: 32-bit integers), imported at the first
    call."""
    gemm = {dtype: get_cython_function_address("scipy.linalg.cython_blas", f"{kind}gemm")
            for dtype, kind in zip(_FLOATS, "ds")}
    library = _library_at(gemm[_FLOATS[0]])
    return Blas("scipy", gemm, False, *_openblas_controls(library, ("", "64_")))


def _numpy_blas():
    """The OpenBLAS that NumPy's wheel bundles (``scipy-openblas64``: symbols ``scipy_dgemm_64_``
    ..., 64-bit integers), or None where NumPy has none of its own (a build against a system
    BLAS, Accelerate or MKL)."""
    package = os.path.dirname(np.__file__)
    patterns = (os.path.join(package + ".libs", "*openblas*"),
                os.path.join(package, ".dylibs", "*openblas*"))
    for path in sorted(p for pattern in patterns for p in glob.glob(pattern)):
        try:
            library = ctypes.CDLL(path)  # (already loaded by NumPy: the same instance)
        except OSError:
            continue
        for symbol, suffixes, int64 in (("scipy_{}gemm_64_", ("64_",), True),
                                        ("{}gemm_64_", ("64_", "64"), True)):
            names = [symbol.format(kind) for kind in "ds"]
            if all(hasattr(library, name) for name in names):
                gemm = {dtype: ctypes.cast(getattr(library, name), ctypes.c_void_p).value
                        for dtype, name in zip(_FLOATS, names)}
                return Blas("numpy", gemm, int64, *_openblas_controls(library, suffixes))
    return None


def _mkl_paths():
    """Where an Intel MKL runtime library (``libmkl_rt``) may be: the ``mkl`` wheel's (in the
    environment's ``lib``, ``Library/bin`` on Windows) or a conda environment's."""
    prefixes = dict.fromkeys(p for p in (sys.prefix, sys.base_prefix,
                                         os.environ.get("CONDA_PREFIX")) if p)
    patterns = ("lib/libmkl_rt.so*", "lib/libmkl_rt*.dylib", "Library/bin/mkl_rt*.dll")
    return [path for prefix in prefixes for pattern in patterns
            for path in sorted(glob.glob(os.path.join(prefix, pattern)), reverse=True)]


def _mkl_blas():
    """Intel MKL through its runtime library (:func:`_mkl_paths`), or None where there is none.
    Its integer arguments are 32-bit (the LP64 interface, asked for before MKL's first call; 64-bit
    where MKL had already started with ILP64); MKL's own threads are held at one as
    OpenBLAS's are (``MKL_Get_Max_Threads``, ``MKL_Set_Num_Threads``)."""
    for path in _mkl_paths():
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        names = ("dgemm_", "sgemm_")
        if not all(hasattr(library, name) for name in names):
            continue
        if not _choose_mkl_threads(library, path):
            continue  # (before any other MKL call: a library skipped is left as it was)
        gemm = {dtype: ctypes.cast(getattr(library, name), ctypes.c_void_p).value
                for dtype, name in zip(_FLOATS, names)}
        layer = _function(library, ["MKL_Set_Interface_Layer"], ctypes.c_int, [ctypes.c_int])
        # (0 asks for LP64 and the layer in effect comes back: bit 0 set for ILP64)
        int64 = layer is not None and layer(0) & 1 == 1
        get = _function(library, ["MKL_Get_Max_Threads"], ctypes.c_int)
        set_ = _function(library, ["MKL_Set_Num_Threads"], None, [ctypes.c_int])
        return Blas("mkl", gemm, int64, get, set_, None)
    return None


#: ``mkl_set_threading_layer``'s codes, by the names ``MKL_THREADING_LAYER`` takes.
_MKL_LAYERS = {"INTEL": 0, "SEQUENTIAL": 1, "PGI": 2, "GNU": 3, "TBB": 4}
_MKL_GNU, _MKL_SEQUENTIAL = _MKL_LAYERS["GNU"], _MKL_LAYERS["SEQUENTIAL"]
#: The threading layer MKL runs (its code), where this module chose or read it; None before.
mkl_threading = None


def _choose_mkl_threads(library, path):
    """Pick MKL's threading layer before its first call; whether this MKL may be used.

    ``MKL_THREADING_LAYER``, where set, is kept. Else, on Linux, GNU OpenMP (``libgomp``,
    numba's ``omp`` layer's own runtime) where it loads, else sequential: MKL's default,
    Intel's OpenMP, ran a 128 x 128 float32 product in 144 us at two threads where GNU's took
    56 (OpenBLAS 72; docs/benchmarking.rst, "Intel MKL for the products"). MKL ends the
    process where a layer's library does not load, so a layer is asked for only where its
    library is beside ``path`` (None of them: False, and the products take OpenBLAS). Elsewhere
    MKL keeps its default. Records the layer in effect in :data:`mkl_threading` (a child forked
    under GNU's runs MKL on one thread: :func:`_serial_mkl_in_child`)."""
    global mkl_threading
    named = os.environ.get("MKL_THREADING_LAYER")
    if named:
        mkl_threading = _MKL_LAYERS.get(named.upper())
        return True
    set_layer = _function(library, ["MKL_Set_Threading_Layer"], ctypes.c_int, [ctypes.c_int])
    if set_layer is None or not sys.platform.startswith("linux"):
        return True
    choices = [(_MKL_SEQUENTIAL, "libmkl_sequential.so*")]
    try:
        ctypes.CDLL("libgomp.so.1")
        choices.insert(0, (_MKL_GNU, "libmkl_gnu_thread.so*"))
    except OSError:
        pass
    folder = os.path.dirname(path)
    for code, pattern in choices:
        if glob.glob(os.path.join(folder, pattern)):
            mkl_threading = set_layer(code)
            return True
    return False


def _serial_mkl_in_child():
    """GNU OpenMP is not fork-safe (see ``_parallel``): in a child forked from a process whose
    MKL ran threads under it, the first threaded product hung, and so did the first numba
    ``prange`` under numba's ``omp`` layer (the same runtime). Whether MKL's threads ran is
    not known here, so every child forked while MKL runs on that layer runs MKL on one thread
    and numba's kernels as their serial twins, as after numba's own threads (``_parallel``;
    numba's ``tbb`` layer, started, has threads of its own)."""
    if PRODUCTS.name != "mkl" or mkl_threading != _MKL_GNU:
        return
    if PRODUCTS.set_threads is not None:
        PRODUCTS.set_threads(1)
    if _parallel._layer() not in _parallel.FORK_SAFE_LAYERS:
        _parallel._forked_with_threads = True


def _intel_cpu():
    """Whether this CPU is Intel's (MKL runs its fastest kernels there)."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("vendor_id"):
                    return "GenuineIntel" in line
    except OSError:
        pass
    return "intel" in platform.processor().lower()


def _products_blas(choice, scipy):
    """The BLAS of the products by ``config.BLAS`` (``choice``); ``scipy()`` gives SciPy's."""
    if choice not in ("auto", "mkl", "numpy", "scipy"):
        raise ValueError(
            f"autograd_nb.config.BLAS must be 'auto', 'mkl', 'numpy' or 'scipy', got {choice!r}"
        )
    if choice == "scipy" or sys.byteorder != "little":  # (see the module docstring)
        return scipy()
    if choice == "mkl" or (choice == "auto" and _intel_cpu()):
        found = _mkl_blas()
        if found is not None:
            return found
        if choice == "mkl":
            raise RuntimeError(
                "autograd_nb.config.BLAS is 'mkl', but no Intel MKL runtime (libmkl_rt) was "
                "found in this environment; pip install 'autograd_nb[mkl]', or use 'auto'"
            )
    found = _numpy_blas()
    if found is None and choice == "numpy":
        raise RuntimeError(
            "autograd_nb.config.BLAS is 'numpy', but this NumPy bundles no OpenBLAS of its "
            "own; use 'auto' or 'scipy'"
        )
    return scipy() if found is None else found


#: The BLAS every product calls (``config.BLAS``, read once, at import).
PRODUCTS = _products_blas(config.BLAS, scipy_blas)
_GEMM_TYPE = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 13))
_GEMM_FUNCTIONS = {}


def gemm_function(dtype, blas=None):
    """``(function, int_type)``: the GEMM of ``blas`` (a :class:`Blas`, by default
    :data:`PRODUCTS`) for ``dtype`` as a ctypes function, every argument an address, and the
    ctypes type of its integer arguments (calls from Python: tier 0's twins)."""
    blas = PRODUCTS if blas is None else blas
    key = (blas.name, np.dtype(dtype))
    function = _GEMM_FUNCTIONS.get(key)
    if function is None:
        function = _GEMM_FUNCTIONS[key] = _GEMM_TYPE(blas.gemm[key[1]])
    return function, ctypes.c_int64 if blas.int64 else ctypes.c_int


_BLAS_CALLS = {}


def blas_function(name, dtype):
    """SciPy's BLAS ``?dot``, ``?gemv`` or ``?gemm`` (``name``: "dot", "gemv", "gemm") for
    ``dtype``, the one numba's ``np.dot`` calls, by ctypes, every argument an address (the
    twins of numba's ``np.dot``, ``linalg._numba_dot``; 32-bit integers)."""
    dtype = np.dtype(dtype)
    key = ("s" if dtype == np.float32 else "d") + name
    function = _BLAS_CALLS.get(key)
    if function is None:
        scalar = ctypes.c_float if dtype == np.float32 else ctypes.c_double
        result, count = (scalar, 5) if name == "dot" else (None, {"gemv": 11, "gemm": 13}[name])
        prototype = ctypes.CFUNCTYPE(result, *[ctypes.c_void_p] * count)
        address = get_cython_function_address("scipy.linalg.cython_blas", key)
        function = _BLAS_CALLS[key] = prototype(address)
    return function


class ByAddress:
    """Arguments of a call from Python to a ``blas_function`` or a ``gemm_function`` (Fortran:
    every argument an address): each value made here lives as long as this object, so keep it
    until the call returns. ``scalar`` values are of ``dtype`` (float32 or float64), ``int``
    ones of ``int_type`` (``gemm_function``'s second value for its GEMM)."""

    def __init__(self, dtype, int_type=ctypes.c_int):
        self._scalar = ctypes.c_float if np.dtype(dtype) == np.float32 else ctypes.c_double
        self._int = int_type
        self._kept = []

    def _at(self, value):
        self._kept.append(value)
        return ctypes.addressof(value)

    def int(self, value):
        return self._at(self._int(value))

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
    and ``out`` is large enough for its tiles (``_gemm.own_fits``), else the BLAS GEMM at the
    address ``gemm`` (``gemm_address``), with beta 1: no product buffer and no second pass over
    ``out``.

    Every operand is a 2-D array whose rows are contiguous (any row stride). BLAS is
    column-major: the row-major ``out`` is its ``out.T = y'.T @ x'.T``, which swaps the
    operands and reads each stored matrix as its own transpose.
    """
    if _added_without_blas(tiles, x, transpose_x, y, transpose_y, out):
        return
    _call_gemm(gemm, x, transpose_x, y, transpose_y, out, 1.0)


@njit(cache=True, nogil=True)
def gemm_set(gemm, tiles, x, transpose_x, y, transpose_y, out):
    """``out[...] = x' @ y'`` by the kernel pair ``gemm, tiles`` as ``gemm_add`` chooses it:
    BLAS with beta 0 (BLAS clears ``out`` itself, as NumPy's and numba's products do), or
    ``out`` cleared and the own kernel's product added."""
    if _empty(x, transpose_x, out):
        out[:] = 0
    elif tiles != 0 and own_fits(out):
        out[:] = 0
        own_gemm_add(x, transpose_x, y, transpose_y, out, tiles)
    else:
        _call_gemm(gemm, x, transpose_x, y, transpose_y, out, 0.0)


@njit(cache=True, nogil=True)
def _call_gemm(gemm, x, transpose_x, y, transpose_y, out, beta):
    """The BLAS call of ``gemm_add`` (``beta`` 1) and ``gemm_set`` (``beta`` 0)."""
    ints, flags, scalars = _blas_arguments(x, transpose_x, y, transpose_y, out, beta)
    at, f, s = ints.ctypes.data, flags.ctypes.data, scalars.ctypes.data
    step = scalars.itemsize
    _call_gemm_at(gemm, f, f + 1, at, at + 8, at + 16, s, y.ctypes.data, at + 24,
                  x.ctypes.data, at + 32, s + step, out.ctypes.data, at + 40)


@njit(cache=True, nogil=True)
def _empty(x, transpose_x, out):
    """Whether ``out = x' @ y'`` has no multiply-add."""
    rows, columns = out.shape
    depth = x.shape[0] if transpose_x else x.shape[1]
    return rows == 0 or columns == 0 or depth == 0


@njit(cache=True, nogil=True)
def _added_without_blas(tiles, x, transpose_x, y, transpose_y, out):
    """``out += x' @ y'`` where it needs no BLAS call (an empty product, or one that
    ``_gemm``'s own kernel takes: see ``gemm_add``), and whether it did."""
    if _empty(x, transpose_x, out):
        return True
    if tiles != 0 and own_fits(out):
        own_gemm_add(x, transpose_x, y, transpose_y, out, tiles)
        return True
    return False


@njit(cache=True, nogil=True)
def _blas_arguments(x, transpose_x, y, transpose_y, out, beta):
    """The sizes and leading dimensions (int64: see the module docstring), the transpositions
    (``"T"``/``"N"``) and the scalars alpha (1) and ``beta`` of a GEMM call."""
    rows, columns = out.shape
    item = out.itemsize
    ints = np.empty(6, dtype=np.int64)
    ints[0] = columns
    ints[1] = rows
    ints[2] = x.shape[0] if transpose_x else x.shape[1]
    ints[3] = max(y.strides[0] // item, y.shape[1], 1)
    ints[4] = max(x.strides[0] // item, x.shape[1], 1)
    ints[5] = max(out.strides[0] // item, columns, 1)
    flags = np.empty(2, dtype=np.uint8)
    flags[0] = 84 if transpose_y else 78  # "T" or "N"
    flags[1] = 84 if transpose_x else 78
    scalars = np.empty(2, dtype=out.dtype)
    scalars[0] = 1.0
    scalars[1] = beta
    return ints, flags, scalars


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


def gemm_address(dtype):
    """The address of :data:`PRODUCTS`' GEMM for ``dtype`` (float32 or float64): the ``gemm``
    argument of ``gemm_add``."""
    return PRODUCTS.gemm[np.dtype(dtype)]


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


# -- the BLAS libraries' own thread counts -----------------------------------------------------


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_serial_mkl_in_child)

def libraries():
    """The BLAS libraries in use, each once: :data:`PRODUCTS`' and, once SciPy's BLAS is
    loaded (by LAPACK's callers or numba's ``np.dot``), :func:`scipy_blas`'."""
    if "scipy.linalg.cython_blas" not in sys.modules:
        return (PRODUCTS,)
    scipy = scipy_blas()
    return (PRODUCTS,) if PRODUCTS is scipy else (PRODUCTS, scipy)


def hold_blas_threads():
    """Set the own thread count of every BLAS in use (:func:`libraries`) to one; returns
    what ``release_blas_threads`` needs to restore them (``None``: nothing to restore)."""
    held = None
    for blas in libraries():
        if blas.get_threads is None:
            continue
        previous = blas.get_threads()
        if previous != 1:
            blas.set_threads(1)
            held = (held or []) + [(blas, previous)]
    return held


def release_blas_threads(previous):
    """Undo ``hold_blas_threads``."""
    if previous is not None:
        for blas, count in previous:
            blas.set_threads(count)


def _address(function):
    return 0 if function is None else ctypes.cast(function, ctypes.c_void_p).value


#: The addresses of :data:`PRODUCTS`' ``(get_num_threads, set_num_threads)`` (0 where
#: not found), for compiled code that holds the thread count itself (``hold_blas_threads_at``):
#: the compiled forward's products, which no Python runs around.
THREAD_CONTROLS = (_address(PRODUCTS.get_threads), _address(PRODUCTS.set_threads))


@functools.cache
def lapack_thread_controls():
    """:data:`THREAD_CONTROLS` of SciPy's BLAS, whose LAPACK the decompositions' drivers
    call."""
    scipy = scipy_blas()
    return _address(scipy.get_threads), _address(scipy.set_threads)


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
    """The name of the kernel set :data:`PRODUCTS`' OpenBLAS runs (``Haswell``, ``SkylakeX``,
    ...), or None where it is not OpenBLAS."""
    if PRODUCTS.get_core is None:
        return None
    core = PRODUCTS.get_core()
    return core.decode() if core else None


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
#: the products' OpenBLAS runs a kernel set without it.
_AUTO = None


def own_kernel_preferred():
    """Whether products go to ``_gemm``'s own kernel, by ``config.GEMM_KERNEL``: ``"own"``,
    ``"blas"``, or ``"auto"`` (own where numba compiles for AVX-512 and the products' OpenBLAS
    runs kernels without it, e.g. under ``OPENBLAS_CORETYPE=Haswell`` on an AVX-512 CPU)."""
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
    """The kernel pair every product of ``dtype`` (float32 or float64) takes: ``(gemm_address
    (dtype), own_kernel(dtype, own))``."""
    return gemm_address(dtype), own_kernel(dtype, own)
