"""The scalar vocabulary that elementwise formulas are written in.

An elementwise op's forward and derivative are one-line formulas over scalars (``"g * cos(x)"``).
Generated kernels import their names from here (and ``math``); the engine evaluates the same
formula over Tensors when it records a differentiable backward. So every name used in a formula
must exist both here (as a numba-compilable scalar function) and as an op of the same name.
"""

import hashlib
import math

import numpy as np
from numba import njit

# Names taken straight from ``math`` (numba compiles them to libm calls).
MATH_NAMES = (
    "exp",
    "expm1",
    "log",
    "log1p",
    "sqrt",
    "sin",
    "cos",
    "tan",
    "arcsin",
    "arccos",
    "arctan",
    "sinh",
    "cosh",
    "tanh",
    "log2",
    "log10",
    "arctan2",
    "hypot",
    "arcsinh",
    "arccosh",
    "arctanh",
)

_MATH_ALIASES = {
    "arcsin": "asin",
    "arccos": "acos",
    "arctan": "atan",
    "arctan2": "atan2",
    "arcsinh": "asinh",
    "arccosh": "acosh",
    "arctanh": "atanh",
}


def math_import_line():
    """The import statement that brings the libm names into a generated kernel module."""
    parts = []
    for name in MATH_NAMES:
        source = _MATH_ALIASES.get(name, name)
        parts.append(name if source == name else f"{source} as {name}")
    return "from math import " + ", ".join(parts)


@njit(cache=True)
def where(condition, if_true, if_false):
    return if_true if condition else if_false


@njit(cache=True)
def maximum(a, b):
    # NaN propagates, as numpy.maximum.
    if a != a:
        return a
    if b != b:
        return b
    return a if a >= b else b


@njit(cache=True)
def minimum(a, b):
    if a != a:
        return a
    if b != b:
        return b
    return a if a <= b else b


@njit(cache=True)
def sign(x):
    if x > 0:
        return 1.0
    if x < 0:
        return -1.0
    return x * 0.0  # keeps 0.0 and NaN


@njit(cache=True)
def sigmoid(x):
    # Two branches so that exp never overflows.
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


#: The helpers below: NumPy's error model (a division by zero gives inf or nan, as in the
#: kernels, and never raises).
_JIT = dict(cache=True, error_model="numpy")

_TWO52 = 4503599627370496.0  # 2**52: every float64 from here on is an integer


@njit(**_JIT)
def rint(x):
    # Adding and taking away 2**52 rounds |x| half to even, in plain arithmetic: the same source
    # compiles for CUDA, where ``math.floor`` gives a float (on the CPU numba gives an int).
    x = np.float64(x)
    a = abs(x)
    r = (a + _TWO52) - _TWO52 if a < _TWO52 else a
    return math.copysign(r, x)


@njit(**_JIT)
def floor(x):
    r = rint(x)
    return r - 1.0 if r > x else r  # keeps floor(-0.0) = -0.0


@njit(**_JIT)
def _trunc(x):
    return math.copysign(floor(abs(x)), x)


# -- scipy.special ----------------------------------------------------------------------------
# Each computes in float64 (``np.float64(x)``; numba's ``float(x)`` keeps a float32), so a
# float32 result is the float64 one rounded once, as SciPy's float32 loops give. The algorithms
# are SciPy's own (Cephes, Boost) unless a comment says otherwise; tests/ops/test_special.py
# measures the error against SciPy and against high-precision values, in ulps.

_SQRT1_2 = 0.7071067811865476
_HALF_LOG_2PI = 0.9189385332046728  # log(2 pi) / 2
_TWO_OVER_SQRT_PI = 1.1283791670955126
_SQRT_PI = 1.7724538509055159
_EULER = 0.5772156649015329


@njit(**_JIT)
def erf(x):
    return math.erf(np.float64(x))


@njit(**_JIT)
def erfc(x):
    return math.erfc(np.float64(x))


@njit(**_JIT)
def gammaln(x):
    x = np.float64(x)
    # SciPy's value at -inf (libm's lgamma gives +inf).
    return -math.inf if x == -math.inf else math.lgamma(x)


# sqrt(1/2) = _SQRT1_2 + _SQRT1_2_TAIL, and _SQRT1_2 split in two halves of 26 bits (Veltkamp),
# whose products with the halves of x are exact.
_SQRT1_2_TAIL = -4.833646656726457e-17
_SQRT1_2_HIGH = 0.7071067839860916
_SQRT1_2_LOW = -2.7995440410322203e-09


@njit(**_JIT)
def _erfc_sqrt1_2(x):
    # erfc(x / sqrt(2)) without the error of rounding x / sqrt(2) first, which erfc's slope
    # multiplies by 2 t**2 (~1400 ulp at x = -37; SciPy's ndtr and log_ndtr keep it): the
    # product's rounding error (Dekker's exact product, no fma, so that the source compiles
    # for CUDA too) corrects erfc to first order.
    t = x * _SQRT1_2
    if not abs(x) < 1e300:  # the splitting would overflow; erfc is 0 or 2 there anyway
        return math.erfc(t)
    c = 134217729.0 * x  # 2**27 + 1
    high = c - (c - x)
    low = x - high
    error = ((high * _SQRT1_2_HIGH - t) + high * _SQRT1_2_LOW + low * _SQRT1_2_HIGH)
    error += low * _SQRT1_2_LOW
    dt = error + x * _SQRT1_2_TAIL
    return math.erfc(t) - _TWO_OVER_SQRT_PI * math.exp(-t * t) * dt


@njit(**_JIT)
def ndtr(x):
    # Cephes: erf near 0, erfc in the tails (where 0.5 + 0.5 * erf would cancel).
    x = np.float64(x)
    t = x * _SQRT1_2
    if abs(t) < 1.0:
        return 0.5 + 0.5 * math.erf(t)
    tail = 0.5 * _erfc_sqrt1_2(abs(x))
    return 1.0 - tail if t > 0.0 else tail


