"""Fused elementwise VJP chains on the GPU (``autograd_nb.cuda.fusion``).

Every case runs three ways, fused on the device, unfused on the device
(``config.CUDA_FUSE_BACKWARD = False``) and on the CPU, and the gradients must agree. Launches
are counted, so a test fails if the chain silently runs op by op: a fused run must launch the
expected fused kernels and no per-node VJP of the ops inside them.
"""

import collections

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb import config
from autograd_nb.cuda import dispatch
from autograd_nb.cuda import fusion as cuda_fusion

SIZE = 12  # tiny: each simulated CUDA thread is a Python thread


@pytest.fixture(autouse=True)
def small_launches(monkeypatch):
    monkeypatch.setattr(config, "CUDA_FUSION_MIN_ELEMENTS", 4)
    monkeypatch.setattr(config, "CUDA_THREADS_PER_BLOCK", 8)


@pytest.fixture
def launches(monkeypatch):
    """Counts: ``"fused"`` kernels run, and per-node device VJPs by op name."""
    counts = collections.Counter()
    run_group, vjp, vjp_batched = cuda_fusion.run_group, dispatch.vjp, dispatch.vjp_batched

    def counting_run_group(group, *args, **kwargs):
        counts["fused"] += 1
        counts["fused nodes"] += len(group.nodes)
        return run_group(group, *args, **kwargs)

    def counting_vjp(op, *args):
        counts[op.name] += 1
        return vjp(op, *args)

    def counting_vjp_batched(op, *args):
        counts[op.name] += 1
        return vjp_batched(op, *args)

    monkeypatch.setattr(cuda_fusion, "run_group", counting_run_group)
    monkeypatch.setattr(dispatch, "vjp", counting_vjp)
    monkeypatch.setattr(dispatch, "vjp_batched", counting_vjp_batched)
    return counts


def values(seed, dtype=np.float64, low=-0.9, high=0.9):
    return np.random.default_rng(seed).uniform(low, high, SIZE).astype(dtype)


def gradients(function, arrays, device, seed=7):
    """``grad(function(*leaves), leaves, v)`` on ``device``, as NumPy arrays."""
    leaves = [anb.tensor(a, device=device, requires_grad=True) for a in arrays]
    output = function(*leaves)
    v = anb.tensor(values(seed, output.dtype).reshape(output.shape), device=device)
    grads = anb.grad(output, leaves, grad_outputs=v)
    return [g.cpu().numpy() for g in grads]


def three_ways(monkeypatch, launches, function, arrays, tolerance=1e-12):
    """Gradients fused (returned) after checking them against unfused and CPU ones;
    ``launches`` counts the fused run alone."""
    with monkeypatch.context() as patch:
        patch.setattr(config, "CUDA_FUSE_BACKWARD", False)
        unfused = gradients(function, arrays, "cuda")
    on_cpu = gradients(function, arrays, "cpu")
    launches.clear()
    fused = gradients(function, arrays, "cuda")
    for a, b, c in zip(fused, unfused, on_cpu, strict=True):
        np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance)
        np.testing.assert_allclose(a, c, rtol=tolerance, atol=tolerance)
    return fused


# -- chains ------------------------------------------------------------------------------------


def scalar_constants(x):
    return (x * 0.9 + 0.1) * 2.0 - 0.3


def unary_ops(x):
    return anb.sigmoid(anb.exp(anb.tanh(anb.sin(x)) * 0.5)) + anb.square(anb.cos(x))


def clipped(x):
    return anb.log1p(anb.clip(anb.sqrt(x * x + 1.0), 1.05, 1.3))


CHAINS = [
    # (function, fused launches, nodes in fused chains)
    (scalar_constants, 1, 4),
    # The add has two inputs that need a gradient: not fusable, it heads no chain. Fused:
    # sigmoid <- exp <- multiply <- tanh <- sin and square <- cos.
    (unary_ops, 2, 7),
    # x * x reads x twice (both inputs wanted): not fusable; the rest is one chain.
    (clipped, 1, 4),
]


@pytest.mark.parametrize("function, groups, nodes", CHAINS, ids=[c[0].__name__ for c in CHAINS])
def test_fused_chain_matches_unfused_and_cpu(monkeypatch, launches, function, groups, nodes):
    three_ways(monkeypatch, launches, function, [values(1)])
    assert launches["fused"] == groups
    assert launches["fused nodes"] == nodes


