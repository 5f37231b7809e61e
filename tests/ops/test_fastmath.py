"""Accuracy of the vectorisable transcendental functions in ``autograd_nb.ops._fastmath``.

Each function runs inside an ``@njit(error_model="numpy")`` loop, as in the generated kernels,
over ~10**5 random points across its whole domain (uniform and log-uniform magnitudes, and the
regions near its thresholds) and over a list of edge values, for float64 and float32. Results are
compared with NumPy (ulp distance through integer views) and with an 80-bit long double reference
(error in ulps of the correctly rounded result), against the bounds in ``_fastmath.MAX_ULP``.
These are accuracy tests, not timing tests.
"""

import functools
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import llvmlite.binding
import numpy as np
import pytest
from numba import njit, types
from numba.extending import intrinsic

from autograd_nb.ops import _fastmath as fm

# They call the kernels and twins themselves, the same in either tier: the compiled pass runs
# them once.
pytestmark = pytest.mark.compiled_only

NAMES = fm.FASTMATH_NAMES
LD = np.longdouble
HAVE_EXTENDED = np.finfo(LD).nmant >= 63  # x86-64 Linux: 80-bit long double

# NumPy's own float64 results are mostly within ~1.2 ulp of the exact value, so the distance
# between ours and NumPy's is at most our bound plus 1.5, rounded down to an integer. Where NumPy
# itself is off by more (its cos is off by 8 ulp at 6381956970095103 * 2**797, where the
# reduction is hardest), the point is left out when a long double reference is available.
NUMPY_SLACK = 1.5


def _numpy_sigmoid(x):
    with np.errstate(over="ignore"):
        e = np.exp(-np.abs(x))
        return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


NUMPY = {
    "exp": np.exp,
    "expm1": np.expm1,
    "log": np.log,
    "log1p": np.log1p,
    "tanh": np.tanh,
    "sigmoid": _numpy_sigmoid,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "arctan": np.arctan,
}


def _reference(name, x):
    """The function in long double (64-bit mantissa) at the float inputs x."""
    xl = x.astype(LD)
    with np.errstate(all="ignore"):
        if name == "sigmoid":
            return 1 / (1 + np.exp(-xl))
        return NUMPY[name](xl)


@functools.cache
def _loop(name):
    f = getattr(fm, name)

    @njit(error_model="numpy")
    def loop(x, out):
        for i in range(x.size):
            out[i] = f(x[i])

    return loop


def run(name, x):
    out = np.empty_like(x)
    _loop(name)(x, out)
    return out


# ---------------------------------------------------------------------------------------------
# ulp measures.


def ulp_distance(a, b):
    """|a - b| in ulps through integer views (nan == nan; inf is one ulp past the largest)."""
    a = np.asarray(a)
    b = np.asarray(b)
    itype = np.int64 if a.dtype == np.float64 else np.int32
    ia = a.view(itype).astype(np.int64)
    ib = b.view(itype).astype(np.int64)
    magnitude = np.int64(0x7FFFFFFFFFFFFFFF if itype is np.int64 else 0x7FFFFFFF)
    # Map the sign-magnitude patterns onto a monotonic integer line (-0.0 and 0.0 both at 0).
    oa = np.where(ia < 0, -(ia & magnitude), ia)
    ob = np.where(ib < 0, -(ib & magnitude), ib)
    with np.errstate(over="ignore"):
        d = oa - ob
    overflow = ((oa ^ ob) & (oa ^ d)) < 0
    d = np.where(overflow, np.iinfo(np.int64).max, np.abs(d))
    both_nan = np.isnan(a) & np.isnan(b)
    one_nan = np.isnan(a) ^ np.isnan(b)
    d = np.where(both_nan, 0, d)
    return np.where(one_nan, np.iinfo(np.int64).max, d)


