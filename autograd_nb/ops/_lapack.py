"""SciPy's LAPACK and BLAS routines that numba's ``np.linalg`` does not expose, reached from
compiled code: the LU and Cholesky factorisations (``getrf``, ``potrf``) and solves with them
(``getrs``, ``potrs``), triangular solves and products (``trsm``, ``trmm``, ``lauum``) and
inverses (``trtri``), and GEMM; from them, the inverse of a matrix from its factors
(:func:`lu_inverse`) and of a triangular matrix (:func:`triangular_inverse`).

``np.linalg.solve`` inside ``@njit`` factors its matrix and drops the factors. Keeping them
lets ``linalg.solve``'s backward, ``slogdet``'s and ``det``'s reuse the forward's
factorisation, as torch does: a backward then costs ``O(n^2 k)`` (solve) or one inversion
from the factors (``slogdet``), not a second factorisation.

Routines by address. Every routine here takes ``routines``, an int64 array of the addresses
of SciPy's functions for one dtype (:func:`routines`; the ``GETRF``... constants index it),
and calls them through :func:`_call`. Addresses are arguments, never globals, so numba caches
the compiled callers on disk, and a compiled-executor driver receives them among its int
attributes.

Layout. Every array here is row-major, and LAPACK is column-major: a row-major ``A`` is the
column-major ``A.T``. :func:`lu_factor_into` therefore factors ``F = A.T`` in place (no
transposing copy); ``A x = b`` is then ``F.T x = b`` (``getrs`` with ``"T"``), and
``A.T x = b`` is ``F x = b`` (``"N"``). The factors live in a packed row-major ``(n, n + 1)``
array: ``[:, :n]`` the LU factors (column-major ``F``, leading dimension ``n + 1``), ``[:, n]``
the pivots as floats (exact below 2^24 even in float32); or, for a symmetric positive-definite
``A``, Cholesky's factor ``U = L^T`` in the upper triangle and zeros for pivots (see
:func:`lu_factor_into`). The triangular routines take
row-major matrices (rows contiguous, any row stride) and flip sides and triangles for BLAS.

Speed (OpenBLAS, one thread, n = 512; docs/benchmarking.rst, "Linear algebra"): its ``trsm``
runs at half the rate of its ``trmm``, and its ``trtri`` and ``getri`` at a fifth of GEMM's.
So :func:`triangular_inverse` recurses on halves, its work in two ``trmm`` per level, and
:func:`lu_inverse` multiplies the two inverted triangles by recursion too, its work in GEMM.
"""

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import get_cython_function_address, intrinsic

from .. import config

#: Positions in a ``routines`` array.
GETRF, GETRS, POTRF, POTRS, LAUUM, TRTRI, TRSM, TRMM, GEMM = range(9)

_SOURCES = (
    ("scipy.linalg.cython_lapack", "getrf"),
    ("scipy.linalg.cython_lapack", "getrs"),
    ("scipy.linalg.cython_lapack", "potrf"),
    ("scipy.linalg.cython_lapack", "potrs"),
    ("scipy.linalg.cython_lapack", "lauum"),
    ("scipy.linalg.cython_lapack", "trtri"),
    ("scipy.linalg.cython_blas", "trsm"),
    ("scipy.linalg.cython_blas", "trmm"),
    ("scipy.linalg.cython_blas", "gemm"),
)

_PREFIXES = {np.dtype(np.float64): "d", np.dtype(np.float32): "s"}
#: dtype -> :func:`routines`, looked up at the first call (importing ``scipy.linalg`` costs
#: 0.12 s: docs/benchmarking.rst, "Import time").
_ROUTINES = {}

#: Orders at and below which :func:`lu_inverse`'s recursions stop: its triangles are inverted
#: by ``trtri`` itself below the first and multiplied with loops below the second (OpenBLAS's
#: ``trtri`` runs far below GEMM's rate). ``config.LAPACK_LEAVES``, read once, at import: it is
#: compiled in.
LEAVES = config.LAPACK_LEAVES

#: Up to this order :func:`lu_inverse` forms Cholesky's ``V V^T`` with one ``trmm`` of the
#: full ``V``, above it with ``lauum`` and a mirroring pass (``config.LAPACK_TRMM_MAX``, read
#: once, at import: it is compiled in).
TRMM_MAX = config.LAPACK_TRMM_MAX

#: Entries of the recursions' stacks: three per level, halving from any int32 order.
_STACK = 3 * 32