@njit(**_JIT)
def log_ndtr(x):
    x = np.float64(x)
    if x >= -1.0:
        return math.log1p(-0.5 * _erfc_sqrt1_2(x))
    if x > -20.0:
        # erfc keeps its relative accuracy in the lower tail (SciPy uses erfcx here).
        return math.log(0.5 * _erfc_sqrt1_2(-x))
    # The asymptotic series of the Mills ratio, log(ndtr(x)) = -x**2/2 - log(-x sqrt(2 pi))
    # + log(1 - z + 3 z**2 - 15 z**3 + ...), z = 1/x**2 < 1/400: its 12th term is below 1e-19.
    z = 1.0 / (x * x)
    t = 1.0
    for k in range(12, 1, -1):
        t = 1.0 - (2 * k - 1) * z * t
    return -0.5 * x * x - math.log(-x) - _HALF_LOG_2PI + math.log1p(-z * t)


@njit(**_JIT)
def logit(x):
    # SciPy's: log(x / (1 - x)), and near 1/2 (where that ratio is near 1)
    # log1p(s) - log1p(-s) with s = 2x - 1, exact there.
    x = np.float64(x)
    if 0.3 <= x <= 0.65:
        s = 2.0 * (x - 0.5)
        return math.log1p(s) - math.log1p(-s)
    return math.log(x / (1.0 - x))


@njit(**_JIT)
def erfinv(y):
    # A first approximation, then Halley steps (cubic) on erf(x) = y, or for |y| > 1/2 on
    # erfc(x) = 1 - |y|, exact there, where erfc keeps the relative accuracy that 1 - erf
    # would lose. The first approximation: Giles' single-precision one ("Approximating the
    # erfinv function", GPU Computing Gems, 2011; relative error ~1e-7: one step), and where
    # 1 - |y| < 1e-7, beyond its range, the tail's asymptotics x**2 ~ L - log(x sqrt(pi)),
    # L = -log(1 - |y|) (~1e-3: two steps).
    y = np.float64(y)
    a = abs(y)
    if not a < 1.0:  # and NaN
        return math.copysign(math.inf, y) if a == 1.0 else math.nan
    q = 1.0 - a
    steps = 1
    if q < 1e-7:
        big = -math.log(q)
        x = math.sqrt(big)
        x = math.sqrt(big - math.log(x * _SQRT_PI))
        steps = 2
    else:
        w = -math.log(q * (1.0 + a))
        if w < 5.0:
            w -= 2.5
            p = 2.81022636e-08
            p = 3.43273939e-07 + p * w
            p = -3.5233877e-06 + p * w
            p = -4.39150654e-06 + p * w
            p = 0.00021858087 + p * w
            p = -0.00125372503 + p * w
            p = -0.00417768164 + p * w
            p = 0.246640727 + p * w
            p = 1.50140941 + p * w
        else:
            w = math.sqrt(w) - 3.0
            p = -0.000200214257
            p = 0.000100950558 + p * w
            p = 0.00134934322 + p * w
            p = -0.00367342844 + p * w
            p = 0.00573950773 + p * w
            p = -0.0076224613 + p * w
            p = 0.00943887047 + p * w
            p = 1.00167406 + p * w
            p = 2.83297682 + p * w
        x = p * a
    for _ in range(steps):
        slope = _TWO_OVER_SQRT_PI * math.exp(-x * x)
        if a <= 0.5:
            step = (math.erf(x) - a) / slope
        else:
            step = (q - math.erfc(x)) / slope
        x -= step / (1.0 + x * step)  # Halley: f''/f' = -2x for erf and erfc alike
    return math.copysign(x, y)


# digamma on [1, 2]: (x - root) * (Y + P(x - 1) / Q(x - 1)), Boost's rational approximation
# around the positive root (as SciPy's Cephes psi has it); the root in three parts.
_PSI_Y = 0.99558162689208984
_PSI_ROOT1 = 1569415565.0 / 1073741824.0
_PSI_ROOT2 = (381566830.0 / 1073741824.0) / 1073741824.0
_PSI_ROOT3 = 0.9016312093258695918615325266959189453125e-19


@njit(**_JIT)
def _digamma_1_2(x):
    g = x - _PSI_ROOT1
    g -= _PSI_ROOT2
    g -= _PSI_ROOT3
    t = x - 1.0
    p = -0.0020713321167745952
    p = p * t - 0.045251321448739056
    p = p * t - 0.28919126444774784
    p = p * t - 0.65031853770896507
    p = p * t - 0.32555031186804491
    p = p * t + 0.25479851061131551
    q = -0.55789841321675513e-6
    q = q * t + 0.0021284987017821144
    q = q * t + 0.054151797245674225
    q = q * t + 0.43593529692665969
    q = q * t + 1.4606242909763515
    q = q * t + 2.0767117023730469
    q = q * t + 1.0
    return g * _PSI_Y + g * (p / q)


# digamma near its largest negative root r, where the reflection below cancels (as SciPy, which
# sums a series there): psi(x) = psi(r) + h / (r x) + h / ((r + 1) (x + 1)) + sum c_n h**n,
# h = x - r, c_n = (-1)**(n + 1) zeta(n + 1, r + 2) (Taylor series of psi(x + 2), the terms
# 1/x and 1/(x + 1) taken out so that it converges fast: |h / (r + 2)| < 0.2 within 0.3 of r).
# The c_n to n = 22 (2 ulp measured) and psi(r) were computed with mpmath at 60 digits.
_PSI_NEG_ROOT = -0.5040830082644554
_PSI_AT_NEG_ROOT = 7.289763902976895e-17
_PSI_NEG_ROOT_SERIES = (
    -9.48704488985804e-05, 0.00014191904779929247, -0.00021230094089949746,
    0.0003175891442401357, -0.0004750983849279136, 0.0007107361968853116,
    -0.0010632734592477785, 0.001590746648516227, -0.002380069950809624, 0.0035615020417106053,
    -0.005330509396838975, 0.007981037191019603, -0.011956729288150052, 0.017931311290499935,
    -0.026938776410793626, 0.040595095830363755, -0.06150600545373637, 0.09410557231158634,
    -0.1466662943236801, 0.23722825947363896, -0.41728953034468597, 0.9381979690834112,
)


