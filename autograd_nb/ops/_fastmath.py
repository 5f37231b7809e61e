"""Vectorisable transcendental functions for the generated elementwise kernels.

numba compiles ``math.exp``, ``math.tanh``, ... to scalar libm calls; this llvmlite has no SVML,
so a loop over them is not vectorised and runs several times slower than NumPy's SIMD ufuncs.
The functions here are written in pure arithmetic instead (range reduction, polynomial, exponent
bits set through integer views of the floats), with the special cases (inf, nan, overflow,
underflow, signed zeros, subnormals) folded in by selects, so that a loop such as

    @njit(error_model="numpy")
    def f(x, out):
        for i in range(x.size):
            out[i] = exp(x[i])

is vectorised by LLVM (AVX-512 here). Division only vectorises under ``error_model="numpy"``
(numba's default model adds a zero check), which the kernels use. Fused multiply-adds are
explicit (``llvm.fma``), never contracted by the compiler, so a result does not depend on the
loop it is compiled into, vector body or scalar remainder.

Every function takes a float64 or float32 (or integer) scalar and returns the input's float type
(float32 for float32, float64 otherwise). It computes in float64, so a float32 result is the
float64 result rounded once; except ``tanh``, which computes a float32 in float32 (``_tanh32``:
a vector holds twice the lanes, and the float64 way was 4.5x slower than NumPy's float32
``tanh`` in the MLP workloads). The accuracy the tests assert (``tests/ops/test_fastmath.py``,
against NumPy and an 80-bit long double reference) is in ``MAX_ULP`` and ``MAX_ULP32``.

sin/cos/tan reduce |x| < 2**20 by pi/2 with a four-piece Cody-Waite reduction, and larger
arguments with a branch-free Payne-Hanek reduction (1/pi in 24-bit chunks, exact partial
products by fma) accurate to ~2**-115 absolute, so even the hardest argument
(6381956970095103 * 2**797) comes out right. There is no libm fallback: a call on the rare path
would stop LLVM from vectorising the loop. In a loop over ``sin``/``cos``/``tan`` the Payne-Hanek
part is evaluated for every element (the vectoriser if-converts both sides; its table loads are
masked gathers, which LLVM's cost model for AMD Zen without AVX-512 prices above the scalar
loop). The generated kernels therefore loop over ``sin_small``/``cos_small``/``tan_small``
(Cody-Waite alone, no table) and call the full functions only for the elements with a large
argument, in a scalar pass (``_kernels.flat_loops``; docs/benchmarking.rst, "Trigonometry
without gathers").
"""

import hashlib

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

# inline="always" (numba IR inlining into the calling kernel) is what lets LLVM vectorise the
# larger functions (expm1, sinh, sin, cos, tan): called as separate functions they exceed LLVM's
# inlining threshold, and a loop with a call in it is not vectorised. It also compiled a kernel
# slightly faster than linking the separately compiled functions (0.31 s against 0.45 s, exp).
_JIT = dict(cache=True, error_model="numpy", fastmath=False, inline="always")

#: Error bounds in float64 ulps (of the correctly rounded result) that the tests assert for
#: float64 inputs; in brackets the largest error measured over 7-8 million random points per
#: function (whole domain, log-uniform magnitudes, edge regions) against an 80-bit long double
#: reference. NumPy's own float64 functions measure 0.5-1.2 ulp the same way. For float32 inputs
#: the result is the float64 value rounded once: within 1 ulp of float32 (measured: exact), but
#: for the functions of ``MAX_ULP32``.
MAX_ULP = {
    "exp": 1.0,  # [0.95]
    "expm1": 1.5,  # [1.29]
    "log": 1.0,  # [0.84]
    "log1p": 1.0,  # [0.80]
    "tanh": 2.0,  # [1.93]
    "sigmoid": 2.0,  # [1.94]
    "sin": 1.5,  # [1.24]
    "cos": 1.5,  # [1.23]
    "tan": 3.0,  # [2.76]
    "sinh": 2.5,  # [2.15]
    "cosh": 1.5,  # [1.35]
    "arctan": 2.5,  # [2.27]
}

#: Error bounds in float32 ulps for the functions that compute a float32 in float32; in
#: brackets the largest error over every float32 from 0 to 10.5 (a strided sweep of 84 million:
#: ``tests/ops/test_fastmath.py``), against float64 NumPy.
MAX_ULP32 = {
    "tanh": 1.5,  # [1.30]
}

# ---------------------------------------------------------------------------------------------
# Bit casts.


@intrinsic
def _float_to_bits(typingctx, x):
    """The IEEE bit pattern of a float64 (as int64) or float32 (as int32)."""
    if x == types.float64:
        sig = types.int64(types.float64)
        width = 64
    elif x == types.float32:
        sig = types.int32(types.float32)
        width = 32
    else:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(width))

    return sig, codegen


@intrinsic
def _bits_to_float(typingctx, i):
    """The float64 whose bit pattern is the int64 ``i`` (float32 for an int32)."""
    if not isinstance(i, types.Integer):
        return None
    if i.bitwidth == 32:
        sig = types.float32(i)

        def codegen32(context, builder, signature, args):
            return builder.bitcast(args[0], ir.FloatType())

        return sig, codegen32
    sig = types.float64(i)

    def codegen(context, builder, signature, args):
        value = context.cast(builder, args[0], signature.args[0], types.int64)
        return builder.bitcast(value, ir.DoubleType())

    return sig, codegen


