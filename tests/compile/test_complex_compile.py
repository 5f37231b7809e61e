"""Complex values inside ``anb.compile`` programs (docs/complex.rst, "How it runs";
docs/compile.rst, "Fallback"): the elementwise ops with compiled complex kernels, scalars and
real operands among them, the shape, indexing and assembly ops, forward and backward, give
eager's bits in complex64 and complex128, replayed on new values; what has no compiled
complex driver still runs eagerly with one warning naming it."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autograd_nb as anb
from autograd_nb.ops import _pointers
from autograd_nb.ops.registry import REGISTRY
from autograd_nb.replay import CompileWarning

DTYPES = [np.complex64, np.complex128]
REAL = {np.complex64: np.float32, np.complex128: np.float64}


def draw(rng, shape, dtype):
    """Seeded complex values of ``dtype`` (real ones for a real ``dtype``)."""
    values = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * rng.standard_normal(shape)
    return values.astype(dtype)


def assert_same_bits(got, expected):
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert got.tobytes() == expected.tobytes()


def assert_compiles_as_eager(fn, make_args, wrt, calls=3, seed=0):
    """``anb.compile(fn)`` records one program, with no warning, and each of ``calls`` calls
    on new values (``make_args(rng)``) gives eager's outputs and, for seeded complex
    grad_outputs, eager's gradients of the arguments at ``wrt``, bit for bit."""
    rng = np.random.default_rng(seed)
    compiled = anb.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        for _ in range(calls):
            args = make_args(rng)
            got = compiled(*args)
            expected = fn(*args)
            assert_same_bits(got.numpy(), expected.numpy())
            grad_output = anb.tensor(draw(rng, got.shape, got.dtype))
            inputs = [args[i] for i in wrt]
            got_grads = anb.grad(got, inputs, grad_outputs=grad_output)
            expected_grads = anb.grad(expected, inputs, grad_outputs=grad_output)
            for g, e in zip(got_grads, expected_grads, strict=True):
                assert_same_bits(g.numpy(), e.numpy())
    assert compiled.cache_info().programs == 1


