"""Backward plans cached by structure (engine.plan_cache) against planning every backward.

A template replays the tables that planning wrote for an identical graph, so its gradients
must equal the uncached ones to the last bit; a graph that differs anywhere (an op, an edge,
a leaf, a constant, a dtype, a retain_grad, a version) must not run from it. Every test runs
twice: with the graph checked in compiled code (``engine.graph_reader``), and with the
Python checks alone (what runs where the compiled reader cannot).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autograd_nb as anb
from autograd_nb import config, tiering
from autograd_nb.engine import graph_reader, plan_cache

from .test_executor import programs, run_program


@pytest.fixture(autouse=True, params=["compiled check", "python check"])
def fresh_cache(request, monkeypatch):
    if request.param == "python check":
        monkeypatch.setattr(graph_reader, "_found", None)
    else:
        assert graph_reader.found_layout() is not None
    plan_cache.clear()
    yield
    plan_cache.clear()
    config.CACHED_PLANS = True


def hits():
    return plan_cache.stats["hits"]


def uncached(function):
    config.CACHED_PLANS = False
    try:
        return function()
    finally:
        config.CACHED_PLANS = True


def grads(loss_of, values, targets=None):
    """Gradients of ``loss_of(*leaves)`` with respect to new leaves holding ``values``."""
    leaves = [anb.tensor(v, requires_grad=True) for v in values]
    loss = loss_of(*leaves)
    chosen = leaves if targets is None else [leaves[i] for i in targets]
    return [g.numpy() for g in anb.grad(loss, chosen, allow_unused=True,
                                        materialize_grads=True)]


def assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def scalar_chain(x, y):
    h = x * y + anb.softplus(x)
    s = anb.softmax(anb.stack([h, x, y * 0.5, h * h]))
    return s[0] * s[3] + anb.sum(s)


@settings(max_examples=40, deadline=None)
@given(programs(), st.sampled_from(["float64", "float32"]))
def test_repeated_random_programs_run_from_a_template_with_the_same_bits(steps, dtype):
    rng = np.random.default_rng(len(steps))
    runs = [(rng.uniform(-1, 1, (3, 4)).astype(dtype), rng.uniform(-1, 1, (4,)).astype(dtype))
            for _ in range(4)]
    plan_cache.clear()
    before = hits()
    for x0, w0 in runs:
        cached = grads(lambda x, w: run_program(steps, x, w), (x0, w0))
        expected = uncached(
            lambda x0=x0, w0=w0: grads(lambda x, w: run_program(steps, x, w), (x0, w0))
        )
        assert_same(cached, expected)
    # Programs whose every node has an executor driver repeat from a template from the third
    # run on (the second makes it).
    assert hits() - before in (0, 2)


@pytest.mark.compiled_only
def test_a_repeated_scalar_graph_hits_and_matches_the_uncached_backward():
    values = [np.array(0.3), np.array(-0.7)]
    first = grads(scalar_chain, values)
    grads(scalar_chain, values)
    before = hits()
    for scale in (1.0, 2.0, -0.5):
        scaled = [v * scale for v in values]
        expected = uncached(lambda scaled=scaled: grads(scalar_chain, scaled))
        assert_same(grads(scalar_chain, scaled), expected)
    assert hits() - before == 3
    assert_same(grads(scalar_chain, values), first)


@pytest.mark.compiled_only
def test_backward_accumulates_from_a_template_as_without():
    def step(x, y):
        loss = scalar_chain(x, y)
        loss.backward()

    for _ in range(2):
        step(*[anb.tensor(v, requires_grad=True) for v in (0.3, -0.7)])
    before = hits()
    x, y = (anb.tensor(v, requires_grad=True) for v in (0.2, 0.4))
    step(x, y)
    step(x, y)  # accumulates into .grad
    assert hits() - before == 2
    config.CACHED_PLANS = False
    x2, y2 = (anb.tensor(v, requires_grad=True) for v in (0.2, 0.4))
    step(x2, y2)
    step(x2, y2)
    np.testing.assert_array_equal(x.grad.numpy(), x2.grad.numpy())
    np.testing.assert_array_equal(y.grad.numpy(), y2.grad.numpy())


def warm(loss_of, values):
    for _ in range(2):
        grads(loss_of, values)


@pytest.mark.parametrize(
    "variant",
    [
        lambda x, y: anb.sum(anb.sin(x) * y),  # another unary op
        lambda x, y: anb.sum(anb.tanh(x) * x),  # an edge to another leaf
        lambda x, y: anb.sum(anb.tanh(x) * anb.tanh(x)),  # two nodes where one was shared
        lambda x, y: anb.sum(anb.tanh(x) * (y + 1.0)),  # one more node
        lambda x, y: anb.sum(anb.tanh(x) * y.detach()),  # an edge that leads nowhere
        lambda x, y: anb.sum(anb.tanh(x) * y) * 3.0,  # a different constant
    ],
)
def test_a_graph_differing_anywhere_does_not_run_from_the_template(variant):
    def base(x, y):
        t = anb.tanh(x)
        return anb.sum(t * y)

    values = [np.linspace(-1, 1, 6), np.linspace(0.5, 2, 6)]
    warm(base, values)
    assert_same(grads(variant, values), uncached(lambda: grads(variant, values)))


def test_two_template_leaves_that_are_one_tensor_here_do_not_match():
    def loss_of(x, y):
        return anb.sum(anb.tanh(x) * anb.exp(y))

    x, y = (anb.tensor(np.linspace(-1, 1, 4), requires_grad=True) for _ in range(2))
    for _ in range(2):
        anb.grad(loss_of(x, y), [x, y])
    before = hits()
    same = anb.grad(loss_of(x, x), [x])[0].numpy()
    assert hits() == before
    t, e = np.tanh(x.numpy()), np.exp(x.numpy())
    np.testing.assert_allclose(same, (1 - t * t) * e + t * e, rtol=1e-14)


def test_a_dtype_change_behind_a_constant_does_not_match():
    def loss_of(x, c):
        return lambda: anb.sum(anb.tensor(c) * anb.tanh(x))

    x = anb.tensor(np.linspace(-1, 1, 4).astype("float32"), requires_grad=True)
    c32 = np.full(4, 0.5, dtype="float32")
    for _ in range(2):
        anb.grad(loss_of(x, c32)(), x)
    c64 = np.full(4, 0.5)
    cached = anb.grad(loss_of(x, c64)(), x)[0]
    config.CACHED_PLANS = False
    expected = anb.grad(loss_of(x, c64)(), x)[0]
    assert cached.dtype == expected.dtype
    np.testing.assert_array_equal(cached.numpy(), expected.numpy())


def springs(x):
    """Slices, as a simulation step writes them (fresh slice objects every call)."""
    d = x[1:] - x[:-1]
    return anb.sum(anb.sqrt(anb.sum(d * d, axis=1)))


def picked(x):
    """Advanced indexing with index arrays made afresh every call."""
    rows, cols = np.arange(3), np.array([0, 2, 1])
    return anb.sum(anb.tanh(x[rows, cols]) * x[[0, 2, 2]][:, 1])


@pytest.mark.parametrize("loss_of", [springs, picked])
@pytest.mark.compiled_only
def test_sliced_and_array_indexed_graphs_run_from_a_template(loss_of):
    values = [np.linspace(-1, 2, 12).reshape(4, 3)]
    warm(loss_of, values)
    before = hits()
    for scale in (1.0, -0.5):
        scaled = [values[0] * scale]
        expected = uncached(lambda scaled=scaled: grads(loss_of, scaled))
        assert_same(grads(loss_of, scaled), expected)
    assert hits() - before == 2


@pytest.mark.parametrize(
    "variant",
    [
        lambda x: anb.sum(anb.tanh(x[:-1]) * x[1:]),  # other slices, the same shapes
        lambda x: anb.sum(anb.tanh(x[1:]) * x[:-1:1]),  # a step given
        lambda x: anb.sum(anb.tanh(x[[3, 2, 1]]) * x[:-1]),  # an index list, other values
        lambda x: anb.sum(anb.tanh(x[np.array([1, 2, 2])]) * x[:-1]),  # another index array
    ],
)
def test_a_different_index_does_not_run_from_the_template(variant):
    def base(x):
        return anb.sum(anb.tanh(x[np.array([1, 2, 3])]) * x[:-1])

    values = [np.linspace(-1, 2, 4)]
    warm(base, values)
    before = hits()
    assert_same(grads(variant, values), uncached(lambda: grads(variant, values)))
    assert hits() == before


def test_errors_fire_from_a_template_as_from_planning():
    def loss_of(x):
        return anb.sum(anb.sin(x * 1.0) * 2.0)

    warm(loss_of, [np.ones(3)])
    x = anb.tensor(np.ones(3), requires_grad=True)
    loss = loss_of(x)
    anb.grad(loss, x, retain_graph=False)
    with pytest.raises(RuntimeError, match="second time"):
        anb.grad(loss, x)  # freed by the first backward
    h = anb.tensor(np.ones(3), requires_grad=True) * 1.0
    loss = anb.sum(anb.sin(h) * 2.0)
    with anb.no_grad():
        h += 1  # modified after sin saved it
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_an_unused_input_raises_unless_allowed_from_a_template_too():
    def loss_of(x, unused):
        return anb.sum(anb.tanh(x))

    values = [np.ones(2), np.ones(2)]
    warm(loss_of, values)
    x, unused = (anb.tensor(v, requires_grad=True) for v in values)
    with pytest.raises(RuntimeError, match="not have been used"):
        anb.grad(loss_of(x, unused), [x, unused])
    x, unused = (anb.tensor(v, requires_grad=True) for v in values)
    result = anb.grad(loss_of(x, unused), [x, unused], allow_unused=True)
    assert result[1] is None


def test_an_unreachable_target_reachable_now_does_not_match():
    x = anb.tensor(np.linspace(0, 1, 3), requires_grad=True)
    other = anb.tensor(np.ones(3), requires_grad=True)
    for _ in range(2):
        anb.grad(anb.sum(anb.sin(x)), [x, other], allow_unused=True)
    h = anb.sin(x)
    loss = anb.sum(h)
    # ``h`` was never a target; asking for it now must give its gradient.
    dx, dh = anb.grad(loss, [x, h], allow_unused=True)
    np.testing.assert_array_equal(dh.numpy(), np.ones(3))


def test_retain_grad_in_a_repeated_structure_is_filled():
    for _ in range(3):
        x = anb.tensor(np.linspace(-1, 1, 4), requires_grad=True)
        h = anb.tanh(x)
        h.retain_grad()
        anb.sum(h * h).backward()
        np.testing.assert_allclose(h.grad.numpy(), 2 * np.tanh(x.numpy()), rtol=1e-15)


def test_retain_grad_on_a_node_shared_with_templated_graphs_is_filled():
    # The structure repeats without retain_grad (a template is made), then a node that later
    # graphs share asks for its gradient: those graphs must not run from the template.
    x = anb.tensor(np.linspace(-1, 1, 4), requires_grad=True)
    for _ in range(3):
        anb.sum(anb.tanh(x) * x).backward()
    h = anb.tanh(x)
    made = anb.sum(h * x)  # older than the retain_grad below
    h.retain_grad()
    for expected in (1, 2):
        anb.sum(h * x).backward(retain_graph=True)
        np.testing.assert_allclose(h.grad.numpy(), expected * x.numpy(), rtol=1e-15)
    made.backward()
    np.testing.assert_allclose(h.grad.numpy(), 3 * x.numpy(), rtol=1e-15)


def test_retain_graph_keeps_the_buffers_for_a_second_backward():
    warm(scalar_chain, [np.array(0.1), np.array(0.2)])
    x, y = (anb.tensor(v, requires_grad=True) for v in (0.1, 0.2))
    loss = scalar_chain(x, y)
    first = anb.grad(loss, [x, y], retain_graph=True)
    second = anb.grad(loss, [x, y])
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.compiled_only
def test_an_optimizer_step_between_backwards_keeps_hitting_with_the_same_results():
    w0 = np.linspace(-1, 1, 6)

    def train(steps):
        w = anb.tensor(w0, requires_grad=True)
        history = []
        for _ in range(steps):
            (g,) = anb.grad(anb.sum(anb.tanh(w * 1.5) * w), w)
            with anb.no_grad():
                w -= 0.1 * g  # in place, between backwards: the graph after it is newer
            history.append(w.numpy().copy())
        return history

    before = hits()
    cached = train(6)
    assert hits() - before == 4
    for a, b in zip(cached, uncached(lambda: train(6))):
        np.testing.assert_array_equal(a, b)


def test_a_freed_node_shared_by_a_later_graph_raises_from_a_template_too():
    for _ in range(2):
        x = anb.tensor(np.ones(3), requires_grad=True)
        anb.grad(anb.sum(anb.sin(anb.sin(x * 1.0))), x)
    x = anb.tensor(np.ones(3), requires_grad=True)
    h = anb.sin(x * 1.0)
    anb.grad(anb.sum(anb.sin(h)), x)  # frees h's node (sin saved its input)
    with pytest.raises(RuntimeError, match="second time"):
        anb.grad(anb.sum(anb.sin(h)), x)


@pytest.mark.parametrize("cached", [True, False])
def test_the_callers_grad_outputs_are_only_read(cached):
    # The seeds are read in place (no copy) where they are C-contiguous and of the graph's
    # dtype: a backward must leave them as they were, also when an output feeds another one.
    config.CACHED_PLANS = cached
    x = anb.tensor(np.linspace(-1, 1, 4), requires_grad=True)
    for _ in range(4):
        y = anb.outer(x, x)
        z = anb.tanh(y) * y
        vz, vy = np.full((4, 4), 0.5), np.linspace(1, 2, 16).reshape(4, 4)
        before = vz.copy(), vy.copy()
        (gx,) = anb.grad([z, y], x, grad_outputs=[anb.tensor(vz), anb.tensor(vy)])
        np.testing.assert_array_equal(vz, before[0])
        np.testing.assert_array_equal(vy, before[1])
        outer = np.outer(x.numpy(), x.numpy())
        t = np.tanh(outer)
        dy = vy + vz * ((1 - t * t) * outer + t)  # dL/dy, z = tanh(y) * y
        np.testing.assert_allclose(gx.numpy(), (dy + dy.T) @ x.numpy(), rtol=1e-13)


def served():
    """Backwards a template serves per cached call: none in tier 0 (``--tier=0``: the
    twins' walk runs every backward)."""
    return 0 if tiering.backward_pending else 1


def test_one_op_templates_match_only_their_leaves():
    # A graph of its outputs alone (no node below them): the checks read the leaves off the
    # outputs' edges.
    def product(x, y):
        out = x * y
        return anb.grad(out, [x, y], grad_outputs=anb.ones(out.shape))

    x, y = (anb.tensor(np.linspace(-1, 1, 5) + k, requires_grad=True) for k in range(2))
    for _ in range(2):
        product(x, y)
    z = anb.tensor(np.linspace(2, 3, 5), requires_grad=True)
    before = hits()
    got = [g.numpy() for g in product(x, z)]  # another leaf of the same shape: served
    assert hits() == before + served()
    assert_same(got, uncached(lambda: [g.numpy() for g in product(x, z)]))
    for other in (anb.tensor(np.ones(5, dtype=np.float32), requires_grad=True),
                  anb.tensor(np.ones((1, 5)), requires_grad=True), x):
        before = hits()
        if other is x:
            got = [anb.grad(x * x, x, grad_outputs=anb.ones(5))[0].numpy()]
            expected = [2 * x.numpy()]
        else:
            got = [g.numpy() for g in product(x, other)]
            expected = uncached(lambda other=other: [g.numpy() for g in product(x, other)])
        assert hits() == before
        assert_same(got, expected)


def test_two_outputs_and_no_node_below_them_run_from_a_template():
    def both(x):
        return anb.grad([anb.exp(x), anb.sin(x)], x,
                        grad_outputs=[anb.ones(x.shape), anb.full(x.shape, 2.0)])

    x = anb.tensor(np.linspace(-1, 1, 7), requires_grad=True)
    for _ in range(2):
        both(x)
    before = hits()
    got = [g.numpy() for g in both(x)]
    assert hits() == before + served()
    assert_same(got, uncached(lambda: [g.numpy() for g in both(x)]))
    np.testing.assert_allclose(got[0], np.exp(x.numpy()) + 2 * np.cos(x.numpy()), rtol=1e-14)
