"""The complex formulas' vocabulary on the device: what ``_COMPLEX_NAMESPACE`` of
:mod:`autograd_nb.ops.elementwise` means over NumPy arrays, as device functions.

numba-cuda types ``cmath``'s functions and complex arithmetic; the rest are written here
from ``math`` (libdevice) the way NumPy's complex loops compute them: ``expm1`` and
``log1p`` without the cancellation of ``exp(z) - 1`` and ``log(1 + z)`` near 0, ``abs`` as
``hypot``, ``sgn`` as torch's (0 at 0), and ``a ** b`` (:func:`power`, which the kernel
generator writes for ``**``) by repeated squaring for small whole exponents, as NumPy's
``npy_cpow``. Every function takes real arguments too (a formula's ``abs(x) ** 2``).
"""

import cmath
import math

from numba import cuda

# (``cmath``'s functions are typed by numba-cuda as they are: the generated kernels call
# them by the NumPy names below)
exp = cmath.exp
log = cmath.log
log10 = cmath.log10
sqrt = cmath.sqrt
sin = cmath.sin
cos = cmath.cos
tan = cmath.tan
sinh = cmath.sinh
cosh = cmath.cosh
tanh = cmath.tanh
arcsin = cmath.asin
arccos = cmath.acos
arctan = cmath.atan
arcsinh = cmath.asinh
arccosh = cmath.acosh
arctanh = cmath.atanh

_LN2 = math.log(2.0)


@cuda.jit(device=True)
def conj(z):
    return z.conjugate()


@cuda.jit(device=True)
def real(z):
    return z.real


@cuda.jit(device=True)
def imag(z):
    return z.imag


@cuda.jit(device=True)
def abs(z):  # noqa: A001 (the formulas' name)
    return math.hypot(z.real, z.imag)


@cuda.jit(device=True)
def angle(z):
    return math.atan2(z.imag, z.real)


@cuda.jit(device=True)
def sgn(z):
    size = math.hypot(z.real, z.imag)
    if size == 0:
        return 0j
    return (z + 0j) / size


@cuda.jit(device=True)
def where(condition, a, b):
    if condition:
        return a + 0j
    return b + 0j


@cuda.jit(device=True)
def sigmoid(z):
    return 1 / (1 + cmath.exp(-z))


@cuda.jit(device=True)
def expm1(z):
    # exp(x) (cos y + i sin y) - 1, its real part as expm1(x) cos y - 2 sin(y / 2) ** 2
    x = z.real
    y = z.imag
    half = math.sin(y / 2)
    return complex(math.expm1(x) * math.cos(y) - 2 * half * half, math.exp(x) * math.sin(y))


@cuda.jit(device=True)
def log1p(z):
    # log|1 + z| = log1p(x (2 + x) + y ** 2) / 2, arg(1 + z) = atan2(y, 1 + x)
    x = z.real
    y = z.imag
    return complex(math.log1p(x * (2 + x) + y * y) / 2, math.atan2(y, 1 + x))


@cuda.jit(device=True)
def log2(z):
    return cmath.log(z + 0j) / _LN2


@cuda.jit(device=True)
def power(a, b):
    base = a + 0j
    exponent = b + 0j
    if exponent == 0:
        return 1 + 0j
    if base == 0:
        if exponent.imag == 0 and exponent.real > 0:
            return 0j
        return complex(math.nan, math.nan)
    n = int(exponent.real)
    if exponent.imag == 0 and exponent.real == n and -100 < n < 100:
        result = 1 + 0j
        m = n if n > 0 else -n
        while m > 0:
            if m & 1:
                result = result * base
            base = base * base
            m >>= 1
        return result if n > 0 else 1 / result
    return cmath.exp(exponent * cmath.log(base))


#: The names a generated complex kernel imports from here.
NAMES = (
    "exp", "log", "log10", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "arcsin",
    "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "conj", "real", "imag", "abs",
    "angle", "sgn", "where", "sigmoid", "expm1", "log1p", "log2", "power",
)
