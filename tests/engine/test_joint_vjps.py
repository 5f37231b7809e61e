"""Joint VJPs (``VJPStrategy.joint``, ``schedule.JOINT``): a node's inputs that are one tensor get
their gradient in one pass over the node's gradient (``outer(x, x)``: ``ops/_rank_one.py``),
and so do distinct tensors, each its own (``VJPStrategy.split``: ``outer(x, y)``).

The joint kernel against its NumPy twin (bit for bit, hypothesis over shapes, zeros of both
signs), and whole backwards with joint VJPs against the same backwards one VJP per input
(``config.JOINT_VJPS = False``: within 1e-13 relative in float64, the sums run in another
order) and against NumPy references, across shapes, strides, dtypes, a gradient that reaches
the tensor by other paths too, the compiled executor, the Python walk, cached plans, batches
and ``anb.compile``. With ``--tier=0`` the same backwards run the twins.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autograd_nb as anb
from autograd_nb import config
from autograd_nb.engine import make_plan, schedule
from autograd_nb.ops import _rank_one

DTYPES = [np.float32, np.float64]
#: Relative tolerance between joint and one-VJP-per-input gradients, by dtype.
RTOL = {np.float32: 1e-5, np.float64: 1e-13}


def _bits(x):
    return x.view(f"u{x.dtype.itemsize}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("overwrite", [True, False])
@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 80), seed=st.integers(0, 2**16), zeros=st.booleans())
def test_the_kernel_and_its_twin_give_the_same_bits(dtype, overwrite, n, seed, zeros):
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((n, n)).astype(dtype)
    a = rng.standard_normal(n).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    start = rng.standard_normal(n).astype(dtype)
    if zeros:  # signed zeros: sums of -0.0 products, and -0.0 already in the target
        g[:, : n // 2] = -0.0
        a[: n // 2] = 0.0
        start[::2] = -0.0
    compiled, twin = start.copy(), start.copy()
    _rank_one.joint_add(g, a, b, compiled, overwrite)
    _rank_one.joint_add_numpy(g, a, b, twin, overwrite)
    np.testing.assert_array_equal(_bits(compiled), _bits(twin))
    exact = g.astype(np.float64) @ b + a.astype(np.float64) @ g
    if not overwrite:
        exact += start
    np.testing.assert_allclose(compiled, exact, rtol=RTOL[dtype] * 100,
                               atol=RTOL[dtype] * 100 * np.abs(g).sum(axis=1).max())


def test_the_set_kernel_gives_the_bits_of_adding_into_zeros():
    g = np.full((3, 3), -0.0)
    a = np.zeros(3)
    written, added = np.full(3, np.nan), np.zeros(3)
    _rank_one.joint_add(g, a, a, written, True)
    _rank_one.joint_add(g, a, a, added, False)
    np.testing.assert_array_equal(_bits(written), _bits(added))
    assert not np.signbit(written).any()


def _both(make, arrays, seed_shape, dtype, strided=False, **grad_options):
    """Gradients of ``make(*leaves)`` with joint VJPs, then one VJP per input."""
    rng = np.random.default_rng(len(seed_shape))
    seed = rng.standard_normal(seed_shape).astype(dtype)
    if strided:  # a grad_output that is a transposed view
        seed = np.ascontiguousarray(seed.T).T
    results = []
    for joint in (True, False):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(config, "JOINT_VJPS", joint)
            leaves = [anb.tensor(a, requires_grad=True) for a in arrays]
            y = make(*leaves)
            grads = anb.grad(y, leaves, grad_outputs=anb.tensor(seed), **grad_options)
            results.append([g.numpy() for g in grads])
    return results, seed


def _close(joint, unfused, dtype):
    for a, b in zip(joint, unfused, strict=True):
        assert a.dtype == b.dtype == dtype and a.shape == b.shape
        scale = max(np.abs(b).max(), 1.0)
        np.testing.assert_allclose(a, b, rtol=0, atol=RTOL[dtype] * scale)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (7,), (31,), (32,), (33,), (100,), (3, 5), (2, 3, 4)],
                         ids=str)
@pytest.mark.parametrize("strided", [False, True])
def test_outer_of_one_tensor(dtype, shape, strided):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(dtype)
    n = x.size
    (joint, unfused), seed = _both(lambda x: anb.outer(x, x), [x], (n, n), dtype, strided)
    _close(joint, unfused, dtype)
    flat = x.reshape(-1).astype(np.float64)
    reference = (seed.astype(np.float64) @ flat + flat @ seed).reshape(shape)
    np.testing.assert_allclose(joint[0], reference, rtol=RTOL[dtype] * 100,
                               atol=RTOL[dtype] * 100 * np.abs(reference).max())


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_strided_leaf(dtype):
    # x is every other element of a larger array: the product reads a contiguous copy, and
    # the gradient goes back to the strided leaf.
    base = np.random.default_rng(2).standard_normal(40).astype(dtype)
    x = anb.tensor(base, requires_grad=True)
    results = []
    for joint in (True, False):
        config_joint = pytest.MonkeyPatch()
        config_joint.setattr(config, "JOINT_VJPS", joint)
        try:
            (g,) = anb.grad(anb.sum(anb.outer(x[::2], x[::2]) * 0.5), x)
        finally:
            config_joint.undo()
        results.append(g.numpy())
    _close([results[0]], [results[1]], dtype)
    expected = np.zeros(40)
    expected[::2] = base[::2].astype(np.float64).sum()
    np.testing.assert_allclose(results[0], expected, rtol=RTOL[dtype] * 100)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("first", [True, False], ids=["joint first", "joint second"])
def test_a_gradient_that_reaches_the_tensor_by_other_paths(dtype, first):
    # The joint VJP writes x's gradient whole where it is the first to write it, else adds.
    rng = np.random.default_rng(3)
    x0, w = rng.standard_normal(20).astype(dtype), rng.standard_normal((20, 20)).astype(dtype)

    def loss(x):
        pair = anb.sum(anb.outer(x, x) * anb.tensor(w))
        single = anb.sum(anb.tanh(x) * 3.0)
        return pair + single if first else single + pair

    (joint, unfused), _ = _both(loss, [x0], (), dtype)
    _close(joint, unfused, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_outer_of_an_intermediate(dtype):
    # The repeated input is a node: its gradient lives in the run's arena.
    x0 = np.random.default_rng(4).standard_normal(50).astype(dtype)

    def loss(x):
        h = anb.tanh(x)
        return anb.sum(anb.outer(h, h) * 0.25)

    (joint, unfused), _ = _both(loss, [x0], (), dtype)
    _close(joint, unfused, dtype)


def test_the_schedule_has_one_joint_step_with_a_target_per_tensor():
    x = anb.tensor(np.ones(5), requires_grad=True)
    z = anb.tensor(np.ones(5), requires_grad=True)
    constant = anb.tensor(np.ones(5))
    cases = ((anb.outer(x, x), [schedule.JOINT], int), (anb.outer(x, z), [schedule.JOINT], tuple),
             (anb.outer(x, constant), [0], int), (anb.matmul(x, z), [0, 1], int))
    for y, expected, target in cases:
        plan = make_plan([y._node], [x, z], False)
        steps = schedule.schedule(plan, [(y._node, None)], {id(x), id(z)}, False, joint=True)
        assert [s.k for s in steps.steps] == expected
        assert type(steps.steps[0].target) is target
    plan = make_plan([anb.outer(x, x)._node], [x], False)
    steps = schedule.schedule(plan, [(plan.nodes[0], None)], {id(x)}, False)
    assert [s.k for s in steps.steps] == [0, 1]  # (joint only where the interpreter asks)


@pytest.mark.compiled_only
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_python_walk_and_cached_plans_give_the_executors_bits(dtype):
    x0 = np.random.default_rng(5).standard_normal(40).astype(dtype)
    seed = anb.tensor(np.random.default_rng(6).standard_normal((40, 40)).astype(dtype))
    x = anb.tensor(x0, requires_grad=True)
    runs = [anb.grad(anb.outer(x, x), x, grad_outputs=seed)[0].numpy() for _ in range(3)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(config, "COMPILED_BACKWARD", False)
        runs.append(anb.grad(anb.outer(x, x), x, grad_outputs=seed)[0].numpy())
    for run in runs[1:]:
        np.testing.assert_array_equal(_bits(run), _bits(runs[0]))


BATCHED = {
    "outer": (lambda x: anb.outer(x, x), lambda n: (n, n)),
    "outer + tanh": (lambda x: anb.outer(x, x) + anb.tanh(anb.outer(x, x)), lambda n: (n, n)),
    "x * x": (lambda x: x * x, lambda n: (n,)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(BATCHED))
@pytest.mark.parametrize("walk", [False, True], ids=["executor", "walk"])
def test_batched_gradients_give_each_rows_unbatched_bits(dtype, name, walk, monkeypatch):
    # A batch runs the joint step once per row: each row has the bits of the same backward
    # outside a batch (the compiled executor and the Python walk alike).
    make, seed_shape = BATCHED[name]
    x0 = np.random.default_rng(7).standard_normal(40).astype(dtype)
    seeds = np.random.default_rng(8).standard_normal((3, *seed_shape(40))).astype(dtype)
    if walk:
        monkeypatch.setattr(config, "COMPILED_BACKWARD", False)
    x = anb.tensor(x0, requires_grad=True)
    (g,) = anb.grad(make(x), x, grad_outputs=anb.tensor(seeds), is_grads_batched=True)
    for row, seed in enumerate(seeds):
        (alone,) = anb.grad(make(x), x, grad_outputs=anb.tensor(seed))
        np.testing.assert_array_equal(_bits(g.numpy()[row]), _bits(alone.numpy()))
    monkeypatch.setattr(config, "JOINT_VJPS", False)
    (unfused,) = anb.grad(make(x), x, grad_outputs=anb.tensor(seeds), is_grads_batched=True)
    _close([g.numpy()], [unfused.numpy()], dtype)
    if name == "outer":
        expected = seeds.astype(np.float64) @ x0 + x0 @ seeds
        np.testing.assert_allclose(g.numpy(), expected, rtol=RTOL[dtype] * 100,
                                   atol=RTOL[dtype] * 100 * np.abs(expected).max())


@pytest.mark.compiled_only
def test_a_batched_backward_runs_the_joint_driver_per_row(monkeypatch):
    from autograd_nb.ops.registry import REGISTRY

    op = REGISTRY["_bmm"]
    asked = []
    original = type(op.vjp_strategy).exec_joint_spec

    def counted(self, op, ks, node, overwrite):
        asked.append((ks, overwrite))
        return original(self, op, ks, node, overwrite)

    monkeypatch.setattr(type(op.vjp_strategy), "exec_joint_spec", counted)
    monkeypatch.setattr(config, "CACHED_PLANS", False)
    x = anb.tensor(np.arange(5.0), requires_grad=True)
    seeds = anb.tensor(np.ones((4, 5, 5)))
    (g,) = anb.grad(anb.outer(x, x), x, grad_outputs=seeds, is_grads_batched=True)
    np.testing.assert_array_equal(g.numpy(), np.broadcast_to(2 * np.arange(5.0).sum(), (4, 5)))
    assert asked == [((0, 1), False)]  # (the adding driver, after the block's ZERO row)


@pytest.mark.compiled_only
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_compiled_function_gives_the_eager_bits(dtype):
    x0 = np.random.default_rng(9).standard_normal(64).astype(dtype)
    seed = anb.tensor(np.random.default_rng(10).standard_normal((64, 64)).astype(dtype))
    x = anb.tensor(x0, requires_grad=True)
    outer = anb.compile(lambda x: anb.outer(x, x))
    eager = anb.grad(anb.outer(x, x), x, grad_outputs=seed)[0].numpy()
    for _ in range(3):  # records, then replays
        (g,) = anb.grad(outer(x), x, grad_outputs=seed)
        np.testing.assert_array_equal(_bits(g.numpy()), _bits(eager))


# -- outer(x, y) of two tensors: both VJPs in one pass, each into its own gradient ----------


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 70), n=st.integers(1, 70), seed=st.integers(0, 2**16),
       overwrites=st.tuples(st.booleans(), st.booleans()), zeros=st.booleans())
def test_the_pair_kernel_and_its_twin_give_the_same_bits(dtype, m, n, seed, overwrites, zeros):
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((m, n)).astype(dtype)
    a, b = rng.standard_normal(m).astype(dtype), rng.standard_normal(n).astype(dtype)
    start_a, start_b = rng.standard_normal(m).astype(dtype), rng.standard_normal(n).astype(dtype)
    if zeros:  # signed zeros in the gradient, the factors and the targets
        g[: m // 2] = -0.0
        b[: n // 2] = 0.0
        start_a[::2] = -0.0
    compiled = [start_a.copy(), start_b.copy()]
    twin = [start_a.copy(), start_b.copy()]
    _rank_one.pair_add(g, a, b, *compiled, *overwrites)
    _rank_one.pair_add_numpy(g, a, b, *twin, *overwrites)
    exact = [g.astype(np.float64) @ b, a.astype(np.float64) @ g]
    for got, same, reference, start, overwrite in zip(compiled, twin, exact, (start_a, start_b),
                                                      overwrites, strict=True):
        np.testing.assert_array_equal(_bits(got), _bits(same))
        if not overwrite:
            reference = reference + start
        np.testing.assert_allclose(got, reference, rtol=RTOL[dtype] * 100,
                                   atol=RTOL[dtype] * 100 * (np.abs(g).sum() + 1))
    if all(overwrites):  # (written whole: the bits of adding into zeros, never -0.0 alone)
        added = [np.zeros(m, dtype), np.zeros(n, dtype)]
        _rank_one.pair_add(g, a, b, *added, False, False)
        for got, same in zip(compiled, added, strict=True):
            np.testing.assert_array_equal(_bits(got), _bits(same))


def _pair_reference(seed, x, y):
    s, a, b = (v.astype(np.float64) for v in (seed, x.reshape(-1), y.reshape(-1)))
    return [(s @ b).reshape(x.shape), (a @ s).reshape(y.shape)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [((1,), (1,)), ((7,), (33,)), ((40,), (3,)),
                                    ((3, 5), (2, 3, 4)), ((64,), (64,))], ids=str)
@pytest.mark.parametrize("strided", [False, True])
def test_outer_of_two_tensors(dtype, shapes, strided):
    rng = np.random.default_rng(16)
    x, y = (rng.standard_normal(shape).astype(dtype) for shape in shapes)
    (joint, unfused), seed = _both(anb.outer, [x, y], (x.size, y.size), dtype, strided)
    _close(joint, unfused, dtype)
    for got, reference in zip(joint, _pair_reference(seed, x, y), strict=True):
        np.testing.assert_allclose(got, reference, rtol=RTOL[dtype] * 100,
                                   atol=RTOL[dtype] * 100 * max(np.abs(reference).max(), 1))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("wanted", [0, 1])
def test_outer_of_two_tensors_one_of_them_wanted(dtype, wanted):
    # Only one input receives a gradient: its one VJP, no joint step.
    rng = np.random.default_rng(17)
    arrays = [rng.standard_normal(9).astype(dtype), rng.standard_normal(6).astype(dtype)]
    seed = rng.standard_normal((9, 6)).astype(dtype)
    leaves = [anb.tensor(a, requires_grad=k == wanted) for k, a in enumerate(arrays)]
    (g,) = anb.grad(anb.outer(*leaves), leaves[wanted], grad_outputs=anb.tensor(seed))
    reference = _pair_reference(seed, *arrays)[wanted]
    np.testing.assert_allclose(g.numpy(), reference, rtol=RTOL[dtype] * 100)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("first", [True, False], ids=["joint first", "joint second"])
def test_outer_of_two_intermediates_reached_by_other_paths(dtype, first):
    # Each target is written whole where the joint step is its first writer, else added into;
    # the inputs are nodes (arena slots) and one also reaches a leaf by another path.
    rng = np.random.default_rng(18)
    x0, y0 = rng.standard_normal(20).astype(dtype), rng.standard_normal(12).astype(dtype)
    w = rng.standard_normal((20, 12)).astype(dtype)

    def loss(x, y):
        h, k = anb.tanh(x), y * 2.0
        pair = anb.sum(anb.outer(h, k) * anb.tensor(w))
        single = anb.sum(anb.sin(h) * 3.0) + anb.sum(y)
        return pair + single if first else single + pair

    (joint, unfused), _ = _both(loss, [x0, y0], (), dtype)
    _close(joint, unfused, dtype)


@pytest.mark.compiled_only
@pytest.mark.parametrize("dtype", DTYPES)
def test_two_tensors_the_walk_cached_plans_and_a_compiled_function_give_the_executors_bits(
        dtype):
    rng = np.random.default_rng(19)
    x = anb.tensor(rng.standard_normal(40).astype(dtype), requires_grad=True)
    y = anb.tensor(rng.standard_normal(24).astype(dtype), requires_grad=True)
    seed = anb.tensor(rng.standard_normal((40, 24)).astype(dtype))
    runs = [anb.grad(anb.outer(x, y), [x, y], grad_outputs=seed) for _ in range(2)]
    compiled = anb.compile(anb.outer)
    runs += [anb.grad(compiled(x, y), [x, y], grad_outputs=seed) for _ in range(3)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(config, "COMPILED_BACKWARD", False)
        runs.append(anb.grad(anb.outer(x, y), [x, y], grad_outputs=seed))
    for run in runs[1:]:
        for got, first in zip(run, runs[0], strict=True):
            np.testing.assert_array_equal(_bits(got.numpy()), _bits(first.numpy()))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("walk", [False, True], ids=["executor", "walk"])
def test_two_tensors_batched_give_each_rows_unbatched_bits(dtype, walk, monkeypatch):
    rng = np.random.default_rng(20)
    x0, y0 = rng.standard_normal(33).astype(dtype), rng.standard_normal(8).astype(dtype)
    seeds = rng.standard_normal((3, 33, 8)).astype(dtype)
    if walk:
        monkeypatch.setattr(config, "COMPILED_BACKWARD", False)
    x, y = anb.tensor(x0, requires_grad=True), anb.tensor(y0, requires_grad=True)
    grads = anb.grad(anb.outer(x, y), [x, y], grad_outputs=anb.tensor(seeds),
                     is_grads_batched=True)
    for row, seed in enumerate(seeds):
        alone = anb.grad(anb.outer(x, y), [x, y], grad_outputs=anb.tensor(seed))
        for got, one in zip(grads, alone, strict=True):
            np.testing.assert_array_equal(_bits(got.numpy()[row]), _bits(one.numpy()))
        for got, reference in zip(grads, _pair_reference(seed, x0, y0), strict=True):
            np.testing.assert_allclose(got.numpy()[row], reference, rtol=RTOL[dtype] * 100,
                                       atol=RTOL[dtype] * 100 * np.abs(reference).max())


@pytest.mark.parametrize("walk", [False, True], ids=["executor", "walk"])
def test_a_batched_joint_step_of_a_0d_tensor_gives_each_rows_bits(walk, monkeypatch):
    """A 0-d ``x * x`` in a batch: each row of the gradient buffer is a 0-d view that the
    VJP adds into (a row taken as ``buffer[row]`` would be a NumPy scalar: a regression)."""
    if walk:
        monkeypatch.setattr(config, "COMPILED_BACKWARD", False)
    x = anb.tensor(np.float64(0.7), requires_grad=True)
    seeds = np.array([1.0, -0.25, 3.5])
    (g,) = anb.grad(x * x, x, grad_outputs=anb.tensor(seeds), is_grads_batched=True)
    for row, seed in enumerate(seeds):
        (one,) = anb.grad(x * x, x, grad_outputs=anb.tensor(seed))
        np.testing.assert_array_equal(_bits(g.numpy()[row]), _bits(one.numpy()))
    np.testing.assert_allclose(g.numpy(), 2 * 0.7 * seeds, rtol=1e-15)


@pytest.mark.compiled_only
@pytest.mark.parametrize("batched", [False, True])
def test_the_executor_runs_the_pair_driver(monkeypatch, batched):
    from autograd_nb.ops.registry import REGISTRY

    op = REGISTRY["_bmm"]
    asked = []
    original = type(op.vjp_strategy).exec_split_spec

    def counted(self, op, node, overwrites):
        asked.append(overwrites)
        return original(self, op, node, overwrites)

    monkeypatch.setattr(type(op.vjp_strategy), "exec_split_spec", counted)
    monkeypatch.setattr(config, "CACHED_PLANS", False)
    x = anb.tensor(np.arange(5.0), requires_grad=True)
    y = anb.tensor(np.arange(3.0), requires_grad=True)
    seed = np.ones((2, 5, 3)) if batched else np.ones((5, 3))
    gx, gy = anb.grad(anb.outer(x, y), [x, y], grad_outputs=anb.tensor(seed),
                      is_grads_batched=batched)
    np.testing.assert_array_equal(gx.numpy(), np.broadcast_to(3.0, seed.shape[:-1]))
    np.testing.assert_array_equal(gy.numpy(), np.broadcast_to(10.0, seed.shape[:-2] + (3,)))
    assert asked == [(not batched, not batched)]


# -- elementwise ops and dot products of one tensor with itself --------------------------------

#: Binary elementwise ops of one tensor with itself, and a reference gradient of each (float64).
ELEMENTWISE = {
    "x * x": (lambda x: x * x, lambda x, g: 2 * g * x),
    "x + x": (lambda x: x + x, lambda x, g: 2 * g),
    "x - x": (lambda x: x - x, lambda x, g: 0 * g),
    "x / x": (lambda x: x / x, lambda x, g: 0 * g),
    "x ** x": (lambda x: anb.power(anb.abs(x) + 0.5, anb.abs(x) + 0.5),
               lambda x, g: g * (np.abs(x) + 0.5) ** (np.abs(x) + 0.5)
               * (np.log(np.abs(x) + 0.5) + 1) * np.sign(x)),
    "where": (lambda x: anb.where(anb.tensor(np.arange(x.size).reshape(x.shape) % 3 > 0), x, x),
              lambda x, g: g),
}


def _both_bits(make, x0, seed, **grad_options):
    """``make``'s gradient of ``x0`` with joint VJPs, then one VJP per input (and each
    backward's schedule)."""
    results = []
    for joint in (True, False):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(config, "JOINT_VJPS", joint)
            x = anb.tensor(x0, requires_grad=True)
            (g,) = anb.grad(make(x), x, grad_outputs=anb.tensor(seed), **grad_options)
            results.append(g.numpy())
    return results


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
@pytest.mark.parametrize("shape", [(1,), (33,), (3, 5), (2, 3, 4)], ids=str)
@pytest.mark.parametrize("strided", [False, True])
def test_an_elementwise_op_of_one_tensor_gives_the_unfused_bits(dtype, name, shape, strided):
    # One loop adds both VJPs into each element in turn, as two kernels one after the other.
    make, reference = ELEMENTWISE[name]
    rng = np.random.default_rng(11)
    x0 = rng.standard_normal(shape).astype(dtype)
    x0[x0 == 0] = 1.0
    seed = rng.standard_normal(shape[::-1]).astype(dtype).T if strided else (
        rng.standard_normal(shape).astype(dtype))
    for paths in (make, lambda x: make(x) + anb.tanh(x), lambda x: anb.tanh(x) + make(x)):
        # (alone: the joint VJP writes the gradient whole; beside another path, it adds)
        joint, unfused = _both_bits(paths, x0, seed)
        np.testing.assert_array_equal(_bits(joint), _bits(unfused))
    joint, _ = _both_bits(make, x0, seed)
    expected = reference(x0.astype(np.float64), seed.astype(np.float64))
    np.testing.assert_allclose(joint, expected, rtol=RTOL[dtype] * 100, atol=RTOL[dtype] * 100)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("subscripts, shape", [("ij,ij->", (30, 40)), ("ij,ij->i", (5, 33)),
                                               ("i,i", (7,)), ("...i,...i->...", (2, 3, 4))])