def test_no_per_node_vjp_runs_inside_a_fused_chain(launches):
    gradients(scalar_constants, [values(1)], "cuda")
    assert launches["fused"] == 1
    assert launches["multiply"] == launches["add"] == launches["subtract"] == 0


def test_disabled_fusion_runs_every_vjp_on_its_own(monkeypatch, launches):
    monkeypatch.setattr(config, "CUDA_FUSE_BACKWARD", False)
    gradients(scalar_constants, [values(1)], "cuda")
    assert launches["fused"] == 0
    assert (launches["multiply"], launches["add"], launches["subtract"]) == (2, 1, 1)


def test_small_buffers_are_not_fused(monkeypatch, launches):
    monkeypatch.setattr(config, "CUDA_FUSION_MIN_ELEMENTS", SIZE + 1)
    gradients(scalar_constants, [values(1)], "cuda")
    assert launches["fused"] == 0


def test_a_second_consumer_breaks_the_chain(monkeypatch, launches):
    def function(x):
        h = anb.tanh(x * 0.5)
        return anb.exp(h) * 1.5 + h  # h feeds exp and the add

    three_ways(monkeypatch, launches, function, [values(2)])
    # multiply(1.5) <- exp stops at h; tanh <- multiply(0.5) runs into x; the add is alone.
    assert launches["fused"] == 2
    assert launches["fused nodes"] == 4
    assert launches["add"] == 2 and launches["tanh"] == launches["exp"] == 0


def test_chain_ending_at_an_intermediate_node(monkeypatch, launches):
    def function(x, w):
        h = x * w  # both inputs need a gradient: h's VJP runs unfused
        return anb.exp(anb.sin(h) * 0.5)

    three_ways(monkeypatch, launches, function, [values(3), values(4)])
    assert launches["fused"] == 1 and launches["fused nodes"] == 3
    assert launches["multiply"] == 2  # h's two VJPs, none from the chain's multiply


def test_broadcast_operand_stops_fusion_at_that_node(monkeypatch, launches):
    def function(x, row):
        return anb.tanh(anb.exp(x * 0.5).reshape(3, 4) * row)  # row: shape (4,)

    three_ways(monkeypatch, launches, function, [values(5), values(6)[:4]])
    # tanh <- multiply(row) reads a (4,)-shaped operand: the multiply is not fusable.
    assert launches["fused"] == 1 and launches["fused nodes"] == 2


def test_retain_grad_breaks_the_chain_and_gets_its_gradient(monkeypatch, launches):
    def run(device):
        x = anb.tensor(values(8), device=device, requires_grad=True)
        h = anb.sin(x * 0.5)
        h.retain_grad()
        y = anb.exp(h) * 2.0
        y.backward(anb.tensor(values(9), device=device))
        return x.grad.cpu().numpy(), h.grad.cpu().numpy()

    fused = run("cuda")
    assert launches["fused"] == 2 and launches["fused nodes"] == 4
    with monkeypatch.context() as patch:
        patch.setattr(config, "CUDA_FUSE_BACKWARD", False)
        unfused = run("cuda")
    for a, b, c in zip(fused, unfused, run("cpu")):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(a, c, rtol=1e-12, atol=1e-12)


def test_float32(monkeypatch, launches):
    arrays = [values(10, np.float32)]
    (grad,) = three_ways(monkeypatch, launches, clipped, arrays, tolerance=1e-6)
    assert grad.dtype == np.float32
    assert launches["fused"] == 1


def test_float32_leaf_under_a_float64_chain(monkeypatch, launches):
    def function(x):
        return anb.exp(anb.tanh(x * np.float64(0.5)) * anb.ones(SIZE, device=x.device))

    (grad,) = three_ways(monkeypatch, launches, function, [values(11, np.float32)], tolerance=1e-6)
    assert grad.dtype == np.float32
    assert launches["fused"] == 1


# -- backward(), graphs, batches, devices ------------------------------------------------------


