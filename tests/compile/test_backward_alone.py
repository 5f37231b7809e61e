"""A replayed output's backward run directly (its ``VJPStrategy.backward_alone``): the bits of the
planned backward, torch's errors, and the planner wherever the direct run declines."""

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb import config
from autograd_nb.replay import program


@pytest.fixture
def direct_runs(monkeypatch):
    """The number of backwards the direct path ran (not declined), as a one-item list."""
    ran = [0]
    strategy = type(program.ReplayOutput.vjp_strategy)
    alone = strategy.backward_alone

    def counted(self, *args):
        done = alone(self, *args)
        ran[0] += done is not None
        return done

    monkeypatch.setattr(strategy, "backward_alone", counted)
    return ran


def _step(x, w):
    return anb.sum(anb.tanh(x @ w) * x[:, :1] + anb.exp(w).sum(axis=0))


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    x = anb.tensor(rng.normal(size=(3, 4)), requires_grad=True)
    w = anb.tensor(rng.normal(size=(4, 2)), requires_grad=True)
    return x, w


def _planned(fn, args, **kwargs):
    """The gradients by the planner (no direct path, no template) of a fresh replay."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(config, "CACHED_PLANS", False)
        return anb.grad(fn(*args), args, **kwargs)


def test_same_bits_as_the_planned_backward(direct_runs):
    f = anb.compile(_step)
    x, w = _inputs()
    for _ in range(3):
        got = anb.grad(f(x, w), (x, w))
    assert direct_runs[0] > 0
    want = _planned(f, (x, w))
    eager = anb.grad(_step(x, w), (x, w))
    for a, b, c in zip(got, want, eager):
        assert a.numpy().tobytes() == b.numpy().tobytes() == c.numpy().tobytes()
    # one target of two, and a seed given as an array
    (g_w,) = anb.grad(f(x, w), w, grad_outputs=anb.tensor(2.0))
    (want_w,) = anb.grad(_step(x, w), w, grad_outputs=anb.tensor(2.0))
    assert g_w.numpy().tobytes() == want_w.numpy().tobytes()


def test_backward_accumulates_into_grad(direct_runs):
    f = anb.compile(_step)
    x, w = _inputs()
    for _ in range(3):
        f(x, w)
    before = direct_runs[0]
    f(x, w).backward()
    f(x, w).backward(inputs=[w])
    assert direct_runs[0] == before + 2
    ex, ew = _inputs()
    _step(ex, ew).backward()
    _step(ex, ew).backward(inputs=[ew])
    assert x.grad.numpy().tobytes() == ex.grad.numpy().tobytes()
    assert w.grad.numpy().tobytes() == ew.grad.numpy().tobytes()


def test_second_backward_without_retain_graph_raises():
    f = anb.compile(_step)
    x, w = _inputs()
    for _ in range(3):
        out = f(x, w)
    first = anb.grad(out, x, retain_graph=True)
    again = anb.grad(out, x)  # (retained by the first)
    assert first[0].numpy().tobytes() == again[0].numpy().tobytes()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        anb.grad(out, x)


def test_input_changed_in_place_raises_before_anything_runs():
    f = anb.compile(lambda x, w: anb.sum(anb.sin(x @ w)))
    x, w = _inputs()
    for _ in range(3):
        out = f(x, w)
    with anb.no_grad():
        w += 1.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        anb.grad(out, x)
    assert x.grad is None and w.grad is None


def test_declines_where_the_gradient_goes_past_the_call(direct_runs):
    f = anb.compile(_step)
    x0, w = _inputs()
    x = x0 * 2.0  # (an eager node before the call)
    for _ in range(3):
        out = f(x, w)
    before = direct_runs[0]
    g_x0, g_x = anb.grad(out, (x0, x))
    assert direct_runs[0] == before
    ex0, ew = _inputs()
    ex = ex0 * 2.0
    want_x0, want_x = anb.grad(_step(ex, ew), (ex0, ex))
    assert g_x0.numpy().tobytes() == want_x0.numpy().tobytes()
    assert g_x.numpy().tobytes() == want_x.numpy().tobytes()


def test_unused_input_raises_as_planned():
    f = anb.compile(lambda x, w: anb.sum(x * 3.0))
    x, w = _inputs()
    for _ in range(3):
        out = f(x, w)
    with pytest.raises(RuntimeError, match="appears to not have been used"):
        anb.grad(out, (x, w), retain_graph=True)
    g_x, g_w = anb.grad(out, (x, w), allow_unused=True)
    np.testing.assert_array_equal(g_x.numpy(), np.full((3, 4), 3.0))
    assert g_w is None