@intrinsic
def _as_result(typingctx, value, like):
    """``value`` (a float64) rounded to float32 when ``like`` is a float32, else float64."""
    result = types.float32 if like == types.float32 else types.float64

    def codegen(context, builder, signature, args):
        return context.cast(builder, args[0], signature.args[0], signature.return_type)

    return result(value, like), codegen


def _fma_typing(name, numba_type, ir_type):
    """The typing of an ``@intrinsic`` ``a * b + c`` of ``numba_type`` with one rounding
    (llvm.fma: vfmadd on x86-64-v3 and later, fmadd on arm64)."""

    def fma(typingctx, a, b, c):
        def codegen(context, builder, signature, args):
            fnty = ir.FunctionType(ir_type, [ir_type] * 3)
            fn = builder.module.declare_intrinsic("llvm.fma", [ir_type], fnty)
            return builder.call(fn, args)

        return numba_type(numba_type, numba_type, numba_type), codegen

    fma.__name__ = fma.__qualname__ = name
    return fma


#: ``a * b + c`` of float64s (its arguments cast to float64), and of float32s, rounded once.
_fma = intrinsic(_fma_typing("_fma", types.float64, ir.DoubleType()))
_fma32 = intrinsic(_fma_typing("_fma32", types.float32, ir.FloatType()))


# ---------------------------------------------------------------------------------------------
# Constants.

_INF = np.inf
_NAN = np.nan
_DBL_MAX = 1.7976931348623157e308
_SIGN = -0x8000000000000000  # the sign bit as int64
_ABS = 0x7FFFFFFFFFFFFFFF
_MANT = 0x000FFFFFFFFFFFFF

_SHIFT = 6755399441055744.0  # 1.5 * 2**52: adding it rounds to an integer kept in the low bits
_SHIFT_BITS = 0x4338000000000000

_INV_LN2 = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # 32 significant bits: k * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10

# exp(r) = 1 + r + r*r*P(r) on |r| <= ln(2)/2 (near-minimax, error 1.3e-17).
_E0 = 0.5000000000000001
_E1 = 0.16666666666666669
_E2 = 0.041666666666624094
_E3 = 0.00833333333333006
_E4 = 0.0013888888917230724
_E5 = 0.00019841269863066696
_E6 = 2.4801521269532122e-05
_E7 = 2.7557268439678e-06
_E8 = 2.7620101012098e-07
_E9 = 2.5100395159429243e-08

# log(1+f) = 2 atanh(s), s = f/(2+f); R(z) = z*L(z), z = s*s, |s| <= 0.1716 (error 1.6e-18).
_L0 = 0.666666666666667
_L1 = 0.3999999999989926
_L2 = 0.285714286260867
_L3 = 0.22222211116643983
_L4 = 0.18182890447465838
_L5 = 0.15331677659440854
_L6 = 0.1461699270804503
_SQRT_HALF_BITS = 0x3FE6A09E667F3BCD

# float32 tanh (``_tanh32``), every constant a float32 so that numba keeps the arithmetic in
# float32. Below _TANH32_SMALL: tanh(x) = x + x*z*P(z), z = x*x; above: 1 - 2 / (e**(2x) + 1)
# with e**r = 1 + r + r*r*Q(r) on |r| <= ln(2)/2 (both near-minimax fits). Over every float32
# in [0, 9.5] this is within 1.33 ulp of tanh (99.7% correctly rounded).
_TANH32_SMALL = np.float32(0.625)
_TANH32_ONE_AT = np.float32(10.0)  # tanh(x) rounds to 1 in float32 from x = 9.01
_P32 = tuple(np.float32(c) for c in (
    -0.3333333134651184, 0.1333322525024414, -0.053948961198329926, 0.02171201817691326,
    -0.00820417795330286, 0.0021667033433914185))
_Q32 = tuple(np.float32(c) for c in (
    0.4999999403953552, 0.1666652113199234, 0.04166838899254799, 0.008368715643882751,
    0.0013814601115882397))
_INV_LN2_32 = np.float32(1.4426950408889634)
_SHIFT32 = np.float32(12582912.0)  # 1.5 * 2**23
_SHIFT32_BITS = np.int32(0x4B400000)
_LN2_HI_32 = np.float32(0.693359375)  # 9 significant bits: k * _LN2_HI_32 is exact
_LN2_LO_32 = np.float32(-2.1219444005469057e-04)
_ONE32 = np.float32(1.0)
_TWO32 = np.float32(2.0)
_ABS32 = np.int32(0x7FFFFFFF)
_SIGN32 = np.int32(-0x80000000)