@njit(**_JIT)
def _digamma_near_neg_root(x):
    h = x - _PSI_NEG_ROOT
    s = 0.0
    for c in _PSI_NEG_ROOT_SERIES:
        s = (s + c) * h
    near = h / (_PSI_NEG_ROOT * x) + h / ((_PSI_NEG_ROOT + 1.0) * (x + 1.0))
    return _PSI_AT_NEG_ROOT + near + s


@njit(**_JIT)
def digamma(x):  # noqa: C901 (njit math: Cephes' psi, a branch per range of x)
    # Cephes' psi: reflection for x < 0, harmonic numbers at integers up to 10, the recurrence
    # into [1, 2] (Boost's rational there) below 10, the asymptotic series from 10 on.
    x = np.float64(x)
    if abs(x - _PSI_NEG_ROOT) < 0.3:
        return _digamma_near_neg_root(x)
    if x == 0.0:
        return math.copysign(math.inf, -x)
    if not abs(x) < math.inf:  # inf -> inf; -inf, NaN -> NaN
        return x if x > 0.0 else math.nan
    y = 0.0
    if x < 0.0:
        fraction = x - _trunc(x)  # pi * fraction: no rounding of pi * x for large |x|
        if fraction == 0.0:
            return math.nan
        y = -math.pi / math.tan(math.pi * fraction)
        x = 1.0 - x
    if x <= 10.0 and x == floor(x):
        for i in range(1, int(x)):
            y += 1.0 / i
        return y - _EULER
    if x < 1.0:
        y -= 1.0 / x
        x += 1.0
    elif x < 10.0:
        while x > 2.0:
            x -= 1.0
            y += 1.0 / x
    if x <= 2.0:
        return y + _digamma_1_2(x)
    z = 1.0 / (x * x)
    s = 8.33333333333333333333e-2
    s = s * z - 2.10927960927960927961e-2
    s = s * z + 7.57575757575757575758e-3
    s = s * z - 4.16666666666666666667e-3
    s = s * z + 3.96825396825396825397e-3
    s = s * z - 8.33333333333333333333e-3
    s = s * z + 8.33333333333333333333e-2
    return y + math.log(x) - 0.5 / x - z * s


#: Euler-Maclaurin coefficients of the Hurwitz zeta: (2k)! / B_2k.
_ZETA_A = (
    12.0,
    -720.0,
    30240.0,
    -1209600.0,
    47900160.0,
    -1.8924375803183791606e9,
    7.47242496e10,
    -2.950130727918164224e12,
    1.1646782814350067249e14,
    -4.5979787224074726105e15,
    1.8152105401943546773e17,
    -7.1661652561756670113e18,
)
_MACHEP = 1.11022302462515654042e-16
#: Below this (negative, non-integer) q the direct sum would take over 2**24 terms: NaN.
_ZETA_MIN_Q = -16777216.0


@njit(**_JIT)
def _zeta(s, q):  # noqa: C901 (njit math: Cephes' zeta, a branch per case of s and q)
    # Hurwitz zeta sum over k >= 0 of (k + q) ** -s, s > 1 (Cephes' zeta: direct terms until
    # q + k > 9, then Euler-Maclaurin).
    if s == 1.0:
        return math.inf
    if not s > 1.0:
        return math.nan
    if q <= 0.0:
        if q == floor(q):
            return math.inf
        if s != floor(s) or q < _ZETA_MIN_Q:
            return math.nan
    if q > 1e8:  # DLMF 25.11.43
        return (1.0 / (s - 1.0) + 0.5 / q) * q ** (1.0 - s)
    total = q ** -s
    a = q
    i = 0
    b = 0.0
    while i < 9 or a <= 9.0:
        i += 1
        a += 1.0
        b = a ** -s
        total += b
        if abs(b / total) < _MACHEP:
            return total
    w = a
    total += b * w / (s - 1.0)
    total -= 0.5 * b
    rising = 1.0
    k = 0.0
    for j in range(12):
        rising *= s + k
        b /= w
        t = rising * b / _ZETA_A[j]
        total += t
        if abs(t / total) < _MACHEP:
            return total
        k += 1.0
        rising *= s + k
        b /= w
        k += 1.0
    return total


@njit(**_JIT)
def polygamma(n, x):
    # psi^(n)(x) = (-1)**(n + 1) n! zeta(n + 1, x) for integer n >= 1 (SciPy's definition).
    n = np.float64(n)
    x = np.float64(x)
    if n == 0.0:
        return digamma(x)
    if not (n > 0.0 and n == floor(n)):
        return math.nan
    sign = 1.0 if n % 2.0 == 1.0 else -1.0
    return sign * math.gamma(n + 1.0) * _zeta(n + 1.0, x)


