"""grad() and backward() semantics, keyword by keyword, against closed forms and NumPy."""

import threading
import warnings

import numpy as np
import pytest

import autograd_nb as anb


def test_outer_with_ones_is_twice_the_sum():
    x = anb.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y = anb.matmul(anb.reshape(x, (4, 1)), anb.reshape(x, (1, 4)))
    (g,) = anb.grad(y, x, grad_outputs=anb.ones_like(y))
    np.testing.assert_allclose(g.numpy(), np.full(4, 2 * x.numpy().sum()))


def test_grad_output_is_the_v_of_v_transpose_j():
    # out = x @ a, so dL/dx = v @ a.T for v = dL/d out.
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4))
    v = rng.standard_normal((2, 4))
    x = anb.ones((2, 3), requires_grad=True)
    out = x @ anb.tensor(a)
    out.backward(anb.tensor(v))
    np.testing.assert_allclose(x.grad.numpy(), v @ a.T)


def test_weighted_sum_of_losses_equals_grad_outputs_weights():
    w = anb.tensor([0.5, -1.0, 2.0], requires_grad=True)
    l1 = (w * w).sum()
    l2 = anb.sin(w).sum()
    (combined,) = anb.grad(l1 + 2 * l2, w, retain_graph=True)
    (split,) = anb.grad((l1, l2), w, grad_outputs=(anb.tensor(1.0), anb.tensor(2.0)))
    np.testing.assert_allclose(combined.numpy(), split.numpy())
    np.testing.assert_allclose(combined.numpy(), 2 * w.numpy() + 2 * np.cos(w.numpy()))


def test_grad_outputs_may_be_numpy_arrays_and_single_tensors():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    (g,) = anb.grad(y, x, np.array([1.0, 10.0]))
    np.testing.assert_allclose(g.numpy(), [3.0, 30.0])


def test_grad_with_respect_to_an_intermediate_tensor():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    h = x * x
    y = anb.exp(h).sum()
    gh, gx = anb.grad(y, (h, x))
    np.testing.assert_allclose(gh.numpy(), np.exp([1.0, 4.0]))
    np.testing.assert_allclose(gx.numpy(), np.exp([1.0, 4.0]) * 2 * np.array([1.0, 2.0]))


def test_grad_of_a_leaf_with_respect_to_itself():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    (g,) = anb.grad(x, x, grad_outputs=anb.tensor([3.0, 4.0]))
    np.testing.assert_allclose(g.numpy(), [3.0, 4.0])


def test_several_outputs_and_inputs_sum_their_vjps():
    a = anb.tensor([1.0, 2.0], requires_grad=True)
    b = anb.tensor([3.0, 5.0], requires_grad=True)
    y1 = a * b
    y2 = a + b
    ga, gb = anb.grad((y1, y2), (a, b), grad_outputs=(anb.ones(2), anb.full(2, 2.0)))
    np.testing.assert_allclose(ga.numpy(), b.numpy() + 2)
    np.testing.assert_allclose(gb.numpy(), a.numpy() + 2)


def test_grad_does_not_touch_dot_grad():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    anb.grad((x * x).sum(), x)
    assert x.grad is None


def test_backward_accumulates_into_grad():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 4 * x.numpy())
    x.grad = None
    (3 * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])


def test_backward_inputs_restricts_accumulation():
    a = anb.tensor([1.0], requires_grad=True)
    b = anb.tensor([2.0], requires_grad=True)
    (a * b).sum().backward(inputs=[a])
    np.testing.assert_allclose(a.grad.numpy(), [2.0])
    assert b.grad is None


def test_retain_grad_fills_intermediate_grad():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    h.retain_grad()
    (h * h).sum().backward()
    np.testing.assert_allclose(h.grad.numpy(), 2 * h.numpy())
    np.testing.assert_allclose(x.grad.numpy(), 4 * h.numpy())
    assert h.retains_grad


def test_retain_graph_allows_a_second_pass_and_defaults_to_create_graph():
    x = anb.tensor([0.3, 0.7], requires_grad=True)
    y = anb.exp(x).sum()
    (g1,) = anb.grad(y, x, retain_graph=True)
    (g2,) = anb.grad(y, x)
    np.testing.assert_allclose(g1.numpy(), g2.numpy())
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        anb.grad(y, x)
    z = anb.exp(x).sum()
    anb.grad(z, x, create_graph=True)  # retain_graph defaults to True here
    (g3,) = anb.grad(z, x)
    np.testing.assert_allclose(g3.numpy(), np.exp(x.numpy()))


