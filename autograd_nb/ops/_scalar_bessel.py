"""Bessel functions of the formula vocabulary: SciPy's ``j0 j1 jn y0 y1 yn iv ive``, written
here, and ``jv yv kv kve k0 k1 k0e k1e i0e i1e``, SciPy's own.

Imported by :mod:`._scalar` (whose docstring says what the vocabulary is). The first ones run
on the GPU too: no library is callable from both ``@njit`` and CUDA code, so they are plain
arithmetic and ``math`` calls that compile for both targets. The others (and those of the
first ones' cases that need them: ``jn`` at a non-integer order, ``iv`` and ``ive`` at a
negative non-integer one) call SciPy's compiled functions, on the CPU only (see the section
"SciPy's compiled Bessel functions" below). Each computes in float64.

The methods (classical ones, not SciPy's Cephes/AMOS code):

* ``J_n``: the power series where ``x**2 <= n + 1`` (terms fall by 4 at least); Miller's
  backward recurrence below ``_X_LARGE``, normalised by ``J_0 + 2 sum J_2k = 1``; beyond it
  Hankel's asymptotic expansion of ``J_0``, ``J_1``, then the forward recurrence while
  ``n < x`` (stable there) or Miller's, matched to ``J_0`` and ``J_1`` (least squares).
* ``Y_0``, ``Y_1``: Neumann's expansions in the ``J_k`` of Miller's run below ``_X_LARGE``
  (``Y_0 = (2/pi) (log(x/2) + euler) J_0 - (4/pi) sum (-1)**k J_2k / k``, and its derivative
  for ``Y_1``), Hankel's expansion beyond; ``Y_n`` by the forward recurrence (stable).
* ``I_v`` (``v >= 0``): the power series (positive terms) up to ``_X_SERIES_I``; beyond, the
  asymptotic expansion of ``exp(-x) I_mu`` for ``mu = v - floor(v)`` and ``mu + 1``, then the
  forward recurrence where ``x > v**2`` (it grows errors by ``exp(v**2 / x)`` at most) or
  Miller's backward recurrence (stable, positive terms) normalised by ``exp(-x) I_mu``.
"""

import ctypes
import hashlib
import math
import threading

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import get_cython_function_address, intrinsic

from .. import cache

#: NumPy's error model: a division by zero gives inf or nan, as in the kernels.
_JIT = dict(cache=True, error_model="numpy")

_EULER = 0.5772156649015329
_TWO_OVER_PI = 0.6366197723675814
_SQRT1_2 = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327
#: From here on J_0, J_1, Y_0, Y_1 come from Hankel's expansion: its smallest term is about
#: exp(-2x), below 1e-21 here.
_X_LARGE = 25.0
#: Up to here I_v comes from its power series (at most ~60 terms, no cancellation).
_X_SERIES_I = 30.0
#: Rescaling of the backward recurrences, before they overflow.
_BIG = 1e250
_SMALL = 1e-250


_TWO52 = 4503599627370496.0  # 2**52: every float64 from here on is whole


@njit(**_JIT)
def _floor(x):
    # In plain arithmetic (as _scalar.floor): numba's math.floor gives an int on the CPU and a
    # float on CUDA.
    a = abs(x)
    r = math.copysign((a + _TWO52) - _TWO52 if a < _TWO52 else a, x)
    return r - 1.0 if r > x else r


@njit(**_JIT)
def _whole(v):
    """Whether ``v`` (finite) is a whole number."""
    return v == _floor(v)


@njit(**_JIT)
def _even(n):
    """Whether the whole number ``n`` is even."""
    return 0.5 * n == _floor(0.5 * n)


@njit(**_JIT)
def _parity(n):
    """``(-1)**n`` of a whole number ``n``."""
    return 1.0 if _even(n) else -1.0


