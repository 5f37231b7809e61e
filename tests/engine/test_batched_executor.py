"""The compiled executor's batched run: ``grad(..., is_grads_batched=True)`` as one call into
compiled code, a ``prange`` over blocks of batch rows.

Checked against the Python walk's batched kernels (``config.COMPILED_BACKWARD = False``),
against the stacked single VJPs and against closed forms; at one and two threads (the same
bits); with the blocks' edges inside products (``_bmm``'s rows driver) and slots reused or
handed on.
"""

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autograd_nb as anb
from autograd_nb import config
from autograd_nb.engine import executor, machine, plan_cache
from autograd_nb.ops.registry import REGISTRY

from .test_executor import programs, run_program


def count_batched_runs(monkeypatch):
    """The ``parallel`` argument of every ``execute_batched`` call."""
    calls = []
    original = executor.execute_batched

    def counting(*args):
        calls.append(args[-1])
        return original(*args)

    monkeypatch.setattr(executor, "execute_batched", counting)
    return calls


def with_threads(threads, function):
    previous = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        return function()
    finally:
        numba.set_num_threads(previous)


def batched(y, inputs, v, **kwargs):
    grads = anb.grad(y, inputs, grad_outputs=anb.tensor(v), is_grads_batched=True,
                     retain_graph=True, **kwargs)
    return [None if g is None else g.numpy() for g in grads]


def walked(y, inputs, v, monkeypatch, **kwargs):
    with monkeypatch.context() as patch:
        patch.setattr(config, "COMPILED_BACKWARD", False)
        return batched(y, inputs, v, **kwargs)


def single_vjps(y, inputs, v):
    rows = [anb.grad(y, inputs, grad_outputs=anb.tensor(row), retain_graph=True)
            for row in v]
    return [np.stack([r[i].numpy() for r in rows]) for i in range(len(inputs))]


@settings(max_examples=40, deadline=None)
@given(programs(), st.sampled_from(["float64", "float32"]), st.sampled_from([3, 130]))
def test_random_programs_agree_with_the_walk_and_across_thread_counts(steps, dtype, batch):
    rng = np.random.default_rng(len(steps) + batch)
    x0 = rng.uniform(-1, 1, (3, 4)).astype(dtype)
    w0 = rng.uniform(-1, 1, (4,)).astype(dtype)
    v = rng.standard_normal((batch,)).astype(dtype)
    x = anb.tensor(x0, requires_grad=True)
    w = anb.tensor(w0, requires_grad=True)
    loss = run_program(steps, x, w)
    results = {}
    saved = config.FUSION_MIN_ELEMENTS
    try:
        for mode in ("walk", "compiled", "fused"):
            config.COMPILED_BACKWARD = mode != "walk"
            config.FUSE_BACKWARD = mode == "fused"
            config.FUSION_MIN_ELEMENTS = 1
            for threads in (1, 2):
                results[mode, threads] = with_threads(
                    threads, lambda: batched(loss, (x, w), v, materialize_grads=True))
    finally:
        config.COMPILED_BACKWARD, config.FUSE_BACKWARD = True, True
        config.FUSION_MIN_ELEMENTS = saved
    tolerance = 1e-12 if dtype == "float64" else 2e-5
    for i in range(2):
        # Blocks of rows: the same bits at every thread count.
        np.testing.assert_array_equal(results["compiled", 1][i], results["compiled", 2][i])
        np.testing.assert_array_equal(results["fused", 1][i], results["fused", 2][i])
        for mode in ("compiled", "fused"):
            np.testing.assert_allclose(results[mode, 1][i], results["walk", 1][i],
                                       rtol=tolerance, atol=tolerance)


@pytest.mark.compiled_only
def test_a_supported_batch_runs_in_one_compiled_call_with_no_python_vjp(monkeypatch):
    calls = count_batched_runs(monkeypatch)

    def forbidden(*args):
        raise AssertionError("a Python VJP ran")

    for op in REGISTRY.values():
        monkeypatch.setattr(op, "vjp", forbidden)
        monkeypatch.setattr(op, "vjp_batched", forbidden)
    rng = np.random.default_rng(0)
    x = anb.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    w = anb.tensor(rng.standard_normal(4), requires_grad=True)
    y = anb.softmax(anb.tanh(x * w + 1.0) @ anb.transpose(x), axis=1)[1:].sum(axis=0)
    gx, gw = anb.grad(y, (x, w), grad_outputs=anb.tensor(rng.standard_normal((5, 3))),
                      is_grads_batched=True)
    assert len(calls) == 1
    assert gx.shape == (5, 3, 4) and gw.shape == (5, 4)


