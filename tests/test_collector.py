"""Tensors and recorded nodes leave the garbage collector's scans, and every cycle it must
break stays visible to it (autograd_nb.collector)."""

import gc
import weakref

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb import collector, config, tape
from autograd_nb.autograd import Function


def graph_nodes(tensor):
    """Every node reachable from ``tensor``'s grad_fn."""
    found, stack = {}, [tensor.grad_fn]
    while stack:
        node = stack.pop()
        if isinstance(node, tape.Node) and id(node) not in found:
            found[id(node)] = node
            stack.extend(node.edges)
    return list(found.values())


def small_graph():
    x = anb.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w = anb.tensor([1.5, 0.25, -0.75], requires_grad=True)
    y = (anb.tanh(x * w) + anb.exp(x)).sum()
    return x, w, y


@pytest.fixture(params=["compiled", "python"])
def walk(request, monkeypatch):
    """Run each test with the compiled walk over the young objects and with the Python one
    (which, under pytest-xdist, does not count execnet's thread: ``one_python_thread``)."""
    if request.param == "compiled":
        assert collector.load_compiled_walk(), "this CPython's layout was not recognised"
    else:
        monkeypatch.setattr(collector, "LAYOUT", None)
        request.getfixturevalue("one_python_thread")
    return request.param


def test_a_collection_untracks_tensors_plain_nodes_and_their_tuples(walk):
    x, w, y = small_graph()
    nodes = graph_nodes(y)
    assert len(nodes) == 5 and all(type(n) is tape.Node for n in nodes)
    gc.collect()  # the hook runs at the start of every collection
    assert not any(gc.is_tracked(t) for t in (x, w, y))
    for node in nodes:
        assert not gc.is_tracked(node)
        assert not gc.is_tracked(node.edges)
        assert not gc.is_tracked(node.versions)
    # The graph still works, and gives the closed form.
    gx, gw = anb.grad(y, [x, w])
    xv, wv = x.numpy(), w.numpy()
    t = np.tanh(xv * wv)
    np.testing.assert_allclose(gx.numpy(), (1 - t**2) * wv + np.exp(xv), rtol=1e-14)
    np.testing.assert_allclose(gw.numpy(), (1 - t**2) * xv, rtol=1e-14)


def test_with_the_switch_off_nodes_stay_tracked(monkeypatch):
    monkeypatch.setattr(config, "UNTRACK_GRAPHS", False)
    x, _, y = small_graph()
    gc.collect()
    assert all(gc.is_tracked(node) for node in graph_nodes(y))
    assert gc.is_tracked(x) and gc.is_tracked(y)


def test_an_untracked_graph_is_freed_by_reference_counting(walk):
    _, _, y = small_graph()
    gc.collect()
    references = [weakref.ref(node) for node in graph_nodes(y)]
    assert not any(gc.is_tracked(ref()) for ref in references)
    gc.disable()  # no collection may help
    try:
        del y
        assert all(ref() is None for ref in references)
    finally:
        gc.enable()


class KeepsItsOutput(Function):
    """Stores its output on ctx beside save_for_backward: the node must still not be on a
    cycle the collector cannot see (Function.apply hands out a fresh tensor, not this one)."""

    @staticmethod
    def forward(ctx, x):
        out = x * 2.0
        ctx.out = out
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * 2.0


def test_custom_function_nodes_stay_tracked(walk):
    x = anb.tensor([1.0, 3.0], requires_grad=True)
    y = KeepsItsOutput.apply(anb.sin(x))
    gc.collect()
    assert type(y.grad_fn) is not tape.Node and gc.is_tracked(y.grad_fn)
    (sine,) = [e for e in y.grad_fn.edges if isinstance(e, tape.Node)]
    assert not gc.is_tracked(sine)  # the plain node below it is untracked
    (g,) = anb.grad(y.sum(), x)
    np.testing.assert_allclose(g.numpy(), 2 * np.cos([1.0, 3.0]))


def test_a_node_still_being_built_is_left_tracked(walk):
    half_built = object.__new__(tape.Node)
    half_built.op = None  # edges and versions not set yet (another thread is building it)
    odd = object.__new__(tape.Node)
    odd.edges, odd.versions = 5, 7.0  # not tuples: untracking them would corrupt memory
    young = gc.get_objects(0)
    assert any(obj is half_built for obj in young) and any(obj is odd for obj in young)
    del young
    collector.untrack_young()
    assert gc.is_tracked(half_built) and gc.is_tracked(odd)


def cycle_is_collected(make_cycle, keep=True, monkeypatch=None):
    """Whether the leaf of the cycle ``make_cycle(leaf)`` builds is freed by gc.collect()."""
    if not keep:
        monkeypatch.setattr(collector, "keep_tracked", lambda owner, grad: None)
    x = anb.tensor([0.5, 1.5, -2.0], requires_grad=True)
    make_cycle(x)
    reference = weakref.ref(x)
    del x
    gc.collect()
    return reference() is None


