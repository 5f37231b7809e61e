"""anb.checkpoint: torch.utils.checkpoint's semantics. Gradients bit for bit those of the
plain call (first and higher order), finite differences, torch's warnings and errors, NumPy's
random state kept for the recomputation, and no intermediate kept by the forward."""

import warnings

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb.autograd.checkpoint import CLOSURE_NODE
from tests.checks import check_gradients


def block(x, y, scale=2.0):
    h = anb.sin(x * y) + anb.exp(x / scale)
    return anb.tanh(h) * y, (h * h).sum()


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    x = anb.tensor(rng.standard_normal(5), requires_grad=True)
    y = anb.tensor(rng.standard_normal(5), requires_grad=True)
    return x, y


def _loss(outputs):
    a, b = outputs
    return (a * a).sum() + b


def _same(got, expected):
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(g.numpy(), e.numpy())


def _close(got, expected):
    """Higher order: the double backward sums the checkpoint's terms in another order."""
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-13, atol=1e-13)


def test_gradients_equal_plain_bit_for_bit():
    x, y = _inputs()
    plain = anb.grad(_loss(block(x, y, 3.0)), [x, y])
    outputs = anb.checkpoint(block, x, y, 3.0, use_reentrant=False)
    _same(outputs, block(x, y, 3.0))
    assert outputs[0].grad_fn.name == "CheckpointFunction"
    _same(anb.grad(_loss(outputs), [x, y]), plain)


def test_backward_accumulates_as_plain():
    x, y = _inputs(1)
    _loss(block(x, y)).backward()
    plain = (x.grad, y.grad)
    x.grad = y.grad = None
    _loss(anb.checkpoint(block, x, y, use_reentrant=False)).backward()
    _same((x.grad, y.grad), plain)


def test_higher_order_equals_plain_to_rounding():
    x, y = _inputs(2)

    def second(outputs):
        gx, gy = anb.grad(_loss(outputs), [x, y], create_graph=True)
        return anb.grad((gx * gy).sum(), [x, y])

    _close(second(anb.checkpoint(block, x, y, use_reentrant=False)), second(block(x, y)))


def test_finite_differences_and_second_order():
    def checkpointed(x, y):
        a, b = anb.checkpoint(block, x, y, use_reentrant=False)
        return a * b

    rng = np.random.default_rng(3)
    check_gradients(checkpointed, [rng.standard_normal(4), rng.standard_normal(4)])


def test_inputs_without_grad_and_non_tensor_arguments():
    x, _ = _inputs(4)
    y = anb.tensor(np.linspace(-1.0, 1.0, 5))  # requires no grad

    def fn(pair, scale, *, offset):
        a, b = pair
        return {"value": anb.sin(a * b) * scale + offset, "flag": "kept"}

    out = anb.checkpoint(fn, (x, y), 1.5, offset=0.25, use_reentrant=False)
    assert out["flag"] == "kept"
    plain = fn((x, y), 1.5, offset=0.25)
    _same(anb.grad(out["value"].sum(), x), anb.grad(plain["value"].sum(), x))
    assert not y.requires_grad and y.grad is None


def test_no_input_requiring_grad_gives_a_constant():
    out = anb.checkpoint(anb.exp, anb.tensor([1.0, 2.0]), use_reentrant=False)
    assert not out.requires_grad and out.grad_fn is None


def test_under_no_grad_runs_plainly():
    x, y = _inputs(5)
    with anb.no_grad():
        a, _ = anb.checkpoint(block, x, y, use_reentrant=False)
    assert not a.requires_grad


def test_closure_leaves_receive_gradients():
    x, w = _inputs(6)

    def fn(x):
        return anb.tanh(x * w).sum()

    plain = anb.grad(fn(x), [x, w])
    _same(anb.grad(anb.checkpoint(fn, x, use_reentrant=False), [x, w]), plain)
    # Only w requires grad: the output still depends on it.
    c = anb.tensor(x.numpy())
    out = anb.checkpoint(fn, c, use_reentrant=False)
    _same(anb.grad(out, w), anb.grad(fn(c), w))


def test_closure_non_leaf_is_refused():
    x, w = _inputs(7)
    w2 = w * 2.0

    with pytest.raises(RuntimeError, match="not a leaf and is not one of its arguments"):
        anb.checkpoint(lambda x: x * w2, x, use_reentrant=False)
    assert "Pass it as an argument" in CLOSURE_NODE


