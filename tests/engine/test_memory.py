"""The graph lives as long as the tensors that reach it: a long training loop holds flat memory."""

import gc
import tracemalloc

import numpy as np

import autograd_nb as anb
from autograd_nb import tape


def live_nodes():
    # issubclass(type(...)): numba leaves dead weakref proxies around, and isinstance on one
    # raises ReferenceError.
    return sum(1 for obj in gc.get_objects() if issubclass(type(obj), tape.Node))


def train_steps(w, x, target, steps, lr=0.01):
    for _ in range(steps):
        prediction = anb.tanh(x @ w)
        loss = ((prediction - target) ** 2).mean() if hasattr(anb, "mean") else (
            ((prediction - target) ** 2).sum())
        (g,) = anb.grad(loss, w)
        with anb.no_grad():
            w -= lr * g


def test_ten_thousand_training_steps_hold_flat_memory():
    rng = np.random.default_rng(0)
    w = anb.tensor(rng.standard_normal((4, 3)) * 0.1, requires_grad=True)
    x = anb.tensor(rng.standard_normal((8, 4)))
    target = anb.tensor(rng.standard_normal((8, 3)))
    train_steps(w, x, target, 200)  # compile and settle
    gc.collect()
    nodes_before = live_nodes()
    tracemalloc.start()
    train_steps(w, x, target, 1000)
    after_1000, _ = tracemalloc.get_traced_memory()
    train_steps(w, x, target, 9000)
    after_10000, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    gc.collect()
    assert live_nodes() == nodes_before
    # 9,000 more steps may not grow the heap beyond noise (a leak of one small array per
    # step would add over 500 kB).
    assert after_10000 - after_1000 < 100_000, (after_1000, after_10000)


def test_graph_is_freed_when_its_tensors_go():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    gc.collect()
    before = live_nodes()
    y = anb.exp(x * 2).sum()
    assert live_nodes() == before + 3
    del y
    assert live_nodes() == before  # freed by reference counting, without a gc pass