def ulp_error(y, ref):
    """Error of y against the long double ref, in ulps of ref rounded to y's type."""
    with np.errstate(all="ignore"):
        r = ref.astype(y.dtype)
        ulp = np.spacing(np.abs(r).astype(y.dtype)).astype(LD)
        frac = np.abs((y.astype(LD) - ref) / ulp).astype(np.float64)
    finite = np.isfinite(y) & np.isfinite(r)
    e = np.where(finite, frac, ulp_distance(y, r).astype(np.float64))
    return np.where(y == r, 0.0, np.where(np.isnan(y) & np.isnan(r), 0.0, e))


def test_ulp_distance():
    one = np.array([1.0])
    assert ulp_distance(one, np.nextafter(one, 2)).tolist() == [1]
    assert ulp_distance(np.array([-0.0]), np.array([0.0])).tolist() == [0]
    assert ulp_distance(np.array([5e-324]), np.array([-5e-324])).tolist() == [2]
    assert ulp_distance(np.array([np.inf]), np.array([1.7976931348623157e308])).tolist() == [1]
    assert ulp_distance(np.array([np.nan]), np.array([np.nan])).tolist() == [0]
    f = np.array([1.0], dtype=np.float32)
    assert ulp_distance(f, np.nextafter(f, np.float32(0))).tolist() == [1]


# ---------------------------------------------------------------------------------------------
# Samples.

SEED = 20261


def _log_uniform(rng, low, high, n, signed=True):
    x = np.exp(rng.uniform(np.log(low), np.log(high), n))
    return x * rng.choice([-1.0, 1.0], n) if signed else x


def _all_floats(rng, n, positive=False):
    """Floats with uniformly random bit patterns over all finite values (all exponents)."""
    bits = rng.integers(0, 0x7FF0000000000000, n, dtype=np.int64)
    x = bits.view(np.float64)
    return x if positive else x * rng.choice([-1.0, 1.0], n)


def samples(name, n=12_000):
    """~10**5 float64 inputs across the domain of ``name``."""
    rng = np.random.default_rng(SEED + NAMES.index(name))
    u = rng.uniform
    everywhere = _all_floats(rng, n)
    if name in ("exp", "expm1", "sinh", "cosh", "sigmoid"):
        parts = [
            u(-750, 750, n),
            u(-2, 2, n),
            _log_uniform(rng, 1e-300, 750, n),
            u(705, 712, n),  # overflow
            u(-750, -700, n),  # underflow, subnormal results
            u(-40, 40, n),
            u(-0.8, 0.8, n),  # the k = 0, +-1 reductions
        ]
    elif name == "log":
        parts = [
            _all_floats(rng, 2 * n, positive=True),
            _log_uniform(rng, 5e-324, 1e-300, n, signed=False),  # subnormals
            u(0.5, 2, n),
            1 + _log_uniform(rng, 1e-16, 0.5, n),
            u(0, 1e6, n),
        ]
    elif name == "log1p":
        parts = [
            _all_floats(rng, n, positive=True),
            -_log_uniform(rng, 1e-300, 1, n, signed=False),
            -1 + _log_uniform(rng, 1e-16, 1, n, signed=False),
            _log_uniform(rng, 1e-300, 1e300, n, signed=False),
            u(-0.5, 1, n),
            u(-1, 10, n),
        ]
    elif name in ("sin", "cos", "tan"):
        k = rng.integers(-60_000, 60_000, n).astype(np.float64)
        parts = [
            u(-10, 10, n),
            u(-1e5, 1e5, n),
            _log_uniform(rng, 1e-300, 1.7e308, n),
            _log_uniform(rng, 1e5, 1e9, n),  # both sides of the 2**20 switch
            u(1048576 - 100, 1048576 + 100, n),
            k * (np.pi / 2) + _log_uniform(rng, 1e-12, 1e-3, n),  # near multiples of pi/2
            u(-4, 4, n),
        ]
    elif name in ("tanh", "arctan"):
        parts = [
            u(-25, 25, n),
            _log_uniform(rng, 1e-300, 1e300, n),
            u(-1, 1, n),
            u(-3, 3, n),
            u(0.3, 0.5, n),  # arctan's switch at tan(pi/8); tanh's around k = 1
            u(2.3, 2.5, n),  # arctan's switch at tan(3 pi/8)
        ]
    else:
        raise AssertionError(name)
    return np.concatenate([everywhere] + parts)