@njit(**_JIT)
def _hankel(nu, x):
    """``(P, Q)`` of Hankel's expansion of order ``nu`` at ``x >= _X_LARGE``: ``J = sqrt(2 /
    (pi x)) (P cos(chi) - Q sin(chi))``, ``Y = ... (P sin(chi) + Q cos(chi))``,
    ``chi = x - (nu / 2 + 1/4) pi``."""
    mu = 4.0 * nu * nu
    p = 1.0
    q = 0.0
    term = 1.0
    previous = math.inf
    for k in range(1, 200):
        odd = 2.0 * k - 1.0
        term *= (mu - odd * odd) / (8.0 * k * x)
        size = abs(term)
        if size > previous or size < 1e-18:  # (the expansion diverges from its smallest term)
            break
        previous = size
        sign = 1.0 if (k // 2) % 2 == 0 else -1.0
        if k % 2 == 1:
            q += sign * term
        else:
            p += sign * term
    return p, q


@njit(**_JIT)
def _j01_large(x):
    """``(J_0, J_1, Y_0, Y_1)`` at ``x >= _X_LARGE``."""
    c = math.cos(x)
    s = math.sin(x)
    scale = math.sqrt(_TWO_OVER_PI / x)
    # cos and sin of x - pi/4 and x - 3 pi/4 from those of x: no rounding of x - pi/4.
    cos0 = (c + s) * _SQRT1_2
    sin0 = (s - c) * _SQRT1_2
    p, q = _hankel(0.0, x)
    j0 = scale * (p * cos0 - q * sin0)
    y0 = scale * (p * sin0 + q * cos0)
    p, q = _hankel(1.0, x)
    cos1 = (s - c) * _SQRT1_2
    sin1 = -(s + c) * _SQRT1_2
    j1 = scale * (p * cos1 - q * sin1)
    y1 = scale * (p * sin1 + q * cos1)
    return j0, j1, y0, y1


@njit(**_JIT)
def _jy_large(n, x):
    """``(J_n(x), Y_n(x))`` by Hankel's expansion for whole ``n >= 0`` and ``x >= _X_LARGE``,
    ``x >= n**2`` (its terms fall from the first); ``chi = x - pi/4 - n pi/2``, its cosine
    and sine those of ``x - pi/4`` turned by quarter turns (exact)."""
    c = math.cos(x)
    s = math.sin(x)
    cos_chi = (c + s) * _SQRT1_2
    sin_chi = (s - c) * _SQRT1_2
    turns = n - 4.0 * _floor(0.25 * n)
    if turns == 1.0:
        cos_chi, sin_chi = sin_chi, -cos_chi
    elif turns == 2.0:
        cos_chi, sin_chi = -cos_chi, -sin_chi
    elif turns == 3.0:
        cos_chi, sin_chi = -sin_chi, cos_chi
    p, q = _hankel(n, x)
    scale = math.sqrt(_TWO_OVER_PI / x)
    return scale * (p * cos_chi - q * sin_chi), scale * (p * sin_chi + q * cos_chi)


@njit(**_JIT)
def _miller_start(n, x):
    """An even start for Miller's recurrence down to order ``n`` at ``x``: where the dominant
    solution, run forward from ``max(n, x)``, has grown by 1e18 (the start's error at ``n``
    is about its inverse square), plus a margin."""
    k = max(n, -_floor(-x))
    low = 0.0
    high = 1.0
    while abs(high) < 1e18 and k < 1e9:
        low, high = high, (2.0 * k / x) * high - low
        k += 1.0
    k += 8.0
    return k if _even(k) else k + 1.0


@njit(**_JIT)
def _miller(n, x):
    """Miller's backward recurrence at ``0 < x``: ``(J_n, J_0, J_1, even, odd)`` with the
    sums of Neumann's expansions, ``even = sum_{k>=1} (-1)**k J_2k / k`` and ``odd =
    -J_1 + sum_{i>=1} (-1)**(i+1) (1/i + 1/(i+1)) J_{2i+1}``."""
    m = _miller_start(n, x)
    upper = 0.0  # f_{k+1}
    f = _SMALL  # f_k, from k = m
    k = m
    norm = 0.0
    even = 0.0
    odd = 0.0
    found = 0.0
    f1 = 0.0
    while k > 0.0:
        if k == n:
            found = f
        if k == 1.0:
            f1 = f
        if _even(k):
            norm += 2.0 * f
            half = 0.5 * k
            even += (1.0 if _even(half) else -1.0) * f / half
        else:
            i = 0.5 * (k - 1.0)
            if i == 0.0:
                odd -= f
            else:
                sign = -1.0 if _even(i) else 1.0
                odd += sign * (1.0 / i + 1.0 / (i + 1.0)) * f
        lower = (2.0 * k / x) * f - upper
        upper = f
        f = lower
        k -= 1.0
        if abs(f) > _BIG:
            f *= _SMALL
            upper *= _SMALL
            norm *= _SMALL
            even *= _SMALL
            odd *= _SMALL
            found *= _SMALL
            f1 *= _SMALL
    if n == 0.0:
        found = f
    norm += f
    return found / norm, f / norm, f1 / norm, even / norm, odd / norm


@njit(**_JIT)
def _j_series(n, x):
    """``J_n(x)`` by its power series, for ``x**2 <= n + 1``."""
    half = 0.5 * x
    if n <= 170.0:
        term = math.pow(half, n) / math.gamma(n + 1.0)
    else:
        term = math.exp(n * math.log(half) - math.lgamma(n + 1.0))
    total = term
    step = -half * half
    for k in range(1, 400):
        term *= step / (k * (n + k))
        total += term
        if abs(term) <= 1e-17 * abs(total):
            break
    return total


@njit(**_JIT)
def _jn_positive(n, x):
    """``J_n(x)`` for whole ``n >= 0`` and ``0 < x < inf``."""
    if x * x <= n + 1.0:
        return _j_series(n, x)
    if x < _X_LARGE:
        return _miller(n, x)[0]
    if x >= n * n:
        return _jy_large(n, x)[0]
    j0, j1, _, _ = _j01_large(x)
    if n == 0.0:
        return j0
    if n == 1.0:
        return j1
    if n < x:
        low, high = j0, j1
        for k in range(1, int(n)):
            low, high = high, (2.0 * k / x) * high - low
        return high
    found, f0, f1, _, _ = _miller(n, x)
    return found * (f0 * j0 + f1 * j1) / (f0 * f0 + f1 * f1)


@njit(**_JIT)
def jn(n, x):
    """SciPy's ``jn``: the Bessel function of the first kind of whole order ``n``; at another
    ``n`` SciPy's ``jv``, as SciPy's ``jn`` (NaN on the GPU)."""
    n = np.float64(n)
    x = np.float64(x)
    if x != x or n != n:
        return math.nan
    if abs(n) == math.inf:
        return 0.0
    if not _whole(n):
        return jv(n, x)
    sign = 1.0
    if n < 0.0:
        n = -n
        sign = _parity(n)
    if x < 0.0:
        x = -x
        sign *= _parity(n)
    if x == 0.0:
        return sign if n == 0.0 else 0.0 * sign
    if x == math.inf:
        return 0.0
    return sign * _jn_positive(n, x)


@njit(**_JIT)
def j0(x):
    """SciPy's ``j0``."""
    return jn(0.0, x)


@njit(**_JIT)
def j1(x):
    """SciPy's ``j1``."""
    return jn(1.0, x)


@njit(**_JIT)
def _y01(x):
    """``(Y_0(x), Y_1(x))`` for ``0 < x < inf``."""
    if x >= _X_LARGE:
        _, _, y0, y1 = _j01_large(x)
        return y0, y1
    log_term = math.log(0.5 * x) + _EULER
    if x < 1e-8:  # (the series' next terms are below 1e-16 relative; 2 / x overflows Miller's)
        y0 = _TWO_OVER_PI * (log_term * (1.0 - 0.25 * x * x) + 0.25 * x * x)
        return y0, -_TWO_OVER_PI / x + (x / math.pi) * (log_term - 0.5)
    _, j0, j1, even, odd = _miller(0.0, x)
    y0 = _TWO_OVER_PI * (log_term * j0 - 2.0 * even)
    y1 = _TWO_OVER_PI * (log_term * j1 - j0 / x + odd)
    return y0, y1


@njit(**_JIT)
def yn(n, x):
    """SciPy's ``yn``: the Bessel function of the second kind of order ``n``, truncated to a
    whole number as SciPy casts it."""
    n = np.float64(n)
    x = np.float64(x)
    if n != n or x != x or x < 0.0:
        return math.nan
    n = math.copysign(_floor(abs(n)), n)
    sign = 1.0
    if n < 0.0:
        n = -n
        sign = _parity(n)
    if x == 0.0 or n == math.inf:
        return -sign * math.inf
    if x == math.inf:
        return 0.0
    if x >= _X_LARGE and x >= n * n:
        return sign * _jy_large(n, x)[1]
    low, high = _y01(x)
    if n == 0.0:
        return sign * low
    k = 1.0
    while k < n and abs(high) < math.inf:
        low, high = high, (2.0 * k / x) * high - low
        k += 1.0
    if not abs(high) < math.inf:
        return -sign * math.inf
    return sign * high


@njit(**_JIT)
def y0(x):
    """SciPy's ``y0``."""
    return yn(0.0, x)


@njit(**_JIT)
def y1(x):
    """SciPy's ``y1``."""
    return yn(1.0, x)


@njit(**_JIT)
def _ive_series(v, x):
    """``exp(-x) I_v(x)`` by the power series, ``v >= 0``, ``0 < x <= _X_SERIES_I``."""
    half = 0.5 * x
    if v <= 170.0:
        term = math.pow(half, v) / math.gamma(v + 1.0)
        scale = math.exp(-x)
    else:
        term = 1.0
        scale = math.exp(v * math.log(half) - math.lgamma(v + 1.0) - x)
    total = term
    step = half * half
    for k in range(1, 500):
        term *= step / (k * (v + k))
        total += term
        if term <= 1e-17 * total:
            break
    return total * scale


@njit(**_JIT)
def _ive_asymptotic(mu, x):
    """``exp(-x) I_mu(x)`` by its asymptotic expansion, ``mu < 2``, ``x > _X_SERIES_I``."""
    m = 4.0 * mu * mu
    total = 1.0
    term = 1.0
    previous = math.inf
    for k in range(1, 200):
        odd = 2.0 * k - 1.0
        term *= -(m - odd * odd) / (8.0 * k * x)
        size = abs(term)
        if size > previous or size < 1e-18:
            break
        previous = size
        total += term
    return total * _INV_SQRT_2PI / math.sqrt(x)


@njit(**_JIT)
def _ive_large(v, x):
    """``exp(-x) I_v(x)``, ``v >= 0``, ``_X_SERIES_I < x < inf``."""
    count = _floor(v)
    mu = v - count
    base = _ive_asymptotic(mu, x)
    if count == 0.0:
        return base
    if x > v * v:
        low, high = base, _ive_asymptotic(mu + 1.0, x)
        for k in range(1, int(count)):
            low, high = high, low - (2.0 * (mu + k) / x) * high
        return high
    # Miller: from a start where the dominant solution (K) has grown by 1e18 past v.
    k = count
    low = 0.0
    high = 1.0
    while high < 1e18:
        low, high = high, low + (2.0 * (mu + k) / x) * high
        k += 1.0
    k += 8.0
    upper = 0.0
    f = _SMALL
    found = 0.0
    while k > 0.0:
        if k == count:
            found = f
        lower = upper + (2.0 * (mu + k) / x) * f
        upper = f
        f = lower
        k -= 1.0
        if f > _BIG:
            f *= _SMALL
            upper *= _SMALL
            found *= _SMALL
    return base * (found / f)


@njit(**_JIT)
def _ive_positive(v, x):
    """``exp(-x) I_v(x)`` for ``v >= 0``, ``x >= 0``."""
    if x == 0.0:
        return 1.0 if v == 0.0 else 0.0
    if x == math.inf:
        return 0.0
    if x <= _X_SERIES_I or x * x <= v + 1.0:
        return _ive_series(v, x)
    return _ive_large(v, x)


@njit(**_JIT)
def _negative_fraction(v):
    """Whether ``v < 0`` is not whole: there ``iv`` and ``ive`` are SciPy's (``I_v = I_-v +
    (2/pi) sin(-pi v) K_-v`` needs ``K``), NaN on the GPU (but ``iv`` at ``x = 0``)."""
    return v < 0.0 and v > -math.inf and not _whole(v)


@njit(**_JIT)
def _iv_parts(v, x):
    """``(sign, exp(-|x|) I_|v|(|x|))`` of ``I_v(x)``: NaN where ``x < 0`` and ``v`` is not
    whole; where ``v < 0`` is not whole (:func:`_negative_fraction`), inf at ``x = 0``, NaN
    elsewhere (on the GPU)."""
    if v != v or x != x:
        return 1.0, math.nan
    if abs(v) == math.inf:
        return 1.0, 0.0
    whole = abs(v) < math.inf and _whole(v)
    if v < 0.0:
        if not whole:
            return 1.0, (math.inf if x == 0.0 else math.nan)
        v = -v
    sign = 1.0
    if x < 0.0:
        if not whole:
            return 1.0, math.nan
        x = -x
        sign = _parity(v)
    return sign, _ive_positive(v, x)


@njit(**_JIT)
def ive(v, x):
    """SciPy's ``ive``: ``iv(v, x) * exp(-abs(x))``."""
    if _negative_fraction(np.float64(v)):
        return _ive_scipy(v, x)
    sign, scaled = _iv_parts(np.float64(v), np.float64(x))
    return sign * scaled


@njit(**_JIT)
def iv(v, x):
    """SciPy's ``iv``: the modified Bessel function of the first kind of real order ``v``."""
    if _negative_fraction(np.float64(v)) and x != 0.0:
        return _iv_scipy(v, x)
    sign, scaled = _iv_parts(np.float64(v), np.float64(x))
    a = abs(np.float64(x))
    if a == math.inf and scaled == scaled:
        return sign * math.inf
    # exp(a) * scaled, finite up to where the product overflows (exp(a) alone does from 709.8)
    if a < 700.0 or not abs(scaled) < math.inf:
        return sign * math.exp(a) * scaled
    half = math.exp(0.5 * a)
    return sign * (half * scaled * half)


# -- SciPy's compiled Bessel functions ----------------------------------------------------------
# jv, yv, kv, kve (any real order), k0, k1, k0e, k1e, i0e and i1e are SciPy's own (AMOS and
# Cephes, through scipy.special.cython_special), a well-kept library, not hand-written
# numerics: they are the same C functions as scipy.special's ufuncs, so ours give SciPy's bits
# and the NumPy twins of tier 0 (:data:`NUMPY_TWINS`) call the ufuncs. They run on the CPU
# only: their ops are CPU-only, and on CUDA the functions that call them (jn at a non-integer
# order, iv and ive at a negative non-integer one) read the NaN of :data:`DEVICE_STANDINS`.
# Compiled code calls them by symbol name (a ctypes pointer would be a constant in the code and
# keep numba from caching it on disk), registered with LLVM on first need: before code calling
# them compiles or is read from the cache (``cache.on_symbols``). So scipy.special (0.14 s of
# import: docs/benchmarking.rst, "Import time") loads only in a process that calls them.

_SYMBOL_PREFIX = "autograd_nb_scipy_special_"
_UNARY_SIGNATURE = "double (double, int __pyx_skip_dispatch)"
_BINARY_SIGNATURE = "double (double, double, int __pyx_skip_dispatch)"


def _capsule_signature(capsule):
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype = ctypes.c_char_p
    get_name.argtypes = [ctypes.py_object]
    return get_name(capsule).decode()


def _register_symbols(names):
    """Register SciPy's real-valued ``names`` (unary or binary, float64) with LLVM under
    ``_SYMBOL_PREFIX + name``. Fused Cython functions are exported once per type
    (``__pyx_fuse_1jv``): the float64 one is found by its signature, not by its number."""
    from scipy.special import cython_special  # (deferred: the import costs 0.14 s)

    exported = cython_special.__pyx_capi__
    for name in names:
        found = [key for key, capsule in exported.items()
                 if key.removeprefix("__pyx_fuse_").lstrip("0123456789") == name
                 and _capsule_signature(capsule) in (_UNARY_SIGNATURE, _BINARY_SIGNATURE)]
        if len(found) != 1:
            raise ImportError(f"scipy.special.cython_special exports no float64 {name!r}")
        address = get_cython_function_address("scipy.special.cython_special", found[0])
        llvm.add_symbol(_SYMBOL_PREFIX + name, address)


_registered = threading.Event()
_registering = threading.Lock()


def _register_scipy_symbols():
    """:func:`_register_symbols` of every SciPy function here, once per process."""
    if _registered.is_set():
        return
    with _registering:
        if not _registered.is_set():
            _register_symbols(_SCIPY_UNARY + _SCIPY_BINARY)
            _registered.set()


def _scipy_function(name, arity):
    """An intrinsic calling SciPy's float64 ``name`` (its ``__pyx_skip_dispatch`` flag 0)."""
    double = ir.DoubleType()
    flag = ir.IntType(32)
    function_type = ir.FunctionType(double, [double] * arity + [flag])

    def codegen(context, builder, signature, args):
        _register_scipy_symbols()  # (the JIT links the symbol as this code compiles)
        function = cgutils.get_or_insert_function(builder.module, function_type,
                                                  _SYMBOL_PREFIX + name)
        return builder.call(function, [*args, ir.Constant(flag, 0)])

    if arity == 1:
        @intrinsic
        def call(typingctx, x):
            return types.float64(types.float64), codegen
    else:
        @intrinsic
        def call(typingctx, v, x):
            return types.float64(types.float64, types.float64), codegen
    return call


_SCIPY_UNARY = ("k0", "k1", "k0e", "k1e", "i0e", "i1e")
_SCIPY_BINARY = ("jv", "yv", "kv", "kve", "iv", "ive")
cache.on_symbols(_SYMBOL_PREFIX, _register_scipy_symbols)
_scipy_jv, _scipy_yv, _scipy_kv, _scipy_kve, _scipy_iv, _scipy_ive = (
    _scipy_function(name, 2) for name in _SCIPY_BINARY)
_scipy_k0, _scipy_k1, _scipy_k0e, _scipy_k1e, _scipy_i0e, _scipy_i1e = (
    _scipy_function(name, 1) for name in _SCIPY_UNARY)


@njit(**_JIT)
def jv(v, x):
    """SciPy's ``jv``: the Bessel function of the first kind of real order ``v``."""
    return _scipy_jv(np.float64(v), np.float64(x))


@njit(**_JIT)
def yv(v, x):
    """SciPy's ``yv``: the Bessel function of the second kind of real order ``v``."""
    return _scipy_yv(np.float64(v), np.float64(x))


@njit(**_JIT)
def kv(v, x):
    """SciPy's ``kv``: the modified Bessel function of the second kind of real order ``v``."""
    return _scipy_kv(np.float64(v), np.float64(x))


@njit(**_JIT)
def kve(v, x):
    """SciPy's ``kve``: ``kv(v, x) * exp(x)``."""
    return _scipy_kve(np.float64(v), np.float64(x))


@njit(**_JIT)
def _iv_scipy(v, x):
    """SciPy's ``iv`` (for a negative non-integer order: ``I_v + (2/pi) sin(pi v) K_v``)."""
    return _scipy_iv(np.float64(v), np.float64(x))


@njit(**_JIT)
def _ive_scipy(v, x):
    """SciPy's ``ive``."""
    return _scipy_ive(np.float64(v), np.float64(x))


@njit(**_JIT)
def k0(x):
    """SciPy's ``k0``."""
    return _scipy_k0(np.float64(x))


@njit(**_JIT)
def k1(x):
    """SciPy's ``k1``."""
    return _scipy_k1(np.float64(x))


@njit(**_JIT)
def k0e(x):
    """SciPy's ``k0e``: ``k0(x) * exp(x)``."""
    return _scipy_k0e(np.float64(x))


@njit(**_JIT)
def k1e(x):
    """SciPy's ``k1e``: ``k1(x) * exp(x)``."""
    return _scipy_k1e(np.float64(x))


@njit(**_JIT)
def i0e(x):
    """SciPy's ``i0e``: ``i0(x) * exp(-abs(x))``."""
    return _scipy_i0e(np.float64(x))


@njit(**_JIT)
def i1e(x):
    """SciPy's ``i1e``: ``i1(x) * exp(-abs(x))``."""
    return _scipy_i1e(np.float64(x))


@njit(**_JIT)
def _nan_standin_1(x):
    """What a CPU-only function of one argument gives on the GPU."""
    return math.nan


@njit(**_JIT)
def _nan_standin_2(v, x):
    """What a CPU-only function of two arguments gives on the GPU."""
    return math.nan


#: The CPU-only functions (SciPy's) and what the CUDA kernels call instead of them
#: (``autograd_nb.cuda._kernels``): NaN, as these functions' ops are CPU-only, and jn, iv and
#: ive give NaN there where they call them.
DEVICE_STANDINS = {
    **{name: _nan_standin_1 for name in ("k0", "k1", "k0e", "k1e", "i0e", "i1e")},
    **{name: _nan_standin_2 for name in ("jv", "yv", "kv", "kve", "_iv_scipy", "_ive_scipy")},
}


def _float64_arguments(name):
    # The kernels compute in float64 whatever the operands' dtype: so do the twins. (SciPy's
    # ufunc is looked up at the call: scipy.special is imported where a twin first runs.)
    def twin(*args):
        import scipy.special  # (deferred, as in _register_symbols)

        ufunc = getattr(scipy.special, name)
        return ufunc(*(np.asarray(a, dtype=np.float64) for a in args))

    twin.__name__ = name
    return twin


#: The NumPy twins of SciPy's functions (tier 0's formulas): its ufuncs, the same C functions.
NUMPY_TWINS = {name: _float64_arguments(name)
               for name in ("jv", "yv", "kv", "kve", "k0", "k1", "k0e", "k1e", "i0e", "i1e")}

SCALAR_NAMES = ("j0", "j1", "jn", "y0", "y1", "yn", "iv", "ive",
                "jv", "yv", "kv", "kve", "k0", "k1", "k0e", "k1e", "i0e", "i1e")

#: Digest of this file, folded into ``_scalar.SOURCE_HASH`` (the kernels' cache key).
with open(__file__, "rb") as _source:
    SOURCE_HASH = hashlib.sha1(_source.read()).hexdigest()[:16]
del _source
