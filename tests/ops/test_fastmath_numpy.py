"""``autograd_nb.ops._fastmath_numpy``: NumPy twins of the compiled fast-math functions, bit for
bit (tier 0's forwards, autograd_nb/tiering.py).

The exact fused multiply-add against exact rational arithmetic and against the compiled
``llvm.fma``, on random and adversarial operands; each twin against its compiled function over
the accuracy tests' samples and edge values, float64 and float32.
"""

import math
import struct
from fractions import Fraction

import numpy as np
import pytest
from numba import njit

from autograd_nb.ops import _fastmath as fm
from autograd_nb.ops import _fastmath_numpy as fmn
from tests.ops.test_fastmath import EDGES, run, samples

# They call the kernels and twins themselves, the same in either tier: the compiled pass runs
# them once.
pytestmark = pytest.mark.compiled_only


@njit(error_model="numpy")
def _compiled_fma(a, b, c, out):
    for i in range(a.size):
        out[i] = fm._fma(a[i], b[i], c[i])


def compiled_fma(a, b, c):
    out = np.empty_like(a)
    _compiled_fma(a, b, c, out)
    return out


def same_bits(x, y):
    """Elementwise: the same float64 or float32 bits, or both NaN."""
    width = np.int64 if x.dtype == np.float64 else np.int32
    return (x.view(width) == y.view(width)) | (np.isnan(x) & np.isnan(y))


def from_bits(bits):
    return np.asarray(bits, dtype=np.int64).view(np.float64)


def adversarial_operands(rng, n):
    """Operands where a fused multiply-add is hard to get right: near-total cancellation of
    a b by c, exact halfway cases, products and results at the subnormal and overflow edges,
    zeros of both signs, infinities and NaN, mixed with random bits."""
    a = from_bits(rng.integers(0, 2**63, n) * rng.choice([-1, 1], n))  # any bits
    b = from_bits(rng.integers(0, 2**63, n) * rng.choice([-1, 1], n))
    c = from_bits(rng.integers(0, 2**63, n) * rng.choice([-1, 1], n))
    near = rng.uniform(0.5, 2, (3, n)) * 2.0 ** rng.integers(-30, 30, (3, n))
    cancel = -(near[0] * near[1]) * (1 + rng.integers(-4, 5, n) * 2.0**-53)
    # a b with exactly 54 significant bits plus c = 0: a tie, broken by c's sign below.
    odd = (2.0**26 + 2 * rng.integers(0, 2**25, n) + 1)
    tie_a, tie_b = odd * 2.0**-26, (2.0**27 + 1) * 2.0**-27
    tiny = rng.choice([-1, 1], n) * 2.0 ** rng.uniform(-1074, -900, n)
    huge = rng.choice([-1, 1], n) * 2.0 ** rng.uniform(900, 1023.9, n)
    special = rng.choice([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324,
                          fm._DBL_MAX, 1.0, -1.0], (3, n))
    sets = [
        (a, b, c),
        (near[0], near[1], cancel),
        (near[0], near[1], near[2]),
        (tie_a, np.full(n, tie_b), tiny * 2.0**-100),
        (tie_a, np.full(n, tie_b), -tiny * 2.0**-100),
        (tiny, near[0], tiny),  # subnormal products and results
        (np.sqrt(np.abs(tiny)), -np.sqrt(np.abs(tiny)), tiny * near[2]),
        (huge, near[0], huge),  # overflow, and its cancellation
        (huge, near[0], -huge * near[0]),
        (special[0], special[1], special[2]),
        (special[0], near[0], c),
        (near[0], special[1], tiny),
    ]
    return tuple(np.concatenate(parts) for parts in zip(*sets))


def exact_fma(a, b, c):
    """a b + c correctly rounded, through rationals (finite operands; IEEE's +0 for an exact
    zero sum of nonzero terms)."""
    value = Fraction(a) * Fraction(b) + Fraction(c)
    try:
        result = float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf
    if value == 0:
        if a * b == 0 and c == 0:  # (zeros only: IEEE's sign of a sum of zeros)
            return (a * b) + c
        return 0.0
    return result


def test_fma_is_exactly_rounded():
    rng = np.random.default_rng(20)
    with np.errstate(all="ignore"):
        a, b, c = adversarial_operands(rng, 3000)
    got = fmn.fma(a, b, c)
    finite = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    for i in np.flatnonzero(finite):
        expected = exact_fma(a[i], b[i], c[i])
        bits = struct.pack("<d", got[i]), struct.pack("<d", expected)
        assert bits[0] == bits[1], f"fma({a[i]!r}, {b[i]!r}, {c[i]!r}) = {got[i]!r}, " \
                                   f"exactly {expected!r}"


def test_fma_equals_the_compiled_one():
    rng = np.random.default_rng(21)
    with np.errstate(all="ignore"):
        a, b, c = adversarial_operands(rng, 20000)
    got = fmn.fma(a, b, c)
    expected = compiled_fma(a, b, c)
    bad = ~same_bits(got, expected)
    assert not bad.any(), list(zip(a[bad][:5], b[bad][:5], c[bad][:5], got[bad][:5]))
    # Broadcast scalars, as the twins pass the constants.
    x = a[:1000]
    np.testing.assert_array_equal(fmn.fma(x, fm._INV_LN2, fm._SHIFT),
                                  compiled_fma(x, np.full_like(x, fm._INV_LN2),
                                               np.full_like(x, fm._SHIFT)))


def test_fma_helpers():
    a, b = np.array([0.1, 1e300]), np.array([0.3, -3e-300])
    p, e = fmn._two_product(a, b)
    assert [Fraction(x) + Fraction(y) for x, y in zip(p, e)] == [
        Fraction(x) * Fraction(y) for x, y in zip(a, b)
    ]
    # Rounding to odd: exact sums are kept, inexact ones land on an odd significand.
    one = np.array([1.0, 1.0, -1.0, 3.0])
    small = np.array([2.0**-60, -(2.0**-60), 2.0**-60, 0.0])
    s = fmn._add_round_to_odd(one, small)
    np.testing.assert_array_equal(
        s, [1 + 2.0**-52, 1 - 2.0**-53, -1 + 2.0**-53, 3.0]
    )


@pytest.mark.parametrize("name", fm.FASTMATH_NAMES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_twin_equals_the_compiled_function(name, dtype):
    x = np.concatenate([samples(name, n=1500), np.array(EDGES)])
    with np.errstate(all="ignore"):
        x = x.astype(dtype)
    expected = run(name, x)
    got = fmn.FUNCTIONS[name](x)
    assert got.dtype == expected.dtype and got.shape == x.shape
    bad = ~same_bits(got, expected)
    assert not bad.any(), f"{name}({x[bad][:5]}) = {got[bad][:5]}, compiled {expected[bad][:5]}"


def test_twins_keep_the_shape_and_take_integers():
    x = np.arange(6).reshape(2, 3)
    y = fmn.exp(x)
    assert y.dtype == np.float64 and y.shape == (2, 3)
    np.testing.assert_array_equal(y, fmn.exp(x.astype(np.float64)))
    assert fmn.tanh(np.float32(0.5)).shape == ()