# fmt: off
EDGES = [
    0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.0, -2.0,
    5e-324, -5e-324, 2.2250738585072014e-308, -2.2250738585072014e-308, 1e-300, -1e-300,
    1.4901161193847656e-08, 2.0**-54, 2.0**-27,
    709.782712893384, 709.7827128933841, 710.0, 710.4758600739439, 710.4758600739440, 711.0,
    -708.3964185322641, -708.4, -745.1332191019411, -745.1332191019412, -745.2, -746.0, -750.0,
    1.7976931348623157e308, -1.7976931348623157e308, 1e308, -1e308,
    19.06, 19.07, 20.0, 22.0, 37.5, 38.0, 40.0, -40.0, 60.0, -60.0,
    0.34657359027997264, -0.34657359027997264, 0.6931471805599453, 1.0397207708399179,
    math.pi / 4, math.pi / 2, math.pi, 3 * math.pi / 2, 2 * math.pi, 1e5, -1e5,
    1048575.9999999999, 1048576.0, 1048576.0000000002, 2.0**53, 2.0**53 + 2, 1e22, -1e22,
    6381956970095103.0 * 2.0**797,  # the double nearest to a multiple of pi/2 (r ~ 2**-61)
    -6381956970095103.0 * 2.0**797,
    0.41421356237309503, 0.414213562373095, 2.414213562373095, 2.4142135623730954,
    -1 + 2.0**-53, -1 + 2.0**-52, -0.5, -0.9999, 2.0**52, 3.4028234663852886e38,
]
# fmt: on


# ---------------------------------------------------------------------------------------------
# float64


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_float64_against_long_double(name):
    if not HAVE_EXTENDED:
        pytest.skip("needs an 80-bit long double for the reference")
    x = np.concatenate([samples(name), np.array(EDGES)])
    y = run(name, x)
    err = ulp_error(y, _reference(name, x))
    worst = int(np.argmax(err))
    assert err[worst] <= fm.MAX_ULP[name], (
        f"{name}({x[worst]!r}) = {y[worst]!r}: {err[worst]:.2f} ulp"
    )


@pytest.mark.parametrize("name", NAMES)
def test_float64_against_numpy(name):
    x = np.concatenate([samples(name), np.array(EDGES)])
    y = run(name, x)
    with np.errstate(all="ignore"):
        expected = NUMPY[name](x)
    d = ulp_distance(y, expected)
    if HAVE_EXTENDED:
        d = np.where(ulp_error(expected, _reference(name, x)) <= 1.0, d, 0)
    worst = int(np.argmax(d))
    assert d[worst] <= fm.MAX_ULP[name] + NUMPY_SLACK, (
        f"{name}({x[worst]!r}) = {y[worst]!r}, NumPy {expected[worst]!r}: {d[worst]} ulp"
    )


@pytest.mark.parametrize("name", NAMES)
def test_edges_exact(name):
    """Special values come out exactly as NumPy's (nan, +-inf, signed zeros, underflow to 0)."""
    x = np.array(EDGES)
    y = run(name, x)
    with np.errstate(all="ignore"):
        expected = NUMPY[name](x)
    special = ~np.isfinite(expected) | (expected == 0) | ~np.isfinite(x) | (x == 0)
    for xi, yi, ei in zip(x[special], y[special], expected[special], strict=True):
        same = (yi == ei and np.signbit(yi) == np.signbit(ei)) or (np.isnan(yi) and np.isnan(ei))
        assert same, f"{name}({xi!r}) = {yi!r}, expected {ei!r}"


