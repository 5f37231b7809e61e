"""``matmul`` reads its CPU operands through views (``registry.call_view``): no copy of a weight
matrix per product, and the views share their base's version counter, so an in-place change
of an operand between the forward and the backward raises, as in torch."""

import numpy as np
import pytest

import autograd_nb as anb


def bmm_node(y):
    """The ``_bmm`` node under ``y`` (matmul's result, through its output reshape)."""
    node = y.grad_fn
    while node.name != "_bmm":
        node = node.edges[0]
    return node


@pytest.mark.parametrize("x_shape", [(3,), (3, 2), (4, 3, 2)])
def test_the_product_saves_views_of_its_operands(x_shape):
    w = anb.tensor(np.arange(12.0).reshape(4, 3), requires_grad=True)
    x = anb.tensor(np.linspace(-1, 1, int(np.prod(x_shape))).reshape(x_shape),
                   requires_grad=True)
    y = w @ x
    saved_w, saved_x = bmm_node(y).saved_inputs
    # (A batched right operand broadcasts the matrix over its batch: that one is a copy.)
    assert np.shares_memory(saved_w, w.numpy()) == (len(x_shape) <= 2)
    assert np.shares_memory(saved_x, x.numpy())
    gw, gx = anb.grad(anb.sum(y * y), [w, x])
    expected = w.numpy() @ x.numpy()
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-15)
    g = 2 * expected
    if len(x_shape) == 1:
        np.testing.assert_allclose(gw.numpy(), np.outer(g, x.numpy()), rtol=1e-14)
        np.testing.assert_allclose(gx.numpy(), w.numpy().T @ g, rtol=1e-14)
    else:
        xs = x.numpy()
        np.testing.assert_allclose(gw.numpy(), np.sum(g @ np.swapaxes(xs, -1, -2),
                                                      axis=tuple(range(len(x_shape) - 2))),
                                   rtol=1e-14)
        np.testing.assert_allclose(gx.numpy(), w.numpy().T @ g, rtol=1e-14)


@pytest.mark.parametrize("which", ["weight", "vector"])
def test_an_operand_changed_in_place_after_the_product_raises(which):
    w = anb.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    x = anb.tensor(np.array([1.0, -1.0, 0.5]), requires_grad=True)
    loss = anb.sum(anb.tanh(w @ x))
    with anb.no_grad():
        if which == "weight":
            w -= 0.1
        else:
            x *= 2.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_an_operand_changed_after_the_backward_is_fine():
    w = anb.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    x = anb.tensor(np.array([1.0, -1.0, 0.5]))
    for _ in range(2):  # an optimizer loop: forward, backward, update in place
        anb.sum(anb.tanh(w @ x)).backward()
        with anb.no_grad():
            w -= 0.1 * w.grad
        w.grad = None


def test_public_reshape_and_the_product_result_are_new_buffers():
    w = anb.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    r = anb.reshape(w, (3, 2))
    assert not np.shares_memory(r.numpy(), w.numpy())
    x = anb.tensor(np.array([1.0, 2.0, 3.0]))
    y = w @ x
    before = w.numpy().copy()
    with anb.no_grad():
        y += 1.0  # the result is not a view of an operand
    np.testing.assert_array_equal(w.numpy(), before)
    np.testing.assert_array_equal(y.numpy(), before @ x.numpy() + 1.0)


def test_a_non_contiguous_operand_is_copied_and_still_right():
    base = np.arange(24.0).reshape(4, 6)
    w = anb.as_tensor(base[:, ::2]) if hasattr(anb, "as_tensor") else anb.tensor(base[:, ::2])
    x = anb.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    (gx,) = anb.grad(anb.sum(w @ x), x)
    np.testing.assert_allclose(gx.numpy(), base[:, ::2].sum(axis=0), rtol=1e-15)