def test_a_dot_product_of_one_tensor_gives_the_unfused_values(dtype, subscripts, shape):
    # ``_bmm`` of a row and a column of one tensor: its two VJPs g * x in one pass.
    rng = np.random.default_rng(12)
    x0 = rng.standard_normal(shape).astype(dtype)
    seed_shape = np.einsum(subscripts, x0, x0).shape
    seed = rng.standard_normal(seed_shape).astype(dtype)
    joint, unfused = _both_bits(lambda x: anb.einsum(subscripts, x, x), x0, seed)
    _close([joint], [unfused], dtype)
    scale = np.expand_dims(seed.astype(np.float64), tuple(range(seed.ndim, x0.ndim)))
    np.testing.assert_allclose(joint, 2 * scale * x0, rtol=RTOL[dtype] * 100)


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_dot_kernel_and_its_twin_give_the_same_bits(dtype):
    rng = np.random.default_rng(13)
    g = rng.standard_normal(3).astype(dtype)
    x = rng.standard_normal((3, 17)).astype(dtype)
    x[0, :5] = -0.0
    for overwrite in (True, False):
        start = rng.standard_normal((3, 17)).astype(dtype)
        start[1, ::2] = -0.0
        compiled, twin = start.copy(), start.copy()
        _rank_one.joint_scale_add(g, x, compiled, overwrite)
        _rank_one.joint_scale_add_numpy(g, x, twin, overwrite)
        np.testing.assert_array_equal(_bits(compiled), _bits(twin))
        product = g[:, None] * x
        expected = (0.0 + product) + product if overwrite else (start + product) + product
        np.testing.assert_array_equal(_bits(compiled), _bits(expected.astype(dtype)))


