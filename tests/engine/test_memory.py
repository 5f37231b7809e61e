"""The graph lives as long as the tensors that reach it: a long training loop holds flat memory."""

import gc
import tracemalloc
import weakref

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb import tape


def node_references(tensor):
    """Weak references to every node reachable from ``tensor``. (Counting nodes with
    ``gc.get_objects()`` would miss them: :mod:`autograd_nb.collector` untracks them.)"""
    found, stack = {}, [tensor.grad_fn]
    while stack:
        node = stack.pop()
        if isinstance(node, tape.Node) and id(node) not in found:
            found[id(node)] = weakref.ref(node)
            stack.extend(node.edges)
    return list(found.values())


def train_steps(w, x, target, steps, lr=0.01, nodes=None):
    """``steps`` gradient steps; the nodes of every tenth step's graph go into ``nodes``."""
    for step in range(steps):
        prediction = anb.tanh(x @ w)
        loss = ((prediction - target) ** 2).mean()
        if nodes is not None and step % 10 == 0:
            nodes += node_references(loss)
        (g,) = anb.grad(loss, w)
        with anb.no_grad():
            w -= lr * g


@pytest.mark.slow
def test_ten_thousand_training_steps_hold_flat_memory():
    rng = np.random.default_rng(0)
    w = anb.tensor(rng.standard_normal((4, 3)) * 0.1, requires_grad=True)
    x = anb.tensor(rng.standard_normal((8, 4)))
    target = anb.tensor(rng.standard_normal((8, 3)))
    train_steps(w, x, target, 200)  # compile and settle
    gc.collect()
    nodes = []
    gc.disable()  # reference counting alone must free every step's graph: no cycle is made
    try:
        tracemalloc.start()
        train_steps(w, x, target, 1000, nodes=nodes)
        after_1000, _ = tracemalloc.get_traced_memory()
        train_steps(w, x, target, 9000)
        after_10000, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert len(nodes) > 500
        assert all(ref() is None for ref in nodes)
    finally:
        gc.enable()
    # 9,000 more steps may not grow the heap beyond noise (a leak of one small array per
    # step would add over 500 kB).
    assert after_10000 - after_1000 < 100_000, (after_1000, after_10000)


def test_graph_is_freed_when_its_tensors_go():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = anb.exp(x * 2).sum()
    nodes = node_references(y)
    assert len(nodes) == 3
    gc.collect()  # untracks them; it must not matter
    gc.disable()
    try:
        del y
        assert all(ref() is None for ref in nodes)  # freed by reference counting alone
    finally:
        gc.enable()