@pytest.mark.parametrize(
    "name, x, expected",
    [
        ("exp", 710.0, np.inf),
        ("exp", -746.0, 0.0),
        ("exp", -745.1332191019411, 5e-324),
        ("exp", 709.782712893384, 1.7976931348622732e308),
        ("expm1", -np.inf, -1.0),
        ("expm1", -40.0, -1.0),
        ("expm1", 1e-300, 1e-300),
        ("log", 0.0, -np.inf),
        ("log", -0.0, -np.inf),
        ("log", -1e-300, np.nan),
        ("log", 5e-324, -744.4400719213812),
        ("log", 1.0, 0.0),
        ("log1p", -1.0, -np.inf),
        ("log1p", -1.5, np.nan),
        ("log1p", 1e-300, 1e-300),
        ("tanh", 1e300, 1.0),
        ("tanh", -20.0, -1.0),
        ("tanh", 1e-300, 1e-300),
        ("sigmoid", np.inf, 1.0),
        ("sigmoid", -np.inf, 0.0),
        ("sigmoid", 0.0, 0.5),
        ("sigmoid", 40.0, 1.0),
        ("sin", 1e22, -0.8522008497671888),
        ("cos", 1e22, 0.5232147853951389),
        ("sin", 5e-324, 5e-324),
        ("cos", 5e-324, 1.0),
        ("sin", np.inf, np.nan),
        ("cos", -np.inf, np.nan),
        ("tan", np.inf, np.nan),
        ("cosh", 710.0, 1.1169973830808557e308),
        ("cosh", 711.0, np.inf),
        ("sinh", -711.0, -np.inf),
        ("arctan", np.inf, np.pi / 2),
        ("arctan", -np.inf, -np.pi / 2),
        ("arctan", 1.0, np.pi / 4),
    ],
)
def test_known_values(name, x, expected):
    y = run(name, np.array([x]))[0]
    if np.isnan(expected):
        assert np.isnan(y)
    else:
        assert ulp_distance(np.array([y]), np.array([expected]))[0] <= 1, (y, expected)


# ---------------------------------------------------------------------------------------------
# float32: computed in float64, rounded once (but the functions of ``MAX_ULP32``).

FLOAT32_RANGE = {
    "exp": (-104.0, 89.0),
    "expm1": (-20.0, 89.0),
    "sinh": (-90.0, 90.0),
    "cosh": (-90.0, 90.0),
    "sigmoid": (-104.0, 104.0),
}


def samples32(name):
    x = samples(name, n=6_000)
    if name in FLOAT32_RANGE:
        low, high = FLOAT32_RANGE[name]
        rng = np.random.default_rng(SEED)
        x = np.concatenate([x, rng.uniform(low, high, 30_000)])
    with np.errstate(over="ignore"):
        return np.concatenate([x, np.array(EDGES)]).astype(np.float32)


@pytest.mark.parametrize("name", NAMES)
def test_float32(name):
    x = samples32(name)
    y = run(name, x)
    assert y.dtype == np.float32
    ref = _reference(name, x)
    # The float64 result rounded once: within 1 float32 ulp of the correctly rounded value.
    bound = fm.MAX_ULP32.get(name, 1.0)
    if HAVE_EXTENDED:
        err = ulp_error(y, ref)
        worst = int(np.argmax(err))
        assert err[worst] <= bound, f"{name}({x[worst]!r}) = {y[worst]!r}: {err[worst]:.2f} ulp"
    # And NumPy's float32 ufuncs (SIMD, a few ulp themselves) within 4 ulp.
    with np.errstate(all="ignore"):
        expected = NUMPY[name](x)
    d = ulp_distance(y, expected.astype(np.float32))
    worst = int(np.argmax(d))
    assert d[worst] <= 4, f"{name}({x[worst]!r}) = {y[worst]!r}, NumPy {expected[worst]!r}"


