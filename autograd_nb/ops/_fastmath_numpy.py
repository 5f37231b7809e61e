"""NumPy twins of :mod:`autograd_nb.ops._fastmath`: the same float64 operations (float32 for
float32 ``tanh``), in the same order, over whole arrays, so that tier 0
(:mod:`autograd_nb.tiering`) gives the compiled kernels' bits without compiling anything.

Each ``_fastmath`` select (``a if c else b``) is an ``np.where`` here, each integer view of a
float a ``.view(np.int64)``, and each ``_fma`` (``_fma32``) the exactly rounded :func:`fma`
(:func:`fma32`) below. Where
the compiled code computes a branch for every element and then drops it (the Payne-Hanek
reduction of sin/cos/tan below 2**20, the Cody-Waite one above), only the elements that keep
it are computed. The constants are ``_fastmath``'s own.
"""

import math
from fractions import Fraction

import numpy as np

from . import _fastmath as fm

# ---------------------------------------------------------------------------------------------
# The fused multiply-add, correctly rounded.

_SPLITTER = 134217729.0  # 2**27 + 1: Veltkamp's split into two 26-bit halves
#: The exact product (Dekker) needs a representable error, |a b| >= 2**-960, and no overflow
#: in its partial products, |a b| < 2**1020 (an overflow elsewhere gives no finite result).
_PRODUCT_MIN = 2.0**-960
_PRODUCT_MAX = 2.0**1020
#: A product below _PRODUCT_MIN moves no c at or above this (it is < 2**-7 ulp(c)).
_C_DOMINATES = 2.0**-900
#: Below this a result may be subnormal, where it rounds to fewer bits than the steps assume.
_RESULT_MIN = 2.0**-1021


