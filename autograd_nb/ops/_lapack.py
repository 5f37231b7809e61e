"""SciPy's LAPACK and BLAS routines that numba's ``np.linalg`` does not expose, reached from
compiled code: the LU factorisation (``getrf``), solves and the inverse with it (``getrs``,
``getri``) and triangular solves (``trsm``).

``np.linalg.solve`` inside ``@njit`` factors its matrix and drops the factors. Keeping them
lets ``linalg.solve``'s backward, ``slogdet``'s and ``det``'s reuse the forward's
factorisation, as torch does: a backward then costs ``O(n^2 k)`` (solve) or one ``getrs`` with
``n`` right-hand sides (the inverse for ``slogdet``), not a second factorisation.

Layout. Every array here is row-major, and LAPACK is column-major: a row-major ``A`` is the
column-major ``A.T``. :func:`lu_factor_into` therefore factors ``F = A.T`` in place (no
transposing copy); ``A x = b`` is then ``F.T x = b`` (``getrs`` with ``"T"``), and
``A.T x = b`` is ``F x = b`` (``"N"``). The factors live in a packed row-major ``(n, n + 1)``
array: ``[:, :n]`` the LU factors (column-major ``F``, leading dimension ``n + 1``), ``[:, n]``
the pivots as floats (exact below 2^24 even in float32).

The routines take their LAPACK function as an argument (the ``*_FUNCTIONS`` dicts, by dtype),
not as a global, so numba still caches the compiled callers on disk (as ``_blas`` does).
"""

import ctypes

import numpy as np
from numba import njit
from numba.extending import get_cython_function_address

_GETRF_TYPE = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 6))
_GETRS_TYPE = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 9))
_GETRI_TYPE = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 7))
_TRSM_TYPE = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 11))


def _pointers(module, name, kind):
    return {
        np.dtype(np.float64): kind(get_cython_function_address(module, "d" + name)),
        np.dtype(np.float32): kind(get_cython_function_address(module, "s" + name)),
    }


GETRF = _pointers("scipy.linalg.cython_lapack", "getrf", _GETRF_TYPE)
GETRS = _pointers("scipy.linalg.cython_lapack", "getrs", _GETRS_TYPE)
GETRI = _pointers("scipy.linalg.cython_lapack", "getri", _GETRI_TYPE)
TRSM = _pointers("scipy.linalg.cython_blas", "trsm", _TRSM_TYPE)

_N = 78  # "N"
_T = 84  # "T"
_L = 76  # "L"
_R = 82  # "R"
_U = 85  # "U"


@njit(cache=True, nogil=True)
def lu_factor_into(getrf, a, packed):
    """Factor the square ``a`` into ``packed`` (``(n, n + 1)``, see the module docstring).
    Returns LAPACK's ``info``: 0, or ``j > 0`` where ``U[j - 1, j - 1]`` is exactly zero (the
    factorisation is still complete: the matrix is singular)."""
    n = a.shape[0]
    packed[:, :n] = a
    if n == 0:
        return 0
    ints = np.empty(3, dtype=np.int32)
    ints[0] = n
    ints[1] = n + 1
    ints[2] = 0
    pivots = np.empty(n, dtype=np.int32)
    getrf(ints[0:1].ctypes, ints[0:1].ctypes, packed.ctypes, ints[1:2].ctypes, pivots.ctypes,
          ints[2:3].ctypes)
    for j in range(n):
        packed[j, n] = pivots[j]
    return ints[2]


@njit(cache=True, nogil=True)
def lu_solve_into(getrs, packed, b, out, transpose):
    """``out = A^-1 b`` (``A.T^-1 b`` where ``transpose``), with ``A`` factored in ``packed``;
    ``b`` and ``out`` ``(n, k)``, row-major (``out`` may be ``b``)."""
    n, k = b.shape
    if n == 0 or k == 0:
        out[...] = 0
        return
    # Column-major (n, k) right-hand sides: the row-major (k, n) transpose.
    work = np.ascontiguousarray(b.T)
    pivots = np.empty(n, dtype=np.int32)
    for j in range(n):
        pivots[j] = np.int32(packed[j, n])
    ints = np.empty(4, dtype=np.int32)
    ints[0] = n
    ints[1] = k
    ints[2] = n + 1
    ints[3] = 0
    flag = np.empty(1, dtype=np.uint8)
    flag[0] = _N if transpose else _T  # packed holds A.T: see the module docstring
    getrs(flag.ctypes, ints[0:1].ctypes, ints[1:2].ctypes, packed.ctypes, ints[2:3].ctypes,
          pivots.ctypes, work.ctypes, ints[0:1].ctypes, ints[3:4].ctypes)
    out[...] = work.T


@njit(cache=True, nogil=True)
def lu_inverse_transpose(getri, packed, out):
    """``out = A^-T`` (row-major ``(n, n)``) from the factors of ``A`` in ``packed``:
    ``getri`` inverts the stored ``F = A.T`` in place (``4 n^3 / 3`` flops, where ``getrs``
    against the identity takes ``2 n^3``), and the row-major reading of the column-major
    ``F^-1`` is its transpose, ``A^-1``."""
    n = packed.shape[0]
    if n == 0:
        return
    work = np.ascontiguousarray(packed[:, :n])
    pivots = np.empty(n, dtype=np.int32)
    for j in range(n):
        pivots[j] = np.int32(packed[j, n])
    ints = np.empty(3, dtype=np.int32)
    ints[0] = n
    ints[1] = max(64 * n, 1)  # LAPACK's block size (ilaenv's 64) times n: the optimal lwork
    ints[2] = 0
    scratch = np.empty(ints[1], dtype=packed.dtype)
    getri(ints[0:1].ctypes, work.ctypes, ints[0:1].ctypes, pivots.ctypes, scratch.ctypes,
          ints[1:2].ctypes, ints[2:3].ctypes)
    out[...] = work.T


@njit(cache=True, nogil=True)
def lu_singular(packed):
    """Whether the factored matrix is exactly singular (a zero on ``U``'s diagonal)."""
    for j in range(packed.shape[0]):
        if packed[j, j] == 0:
            return True
    return False


@njit(cache=True, nogil=True)
def triangular_solve(trsm, a, b, left, lower, transpose):
    """Solve in place, ``b`` becoming ``op(a)^-1 b`` (``left``) or ``b op(a)^-1``, where
    ``op(a)`` is ``a`` or ``a.T`` and ``a`` is lower (or upper) triangular. Row-major ``a``
    (square) and ``b``, each with contiguous rows."""
    rows, columns = b.shape
    n = a.shape[0]
    if rows == 0 or columns == 0 or n == 0:
        return
    # Row-major b is column-major b.T: a left solve becomes a right one of the transposes,
    # and the stored column-major a is a.T, upper where a is lower.
    flags = np.empty(4, dtype=np.uint8)
    flags[0] = _R if left else _L
    flags[1] = _U if lower else _L
    flags[2] = _T if transpose else _N
    flags[3] = _N  # not unit-diagonal
    ints = np.empty(4, dtype=np.int32)
    ints[0] = columns
    ints[1] = rows
    ints[2] = max(a.strides[0] // a.itemsize, 1)
    ints[3] = max(b.strides[0] // b.itemsize, 1)
    one = np.ones(1, dtype=b.dtype)
    trsm(flags[0:1].ctypes, flags[1:2].ctypes, flags[2:3].ctypes, flags[3:4].ctypes,
         ints[0:1].ctypes, ints[1:2].ctypes, one.ctypes, a.ctypes, ints[2:3].ctypes,
         b.ctypes, ints[3:4].ctypes)