# Cephes' Chebyshev series of exp(-|x|) I0(x), exp(-|x|) I1(x) / |x| on [0, 8] (in x/2 - 2) and
# of exp(-|x|) sqrt(|x|) I0(x), I1(x) beyond (in 32/|x| - 2).
_I0_A = (
    -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
    1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
    -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
    9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
    -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7,
    1.11738753912010371815e-6, -4.41673835845875056359e-6, 1.64484480707288970893e-5,
    -5.75419501008210370398e-5, 1.88502885095841655729e-4, -5.76375574538582365885e-4,
    1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
    -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2,
    1.71620901522208775349e-1, -3.04682672343198398683e-1, 6.76795274409476084995e-1,
)
_I0_B = (
    -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
    3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
    1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
    -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
    7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
    -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
    3.39623202570838634515e-9, 2.26666899049817806459e-8, 2.04891858946906374183e-7,
    2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
    8.04490411014108831608e-1,
)
_I1_A = (
    2.77791411276104639959e-18, -2.11142121435816608115e-17, 1.55363195773620046921e-16,
    -1.10559694773538630805e-15, 7.60068429473540693410e-15, -5.04218550472791168711e-14,
    3.22379336594557470981e-13, -1.98397439776494371520e-12, 1.17361862988909016308e-11,
    -6.66348972350202774223e-11, 3.62559028155211703701e-10, -1.88724975172282928790e-9,
    9.38153738649577178388e-9, -4.44505912879632808065e-8, 2.00329475355213526229e-7,
    -8.56872026469545474066e-7, 3.47025130813767847674e-6, -1.32731636560394358279e-5,
    4.78156510755005422638e-5, -1.61760815825896745588e-4, 5.12285956168575772895e-4,
    -1.51357245063125314899e-3, 4.15642294431288815669e-3, -1.05640848946261981558e-2,
    2.47264490306265168283e-2, -5.29459812080949914269e-2, 1.02643658689847095384e-1,
    -1.76416518357834055153e-1, 2.52587186443633654823e-1,
)
_I1_B = (
    7.51729631084210481353e-18, 4.41434832307170791151e-18, -4.65030536848935832153e-17,
    -3.20952592199342395980e-17, 2.96262899764595013876e-16, 3.30820231092092828324e-16,
    -1.88035477551078244854e-15, -3.81440307243700780478e-15, 1.04202769841288027642e-14,
    4.27244001671195135429e-14, -2.10154184277266431302e-14, -4.08355111109219731823e-13,
    -7.19855177624590851209e-13, 2.03562854414708950722e-12, 1.41258074366137813316e-11,
    3.25260358301548823856e-11, -1.89749581235054123450e-11, -5.58974346219658380687e-10,
    -3.83538038596423702205e-9, -2.63146884688951950684e-8, -2.51223623787020892529e-7,
    -3.88256480887769039346e-6, -1.10588938762623716291e-4, -9.76109749136146840777e-3,
    7.78576235018280120474e-1,
)


@njit(**_JIT)
def _chebyshev(t, coefficients):
    # Clenshaw's recurrence (Cephes' chbevl).
    b0 = coefficients[0]
    b1 = 0.0
    b2 = 0.0
    for i in range(1, len(coefficients)):
        b2 = b1
        b1 = b0
        b0 = t * b1 - b2 + coefficients[i]
    return 0.5 * (b0 - b2)


@njit(**_JIT)
def _scaled_exp(a, scaled):
    # exp(a) * scaled, finite up to where the product overflows (exp(a) alone does from 709.8).
    if a < 700.0:
        return math.exp(a) * scaled
    half = math.exp(0.5 * a)
    return half * scaled * half


@njit(**_JIT)
def i0(x):
    a = abs(np.float64(x))
    if a == math.inf:
        return math.inf  # SciPy gives NaN
    if a <= 8.0:
        return _scaled_exp(a, _chebyshev(0.5 * a - 2.0, _I0_A))
    return _scaled_exp(a, _chebyshev(32.0 / a - 2.0, _I0_B) / math.sqrt(a))


@njit(**_JIT)
def i1(x):
    x = np.float64(x)
    a = abs(x)
    if a == math.inf:
        result = math.inf  # SciPy gives NaN
    elif a <= 8.0:
        result = _scaled_exp(a, _chebyshev(0.5 * a - 2.0, _I1_A) * a)
    else:
        result = _scaled_exp(a, _chebyshev(32.0 / a - 2.0, _I1_B) / math.sqrt(a))
    return math.copysign(result, x)


# -- gamma, beta and the regularized incomplete gamma and beta functions ----------------------
# No library offers these to both numba's CPU and CUDA targets, so they are written here: the
# gamma and beta functions after Cephes (SciPy's), the incomplete functions by their series and
# continued fractions (Cephes' igam/igamc, Numerical Recipes' betacf), each carrying its
# derivative in the shape parameters along (as TensorFlow's igamma and TensorFlow
# Probability's betainc do, after Boik and Robison-Cox, "Derivatives of the incomplete beta
# function", J. Stat. Software 3, 1998). Each returns NaN outside its domain, as SciPy.

_MAXGAM = 171.6243769563027
#: The most terms of a series or continued fraction: these converge in O(sqrt(a)) terms for
#: a large shape a near x, ~9 sqrt(a) at worst, so shapes up to ~1e10 converge fully; one that
#: has not converged by then gives NaN (SciPy switches to asymptotic expansions there).
_MAX_TERMS = 1000000
_HALF_LOG_2PI_ = 0.9189385332046728
_SQRT_2PI = 2.5066282746310002


@njit(**_JIT)
def _is_pole(x):
    # 0 and the negative integers, where gamma has its poles.
    return x <= 0.0 and x == floor(x)


@njit(**_JIT)
def gamma(x):
    x = np.float64(x)
    if x == 0.0:
        return math.copysign(math.inf, x)
    if _is_pole(x) or x == -math.inf:
        return math.nan
    return math.gamma(x)


@njit(**_JIT)
def gammasgn(x):
    x = np.float64(x)
    if x > 0.0:
        return 1.0
    if x == 0.0:
        return math.copysign(1.0, x)
    if not x > -math.inf or x == floor(x):  # -inf, NaN, the poles
        return math.nan
    return -1.0 if floor(x) % 2.0 != 0.0 else 1.0


@njit(**_JIT)
def rgamma(x):
    # 1 / gamma(x), 0 at the poles; beyond gamma's range (|x| > 170), by the recurrence.
    x = np.float64(x)
    if _is_pole(x):
        return x if x == 0.0 else 0.0  # (-0.0 at -0.0, as SciPy)
    if x != x:
        return x
    if abs(x) < 170.0:
        return 1.0 / math.gamma(x)
    if x == -math.inf:
        return math.nan
    if x > 0.0:
        return _rgamma_large(x)
    return _rgamma_reflected(x)


@njit(**_JIT)
def _rgamma_large(x):
    # 1 / gamma(x - 30) / ((x - 30) ... (x - 1)), x >= 170: no overflow on the way, a few ulps.
    if x > 200.0:  # (below the smallest subnormal from 178 on)
        return 0.0
    r = 1.0 / math.gamma(x - 30.0)
    for k in range(30, 0, -1):
        r /= x - k
    return r