_N = 78  # "N"
_T = 84  # "T"
_L = 76  # "L"
_R = 82  # "R"
_U = 85  # "U"


def routines(dtype):
    """The addresses of SciPy's LAPACK and BLAS routines for ``dtype`` (float32 or float64,
    or its name), as the routines here take them."""
    found = _ROUTINES.get(dtype)
    if found is None:
        dtype = np.dtype(dtype)
        found = _ROUTINES.get(dtype)
        if found is None:
            found = _ROUTINES[dtype] = np.array(
                [get_cython_function_address(module, _PREFIXES[dtype] + name)
                 for module, name in _SOURCES],
                dtype=np.int64,
            )
    return found


@intrinsic
def _call(typingctx, address, arguments):
    """Call the C function ``void f(void *, ...)`` at ``address`` with the 64-bit integers
    of the tuple ``arguments`` as its pointers (Fortran passes every argument by
    reference)."""
    if not isinstance(arguments, types.BaseTuple) or not all(
        isinstance(kind, types.Integer) and kind.bitwidth == 64 for kind in arguments
    ):
        return None
    count = len(arguments)

    def codegen(context, builder, signature, args):
        int64 = ir.IntType(64)
        function_type = ir.FunctionType(ir.VoidType(), [int64] * count)
        target = builder.inttoptr(args[0], function_type.as_pointer())
        builder.call(target, [builder.extract_value(args[1], i) for i in range(count)])
        return context.get_dummy_value()

    return types.void(types.int64, arguments), codegen


@njit(cache=True, nogil=True)
def _int32s(a, b, c, d):
    values = np.empty(4, dtype=np.int32)
    values[0] = a
    values[1] = b
    values[2] = c
    values[3] = d
    return values


@njit(cache=True, nogil=True)
def _flags(a, b, c, d):
    values = np.empty(4, dtype=np.uint8)
    values[0] = a
    values[1] = b
    values[2] = c
    values[3] = d
    return values


@njit(cache=True, nogil=True)
def _ref(values, i):
    """The address of ``values[i]``: an argument by reference."""
    return values.ctypes.data + i * values.itemsize


