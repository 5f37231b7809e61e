"""``grad``'s common case (one output Tensor, one input Tensor: ``autograd.api._one_grad``)
against the general path (the same call with the output and input in lists): the same bits,
the same errors, the same effect on the graph."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autograd_nb as anb
from autograd_nb.autograd import api
from autograd_nb.engine import plan_cache


def through_both(make, grad_output=None, **kwargs):
    """``grad(y, x, ...)`` and ``grad([y], [x], ...)`` on two fresh graphs from ``make()``
    (``(y, x)``); each repeated three times so the plan cache serves the later ones."""
    one, general = [], []
    for _ in range(3):
        y, x = make()
        one.append(anb.grad(y, x, grad_outputs=grad_output, **kwargs))
        y, x = make()
        go = None if grad_output is None else [grad_output]
        general.append(anb.grad([y], [x], grad_outputs=go, **kwargs))
    return one, general


def assert_same_bits(one, general):
    for a, b in zip(one, general, strict=True):
        assert len(a) == len(b) == 1
        if b[0] is None:
            assert a[0] is None
            continue
        assert type(a[0]) is anb.Tensor
        assert a[0].dtype == b[0].dtype and a[0].shape == b[0].shape
        np.testing.assert_array_equal(a[0].numpy(), b[0].numpy())


@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 12), dtype=st.sampled_from(["float32", "float64"]),
       seed=st.integers(0, 2**16))
def test_outer_and_a_chain_give_the_general_paths_bits(n, dtype, seed):
    rng = np.random.default_rng(seed)
    x_value = rng.standard_normal(n).astype(dtype)
    v = anb.tensor(rng.standard_normal((n, n)).astype(dtype))

    def outer():
        x = anb.tensor(x_value, requires_grad=True)
        return anb.outer(x, x), x

    def chain():
        x = anb.tensor(x_value, requires_grad=True)
        return anb.sum(anb.tanh(x) * anb.exp(x)), x

    assert_same_bits(*through_both(outer, v))
    assert_same_bits(*through_both(chain))
    v64 = v.numpy().astype(np.float64)
    expected = (v64 + v64.T) @ x_value.astype(np.float64)  # d/dx of sum_ij v_ij x_i x_j
    y, x = outer()
    (got,) = anb.grad(y, x, grad_outputs=v)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-4 if dtype == "float32" else 1e-12)


def test_a_cached_step_is_served_by_the_fast_path():
    plan_cache.clear()
    x = anb.tensor(np.linspace(-1, 1, 6), requires_grad=True)
    v = anb.ones((6, 6))
    calls = []
    original = api._one_grad

    def counted(*args):
        done = original(*args)
        calls.append(done is not None)
        return done

    api._one_grad = counted
    try:
        results = [anb.grad(anb.outer(x, x), x, grad_outputs=v)[0].numpy() for _ in range(4)]
    finally:
        api._one_grad = original
    assert calls == [True] * 4
    for result in results:
        np.testing.assert_array_equal(result, np.full(6, 2 * x.numpy().sum()))


def test_an_intermediate_input_a_leaf_output_and_the_output_itself():
    def intermediate():
        x = anb.tensor([0.5, -1.5, 2.0], requires_grad=True)
        h = anb.sin(x)
        return anb.sum(h * h), h

    def itself():
        x = anb.tensor([0.5, -1.5, 2.0], requires_grad=True)
        y = x * 3.0
        return y, y

    assert_same_bits(*through_both(intermediate))
    assert_same_bits(*through_both(itself, anb.tensor([1.0, 2.0, 3.0])))
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    (g,) = anb.grad(x, x, grad_outputs=anb.tensor([3.0, 4.0]))  # a leaf output: general path
    np.testing.assert_array_equal(g.numpy(), [3.0, 4.0])


def test_other_grad_outputs_and_keywords_take_the_general_path_unchanged():
    def make():
        x = anb.tensor([0.25, 1.0, -2.0], requires_grad=True)
        return anb.exp(x) * 2.0, x

    for grad_output in (np.array([1.0, 2.0, 3.0]), anb.tensor(np.float32([1, 2, 3])),
                        anb.as_tensor(np.arange(1.0, 7.0)[::2])):  # (a strided seed)
        y, x = make()
        (a,) = anb.grad(y, x, grad_outputs=grad_output)
        y, x = make()
        (b,) = anb.grad([y], [x], grad_outputs=[grad_output])
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert a.dtype == b.dtype == np.float64
    y, x = make()
    (g,) = anb.grad(y, x, grad_outputs=anb.ones(3), retain_graph=True)
    (again,) = anb.grad(y, x, grad_outputs=anb.ones(3))
    np.testing.assert_array_equal(g.numpy(), again.numpy())
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        anb.grad(y, x, grad_outputs=anb.ones(3))


def test_an_unused_input():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    unused = anb.tensor([3.0], requires_grad=True)
    for _ in range(3):
        assert anb.grad(anb.sum(x * x), unused, allow_unused=True) == (None,)
        (zeros,) = anb.grad(anb.sum(x * x), unused, materialize_grads=True)
        np.testing.assert_array_equal(zeros.numpy(), [0.0])
        with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
            anb.grad(anb.sum(x * x), unused)


def error_of(call):
    with pytest.raises(Exception) as caught:
        call()
    return type(caught.value), str(caught.value)


@pytest.mark.parametrize("case", ["shape", "implicit", "complex", "no grad", "input",
                                  "dtype kind"])
def test_errors_are_the_general_paths(case):
    def call(listed):
        x = anb.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * x
        wrap = (lambda t: [t]) if listed else (lambda t: t)
        if case == "shape":
            return anb.grad(wrap(y), wrap(x), grad_outputs=wrap(anb.ones((3, 1))))
        if case == "implicit":
            return anb.grad(wrap(y), wrap(x))
        if case == "complex":
            return anb.grad(wrap(y), wrap(x), grad_outputs=wrap(anb.tensor(np.ones(3) * 1j)))
        if case == "no grad":
            return anb.grad(wrap(anb.ones(3)), wrap(x), grad_outputs=wrap(anb.ones(3)))
        if case == "input":
            return anb.grad(wrap(y), wrap(anb.ones(3)), grad_outputs=wrap(anb.ones(3)))
        return anb.grad(wrap(y), wrap(x), grad_outputs=wrap(anb.tensor(["a", "b", "c"])))

    one, general = error_of(lambda: call(False)), error_of(lambda: call(True))
    assert one == general
    expected = {"shape": "Mismatch in shape: grad_output[0] has a shape of (3, 1)",
                "implicit": "grad can be implicitly created only for scalar outputs",
                "complex": "both grad_output and output are required to have the same dtype",
                "no grad": "element 0 of tensors does not require grad",
                "input": "One of the differentiated Tensors does not require grad",
                "dtype kind": ""}[case]
    assert expected in one[1]


def test_an_error_leaves_the_graph_usable():
    x = anb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * x
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        anb.grad(y, x, grad_outputs=anb.ones(4))
    (g,) = anb.grad(y, x, grad_outputs=anb.ones(3))
    np.testing.assert_array_equal(g.numpy(), [2.0, 4.0, 6.0])