@pytest.mark.parametrize("name", sorted(fm.MAX_ULP32))
def test_float32_sweep(name):
    # Every 1021st float32 from 0 to 10.5 (past where tanh rounds to 1), and their negatives:
    # within MAX_ULP32 of float64 NumPy (itself far inside a float32 ulp). The bound's
    # bracketed figure came from the same sweep with a stride of 13.
    top = int(np.float32(10.5).view(np.int32))
    x = np.arange(0, top, 1021, dtype=np.int32).view(np.float32)
    x = np.concatenate([x, -x])
    y = run(name, x)
    exact = NUMPY[name](x.astype(np.float64))
    err = np.abs(y - exact) / np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    worst = int(np.argmax(err))
    assert err[worst] <= fm.MAX_ULP32[name], f"{name}({x[worst]!r}) = {y[worst]!r}"
    assert np.array_equal(np.signbit(y), np.signbit(x))  # odd, with signed zeros


@pytest.mark.parametrize("name", NAMES)
def test_result_type_follows_input(name):
    f = getattr(fm, name)

    @njit
    def call(x):
        return f(x)

    call(np.float32(0.5))
    inputs = (types.float32,)
    if name == "exp":  # the same one-line wrapper in every function
        call(np.float64(0.5))
        call(1)
        inputs = (types.float32, types.float64, types.int64)
    returns = {sig.args[0]: sig.return_type for sig in call.nopython_signatures}
    expected = {types.float32: types.float32, types.float64: types.float64}
    for t in inputs:
        assert returns[t] == expected.get(t, types.float64)


# ---------------------------------------------------------------------------------------------
# Pieces.


def test_bit_casts():
    @njit
    def roundtrip(x):
        return fm._bits_to_float(fm._float_to_bits(x)), fm._float_to_bits(x)

    @njit
    def roundtrip32(x):
        return fm._bits_to_float(fm._float_to_bits(x)), fm._float_to_bits(x)

    for v in (1.0, -2.5, 5e-324, np.inf, -0.0, 1.7976931348623157e308):
        back, bits = roundtrip(v)
        assert bits == np.float64(v).view(np.int64)
        assert np.float64(back).view(np.int64) == np.float64(v).view(np.int64)
    back, bits = roundtrip32(np.float32(-1.5))
    assert bits == np.float32(-1.5).view(np.int32)
    assert back == np.float32(-1.5)


def test_inverse_pi_table():
    """The 24-bit chunks of 1/pi, checked against mpmath where it is installed."""
    mpmath = pytest.importorskip("mpmath")
    chunks = fm._inv_pi_chunks(52)
    with mpmath.workdps(450):
        exact = int(mpmath.floor(mpmath.mpf(2) ** (24 * 52) / mpmath.pi))
    expected = [float((exact >> (24 * (51 - j))) & 0xFFFFFF) for j in range(52)]
    assert chunks == expected
    pairs = fm._PAIRS
    assert pairs[0] == 0.0 and pairs[2] == chunks[0] + chunks[1] * 2.0**-24


#: The loops whose range reduction reads a table at a computed index (Payne-Hanek: masked
#: gathers when vectorised). Without AVX-512, LLVM's cost model for AMD Zen (``znver3``)
#: prices AVX2 gathers above the scalar loop and keeps these loops scalar (seen on an EPYC
#: host); they must still be free of calls. The generated kernels loop over the reduced-range
#: functions instead, which vectorise there too (``test_trig_kernels_vectorise_without_gathers``).
_GATHERING = {"sin", "cos", "tan"}


def _expects_vectors(name):
    features = llvmlite.binding.get_host_cpu_features()
    zen = llvmlite.binding.get_host_cpu_name().startswith("znver")
    return name not in _GATHERING or features.get("avx512f", False) or not zen