def backward_with_create_graph(x):
    y = (anb.sin(x) * x).sum()
    gc.collect()  # untrack y's graph before the cycle closes
    y.backward(create_graph=True)  # x.grad's graph reaches x: x -> grad -> nodes -> x


def assign_a_grad_computed_from_the_leaf(x):
    y = anb.exp(x) * 2.0
    gc.collect()
    x.grad = y


def two_leaves_hold_each_other(x):
    w = anb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    gc.collect()
    x.grad = w
    w.grad = x  # x -> w -> x, no graph at all


def a_gradient_holds_its_leaf(x):
    (x * 3.0).sum().backward()  # x.grad: a fresh tensor made by backward, not kept
    gc.collect()
    x.grad.grad = x  # x -> x.grad -> x


CYCLES = [
    backward_with_create_graph,
    assign_a_grad_computed_from_the_leaf,
    two_leaves_hold_each_other,
    a_gradient_holds_its_leaf,
]


@pytest.mark.parametrize("make_cycle", CYCLES)
def test_a_cycle_through_grad_is_collected(walk, make_cycle):
    assert cycle_is_collected(make_cycle)


@pytest.mark.parametrize("make_cycle", CYCLES)
def test_without_keeping_the_cycle_would_leak(walk, make_cycle, monkeypatch):
    """The leak keep_tracked prevents is real: an untracked node on the cycle hides it."""
    assert not cycle_is_collected(make_cycle, keep=False, monkeypatch=monkeypatch)
    gc.collect()


def test_kept_nodes_stay_tracked_through_later_collections(walk):
    x = anb.tensor([0.5, 1.5], requires_grad=True)
    y = (anb.sin(x) * x).sum()
    gc.collect()
    y.backward(create_graph=True)
    kept = graph_nodes(x.grad)
    assert kept and all(n.kept for n in kept)
    gc.collect()
    gc.collect()
    assert all(gc.is_tracked(n) and gc.is_tracked(n.edges) for n in kept)
    # A kept node is still the node it was: a second derivative goes through it.
    (gg,) = anb.grad(x.grad.sum(), x)
    xv = x.numpy()
    np.testing.assert_allclose(gg.numpy(), 2 * np.cos(xv) - xv * np.sin(xv), rtol=1e-14)
    x.grad = None


def test_a_function_that_keeps_its_output_on_ctx_is_freed(walk):
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = anb.exp(KeepsItsOutput.apply(anb.sin(x)))
    gc.collect()
    references = [weakref.ref(node) for node in graph_nodes(y)]
    assert len(references) == 3
    del y
    gc.collect()
    assert all(ref() is None for ref in references)


def test_clearing_the_grad_frees_its_graph_without_a_collection(walk):
    x = anb.tensor([0.5, 1.5], requires_grad=True)
    y = (anb.sin(x) * x).sum()
    y.backward(create_graph=True)
    references = [weakref.ref(node) for node in graph_nodes(x.grad)]
    assert references
    del y
    gc.disable()  # no collection may help
    try:
        x.grad = None  # breaks the cycle: reference counting frees the rest
        assert all(ref() is None for ref in references)
    finally:
        gc.enable()


@pytest.mark.slow
def test_threads_recording_and_keeping_at_once(walk):
    """Collections (and their hook) run in whichever thread allocates, while other threads
    record graphs and store gradients that keep them tracked."""
    import threading

    w = anb.tensor([0.5, -1.0, 2.0])
    errors = []

    def work(seed):
        try:
            xv = np.random.default_rng(seed).standard_normal(3)
            for step in range(40):
                x = anb.tensor(xv, requires_grad=True)
                y = (anb.sin(x) * w).sum()
                y.backward(create_graph=True)  # x -> x.grad -> its graph -> x
                np.testing.assert_allclose(x.grad.numpy(), np.cos(xv) * w.numpy(), rtol=1e-14)
                if step % 10 == 0:
                    gc.collect()
        except Exception as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def test_a_tuple_another_thread_is_filling_survives_the_hook(walk):
    """``tuple(generator)`` fills a tuple it then resizes, which CPython refuses while anything
    else holds it. The hook's list of the young objects holds every one of them: while it
    lived across bytecode, a thread switch let another thread finish its tuple under it
    (``SystemError: bad argument to internal function``, within a second here; found by
    tests/reliability/test_threads.py on an empty cache)."""
    import sys
    import threading
    import time

    errors = []
    stop = time.perf_counter() + 3.0
    data = list(range(40))

    def fill():
        try:
            while time.perf_counter() < stop and not errors:
                tuple(int(n) for n in data)
        except SystemError as error:
            errors.append(error)

    def allocate():  # collections, in this thread, at every 50 allocations
        while time.perf_counter() < stop and not errors:
            [[i] for i in range(200)]

    interval, thresholds = sys.getswitchinterval(), gc.get_threshold()
    sys.setswitchinterval(1e-6)
    gc.set_threshold(50, 5, 5)
    try:
        threads = [threading.Thread(target=f) for f in (fill, fill, allocate, allocate)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
        gc.set_threshold(*thresholds)
    assert not errors, errors[0]