@njit(cache=True, nogil=True)
def _stride(x):
    """``x``'s row stride in elements (at least 1): its leading dimension for BLAS."""
    return max(x.strides[0] // x.itemsize, 1)


# -- LU -----------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def lu_factor_into(routines, a, packed):
    """Factor the square ``a`` into ``packed`` (``(n, n + 1)``, see the module docstring).
    Returns LAPACK's ``info``: 0, or ``j > 0`` where ``U[j - 1, j - 1]`` is exactly zero (the
    factorisation is still complete: the matrix is singular).

    A symmetric ``a`` with a positive diagonal is tried with Cholesky first (MATLAB's
    ``mldivide`` rule): ``potrf`` takes half ``getrf``'s flops, and the inverse from it half
    of ``lu_inverse``'s. Its factor ``U = L^T`` then fills ``packed``'s upper triangle
    (``potrf_upper``), and its pivot column is zeros (``is_cholesky``). Where ``potrf`` finds
    ``a`` not positive definite, ``getrf`` runs after it."""
    n = a.shape[0]
    copy_into(packed[:, :n], a)
    if n == 0:
        return 0
    if _symmetric_positive_diagonal(a):
        if potrf_upper(routines, packed[:, :n]) == 0:
            packed[:, n] = 0
            return 0
        copy_into(packed[:, :n], a)
    ints = _int32s(n, n + 1, 0, 0)
    pivots = np.empty(n, dtype=np.int32)
    _call(routines[GETRF], (_ref(ints, 0), _ref(ints, 0), packed.ctypes.data,
                            _ref(ints, 1), pivots.ctypes.data, _ref(ints, 2)))
    for j in range(n):
        packed[j, n] = pivots[j]
    return ints[2]


@njit(cache=True, nogil=True)
def _symmetric_positive_diagonal(a):
    """Whether the square ``a`` is exactly symmetric with a positive diagonal: the diagonal
    first, then the lower triangle against the upper in tiles, stopping after the first tile
    that differs (the first, for most matrices that are not symmetric)."""
    n = a.shape[0]
    for j in range(n):
        if not a[j, j] > 0:
            return False
    for r0 in range(0, n, _TILE):
        for c0 in range(0, r0 + 1, _TILE):
            differ = 0  # (counted over the tile, not tested each time: the loop vectorises)
            for r in range(r0, min(r0 + _TILE, n)):
                for c in range(c0, min(c0 + _TILE, r)):
                    differ += a[r, c] != a[c, r]
            if differ:
                return False
    return True


#: The side of the square tiles of loops that read a matrix and its transpose (32 float64
#: rows: 8 KiB).
_TILE = 32

#: The side of the tiles of ``cholesky_into``'s transposing copies, which write what they
#: read a row apart: at n = 512 each row is 4 KiB, rows share one cache set, and 8 rows of
#: each side stay cached where 32 do not.
_SWAP_TILE = 8


@njit(cache=True, nogil=True)
def is_cholesky(packed):
    """Whether ``packed`` holds Cholesky's factor (``lu_factor_into``), not LU's."""
    return packed.shape[0] > 0 and packed[0, packed.shape[0]] == 0


@njit(cache=True, nogil=True)
def lu_solve_into(routines, packed, b, out, transpose):
    """``out = A^-1 b`` (``A.T^-1 b`` where ``transpose``), with ``A`` factored in ``packed``;
    ``b`` and ``out`` ``(n, k)``, row-major (``out`` may be ``b``)."""
    n, k = b.shape
    if n == 0 or k == 0:
        out[...] = 0
        return
    # Column-major (n, k) right-hand sides: the row-major (k, n) transpose.
    work = np.ascontiguousarray(b.T)
    ints = _int32s(n, k, n + 1, 0)
    if is_cholesky(packed):  # (A symmetric: A^-T b = A^-1 b; potrf_upper's "L")
        flag = _flags(_L, 0, 0, 0)
        _call(routines[POTRS], (_ref(flag, 0), _ref(ints, 0), _ref(ints, 1),
                                packed.ctypes.data, _ref(ints, 2), work.ctypes.data,
                                _ref(ints, 0), _ref(ints, 3)))
        copy_into(out, work.T)
        return
    pivots = np.empty(n, dtype=np.int32)
    for j in range(n):
        pivots[j] = np.int32(packed[j, n])
    flag = _flags(_N if transpose else _T, 0, 0, 0)  # packed holds A.T: see the docstring
    _call(routines[GETRS], (_ref(flag, 0), _ref(ints, 0), _ref(ints, 1),
                            packed.ctypes.data, _ref(ints, 2), pivots.ctypes.data,
                            work.ctypes.data, _ref(ints, 0), _ref(ints, 3)))
    copy_into(out, work.T)


@njit(cache=True, nogil=True)
def lu_singular(packed):
    """Whether the factored matrix is exactly singular (a zero on ``U``'s diagonal)."""
    for j in range(packed.shape[0]):
        if packed[j, j] == 0:
            return True
    return False


@njit(cache=True, nogil=True)
def lu_inverse(routines, packed, out, leaves=LEAVES):
    """``out = A^-1`` (row-major ``(n, n)``) from the factors of ``A`` in ``packed`` (not
    singular: see ``lu_singular``); ``getri``'s ``4 n^3 / 3`` flops, in GEMM and ``trmm``.

    Read row-major, ``packed`` holds ``F^T = U_F^T L_F^T`` of ``F = P L_F U_F = A^T``: ``A =
    Lo Up P^T`` with ``Lo = U_F^T`` its lower triangle and ``Up = L_F^T`` its strict upper
    one (unit diagonal). So ``A^-1 = P Up^-1 Lo^-1``: both triangles inverted in place, their
    product formed in place, and the rows swapped by the pivots, last first. From Cholesky's
    ``A = U^T U``: ``A^-1 = V V^T``, ``V = U^-1``, by ``lauum`` (``2 n^3 / 3`` flops in all;
    see ``TRMM_MAX``)."""
    n = packed.shape[0]
    if n == 0:
        return
    copy_into(out, packed[:, :n])
    if is_cholesky(packed):
        triangular_inverse(routines, out, False, False, leaves[0])
        if n <= TRMM_MAX:  # V V^T as one trmm of the full V (zeros below)
            for r in range(n):
                out[r, :r] = 0
            factor = out.copy()
            triangular_multiply(routines, factor, out, False, False, True, False)
            return
        # Column-major, the upper V is the lower V^T, and lauum's L^T L is V V^T.
        flag = _flags(_L, 0, 0, 0)
        ints = _int32s(n, _stride(out), 0, 0)
        _call(routines[LAUUM], (_ref(flag, 0), _ref(ints, 0), out.ctypes.data,
                                _ref(ints, 1), _ref(ints, 2)))
        mirror(out, False)
        return
    triangular_inverse(routines, out, True, False, leaves[0])
    triangular_inverse(routines, out, False, True, leaves[0])
    _upper_lower_product(routines, out, leaves[1])
    for j in range(n - 1, -1, -1):
        p = int(packed[j, n]) - 1
        if p != j:
            for c in range(n):
                value = out[j, c]
                out[j, c] = out[p, c]
                out[p, c] = value


@njit(cache=True, nogil=True)
def add_scaled_transpose(out, scale, x):
    """``out += scale * x.T`` for square ``out`` and ``x``, in tiles: a row of ``x.T`` is a
    column of ``x``, and a tile's columns stay in cache while its rows are read."""
    n = x.shape[0]
    for r0 in range(0, n, _TILE):
        for c0 in range(0, n, _TILE):
            for r in range(r0, min(r0 + _TILE, n)):
                for c in range(c0, min(c0 + _TILE, n)):
                    out[r, c] += scale * x[c, r]


@njit(cache=True, nogil=True)
def copy_into(out, source):
    """``out[...] = source`` for 2-D arrays of one shape, a row at a time: numba compiles an
    array assigned into a slice with a tree of error-message functions (seconds of a cold
    start, docs/benchmarking.rst, "Cold start"), a loop in a fraction of a second."""
    for r in range(source.shape[0]):
        row = out[r]
        values = source[r]
        for c in range(source.shape[1]):
            row[c] = values[c]


@njit(cache=True, nogil=True)
def add_scaled(out, scale, x):
    """``out += scale * x`` for 2-D ``out`` and ``x`` of one shape, a row at a time (numba's
    array expression allocates a temporary, and an add into a slice compiles slowly: see
    ``copy_into``)."""
    for r in range(x.shape[0]):
        row = out[r]
        source = x[r]
        for c in range(x.shape[1]):
            row[c] += scale * source[c]


@njit(cache=True, nogil=True)
def mirror(a, from_lower):
    """Copy one triangle of the square ``a`` onto the other, in tiles: the lower onto the
    upper with ``from_lower``, else the upper onto the lower."""
    n = a.shape[0]
    for r0 in range(0, n, _TILE):
        for c0 in range(0, r0 + 1, _TILE):
            for r in range(r0, min(r0 + _TILE, n)):
                for c in range(c0, min(c0 + _TILE, r)):
                    if from_lower:
                        a[c, r] = a[r, c]
                    else:
                        a[r, c] = a[c, r]


@njit(cache=True, nogil=True)
def _upper_lower_product(routines, a, leaf):
    """``a = U L`` in place, ``U`` the unit upper triangle held in ``a`` above its diagonal
    and ``L`` its lower triangle (``lauum``'s recursion for a product of two triangles):
    ``[[U11 L11 + U12 L21, U12 L22], [U22 L21, U22 L22]]``, block 11 first, then the three
    others from blocks not yet written, then block 22.

    The recursion runs from a stack (numba's cache does not load recursive functions)."""
    stack = np.empty((_STACK, 3), dtype=np.int64)
    stack[0, 0], stack[0, 1], stack[0, 2] = 0, a.shape[0], 0
    top = 1
    while top:
        top -= 1
        lo, hi, combine = stack[top, 0], stack[top, 1], stack[top, 2]
        if hi - lo <= leaf:
            _upper_lower_leaf(a[lo:hi, lo:hi])
            continue
        h = lo + _half(hi - lo)
        if combine:
            gemm_add(routines, 1.0, a[lo:h, h:hi], False, a[h:hi, lo:h], False, a[lo:h, lo:h])
            triangular_multiply(routines, a[h:hi, h:hi], a[lo:h, h:hi], False, True, False,
                                False)
            triangular_multiply(routines, a[h:hi, h:hi], a[h:hi, lo:h], True, False, False,
                                True)
            continue
        # Popped in reverse: block 11, this block's products, block 22.
        stack[top, 0], stack[top, 1], stack[top, 2] = h, hi, 0
        stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2] = lo, hi, 1
        stack[top + 2, 0], stack[top + 2, 1], stack[top + 2, 2] = lo, h, 0
        top += 3