def test_loops_vectorise():
    """The loops are vectorised: vector instructions, and no calls left in the loop body."""
    for name in NAMES:
        loop = _loop(name)
        if not loop.signatures:
            run(name, np.ones(4))
        llvm = loop.inspect_llvm(loop.signatures[0])
        blocks = ["define" + b for b in llvm.split("\ndefine")[1:]]
        (body,) = [  # the loop function itself, not its Python and C wrappers
            b
            for b in blocks
            if re.match(r"define[^\n]*@_ZN\w*4loop", b) and "cpython" not in b.split("\n")[0]
        ]
        assert ("x double>" in body) == _expects_vectors(name), name
        calls = [line for line in body.splitlines() if " call " in line and "@llvm." not in line]
        assert not calls, (name, calls[:3])


@intrinsic
def _narrow(typingctx):
    """Drop the 512-bit preference (``_fastmath._wide``) from the function being compiled."""

    def codegen(context, builder, signature, args):
        set.discard(builder.function.attributes, fm._PREFER_WIDE)
        return context.get_dummy_value()

    return types.void(), codegen


@functools.cache
def _narrow_loop(name):
    f = getattr(fm, name)

    @njit(error_model="numpy")
    def narrow_loop(x, out):
        for i in range(x.size):
            out[i] = f(x[i])
        _narrow()  # (after the loop: its inlined functions have added the attribute)

    return narrow_loop


#: The (function, dtype) pairs whose loops ask for 512-bit vectors (``_fastmath._wide``).
WIDE32 = {"tanh", "sin", "cos", "tan"}


@pytest.mark.parametrize("name", NAMES)
def test_wide_vectors_give_the_bits_of_narrow_ones(name):
    """The loops of float64 (and float32 tanh, sin, cos, tan) ask LLVM for 512-bit vectors;
    the same loop without that attribute gives the same bits, random points and edge values
    (the vector body and the scalar remainder both)."""
    rng = np.random.default_rng(7)
    for dtype in (np.float64, np.float32):
        with np.errstate(all="ignore"):  # (edge values past float32's range become inf)
            x = np.concatenate([rng.standard_normal(1001) * 4, np.array(EDGES)]).astype(dtype)
            if name in ("log", "log1p"):
                x = np.concatenate([np.abs(x), x[:50]])
            wide, narrow = run(name, x), np.empty_like(x)
            _narrow_loop(name)(x, narrow)
        bits = f"u{x.itemsize}"
        np.testing.assert_array_equal(wide.view(bits), narrow.view(bits))
        if dtype == np.float64 or name in WIDE32:
            loop = _loop(name)
            (signature,) = [s for s in loop.signatures if str(s[0].dtype) == np.dtype(dtype).name]
            assert fm._PREFER_WIDE in loop.inspect_llvm(signature), (name, dtype)


def test_kernels_using_them_are_cached(tmp_path):
    """A cached kernel calling the functions (bit-cast and fma intrinsics, a global table)
    is written to numba's disk cache and loaded from it by the next process."""
    module = tmp_path / "fastmath_kernel_probe.py"
    module.write_text(
        textwrap.dedent(
            """
            from numba import njit
            from autograd_nb.ops._fastmath import exp, sin, tanh

            @njit(cache=True, error_model="numpy")
            def kernel(x, out):
                for i in range(x.size):
                    out[i] = exp(x[i]) + sin(x[i] * 1e4) * tanh(x[i])
            """
        )
    )
    script = textwrap.dedent(
        """
        import numpy as np
        import fastmath_kernel_probe as probe
        x = np.linspace(-3e6, 3e6, 1001)
        out = np.empty_like(x)
        x = x * 1e-4
        probe.kernel(x, out)
        print(len(probe.kernel.stats.cache_hits), repr(float(out.sum())))
        """
    )
    root = Path(fm.__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(root)]))
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "cache")
    first = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    second = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    hits_first, total_first = first.stdout.split()
    hits_second, total_second = second.stdout.split()
    assert hits_first == "0" and hits_second == "1"
    assert total_first == total_second


