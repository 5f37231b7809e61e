"""The compiled backward (engine.executor, engine.fusion) against the Python walk and the rules.

Random programs are drawn with hypothesis from the ops that have executor drivers; each is
differentiated three ways: the compiled executor (fused and unfused), the Python walk over the
same VJP kernels (which must agree to the last bit: same kernels, same order), and the ops'
differentiable rules (``create_graph=True``), which compute the same math with other
roundings.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autograd_nb as anb
from autograd_nb import config, engine, tiering
from autograd_nb.engine import executor, fusion, machine
from autograd_nb.ops import _pointers

UNARY = ("sin", "cos", "tanh", "sigmoid", "square", "softplus", "exp", "negative", "arctan")
BINARY = ("add", "subtract", "multiply", "maximum")
SHAPES = ((3, 4), (4,), (3, 1), (1, 4), ())


@pytest.fixture
def modes(monkeypatch):
    """Run a function under each backward mode: ("python", "compiled", "fused")."""

    def run(function):
        results = {}
        for mode in ("python", "compiled", "fused"):
            monkeypatch.setattr(config, "COMPILED_BACKWARD", mode != "python")
            monkeypatch.setattr(config, "FUSE_BACKWARD", mode == "fused")
            monkeypatch.setattr(config, "FUSION_MIN_ELEMENTS", 1)
            results[mode] = function()
        return results

    return run


def count_executions(monkeypatch):
    calls = []
    original = executor.execute

    def counting(*args):
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(executor, "execute", counting)
    return calls


@st.composite
def programs(draw):
    """A list of steps over a growing pool of tensors, ending in a scalar loss."""
    steps = []
    n_values = 2
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(("unary", "binary", "scalar", "sum", "reshape", "index",
                                     "stack", "matmul", "softmax", "transpose", "prod",
                                     "clip", "where", "index_array")))
        a = draw(st.integers(0, n_values - 1))
        b = draw(st.integers(0, n_values - 1))
        if kind == "unary":
            steps.append(("unary", draw(st.sampled_from(UNARY)), a))
        elif kind == "binary":
            steps.append(("binary", draw(st.sampled_from(BINARY)), a, b))
        elif kind == "scalar":
            steps.append(("scalar", draw(st.floats(-2, 2)), a))
        else:
            steps.append((kind, a, b))
        n_values += 1
    return steps


def run_program(steps, x, w):
    """Apply ``steps``; every step's result has shape (3, 4) or broadcasts to it."""
    pool = [x, w]
    for step in steps:
        kind = step[0]
        if kind == "unary":
            value = getattr(anb, step[1])(anb.tanh(pool[step[2]]))
        elif kind == "binary":
            value = getattr(anb, step[1])(pool[step[2]], pool[step[3]])
        elif kind == "scalar":
            value = pool[step[2]] * step[1] + 0.5
        else:
            a = anb.broadcast_to(pool[step[1]], (3, 4))
            if kind == "sum":
                value = anb.sum(a, axis=0, keepdims=True) * 0.3
            elif kind == "reshape":
                value = a.reshape(4, 3).reshape(3, 4)
            elif kind == "index":
                value = anb.stack([a[1], a[0, ::-1], a[2]])
            elif kind == "stack":
                value = anb.stack([a[0], a[1] * 0.5, a[2]], axis=0)
            elif kind == "matmul":
                value = a @ anb.transpose(a) @ a * 0.1
            elif kind == "softmax":
                value = anb.softmax(a, axis=1)
            elif kind == "prod":
                value = anb.prod(a * 0.5 + 1.0, axis=1, keepdims=True)
            elif kind == "clip":
                value = anb.clip(a, -0.5, 0.4)
            elif kind == "where":
                value = anb.where(a > 0, a, a * a)
            elif kind == "index_array":
                value = a[[2, 0, 2]].sum(axis=0)
            else:
                value = anb.transpose(anb.transpose(a))
        pool.append(value)
    return anb.sum(pool[-1] * pool[-1]) + anb.sum(pool[-1])