def test_the_schedule_joins_an_elementwise_op_only_in_the_flat_layout():
    x = anb.tensor(np.ones((3, 4)), requires_grad=True)
    z = anb.tensor(np.ones((3, 4)), requires_grad=True)
    condition = anb.tensor(np.array([[True], [False], [True]]))
    cases = ((x * x, [schedule.JOINT]), (x * z, [0, 1]),
             (anb.where(condition, x, x), [1, 2]))  # (a broadcast condition: not flat)
    for y, expected in cases:
        plan = make_plan([y._node], [x, z], False)
        steps = schedule.schedule(plan, [(y._node, None)], {id(x), id(z)}, False, joint=True)
        assert [s.k for s in steps.steps] == expected


@pytest.mark.compiled_only
def test_the_executor_runs_the_joint_driver(monkeypatch):
    from autograd_nb.ops.registry import REGISTRY

    op = REGISTRY["multiply"]
    asked = []
    original = type(op.vjp_strategy).exec_joint_spec

    def counted(self, op, ks, node, overwrite):
        asked.append((ks, overwrite))
        return original(self, op, ks, node, overwrite)

    monkeypatch.setattr(type(op.vjp_strategy), "exec_joint_spec", counted)
    monkeypatch.setattr(config, "CACHED_PLANS", False)
    x = anb.tensor(np.linspace(-1, 1, 10), requires_grad=True)
    (g,) = anb.grad(anb.sum(x * x), x)
    np.testing.assert_array_equal(g.numpy(), 2 * np.linspace(-1, 1, 10))
    assert asked == [((0, 1), True)]


@pytest.mark.compiled_only
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_compiled_square_gives_the_eager_bits(dtype):
    x0 = np.random.default_rng(14).standard_normal(300).astype(dtype)
    seed = anb.tensor(np.random.default_rng(15).standard_normal(300).astype(dtype))
    x = anb.tensor(x0, requires_grad=True)
    square = anb.compile(lambda x: anb.tanh(x * x) + x * x)
    eager = anb.grad(anb.tanh(x * x) + x * x, x, grad_outputs=seed)[0].numpy()
    for _ in range(3):  # records, then replays
        (g,) = anb.grad(square(x), x, grad_outputs=seed)
        np.testing.assert_array_equal(_bits(g.numpy()), _bits(eager))