@njit(error_model="numpy")
def _apply_pair(function, x, out):
    for i in range(x.size):
        out[i] = function(x[i])


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_reduced_range_trig_equals_the_full_one_below_2_to_20(name):
    """``sin_small``/``cos_small``/``tan_small`` skip the Payne-Hanek reduction: below 2**20
    (and for inf/nan) they must give the full functions' results exactly."""
    rng = np.random.default_rng(7)
    x = np.concatenate([
        rng.uniform(-1e6, 1e6, 20000),
        np.exp(rng.uniform(-40, np.log(2**20 - 1), 20000)) * rng.choice([-1, 1], 20000),
        [0.0, -0.0, np.inf, -np.inf, np.nan, 2**20 - 1, -(2**20 - 1), np.pi / 4, 1e-300],
    ])
    full, small = np.empty_like(x), np.empty_like(x)
    _apply_pair(getattr(fm, name), x, full)
    _apply_pair(getattr(fm, name + "_small"), x, small)
    np.testing.assert_array_equal(small, full)
    assert np.signbit(small[x == 0]).tolist() == np.signbit(full[x == 0]).tolist()


def test_trig_argument_check():
    small = np.array([0.0, -3.0, 2.0**20 - 1, np.inf, -np.inf, np.nan])
    large = np.array([2.0**20, -(2.0**20), 1e300, -1e300, 3e7])
    for values, expected in ((small, True), (large, False)):
        out = np.zeros(values.size, dtype=np.bool_)
        _apply_pair(fm.trig_small, values, out)
        assert out.tolist() == [expected] * values.size
    assert fm.trig_arguments_small(np.array([0.0, -3.0, 2.0**20 - 1, np.inf, np.nan]))
    assert fm.trig_arguments_small(np.zeros(0))
    assert not fm.trig_arguments_small(np.array([0.0, 2.0**20]))
    assert not fm.trig_arguments_small(np.array([-1e300, 1.0]))
    assert fm.trig_arguments_small(np.array([1.0, 2.0], dtype=np.float32))


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_kernels_take_the_full_path_when_an_argument_is_large(name):
    """The elementwise kernels (forward, VJP, fused chains) check their sin/cos arguments and
    use the reduced-range loop only when every one is below 2**20."""
    import autograd_nb as anb
    from autograd_nb import config

    base = np.linspace(-3, 3, 5000)
    for values in (base, np.concatenate([base, [3.0e7, -1.0e12]])):
        x = anb.tensor(values, requires_grad=True)
        y = getattr(anb, name)(x)
        expected = getattr(np, name)(values)
        np.testing.assert_allclose(y.numpy(), expected, rtol=0, atol=2e-16)
        (g,) = anb.grad(anb.sum(y), x)
        derivative = np.cos(values) if name == "sin" else -np.sin(values)
        np.testing.assert_allclose(g.numpy(), derivative, rtol=0, atol=2e-16)
        saved, config.FUSION_MIN_ELEMENTS = config.FUSION_MIN_ELEMENTS, 1
        try:
            chain = getattr(anb, name)(getattr(anb, name)(x) * 1.5)
            (g,) = anb.grad(anb.sum(chain), x)
        finally:
            config.FUSION_MIN_ELEMENTS = saved
        inner = getattr(np, name)(values) * 1.5
        outer = np.cos(inner) if name == "sin" else -np.sin(inner)
        np.testing.assert_allclose(g.numpy(), outer * 1.5 * derivative, rtol=1e-14, atol=1e-15)


