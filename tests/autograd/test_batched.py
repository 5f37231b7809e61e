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
from autograd_nb.ops.registry import call as registry_call

ELEMENTWISE_UNARY = sorted(
    n for n, op in REGISTRY.items()
    if op.family == "elementwise" and op.n_inputs == 1 and n != "clip"
)


@pytest.fixture(params=["compiled", "prange", "rows"])
def batched_path(request, monkeypatch):
    """Run a test through the compiled executor's batched run, and through the Python walk's
    batched kernels: the parallel ones and the row-by-row ones."""
    if request.param != "compiled":
        monkeypatch.setattr(config, "COMPILED_BACKWARD", False)
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
    # (an internal op, ``_std_root``, has no public function)
    y = registry_call(name, x) if name.startswith("_") else getattr(anb, name)(x)
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


# -- the Jacobian of an MLP: one-hot rows, GEMMs into the gradient, buffers passed on -----------


def mlp_data(seed, sizes=(12, 16, 8), dtype=np.float64):
    n_in, hidden, n_out = sizes
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal(n_in).astype(dtype),
        "W1": (rng.standard_normal((hidden, n_in)) * n_in**-0.5).astype(dtype),
        "b1": (rng.standard_normal(hidden) * 0.1).astype(dtype),
        "W2": (rng.standard_normal((n_out, hidden)) * hidden**-0.5).astype(dtype),
        "b2": (rng.standard_normal(n_out) * 0.1).astype(dtype),
    }


def mlp(x, W1, b1, W2, b2):
    return anb.tanh(W2 @ anb.tanh(W1 @ x + b1) + b2)


def mlp_jacobian_closed_form(x, W1, b1, W2, b2):
    h = np.tanh(W1 @ x + b1)
    y = np.tanh(W2 @ h + b2)
    return ((1 - y**2)[:, None] * W2) @ ((1 - h**2)[:, None] * W1)


def batched_mlp_grad(data, v):
    x = anb.tensor(data["x"], requires_grad=True)
    params = {name: anb.tensor(value) for name, value in data.items() if name != "x"}
    y = mlp(x, **params)
    (g,) = anb.grad(y, x, grad_outputs=anb.tensor(v), is_grads_batched=True, retain_graph=True)
    return g.numpy(), y, x


def finite_difference_jacobian(data, eps=1e-6):
    def f(x):
        return np.tanh(data["W2"] @ np.tanh(data["W1"] @ x + data["b1"]) + data["b2"])

    x = data["x"]
    columns = []
    for i in range(x.size):
        step = np.zeros_like(x)
        step[i] = eps
        columns.append((f(x + step) - f(x - step)) / (2 * eps))
    return np.stack(columns, axis=1)


@pytest.mark.parametrize("seed_kind", ["identity", "scaled permutation", "dense", "mixed"])
def test_mlp_jacobian_rows_equal_single_vjps_and_finite_differences(seed_kind, batched_path):
    # Large enough for BLAS; an identity (or any one-hot) seed reaches the second matmul as
    # one-hot rows (the row-by-row product), a dense or mixed one as a GEMM.
    data = mlp_data(5)
    rng = np.random.default_rng(6)
    n_out = data["W2"].shape[0]
    v = {
        "identity": np.eye(n_out),
        "scaled permutation": np.eye(n_out)[rng.permutation(n_out)] * rng.uniform(1, 2, n_out),
        "dense": rng.standard_normal((5, n_out)),
        "mixed": np.vstack([np.eye(n_out), rng.standard_normal((1, n_out))]),
    }[seed_kind]
    got, y, x = batched_mlp_grad(data, v)
    (want,) = stacked_single_vjps(y, [x], v)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    jacobian = mlp_jacobian_closed_form(**data)
    np.testing.assert_allclose(got, v @ jacobian, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got, v @ finite_difference_jacobian(data), rtol=1e-6, atol=1e-8)


def test_one_hot_rows_give_the_gemm_result_also_with_non_finite_weights():
    # 0 * inf is nan in the GEMM: with a non-finite factor the row-by-row product must not run.
    data = mlp_data(7)
    data["W2"][0, 3] = np.inf
    v = np.eye(data["W2"].shape[0])
    got, y, x = batched_mlp_grad(data, v)
    (want,) = stacked_single_vjps(y, [x], v)
    assert np.isnan(want).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_mlp_jacobian_float32():
    data = mlp_data(8, dtype=np.float32)
    got, y, x = batched_mlp_grad(data, np.eye(8, dtype=np.float32))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, mlp_jacobian_closed_form(**data), rtol=1e-4, atol=1e-5)


def test_mlp_jacobian_one_and_two_threads_identical(monkeypatch):
    monkeypatch.setattr(config, "PARALLEL_MIN_ELEMENTS", 0)
    data = mlp_data(9, sizes=(40, 64, 32))
    previous = numba.get_num_threads()
    results = []
    try:
        for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
            numba.set_num_threads(threads)
            for v in (np.eye(32), np.random.default_rng(10).standard_normal((32, 32))):
                results.append(batched_mlp_grad(data, v)[0])
    finally:
        numba.set_num_threads(previous)
    np.testing.assert_array_equal(results[0], results[2])
    np.testing.assert_array_equal(results[1], results[3])


def test_gradient_used_twice_accumulates_into_the_gemm_target():
    # x reaches the output through two matmuls and an add: the second GEMM adds (beta = 1)
    # into the slot the first one filled, and add's identity VJP passes buffers on.
    rng = np.random.default_rng(11)
    W1, W2 = rng.standard_normal((20, 15)), rng.standard_normal((20, 15))
    x = anb.tensor(rng.standard_normal(15), requires_grad=True)
    y = anb.tanh(anb.tensor(W1) @ x) + anb.tensor(W2) @ x + x[:5].sum()
    for v in (np.eye(20), rng.standard_normal((3, 20))):
        check_batched(y, [x], v)


def test_passed_on_buffers_leave_requested_intermediates_intact():
    # ``h`` is asked for: its gradient must not be the buffer that reshape and add pass on
    # (and then accumulate into) for x.
    rng = np.random.default_rng(12)
    x = anb.tensor(rng.standard_normal((4, 6)), requires_grad=True)
    h = anb.reshape(x, (6, 4)) + 1.0
    y = anb.sin(h) * 2 + anb.reshape(x * x, (6, 4))
    v = rng.standard_normal((3, 6, 4))
    gh, gx = anb.grad(y, (h, x), grad_outputs=anb.tensor(v), is_grads_batched=True,
                      retain_graph=True)
    np.testing.assert_allclose(gh.numpy(), v * 2 * np.cos(h.numpy()), rtol=1e-12)
    want = (v * 2 * np.cos(h.numpy())).reshape(3, 4, 6) + v.reshape(3, 4, 6) * 2 * x.numpy()
    np.testing.assert_allclose(gx.numpy(), want, rtol=1e-12)
    check_batched(y, [x], v)


def test_add_of_an_input_to_itself_passes_one_buffer_on(monkeypatch):
    # x + x: the first input takes the gradient buffer, the second adds into it.
    x = anb.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    y = anb.tanh(anb.reshape(x + x, (3, 2)))
    v = np.random.default_rng(13).standard_normal((4, 3, 2))
    check_batched(y, [x], v)
    monkeypatch.setattr(config, "COMPILED_BACKWARD", False)  # the same walk without a batch
    (g,) = anb.grad(y, x, grad_outputs=anb.tensor(v[0]), retain_graph=True)
    want = (v[0] * (1 - np.tanh(2 * x.numpy().reshape(3, 2)) ** 2)).reshape(2, 3) * 2
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-12)