@njit(**_JIT)
def _rgamma_reflected(x):
    # x <= -170: Euler's reflection, 1 / gamma(x) = gamma(1 - x) sin(pi x) / pi, with
    # sin(pi x) taken from x's fraction (pi x itself would be off by ~x ulps), and gamma(1 - x)
    # as gamma(t) t (t + 1) ... (-x), t < 170, multiplied in after the sine: finite where the
    # result is.
    whole = _trunc(x)
    sine = math.sin(math.pi * (x - whole))
    if whole % 2.0 != 0.0:
        sine = -sine
    t = 1.0 - x
    steps = 0
    while t >= 170.0 and steps < 40:
        t -= 1.0
        steps += 1
    r = math.gamma(t) * sine / math.pi
    for _ in range(steps):
        r *= t
        t += 1.0
    return r


@njit(**_JIT)
def _lbeta_asymp(a, b):
    # log|B(a, b)| for a much larger than b (Cephes' lbeta_asymp).
    r = math.lgamma(b) - b * math.log(a)
    r += b * (1.0 - b) / (2.0 * a)
    r += b * (1.0 - b) * (1.0 - 2.0 * b) / (12.0 * a * a)
    r += -b * b * (1.0 - b) * (1.0 - b) / (12.0 * a * a * a)
    return r


@njit(**_JIT)
def _gamma_ratio(a, b, y):
    # gamma(a) gamma(b) / gamma(y) inside gamma's range, without overflowing in between.
    gy, ga, gb = math.gamma(y), math.gamma(a), math.gamma(b)
    if abs(ga - gy) > abs(gb - gy):
        return gb / gy * ga
    return ga / gy * gb


@njit(**_JIT)
def _negint_pair(a, b):
    # For B(a, b) with a pole: 1 - a - b and b where a is the pole and b an integer with
    # 1 - a - b > 0 (Cephes' beta_negint: B(a, b) = (-1)**b B(1 - a - b, b), finite), else
    # NaN (B is infinite).
    if not _is_pole(a):
        a, b = b, a
    if b == floor(b) and 1.0 - a - b > 0.0:
        return 1.0 - a - b, b
    return math.nan, b


@njit(**_JIT)
def betaln(a, b):
    a = np.float64(a)
    b = np.float64(b)
    if a != a or b != b:
        return math.nan
    if _is_pole(a) or _is_pole(b):
        a, b = _negint_pair(a, b)
        return math.inf if a != a or _is_pole(b) else _betaln_regular(a, b)
    return _betaln_regular(a, b)


@njit(**_JIT)
def _betaln_regular(a, b):
    # log|B(a, b)| (Cephes' lbeta): an asymptotic series where one argument is over 1e6 times
    # the other, Stirling's series where the larger is positive and at least 10, else the
    # gamma ratio in gamma's range, logarithms beyond it.
    if abs(a) < abs(b):
        a, b = b, a
    if abs(a) > 1e6 * abs(b) and a > 1e6:
        return _lbeta_asymp(a, b)
    if b > 0.0 and a >= 10.0:
        return _betaln_large(a, b)
    y = a + b
    if abs(y) > _MAXGAM or abs(a) > _MAXGAM or abs(b) > _MAXGAM:
        return math.lgamma(a) + math.lgamma(b) - math.lgamma(y)
    if _is_pole(y):
        return -math.inf
    return math.log(abs(_gamma_ratio(a, b, y)))


@njit(**_JIT)
def _betaln_large(a, b):
    # a >= b > 0, a >= 10: Stirling's series with its logarithms gathered so that they do not
    # cancel (lgamma(a) + lgamma(b) - lgamma(a + b) loses ~lgamma(a + b) ulps there; SciPy
    # keeps that loss).
    s = a + b
    ratio = math.log1p(b / a)  # log((a + b) / a)
    head = -(a - 0.5) * ratio - b * math.log(s) + b
    if b >= 10.0:
        head += (b - 0.5) * math.log(b) - b + _HALF_LOG_2PI_ + _stirling_error(b)
        return head + _stirling_error(a) - _stirling_error(s)
    return math.lgamma(b) + head + _stirling_error(a) - _stirling_error(s)


@njit(**_JIT)
def beta(a, b):
    a = np.float64(a)
    b = np.float64(b)
    if a != a or b != b:
        return math.nan
    if _is_pole(a) or _is_pole(b):
        a, b = _negint_pair(a, b)
        if a != a:
            return math.inf
        sign = 1.0 if b % 2.0 == 0.0 else -1.0
        return sign * (math.inf if _is_pole(b) else _beta_regular(a, b))
    return _beta_regular(a, b)


@njit(**_JIT)
def _beta_regular(a, b):
    y = a + b
    if abs(y) > _MAXGAM or abs(a) > _MAXGAM or abs(b) > _MAXGAM:
        sign = gammasgn(a) * gammasgn(b) * gammasgn(y)
        return sign * math.exp(betaln(a, b))
    if _is_pole(y):
        return 0.0
    return _gamma_ratio(a, b, y)


_LOG_SQRT_PI = 0.5723649429247001


@njit(**_JIT)
def _erfcinv_far(q):
    # erfcinv(q) for q < 1e-290, where erfc's own values (subnormal) lose their digits: Newton
    # steps on log(erfc(x)) = log(q), erfc(x) = exp(-x**2) / (x sqrt(pi)) S(x) by its
    # asymptotic series S = 1 - z + 3 z**2 - 15 z**3 ..., z = 1 / (2 x**2) < 1e-3.
    target = math.log(q)
    x = math.sqrt(-target)
    x = math.sqrt(-target - math.log(x * _SQRT_PI))
    for _ in range(4):
        z = 0.5 / (x * x)
        series = 1.0
        for k in range(13, 0, -2):
            series = 1.0 - k * z * series
        f = -x * x - math.log(x) - _LOG_SQRT_PI + math.log(series) - target
        x += f / (2.0 * x + 1.0 / x)
    return x