def test_backward_accumulates_and_frees_the_whole_chain(launches):
    x = anb.tensor(values(12), device="cuda", requires_grad=True)
    y = anb.sum(anb.exp(anb.tanh(x) * 0.5))
    y.backward(retain_graph=True)
    first = x.grad.cpu().numpy()
    y.backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), 2 * first, rtol=1e-12)
    assert launches["fused"] == 2
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()
    on_cpu = anb.tensor(values(12), requires_grad=True)
    anb.sum(anb.exp(anb.tanh(on_cpu) * 0.5)).backward()
    np.testing.assert_allclose(first, on_cpu.grad.numpy(), rtol=1e-12)


def test_every_freed_node_of_a_chain_is_marked(launches):
    x = anb.tensor(values(13), device="cuda", requires_grad=True)
    h = anb.tanh(x)
    y = anb.exp(h * 0.5)
    anb.grad(y, x, grad_outputs=anb.ones_like(y))
    assert launches["fused"] == 1
    nodes = [y.grad_fn, y.grad_fn.next_functions[0], h.grad_fn]
    assert all(node.freed for node in nodes)


def test_batched_vjps_fuse_with_the_batch_as_grid_rows(monkeypatch, launches):
    def jacobian_rows(device):
        x = anb.tensor(values(14), device=device, requires_grad=True)
        y = anb.exp(anb.tanh(x * 0.5) + 0.25)
        (rows,) = anb.grad(y, x, anb.eye(SIZE, device=device), is_grads_batched=True)
        return rows.cpu().numpy()

    fused = jacobian_rows("cuda")
    assert launches["fused"] == 1
    with monkeypatch.context() as patch:
        patch.setattr(config, "CUDA_FUSE_BACKWARD", False)
        unfused = jacobian_rows("cuda")
    np.testing.assert_allclose(fused, unfused, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fused, jacobian_rows("cpu"), rtol=1e-12, atol=1e-12)


def test_chain_behind_a_transfer_fuses_with_a_host_seed(launches):
    x = anb.tensor(values(15), requires_grad=True)
    loss = anb.sum(anb.exp(x.cuda() * 0.9 + 0.1).cpu())
    loss.backward()
    assert launches["fused"] == 1
    np.testing.assert_allclose(x.grad.numpy(), 0.9 * np.exp(values(15) * 0.9 + 0.1),
                               rtol=1e-12)


def test_create_graph_is_not_fused(launches):
    x = anb.tensor(values(16), device="cuda", requires_grad=True)
    y = anb.exp(anb.tanh(x) * 0.5)
    (g,) = anb.grad(y, x, grad_outputs=anb.ones_like(y), create_graph=True)
    assert launches["fused"] == 0 and g.requires_grad


# -- kernel cache ------------------------------------------------------------------------------


def test_repeated_backward_reuses_the_kernel_without_regenerating(monkeypatch, launches):
    monkeypatch.setattr(cuda_fusion, "_kernels_by_chain", {})
    generated = []
    source = cuda_fusion.fused_source

    def counting_source(chain, overwrite=False):
        generated.append(chain)
        return source(chain, overwrite)

    monkeypatch.setattr(cuda_fusion, "fused_source", counting_source)
    for seed in (17, 18, 19):  # a training loop: a new graph of the same structure each time
        gradients(clipped, [values(seed)], "cuda")
    assert len(generated) == 1
    assert launches["fused"] == 3
    (key,) = cuda_fusion._kernels_by_chain
    kernel = cuda_fusion._kernels_by_chain[key]
    # The same chain gives the same module: a cleared process cache finds it again.
    cuda_fusion._kernels_by_chain.clear()
    assert cuda_fusion.kernel_for(*key) is kernel


def test_generated_source_reads_scalars_at_zero_and_takes_params():
    from autograd_nb.ops.registry import REGISTRY

    chain = ((REGISTRY["clip"], 0, ("full",), "float64"),
             (REGISTRY["multiply"], 0, ("scalar",), None))
    source = cuda_fusion.fused_source(chain)
    assert "def fused(g, o0, o1, target, params, batch, n):" in source
    assert "a_min_0 = params[0]" in source and "a_max_0 = params[1]" in source
    assert "x_0 = o0[i_]" in source and "b_1 = o1[0]" in source
    assert "target[b_ * n + i_] += g_2" in source
    # into a fresh buffer (the chain writes all of it): stored, with no zero fill before
    assert "target[b_ * n + i_] = g_2" in cuda_fusion.fused_source(chain, overwrite=True)


