"""torch's complex autograd convention (docs/complex.rst): for a real loss L of z = x + iy,
``z.grad = dL/dx + i dL/dy``; a real input keeps the real part of a complex gradient;
complex tensors are made, promoted and accumulated as NumPy and torch make them; the errors
are torch's."""

import numpy as np
import pytest

import autograd_nb as anb
from tests.complex_checks import check_complex_gradients, numerical_grad


def test_grad_of_abs_squared_is_two_z():
    # The example of docs/complex.rst: L = sum |z|^2 = sum x^2 + y^2, so dL/dx + i dL/dy = 2z
    # (JAX and HIPS autograd give the conjugate, 2 conj(z)).
    z = anb.tensor([1 + 2j, -0.5 + 0.25j], requires_grad=True)
    (anb.abs(z) ** 2).sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), 2 * z.numpy())
    w = anb.tensor([1 + 2j, -0.5 + 0.25j], requires_grad=True)
    anb.real(w * anb.conj(w)).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * w.numpy())


def test_holomorphic_vjp_is_g_times_conjugate_derivative():
    z0 = np.array([0.3 + 0.7j, -1.1 + 0.2j])
    z = anb.tensor(z0, requires_grad=True)
    g = np.array([0.5 - 1j, 2 + 0.5j])
    (grad,) = anb.grad(anb.exp(z) * z, z, grad_outputs=anb.tensor(g))
    derivative = np.exp(z0) * (1 + z0)
    np.testing.assert_allclose(grad.numpy(), g * np.conj(derivative), rtol=1e-14)


def test_a_real_input_keeps_the_real_part():
    x = anb.tensor([0.5, -2.0], requires_grad=True)
    c = np.array([1 + 2j, 3 - 1j])
    y = anb.abs(x * anb.tensor(c)) ** 2  # |c|^2 x^2
    y.sum().backward()
    assert x.grad.dtype == np.float64
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.abs(c) ** 2 * x.numpy())
    # through a cast to complex too, as torch's ``to(complex)``
    (r,) = anb.grad(anb.real(x.astype(np.complex128) * 1j).sum(), x)
    np.testing.assert_array_equal(r.numpy(), [0.0, 0.0])
    (r,) = anb.grad(anb.imag(x.astype(np.complex64) * 1j).sum(), x)
    assert r.dtype == np.float64
    np.testing.assert_array_equal(r.numpy(), [1.0, 1.0])


def test_mixed_graph_to_second_order():
    rng = np.random.default_rng(0)
    z = rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))
    x = rng.standard_normal((3,))

    def function(a, b):
        return anb.exp(a * b) @ anb.conj(a).T + anb.sin(b).sum()

    check_complex_gradients(function, [z, x])


def test_real_output_of_complex_input_to_second_order():
    rng = np.random.default_rng(1)
    z = rng.standard_normal((4,)) + 1j * rng.standard_normal((4,))
    check_complex_gradients(lambda a: anb.abs(anb.sin(a)) ** 2 + anb.angle(a), [z])


def test_complex64_gradients():
    z0 = np.array([0.3 + 0.7j, -1.1 + 0.2j], dtype=np.complex64)
    z = anb.tensor(z0, requires_grad=True)
    loss = (anb.abs(z * z) ** 2).sum()  # |z|^4: gradient 4 |z|^2 z
    assert loss.dtype == np.float32
    loss.backward()
    assert z.grad.dtype == np.complex64
    np.testing.assert_allclose(z.grad.numpy(), 4 * np.abs(z0) ** 2 * z0, rtol=1e-5)


def test_grad_accumulates_in_complex():
    z = anb.tensor([1 + 1j], requires_grad=True)
    for _ in range(2):
        anb.real(z * (2 - 1j)).sum().backward()  # d Re((2 - i) z) = 2 + i
    assert z.grad.dtype == np.complex128
    np.testing.assert_allclose(z.grad.numpy(), [4 + 2j])


def test_retain_grad_of_a_complex_intermediate():
    z = anb.tensor([1 + 1j, 2 - 1j], requires_grad=True)
    w = z * 2
    w.retain_grad()
    (anb.abs(w) ** 2).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * w.numpy())
    np.testing.assert_allclose(z.grad.numpy(), 8 * z.numpy())


def test_batched_grad_of_a_complex_graph():
    z0 = np.array([1 + 2j, 0.5 - 1j, -1 + 0.5j])
    z = anb.tensor(z0, requires_grad=True)
    y = anb.exp(z) * z
    vs = np.eye(3) + 1j * np.eye(3)[::-1]
    (rows,) = anb.grad(y, z, grad_outputs=anb.tensor(vs), is_grads_batched=True)
    derivative = np.exp(z0) * (1 + z0)
    np.testing.assert_allclose(rows.numpy(), vs * np.conj(derivative), rtol=1e-14)


