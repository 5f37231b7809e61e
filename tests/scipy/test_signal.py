"""autograd_nb.scipy.signal against SciPy: convolve and correlate in 1 to 3 dimensions, every
mode and both orders of the inputs, float32 and float64; gradients in both inputs against
float64 central differences (first and second order); SciPy's errors; the op's kernel
against its NumPy twin, bit for bit."""

import warnings

import numpy as np
import pytest
import scipy.signal as ss

import autograd_nb as anb
from autograd_nb.ops.registry import REGISTRY, Saved
from autograd_nb.scipy import signal
from tests.checks import check_gradients, numerical_vjp

# (in1 shape, in2 shape): in1 larger, smaller, mixed (no 'valid'), equal, a single element
SHAPES = [
    ((7,), (3,)), ((3,), (6,)), ((5,), (5,)), ((1,), (4,)),
    ((4, 6), (3, 2)), ((2, 3), (4, 5)), ((2, 5), (3, 2)), ((3, 1), (1, 4)),
    ((3, 4, 5), (2, 2, 3)), ((2, 3, 2), (3, 1, 2)),
]
MODES = ["full", "same", "valid"]
FUNCTIONS = ["convolve", "correlate"]


def _valid_possible(s1, s2):
    return all(m >= n for m, n in zip(s1, s2)) or all(m <= n for m, n in zip(s1, s2))


def _draw(rng, shape, dtype=np.float64):
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_match_scipy(function, mode, shapes, dtype):
    rng = np.random.default_rng(len(shapes[0]) * 7 + shapes[1][0])
    a, b = _draw(rng, shapes[0], dtype), _draw(rng, shapes[1], dtype)
    scipy_function, ours = getattr(ss, function), getattr(signal, function)
    if mode == "valid" and not _valid_possible(*shapes):
        with pytest.raises(ValueError, match="at least as large as the other"):
            scipy_function(a, b, mode)
        with pytest.raises(ValueError, match="at least as large as the other"):
            ours(anb.tensor(a), anb.tensor(b), mode)
        return
    reference = scipy_function(a.astype(np.float64), b.astype(np.float64), mode,
                               method="direct")
    result = ours(anb.tensor(a), anb.tensor(b), mode)
    assert isinstance(result, anb.Tensor)
    assert result.dtype == dtype
    assert result.shape == reference.shape
    rtol, atol = (1e-5, 1e-5) if dtype == np.float32 else (1e-12, 1e-12)
    np.testing.assert_allclose(result.numpy(), reference, rtol=rtol, atol=atol)


@pytest.mark.parametrize("method", ["auto", "direct", "fft"])
def test_every_method_gives_the_direct_sum(method):
    rng = np.random.default_rng(3)
    a, b = _draw(rng, (40, 30)), _draw(rng, (9, 8))
    result = signal.convolve(anb.tensor(a), b, "same", method)
    np.testing.assert_allclose(result.numpy(), ss.convolve(a, b, "same", method),
                               rtol=1e-10, atol=1e-10)


def test_dtypes_and_plain_operands():
    # float32 only where both are; integers, lists and arrays beside a Tensor become float64
    f32 = anb.tensor(np.ones(3, np.float32))
    assert signal.convolve(f32, np.ones(2, np.float32)).dtype == np.float32
    assert signal.convolve(f32, np.ones(2)).dtype == np.float64
    result = signal.convolve(anb.tensor([1, 2, 3]), [1, 1])
    assert result.dtype == np.float64
    np.testing.assert_array_equal(result.numpy(), ss.convolve([1, 2, 3], [1, 1]))


def test_without_tensors_the_functions_are_scipys():
    a, b = np.arange(5.0), np.array([1.0, -1.0, 0.5])
    for function in FUNCTIONS:
        for mode in MODES:
            result = getattr(signal, function)(a, b, mode)
            assert type(result) is np.ndarray
            np.testing.assert_array_equal(result, getattr(ss, function)(a, b, mode))
    assert signal.convolve([1, 2], [3, 4]).dtype == ss.convolve([1, 2], [3, 4]).dtype


def test_zero_dimensional_inputs_multiply():
    x = anb.tensor(2.0, requires_grad=True)
    y = signal.convolve(x, anb.tensor(3.0))
    assert y.shape == () and float(y) == ss.convolve(2.0, 3.0)
    assert float(anb.grad(y, x)[0]) == 3.0
    assert float(signal.correlate(x, 3.0)) == ss.correlate(2.0, 3.0)


def test_errors_are_scipys():
    x, y = anb.tensor(np.ones((3, 3))), anb.tensor(np.ones(2))
    with pytest.raises(ValueError, match="Acceptable mode flags"):
        signal.convolve(x, x, mode="bad")
    with pytest.raises(ValueError, match="Acceptable method flags"):
        signal.convolve(x, x, method="bad")
    with pytest.raises(ValueError, match="volume and kernel should have the same"):
        signal.convolve(x, y)
    with pytest.raises(ValueError, match="in1 and in2 should have the same"):
        signal.correlate(x, y)
    with pytest.raises(ValueError, match="must not be empty"):
        signal.convolve(anb.tensor(np.ones(0)), y)
    with pytest.raises(TypeError, match="in2 has dtype complex128"):
        signal.convolve(y, np.ones(2, complex))
    for message, function in (("volume and kernel", ss.convolve), ("in1 and in2",
                                                                   ss.correlate)):
        with pytest.raises(ValueError, match=message):
            function(np.ones((3, 3)), np.ones(2))


