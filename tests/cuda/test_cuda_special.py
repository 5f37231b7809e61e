"""``anb.special`` and the elementwise composites of issue 21 on ``device="cuda"`` against the
CPU: forward, VJP and, for a few, the differentiable rules (``create_graph=True``). The CUDA
kernels are generated from the same formulas, and the scalar functions (digamma, erfinv, ...)
compiled from the same Python source (cuda/_kernels.py); elementwise ops of the registry are
checked in test_cuda_ops.py."""

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb.ops.registry import REGISTRY

#: The special functions of an order (not differentiable) and x, with an order each.
ORDERED = {"jn": 3, "yn": 2, "iv": 2.5, "ive": 1, "polygamma": 1}


def sample(low, high, shape=(2, 3), seed=0):
    return np.random.default_rng(seed).uniform(low, high, size=shape)


SPECIAL = ("erf erfc erfinv gammaln digamma logit ndtr log_ndtr i0 i1 expit gamma rgamma "
           "gammasgn erfcinv psi j0 j1 y0 y1").split()
#: The functions of several arguments, on samples of their domains (shape parameters over a
#: range that takes the series and the continued fractions), broadcasting.
SHAPES = {
    "beta": [sample(0.3, 4, (2, 1)), sample(0.3, 4, (3,), 1)],
    "betaln": [sample(0.3, 40, (2, 3)), sample(0.3, 40, (3,), 1)],
    "gammainc": [sample(0.5, 30, (2, 3)), sample(0.1, 40, (2, 3), 1)],
    "gammaincc": [sample(0.5, 30, (2, 1)), sample(0.1, 40, (3,), 1)],
    "betainc": [sample(0.5, 30, (2, 3)), sample(0.5, 30, (3,), 1), sample(0.05, 0.95, (2, 3), 2)],
}


def run(function, arrays, device, create_graph=False):
    tensors = [anb.tensor(a, requires_grad=True, device=device) for a in arrays]
    y = function(*tensors)
    v = anb.tensor(np.random.default_rng(1).standard_normal(y.shape), device=device)
    grads = anb.grad(y, tensors, grad_outputs=v, create_graph=create_graph)
    if create_graph:
        grads = anb.grad(sum(g.sum() for g in grads), tensors)
    return [y.cpu().numpy()] + [g.cpu().numpy() for g in grads]


def assert_same(function, arrays, rtol=1e-10, create_graph=False):
    cuda = run(function, arrays, "cuda", create_graph)
    cpu = run(function, arrays, "cpu", create_graph)
    for a, b in zip(cuda, cpu, strict=True):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("name", SPECIAL)
def test_special_functions_match_the_cpu(name):
    low, high = REGISTRY[{"expit": "sigmoid", "psi": "digamma"}.get(name, name)].domain
    assert_same(getattr(anb.special, name), [sample(low, high)])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_functions_of_shape_parameters_match_the_cpu(name):
    assert_same(getattr(anb.special, name), SHAPES[name])


def test_multigammaln_matches_the_cpu():
    assert_same(lambda a: anb.special.multigammaln(a, 3), [sample(1.5, 5)])


@pytest.mark.parametrize("name", sorted(ORDERED))
def test_functions_of_an_order_match_the_cpu(name):
    low, high = REGISTRY[name].domain
    function = getattr(anb.special, name)
    assert_same(lambda x: function(ORDERED[name], x), [sample(max(low, 0.1), high)])


def test_negative_arguments_and_broadcasting():
    assert_same(anb.special.digamma, [np.array([-0.6, -2.5, -0.1, 12.5])])
    assert_same(anb.special.gammaln, [np.array([-0.6, -2.5, 0.3, 180.0])])
    assert_same(lambda x: anb.special.polygamma(np.array([[0], [2]]), x),
                [np.array([-1.5, 0.7, 3.0])])
    assert_same(anb.special.xlogy, [sample(0.2, 3, (2, 1)), sample(0.2, 3, (3,), 1)])


@pytest.mark.parametrize("name", ["gammaln", "i1", "log_ndtr", "gamma", "erfcinv", "j1", "y1"])
def test_differentiable_rules_match_the_cpu(name):
    low, high = REGISTRY[name].domain
    assert_same(getattr(anb.special, name), [sample(low, high)], create_graph=True)


def test_shape_derivatives_differentiate_in_x_and_raise_in_a_on_the_device():
    a, x = sample(0.5, 5), sample(0.1, 6, seed=1)
    assert_same(lambda t: anb.special.gammainc(anb.tensor(a, device=t.device), t), [x],
                create_graph=True)
    results = []
    for device in ("cuda", "cpu"):
        ta, tx = (anb.tensor(v, requires_grad=True, device=device) for v in (a, x))
        (ga,) = anb.grad(anb.special.gammainc(ta, tx).sum(), ta, create_graph=True)
        (mixed,) = anb.grad(ga.sum(), tx, retain_graph=True)
        results.append([ga.cpu().numpy(), mixed.cpu().numpy()])
        with pytest.raises(NotImplementedError, match="the derivative of dgammainc/da"):
            anb.grad(ga.sum(), ta)
    for on_device, on_cpu in zip(*results, strict=True):
        np.testing.assert_allclose(on_device, on_cpu, rtol=1e-10)


COMPOSITES = {
    "exp2": [sample(-2, 2)],
    "logaddexp2": [sample(-2, 2), sample(-2, 2, (3,), 1)],
    "reciprocal": [sample(0.5, 2)],
    "sinc": [np.array([[0.0, 0.3, -1.7], [2.2, -0.4, 1.1]])],
    "fabs": [sample(-2, 2)],
    "mod": [sample(-2, 2), sample(0.5, 2, (3,), 1)],
    "deg2rad": [sample(-200, 200)],
    "rad2deg": [sample(-2, 2)],
    "nan_to_num": [np.array([[np.nan, 0.3, -np.inf], [np.inf, -0.4, 1.1]])],
    "ceil": [sample(-20, 20)],
    "trunc": [sample(-20, 20)],
    "round": [sample(-20, 20)],
    "fmax": [np.array([[np.nan, 0.3, -1.7], [2.2, np.nan, 1.1]]), sample(-2, 2, (3,), 1)],
    "heaviside": [np.array([[0.0, 0.3, -1.7], [2.2, 0.0, -1.1]]), sample(0, 1, (3,), 1)],
}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composites_match_the_cpu(name):
    assert_same(getattr(anb, name), COMPOSITES[name])


def test_scipys_bessel_functions_are_cpu_only_and_nan_where_kernels_would_call_them():
    # (their scalars call SciPy's compiled code: ops/_scalar_bessel.py's DEVICE_STANDINS)
    x = np.array([0.5, 3.0])
    for name, args in (("jv", (2.5,)), ("kve", (1.0,)), ("k0", ()), ("i1e", ())):
        with pytest.raises(NotImplementedError, match=f"the op '{name}' has no CUDA"):
            getattr(anb.special, name)(*args, anb.tensor(x, device="cuda"))
    t = anb.tensor(x, device="cuda")
    assert np.isnan(anb.special.jn(2.5, t).cpu().numpy()).all()
    assert np.isnan(anb.special.iv(-2.5, t).cpu().numpy()).all()
    assert np.isnan(anb.special.ive(-2.5, t).cpu().numpy()).all()
    assert anb.special.iv(-2.5, anb.tensor([0.0], device="cuda")).item() == np.inf
    assert_same(lambda u: anb.special.jn(2.0, u), [x])
    assert_same(lambda u: anb.special.iv(-2.0, u), [x])
