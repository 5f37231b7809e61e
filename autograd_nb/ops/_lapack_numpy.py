"""NumPy twins of ``_lapack``'s routines, for tier 0's backward (``Op.vjp_numpy`` of the
``linalg`` factorisations): the same SciPy LAPACK and BLAS functions, called through ctypes
with the same arguments in the same order, and the loops between them as NumPy expressions
typed as numba types them, so the results are the compiled routines' bits. Nothing here
compiles.

Every function takes the arrays the compiled one takes (row-major; see ``_lapack``'s module
docstring for the layout), less ``routines``: the dtype picks them.
"""

import ctypes

import numpy as np

from . import _lapack
from ._blas import ByAddress, scipy_blas
from ._numpy_vjp import add_into
from ._numpy_vjp import gemm_add as _numpy_gemm_add

#: The number of pointer arguments of each routine of ``_lapack.routines``, by its position.
_ARGUMENTS = {_lapack.GETRS: 9, _lapack.POTRS: 8, _lapack.LAUUM: 5, _lapack.TRTRI: 6,
              _lapack.TRSM: 11, _lapack.TRMM: 11}
_FUNCTIONS = {}

_half = _lapack._half.py_func
_stride = _lapack._stride.py_func


def _call(dtype, routine, *arguments):
    """SciPy's routine at position ``routine`` of ``_lapack.routines(dtype)``, called with
    ``arguments`` (addresses)."""
    key = (np.dtype(dtype), routine)
    function = _FUNCTIONS.get(key)
    if function is None:
        prototype = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * _ARGUMENTS[routine])
        function = _FUNCTIONS[key] = prototype(int(_lapack.routines(dtype)[routine]))
    function(*arguments)


def _chars(by, *letters):
    return [by.char(letter) for letter in letters]


def is_cholesky(packed):
    return packed.shape[0] > 0 and packed[0, packed.shape[0]] == 0


def lu_singular(packed):
    n = packed.shape[0]
    return bool((packed[:, :n].diagonal() == 0).any())


def lu_solve_into(packed, b, out, transpose):
    n, k = b.shape
    if n == 0 or k == 0:
        out[...] = 0
        return
    # Always a copy, as numba's ``ascontiguousarray`` makes one: for one column ``b.T`` is
    # already contiguous, and LAPACK would solve in place into the caller's ``b``.
    work = np.array(b.T, order="C")
    by = ByAddress(b.dtype)
    size, columns, leading, info = by.int(n), by.int(k), by.int(n + 1), by.int(0)
    if is_cholesky(packed):
        _call(b.dtype, _lapack.POTRS, by.char(b"L"), size, columns, packed.ctypes.data, leading,
              work.ctypes.data, size, info)
    else:
        pivots = packed[:, n].astype(np.int32)
        _call(b.dtype, _lapack.GETRS, by.char(b"N" if transpose else b"T"), size, columns,
              packed.ctypes.data, leading, pivots.ctypes.data, work.ctypes.data, size, info)
    out[...] = work.T


def lu_inverse(packed, out, leaves=_lapack.LEAVES):
    n = packed.shape[0]
    if n == 0:
        return
    out[...] = packed[:, :n]
    if is_cholesky(packed):
        triangular_inverse(out, False, False, leaves[0])
        if n <= _lapack.TRMM_MAX:
            out[np.tril_indices(n, -1)] = 0
            triangular_multiply(out.copy(), out, False, False, True, False)
            return
        by = ByAddress(out.dtype)
        _call(out.dtype, _lapack.LAUUM, by.char(b"L"), by.int(n), out.ctypes.data,
              by.int(_stride(out)), by.int(0))
        mirror(out, False)
        return
    triangular_inverse(out, True, False, leaves[0])
    triangular_inverse(out, False, True, leaves[0])
    _upper_lower_product(out, leaves[1])
    for j in range(n - 1, -1, -1):
        p = int(packed[j, n]) - 1
        if p != j:
            out[[j, p]] = out[[p, j]]