def test_custom_functions_and_create_graph_take_the_walk(monkeypatch):
    calls = count_batched_runs(monkeypatch)

    class Cube(anb.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x**2

    x = anb.tensor([0.5, 2.0], requires_grad=True)
    v = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 3.0]])
    (g,) = anb.grad(Cube.apply(x), x, grad_outputs=anb.tensor(v), is_grads_batched=True)
    np.testing.assert_allclose(g.numpy(), v * 3 * x.numpy() ** 2)
    (g,) = anb.grad(x**3, x, grad_outputs=anb.tensor(v), is_grads_batched=True,
                    create_graph=True)
    np.testing.assert_allclose(g.numpy(), v * 3 * x.numpy() ** 2)
    assert calls == []


@pytest.mark.parametrize("batch, threads, parallel, blocks", [
    (128, 2, True, 2), (127, 2, False, 1), (128, 1, False, 2), (640, 2, True, 10),
])
@pytest.mark.compiled_only
def test_the_batch_runs_in_blocks_fixed_by_its_size(batch, threads, parallel, blocks,
                                                    monkeypatch):
    if threads > numba.config.NUMBA_NUM_THREADS:
        pytest.skip("numba has fewer threads")  # (not counted as a pass: a skip)
    calls = count_batched_runs(monkeypatch)
    x = anb.tensor(np.linspace(-1, 1, 6), requires_grad=True)
    v = np.random.default_rng(batch).standard_normal((batch, 6))
    (g,) = with_threads(threads, lambda: batched(anb.tanh(x), x, v))
    assert calls == [parallel]
    np.testing.assert_allclose(g, v * (1 - np.tanh(x.numpy()) ** 2), rtol=1e-15)
    assert machine.batch_blocks(batch) == blocks
    starts = [machine.block_start(batch, blocks, p) for p in range(blocks + 1)]
    assert starts[0] == 0 and starts[-1] == batch
    assert all(s % machine.BLOCK_ALIGN == 0 for s in starts[:-1])
    assert all(a < b for a, b in zip(starts, starts[1:], strict=False))
    assert machine.row_blocks(batch) == list(zip(starts, starts[1:], strict=False))


#: Two blocks of rows (``machine.batch_blocks``), the second one longer.
ROWS = 140

PRODUCTS = {
    # name: (shapes of a and b, the product): every stacking case of _bmm's rows driver.
    "matrix @ vector": (((24, 20), (20,)), lambda a, b: a @ b),
    "vector @ matrix": (((20,), (20, 24)), lambda a, b: a @ b),
    "matrix @ matrix": (((12, 20), (20, 16)), lambda a, b: a @ b),
    "batched matmul": (((3, 8, 10), (3, 10, 9)), lambda a, b: a @ b),
    "batch of matrix @ vector": (((3, 9, 10), (3, 10, 1)), lambda a, b: a @ b),
    "batch of vector @ matrix": (((3, 1, 10), (3, 10, 9)), lambda a, b: a @ b),
    "outer": (((20,), (24,)), anb.outer),
    "small": (((2, 3), (3, 2)), lambda a, b: a @ b),
}