@njit(cache=True, nogil=True)
def _upper_lower_leaf(a):
    """``_upper_lower_product`` by loops, a row at a time: row ``r`` of ``U L`` reads rows
    ``r`` and below of ``L``, and row ``r`` of ``U``, so it can replace row ``r``. On a
    contiguous copy: loops over a view with strides numba does not know run several times
    slower."""
    block = np.ascontiguousarray(a)
    n = block.shape[0]
    row = np.empty(n, dtype=a.dtype)
    for r in range(n):
        row[:] = 0
        for k in range(r, n):
            u = block[r, k] if k > r else 1.0
            for c in range(k + 1):
                row[c] += u * block[k, c]
        copy_into(block[r : r + 1], row.reshape((1, n)))
    copy_into(a, block)


@njit(cache=True, nogil=True)
def _half(n):
    """Where the recursions split an order ``n > 1``: about half, a multiple of 16 from 32 on
    (BLAS's kernels step in groups of up to 16 rows); always inside ``(0, n)``."""
    half = (n // 2) // 16 * 16
    return half if half > 0 else n // 2


# -- triangles ----------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def triangular_solve(routines, a, b, left, lower, transpose):
    """Solve in place, ``b`` becoming ``op(a)^-1 b`` (``left``) or ``b op(a)^-1``, where
    ``op(a)`` is ``a`` or ``a.T`` and ``a`` is lower (or upper) triangular."""
    rows, columns = b.shape
    if rows == 0 or columns == 0 or a.shape[0] == 0:
        return
    # Row-major b is column-major b.T: a left solve becomes a right one of the transposes,
    # and the stored column-major a is a.T, upper where a is lower.
    flags = _flags(_R if left else _L, _U if lower else _L, _T if transpose else _N, _N)
    ints = _int32s(columns, rows, _stride(a), _stride(b))
    one = np.ones(1, dtype=b.dtype)
    _call(routines[TRSM], (_ref(flags, 0), _ref(flags, 1), _ref(flags, 2),
                           _ref(flags, 3), _ref(ints, 0), _ref(ints, 1),
                           one.ctypes.data, a.ctypes.data, _ref(ints, 2), b.ctypes.data,
                           _ref(ints, 3)))


@njit(cache=True, nogil=True)
def triangular_multiply(routines, a, b, left, lower, transpose, unit, alpha=1.0):
    """In place, ``b`` becoming ``alpha op(a) b`` (``left``) or ``alpha b op(a)``, ``op(a)``
    as in ``triangular_solve``; ``unit``: ``a``'s diagonal is taken as ones (not read)."""
    rows, columns = b.shape
    if rows == 0 or columns == 0 or a.shape[0] == 0:
        return
    flags = _flags(_R if left else _L, _U if lower else _L, _T if transpose else _N,
                   _U if unit else _N)
    ints = _int32s(columns, rows, _stride(a), _stride(b))
    scale = np.empty(1, dtype=b.dtype)
    scale[0] = alpha
    _call(routines[TRMM], (_ref(flags, 0), _ref(flags, 1), _ref(flags, 2),
                           _ref(flags, 3), _ref(ints, 0), _ref(ints, 1),
                           scale.ctypes.data, a.ctypes.data, _ref(ints, 2), b.ctypes.data,
                           _ref(ints, 3)))


@njit(cache=True, nogil=True)
def triangular_inverse(routines, a, lower, unit, leaf=LEAVES[0]):
    """Invert in place the lower (or upper) triangle of the square ``a``, its diagonal taken
    as ones where ``unit`` (then left as it is); the other triangle is not touched.

    By halves: ``[[A11, 0], [A21, A22]]^-1 = [[X11, 0], [-X22 A21 X11, X22]]``, the inverses
    ``X`` first, then two ``trmm`` (the upper triangle likewise), from a stack as
    ``_upper_lower_product``; ``trtri`` from order ``leaf`` down."""
    stack = np.empty((_STACK, 3), dtype=np.int64)
    stack[0, 0], stack[0, 1], stack[0, 2] = 0, a.shape[0], 0
    top = 1
    while top:
        top -= 1
        lo, hi, combine = stack[top, 0], stack[top, 1], stack[top, 2]
        if hi - lo <= leaf:
            _trtri(routines, a[lo:hi, lo:hi], lower, unit)
            continue
        h = lo + _half(hi - lo)
        if combine:
            if lower:
                block = a[h:hi, lo:h]
                triangular_multiply(routines, a[h:hi, h:hi], block, True, True, False, unit,
                                    -1.0)
                triangular_multiply(routines, a[lo:h, lo:h], block, False, True, False, unit)
            else:
                block = a[lo:h, h:hi]
                triangular_multiply(routines, a[lo:h, lo:h], block, True, False, False, unit,
                                    -1.0)
                triangular_multiply(routines, a[h:hi, h:hi], block, False, False, False, unit)
            continue
        # Popped in reverse: the two halves, then this block's products.
        stack[top, 0], stack[top, 1], stack[top, 2] = lo, hi, 1
        stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2] = h, hi, 0
        stack[top + 2, 0], stack[top + 2, 1], stack[top + 2, 2] = lo, h, 0
        top += 3


