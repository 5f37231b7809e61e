"""Complex tensors on ``device="cuda"`` (docs/complex.rst), against the CPU's results.

The cases are the CPU's complex tests' (tests/ops/test_complex.py: every elementwise op with a
complex case, from the registry, the reductions, products, shape, indexing and assembly
ops). For each, the forward result, the VJPs of a random grad_output, the batched VJPs and
the second derivatives (``create_graph=True``) on the GPU must equal the CPU's, whose
gradients tests/ops/test_complex.py holds to finite differences in torch's convention. The
ops whose CUDA kernels have no complex case raise TypeError. Sizes are tiny: under the
simulator every CUDA thread is a Python thread.
"""

import numpy as np
import pytest

import autograd_nb as anb
import autograd_nb.numpy as anp
from autograd_nb.cuda import dispatch
from autograd_nb.ops.registry import REGISTRY, call
from tests.ops import test_complex as cpu_cases


def _complex(rng, shape, dtype=np.complex128):
    return cpu_cases._complex(rng, shape).astype(dtype)


def _random_like(rng, array):
    """A grad_output for ``array``: complex where it is, real where it is real."""
    shape = np.shape(array)
    if np.iscomplexobj(array):
        return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return rng.standard_normal(shape)


def _run(function, arrays, device, grad_output, differentiable, create_graph=False):
    inputs = [anb.tensor(a, requires_grad=d, device=device)
              for a, d in zip(arrays, differentiable)]
    out = function(*inputs)
    wrt = [t for t, d in zip(inputs, differentiable) if d]
    seed = anb.tensor(grad_output, dtype=out.dtype, device=device)
    grads = anb.grad(out, wrt, grad_outputs=seed, create_graph=create_graph)
    if create_graph:  # a second order: the gradient of a real function of the first
        total = sum((anb.abs(g) ** 2).sum() for g in grads)
        grads = anb.grad(total, wrt, allow_unused=True, materialize_grads=True)
    values = [out.detach().cpu().numpy()] + [g.detach().cpu().numpy() for g in grads]
    dtypes = [out.dtype] + [g.dtype for g in grads]
    return values, dtypes


def assert_same_on_cuda(function, arrays, differentiable=None, create_graph=False, rtol=1e-10):
    """``function``'s result and gradients on CUDA equal the CPU's, in value and dtype."""
    if differentiable is None:
        differentiable = [np.asarray(a).dtype.kind in "fc" for a in arrays]
    rng = np.random.default_rng(99)
    probe = function(*(anb.tensor(a) for a in arrays))
    grad_output = _random_like(rng, probe.numpy())
    cpu, cpu_dtypes = _run(function, arrays, "cpu", grad_output, differentiable, create_graph)
    gpu, gpu_dtypes = _run(function, arrays, "cuda", grad_output, differentiable, create_graph)
    assert gpu_dtypes == cpu_dtypes
    for expected, got in zip(cpu, gpu):
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol)


def _function(name):
    return cpu_cases._function(name)


# -- elementwise: every op with a complex case, from the registry ------------------------------


def test_the_cases_cover_every_complex_elementwise_op():
    with_case = {name for name, op in REGISTRY.items()
                 if op.family in ("elementwise", "complex") and op.complex}
    assert with_case == cpu_cases.COMPLEX_ELEMENTWISE


@pytest.mark.parametrize("name", sorted(cpu_cases.COMPLEX_UNARY))
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_unary(name, dtype):
    z = _complex(np.random.default_rng(0), (2, 3), dtype)
    assert_same_on_cuda(_function(name), [z], rtol=2e-5 if dtype == np.complex64 else 1e-12)