@pytest.mark.parametrize("name", sorted(PRODUCTS))
@pytest.mark.parametrize("seed_kind", ["one-hot", "dense"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.compiled_only
def test_products_over_blocks_of_rows(name, seed_kind, dtype, monkeypatch):
    (shape_a, shape_b), product = PRODUCTS[name]
    rng = np.random.default_rng(len(name))
    a = anb.tensor(rng.standard_normal(shape_a).astype(dtype), requires_grad=True)
    b = anb.tensor(rng.standard_normal(shape_b).astype(dtype), requires_grad=True)
    y = anb.tanh(product(a, b))
    size = int(np.prod(y.shape))
    if seed_kind == "one-hot":  # the rows of an identity: the Jacobian's seeds
        v = np.eye(size, dtype=dtype)[np.arange(ROWS) % size].reshape((ROWS,) + y.shape)
    else:
        v = rng.standard_normal((ROWS,) + y.shape).astype(dtype)
    calls = count_batched_runs(monkeypatch)
    got = [with_threads(t, lambda: batched(y, (a, b), v)) for t in (1, 2)]
    assert len(calls) == 2
    want = single_vjps(y, (a, b), v)
    tolerance = 1e-12 if dtype == "float64" else 1e-5
    for i in range(2):
        np.testing.assert_array_equal(got[0][i], got[1][i])
        np.testing.assert_allclose(got[0][i], want[i], rtol=tolerance, atol=tolerance)
        np.testing.assert_allclose(got[0][i], walked(y, (a, b), v, monkeypatch)[i],
                                   rtol=tolerance, atol=tolerance)


def test_jacobian_of_outer_is_the_closed_form():
    # The mission's example: y = outer(x, x), dy[i, j]/dx[k] = [i == k] x[j] + x[i] [j == k].
    x = anb.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y = anb.outer(x, x)
    v = np.eye(16).reshape(16, 4, 4)
    (g,) = anb.grad(y, x, grad_outputs=anb.tensor(v), is_grads_batched=True)
    eye = np.eye(4)
    want = eye[:, None, :] * x.numpy()[None, :, None] + x.numpy()[:, None, None] * eye[None]
    np.testing.assert_array_equal(g.numpy(), want.reshape(16, 4))


def test_handed_on_slots_leave_the_seed_and_asked_intermediates_intact(monkeypatch):
    # add and reshape hand their gradient slot on to their input: never the caller's seed
    # array, nor a slot handed back (h is asked for).
    rng = np.random.default_rng(3)
    x = anb.tensor(rng.standard_normal((4, 6)), requires_grad=True)
    h = anb.reshape(x, (6, 4)) + 1.0
    y = anb.reshape(anb.sin(h) + h, (24,)) + 0.5
    v = rng.standard_normal((ROWS, 24))
    kept = v.copy()
    gh, gx = batched(y, (h, x), v)
    np.testing.assert_array_equal(v, kept)
    want_h = v.reshape(ROWS, 6, 4) * (np.cos(h.numpy()) + 1)
    np.testing.assert_allclose(gh, want_h, rtol=1e-13)
    np.testing.assert_allclose(gx, want_h.reshape(ROWS, 4, 6), rtol=1e-13)
    np.testing.assert_array_equal(gx, walked(y, (h, x), v, monkeypatch)[1])


def test_reused_arena_slots_are_zeroed_per_block():
    # A chain of same-shape ops frees and reuses slots (a ZERO instruction per reuse); every
    # block zeroes its own rows of them.
    x = anb.tensor(np.linspace(-1, 1, 8), requires_grad=True)
    h = x
    for _ in range(6):
        h = anb.tanh(h) * anb.sin(h)
    v = np.random.default_rng(4).standard_normal((ROWS, 8))
    want = single_vjps(h, [x], v)[0]
    for threads in (1, 2):
        (got,) = with_threads(threads, lambda: batched(h, x, v))
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)



class _DirtyNumpy:
    """NumPy, except that ``empty`` gives float arrays full of NaN: whatever the batched run
    does not zero itself shows in the gradients."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def empty(shape, dtype=float, **kwargs):
        if np.dtype(dtype).kind != "f":
            return np.empty(shape, dtype=dtype, **kwargs)
        return np.full(shape, np.nan, dtype=dtype)


@pytest.mark.compiled_only
def test_every_slot_and_result_is_zeroed_before_its_first_writer(monkeypatch):
    # The arena and the batch's results are allocated uninitialised (here: NaN); ZERO rows
    # clear each block's rows of a slot just before the first VJP that adds into it.
    rng = np.random.default_rng(8)
    w = anb.tensor(rng.standard_normal((6, 5)))
    x = anb.tensor(rng.standard_normal(5), requires_grad=True)
    v = rng.standard_normal((130, 6))  # two blocks of rows

    def run():
        y = anb.tanh(w @ anb.sin(x)) * anb.tanh(w @ anb.cos(x))  # slots freed and reused
        return batched(y, x, v)[0]

    clean = run()
    plan_cache.clear()
    monkeypatch.setattr(executor, "np", _DirtyNumpy())
    monkeypatch.setattr(plan_cache, "np", _DirtyNumpy())
    assert np.isnan(executor.np.empty(3)).all()
    for threads in (1, 2):
        for _ in range(3):  # planned, then a template made, then run from it
            got = with_threads(threads, run)
            np.testing.assert_array_equal(got, clean)
    assert plan_cache.stats["hits"] > 0

@pytest.mark.compiled_only
def test_batched_templates_replay_a_repeated_structure_with_the_same_bits(monkeypatch):
    plan_cache.clear()
    rng = np.random.default_rng(5)
    w = anb.tensor(rng.standard_normal((20, 10)))
    hits = []
    for batch in (ROWS, ROWS, ROWS, ROWS, 7):
        x = anb.tensor(rng.standard_normal(10), requires_grad=True)
        y = anb.tanh(w @ x) + 1.0
        v = rng.standard_normal((batch, 20))
        before = plan_cache.stats["hits"]
        (g,) = batched(y, x, v)
        hits.append(plan_cache.stats["hits"] > before)
        want = v @ ((1 - np.tanh(w.numpy() @ x.numpy()) ** 2)[:, None] * w.numpy())
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-14)
        with monkeypatch.context() as patch:
            patch.setattr(config, "CACHED_PLANS", False)
            np.testing.assert_array_equal(g, batched(y, x, v)[0])
    # A template from the second run on; another batch size is another key.
    assert hits == [False, False, True, True, False]


@pytest.mark.parametrize("batch", [0, 1, 2])
@pytest.mark.compiled_only
def test_tiny_batches_match_the_walk(batch, monkeypatch):
    calls = count_batched_runs(monkeypatch)
    rng = np.random.default_rng(batch)
    w = anb.tensor(rng.standard_normal((20, 10)))
    x = anb.tensor(rng.standard_normal(10), requires_grad=True)
    y = anb.tanh(w @ x)
    v = rng.standard_normal((batch, 20))
    (got,) = batched(y, x, v)
    assert got.shape == (batch, 10) and calls == [False]
    np.testing.assert_allclose(got, walked(y, x, v, monkeypatch)[0], rtol=1e-13, atol=1e-15)


def test_both_edges_of_x_plus_x_batched_leave_the_gradient_they_read():
    # An identity passes its buffer on to x + x's target, which its second edge also
    # accumulates into: no VJP (kernel or tier 0's twin) may write into its given gradient.
    rng = np.random.default_rng(5)
    x = anb.tensor(rng.uniform(-1, 1, (3, 4)), requires_grad=True)
    h = anb.sin(x)
    y = anb.sum(h + h)
    v = np.array([1.0, 2.0, 3.0])
    seed = anb.tensor(v)
    (g,) = anb.grad(y, x, grad_outputs=seed, is_grads_batched=True, retain_graph=True)
    np.testing.assert_array_equal(seed.numpy(), v)
    np.testing.assert_allclose(g.numpy(), 2 * v[:, None, None] * np.cos(x.numpy()))


def test_x_plus_x_leaves_the_given_seeds_unchanged():
    rng = np.random.default_rng(5)
    x = anb.tensor(rng.uniform(-1, 1, (3, 4)), requires_grad=True)
    y = anb.sin(x)
    z = y + y
    v = rng.standard_normal((3, 4))
    seed = anb.tensor(v.copy())
    (g,) = anb.grad(z, x, grad_outputs=seed, retain_graph=True)
    np.testing.assert_array_equal(seed.numpy(), v)
    np.testing.assert_allclose(g.numpy(), 2 * v * np.cos(x.numpy()))
    vb = rng.standard_normal((2, 3, 4))
    seed = anb.tensor(vb.copy())
    (g,) = anb.grad(z, x, grad_outputs=seed, is_grads_batched=True)
    np.testing.assert_array_equal(seed.numpy(), vb)
    np.testing.assert_allclose(g.numpy(), 2 * vb * np.cos(x.numpy()))