def complex_leaf(rng, shape, dtype):
    return anb.tensor(draw(rng, shape, dtype), requires_grad=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_an_elementwise_chain_with_scalars_replays_eagers_bits(dtype):
    def fn(z, w):
        u = 2.0 * z * w + anb.exp(z * 0.5j) - w / 3.0
        return anb.sin(u) * u - (1.5 - 0.5j) + anb.sqrt(anb.tanh(u)) / anb.cosh(w)

    assert_compiles_as_eager(
        fn, lambda rng: (complex_leaf(rng, (3, 4), dtype), complex_leaf(rng, (3, 4), dtype)),
        wrt=(0, 1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_real_operand_of_the_complex_precision_is_read_as_it_is(dtype):
    # ``z * x``: eager hands the real array to the complex kernel, and so does the program.
    def fn(z, x):
        return anb.log(z * x + x) * z - x / z

    assert_compiles_as_eager(
        fn, lambda rng: (complex_leaf(rng, (5,), dtype), anb.tensor(draw(rng, (5,), REAL[dtype]))),
        wrt=(0,))


@pytest.mark.parametrize("dtype", DTYPES)
def test_shape_indexing_and_assembly_of_complex_values(dtype):
    def fn(z):
        square = (z * z).reshape(2, 3)
        picked = square.T[1:] * z.reshape(3, 2)[1:]
        return anb.concatenate([picked.reshape(-1), z[::2] * z[1::2]])

    assert_compiles_as_eager(fn, lambda rng: (complex_leaf(rng, (6,), dtype),), wrt=(0,))


@pytest.mark.parametrize("dtype", DTYPES)
def test_conj_records_forward_and_backward(dtype):
    def fn(z, w):
        return anb.conj(z) * w + anb.conj(z * 2.0) * z

    assert_compiles_as_eager(
        fn, lambda rng: (complex_leaf(rng, (2, 3), dtype), complex_leaf(rng, (2, 3), dtype)),
        wrt=(0, 1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_parts_of_complex_values_record_where_no_gradient_goes_through_them(dtype):
    # Real results of complex values: a backward through them would have two dtypes.
    def fn(z):
        return anb.real(z * z) * anb.imag(z) - (z * 1j).real

    rng = np.random.default_rng(3)
    compiled = anb.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        for _ in range(3):
            z = anb.tensor(draw(rng, (2, 3), dtype))
            got, expected = compiled(z), fn(z)
            assert got.dtype == REAL[dtype]
            assert_same_bits(got.numpy(), expected.numpy())
    assert compiled.cache_info().programs == 1


@settings(max_examples=6, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_broadcast_scalars_over_shapes(shape, dtype, seed):
    def fn(z, c):
        return anb.exp(z) * c - c * z * z

    def make(rng):
        return complex_leaf(rng, shape, dtype), anb.tensor(draw(rng, (), dtype))

    assert_compiles_as_eager(fn, make, wrt=(0,), calls=2, seed=seed)


def test_the_gradient_of_a_broadcast_complex_input_runs_eagerly():
    # Summed back to the input's shape by NumPy eagerly: no compiled driver gives its bits.
    def fn(z, c):
        return z * c

    z = anb.tensor([1 + 2j, -0.5j], requires_grad=True)
    c = anb.tensor(0.5 - 1j, requires_grad=True)
    compiled = anb.compile(fn)
    with pytest.warns(CompileWarning, match="multiply's gradient"):
        compiled(z, c)
    grad_output = anb.tensor([1j, 2.0 + 0j])
    got = anb.grad(compiled(z, c), [z, c], grad_outputs=grad_output)
    expected = anb.grad(fn(z, c), [z, c], grad_outputs=grad_output)
    for g, e in zip(got, expected, strict=True):
        assert_same_bits(g.numpy(), e.numpy())


@pytest.mark.parametrize(("fn", "op"), [
    (lambda z: anb.abs(z * z) ** 2, "abs"),  # (a real value of complex ones: NumPy's)
    (lambda z: anb.sum(z * z), "sum"),  # (NumPy's pairwise sum)
    (lambda z: z.reshape(2, 2) @ z.reshape(2, 2), "_bmm"),
])
def test_what_has_no_compiled_complex_driver_runs_eagerly_naming_it(fn, op):
    z = anb.tensor(np.array([1 + 2j, -0.5j, 3.0, 1j]), requires_grad=True)
    compiled = anb.compile(fn)
    with pytest.warns(CompileWarning, match=rf"{op} \(complex operands"):
        compiled(z)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (one warning per signature)
        got = compiled(z)
    expected = fn(z)
    assert_same_bits(got.numpy(), expected.numpy())
    assert compiled.cache_info().programs == 0


def test_a_program_with_a_real_and_a_complex_gradient_runs_eagerly():
    # The backward of a program has one dtype: a real input with a complex one falls back.
    def fn(z, x):
        return z * x

    z = anb.tensor([1 + 2j, -0.5j], requires_grad=True)
    x = anb.tensor([2.0, 3.0], requires_grad=True)
    compiled = anb.compile(fn)
    with pytest.warns(CompileWarning, match="several dtypes"):
        compiled(z, x)
    got = anb.grad(compiled(z, x), [z, x], grad_outputs=anb.tensor([1j, 1.0 + 0j]))
    expected = anb.grad(fn(z, x), [z, x], grad_outputs=anb.tensor([1j, 1.0 + 0j]))
    for g, e in zip(got, expected, strict=True):
        assert_same_bits(g.numpy(), e.numpy())


def test_a_real_drivers_complex_entry_is_refused():
    # The safety net: a driver written for real values never computes complex values.
    multiply = REGISTRY["multiply"]
    real_driver = multiply.kernels.forward_exec
    with pytest.raises(_pointers.NoComplexDriver, match="no complex case"):
        _pointers.entry_address(real_driver, np.dtype(np.complex128))
    complex_driver = multiply.complex_kernels.forward_exec_r0
    assert _pointers.complex_capable(complex_driver)
    a, b = np.array([1 + 2j, 3j]), np.array([0.5 - 1j, 2.0 + 0j])
    out = np.empty(2, complex)
    _pointers.call_driver(complex_driver, [a, b], out, (2,))
    expected = np.empty(2, complex)
    multiply.complex_kernels.forward(a, b, expected, np.empty(0))
    assert_same_bits(out, expected)


SPECIAL = np.array([0j, complex(-0.0, -0.0), complex(np.inf, -1.0), complex(np.nan, 2.0),
                    complex(1.5, -np.inf), complex(-3.25, 0.0)])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["_real", "_imag", "_conj"])
def test_the_parts_drivers_give_numpys_bits_at_special_values(name, dtype):
    op = REGISTRY[name]
    x = SPECIAL.astype(dtype)
    arrays, attrs = op.prepare([x], {})
    expected = op.forward(arrays, attrs)
    driver, ints, floats = op.forward_spec(arrays, attrs, expected)
    out = np.full_like(expected, 7)
    _pointers.call_driver(driver, arrays, out, ints, floats)
    assert_same_bits(out, expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_conjs_vjp_driver_adds_as_eager_adds(dtype):
    op = REGISTRY["_conj"]
    z = anb.tensor(SPECIAL.astype(dtype), requires_grad=True)
    node = anb.conj(z).grad_fn
    grad_output = SPECIAL[::-1].astype(dtype)
    start = draw(np.random.default_rng(4), SPECIAL.shape, dtype)
    expected = start.copy()
    op.vjp(0, grad_output, [None], {}, expected)
    spec = op.exec_spec(0, node)
    got = start.copy()
    _pointers.call_driver(spec.driver, [grad_output, *spec.saved], got, spec.ints, spec.floats)
    assert_same_bits(got, expected)