@settings(max_examples=60, deadline=None)
@given(programs(), st.sampled_from(["float64", "float32"]))
def test_random_programs_agree_across_modes_and_with_the_rules(steps, dtype):
    rng = np.random.default_rng(len(steps))
    x0 = rng.uniform(-1, 1, (3, 4)).astype(dtype)
    w0 = rng.uniform(-1, 1, (4,)).astype(dtype)
    results = {}
    for mode in ("python", "compiled", "fused", "tier0"):
        config.COMPILED_BACKWARD = mode != "python"
        config.FUSE_BACKWARD = mode == "fused"
        tiering.backward_pending = mode == "tier0"  # the VJP kernels' NumPy twins
        saved, config.FUSION_MIN_ELEMENTS = config.FUSION_MIN_ELEMENTS, 1
        try:
            x = anb.tensor(x0, requires_grad=True)
            w = anb.tensor(w0, requires_grad=True)
            results[mode] = [g.numpy() for g in anb.grad(run_program(steps, x, w), (x, w),
                                                         allow_unused=True,
                                                         materialize_grads=True)]
        finally:
            config.COMPILED_BACKWARD, config.FUSE_BACKWARD = True, True
            config.FUSION_MIN_ELEMENTS = saved
            tiering.backward_pending = False
            tiering._grad_leaves.clear()
    x = anb.tensor(x0, requires_grad=True)
    w = anb.tensor(w0, requires_grad=True)
    rules = anb.grad(run_program(steps, x, w), (x, w), create_graph=True, allow_unused=True,
                     materialize_grads=True)
    tolerance = 1e-12 if dtype == "float64" else 2e-5
    for i in range(2):
        # The same bits whether the chains are fused (each stage rounded to the dtype, as a
        # node's kernel stores it) or not, and in tier 0's NumPy twins.
        np.testing.assert_array_equal(results["compiled"][i], results["python"][i])
        np.testing.assert_array_equal(results["fused"][i], results["python"][i])
        np.testing.assert_array_equal(results["tier0"][i], results["compiled"][i])
        np.testing.assert_allclose(rules[i].numpy(), results["python"][i], rtol=tolerance * 10,
                                   atol=tolerance * 10)


@pytest.mark.compiled_only
def test_a_supported_graph_runs_in_one_compiled_call_with_no_python_vjp(monkeypatch):
    calls = count_executions(monkeypatch)

    def forbidden(*args):
        raise AssertionError("a Python VJP ran")

    from autograd_nb.ops.registry import REGISTRY

    for op in REGISTRY.values():
        monkeypatch.setattr(op, "vjp", forbidden)
    x = anb.tensor(np.linspace(-1, 1, 12).reshape(3, 4), requires_grad=True)
    w = anb.tensor(np.linspace(0, 1, 4), requires_grad=True)
    y = anb.softmax(anb.tanh(x * w + 1.0) @ anb.transpose(x), axis=1)[1:].sum()
    gx, gw = anb.grad(y, (x, w))
    assert len(calls) == 1
    assert gx.shape == (3, 4) and gw.shape == (4,)


def test_custom_functions_and_create_graph_take_the_python_walk(monkeypatch):
    calls = count_executions(monkeypatch)
    x = anb.tensor([0.5, 1.0], requires_grad=True)
    (g,) = anb.grad(anb.sum(anb.exp(x)), x, create_graph=True)
    assert calls == []
    np.testing.assert_allclose(g.numpy(), np.exp([0.5, 1.0]))


def test_mixed_dtypes_take_the_python_walk(monkeypatch):
    calls = count_executions(monkeypatch)
    x = anb.tensor([0.5, 1.0], dtype="float32", requires_grad=True)
    y = anb.tensor([2.0, 3.0], requires_grad=True)
    gx, gy = anb.grad(anb.sum(x * y), (x, y))
    assert calls == []
    assert gx.dtype == np.float32
    np.testing.assert_allclose(gx.numpy(), [2.0, 3.0])


def rollout(steps):
    """A simulation of ``steps`` steps: the same few ops, repeated."""
    x = anb.tensor(np.linspace(-1, 1, 8), requires_grad=True)
    h = x
    for _ in range(steps):
        h = h + 0.1 * anb.tanh(h) * anb.sum(h * h)
    return x, anb.sum(h)


def test_no_compilation_when_only_the_length_changes():
    x, y = rollout(5)
    anb.grad(y, x)  # compiles (or loads) what this program needs
    signatures = len(executor.execute.signatures)
    entries = dict(_pointers._entries)
    for steps in (17, 60):
        x, y = rollout(steps)
        anb.grad(y, x)
    assert len(executor.execute.signatures) == signatures
    assert _pointers._entries == entries


def test_reused_arena_slots_are_zeroed_before_reuse(modes, monkeypatch):
    # A long chain of equal-sized intermediates: slots are freed and reused all along, in
    # arenas that hold NaN until the tables clear or write them (``executor.uninitialised``).
    monkeypatch.setattr(executor, "uninitialised",
                        lambda shape, dtype: np.full(shape, np.nan, dtype))

    def run():
        x = anb.tensor(np.linspace(-1, 1, 6), requires_grad=True)
        h = x
        for i in range(30):
            h = anb.sin(h) * (1.0 + 0.01 * i) + anb.cos(h)
        return anb.grad(anb.sum(h), x)[0].numpy()

    results = modes(run)
    np.testing.assert_array_equal(results["compiled"], results["python"])
    np.testing.assert_array_equal(results["fused"], results["python"])


