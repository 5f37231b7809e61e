"""grad(..., is_grads_batched=True): a batch of VJPs equals the stacked single VJPs, whatever
the ops, shapes, broadcasting and thread count."""

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import autograd_nb as anb
from autograd_nb import config
from autograd_nb.ops.registry import REGISTRY

ELEMENTWISE_UNARY = sorted(
    n for n, op in REGISTRY.items()
    if op.family == "elementwise" and op.n_inputs == 1 and n != "clip"
)


@pytest.fixture(params=["prange", "rows"])
def batched_path(request, monkeypatch):
    """Run a test through the parallel batched kernels and through the row-by-row path."""
    threshold = 0 if request.param == "prange" else 1 << 62
    monkeypatch.setattr(config, "PARALLEL_MIN_ELEMENTS", threshold)
    return request.param


def stacked_single_vjps(y, inputs, v):
    rows = [anb.grad(y, inputs, grad_outputs=anb.tensor(row), retain_graph=True,
                     allow_unused=True) for row in v]
    return [np.stack([r[i].numpy() for r in rows]) for i in range(len(inputs))]


def check_batched(y, inputs, v):
    batched = anb.grad(y, inputs, grad_outputs=anb.tensor(v), is_grads_batched=True,
                       retain_graph=True)
    expected = stacked_single_vjps(y, inputs, v)
    for got, want, x in zip(batched, expected, inputs):
        assert got.shape == (len(v),) + x.shape
        assert got.dtype == x.dtype
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ELEMENTWISE_UNARY)
def test_every_elementwise_batched_vjp(name, batched_path):
    op = REGISTRY[name]
    rng = np.random.default_rng(0)
    low, high = op.domain
    x = anb.tensor(rng.uniform(low, high, size=(3, 4)), requires_grad=True)
    y = getattr(anb, name)(x)
    check_batched(y, [x], rng.standard_normal((5, 3, 4)))


@settings(max_examples=15, deadline=None)
@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
    batch=st.integers(1, 4),
    seed=st.integers(0, 2**16),
)
def test_broadcasting_binary_chain(shapes, batch, seed):
    rng = np.random.default_rng(seed)
    a = anb.tensor(rng.uniform(0.5, 2, size=shapes.input_shapes[0]), requires_grad=True)
    b = anb.tensor(rng.uniform(0.5, 2, size=shapes.input_shapes[1]), requires_grad=True)
    y = anb.tanh(a * b + a / b) ** 2
    previous = config.PARALLEL_MIN_ELEMENTS
    config.PARALLEL_MIN_ELEMENTS = 0 if seed % 2 else 1 << 62  # both paths
    try:
        check_batched(y, [a, b], rng.standard_normal((batch,) + y.shape))
    finally:
        config.PARALLEL_MIN_ELEMENTS = previous


def test_mlp_jacobian_through_matmul_and_reductions(batched_path):
    rng = np.random.default_rng(1)
    w1 = anb.tensor(rng.standard_normal((6, 5)), requires_grad=True)
    x = anb.tensor(rng.standard_normal(5), requires_grad=True)
    h = anb.tanh(w1 @ x)
    y = anb.reshape(h, (2, 3)).sum(axis=0) * h[:3]
    check_batched(y, [w1, x], np.eye(3))


def test_several_outputs_and_float32():
    rng = np.random.default_rng(2)
    x = anb.tensor(rng.standard_normal(4).astype(np.float32), requires_grad=True)
    y1, y2 = anb.sin(x), anb.exp(x) * 2
    v1 = rng.standard_normal((3, 4)).astype(np.float32)
    v2 = rng.standard_normal((3, 4)).astype(np.float32)
    (g,) = anb.grad((y1, y2), x, grad_outputs=(anb.tensor(v1), anb.tensor(v2)),
                    is_grads_batched=True)
    assert g.dtype == np.float32
    want = v1 * np.cos(x.numpy()) + v2 * 2 * np.exp(x.numpy())
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-5)


def test_allow_unused_materialize_and_retain_graph():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    unused = anb.tensor([3.0], requires_grad=True)
    y = anb.exp(x)
    v = np.ones((4, 2))
    gx, gu = anb.grad(y, (x, unused), grad_outputs=anb.tensor(v), is_grads_batched=True,
                      materialize_grads=True, retain_graph=True)
    np.testing.assert_array_equal(gu.numpy(), np.zeros((4, 1)))
    np.testing.assert_allclose(gx.numpy(), np.tile(np.exp([1.0, 2.0]), (4, 1)))
    gx, gu = anb.grad(y, (x, unused), grad_outputs=anb.tensor(v), is_grads_batched=True,
                      allow_unused=True)
    assert gu is None
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        anb.grad(y, x, grad_outputs=anb.tensor(v), is_grads_batched=True)


def test_create_graph_gives_a_differentiable_batch():
    x = anb.tensor([0.5, 1.5], requires_grad=True)
    y = x**3
    (g,) = anb.grad(y, x, grad_outputs=anb.tensor(np.eye(2)), is_grads_batched=True,
                    create_graph=True)
    np.testing.assert_allclose(g.numpy(), np.diag(3 * x.numpy() ** 2))
    (gg,) = anb.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), 6 * x.numpy())


def test_one_and_two_threads_give_identical_results(monkeypatch):
    monkeypatch.setattr(config, "PARALLEL_MIN_ELEMENTS", 0)
    rng = np.random.default_rng(3)
    x = anb.tensor(rng.standard_normal((16, 8)), requires_grad=True)
    y = anb.tanh(x * 1.5) + anb.sigmoid(x)
    v = anb.tensor(rng.standard_normal((32, 16, 8)))
    previous = numba.get_num_threads()
    results = []
    try:
        for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
            numba.set_num_threads(threads)
            (g,) = anb.grad(y, x, grad_outputs=v, is_grads_batched=True, retain_graph=True)
            results.append(g.numpy())
    finally:
        numba.set_num_threads(previous)
    np.testing.assert_array_equal(results[0], results[1])


def test_batched_errors_name_shapes_and_sizes():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y1, y2 = x * 2, x * 3
    with pytest.raises(RuntimeError, match=r"is_grads_batched.*\(3, 3\).*\(2,\)"):
        anb.grad(y1, x, grad_outputs=anb.ones((3, 3)), is_grads_batched=True)
    with pytest.raises(RuntimeError, match=r"same batch size.*\[2, 3\]"):
        anb.grad((y1, y2), x, grad_outputs=(anb.ones((2, 2)), anb.ones((3, 2))),
                 is_grads_batched=True)
    with pytest.raises(RuntimeError, match="is_grads_batched"):
        anb.grad(y1.sum(), x, is_grads_batched=True)


REDUCTIONS = sorted(n for n, op in REGISTRY.items() if op.family == "reduction")


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("axis", [None, 1, (0, 2)])
def test_every_reduction_batched_vjp(name, axis, batched_path):
    if REGISTRY[name].single_axis and not isinstance(axis, int):
        axis = -1
    rng = np.random.default_rng(4)
    x = anb.tensor(rng.uniform(0.5, 1.5, size=(2, 3, 4)), requires_grad=True)
    y = getattr(anb, name)(x, axis=axis)
    check_batched(y, [x], rng.standard_normal((5,) + y.shape))