def _two_sum(a, b):
    """(s, e): s = a + b rounded, s + e = a + b exactly (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _split(x):
    t = _SPLITTER * x
    high = t - (t - x)
    return high, x - high


def _two_product(a, b):
    """(p, e): p = a b rounded, p + e = a b exactly in the range above (Dekker)."""
    p = a * b
    a_hi, a_lo = _split(a)
    b_hi, b_lo = _split(b)
    return p, ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo


def _add_round_to_odd(a, b):
    """a + b rounded to odd: exact, or else the neighbour whose last significand bit is 1
    (truncated, then that bit set), which keeps the inexactness for a later rounding."""
    s, e = _two_sum(a, b)
    inexact = e != 0
    away = inexact & (np.signbit(e) != np.signbit(s))  # (s rounded away from zero)
    return ((s.view(np.int64) - away) | inexact).view(np.float64)


def fma(a, b, c):
    """``a * b + c`` rounded once, elementwise, as ``_fastmath._fma`` (``llvm.fma``).

    The exact product ``p + e`` (Dekker) and ``c`` are summed as in Boldo and Melquiond's
    emulated FMA ("Emulation of FMA and correctly rounded sums: proved algorithms using
    rounding to odd", IEEE Trans. Computers 57(4), 2008): ``(s, t) = two_sum(c, p)``, then
    ``s + round_to_odd(t + e)``. The elements outside the range where those steps are exact
    take :func:`_fma_rare`.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.array([1.0 + 2.0**-30])
    >>> float(fma(a, a, -1.0)[0]) == 2.0**-29 + 2.0**-60
    True
    """
    with np.errstate(all="ignore"):
        p, e = _two_product(a, b)
        s, t = _two_sum(c, p)
        result = s + _add_round_to_odd(t, e)
        size = np.abs(p)
        magnitude = np.abs(result)
        exact = (
            (size >= _PRODUCT_MIN) & (size < _PRODUCT_MAX)
            & (((magnitude >= _RESULT_MIN) & (magnitude <= fm._DBL_MAX)) | (magnitude == 0.0))
        )
    if exact.all():
        return result
    rare = ~exact
    result = np.array(result, dtype=np.float64)
    result[rare] = _fma_rare(*(np.broadcast_to(v, rare.shape)[rare] for v in (a, b, c)))
    return result


def _fma_rare(a, b, c):
    """:func:`fma` outside its exact range (1-D arrays). Infinities, NaN and zero operands
    take the plain ``a * b + c``, the same value there (but an infinite ``c``, which a finite
    product never changes, even one that overflows when rounded); a product too small to move
    ``c`` gives ``c``; the rest (huge operands, subnormal results: no normal use of the
    functions here meets them) is computed exactly with fractions."""
    with np.errstate(all="ignore"):
        product = a * b
        # (c == 0: the rounded product, whose sign stays where it underflows to zero)
        result = np.where((c == 0) & (a != 0) & (b != 0), product, product + c)
        finite_product = np.isfinite(a) & np.isfinite(b)
        result = np.where(finite_product, np.where(np.isfinite(c), result, c), result)
        finite = finite_product & np.isfinite(c)
        dominated = (np.abs(product) < _PRODUCT_MIN) & (np.abs(c) >= _C_DOMINATES)
        result = np.where(finite & dominated, c, result)
        exact = finite & (a != 0) & (b != 0) & (c != 0) & ~dominated
    for i in np.flatnonzero(exact):
        result[i] = _fma_exact(float(a[i]), float(b[i]), float(c[i]))
    return result


def _fma_exact(a, b, c):
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    try:
        return float(exact)  # (correctly rounded, into the subnormals too)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


# ---------------------------------------------------------------------------------------------
# Helpers, float64 arrays in and out (``_fastmath``'s, one for one).


def _bits(x):
    return np.ascontiguousarray(x, dtype=np.float64).view(np.int64)


def _float(bits):
    return np.ascontiguousarray(bits, dtype=np.int64).view(np.float64)


def _pow2(k):
    return _float((k + 1023) << 52)


def _copysign(y, x):
    return _float((_bits(y) & fm._ABS) | (_bits(x) & fm._SIGN))


def _exp_reduce(x):
    kd = fma(x, fm._INV_LN2, fm._SHIFT)
    k = _bits(kd) - fm._SHIFT_BITS
    kd = kd - fm._SHIFT
    r_hi = fma(-kd, fm._LN2_HI, x)
    r_lo = -(kd * fm._LN2_LO)
    r = r_hi + r_lo
    p = fma(fm._E9, r, fm._E8)
    for coefficient in (fm._E7, fm._E6, fm._E5, fm._E4, fm._E3, fm._E2, fm._E1, fm._E0):
        p = fma(p, r, coefficient)
    return r_hi, r_lo, r * r * p, k


def _scale(y, k):
    k1 = k >> 1
    return y * _pow2(k1) * _pow2(k - k1)


def _exp_scaled(x, shift):
    r_hi, r_lo, w, k = _exp_reduce(x)
    return _scale(1.0 + (r_hi + (r_lo + w)), k + shift)


def _exp64(x):
    x = np.where(x > 710.0, 710.0, x)
    x = np.where(x < -746.0, -746.0, x)
    return _exp_scaled(x, 0)


def _expm1_small(x):
    r_hi, r_lo, w, k = _exp_reduce(x)
    s = _pow2(k)
    return fma(s, r_lo + w, fma(s, r_hi, s - 1.0))


def _expm1_64(x):
    x = np.where(x > 710.0, 710.0, x)
    x = np.where(x < -60.0, -60.0, x)
    small = _expm1_small(np.where(x > 40.0, 40.0, x))
    big = _exp_scaled(x, 0)
    y = np.where(x > 40.0, big, small)
    return np.where(x == 0.0, x, y)


def _log_parts(u):
    bits = _bits(u)
    k = (bits - fm._SQRT_HALF_BITS) >> 52
    f = _float(bits - (k << 52)) - 1.0
    s = f / (2.0 + f)
    z = s * s
    p = fma(fm._L6, z, fm._L5)
    for coefficient in (fm._L4, fm._L3, fm._L2, fm._L1, fm._L0):
        p = fma(p, z, coefficient)
    return k, f, s, z * p


def _log64(x):
    tiny = x < 2.2250738585072014e-308
    u = np.where(tiny, x * 18014398509481984.0, x)
    k, f, s, r = _log_parts(u)
    dk = (k - np.where(tiny, 54, 0)).astype(np.float64)
    hfsq = 0.5 * f * f
    y = fma(dk, fm._LN2_HI, -((hfsq - fma(s, hfsq + r, dk * fm._LN2_LO)) - f))
    y = np.where(~(x <= fm._DBL_MAX), x, y)
    y = np.where(x == 0.0, -np.inf, y)
    return np.where(x < 0.0, np.nan, y)


def _log1p64(x):
    u = 1.0 + x
    k, f, s, r = _log_parts(u)
    c = np.where(u >= 2.0, 1.0 - (u - x), x - (u - 1.0))
    c = c / u
    dk = k.astype(np.float64)
    hfsq = 0.5 * f * f
    y = fma(dk, fm._LN2_HI, -((hfsq - fma(s, hfsq + r, fma(dk, fm._LN2_LO, c))) - f))
    y = np.where(~(x <= fm._DBL_MAX), x, y)
    y = np.where(x == -1.0, -np.inf, y)
    y = np.where(x < -1.0, np.nan, y)
    return np.where(x == 0.0, x, y)


def _tanh64(x):
    ax = np.abs(x)
    ax = np.where(ax > 20.0, 20.0, ax)
    t = _expm1_small(2.0 * ax)
    d = t + 2.0
    bb = d - t
    d_err = (t - (d - bb)) + (2.0 - bb)
    q = t / d
    y = fma(-q * d_err, 0.5 - 0.5 * q, q)
    return _copysign(y, x)


def fma32(a, b, c):
    """``a * b + c`` of float32s rounded once, as ``_fastmath._fma32``: the product is exact in
    float64, the sum is rounded to odd there (53 bits, two more than float32 needs), then to
    float32, which rounds the exact value correctly."""
    product = np.asarray(a, dtype=np.float64) * np.asarray(b, dtype=np.float64)
    addend = np.broadcast_to(np.asarray(c, dtype=np.float64), product.shape)
    total = product + addend
    odd = _add_round_to_odd(product, addend)
    return np.where(np.isfinite(total), odd, total).astype(np.float32)


def _float32(bits):
    return np.ascontiguousarray(bits, dtype=np.int32).view(np.float32)


def _tanh32(x):
    ax = np.abs(x)
    ax = np.where(ax > fm._TANH32_ONE_AT, fm._TANH32_ONE_AT, ax)
    z = ax * ax
    p = fma32(fm._P32[5], z, fm._P32[4])
    for coefficient in fm._P32[3::-1]:
        p = fma32(p, z, coefficient)
    small = fma32(ax, z * p, ax)
    t = fm._TWO32 * ax
    kd = fma32(t, fm._INV_LN2_32, fm._SHIFT32)
    k = kd.view(np.int32) - fm._SHIFT32_BITS
    kd = kd - fm._SHIFT32
    r = fma32(-kd, fm._LN2_LO_32, fma32(-kd, fm._LN2_HI_32, t))
    q = fma32(fm._Q32[4], r, fm._Q32[3])
    for coefficient in fm._Q32[2::-1]:
        q = fma32(q, r, coefficient)
    e = (fm._ONE32 + fma32(r * r, q, r)) * _float32((k + np.int32(127)) << np.int32(23))
    big = fm._ONE32 - fm._TWO32 / (e + fm._ONE32)
    y = np.where(ax < fm._TANH32_SMALL, small, big)
    return _float32((y.view(np.int32) & fm._ABS32) | (x.view(np.int32) & fm._SIGN32))


def _sigmoid64(x):
    ax = np.abs(x)
    ax = np.where(ax > 746.0, 746.0, ax)
    z = _exp_scaled(-ax, 0)
    d = 1.0 + z
    d_err = (1.0 - d) + z
    pos = x >= 0.0
    q = np.where(pos, 1.0, z) / d
    inv = np.where(pos, q, 1.0 - q)
    return fma(-q, d_err * inv, q)


def _cosh64(x):
    ax = np.abs(x)
    ax = np.where(ax > 711.0, 711.0, ax)
    h = _exp_scaled(ax, -1)
    return h + 0.25 / h


def _sinh64(x):
    ax = np.abs(x)
    ax = np.where(ax > 711.0, 711.0, ax)
    t = _expm1_small(np.where(ax > 22.0, 22.0, ax))
    small = 0.5 * (t + t / (t + 1.0))
    big = _exp_scaled(ax, -1)
    return _copysign(np.where(ax > 22.0, big, small), x)


def _arctan64(x):
    ax = np.abs(x)
    mid = ax > fm._TAN_PI_8
    high = ax > fm._TAN_3PI_8
    num = np.where(high, -1.0, np.where(mid, ax - 1.0, ax))
    den = np.where(high, ax, np.where(mid, ax + 1.0, 1.0))
    off_hi = np.where(high, fm._PIO2_HI, np.where(mid, fm._PIO4_HI, 0.0))
    off_lo = np.where(high, fm._PIO2_LO, np.where(mid, fm._PIO4_LO, 0.0))
    t = num / den
    z = t * t
    p = fma(fm._A10, z, fm._A9)
    for coefficient in (fm._A8, fm._A7, fm._A6, fm._A5, fm._A4, fm._A3, fm._A2, fm._A1, fm._A0):
        p = fma(p, z, coefficient)
    y = off_hi + (off_lo + fma(t * z, p, t))
    return _copysign(y, x)


# ---------------------------------------------------------------------------------------------
# Trigonometric reductions.


def _mod2(t):
    return fma(-2.0, np.floor(0.5 * t), t)


def _mod2c(t):
    return t - ((t + 13510798882111488.0) - 13510798882111488.0)


def _round_to(t, big):
    return (t + big) - big


def _reduce_pi_large(a, mult, offset):
    """``_fastmath._reduce_pi_large`` for finite ``a`` >= 2**20 (``need`` true)."""
    bits = _bits(a)
    e = (bits >> 52) - 1075
    m = _float((bits & fm._MANT) | 0x4330000000000000)
    j = ((e + 47) * 2731) >> 16
    sc = _pow2(e + 24 - 24 * j)
    m0 = m * sc
    m1 = m0 * fm._TWO_M48
    m2 = m0 * fm._TWO_M96
    m3 = m0 * fm._TWO_M144
    q0, q1, q2, q3 = (fm._PAIRS[j + step] for step in (0, 2, 4, 6))
    p0 = m0 * q0
    e0 = fma(m0, q0, -p0)
    p1 = m1 * q1
    e1 = fma(m1, q1, -p1)
    p2 = m2 * q2
    e2 = fma(m2, q2, -p2)
    p3 = m3 * q3
    g1 = sc * 402653184.0
    g2 = sc * 1.430511474609375e-06
    p1h = _round_to(p1, g1)
    p2h = _round_to(p2, g1)
    p2r = p2 - p2h
    p2m = _round_to(p2r, g2)
    h = (_mod2(p0) + _mod2c(e0)) + (_mod2c(p1h) + p2h)
    h = fma(h, mult, offset)
    mid = ((p1 - p1h) + e1) + p2m
    low = ((p2r - p2m) + e2) + p3
    mid = mid * mult
    low = low * mult
    k = np.floor(h + 0.5)
    f = h - k
    f_hi = f + mid
    t = f_hi - f
    err = (f - (f_hi - t)) + (mid - t)
    return f_hi, err + low, k


def _times(f_hi, f_lo, p_hi, p_lo):
    p = f_hi * p_hi
    tail = fma(f_hi, p_hi, -p) + fma(f_hi, p_lo, f_lo * p_hi)
    r_hi = p + tail
    return r_hi, tail - (r_hi - p)


def _two_diff(a, b):
    s = a - b
    bb = s - a
    return s, (a - (s - bb)) - (b + bb)


def _cody_waite(x, qd):
    t = fma(-qd, fm._PIO2_1, x)
    r1, e1 = _two_diff(t, qd * fm._PIO2_2)
    r2, e2 = _two_diff(r1, qd * fm._PIO2_3)
    lo = fma(-qd, fm._PIO2_4, e1 + e2)
    r_hi = r2 + lo
    return r_hi, lo - (r_hi - r2)


def _sin_cos_poly(r, r_lo):
    z = r * r
    p = fma(fm._T6, z, fm._T5)
    for coefficient in (fm._T4, fm._T3, fm._T2, fm._T1, fm._T0):
        p = fma(p, z, coefficient)
    s = r + fma(r * z, p, r_lo * fma(-0.5, z, 1.0))
    p = fma(fm._C5, z, fm._C4)
    for coefficient in (fm._C3, fm._C2, fm._C1, fm._C0):
        p = fma(p, z, coefficient)
    c = 1.0 - fma(-z * z, p, fma(r, r_lo, 0.5 * z))
    return s, c


def _reduce_pio2(x):
    """``_fastmath._reduce_pio2``: x = q pi/2 + (r + r_lo), q an int64 exact mod 4."""
    big = np.abs(x) >= fm._REDUCE_LIMIT  # (inf too; NaN takes Cody-Waite, as compiled)
    small_x = np.where(big, 0.0, x)  # (the compiled Cody-Waite result there is dropped)
    kd = fma(small_x, fm._TWO_OVER_PI, fm._SHIFT)
    q = _bits(kd) - fm._SHIFT_BITS
    r, r_lo = _cody_waite(small_x, kd - fm._SHIFT)
    if big.any():
        xb = x[big]
        a = np.abs(xb)
        a = np.where(~(a <= fm._DBL_MAX), fm._DBL_MAX, a)
        f_hi, f_lo, kk = _reduce_pi_large(a, 2.0, 0.0)
        rb, rb_lo = _times(f_hi, f_lo, fm._PIO2_HI, fm._PIO2_LO)
        qb = kk.astype(np.int64)
        negative = xb < 0.0
        r[big] = np.where(negative, -rb, rb)
        r_lo[big] = np.where(negative, -rb_lo, rb_lo)
        q[big] = np.where(negative, -qb, qb)
    return r, r_lo, q


def _sincos64(x, is_cos):
    r, r_lo, q = _reduce_pio2(x)
    s, c = _sin_cos_poly(r, r_lo)
    n = q + is_cos
    y = np.where((n & 1) != 0, c, s)
    y = _float(_bits(y) ^ ((n & 2) << 62))
    if is_cos == 0:
        y = np.where(x == 0.0, x, y)
    return np.where(~(np.abs(x) <= fm._DBL_MAX), x - x, y)


def _tan64(x):
    r, r_lo, q = _reduce_pio2(x)
    s, c = _sin_cos_poly(r, r_lo)
    odd = (q & 1) != 0
    y = np.where(odd, -c, s) / np.where(odd, s, c)
    y = np.where(x == 0.0, x, y)
    return np.where(~(np.abs(x) <= fm._DBL_MAX), x - x, y)


# ---------------------------------------------------------------------------------------------
# The public functions: float32 in -> float32 out (the float64 result rounded once; tanh's
# computed in float32), anything else -> float64, as ``_fastmath``'s.


#: Elements per block: a block's temporaries stay in the cache and below the size at which
#: each is a fresh ``mmap`` (docs/benchmarking.rst, "Compile latency").
_BLOCK = 8192


def _blocks(function, flat, dtype):
    """``function`` over the 1-D ``flat``, ``_BLOCK`` elements at a time, into a ``dtype``
    result."""
    out = np.empty(flat.shape, dtype=dtype)
    with np.errstate(all="ignore"):
        for start in range(0, flat.size, _BLOCK):
            out[start:start + _BLOCK] = function(flat[start:start + _BLOCK])
    return out


def _public(function64, name, function32=None):
    """The twin of ``_fastmath.<name>``: ``function32`` on float32 where the kernels compute
    float32 in float32 (tanh), else ``function64`` on float64, rounded to float32 for
    float32."""

    def twin(x):
        x = np.asarray(x)
        if x.dtype == np.float32 and function32 is not None:
            return _blocks(function32, x.reshape(-1), np.float32).reshape(x.shape)
        flat = np.array(x, dtype=np.float64).reshape(-1)
        dtype = np.float32 if x.dtype == np.float32 else np.float64
        return _blocks(function64, flat, dtype).reshape(x.shape)

    twin.__name__ = twin.__qualname__ = name
    twin.__doc__ = f"``_fastmath.{name}`` over an array (see the module's docstring)."
    return twin


exp = _public(_exp64, "exp")
expm1 = _public(_expm1_64, "expm1")
log = _public(_log64, "log")
log1p = _public(_log1p64, "log1p")
tanh = _public(_tanh64, "tanh", _tanh32)
sigmoid = _public(_sigmoid64, "sigmoid")
sin = _public(lambda x: _sincos64(x, 0), "sin")
cos = _public(lambda x: _sincos64(x, 1), "cos")
tan = _public(_tan64, "tan")
sinh = _public(_sinh64, "sinh")
cosh = _public(_cosh64, "cosh")
arctan = _public(_arctan64, "arctan")

#: The twins by name: every one of ``_fastmath.FASTMATH_NAMES``.
FUNCTIONS = {name: globals()[name] for name in fm.FASTMATH_NAMES}
