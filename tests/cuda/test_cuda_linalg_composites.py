"""The composites of ops/contractions.py and ``linalg.norm`` on ``device="cuda"`` (under numba's
simulator without a GPU): the same values and gradients as on the CPU, from the ops they are
made of. The decompositions raise NotImplementedError naming the function."""

import warnings

import numpy as np
import pytest

import autograd_nb as anb

FUNCTIONS = {
    "tril": lambda x: anb.tril(x, k=-1),
    "trace": lambda x: anb.trace(x),
    "diag": lambda x: anb.diag(anb.diagonal(x, offset=1)),
    "kron": lambda x: anb.kron(x[0], x),
    "tensordot": lambda x: anb.tensordot(x, x, axes=([0], [1])),
    "cross": lambda x: anb.cross(x, x[::-1]),
    "norm": lambda x: anb.linalg.norm(x) + anb.linalg.norm(x, ord=3, axis=0).sum(),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_matches_the_cpu(name):
    function = FUNCTIONS[name]
    x = np.random.default_rng(0).standard_normal((3, 3))
    results = []
    for device in ("cpu", "cuda"):
        t = anb.tensor(x, requires_grad=True, device=device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            y = function(t)
        (g,) = anb.grad(y.sum(), t)
        assert y.device == device
        results.append((y.cpu().numpy(), g.cpu().numpy()))
    (y_cpu, g_cpu), (y_cuda, g_cuda) = results
    np.testing.assert_allclose(y_cuda, y_cpu, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g_cuda, g_cpu, rtol=1e-12, atol=1e-12)


def test_decompositions_raise_naming_the_function():
    x = anb.tensor(np.eye(2), device="cuda")
    for name in ("solve", "inv", "det", "slogdet", "cholesky", "eigh", "svd", "qr", "pinv"):
        function = getattr(anb.linalg, name)
        args = (x, x) if name == "solve" else (x,)
        with pytest.raises(NotImplementedError, match=f"linalg.{name} "):
            function(*args)