@njit(**_JIT)
def erfcinv(y):
    # The x > 0 with erfc(x) = q = min(y, 2 - y) (2 - y is exact for y in [1, 2]), negated for
    # y > 1: erfinv's method (Giles' first approximation, or the tail's asymptotics, then
    # Halley steps) on q itself, which keeps its relative accuracy down to 1e-308 where
    # erfinv(1 - y) would have lost it in 1 - y.
    y = np.float64(y)
    if not 0.0 < y < 2.0:  # and NaN
        if y == 0.0:
            return math.inf
        if y == 2.0:
            return -math.inf
        return math.nan
    q = y if y <= 1.0 else 2.0 - y
    if q < 1e-290:
        x = _erfcinv_far(q)
        return x if y <= 1.0 else -x
    a = 1.0 - q  # exact for q >= 1/2, where it is used
    steps = 1
    if q < 1e-7:
        big = -math.log(q)
        x = math.sqrt(big)
        x = math.sqrt(big - math.log(x * _SQRT_PI))
        steps = 2
    else:
        x = erfinv(a) if q >= 0.5 else erfinv(1.0 - q)
        steps = 0 if q >= 0.5 else 1
    for _ in range(steps):
        slope = _TWO_OVER_SQRT_PI * math.exp(-x * x)
        step = (q - math.erfc(x)) / slope
        x -= step / (1.0 + x * step)  # Halley: f''/f' = -2x
    return x if y <= 1.0 else -x


@njit(**_JIT)
def _log1pmx(t):
    # log(1 + t) - t, accurate for small t: with u = t / (2 + t), log(1 + t) = 2 atanh(u),
    # and 2 u - t = -t u exactly in exact arithmetic.
    if abs(t) > 0.5:
        return math.log1p(t) - t
    u = t / (2.0 + t)
    u2 = u * u
    s = 0.0
    for k in range(41, 1, -2):
        s = s * u2 + 1.0 / k
    return -t * u + 2.0 * u * u2 * s


@njit(**_JIT)
def _stirling_error(a):
    # lgamma(a) - ((a - 1/2) log a - a + log(2 pi) / 2), a >= 10: its asymptotic series.
    z = 1.0 / (a * a)
    s = 1.0 / 156.0
    s = s * z - 691.0 / 360360.0
    s = s * z + 1.0 / 1188.0
    s = s * z - 1.0 / 1680.0
    s = s * z + 1.0 / 1260.0
    s = s * z - 1.0 / 360.0
    s = s * z + 1.0 / 12.0
    return s / a


@njit(**_JIT)
def _log_gamma_factor(a, x):
    # log(x**a exp(-x) / gamma(a)). For a >= 10 written as a (log(1 + t) - t) + log(a / 2 pi)
    # / 2 - stirling_error(a), t = (x - a) / a, which does not cancel where x is near a (as
    # a log(x) - x - lgamma(a) would, by ~a ulps; SciPy's igam_fac does the same).
    if a < 10.0:
        return a * math.log(x) - x - math.lgamma(a)
    t = (x - a) / a
    return (_scaled_log1pmx(a, t, x / a) + 0.5 * math.log(a) - _HALF_LOG_2PI_
            - _stirling_error(a))


@njit(**_JIT)
def _gamma_density(a, x):
    # x**(a - 1) exp(-x) / gamma(a): the derivative of gammainc(a, x) in x.
    a = np.float64(a)
    x = np.float64(x)
    if not (a > 0.0 and x >= 0.0) or a == math.inf:
        return math.nan if not (x >= 0.0 and a >= 0.0) else 0.0
    if x == 0.0:
        return math.inf if a < 1.0 else (1.0 if a == 1.0 else 0.0)
    if x == math.inf:
        return 0.0
    return math.exp(_log_gamma_factor(a, x) - math.log(x))


@njit(**_JIT)
def _igam_series(a, x):
    # (P, dP/da) by P = x**a exp(-x) / gamma(a + 1) * S, S = sum x**n / ((a + 1)..(a + n)),
    # and its term-by-term derivative (Cephes' igam; TensorFlow's igamma derivative).
    factor = math.exp(_log_gamma_factor(a, x)) / a
    if factor == 0.0:  # (P below the smallest float; its derivative too)
        return 0.0, 0.0
    term = 1.0
    dterm = 0.0
    s = 1.0
    ds = 0.0
    r = a
    converged = False
    for _ in range(_MAX_TERMS):
        r += 1.0
        step = x / r
        term *= step
        dterm = dterm * step - term / r
        s += term
        ds += dterm
        if term <= _MACHEP * s and abs(dterm) <= _MACHEP * abs(ds):
            converged = True
            break
    if not converged:
        return math.nan, math.nan
    p = factor * s
    dp = p * (math.log(x) - digamma(a + 1.0)) + factor * ds
    return p, dp


_BIG = 4503599627370496.0  # 2**52: the continued fractions' rescaling threshold
_BIG_INV = 2.22044604925031308085e-16


@njit(**_JIT)
def _igamc_fraction(a, x):
    # (Q, dQ/da) by Cephes' igamc continued fraction (Legendre's), its convergents' forward
    # recurrence differentiated in a alongside (TensorFlow's igamma derivative).
    factor = math.exp(_log_gamma_factor(a, x))
    if factor == 0.0:  # (Q below the smallest float, and x may be too large for the fraction)
        return 0.0, 0.0
    y = 1.0 - a
    z = x + y + 1.0
    c = 0.0
    pkm2, qkm2, pkm1, qkm1 = 1.0, x, x + 1.0, z * x
    dpkm2, dqkm2, dpkm1, dqkm1 = 0.0, 0.0, 0.0, -x
    ans = pkm1 / qkm1
    dans = (dpkm1 - ans * dqkm1) / qkm1
    done = False
    for _ in range(_MAX_TERMS):
        c += 1.0
        y += 1.0
        z += 2.0
        yc = y * c
        pk = pkm1 * z - pkm2 * yc
        qk = qkm1 * z - qkm2 * yc
        dpk = dpkm1 * z - pkm1 - dpkm2 * yc + pkm2 * c
        dqk = dqkm1 * z - qkm1 - dqkm2 * yc + qkm2 * c
        done = False
        if qk != 0.0:
            r = pk / qk
            dr = (dpk - r * dqk) / qk
            done = abs(ans - r) <= _MACHEP * abs(r) and abs(dans - dr) <= _MACHEP * abs(dr)
            ans = r
            dans = dr
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        dpkm2, dpkm1, dqkm2, dqkm1 = dpkm1, dpk, dqkm1, dqk
        if abs(pk) > _BIG:
            pkm2 *= _BIG_INV
            pkm1 *= _BIG_INV
            qkm2 *= _BIG_INV
            qkm1 *= _BIG_INV
            dpkm2 *= _BIG_INV
            dpkm1 *= _BIG_INV
            dqkm2 *= _BIG_INV
            dqkm1 *= _BIG_INV
        if done:
            break
    if not done:
        return math.nan, math.nan
    q = factor * ans
    dq = q * (math.log(x) - digamma(a)) + factor * dans
    return q, dq