# On |r| <= pi/4: sin(r) = r + r*z*T(z), cos(r) = 1 - z/2 + z*z*C(z).
_T0 = -0.16666666666666666
_T1 = 0.008333333333333331
_T2 = -0.00019841269841265055
_T3 = 2.755731921933174e-06
_T4 = -2.5052106229867592e-08
_T5 = 1.6058531210130865e-10
_T6 = -7.586673021289394e-13
_C0 = 0.041666666666666664
_C1 = -0.0013888888888887393
_C2 = 2.4801587298761176e-05
_C3 = -2.755731726939027e-07
_C4 = 2.0876145780903544e-09
_C5 = -1.1382597309861877e-11

# atan(t) = t + t*z*A(z), z = t*t, |t| <= tan(pi/8).
_A0 = -0.3333333333333333
_A1 = 0.19999999999995505
_A2 = -0.1428571428466309
_A3 = 0.11111111014978707
_A4 = -0.0909090456684444
_A5 = 0.07692182928840854
_A6 = -0.06664507757790682
_A7 = 0.05858116867643757
_A8 = -0.05085282079549792
_A9 = 0.03922681568071122
_A10 = -0.01917095767812993

_TWO_OVER_PI = 0.6366197723675814
_PIO2_HI = 1.5707963267948966
_PIO2_LO = 6.123233995736766e-17
_PIO4_HI = 0.7853981633974483
_PIO4_LO = 3.061616997868383e-17
_TAN_PI_8 = 0.41421356237309503
_TAN_3PI_8 = 2.414213562373095

# pi/2 in four pieces (fdlibm): the first three have <= 32 significant bits, so q * piece is
# exact for |q| < 2**21; together they carry pi/2 to ~150 bits.
_PIO2_1 = 1.57079632673412561417e00
_PIO2_2 = 6.07710050630396597660e-11
_PIO2_3 = 2.02226624871116645580e-21
_PIO2_4 = 8.47842766036889956997e-32

#: Arguments of sin/cos/tan at least this large in magnitude take the Payne-Hanek reduction.
_REDUCE_LIMIT = 1048576.0  # 2**20