def test_numerical_grad_follows_the_convention():
    # The checks' own reference: for L = x^2 y at z = x + iy, dL/dx + i dL/dy = 2xy + i x^2.
    (grad,) = numerical_grad(lambda a: float(a.real[0] ** 2 * a.imag[0]),
                             [np.array([1.5 + 2j])])
    np.testing.assert_allclose(grad, [6 + 2.25j], rtol=1e-8)


# -- creation and promotion --------------------------------------------------------------------


def test_complex_tensors_are_made_as_numpy_makes_them():
    assert anb.tensor(1 + 2j).dtype == np.complex128
    assert anb.tensor([1j], dtype=np.complex64).dtype == np.complex64
    assert anb.tensor(np.zeros(2, dtype=">c16")).dtype == np.complex128
    assert anb.zeros(2, dtype=np.complex64).dtype == np.complex64
    assert anb.as_tensor(np.array([1j])).dtype == np.complex128
    assert anb.tensor([1.0]).astype(np.complex64).dtype == np.complex64
    z = anb.tensor([1 + 2j], requires_grad=True)
    assert z.requires_grad and z.is_leaf
    anb.tensor([1.0], dtype=np.complex128).requires_grad_()
    with pytest.raises(TypeError, match="complex256|clongdouble"):
        anb.tensor(np.zeros(1, dtype=np.clongdouble))
    with pytest.raises(TypeError, match="complex128"):
        anb.tensor([1 + 2j], dtype=np.float64)  # (NumPy would drop the imaginary part)


@pytest.mark.parametrize("a, b", [
    (np.complex64, np.float64), (np.complex64, np.float32), (np.complex64, np.complex128),
    (np.float32, np.complex128), (np.int64, np.complex64), (np.complex64, np.int64),
])
def test_promotion_as_numpy(a, b):
    x, y = np.ones(2, dtype=a), np.ones(2, dtype=b)
    assert (anb.tensor(x) + anb.tensor(y)).dtype == (x + y).dtype
    assert (anb.tensor(x) * y).dtype == (x * y).dtype


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.int64])
def test_python_complex_scalars_promote_as_numpy(dtype):
    x = np.ones(2, dtype=dtype)
    assert (anb.tensor(x) + 1j).dtype == (x + 1j).dtype
    assert (2j * anb.tensor(x)).dtype == (2j * x).dtype
    assert (anb.tensor(x) * np.complex64(1j)).dtype == (x * np.complex64(1j)).dtype
    np.testing.assert_array_equal((anb.tensor(x) - 1j).numpy(), x - 1j)


# -- torch's errors ----------------------------------------------------------------------------


def test_implicit_grad_of_a_complex_output_raises_torchs_message():
    z = anb.tensor(1 + 2j, requires_grad=True)
    message = "grad can be implicitly created only for real scalar outputs but got complex128"
    with pytest.raises(RuntimeError, match=message):
        (z * z).backward()
    with pytest.raises(RuntimeError, match=message):
        anb.grad(z * 2, z)
    assert z.grad is None


@pytest.mark.parametrize("output_kind, grad_dtype", [
    ("complex", np.float64), ("complex", np.float32), ("real", np.complex128),
    ("real", np.complex64),
])
def test_grad_output_of_the_other_kind_raises_torchs_message(output_kind, grad_dtype):
    z = anb.tensor([1 + 2j, 3 - 1j], requires_grad=True)
    y = z * 2 if output_kind == "complex" else anb.abs(z)
    message = (
        "For complex Tensors, both grad_output and output are required to have the same "
        rf"dtype. Mismatch in dtype: grad_output\[0\] has a dtype of {np.dtype(grad_dtype)} "
        rf"and output\[0\] has a dtype of {y.dtype}."
    )
    with pytest.raises(RuntimeError, match=message):
        anb.grad(y, z, grad_outputs=anb.tensor(np.ones(2, dtype=grad_dtype)))
    with pytest.raises(RuntimeError, match=message):
        y.backward(np.ones(2, dtype=grad_dtype))
    assert z.grad is None


def test_grad_output_of_the_other_complex_width_is_cast():
    # complex64 for a complex128 output: the same kind, cast (as a float32 grad_output of a
    # float64 output is)
    z = anb.tensor([1 + 2j], requires_grad=True)
    (grad,) = anb.grad(z * 1j, z, grad_outputs=anb.tensor(np.ones(1, dtype=np.complex64)))
    assert grad.dtype == np.complex128
    np.testing.assert_allclose(grad.numpy(), [-1j])
