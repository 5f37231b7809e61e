"""The compiled complex kernels of the elementwise ops (``ElementwiseOp.complex_kernels``):
generated from the same complex formulas that NumPy evaluates (tier 0, and every layout the
kernels do not serve), they give NumPy's values to 1e-13 relative in complex128, forward and
each VJP; gradients through them against central differences (tests/complex_checks.py); the
ops they cannot serve keep NumPy's formula."""

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb.ops.elementwise import ElementwiseOp
from autograd_nb.ops.registry import REGISTRY
from tests.complex_checks import check_complex_gradients

COMPLEX_OPS = sorted(
    name for name, op in REGISTRY.items() if isinstance(op, ElementwiseOp) and op.complex
)
COMPILED = [name for name in COMPLEX_OPS if REGISTRY[name].complex_kernels is not None]


class _Saved(list):
    """The engine's saved operands (``saved[i]``, ``saved.output``)."""

    output = None


def _complex(rng, shape):
    # (away from the branch cuts and poles of log, sqrt, tan, ...)
    return rng.uniform(0.3, 0.9, size=shape) + 1j * rng.uniform(0.2, 0.6, size=shape)


def _operands(op, rng, shape, dtype):
    return [_complex(rng, shape).astype(dtype) for _ in range(op.n_inputs)]


def test_the_arithmetic_and_the_cmath_functions_compile():
    # The benchmarks' ops (arithmetic) and the holomorphic functions numba's cmath provides.
    for name in ("add", "subtract", "multiply", "divide", "negative", "square", "exp", "log",
                 "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "log10"):
        assert name in COMPILED, name
    # A formula with a function outside that vocabulary keeps NumPy's (both tiers).
    for name in ("where", "abs", "power", "expm1", "sigmoid"):
        assert REGISTRY[name].complex_kernels is None, name


@pytest.mark.parametrize("name", COMPILED)
def test_compiled_forward_and_vjps_match_numpy_formulas(name):
    op = REGISTRY[name]
    rng = np.random.default_rng(7)
    shape = (3, 5)
    arrays, attrs = op.prepare(_operands(op, rng, shape, np.complex128), {})
    compiled = op.forward(arrays, attrs)
    numpy_result = op.forward_numpy(arrays, attrs)  # (tier 0: NumPy's formula)
    assert compiled.dtype == numpy_result.dtype == np.complex128
    np.testing.assert_allclose(compiled, numpy_result, rtol=1e-13, atol=0)
    saved = _Saved(arrays)
    saved.output = compiled
    g = _complex(rng, shape)
    given = g.copy(), [a.copy() for a in arrays]
    for k in op._complex_vjps:
        got = np.zeros(shape, np.complex128) + 0.25j  # (the kernels accumulate)
        want = got.copy()
        op.vjp(k, g, saved, attrs, got)
        op.vjp_numpy(k, g, saved, attrs, want)
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=0, err_msg=f"vjp {k}")
    np.testing.assert_array_equal(g, given[0])  # (no kernel wrote into what it was given)
    for a, copy in zip(arrays, given[1]):
        np.testing.assert_array_equal(a, copy)


@pytest.mark.parametrize("name", COMPILED)
def test_compiled_single_precision_stays_single(name):
    op = REGISTRY[name]
    arrays, attrs = op.prepare(_operands(op, np.random.default_rng(8), (4,), np.complex64), {})
    got = op.forward(arrays, attrs)
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, op.forward_numpy(arrays, attrs), rtol=1e-6)


@pytest.mark.parametrize("name", COMPILED)
def test_compiled_gradients_against_finite_differences(name):
    op = REGISTRY[name]
    rng = np.random.default_rng(9)
    arrays = _operands(op, rng, (2, 3), np.complex128)  # (one shape: the flat layout)
    check_complex_gradients(getattr(anb, name), arrays, second_order=False)


def test_repeated_calls_go_through_the_run_cache():
    # The eager hot path (``run``) remembers the compiled kernel of a flat complex layout:
    # a second product of the same layout gives the first's value.
    rng = np.random.default_rng(10)
    a, b = _complex(rng, (6,)), _complex(rng, (6,))
    ta, tb = anb.tensor(a), anb.tensor(b)
    first = (ta * tb).numpy()
    second = (ta * tb).numpy()
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(second, a * b, rtol=1e-15)


def test_layouts_the_kernels_do_not_serve_keep_numpy_formulas():
    # Broadcast operands and mixed dtypes run NumPy's formula, with the same values.
    rng = np.random.default_rng(11)
    z, w, x = _complex(rng, (2, 3)), _complex(rng, (3,)), rng.uniform(0.5, 1.5, (2, 3))
    check_complex_gradients(anb.multiply, [z, w], second_order=False)
    check_complex_gradients(anb.divide, [z, x], second_order=False)


def test_a_real_operand_of_the_complex_precision_is_not_cast_on_repeated_calls():
    # ``z * x`` with x float64: the run cache hands the kernel x as it is (numba computes
    # in complex as NumPy does); values and both gradients as NumPy's formula gives them.
    rng = np.random.default_rng(12)
    z, x = _complex(rng, (5,)), rng.uniform(0.5, 1.5, (5,))
    for _ in range(3):
        got = anb.multiply(anb.tensor(z), anb.tensor(x))
        np.testing.assert_allclose(got.numpy(), z * x, rtol=1e-15)
        check_complex_gradients(anb.multiply, [z, x], second_order=False)
        check_complex_gradients(anb.divide, [x, z], second_order=False)