@pytest.mark.parametrize("name", sorted(cpu_cases.COMPLEX_BINARY))
def test_binary_flat_broadcast_and_mixed(name):
    rng = np.random.default_rng(1)
    a, b = _complex(rng, (2, 3)), _complex(rng, (2, 3))
    assert_same_on_cuda(_function(name), [a, b])
    # broadcast: the VJP into the smaller operand sums over the broadcast dimensions
    assert_same_on_cuda(_function(name), [a, _complex(rng, (3,))])
    assert_same_on_cuda(_function(name), [_complex(rng, (2, 1)), b])
    # a real operand keeps the real part of its gradient (torch's handle_r_to_c)
    x = rng.uniform(0.5, 1.5, size=(3,))
    assert_same_on_cuda(_function(name), [a, x])
    assert_same_on_cuda(_function(name), [x, a])


def test_a_python_complex_scalar_and_single_precision():
    z = _complex(np.random.default_rng(2), (4,), np.complex64)
    assert_same_on_cuda(lambda t: t * (2 - 1j) + 1j, [z], rtol=2e-6)
    x = np.float32([0.5, 1.5, 2.5])
    # complex64 with float32 stays complex64; with float64 it is complex128 (NumPy's rules)
    out = anb.tensor(x, device="cuda") * anb.tensor(z[:3], device="cuda")
    assert out.dtype == np.complex64
    out = anb.tensor(x.astype(np.float64), device="cuda") * anb.tensor(z[:3], device="cuda")
    assert out.dtype == np.complex128


def test_where_of_complex_and_real_branches():
    rng = np.random.default_rng(3)
    condition = np.array([[True, False, True], [False, False, True]])
    assert_same_on_cuda(lambda a, b: anb.where(condition, a, b),
                        [_complex(rng, (2, 3)), rng.standard_normal((3,))])


@pytest.mark.parametrize("name", ["exp", "sqrt", "_angle", "power"])
def test_second_order(name):
    rng = np.random.default_rng(4)
    arrays = [_complex(rng, (2, 3)) for _ in range(REGISTRY[name].n_inputs)]
    assert_same_on_cuda(_function(name), arrays, create_graph=True)


def test_batched_vjps():
    rng = np.random.default_rng(5)
    z = _complex(rng, (2, 3))
    seeds = rng.standard_normal((4, 2, 3)) + 1j * rng.standard_normal((4, 2, 3))
    results = []
    for device in ("cpu", "cuda"):
        t = anb.tensor(z, requires_grad=True, device=device)
        out = anb.exp(t) * anb.tensor(_complex(np.random.default_rng(6), (3,)), device=device)
        (g,) = anb.grad(out, t, grad_outputs=anb.tensor(seeds, device=device),
                        is_grads_batched=True)
        results.append(g.cpu().numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-12)


# -- the convention ---------------------------------------------------------------------------


def test_the_gradient_of_abs_squared_is_2z():
    z = _complex(np.random.default_rng(7), (5,))
    t = anb.tensor(z, requires_grad=True, device="cuda")
    (anb.abs(t) ** 2).sum().backward()
    assert t.grad.device == "cuda" and t.grad.dtype == np.complex128
    np.testing.assert_allclose(t.grad.cpu().numpy(), 2 * z, rtol=1e-13)
    t.grad = None
    anp.real(t * anb.conj(t)).sum().backward()
    np.testing.assert_allclose(t.grad.cpu().numpy(), 2 * z, rtol=1e-13)


def test_a_chain_of_ops_and_a_real_leaf():
    rng = np.random.default_rng(8)
    z, x = _complex(rng, (3, 4)), rng.standard_normal((4,))

    def chain(z, x):
        w = anb.exp(1j * x) * anb.sin(z) / (z + 2.0)
        return anb.abs(anb.sqrt(w * w + 1)).sum(axis=1)

    assert_same_on_cuda(chain, [z, x])
    t = anb.tensor(x, requires_grad=True, device="cuda")
    chain(anb.tensor(z, device="cuda"), t).sum().backward()
    assert t.grad.dtype == np.float64  # the real leaf's gradient stays real


# -- reductions, products, shapes, indexing ---------------------------------------------------


