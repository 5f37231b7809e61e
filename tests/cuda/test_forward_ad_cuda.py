"""Forward mode on ``device="cuda"``: the forward rules are ops, so dual tensors on the GPU
give the CPU's tangents (an elementwise chain, a matrix product, forward over reverse, and
the copies between devices). Sizes are tiny: under the simulator every CUDA thread is a
Python thread."""

import numpy as np

import autograd_nb as anb
from autograd_nb.autograd import forward_ad as fwAD

X = np.array([[0.3, -0.7, 1.1], [0.2, 0.5, -1.3]])
T = np.array([[1.0, 0.5, -0.25], [0.0, 2.0, 1.0]])
W = np.array([[0.5, -1.0], [1.5, 0.25], [-0.75, 1.0]])


def chain(x):
    return anb.tanh(anb.exp(x * 0.5) + anb.sin(x)) * x


def tangent_on(device, function, *arrays):
    with fwAD.dual_level():
        duals = [fwAD.make_dual(anb.tensor(a, device=device), anb.tensor(t, device=device))
                 for a, t in arrays]
        primal, tangent = fwAD.unpack_dual(function(*duals))
        assert tangent.device == device
        return primal.cpu().numpy(), tangent.cpu().numpy()


def test_elementwise_chain_on_the_device():
    cpu = tangent_on("cpu", chain, (X, T))
    gpu = tangent_on("cuda", chain, (X, T))
    for got, expected in zip(gpu, cpu):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_matmul_on_the_device():
    def product(x, w):
        return anb.matmul(x, w)

    cpu = tangent_on("cpu", product, (X, T), (W, W * 0.5))
    gpu = tangent_on("cuda", product, (X, T), (W, W * 0.5))
    np.testing.assert_allclose(gpu[1], cpu[1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cpu[1], T @ W + X @ (W * 0.5), rtol=1e-12)


def test_forward_over_reverse_on_the_device():
    def hvp(device):
        x = anb.tensor(X, device=device, requires_grad=True)
        with fwAD.dual_level():
            dual = fwAD.make_dual(x, anb.tensor(T, device=device))
            (gradient,) = anb.grad(chain(dual).sum(), dual, create_graph=True)
            return fwAD.unpack_dual(gradient).tangent.cpu().numpy()

    np.testing.assert_allclose(hvp("cuda"), hvp("cpu"), rtol=1e-12, atol=1e-12)


def test_tangents_follow_copies_between_devices():
    with fwAD.dual_level():
        dual = fwAD.make_dual(anb.tensor(X), anb.tensor(T))
        there = dual.to("cuda") * 2
        back = fwAD.unpack_dual(there.cpu()).tangent
    np.testing.assert_allclose(back.numpy(), 2 * T)