def _mixed_arguments():
    """Small arguments, with a few of 2**20 and more among them (and inf, nan, zeros)."""
    rng = np.random.default_rng(11)
    x = rng.uniform(-4, 4, 3001)
    x[::97] = rng.uniform(-1e12, 1e12, x[::97].size)
    x[5:9] = [np.inf, -np.nan, -0.0, 2.0**20]
    return x


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_kernels_with_some_large_arguments_give_the_full_functions_bits(name):
    """Where some arguments are 2**20 or more, the kernels (forward, VJP, its first write,
    a fused chain) run the reduced-range loop for the others and the full functions for those
    (``_kernels.flat_loops``): every element has the bits of the full function's loop."""
    import autograd_nb as anb
    from autograd_nb import config

    x = _mixed_arguments()
    full = np.empty_like(x)
    _apply_pair(getattr(fm, name), x, full)
    t = anb.tensor(x, requires_grad=True)
    y = getattr(anb, name)(t)
    np.testing.assert_array_equal(y.numpy().view(np.uint64), full.view(np.uint64))
    derivative = {"sin": "cos", "cos": "sin", "tan": None}[name]
    if derivative is not None:
        expected = np.empty_like(x)
        _apply_pair(getattr(fm, derivative), x, expected)
        expected = expected if name == "sin" else -expected
        # (the set kernel: the first write of t's gradient)
        (g,) = anb.grad(anb.sum(y), t, retain_graph=True)
        np.testing.assert_array_equal(g.numpy(), expected)  # (a NaN's sign is the formula's)
        (g,) = anb.grad(anb.sum(y) + anb.sum(t), t)  # (the adding kernel)
        np.testing.assert_array_equal(g.numpy(), (1.0 + expected))
    chains = []
    for minimum in (1, 10**9):  # fused, then one VJP kernel per node
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(config, "FUSION_MIN_ELEMENTS", minimum)
            u = anb.tensor(x, requires_grad=True)
            chain = getattr(anb, name)(anb.exp(u * 1e-30) * u)
            chains.append(anb.grad(anb.sum(chain), u)[0].numpy())
    np.testing.assert_array_equal(chains[0].view(np.uint64), chains[1].view(np.uint64))


def _kernel_bodies(op_name, calls):
    """The LLVM functions of ``op_name``'s generated kernels, compiled here (not from the
    disk cache, whose code numba cannot show): ``{kernel: its function's IR}`` for the kernels
    ``calls`` names, each called on a small float64 array."""
    from autograd_nb.ops import _kernels
    from autograd_nb.ops.registry import REGISTRY

    op = REGISTRY[op_name]
    source = _kernels.elementwise_source(op.input_names, op.params, op.formula,
                                         op.vjp_formulas, op.input_kinds)
    namespace = {}
    exec(source.replace("cache=True", "cache=False"), namespace)  # noqa: S102
    x, params = np.linspace(-1, 1, 64), np.zeros(0)
    bodies = {}
    for kernel, arity in calls.items():
        function = namespace[kernel]
        function(*[x] * arity, np.zeros_like(x), params)
        llvm = function.inspect_llvm(function.signatures[0])
        (body,) = [b for b in ["define" + b for b in llvm.split("\ndefine")[1:]]
                   if re.match(rf"define[^\n]*@_ZN\w*{len(kernel)}{kernel}\w*", b)
                   and "cpython" not in b.split("\n")[0]]
        bodies[kernel] = body
    return bodies


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_trig_kernels_vectorise_without_gathers(name):
    """The generated kernels of sin, cos and tan (forward, VJP, its set variant) are vector
    loops without gathers: the loop over every element reduces by Cody-Waite alone, and the
    full functions (Payne-Hanek, a table read at a computed index) are called only in the
    scalar pass over the elements with a large argument. So they vectorise on AMD Zen
    without AVX-512 too, where LLVM keeps a loop with gathers scalar (``_GATHERING``)."""
    calls = {"forward": 1, "vjp0": 2, "vjp0_set": 2}
    for kernel, body in _kernel_bodies(name, calls).items():
        assert "x double>" in body, (name, kernel)
        assert "gather" not in body, (name, kernel)