@pytest.mark.parametrize("case", sorted(cpu_cases._NUMPY_REDUCTIONS))
def test_reductions(case):
    z = _complex(np.random.default_rng(9), (2, 3, 2))
    assert_same_on_cuda(cpu_cases._reduction_cases()[case], [z])


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_cumprod_with_a_zero(dtype):
    # One VJP kernel for real and complex values: the conjugates of the recurrence.
    z = _complex(np.random.default_rng(10), (2, 4, 2), dtype)
    z[1, 2, 0] = 0
    rtol = 1e-5 if dtype == np.complex64 else 1e-10
    assert_same_on_cuda(lambda t: anb.cumprod(t, axis=1), [z], rtol=rtol)


@pytest.mark.parametrize("case", sorted(cpu_cases._product_cases()))
@pytest.mark.parametrize("kinds", ["cc", "cr", "rc"])
def test_products(case, kinds):
    function, shapes = cpu_cases._product_cases()[case]
    rng = np.random.default_rng(10)
    arrays = [_complex(rng, s) if k == "c" else rng.standard_normal(s)
              for k, s in zip(kinds, shapes)]
    assert_same_on_cuda(function, arrays)


def test_matmul_second_order():
    rng = np.random.default_rng(11)
    assert_same_on_cuda(lambda a, b: a @ b, [_complex(rng, (3, 4)), _complex(rng, (4, 2))],
                        create_graph=True)


@pytest.mark.parametrize("case", sorted(cpu_cases._NUMPY_STRUCTURAL))
def test_shapes_indexing_and_assembly(case):
    z = _complex(np.random.default_rng(12), (2, 3, 2))
    assert_same_on_cuda(cpu_cases._structural_cases()[case], [z])


def test_repeated_indices_accumulate_and_setitem():
    rng = np.random.default_rng(13)
    z, v = _complex(rng, (5,)), _complex(rng, (2,))

    def assign(z, v):
        out = z * 1.0
        out[np.array([1, 3])] = v
        return out

    assert_same_on_cuda(lambda t: t[np.array([0, 2, 2, 4, 0])], [z])
    assert_same_on_cuda(assign, [z, v])


def test_transfers_keep_the_gradient():
    z = _complex(np.random.default_rng(14), (3,))
    t = anb.tensor(z, requires_grad=True)
    (anb.abs(anb.exp(t.cuda())) ** 2).sum().backward()
    expected = anb.tensor(z, requires_grad=True)
    (anb.abs(anb.exp(expected)) ** 2).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), expected.grad.numpy(), rtol=1e-13)


# -- what has no complex case on CUDA ---------------------------------------------------------


def test_a_cuda_kernel_without_a_complex_case_refuses_complex_operands():
    class Fake:
        name = "fake"

    z = anb.tensor([1j, 2.0], device="cuda")
    with pytest.raises(TypeError, match="fake is not implemented for complex CUDA tensors"):
        dispatch._check_complex(Fake, Fake(), [z._data])


def test_ops_without_a_complex_case_raise_as_on_the_cpu():
    z = anb.tensor([1j, 2.0], device="cuda")
    with pytest.raises(TypeError, match="maximum is not implemented for complex tensors"):
        anb.maximum(z, 0.0)
    with pytest.raises(TypeError, match="not implemented for complex"):
        z < z  # noqa: B015


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "hfft"])
def test_fft_of_a_complex_cuda_tensor_raises_naming_itself(name):
    z = anb.tensor(_complex(np.random.default_rng(16), (4,)), device="cuda")
    with pytest.raises(NotImplementedError, match=f"numpy.fft.{name} is not implemented"):
        getattr(anp.fft, name)(z)


def test_equality_on_the_device():
    z = anb.tensor([1 + 1j, 2.0], device="cuda")
    assert (z == anb.tensor([1 + 1j, 2.5], device="cuda")).cpu().numpy().tolist() == [True, False]
    assert call("_real", z).device == "cuda"