@njit(**_JIT)
def _igam_case(a, x):
    # -1: NaN; 0, 1: P is 0 or 1 (no derivative in a); 2: the series; 3: the fraction.
    if not (a >= 0.0 and x >= 0.0) or (a == math.inf and x == math.inf):
        return -1
    if a == 0.0:
        return 1 if x > 0.0 else -1
    if x == 0.0 or a == math.inf:
        return 0
    if x == math.inf:
        return 1
    return 3 if x > 1.0 and x > a else 2


@njit(**_JIT)
def gammainc(a, x):
    a = np.float64(a)
    x = np.float64(x)
    case = _igam_case(a, x)
    if case < 2:
        return math.nan if case < 0 else np.float64(case)
    if case == 2:
        return _igam_series(a, x)[0]
    return 1.0 - _igamc_fraction(a, x)[0]


@njit(**_JIT)
def gammaincc(a, x):
    a = np.float64(a)
    x = np.float64(x)
    case = _igam_case(a, x)
    if case < 2:
        return math.nan if case < 0 else 1.0 - case
    if case == 2:
        return 1.0 - _igam_series(a, x)[0]
    return _igamc_fraction(a, x)[0]


@njit(**_JIT)
def _gammainc_da(a, x):
    # d gammainc(a, x) / da (gammaincc's is its negative); 0 where gammainc is 0 or 1.
    a = np.float64(a)
    x = np.float64(x)
    case = _igam_case(a, x)
    if case < 2:
        return math.nan if case < 0 else 0.0
    if case == 2:
        return _igam_series(a, x)[1]
    return -_igamc_fraction(a, x)[1]