def test_a_fresh_target_is_stored_into_and_a_used_one_added_into(launches):
    # x's buffer is fresh for the chain (x * x recorded first, so its VJP runs last) or
    # already holds x * x's contribution (recorded last, its VJP runs first)
    def function(x, square_first):
        if square_first:
            square = x * x
            return anb.exp(anb.tanh(x) * 0.5) * 2.0 + square
        chain = anb.exp(anb.tanh(x) * 0.5) * 2.0
        return chain + x * x

    x0 = values(21)
    x = anb.tensor(x0, requires_grad=True)
    (expected,) = anb.grad(function(x, True), x, grad_outputs=anb.ones(SIZE))
    for square_first in (True, False):
        x = anb.tensor(x0, device="cuda", requires_grad=True)
        y = function(x, square_first)
        (g,) = anb.grad(y, x, grad_outputs=anb.ones_like(y))
        np.testing.assert_allclose(g.cpu().numpy(), expected.numpy(), rtol=1e-12)
    assert launches["fused"] == 2


def float32_chain(x):
    return anb.tanh(anb.exp(anb.tanh(anb.tanh(x) * 0.7) * 1.3) - 0.5)


def sources_generated(monkeypatch):
    """The fused kernels' sources generated from here on (none is taken from the table)."""
    sources = []
    generate = cuda_fusion.fused_source

    def keeping(chain, overwrite=False):
        sources.append(generate(chain, overwrite))
        return sources[-1]

    monkeypatch.setattr(cuda_fusion, "_kernels_by_chain", {})
    monkeypatch.setattr(cuda_fusion, "fused_source", keeping)
    return sources


@pytest.mark.parametrize("batch", [None, 3])
def test_float32_stages_round_as_the_unfused_buffers_and_give_their_bits(monkeypatch,
                                                                         launches, batch):
    # Each stage but the last rounds to float32, as the node's own VJP kernel stores it into
    # the next gradient buffer. (The simulator computes float32 formulas in float32, so the
    # bits agree there either way; on a GPU, numba computes ``g * (1 - y * y)`` in float64.)
    sources = sources_generated(monkeypatch)
    x = anb.tensor(values(12, np.float32), device="cuda", requires_grad=True)
    y = float32_chain(x)
    rng = np.random.default_rng(5)
    lead = () if batch is None else (batch,)
    v = anb.tensor(rng.uniform(-1, 1, lead + y.shape).astype(np.float32), device="cuda")
    batched = batch is not None
    (fused,) = anb.grad(y, x, grad_outputs=v, is_grads_batched=batched, retain_graph=True)
    assert launches["fused"] == 1 and launches["fused nodes"] == 7
    monkeypatch.setattr(config, "CUDA_FUSE_BACKWARD", False)
    (unfused,) = anb.grad(y, x, grad_outputs=v, is_grads_batched=batched)
    fused, unfused = fused.cpu().numpy(), unfused.cpu().numpy()
    assert fused.dtype == np.float32
    np.testing.assert_array_equal(fused.view(np.uint32), unfused.view(np.uint32))
    (source,) = sources
    stages = [line.strip() for line in source.splitlines() if line.strip().startswith("g_")]
    assert len(stages) == 8  # the head's gradient, then seven stages
    assert all(line.split(" = ", 1)[1].startswith("np.float32(") for line in stages[1:-1])
    assert not stages[-1].split(" = ", 1)[1].startswith("np.")


def test_a_mixed_chain_rounds_each_stage_to_its_buffers_dtype(monkeypatch, launches):
    # float64 nodes over a float32 leaf: the stages round to float64 (the buffers between the
    # nodes), the last adds into the float32 target.
    sources = sources_generated(monkeypatch)
    x = anb.tensor(values(13, np.float32), device="cuda", requires_grad=True)
    y = anb.exp(anb.tanh(x * np.float64(0.5)) * 1.5)
    anb.grad(y, x, grad_outputs=anb.ones(SIZE, device="cuda"))
    (source,) = sources
    assert "np.float64(" in source and "np.float32(" not in source