def test_argument_that_depends_on_another_is_not_counted_twice():
    x, _ = _inputs(8)

    def fn(a, b):
        return (a * b).sum()

    def both(x):  # the second argument is computed from the first
        return x, anb.sin(x)

    plain = anb.grad(fn(*both(x)), x)
    _same(anb.grad(anb.checkpoint(fn, *both(x), use_reentrant=False), x), plain)
    gx = anb.grad(anb.checkpoint(fn, *both(x), use_reentrant=False), x, create_graph=True)[0]
    gp = anb.grad(fn(*both(x)), x, create_graph=True)[0]
    _close(anb.grad(gx.sum(), x), anb.grad(gp.sum(), x))


def test_forward_keeps_no_intermediate():
    x, y = _inputs(9)
    a, b = anb.checkpoint(block, x, y, use_reentrant=False)
    (node,) = a.grad_fn.next_functions  # (each output's node routes into the function's)
    assert b.grad_fn.next_functions == (node,)
    # One node, whose edges are the arguments themselves (leaves): nothing of block's graph.
    assert node.next_functions[2:] == (x, y)


def test_use_reentrant_must_be_passed_or_warns():
    x, y = _inputs(10)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
        anb.checkpoint(block, x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        anb.checkpoint(block, x, y, use_reentrant=True)
        anb.checkpoint(block, x, y, use_reentrant=False)


def test_reentrant_refuses_keyword_arguments():
    x, y = _inputs(11)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
        anb.checkpoint(block, x, y, use_reentrant=True, scale=2.0)
    with pytest.raises(ValueError, match="determinism_check"):
        anb.checkpoint(block, x, y, use_reentrant=False, determinism_check="all")


def test_random_state_is_preserved():
    x, _ = _inputs(12)

    def noisy(x):
        return anb.sin(x) * np.random.standard_normal(x.shape)

    np.random.seed(0)
    plain = anb.grad(noisy(x).sum(), x)
    np.random.seed(0)
    out = anb.checkpoint(noisy, x, use_reentrant=False)
    after_forward = np.random.standard_normal()
    np.random.seed(0)
    noisy(x)
    assert np.random.standard_normal() == after_forward
    state = np.random.get_state()[1].copy()
    _same(anb.grad(out.sum(), x), plain)
    np.testing.assert_array_equal(np.random.get_state()[1], state)  # the recompute restored it
    np.random.seed(0)
    unpreserved = anb.checkpoint(noisy, x, use_reentrant=False, preserve_rng_state=False)
    assert not np.array_equal(anb.grad(unpreserved.sum(), x)[0].numpy(), plain[0].numpy())


def test_nondeterministic_shape_raises():
    x, _ = _inputs(13)
    calls = []

    def changing(x):
        calls.append(1)
        return x[: 6 - len(calls)] * 2.0

    out = anb.checkpoint(changing, x, use_reentrant=False)
    with pytest.raises(RuntimeError, match="different metadata"):
        anb.grad(out.sum(), x)


def test_second_backward_needs_retain_graph():
    x, y = _inputs(14)
    loss = _loss(anb.checkpoint(block, x, y, use_reentrant=False))
    first = anb.grad(loss, x, retain_graph=True)
    _same(anb.grad(loss, x), first)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        anb.grad(loss, x)


def test_input_modified_in_place_raises():
    x, y = _inputs(15)
    a, _ = anb.checkpoint(block, x, anb.tensor(y.numpy()), use_reentrant=False)
    z = anb.tensor(y.numpy())
    out = anb.checkpoint(lambda v: anb.exp(v) * x, z, use_reentrant=False)
    z += 1.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        anb.grad(out.sum(), x)
    assert a.requires_grad


def test_nested_checkpoints():
    x, y = _inputs(16)

    def outer(x, y):
        a, b = anb.checkpoint(block, x, y, use_reentrant=False)
        return anb.checkpoint(lambda u, v: anb.cos(u) * v, a, b, use_reentrant=False)

    def plain(x, y):
        a, b = block(x, y)
        return anb.cos(a) * b

    out = anb.checkpoint(outer, x, y, use_reentrant=False)
    _same(anb.grad(out.sum(), [x, y]), anb.grad(plain(x, y).sum(), [x, y]))


def test_inside_compile_matches_eager():
    x, y = _inputs(17)

    def loss(x, y):
        return _loss(anb.checkpoint(block, x, y, use_reentrant=False))

    compiled = anb.compile(loss)
    expected = loss(x, y)
    expected_grads = anb.grad(expected, [x, y])
    with pytest.warns(anb.CompileWarning, match="anb.checkpoint"):
        compiled(x, y)
    for _ in range(2):
        out = compiled(x, y)
        _same([out], [expected])
        _same(anb.grad(out, [x, y]), expected_grads)
