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


from . import _scalar_bessel as _bessel  # noqa: E402
from ._scalar_bessel import iv, ive, j0, j1, jn, y0, y1, yn  # noqa: E402, F401 (in kernels)

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
    *_bessel.SCALAR_NAMES,
)

#: Digest of this file. Kernels call these functions, and numba's on-disk cache of a kernel
#: does not notice a change here: ``_kernels.load_module`` folds it into the kernel's key.
with open(__file__, "rb") as _source:
    SOURCE_HASH = hashlib.sha1(_source.read()).hexdigest()[:16]
SOURCE_HASH = hashlib.sha1((SOURCE_HASH + _bessel.SOURCE_HASH).encode()).hexdigest()[:16]
del _source
