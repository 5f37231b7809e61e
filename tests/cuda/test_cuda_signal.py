"""``scipy.signal.convolve``/``correlate`` on ``device="cuda"`` (the ``_convolve`` twin of
autograd_nb/cuda/signal.py) against the CPU: values, VJPs in both inputs, the second order,
every mode, one to three dimensions, float32 and float64."""

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb.scipy import signal

CASES = [((7,), (3,)), ((3,), (5,)), ((4, 5), (2, 3)), ((2, 3, 4), (2, 2, 3))]


def run(function, arrays, device, mode, create_graph=False):
    tensors = [anb.tensor(a, requires_grad=True, device=device) for a in arrays]
    y = function(*tensors, mode=mode)
    v = anb.tensor(np.random.default_rng(1).standard_normal(y.shape).astype(y.dtype),
                   device=device)
    grads = anb.grad(y, tensors, grad_outputs=v, create_graph=create_graph)
    if create_graph:
        grads = anb.grad(sum((g * g).sum() for g in grads), tensors)
    return [y.cpu().numpy()] + [g.cpu().numpy() for g in grads]


@pytest.mark.parametrize("name, shapes", [("convolve", shapes) for shapes in CASES]
                         + [("correlate", CASES[0]), ("correlate", CASES[2])])
@pytest.mark.parametrize("mode", ["full", "valid", "same"])
def test_convolve_on_cuda_matches_the_cpu(shapes, mode, name):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(shape) for shape in shapes]
    function = getattr(signal, name)
    cuda, cpu = (run(function, arrays, device, mode) for device in ("cuda", "cpu"))
    for a, b in zip(cuda, cpu, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["full", "valid"])
def test_second_order_and_float32_on_cuda(mode):
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((5, 4)), rng.standard_normal((2, 3))]
    cuda, cpu = (run(signal.convolve, arrays, d, mode, create_graph=True)
                 for d in ("cuda", "cpu"))
    for a, b in zip(cuda, cpu, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    single = [a.astype(np.float32) for a in arrays]
    cuda, cpu = (run(signal.convolve, single, d, mode) for d in ("cuda", "cpu"))
    for a, b in zip(cuda, cpu, strict=True):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
