"""NumPy-side twins of the libm calls in the kernels, for tier 0 (:mod:`autograd_nb.tiering`).

The kernels compute ``arcsin``, ``log2``, ``**`` and the other names of ``_scalar.MATH_NAMES``
that ``_fastmath`` does not replace by calling the C library's functions, one element at a time
(numba lowers ``math.asin`` to ``asin``, or ``asinf`` for a float32, and ``a ** b`` of floats
to ``pow``/``powf``). NumPy's ufuncs of the same names run their own SIMD code (SVML on
AVX-512), which differs in the last bits. So these twins call the same C functions, element by
element: a float64 through Python's :mod:`math` (which calls them and returns their value, but
raises on a domain error or an overflow), a float32, or any array where :mod:`math` raised or
met an inf or a nan, through ``ctypes``. That costs ~0.1 µs (math) to ~0.4 µs (ctypes) an
element: slow, but it compiles nothing, and tier 0 lasts only until the kernels are ready.
"""

import ctypes
import ctypes.util
import math

import numpy as np


def _libm():
    """The C library's math library: glibc's by its soname first, as ``find_library`` runs
    ``ldconfig -p`` in a subprocess (10-40 ms of import: docs/benchmarking.rst, "Import
    time")."""
    try:
        return ctypes.CDLL("libm.so.6")
    except OSError:
        return ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")


_LIBM = _libm()

#: name in formulas -> (C name, Python ``math`` function, arguments).
_NAMES = {
    "arcsin": ("asin", math.asin, 1),
    "arccos": ("acos", math.acos, 1),
    "log2": ("log2", math.log2, 1),
    "log10": ("log10", math.log10, 1),
    "arctan2": ("atan2", math.atan2, 2),
    "arcsinh": ("asinh", math.asinh, 1),
    "arccosh": ("acosh", math.acosh, 1),
    "arctanh": ("atanh", math.atanh, 1),
    "_pow": ("pow", math.pow, 2),
}


def _c_function(name, ctype, count):
    function = getattr(_LIBM, name)
    function.restype = ctype
    function.argtypes = [ctype] * count
    return function


def _elementwise(function, count, arrays, dtype):
    """``function`` on each element of the broadcast ``arrays``, as a ``dtype`` array."""
    with np.errstate(all="ignore"):  # (the C functions' flags, as the kernels ignore them)
        values = np.frompyfunc(function, count, 1)(*arrays)
    return np.asarray(values, dtype=object).astype(dtype)


def _twin(c_name, python, count):
    double = _c_function(c_name, ctypes.c_double, count)
    single = _c_function(c_name + "f", ctypes.c_float, count)

    def twin(*arrays):
        arrays = [np.asarray(a) for a in arrays]
        # numba's typing of the call: float32 when every argument is (``powf``), else float64.
        dtype = np.result_type(*arrays)
        if dtype == np.float32:
            return _elementwise(single, count, arrays, np.float32)
        dtype = np.dtype(np.float64)
        arrays = [a.astype(np.float64) for a in arrays]
        if all(np.isfinite(a).all() for a in arrays):
            try:
                return _elementwise(python, count, arrays, dtype)
            except (ValueError, OverflowError):  # (math's errors: the C value instead)
                pass
        return _elementwise(double, count, arrays, dtype)

    twin.__name__ = twin.__qualname__ = c_name
    twin.__doc__ = f"libm's ``{c_name}`` (``{c_name}f`` for float32) on each element."
    return twin


#: The twins by formula name; ``_pow`` is ``a ** b`` of floats.
FUNCTIONS = {name: _twin(c_name, python, count)
             for name, (c_name, python, count) in _NAMES.items()}