def test_fused_chains_give_the_unfused_bits_in_float32(monkeypatch):
    # Stages numba computes in float64 (``g * (1 - y * y)``, ``g * y * (1 - y)``) followed by
    # others: a fused loop rounds each stage's value to float32 as a node's kernel stores it,
    # so fused, unfused and tier 0's twins agree to the bit.
    rng = np.random.default_rng(4)
    x0 = rng.uniform(-2, 2, 3 * config.FUSION_MIN_ELEMENTS).astype(np.float32)
    b0 = rng.uniform(0.5, 1.5, x0.size).astype(np.float32)

    def run():
        x = anb.tensor(x0, requires_grad=True)
        b = anb.tensor(b0)
        h = x
        for _ in range(3):
            h = anb.sigmoid(anb.tanh(h * 0.9 + 0.1) * b) - 0.25
        loss = anb.sum(h)
        plan = engine.make_plan([loss._node], [x], all_leaves=False)
        groups = fusion.groups(plan, {id(x)}, False, {id(loss._node)})
        return anb.grad(loss, x)[0].numpy(), len({id(g) for g in groups.values()})

    fused, n_groups = run()
    assert n_groups >= 1
    monkeypatch.setattr(config, "FUSE_BACKWARD", False)
    unfused, _ = run()
    np.testing.assert_array_equal(fused, unfused)
    monkeypatch.setattr(tiering, "backward_pending", True)
    twins, _ = run()
    np.testing.assert_array_equal(twins, unfused)


def test_fusion_groups_a_chain_and_stops_at_a_second_consumer(monkeypatch):
    monkeypatch.setattr(config, "FUSION_MIN_ELEMENTS", 1)
    x = anb.tensor(np.linspace(-1, 1, 5), requires_grad=True)
    a = anb.sin(x)
    b = anb.tanh(a) * 2.0
    c = anb.exp(b)
    loss = anb.sum(c * a)  # ``a`` has two consumers: the chain b, c stops above it
    plan = engine.make_plan([loss._node], [x], all_leaves=False)
    groups = fusion.groups(plan, {id(x)}, False, {id(loss._node)})
    chains = {id(g): [n.name for n in g.nodes] for g in groups.values()}
    assert sorted(chains.values()) == [["exp", "multiply", "tanh"]]
    expected = anb.grad(loss, x, retain_graph=True)[0].numpy()
    monkeypatch.setattr(config, "FUSE_BACKWARD", False)
    np.testing.assert_allclose(anb.grad(loss, x)[0].numpy(), expected, rtol=1e-15)