@njit(**_JIT)
def _beta_fraction(a, b, x):
    # (K, dK/da, dK/db) of the continued fraction of the incomplete beta function,
    # I_x(a, b) = x**a (1 - x)**b / (a B(a, b)) K, K = 1 / (1 + d1 / (1 + d2 / (1 + ...))),
    # d_{2m+1} = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)),
    # d_{2m} = m (b - m) x / ((a + 2m - 1)(a + 2m)) (Numerical Recipes' betacf), by the forward
    # recurrence of its convergents A_n / B_n and of their derivatives in a and b (Boik and
    # Robison-Cox), rescaled by B_n at every step. Converges fast for x < (a + 1) / (a + b + 2).
    am, bm = 0.0, 1.0  # A_{n-2}, B_{n-2}
    a1, b1 = 1.0, 1.0  # A_{n-1}, B_{n-1}
    dam_a, dam_b, dbm_a, dbm_b = 0.0, 0.0, 0.0, 0.0
    da1_a, da1_b, db1_a, db1_b = 0.0, 0.0, 0.0, 0.0
    value, dvalue_a, dvalue_b = 1.0, 0.0, 0.0
    for m in range(1, _MAX_TERMS):
        k = np.float64(m // 2)
        if m % 2 == 1:
            num = (a + k) * (a + b + k)
            den = (a + 2.0 * k) * (a + 2.0 * k + 1.0)
            d = -num * x / den
            dd_a = d * (1.0 / (a + k) + 1.0 / (a + b + k) - 1.0 / (a + 2.0 * k)
                        - 1.0 / (a + 2.0 * k + 1.0))
            dd_b = -(a + k) * x / den
        else:
            den = (a + 2.0 * k - 1.0) * (a + 2.0 * k)
            d = k * (b - k) * x / den
            dd_a = -d * (1.0 / (a + 2.0 * k - 1.0) + 1.0 / (a + 2.0 * k))
            dd_b = k * x / den
        an = a1 + d * am
        bn = b1 + d * bm
        dan_a = da1_a + dd_a * am + d * dam_a
        dan_b = da1_b + dd_b * am + d * dam_b
        dbn_a = db1_a + dd_a * bm + d * dbm_a
        dbn_b = db1_b + dd_b * bm + d * dbm_b
        am, bm, dam_a, dam_b, dbm_a, dbm_b = a1, b1, da1_a, da1_b, db1_a, db1_b
        a1, b1, da1_a, da1_b, db1_a, db1_b = an, bn, dan_a, dan_b, dbn_a, dbn_b
        if bn == 0.0:
            continue
        scale = 1.0 / bn
        am *= scale
        bm *= scale
        dam_a *= scale
        dam_b *= scale
        dbm_a *= scale
        dbm_b *= scale
        a1 *= scale
        da1_a *= scale
        da1_b *= scale
        db1_a *= scale
        db1_b *= scale
        b1 = 1.0
        new_value = a1
        new_a = da1_a - new_value * db1_a
        new_b = da1_b - new_value * db1_b
        done = (abs(new_value - value) <= _MACHEP * abs(new_value)
                and abs(new_a - dvalue_a) <= _MACHEP * abs(new_a) + 1e-300
                and abs(new_b - dvalue_b) <= _MACHEP * abs(new_b) + 1e-300)
        value, dvalue_a, dvalue_b = new_value, new_a, new_b
        if done and m > 2:
            return value, dvalue_a, dvalue_b
    return math.nan, math.nan, math.nan  # (not converged)


@njit(**_JIT)
def _scaled_log1pmx(a, t, ratio):
    # a (log(1 + t) - t), given ratio = 1 + t as well, rounded once: from the series near
    # t = 0, from log(ratio) elsewhere (1 + t, rounded from t near -1, would have lost the
    # ratio's digits).
    if abs(t) <= 0.5:
        return a * _log1pmx(t)
    return a * math.log(ratio) - a * t


@njit(**_JIT)
def _beta_factor(a, b, x, xc, lx, l1x):
    # x**a (1 - x)**b / B(a, b) (xc = 1 - x, lx and l1x their logs). For a, b >= 10 by
    # Stirling's series around the mean p = a / (a + b), as exp(a (log(1 + u) - u) + b (log(1
    # + v) - v)) sqrt(a b / (a + b)) / sqrt(2 pi), u = w / a, v = -w / b, w = (a + b) x - a,
    # whose exponent does not cancel (a log(x) + b log(1 - x) - betaln(a, b) would, by ~a
    # ulps: 2e-12 at a, b ~ 2000).
    if a < 10.0 or b < 10.0:
        return math.exp(a * lx + b * l1x - betaln(a, b))
    s = a + b
    w = x * b - xc * a
    exponent = _scaled_log1pmx(a, w / a, x / (a / s)) + _scaled_log1pmx(b, -w / b, xc / (b / s))
    correction = _stirling_error(a) + _stirling_error(b) - _stirling_error(s)
    return math.exp(exponent - correction) * math.sqrt(a / s * b) / _SQRT_2PI


@njit(**_JIT)
def _betainc_parts(a, b, x):
    # (I_x(a, b), dI/da, dI/db) for 0 < x < 1, a, b > 0: the fraction where it converges
    # fast, else through I_x(a, b) = 1 - I_{1-x}(b, a).
    lx = math.log(x)
    l1x = math.log1p(-x)
    xc = 1.0 - x
    swap = x * (a + b + 2.0) > a + 1.0
    if swap:
        a, b = b, a
        lx, l1x = l1x, lx
        x, xc = xc, x
    k, dk_a, dk_b = _beta_fraction(a, b, x)
    psi_ab = digamma(a + b)
    factor = _beta_factor(a, b, x, xc, lx, l1x) / a
    value = factor * k
    d_a = value * (lx - digamma(a) + psi_ab - 1.0 / a) + factor * dk_a
    d_b = value * (l1x - digamma(b) + psi_ab) + factor * dk_b
    if swap:
        return 1.0 - value, -d_b, -d_a
    return value, d_a, d_b


@njit(**_JIT)
def _betainc_case(a, b, x):
    # -1: NaN; 0, 1: I is 0 or 1 (no derivative in a or b); 2: the fraction.
    if not (a >= 0.0 and b >= 0.0 and 0.0 <= x <= 1.0):
        return -1
    if (a == 0.0 and b == 0.0) or (a == math.inf and b == math.inf):
        return -1
    if a == 0.0 or b == math.inf:
        return 1 if x > 0.0 else 0
    if b == 0.0 or a == math.inf:
        return 0 if x < 1.0 else 1
    if x == 0.0 or x == 1.0:
        return np.int64(x)
    return 2


@njit(**_JIT)
def betainc(a, b, x):
    a = np.float64(a)
    b = np.float64(b)
    x = np.float64(x)
    case = _betainc_case(a, b, x)
    if case < 2:
        return math.nan if case < 0 else np.float64(case)
    return _betainc_parts(a, b, x)[0]


@njit(**_JIT)
def _betainc_da(a, b, x):
    a = np.float64(a)
    b = np.float64(b)
    x = np.float64(x)
    case = _betainc_case(a, b, x)
    if case < 2:
        return math.nan if case < 0 else 0.0
    return _betainc_parts(a, b, x)[1]


@njit(**_JIT)
def _betainc_db(a, b, x):
    a = np.float64(a)
    b = np.float64(b)
    x = np.float64(x)
    case = _betainc_case(a, b, x)
    if case < 2:
        return math.nan if case < 0 else 0.0
    return _betainc_parts(a, b, x)[2]


@njit(**_JIT)
def _beta_density(a, b, x):
    # x**(a - 1) (1 - x)**(b - 1) / B(a, b): the derivative of betainc(a, b, x) in x.
    a = np.float64(a)
    b = np.float64(b)
    x = np.float64(x)
    if not (a > 0.0 and b > 0.0 and 0.0 <= x <= 1.0):
        return math.nan
    if x == 0.0:
        return math.inf if a < 1.0 else (1.0 / beta(a, b) if a == 1.0 else 0.0)
    if x == 1.0:
        return math.inf if b < 1.0 else (1.0 / beta(a, b) if b == 1.0 else 0.0)
    return math.exp((a - 1.0) * math.log(x) + (b - 1.0) * math.log1p(-x) - betaln(a, b))

from . import _scalar_bessel as _bessel  # noqa: E402
from ._scalar_bessel import (  # noqa: E402, F401 (in kernels)
    i0e,
    i1e,
    iv,
    ive,
    j0,
    j1,
    jn,
    jv,
    k0,
    k0e,
    k1,
    k1e,
    kv,
    kve,
    y0,
    y1,
    yn,
    yv,
)

SCALAR_NAMES = (
    "where",
    "maximum",
    "minimum",
    "sign",
    "sigmoid",
    "rint",
    "floor",
    "erf",
    "erfc",
    "erfinv",
    "gammaln",
    "digamma",
    "polygamma",
    "logit",
    "ndtr",
    "log_ndtr",
    "i0",
    "i1",
    # gamma, beta and the incomplete gamma and beta functions
    "gamma", "gammasgn", "rgamma", "beta", "betaln", "erfcinv", "gammainc", "gammaincc",
    "betainc", "_gamma_density", "_gammainc_da", "_beta_density", "_betainc_da", "_betainc_db",
    *_bessel.SCALAR_NAMES,
)

#: Digest of this file. Kernels call these functions, and numba's on-disk cache of a kernel
#: does not notice a change here: ``_kernels.load_module`` folds it into the kernel's key.
with open(__file__, "rb") as _source:
    SOURCE_HASH = hashlib.sha1(_source.read()).hexdigest()[:16]
SOURCE_HASH = hashlib.sha1((SOURCE_HASH + _bessel.SOURCE_HASH).encode()).hexdigest()[:16]
del _source

#: NumPy twins of some of these functions (SciPy's ufuncs, for ``elementwise``'s tier 0).
NUMPY_TWINS = _bessel.NUMPY_TWINS
