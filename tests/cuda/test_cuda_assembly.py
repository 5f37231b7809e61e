"""The composites of ops/assembly.py, ops/reductions_more.py and ops/numeric.py (and
``logsumexp``'s weights) on ``device="cuda"`` (under numba's simulator without a GPU): the
same values, and gradients
through the differentiable rules (``create_graph``), as on the CPU. They read values on the
host only to work out index arrays, masks and constants, which go back to the device. (The
VJP kernels of the ops they are made of are checked op by op in test_cuda_ops.py.)"""

import numpy as np
import pytest

import autograd_nb as anb

X = np.random.default_rng(0).standard_normal((3, 4))
X[1, 2] = 0.0  # cumprod's gradient at a zero
WEIGHTS = np.arange(1.0, 5.0)

FUNCTIONS = {
    "pad constant": lambda t: anb.pad(t, 1, constant_values=2.0),
    "pad reflect": lambda t: anb.pad(t, (1, 2), mode="reflect"),
    "sort": lambda t: anb.sort(t, axis=0),
    "repeat": lambda t: anb.repeat(t, [1, 0, 2, 1], axis=1),
    "tile": lambda t: anb.tile(t, (2, 1)),
    "roll": lambda t: anb.roll(t, 5),
    "take_along_axis": lambda t: anb.take_along_axis(t, np.argsort(X, axis=1), axis=1),
    "take": lambda t: anb.take(t, [1, 3], axis=1),
    "diff": lambda t: anb.diff(t, axis=0, prepend=0.5),
    "stacks and splits": lambda t: (
        anb.column_stack(anb.vsplit(anb.vstack([t, t[0]]), 2)[1:])
        + anb.hstack(anb.array_split(t[0], 3))
    ),
    "flips": lambda t: anb.rot90(anb.moveaxis(t, 0, 1)).flatten("F"),
    "r_": lambda t: anb.r_[t[0], 1.0, t[1]],
    "cumprod": lambda t: anb.cumprod(t, axis=1),
    "nan reductions": lambda t: anb.nansum(t, axis=1) + anb.nanmean(t, axis=1),
    "average": lambda t: anb.average(t, axis=1, weights=WEIGHTS),
    "ptp": lambda t: anb.ptp(t, axis=0),
    "logsumexp": lambda t: anb.logsumexp(t, axis=1, b=WEIGHTS, return_sign=True)[0],
    # ops/numeric.py, and the angle conversions
    "gradient": lambda t: anb.stack(anb.gradient(t, 0.5, np.cumsum(WEIGHTS), edge_order=2)),
    "gradient in coordinates": lambda t: anb.gradient(X, 2.0 + anb.cumsum(t[0] ** 2), axis=1),
    "linspace": lambda t: anb.linspace(t, 2.0, 4, axis=1),
    "logspace": lambda t: anb.logspace(t[0], t[1], 3, base=2.0),
    "geomspace": lambda t: anb.geomspace(t * t + 1.0, 5.0, 3),
    "angles": lambda t: anb.radians(t) + anb.degrees(t) + anb.deg2rad(t) + anb.rad2deg(t),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_matches_the_cpu(name):
    function = FUNCTIONS[name]
    v = np.random.default_rng(1).standard_normal(function(anb.tensor(X)).shape)
    results = []
    for device in ("cpu", "cuda"):
        t = anb.tensor(X, requires_grad=True, device=device)
        y = function(t)
        assert y.device == device
        seed = anb.tensor(v, device=device)
        (g,) = anb.grad(y, t, grad_outputs=seed, create_graph=True)
        results.append([r.cpu().numpy() for r in (y, g)])
    for got, want in zip(results[1], results[0]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