def test_second_pass_through_ops_that_save_nothing_is_allowed():
    # As torch: only nodes that saved buffers need them again.
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = (x + 1).sum()
    y.backward()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_create_graph_to_third_order():
    x = anb.tensor([0.5, 1.5], requires_grad=True)
    y = (x**3).sum()
    (g1,) = anb.grad(y, x, create_graph=True)
    (g2,) = anb.grad(g1.sum(), x, create_graph=True)
    (g3,) = anb.grad(g2.sum(), x)
    np.testing.assert_allclose(g1.numpy(), 3 * x.numpy() ** 2)
    np.testing.assert_allclose(g2.numpy(), 6 * x.numpy())
    np.testing.assert_allclose(g3.numpy(), [6.0, 6.0])


def test_create_graph_results_depend_on_grad_outputs():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    v = anb.tensor([3.0, 4.0], requires_grad=True)
    y = anb.sin(x)
    (g,) = anb.grad(y, x, grad_outputs=v, create_graph=True)
    (gv,) = anb.grad(g.sum(), v)
    np.testing.assert_allclose(gv.numpy(), np.cos(x.numpy()))


def test_backward_create_graph_gives_differentiable_grad():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    (x**2).sum().backward(create_graph=True)
    assert x.grad.requires_grad
    (gg,) = anb.grad(x.grad.sum(), x)
    np.testing.assert_allclose(gg.numpy(), [2.0, 2.0])


def test_allow_unused_and_materialize_grads():
    a = anb.tensor([1.0], requires_grad=True)
    b = anb.tensor([2.0], requires_grad=True)
    y = (a * 2).sum()
    ga, gb = anb.grad(y, (a, b), allow_unused=True, retain_graph=True)
    assert gb is None
    ga, gb = anb.grad(y, (a, b), materialize_grads=True)
    np.testing.assert_array_equal(gb.numpy(), [0.0])
    np.testing.assert_array_equal(ga.numpy(), [2.0])


def test_only_inputs_is_deprecated_and_warns():
    x = anb.tensor([1.0], requires_grad=True)
    with pytest.warns(UserWarning, match="only_inputs argument is deprecated"):
        (g,) = anb.grad((x * 2).sum(), x, only_inputs=True)
    np.testing.assert_array_equal(g.numpy(), [2.0])


def test_grad_is_zero_not_missing_through_a_zero_derivative():
    x = anb.tensor([1.0, -2.0], requires_grad=True)
    (g,) = anb.grad(anb.sign(x).sum(), x)
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0])


def test_is_grads_batched_equals_stacked_single_vjps():
    rng = np.random.default_rng(3)
    w = anb.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    x = anb.tensor(rng.standard_normal(4), requires_grad=True)
    y = anb.tanh(w @ x)
    v = rng.standard_normal((5, 3))
    gw, gx = anb.grad(y, (w, x), grad_outputs=anb.tensor(v), is_grads_batched=True,
                      retain_graph=True)
    assert gw.shape == (5, 3, 4) and gx.shape == (5, 4)
    for b in range(5):
        sw, sx = anb.grad(y, (w, x), grad_outputs=anb.tensor(v[b]), retain_graph=True)
        np.testing.assert_allclose(gw.numpy()[b], sw.numpy())
        np.testing.assert_allclose(gx.numpy()[b], sx.numpy())


def test_grad_mode_is_per_thread():
    x = anb.tensor([1.0], requires_grad=True)
    seen = {}

    def worker():
        seen["enabled"] = anb.is_grad_enabled()
        seen["requires_grad"] = (x * 2).requires_grad

    with anb.no_grad():
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        assert not (x * 2).requires_grad
    assert seen == {"enabled": True, "requires_grad": True}


def test_grad_modes_as_decorators_and_nesting():
    x = anb.tensor([1.0], requires_grad=True)

    @anb.no_grad()
    def doubled(t):
        return t * 2

    assert not doubled(x).requires_grad
    with anb.no_grad():
        with anb.enable_grad():
            assert (x * 2).requires_grad
        assert not (x * 2).requires_grad
    anb.set_grad_enabled(False)
    try:
        assert not anb.is_grad_enabled()
    finally:
        anb.set_grad_enabled(True)
    assert anb.autograd.no_grad is anb.no_grad and anb.autograd.grad is anb.grad
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert anb.is_grad_enabled()