def add_scaled(out, scale, x):
    """``out += scale * x``, ``scale`` a NumPy scalar of the kernel's type (a literal
    ``1.0``: float64; an element of a float32 array: float32)."""
    add_into(out, scale * x)


def add_scaled_transpose(out, scale, x):
    add_into(out, scale * x.T)


def mirror(a, from_lower):
    lower = np.tril_indices(a.shape[0], -1)
    if from_lower:
        a.T[lower] = a[lower]
    else:
        a[lower] = a.T[lower]


def _upper_lower_product(a, leaf):
    n = a.shape[0]
    if n <= leaf:
        _upper_lower_leaf(a)
        return
    h = _half(n)
    _upper_lower_product(a[:h, :h], leaf)
    gemm_add(1.0, a[:h, h:], False, a[h:, :h], False, a[:h, :h])
    triangular_multiply(a[h:, h:], a[:h, h:], False, True, False, False)
    triangular_multiply(a[h:, h:], a[h:, :h], True, False, False, True)
    _upper_lower_product(a[h:, h:], leaf)


def _upper_lower_leaf(a):
    block = np.ascontiguousarray(a)
    n = block.shape[0]
    for r in range(n):
        row = np.zeros(n, dtype=a.dtype)
        for k in range(r, n):
            # (``u = block[r, k] if k > r else 1.0``: numba unifies the two as float64)
            u = np.float64(block[r, k] if k > r else 1.0)
            add_into(row[: k + 1], u * block[k, : k + 1])
        block[r] = row
    a[...] = block


def triangular_solve(a, b, left, lower, transpose):
    _triangular(_lapack.TRSM, a, b, left, lower, transpose, False, 1.0)


def triangular_multiply(a, b, left, lower, transpose, unit, alpha=1.0):
    _triangular(_lapack.TRMM, a, b, left, lower, transpose, unit, alpha)


def _triangular(routine, a, b, left, lower, transpose, unit, alpha):
    rows, columns = b.shape
    if rows == 0 or columns == 0 or a.shape[0] == 0:
        return
    by = ByAddress(b.dtype)
    flags = _chars(by, b"R" if left else b"L", b"U" if lower else b"L",
                   b"T" if transpose else b"N", b"U" if unit else b"N")
    _call(b.dtype, routine, *flags, by.int(columns), by.int(rows), by.scalar(alpha),
          a.ctypes.data, by.int(_stride(a)), b.ctypes.data, by.int(_stride(b)))


def triangular_inverse(a, lower, unit, leaf=_lapack.LEAVES[0]):
    n = a.shape[0]
    if n <= leaf:
        if n:
            by = ByAddress(a.dtype)
            _call(a.dtype, _lapack.TRTRI, *_chars(by, b"U" if lower else b"L",
                                                  b"U" if unit else b"N"),
                  by.int(n), a.ctypes.data, by.int(_stride(a)), by.int(0))
        return
    h = _half(n)
    triangular_inverse(a[:h, :h], lower, unit, leaf)
    triangular_inverse(a[h:, h:], lower, unit, leaf)
    if lower:
        block = a[h:, :h]
        triangular_multiply(a[h:, h:], block, True, True, False, unit, -1.0)
        triangular_multiply(a[:h, :h], block, False, True, False, unit)
    else:
        block = a[:h, h:]
        triangular_multiply(a[:h, :h], block, True, False, False, unit, -1.0)
        triangular_multiply(a[h:, h:], block, False, False, False, unit)


def gemm_add(alpha, x, transpose_x, y, transpose_y, out):
    """``_lapack.gemm_add``: ``out += alpha * x' @ y'`` by SciPy's GEMM, LAPACK's
    (``_numpy_vjp.gemm_add``)."""
    _numpy_gemm_add(x, transpose_x, y, transpose_y, out, alpha, blas=scipy_blas())