@njit(cache=True, nogil=True)
def _trtri(routines, a, lower, unit):
    n = a.shape[0]
    if n == 0:
        return
    flags = _flags(_U if lower else _L, _U if unit else _N, 0, 0)
    ints = _int32s(n, _stride(a), 0, 0)
    _call(routines[TRTRI], (_ref(flags, 0), _ref(flags, 1),
                            _ref(ints, 0), a.ctypes.data, _ref(ints, 1),
                            _ref(ints, 2)))


# -- Cholesky and GEMM --------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def cholesky_into(routines, a, out):
    """``out = L``, the lower Cholesky factor of the symmetric ``a`` (its lower triangle
    read), zeros above. Returns LAPACK's ``info``: 0, or ``j > 0`` where the leading minor of
    order ``j`` is not positive (``out`` is then incomplete)."""
    # potrf_upper's U = L^T, from a's lower triangle copied to out's
    # upper one, and back.
    n = a.shape[0]
    for r0 in range(0, n, _SWAP_TILE):
        for c0 in range(0, r0 + 1, _SWAP_TILE):
            for r in range(r0, min(r0 + _SWAP_TILE, n)):
                for c in range(c0, min(c0 + _SWAP_TILE, r + 1)):
                    out[c, r] = a[r, c]
    info = potrf_upper(routines, out)
    for r0 in range(0, n, _SWAP_TILE):
        for c0 in range(0, r0 + 1, _SWAP_TILE):
            for r in range(r0, min(r0 + _SWAP_TILE, n)):
                for c in range(c0, min(c0 + _SWAP_TILE, r)):
                    out[r, c] = out[c, r]
                    out[c, r] = 0
    return info


