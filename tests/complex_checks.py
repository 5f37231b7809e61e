"""Gradient checks for functions of complex (and real) arrays, as torch's gradcheck checks
complex functions: the real and imaginary part of every complex input are perturbed
separately, a complex output is split into its real and imaginary parts, and the expected
gradient of a real loss L is torch's convention, ``dL/dx + i dL/dy`` for an input
``x + iy`` (``dL/dx`` for a real input).

``check_complex_gradients`` holds three things against each other: the VJP kernels
(``grad``), the differentiable rules (``grad(create_graph=True)``) and central differences,
and, where asked, second derivatives against central differences of the first ones.
"""

import numpy as np

import autograd_nb as anb


def numerical_grad(scalar, arrays, eps=1e-6):
    """Central differences of the real number ``scalar(*arrays)``: per array, ``dS/dx`` plus
    ``i dS/dy`` where the array is complex (its real and imaginary parts perturbed in turn)."""
    grads = []
    for i, array in enumerate(arrays):
        grad = np.zeros(array.shape, dtype=np.result_type(array.dtype, np.float64))
        steps = (1.0, 1j) if array.dtype.kind == "c" else (1.0,)
        for j in range(array.size):
            for step in steps:
                plus = [a.copy() for a in arrays]
                minus = [a.copy() for a in arrays]
                plus[i].reshape(-1)[j] += eps * step
                minus[i].reshape(-1)[j] -= eps * step
                slope = (scalar(*plus) - scalar(*minus)) / (2 * eps)
                grad.reshape(-1)[j] += slope * step
        grads.append(grad)
    return grads


def _cotangent(shape, complex_output, rng):
    """A random grad_output: ``vr + i vi`` for a complex output, the gradient in torch's
    convention of the real loss ``sum(vr * real(y) + vi * imag(y))``."""
    v = rng.standard_normal(shape)
    if complex_output:
        v = v + 1j * rng.standard_normal(shape)
    return v


def _real_loss(y, v):
    """``sum(real(v) * real(y) + imag(v) * imag(y))`` of NumPy values: the loss whose
    gradient in y is ``v``."""
    y = np.asarray(y)
    return float(np.sum(np.real(v) * np.real(y) + np.imag(v) * np.imag(y)))


def check_complex_gradients(function, arrays, rtol=1e-6, atol=1e-7, seed=0,
                            second_order=True):
    """Check ``function`` (Tensors -> Tensor) at ``arrays`` (complex128 or float64 NumPy
    arrays) to first order, and to second where ``second_order``. Returns the gradients."""
    rng = np.random.default_rng(seed)
    arrays = [np.array(a) for a in arrays]
    tensors = [anb.tensor(a, requires_grad=True) for a in arrays]
    y = function(*tensors)
    v = _cotangent(y.shape, y.dtype.kind == "c", rng)
    kernel = anb.grad(y, tensors, grad_outputs=anb.tensor(v.astype(y.dtype)),
                      retain_graph=True)
    rules = anb.grad(y, tensors, grad_outputs=anb.tensor(v.astype(y.dtype)), create_graph=True)

    def loss(*plain):
        with anb.no_grad():
            return _real_loss(function(*(anb.tensor(p) for p in plain)).numpy(), v)

    numeric = numerical_grad(loss, arrays)
    for i, (k, r, n) in enumerate(zip(kernel, rules, numeric)):
        assert k.shape == arrays[i].shape and k.dtype == arrays[i].dtype, (k, arrays[i].dtype)
        np.testing.assert_allclose(k.numpy(), n, rtol=rtol, atol=atol, err_msg=f"vjp {i}")
        np.testing.assert_allclose(r.numpy(), k.numpy(), rtol=1e-9, atol=1e-12,
                                   err_msg=f"rule vjp {i}")
    if second_order:
        check_complex_second_order(function, arrays, v, rtol=rtol * 10, atol=atol * 10)
    return kernel


def check_complex_second_order(function, arrays, v, rtol=1e-5, atol=1e-6, seed=1):
    """Second derivatives: the gradient of the real ``S = sum_i <w_i, grad_i>`` (the first
    gradients, recorded with create_graph, paired with random ``w_i`` as ``_real_loss``
    pairs them) against central differences of S."""
    rng = np.random.default_rng(seed)
    ws = [_cotangent(a.shape, a.dtype.kind == "c", rng) for a in arrays]

    def first_order(*plain):
        tensors = [anb.tensor(p, requires_grad=True) for p in plain]
        y = function(*tensors)
        grads = anb.grad(y, tensors, grad_outputs=anb.tensor(v.astype(y.dtype)),
                         create_graph=True, allow_unused=True)
        return grads, tensors

    grads, tensors = first_order(*arrays)
    total = None
    for g, w in zip(grads, ws):
        if g is None or not g.requires_grad:
            continue
        term = (anb.real(g) * np.real(w)).sum()
        if g.dtype.kind == "c":
            term = term + (anb.imag(g) * np.imag(w)).sum()
        total = term if total is None else total + term
    if total is None:
        return  # linear in every input: the second derivative is zero and not recorded
    second = anb.grad(total, tensors, allow_unused=True, materialize_grads=True)

    def inner(*plain):
        with anb.enable_grad():
            gs, _ = first_order(*plain)
        return sum(_real_loss(g.numpy(), w) for g, w in zip(gs, ws) if g is not None)

    numeric = numerical_grad(inner, arrays)
    for i, (s, n) in enumerate(zip(second, numeric)):
        np.testing.assert_allclose(s.numpy(), n, rtol=rtol, atol=atol,
                                   err_msg=f"second derivative {i}")