def _inv_pi_chunks(count):
    """1/pi in 24-bit chunks: 1/pi = sum_j chunk[j] * 2**(-24 (j + 1)), exactly, as floats."""
    bits = 24 * count + 64
    # pi to bits + 64 fractional bits (Machin), then 2**bits / pi, truncated.
    scale = 1 << (bits + 64)

    def arctan_inv(n):
        total, term, k, sign = 0, scale // n, 1, 1
        n2 = n * n
        while term:
            total += sign * (term // k)
            term //= n2
            k += 2
            sign = -sign
        return total

    pi_fixed = 16 * arctan_inv(5) - 4 * arctan_inv(239)
    inv = (scale << bits) // pi_fixed  # ~ 2**bits / pi, off by a few units in the last place
    inv >>= 64  # drop the guard bits: 2**(24 count) / pi
    return [float((inv >> (24 * (count - 1 - j))) & 0xFFFFFF) for j in range(count)]


def _pairs(chunks):
    # Two zero chunks in front: the reduction starts at chunk floor((e - 1) / 24), which is -2
    # or -1 for arguments below 2**53. Entry j holds c_j + c_(j+1) 2**-24 (48 bits: exact).
    c = [0.0, 0.0] + chunks
    return np.array([c[i] + c[i + 1] * 2.0**-24 for i in range(len(c) - 1)], dtype=np.float64)


_PAIRS = _pairs(_inv_pi_chunks(52))
_TWO_M48 = 2.0**-48
_TWO_M96 = 2.0**-96
_TWO_M144 = 2.0**-144


# ---------------------------------------------------------------------------------------------
# Helpers (float64 in, float64 out).


@njit(**_JIT)
def _pow2(k):
    """2**k for an int64 k in [-1022, 1023], built from its bits."""
    return _bits_to_float((k + 1023) << 52)


@njit(**_JIT)
def _copysign(y, x):
    """|y| with the sign of x (y, x float64)."""
    return _bits_to_float((_float_to_bits(y) & _ABS) | (_float_to_bits(x) & _SIGN))


@njit(**_JIT)
def _exp_reduce(x):
    """For finite x (|x| <= ~1100) or nan: (r_hi, r_lo, w, k) with x = k ln2 + r_hi + r_lo,
    r_hi exact, |r| <= ln2/2, and e**x = 2**k (1 + r_hi + (r_lo + w)), w ~ e**r - 1 - r."""
    kd = _fma(x, _INV_LN2, _SHIFT)
    k = _float_to_bits(kd) - _SHIFT_BITS
    kd = kd - _SHIFT
    r_hi = _fma(-kd, _LN2_HI, x)  # exact: kd * _LN2_HI is exact and close to x
    r_lo = -(kd * _LN2_LO)
    r = r_hi + r_lo
    p = _fma(_E9, r, _E8)
    p = _fma(p, r, _E7)
    p = _fma(p, r, _E6)
    p = _fma(p, r, _E5)
    p = _fma(p, r, _E4)
    p = _fma(p, r, _E3)
    p = _fma(p, r, _E2)
    p = _fma(p, r, _E1)
    p = _fma(p, r, _E0)
    return r_hi, r_lo, r * r * p, k


@njit(**_JIT)
def _scale(y, k):
    """y * 2**k for k in [-2044, 2046], rounding once (into the subnormals if need be)."""
    k1 = k >> 1
    return y * _pow2(k1) * _pow2(k - k1)


@njit(**_JIT)
def _exp_scaled(x, shift):
    """e**x * 2**shift for x in [-746, 711] (or nan), shift in {-1, 0}."""
    r_hi, r_lo, w, k = _exp_reduce(x)
    return _scale(1.0 + (r_hi + (r_lo + w)), k + shift)


@njit(**_JIT)
def _exp64(x):
    x = 710.0 if x > 710.0 else x
    x = -746.0 if x < -746.0 else x
    return _exp_scaled(x, 0)


@njit(**_JIT)
def _expm1_small(x):
    """e**x - 1 for x in [-60, 41] (and nan), ~1 ulp."""
    r_hi, r_lo, w, k = _exp_reduce(x)
    s = _pow2(k)
    # (s - 1) + s r_hi is exact where it cancels (k = 1, r_hi < 0).
    return _fma(s, r_lo + w, _fma(s, r_hi, s - 1.0))


@njit(**_JIT)
def _expm1_64(x):
    x = 710.0 if x > 710.0 else x
    x = -60.0 if x < -60.0 else x
    small = _expm1_small(40.0 if x > 40.0 else x)
    big = _exp_scaled(x, 0)  # -1 is below half an ulp of e**x for x > 38
    y = big if x > 40.0 else small
    return x if x == 0.0 else y  # keeps -0.0


@njit(**_JIT)
def _log_parts(u):
    """For u > 0 normal: (k, f, s, R) with u = 2**k (1 + f), f in [sqrt(1/2) - 1, sqrt(2) - 1),
    s = f / (2 + f) and log(1 + f) = f - hfsq + s (hfsq + R), hfsq = f*f/2."""
    bits = _float_to_bits(u)
    k = (bits - _SQRT_HALF_BITS) >> 52
    f = _bits_to_float(bits - (k << 52)) - 1.0
    s = f / (2.0 + f)
    z = s * s
    p = _fma(_L6, z, _L5)
    p = _fma(p, z, _L4)
    p = _fma(p, z, _L3)
    p = _fma(p, z, _L2)
    p = _fma(p, z, _L1)
    p = _fma(p, z, _L0)
    return k, f, s, z * p


@njit(**_JIT)
def _log64(x):
    # Subnormals: scale into the normal range first.
    tiny = x < 2.2250738585072014e-308
    u = x * 18014398509481984.0 if tiny else x  # 2**54
    k, f, s, r = _log_parts(u)
    dk = np.float64(k - (54 if tiny else 0))
    hfsq = 0.5 * f * f
    y = _fma(dk, _LN2_HI, -((hfsq - _fma(s, hfsq + r, dk * _LN2_LO)) - f))
    y = x if not (x <= _DBL_MAX) else y  # +inf, nan
    y = -_INF if x == 0.0 else y
    return _NAN if x < 0.0 else y


@njit(**_JIT)
def _log1p64(x):
    u = 1.0 + x
    k, f, s, r = _log_parts(u)
    # u = 1 + x rounded; c / u corrects log(u) to log(1 + x).
    c = (1.0 - (u - x)) if u >= 2.0 else (x - (u - 1.0))  # both exact
    c = c / u
    dk = np.float64(k)
    hfsq = 0.5 * f * f
    y = _fma(dk, _LN2_HI, -((hfsq - _fma(s, hfsq + r, _fma(dk, _LN2_LO, c))) - f))
    y = x if not (x <= _DBL_MAX) else y  # +inf, nan
    y = -_INF if x == -1.0 else y
    y = _NAN if x < -1.0 else y
    return x if x == 0.0 else y  # keeps -0.0


@njit(**_JIT)
def _tanh64(x):
    ax = abs(x)
    ax = 20.0 if ax > 20.0 else ax  # tanh(20) rounds to 1
    t = _expm1_small(2.0 * ax)
    d = t + 2.0
    bb = d - t
    d_err = (t - (d - bb)) + (2.0 - bb)  # t + 2 = d + d_err exactly
    q = t / d
    y = _fma(-q * d_err, 0.5 - 0.5 * q, q)  # q (1 - d_err / d), 1 / d = (1 - q) / 2
    return _copysign(y, x)


@njit(**_JIT)
def _tanh32(x):
    """tanh of a float32 in float32 arithmetic (twice the lanes of float64 in a vector; see
    the constants). Branch-free: both sides are computed and one is selected."""
    ax = abs(x)
    ax = _TANH32_ONE_AT if ax > _TANH32_ONE_AT else ax  # (and +inf; nan stays)
    z = ax * ax
    p = _fma32(_P32[5], z, _P32[4])
    p = _fma32(p, z, _P32[3])
    p = _fma32(p, z, _P32[2])
    p = _fma32(p, z, _P32[1])
    p = _fma32(p, z, _P32[0])
    small = _fma32(ax, z * p, ax)
    t = _TWO32 * ax
    kd = _fma32(t, _INV_LN2_32, _SHIFT32)  # t / ln 2 rounded to the integer k, in the low bits
    k = _float_to_bits(kd) - _SHIFT32_BITS
    kd = kd - _SHIFT32
    r = _fma32(-kd, _LN2_LO_32, _fma32(-kd, _LN2_HI_32, t))
    q = _fma32(_Q32[4], r, _Q32[3])
    q = _fma32(q, r, _Q32[2])
    q = _fma32(q, r, _Q32[1])
    q = _fma32(q, r, _Q32[0])
    e = (_ONE32 + _fma32(r * r, q, r)) * _bits_to_float(np.int32((k + 127) << 23))  # e**t
    big = _ONE32 - _TWO32 / (e + _ONE32)
    y = small if ax < _TANH32_SMALL else big
    return _bits_to_float(np.int32((_float_to_bits(y) & _ABS32) | (_float_to_bits(x) & _SIGN32)))


@njit(**_JIT)
def _sigmoid64(x):
    ax = abs(x)
    ax = 746.0 if ax > 746.0 else ax
    z = _exp_scaled(-ax, 0)  # in (0, 1]: no overflow on either side
    d = 1.0 + z
    d_err = (1.0 - d) + z  # 1 + z = d + d_err exactly
    pos = x >= 0.0
    q = (1.0 if pos else z) / d
    inv = q if pos else 1.0 - q  # ~ 1 / (1 + z)
    return _fma(-q, d_err * inv, q)


@njit(**_JIT)
def _cosh64(x):
    ax = abs(x)
    ax = 711.0 if ax > 711.0 else ax
    h = _exp_scaled(ax, -1)  # e**|x| / 2, without overflow up to cosh's own
    return h + 0.25 / h


@njit(**_JIT)
def _sinh64(x):
    ax = abs(x)
    ax = 711.0 if ax > 711.0 else ax
    t = _expm1_small(22.0 if ax > 22.0 else ax)
    small = 0.5 * (t + t / (t + 1.0))
    big = _exp_scaled(ax, -1)  # e**|x| / 2; e**-|x| is negligible past 22
    y = big if ax > 22.0 else small
    return _copysign(y, x)


@njit(**_JIT)
def _arctan64(x):
    ax = abs(x)
    mid = ax > _TAN_PI_8
    high = ax > _TAN_3PI_8
    # One division: t = ax, (ax - 1) / (ax + 1) or -1 / ax; atan(x) = offset + atan(t).
    num = -1.0 if high else (ax - 1.0 if mid else ax)
    den = ax if high else (ax + 1.0 if mid else 1.0)
    off_hi = _PIO2_HI if high else (_PIO4_HI if mid else 0.0)
    off_lo = _PIO2_LO if high else (_PIO4_LO if mid else 0.0)
    t = num / den
    z = t * t
    p = _fma(_A10, z, _A9)
    p = _fma(p, z, _A8)
    p = _fma(p, z, _A7)
    p = _fma(p, z, _A6)
    p = _fma(p, z, _A5)
    p = _fma(p, z, _A4)
    p = _fma(p, z, _A3)
    p = _fma(p, z, _A2)
    p = _fma(p, z, _A1)
    p = _fma(p, z, _A0)
    y = off_hi + (off_lo + _fma(t * z, p, t))
    return _copysign(y, x)


# ---------------------------------------------------------------------------------------------
# Trigonometric reductions.


@njit(**_JIT)
def _mod2(t):
    """t mod 2 in [0, 2), exactly, for t >= 0."""
    return _fma(-2.0, np.floor(0.5 * t), t)


@njit(**_JIT)
def _mod2c(t):
    """t minus a multiple of 2 (exactly), in [-2, 2], for |t| < 2.5 * 2**53."""
    return t - ((t + 13510798882111488.0) - 13510798882111488.0)  # 1.5 * 2**53


@njit(**_JIT)
def _round_to(t, big):
    """t rounded to the grid 2**g, given big = 1.5 * 2**(52 + g) (|t| < 2**(51 + g))."""
    return (t + big) - big


@njit(**_JIT)
def _reduce_pi_large(a, mult, offset, need):
    """Payne-Hanek: for a >= 2**20 (finite), z = mult * a / pi + offset (mod 2) split as
    z = k + f, k integer, |f| <= ~1/2; returns (f_hi, f_lo, k) with f = f_hi + f_lo to about
    2**-115 absolute (mult is 1.0 or 2.0, offset 0.0 or 0.5).

    a = m 2**e with m a 53-bit integer; 1/pi = sum_j c_j 2**(-24 (j + 1)) with 24-bit integers
    c_j. The chunks whose products with a are multiples of 2 are skipped; the next eight are
    read as four 48-bit pairs, and each product of a with a pair is computed exactly as p + err
    (fma). The pieces are cut at two grids into three sums H, M, L, each computed exactly (or,
    for L, below 2**-66); multiples of 2 are dropped from the pieces of H.
    """
    bits = _float_to_bits(a)
    e = (bits >> 52) - 1075  # a = m * 2**e, m integer in [2**52, 2**53)
    m = _bits_to_float((bits & _MANT) | 0x4330000000000000)  # m as a float: exponent 52
    j = ((e + 47) * 2731) >> 16  # floor((e - 1) / 24) + 2 (index into _PAIRS); e + 47 >= 15
    sc = _pow2(e + 24 - 24 * j)  # 2**s0, s0 in [-23, 0]: the scale of the first chunk kept
    m0 = m * sc
    m1 = m0 * _TWO_M48
    m2 = m0 * _TWO_M96
    m3 = m0 * _TWO_M144
    # Loaded only where needed (masked gathers in a vectorised loop).
    q0 = _PAIRS[j] if need else 0.0
    q1 = _PAIRS[j + 2] if need else 0.0
    q2 = _PAIRS[j + 4] if need else 0.0
    q3 = _PAIRS[j + 6] if need else 0.0
    # Pair i: a * (its chunks) = m_i q_i, on the grid 2**(s0 - 24 - 48 i), below
    # 2**(s0 + 77 - 48 i).
    p0 = m0 * q0
    e0 = _fma(m0, q0, -p0)  # |e0| < 2**(s0 + 23)
    p1 = m1 * q1  # < 2**(s0 + 29)
    e1 = _fma(m1, q1, -p1)  # |e1| <= 2**(s0 - 25)
    p2 = m2 * q2  # < 2**(s0 - 19)
    e2 = _fma(m2, q2, -p2)  # |e2| < 2**(s0 - 72)
    p3 = m3 * q3  # < 2**(s0 - 67): rounding it costs < 2**-119
    g1 = sc * 402653184.0  # 1.5 * 2**(s0 + 28): rounds to the grid 2**(s0 - 24)
    g2 = sc * 1.430511474609375e-06  # 1.5 * 2**(s0 - 20): rounds to the grid 2**(s0 - 72)
    p1h = _round_to(p1, g1)
    p2h = _round_to(p2, g1)
    p2r = p2 - p2h
    p2m = _round_to(p2r, g2)
    # H: grid 2**(s0 - 24), |H| < 7: exact, as is mult * H + offset.
    h = (_mod2(p0) + _mod2c(e0)) + (_mod2c(p1h) + p2h)
    h = _fma(h, mult, offset)
    # M: grid 2**(s0 - 72), |M| < 2**(s0 - 23): exact. L: |L| < 2**(s0 - 66).
    mid = ((p1 - p1h) + e1) + p2m
    low = ((p2r - p2m) + e2) + p3
    mid = mid * mult
    low = low * mult
    k = np.floor(h + 0.5)  # |k| <= 15; only k mod 2 (mult 1) or mod 4 (mult 2) matters
    f = h - k  # exact, |f| <= 1/2, on the grid of h
    f_hi = f + mid  # two-sum: f_hi + err = f + mid exactly
    t = f_hi - f
    err = (f - (f_hi - t)) + (mid - t)
    return f_hi, err + low, k


@njit(**_JIT)
def _times(f_hi, f_lo, p_hi, p_lo):
    """(f_hi + f_lo) * (p_hi + p_lo) as a float64 pair (r_hi, r_lo)."""
    p = f_hi * p_hi
    tail = _fma(f_hi, p_hi, -p) + _fma(f_hi, p_lo, f_lo * p_hi)
    r_hi = p + tail
    return r_hi, tail - (r_hi - p)


@njit(**_JIT)
def _two_diff(a, b):
    """(s, e) with s = a - b rounded and s + e = a - b exactly."""
    s = a - b
    bb = s - a
    return s, (a - (s - bb)) - (b + bb)


@njit(**_JIT)
def _cody_waite(x, qd):
    """x - qd pi/2 as a pair (r_hi, r_lo), |qd| < 2**20, to ~2**-100 relative."""
    t = _fma(-qd, _PIO2_1, x)  # exact
    r1, e1 = _two_diff(t, qd * _PIO2_2)
    r2, e2 = _two_diff(r1, qd * _PIO2_3)
    lo = _fma(-qd, _PIO2_4, e1 + e2)
    r_hi = r2 + lo
    return r_hi, lo - (r_hi - r2)


@njit(**_JIT)
def _sin_cos_poly(r, r_lo):
    """(sin, cos) of r + r_lo, |r| <= ~pi/4, |r_lo| <= ulp(r)."""
    z = r * r
    p = _fma(_T6, z, _T5)
    p = _fma(p, z, _T4)
    p = _fma(p, z, _T3)
    p = _fma(p, z, _T2)
    p = _fma(p, z, _T1)
    p = _fma(p, z, _T0)
    s = r + _fma(r * z, p, r_lo * _fma(-0.5, z, 1.0))
    p = _fma(_C5, z, _C4)
    p = _fma(p, z, _C3)
    p = _fma(p, z, _C2)
    p = _fma(p, z, _C1)
    p = _fma(p, z, _C0)
    c = 1.0 - _fma(-z * z, p, _fma(r, r_lo, 0.5 * z))
    return s, c


@njit(**_JIT)
def _reduce_pio2(x):
    """x = q pi/2 + r with |r| <= ~pi/4: (r_hi, r_lo, q) with only q mod 4 exact (int64)."""
    ax = abs(x)
    # Cody-Waite for |x| < 2**20.
    kd = _fma(x, _TWO_OVER_PI, _SHIFT)
    k = _float_to_bits(kd) - _SHIFT_BITS
    kd = kd - _SHIFT
    r, r_lo = _cody_waite(x, kd)
    # Payne-Hanek for larger |x|: 2 |x| / pi = kk + f (mod 4, as the mod 2 of |x| / pi is
    # exact and doubled).
    big = ax >= _REDUCE_LIMIT
    a = ax if big else _REDUCE_LIMIT
    a = _DBL_MAX if not (a <= _DBL_MAX) else a  # inf/nan: keep the table index in range
    f_hi, f_lo, kk = _reduce_pi_large(a, 2.0, 0.0, big)
    rb, rb_lo = _times(f_hi, f_lo, _PIO2_HI, _PIO2_LO)
    qb = np.int64(kk)
    if x < 0.0:
        rb = -rb
        rb_lo = -rb_lo
        qb = -qb
    r = rb if big else r
    r_lo = rb_lo if big else r_lo
    q = qb if big else k
    return r, r_lo, q


@njit(**_JIT)
def _sincos64(x, is_cos):
    """sin(x) (is_cos = 0) or cos(x) = sin(x + pi/2) (is_cos = 1)."""
    r, r_lo, q = _reduce_pio2(x)
    return _sincos_from(x, r, r_lo, q, is_cos)


@njit(**_JIT)
def _reduce_pio2_small(x):
    """:func:`_reduce_pio2` for |x| < 2**20 (or not finite) only: Cody-Waite alone, without
    the Payne-Hanek branch (its table loads are gathers in a vectorised loop)."""
    kd = _fma(x, _TWO_OVER_PI, _SHIFT)
    q = _float_to_bits(kd) - _SHIFT_BITS
    r, r_lo = _cody_waite(x, kd - _SHIFT)
    return r, r_lo, q


@njit(**_JIT)
def _sincos64_small(x, is_cos):
    """:func:`_sincos64` for |x| < 2**20 (or not finite) only."""
    r, r_lo, q = _reduce_pio2_small(x)
    return _sincos_from(x, r, r_lo, q, is_cos)


@njit(**_JIT)
def _sincos_from(x, r, r_lo, q, is_cos):
    """sin or cos of x from its reduction x = q pi/2 + (r + r_lo)."""
    s, c = _sin_cos_poly(r, r_lo)
    n = q + is_cos
    y = c if (n & 1) else s
    y = _bits_to_float(_float_to_bits(y) ^ ((n & 2) << 62))  # negate in quadrants 2, 3
    if is_cos == 0:
        y = x if x == 0.0 else y  # sin(-0.0) = -0.0
    return x - x if not (abs(x) <= _DBL_MAX) else y  # inf, nan -> nan


@njit(**_JIT)
def _tan64(x):
    r, r_lo, q = _reduce_pio2(x)
    return _tan_from(x, r, r_lo, q)


@njit(**_JIT)
def _tan64_small(x):
    """:func:`_tan64` for |x| < 2**20 (or not finite) only."""
    r, r_lo, q = _reduce_pio2_small(x)
    return _tan_from(x, r, r_lo, q)


@njit(**_JIT)
def _tan_from(x, r, r_lo, q):
    """tan of x from its reduction x = q pi/2 + (r + r_lo)."""
    s, c = _sin_cos_poly(r, r_lo)
    odd = q & 1
    # tan(x) = s / c for even quadrants, -c / s for odd ones.
    num = -c if odd else s
    den = s if odd else c
    y = num / den
    y = x if x == 0.0 else y  # tan(-0.0) = -0.0
    return x - x if not (abs(x) <= _DBL_MAX) else y


# ---------------------------------------------------------------------------------------------
# Vector width. LLVM's tuning for AVX-512 CPUs prefers 256-bit vectors, and these loops are
# bound by their instructions: in 512-bit vectors a loop of 131,072 elements took 9-33% less
# time for every float64 function and 23-29% less for float32 tanh, sin, cos and tan; the other
# float32 functions (which compute in float64) were no faster, log 11% slower, and keep 256
# (docs/benchmarking.rst, "Wide vectors for the transcendental functions"). Same bits: each
# element's arithmetic is the same at any width, and nothing here is a reduction.

#: The LLVM function attribute, a key and a value (llvmlite's ``FunctionAttributes.add`` takes
#: only its own list of names, so it goes in through ``set.add``).
_PREFER_WIDE = '"prefer-vector-width"="512"'


def _prefer_wide(function):
    try:
        set.add(function.attributes, _PREFER_WIDE)
    except TypeError:  # (another llvmlite: the default width, the same bits)
        pass


@intrinsic
def _wide(typingctx):
    """Prefer 512-bit vectors in the function being compiled: with ``inline="always"``, the
    kernel whose loop calls the function that calls this (no effect without AVX-512)."""

    def codegen(context, builder, signature, args):
        _prefer_wide(builder.function)
        return context.get_dummy_value()

    return types.void(), codegen


@intrinsic
def _wide_for_float64(typingctx, x):
    """:func:`_wide` where ``x`` computes in float64 (any type but float32)."""

    def codegen(context, builder, signature, args):
        if signature.args[0] != types.float32:
            _prefer_wide(builder.function)
        return context.get_dummy_value()

    return types.void(x), codegen


# ---------------------------------------------------------------------------------------------
# The public scalar functions: float32 in -> float32 out, anything else -> float64.


@njit(**_JIT)
def exp(x):
    _wide_for_float64(x)
    return _as_result(_exp64(np.float64(x)), x)


@njit(**_JIT)
def expm1(x):
    _wide_for_float64(x)
    return _as_result(_expm1_64(np.float64(x)), x)


@njit(**_JIT)
def log(x):
    _wide_for_float64(x)
    return _as_result(_log64(np.float64(x)), x)


@njit(**_JIT)
def log1p(x):
    _wide_for_float64(x)
    return _as_result(_log1p64(np.float64(x)), x)


def tanh(x):
    """tanh of a scalar: float32 in float32 (``_tanh32``), anything else in float64 (an
    ``overload``, so that compiled code picks the implementation by type)."""
    return _tanh_scalar(x)


@overload(tanh, inline="always")
def _tanh_typed(x):
    if x == types.float32:
        def tanh32(x):
            _wide()
            return _tanh32(x)

        return tanh32

    def tanh64(x):
        _wide()
        return _as_result(_tanh64(np.float64(x)), x)

    return tanh64


@njit(cache=True, error_model="numpy")
def _tanh_scalar(x):
    return tanh(x)


@njit(**_JIT)
def sigmoid(x):
    _wide_for_float64(x)
    return _as_result(_sigmoid64(np.float64(x)), x)


@njit(**_JIT)
def sin(x):
    _wide()
    return _as_result(_sincos64(np.float64(x), 0), x)


@njit(**_JIT)
def cos(x):
    _wide()
    return _as_result(_sincos64(np.float64(x), 1), x)


@njit(**_JIT)
def sin_small(x):
    """:func:`sin` for |x| < 2**20 or not finite (see :func:`trig_arguments_small`)."""
    _wide()
    return _as_result(_sincos64_small(np.float64(x), 0), x)


@njit(**_JIT)
def cos_small(x):
    """:func:`cos` for |x| < 2**20 or not finite (see :func:`trig_arguments_small`)."""
    _wide()
    return _as_result(_sincos64_small(np.float64(x), 1), x)


@njit(**_JIT)
def tan_small(x):
    """:func:`tan` for |x| < 2**20 or not finite (see :func:`trig_arguments_small`)."""
    _wide()
    return _as_result(_tan64_small(np.float64(x)), x)


@njit(**_JIT)
def trig_small(x):
    """Whether ``x`` is below 2**20 in magnitude or not finite: where ``sin_small``,
    ``cos_small`` and ``tan_small`` give ``sin``, ``cos`` and ``tan``."""
    v = abs(np.float64(x))
    return not ((v >= _REDUCE_LIMIT) & (v <= _DBL_MAX))


# The full functions as calls, not inlined: the kernels' pass over the few elements with a
# large argument (after a reduced-range loop over the others) calls them, so that the pass
# stays a scalar loop, cheap where it finds nothing, instead of a vectorised one that would
# compute the Payne-Hanek reduction (gathers) for every element.
@njit(cache=True, error_model="numpy", nogil=True)
def sin_call(x):
    return sin(x)


@njit(cache=True, error_model="numpy", nogil=True)
def cos_call(x):
    return cos(x)


@njit(cache=True, error_model="numpy", nogil=True)
def tan_call(x):
    return tan(x)


@njit(cache=True, error_model="numpy", nogil=True)
def trig_arguments_small(a):
    """Whether every element of ``a`` is below 2**20 in magnitude or not finite: then
    ``sin_small``/``cos_small`` give ``sin``/``cos``. A vectorised pass over ``a``; kernels
    run it first and take the loop without the large-argument reduction when it holds."""
    large = 0
    for i in range(a.size):
        v = abs(np.float64(a[i]))
        large += (v >= _REDUCE_LIMIT) & (v <= _DBL_MAX)
    return large == 0


@njit(**_JIT)
def tan(x):
    _wide()
    return _as_result(_tan64(np.float64(x)), x)


@njit(**_JIT)
def sinh(x):
    _wide_for_float64(x)
    return _as_result(_sinh64(np.float64(x)), x)


@njit(**_JIT)
def cosh(x):
    _wide_for_float64(x)
    return _as_result(_cosh64(np.float64(x)), x)


@njit(**_JIT)
def arctan(x):
    _wide_for_float64(x)
    return _as_result(_arctan64(np.float64(x)), x)


#: Digest of this file. The functions are inlined into the kernels that call them, and numba's
#: on-disk cache of a kernel does not notice a change here: fold this into the kernel's cache key.
with open(__file__, "rb") as _source:
    SOURCE_HASH = hashlib.sha1(_source.read()).hexdigest()[:16]
del _source

#: The reduced-range trigonometry and its check, for kernels that test their arguments first.
SMALL_TRIG_NAMES = ("sin_small", "cos_small", "tan_small", "trig_arguments_small",
                    "trig_small", "sin_call", "cos_call", "tan_call")

FASTMATH_NAMES = (
    "exp",
    "expm1",
    "log",
    "log1p",
    "tanh",
    "sigmoid",
    "sin",
    "cos",
    "tan",
    "sinh",
    "cosh",
    "arctan",
)