@njit(cache=True, nogil=True)
def potrf_upper(routines, a):
    """Cholesky's ``U`` (``U^T U = A``, ``A`` symmetric and read from the upper triangle) in
    place on the upper triangle of the square ``a``, the lower one not touched; returns
    ``potrf``'s ``info``: 0, or ``j > 0`` where the leading minor of order ``j`` is not
    positive (``a`` is then incomplete)."""
    n = a.shape[0]
    if n == 0:
        return 0
    # Column-major, a's upper triangle is the lower one of a.T, and potrf's L L^T = A there
    # reads back row-major as U = L^T, in place ("U" was no faster: docs/benchmarking.rst,
    # "Linear algebra").
    flag = _flags(_L, 0, 0, 0)
    ints = _int32s(n, _stride(a), 0, 0)
    _call(routines[POTRF], (_ref(flag, 0), _ref(ints, 0), a.ctypes.data, _ref(ints, 1),
                            _ref(ints, 2)))
    return ints[2]


@njit(cache=True, nogil=True)
def gemm_add(routines, alpha, x, transpose_x, y, transpose_y, out):
    """``out += alpha x' @ y'``, ``x'`` being ``x`` or ``x.T`` (``y'`` likewise); row-major
    operands with contiguous rows (any row stride)."""
    rows, columns = out.shape
    depth = x.shape[0] if transpose_x else x.shape[1]
    if rows == 0 or columns == 0 or depth == 0:
        return
    # Column-major, out.T = y'.T @ x'.T, and the stored x is x.T (y likewise).
    flags = _flags(_T if transpose_y else _N, _T if transpose_x else _N, 0, 0)
    ints = _int32s(columns, rows, depth, 0)
    strides = _int32s(_stride(y), _stride(x), _stride(out), 0)
    scalars = np.empty(2, dtype=out.dtype)
    scalars[0] = alpha
    scalars[1] = 1.0
    _call(routines[GEMM], (_ref(flags, 0), _ref(flags, 1), _ref(ints, 0),
                           _ref(ints, 1), _ref(ints, 2), _ref(scalars, 0),
                           y.ctypes.data, _ref(strides, 0), x.ctypes.data,
                           _ref(strides, 1), _ref(scalars, 1), out.ctypes.data,
                           _ref(strides, 2)))