# -- gradients --------------------------------------------------------------------------------

GRADIENT_SHAPES = [((6,), (3,)), ((2,), (5,)), ((4, 5), (2, 3)), ((2, 3), (3, 4)),
                   ((3, 2), (2, 3)), ((3, 3, 2), (2, 1, 2))]


GRADIENT_CASES = [(m, s) for m in MODES for s in GRADIENT_SHAPES
                  if m != "valid" or _valid_possible(*s)]


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("mode, shapes", GRADIENT_CASES, ids=str)
def test_gradients_match_finite_differences(function, mode, shapes):
    rng = np.random.default_rng(11)
    arrays = [_draw(rng, s) for s in shapes]
    ours = getattr(signal, function)
    check_gradients(lambda a, b: ours(a, b, mode), arrays)


def test_float32_gradients_keep_the_dtype():
    rng = np.random.default_rng(2)
    arrays = [_draw(rng, (5, 4), np.float32), _draw(rng, (2, 3), np.float32)]
    a, b = (anb.tensor(x, requires_grad=True) for x in arrays)
    y = signal.convolve(a, b, "same")
    v = rng.standard_normal(y.shape)
    grads = anb.grad(y, [a, b], grad_outputs=anb.tensor(v.astype(np.float32)))
    assert [g.dtype for g in grads] == [np.float32, np.float32]
    numeric = numerical_vjp(lambda p, q: ss.convolve(p, q, "same"), arrays, v)
    for g, n in zip(grads, numeric):
        np.testing.assert_allclose(g.numpy(), n, rtol=1e-4, atol=1e-4)


# -- the op's kernel and its NumPy twin -------------------------------------------------------


@pytest.mark.parametrize("mode", ["full", "valid"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_twins_give_the_kernels_bits(mode, dtype):
    op = REGISTRY["_convolve"]
    rng = np.random.default_rng(5)
    # (a VJP's second operand larger than its result takes the twin's other loop)
    for shapes in [((9,), (4,)), ((5, 6), (2, 3)), ((4, 3, 5), (2, 3, 1)), ((30, 20), (3, 2)),
                   ((1,), (1,)), ((6, 1), (6, 1))]:
        arrays, attrs = op.prepare([_draw(rng, s, dtype) for s in shapes], {"mode": mode})
        output = op.forward(arrays, attrs)
        assert output.tobytes() == op.forward_numpy(arrays, attrs).tobytes()
        saved = Saved(arrays, output)
        g = _draw(rng, output.shape, dtype)
        for k in (0, 1):
            start = _draw(rng, arrays[k].shape, dtype)
            compiled, twin = start.copy(), start.copy()
            op.vjp(k, g, saved, attrs, compiled)
            op.vjp_numpy(k, g, saved, attrs, twin)
            assert compiled.tobytes() == twin.tobytes(), k


def test_the_op_checks_its_operands():
    op = REGISTRY["_convolve"]
    with pytest.raises(ValueError, match="mode must be one of"):
        op.prepare([np.ones(3), np.ones(2)], {"mode": "same"})
    with pytest.raises(ValueError, match="at least as large as b"):
        op.prepare([np.ones(2), np.ones(3)], {"mode": "valid"})


@pytest.mark.parametrize("mode", ["full", "valid"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_backward_gives_the_vjp_kernels_bits(mode, dtype):
    # (the compiled executor runs the op's driver; tier 0 the twin)
    op = REGISTRY["_convolve"]
    rng = np.random.default_rng(7)
    for shapes in [((8,), (3,)), ((4, 6), (3, 2)), ((3, 4, 3), (2, 2, 3))]:
        arrays = [_draw(rng, s, dtype) for s in shapes]
        tensors = [anb.tensor(x, requires_grad=True) for x in arrays]
        y = anb.ops.registry.call("_convolve", *tensors, mode=mode)
        g = _draw(rng, y.shape, dtype)
        grads = anb.grad(y, tensors, grad_outputs=anb.tensor(g))
        saved = Saved(arrays, y.numpy())
        for k, grad in enumerate(grads):
            expected = np.zeros_like(arrays[k])
            op.vjp(k, g, saved, {"mode": mode}, expected)
            assert grad.numpy().tobytes() == expected.tobytes(), (shapes, k)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_programs_replay_the_op(dtype):
    def loss(x, k):
        return ((signal.convolve(x, k, "same") ** 2).sum()
                + signal.correlate(k, x, "valid").sum() + signal.convolve(x, k).sum())

    compiled = anb.compile(loss, strict=True)
    rng = np.random.default_rng(1)
    warnings.simplefilter("error", anb.CompileWarning)  # (no eager fallback; pytest resets)
    for _ in range(3):  # recorded, then replayed on new values
        arrays = [_draw(rng, (4, 5), dtype), _draw(rng, (2, 3), dtype)]
        results = []
        for function in (compiled, loss):
            tensors = [anb.tensor(a, requires_grad=True) for a in arrays]
            value = function(*tensors)
            results.append([value.numpy(), *(g.numpy() for g in anb.grad(value, tensors))])
        for ours, eager in zip(*results):
            assert ours.tobytes() == eager.tobytes()
