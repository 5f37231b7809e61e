"""Recorded ops own their operands: a NumPy index array, mask or operand that the caller
changes after the forward never changes the gradient (it is that of the forward that ran)."""

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb.engine import plan_cache


@pytest.fixture(autouse=True)
def _fresh_templates():
    # Templates and miss counts are per structure and process-wide: earlier tests' graphs of
    # the same structure must not decide whether these make templates.
    plan_cache.clear()
    yield
    plan_cache.clear()


def _expected_counts(size, positions):
    counts = np.zeros(size)
    np.add.at(counts, positions, 1.0)
    return counts


def test_index_array_changed_after_forward():
    x = anb.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    i = np.array([0, 1])
    y = anb.sum(x[i])
    i[0] = 3
    (g,) = anb.grad(y, x)
    np.testing.assert_array_equal(g.numpy(), [1.0, 1.0, 0.0, 0.0])


def test_operand_changed_after_forward():
    c = np.array([5.0, 7.0])
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = anb.sum(x * c)
    c[:] = 0
    (g,) = anb.grad(y, x)
    np.testing.assert_array_equal(g.numpy(), [5.0, 7.0])


def test_reflected_and_general_operands_changed_after_forward():
    c = np.array([5.0, 7.0])
    w = np.array([[1.0, 2.0], [3.0, 4.0]])
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = anb.sum(c * x) + anb.sum(anb.matmul(w, x)) + anb.sum(anb.where(c > 6, x, 0.0))
    c[:] = 0
    w[:] = 0
    (g,) = anb.grad(y, x)
    np.testing.assert_array_equal(g.numpy(), [5.0 + 4.0, 7.0 + 6.0 + 1.0])


def test_tensor_index_changed_in_place_after_forward():
    x = anb.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    i = anb.tensor([0, 1])
    y = anb.sum(x[i])
    i[0] = 3
    (g,) = anb.grad(y, x)
    np.testing.assert_array_equal(g.numpy(), [1.0, 1.0, 0.0, 0.0])


@pytest.mark.parametrize("kind", ["int", "bool"])
@pytest.mark.parametrize("how", ["grad", "backward"])
@pytest.mark.parametrize("contents", ["new", "alternating"])
def test_refilled_index_buffer_loop(kind, how, contents):
    """One buffer refilled every step, as a training loop does: each step's gradient is that
    step's. With new positions every step the plan is made afresh (eager); with two
    alternating contents the structure's repeats are served by plan templates, which must
    match on the index's contents, not on the buffer object."""
    size = 10
    x = anb.tensor(np.arange(float(size)), requires_grad=True)
    index = np.zeros(3, dtype=np.int64) if kind == "int" else np.zeros(size, dtype=bool)
    hits = plan_cache.stats["hits"]
    for step in range(5 if contents == "new" else 8):
        start = step if contents == "new" else 3 * (step % 2)
        if kind == "int":
            index[:] = [start, start + 1, start + 2]
            positions = index.copy()
        else:
            index[:] = False
            index[start] = True
            positions = np.flatnonzero(index)
        y = anb.sum(anb.exp(x[index]) * 0.0 + x[index])
        if how == "grad":
            (g,) = anb.grad(y, x)
        else:
            x.grad = None
            y.backward()
            g = x.grad
        np.testing.assert_array_equal(g.numpy(), _expected_counts(size, positions))
    if contents == "alternating":
        assert plan_cache.stats["hits"] > hits


def test_refilled_operand_loop_from_template():
    x = anb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    scale = np.zeros(3)
    hits = plan_cache.stats["hits"]
    for step in range(5):
        scale[:] = [step, 2 * step, 3 * step]
        expected = scale.copy()
        y = anb.sum(anb.tanh(x) * 0.0 + x * scale)
        scale[:] = -1.0  # changed again before the backward
        x.grad = None
        y.backward()
        np.testing.assert_array_equal(x.grad.numpy(), expected)
    assert plan_cache.stats["hits"] > hits