def test_long_chains_are_cut_into_groups_of_bounded_size(monkeypatch):
    # numba's compile time grows faster than a fused loop's length (and at 80 nodes its SSA
    # pass overflowed Python's stack): chains are cut at MAX_NODES nodes and MAX_OPERANDS
    # operand arrays, and every node is still fused.
    monkeypatch.setattr(config, "FUSION_MIN_ELEMENTS", 1)
    x = anb.tensor(np.linspace(-1, 1, 5), requires_grad=True)
    w = anb.tensor(np.linspace(0.5, 1.5, 5))
    n = 3 * config.FUSION_MAX_NODES + 2
    h = x
    for _ in range(n):
        h = h * w  # each VJP reads one operand array, w
    loss = anb.sum(h)
    plan = engine.make_plan([loss._node], [x], all_leaves=False)

    def sizes():
        found = fusion.groups(plan, {id(x)}, False, {id(loss._node)})
        return sorted(len(g.nodes) for g in {id(g): g for g in found.values()}.values())

    assert sizes() == sorted([config.FUSION_MAX_NODES] * 3 + [2])
    monkeypatch.setattr(fusion, "MAX_OPERANDS", 3)
    assert sizes() == sorted([3] * (n // 3) + ([n % 3] if n % 3 > 1 else []))
    (g,) = anb.grad(loss, x, retain_graph=True)
    np.testing.assert_allclose(g.numpy(), w.numpy() ** n, rtol=1e-13)


def test_saved_buffers_are_freed_and_the_inplace_check_fires():
    x = anb.tensor(np.linspace(0, 1, 4), requires_grad=True)
    y = anb.exp(x)
    z = anb.sum(y * y)
    anb.grad(z, x)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        anb.grad(z, x)
    y2 = anb.exp(x)
    z2 = anb.sum(anb.sin(y2))
    with anb.no_grad():
        y2 += 1.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        anb.grad(z2, x)


def test_backward_accumulates_into_leaves_and_retained_grads_over_two_calls():
    x = anb.tensor(np.linspace(-1, 1, 6).reshape(2, 3), requires_grad=True)
    h = anb.tanh(x)
    h.retain_grad()
    loss = anb.sum(h * h)
    loss.backward(retain_graph=True)
    loss.backward()
    t = np.tanh(np.linspace(-1, 1, 6).reshape(2, 3))
    np.testing.assert_allclose(h.grad.numpy(), 2 * (2 * t), rtol=1e-15)  # accumulates, as torch
    np.testing.assert_allclose(x.grad.numpy(), 2 * (2 * t * (1 - t * t)), rtol=1e-14)


@pytest.mark.compiled_only
def test_a_repeated_step_reuses_every_cached_piece_of_its_plan(monkeypatch):
    """What a repeated structure does not redo: drivers and their C entries, fused loops,
    per-shape instruction attributes and layouts (the tables themselves are kept from the
    second backward on: tests/engine/test_plan_cache.py)."""
    from autograd_nb.ops.registry import REGISTRY

    monkeypatch.setattr(config, "FUSION_MIN_ELEMENTS", 8)
    w = anb.tensor(np.linspace(-1, 1, 32).reshape(8, 4), requires_grad=True)
    x = anb.tensor(np.linspace(0, 1, 24).reshape(3, 8))

    def step():
        h = anb.tanh(x @ w) * 0.5 + 0.1
        return anb.grad(anb.sum(anb.sigmoid(h) * h), w)[0].numpy()

    first = step()
    entries = dict(_pointers._entries)
    modules = dict(fusion._modules)
    exec_caches = {name: dict(op._exec_cache) for name, op in REGISTRY.items()
                   if hasattr(op, "_exec_cache")}
    loads = []
    original = _pointers._kernels.load_module
    monkeypatch.setattr(_pointers._kernels, "load_module",
                        lambda *args: loads.append(args) or original(*args))
    for _ in range(3):
        np.testing.assert_array_equal(step(), first)
    assert loads == []
    assert _pointers._entries == entries
    assert fusion._modules == modules
    assert modules, "the chain was not fused"
    for name, cache in exec_caches.items():
        assert REGISTRY[name]._exec_cache == cache


@pytest.mark.compiled_only
def test_the_table_says_what_it_holds():
    # The lowered table (``machine``'s format) against the objects it names: each clearing
    # row clears whole slots, each driver row reads entries and values that exist, and the
    # values that are objects of their own (not the arena, not saved) are the seed and the
    # result.
    rng = np.random.default_rng(0)
    x = anb.tensor(rng.standard_normal((3, 70)), requires_grad=True)
    w = anb.tensor(rng.standard_normal((70, 80)))
    h = anb.tanh(x @ w)
    y = anb.sum(h * h + x.sum())
    plan = engine.make_plan([y._node], [x], False)
    tables, steps, results = executor.build(plan, [(y._node, np.ones(()))], {id(x)}, False,
                                            np.dtype(np.float64))
    table = machine.sections(tables.table)
    clears = table.rows[:, machine.ENTRY] == machine.ZERO
    assert clears.any() and (~clears).any()
    itemsize = tables.dtype.itemsize
    arena_bytes = tables.arena_size * itemsize
    slot_bytes = {_size(slot.edge.shape) * itemsize for slot in steps.slots}
    for r in np.flatnonzero(clears).tolist():
        (value,) = table.row_operands(r)
        obj, offset, _ = table.values[value]
        cleared = table.ints[table.rows[r, machine.INTS]]
        if obj == executor.ARENA_OBJECT:  # (the first clears the small slots together)
            assert cleared >= min(slot_bytes) and offset + cleared <= arena_bytes
        else:
            assert offset == 0 and cleared == tables.objects[obj].nbytes
    calls = ~clears
    entries = table.rows[calls, machine.ENTRY]
    assert (entries >= 0).all() and (entries < len(table.entries)).all()
    assert (table.operands >= 0).all() and (table.operands < len(table.values)).all()
    objects = table.values[:, machine.OBJECT]
    assert (objects >= 0).all() and (objects < len(tables.objects)).all()
    own = sorted({j for j in objects.tolist() if type(tables.origins[j]) is tuple} - {0})
    assert sorted(tables.origins[j][0] for j in own) == ["result", "seed"]
    (result,) = [tables.objects[j] for j in own if tables.origins[j][0] == "result"]
    assert result is results[id(x)]
    in_arena = objects == executor.ARENA_OBJECT
    offsets = table.values[:, machine.OFFSET]
    assert (offsets[in_arena] >= 0).all() and (offsets[in_arena] < arena_bytes).all()
    assert (offsets[~in_arena] == 0).all()


def _size(shape):
    return int(np.prod(shape, dtype=np.int64))
