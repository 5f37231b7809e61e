"""Every row of API.md's error table: the error type, its message, and that nothing changed."""

import re

import numpy as np
import pytest

import autograd_nb as anb


def snapshot(*tensors):
    return [
        (t.numpy().copy(), None if t.grad is None else t.grad.numpy().copy(), t.grad_fn,
         t._version_number)
        for t in tensors
    ]


def assert_unchanged(before, *tensors):
    for (data, grad, grad_fn, version), t in zip(before, tensors):
        np.testing.assert_array_equal(t.numpy(), data)
        if grad is None:
            assert t.grad is None
        else:
            np.testing.assert_array_equal(t.grad.numpy(), grad)
        assert t.grad_fn is grad_fn
        assert t._version_number == version


@pytest.fixture
def graph():
    x = anb.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    x.grad = anb.tensor([0.5, 0.5, 0.5, 0.5])
    y = anb.matmul(anb.reshape(x, (4, 1)), anb.reshape(x, (1, 4)))
    return x, y


def check_graph_still_works(x, y):
    (g,) = anb.grad(y, x, grad_outputs=anb.ones_like(y))
    np.testing.assert_allclose(g.numpy(), [20.0] * 4)


def test_implicit_grad_needs_a_scalar_output(graph):
    x, y = graph
    before = snapshot(x, y)
    message = "grad can be implicitly created only for scalar outputs"
    with pytest.raises(RuntimeError, match=message):
        y.backward()
    with pytest.raises(RuntimeError, match=message):
        anb.grad(y, x)
    assert_unchanged(before, x, y)
    check_graph_still_works(x, y)


def test_grad_output_of_the_wrong_shape_names_both(graph):
    x, y = graph
    before = snapshot(x, y)
    message = re.escape(
        "Mismatch in shape: grad_output[0] has a shape of (4,) and output[0] has a shape of "
        "(4, 4)."
    )
    with pytest.raises(RuntimeError, match=message):
        anb.grad(y, x, grad_outputs=anb.ones(4))
    with pytest.raises(RuntimeError, match=message):
        y.backward(anb.ones(4))
    assert_unchanged(before, x, y)
    check_graph_still_works(x, y)


def test_batched_grad_output_of_the_wrong_trailing_shape(graph):
    x, y = graph
    before = snapshot(x, y)
    with pytest.raises(RuntimeError, match=r"is_grads_batched.*\(3, 4\).*\(4, 4\)"):
        anb.grad(y, x, grad_outputs=anb.ones((3, 4)), is_grads_batched=True)
    assert_unchanged(before, x, y)
    check_graph_still_works(x, y)


def test_unused_input_without_allow_unused(graph):
    x, y = graph
    other = anb.tensor([1.0], requires_grad=True)
    before = snapshot(x, y, other)
    with pytest.raises(RuntimeError, match=re.escape(
        "One of the differentiated Tensors appears to not have been used in the graph. "
        "Set allow_unused=True if this is the desired behavior."
    )):
        anb.grad(y, (x, other), grad_outputs=anb.ones_like(y))
    assert_unchanged(before, x, y, other)
    check_graph_still_works(x, y)


def test_materialize_grads_with_allow_unused_false(graph):
    x, y = graph
    both = "allow_unused.*materialize_grads|materialize_grads.*allow_unused"
    with pytest.raises(ValueError, match=both):
        anb.grad(y, x, grad_outputs=anb.ones_like(y), allow_unused=False, materialize_grads=True)
    check_graph_still_works(x, y)


def test_output_that_does_not_require_grad():
    x = anb.tensor([1.0, 2.0])
    y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad and does "
                                           "not have a grad_fn"):
        y.backward()
    z = anb.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="element 1 of tensors does not require grad"):
        anb.grad((z.sum(), y), z)


def test_second_backward_through_a_freed_graph(graph):
    x, y = graph
    s = anb.exp(y).sum()
    s.backward()
    grad_after_first = x.grad.numpy().copy()
    before = snapshot(x)
    with pytest.raises(RuntimeError, match=r"Trying to backward through the graph a second time"
                                           r"[\s\S]*retain_graph=True"):
        s.backward()
    assert_unchanged(before, x)
    np.testing.assert_array_equal(x.grad.numpy(), grad_after_first)


def test_saved_tensor_modified_in_place(graph):
    x, _ = graph
    h = x * 1.0
    y = (h * h).sum()  # multiply saves h
    h += 1.0
    before = snapshot(x, h)
    with pytest.raises(RuntimeError, match="one of the variables needed for gradient "
                                           "computation has been modified by an inplace operation"):
        y.backward()
    assert_unchanged(before, x, h)


def test_saved_output_modified_in_place():
    x = anb.tensor([0.1, 0.2], requires_grad=True)
    y = anb.exp(x)  # exp saves its result
    z = y.sum()
    y *= 2.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()
    assert x.grad is None


def test_in_place_on_a_leaf_that_requires_grad():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    before = snapshot(x)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in "
                                           "an in-place operation"):
        x += 1.0
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        x[0] = 5.0
    assert_unchanged(before, x)
    with anb.no_grad():
        x += 1.0
    np.testing.assert_array_equal(x.numpy(), [2.0, 3.0])


def test_requires_grad_on_integer_or_bool_data():
    message = "only Tensors of floating point dtype can require gradients"
    for data in ([1, 2], [True, False]):
        with pytest.raises(RuntimeError, match=message):
            anb.tensor(data, requires_grad=True)
        with pytest.raises(RuntimeError, match=message):
            anb.tensor(data).requires_grad_()
    with pytest.raises(RuntimeError, match=message):
        anb.zeros(3, dtype=np.int64, requires_grad=True)


def test_grad_outputs_length_differs_from_outputs(graph):
    x, y = graph
    before = snapshot(x, y)
    with pytest.raises(RuntimeError, match=r"got 2 grad_outputs.*1 outputs"):
        anb.grad(y, x, grad_outputs=(anb.ones_like(y), anb.ones_like(y)))
    z = (x * 2).sum()
    with pytest.raises(RuntimeError, match=r"got 1 grad_outputs.*2 outputs"):
        anb.grad((y, z), x, grad_outputs=[anb.ones_like(y)])
    assert_unchanged(before, x, y)
    check_graph_still_works(x, y)


def test_mixing_devices_names_both():
    with pytest.raises(RuntimeError, match="cuda and cpu"):
        anb.tensor([1.0], device="cuda") + anb.tensor([1.0, 2.0])


def test_differentiating_a_tensor_that_does_not_require_grad():
    x = anb.tensor([1.0], requires_grad=True)
    c = anb.tensor([2.0])
    with pytest.raises(RuntimeError, match="does not require grad"):
        anb.grad((x * c).sum(), c)
