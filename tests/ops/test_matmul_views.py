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


# -- one node per product: _bmm reads its operands through views --------------------------------


@pytest.mark.parametrize(
    "function, a_shape, b_shape, direct",
    [
        (anb.matmul, (4, 3), (3,), True),
        (anb.matmul, (3,), (3, 2), True),
        (anb.matmul, (2, 4, 3), (3, 5), True),
        # a batch broadcast, dot's transpose of a stacked b: still one product node
        (anb.matmul, (2, 1, 4, 3), (5, 3, 2), False),
        (anb.dot, (2, 4, 3), (3, 2), True),
        (anb.dot, (2, 4, 3), (5, 3, 2), False),
        (lambda a, b: anb.einsum("ij,jk->ik", a, b), (4, 3), (3, 2), True),
        (anb.outer, (3, 2), (5,), True),
        (anb.outer, (40,), (70,), True),  # the forward's rank-one loop, the VJPs' BLAS
    ],
)
def test_a_product_records_one_node_on_its_operands(function, a_shape, b_shape, direct):
    rng = np.random.default_rng(0)
    a = anb.tensor(rng.standard_normal(a_shape), requires_grad=True)
    b = anb.tensor(rng.standard_normal(b_shape), requires_grad=True)
    y = function(a, b)
    node = y.grad_fn
    assert node.name == "_bmm"
    if direct:  # the operands themselves, not reshapes of them
        assert node.edges[0] is a and node.edges[1] is b
    np.testing.assert_allclose(y.numpy(), _numpy(function, a.numpy(), b.numpy()), rtol=1e-14)
    v = rng.standard_normal(y.shape)
    ga, gb = anb.grad(y, (a, b), grad_outputs=anb.tensor(v))
    assert ga.shape == a_shape and gb.shape == b_shape
    # vᵀJ against finite differences of <v, f(a, b)> in a few directions
    for x, g in ((a, ga), (b, gb)):
        direction = rng.standard_normal(x.shape)
        step = 1e-6
        with anb.no_grad():
            x += step * direction
            up = np.sum(v * function(a, b).numpy())
            x -= 2 * step * direction
            down = np.sum(v * function(a, b).numpy())
            x += step * direction
        np.testing.assert_allclose(np.sum(g.numpy() * direction), (up - down) / (2 * step),
                                   rtol=1e-6, atol=1e-8)


def _numpy(function, a, b):
    if function is anb.matmul:
        return a @ b
    if function is anb.dot:
        return np.dot(a, b)
    if function is anb.outer:
        return np.outer(a, b)
    return np.einsum("ij,jk->ik", a, b)


@pytest.mark.compiled_only
def test_the_products_attrs_are_cached_per_layout():
    w = anb.tensor(np.ones((4, 3)))
    x = anb.tensor(np.ones(3), requires_grad=True)
    assert (w @ x).grad_fn.attrs is (w @ x).grad_fn.attrs
    strided = anb.tensor(np.ones((4, 6)))[:, ::2]  # copied by prepare: not cached, still right
    np.testing.assert_array_equal((strided @ x).numpy(), np.full(4, 3.0))


@pytest.mark.parametrize("a_shape, b_shape", [((4, 3), (3,)), ((2, 4, 3), (3, 5)), ((3,), (3, 2))])
def test_matmul_reuses_the_views_of_shapes_it_has_seen(a_shape, b_shape):
    from autograd_nb.ops import linalg

    rng = np.random.default_rng(len(a_shape) + len(b_shape))
    a0, b0 = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    first = anb.matmul(anb.tensor(a0), anb.tensor(b0, requires_grad=True))
    assert linalg._matmul_views[(a_shape, b_shape)] == first.grad_fn.attrs["views"]
    a1, b1 = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    second = anb.matmul(anb.tensor(a1), anb.tensor(b1, requires_grad=True))
    np.testing.assert_allclose(second.numpy(), a1 @ b1, rtol=1e-14)
    # Shapes that do not multiply are never remembered: they raise every time.
    for _ in range(2):
        with pytest.raises(ValueError, match="mismatch in its core dimension"):
            anb.matmul(anb.tensor(a0), anb.tensor(np.ones((7, 2))))
    assert (a_shape, (7, 2)) not in linalg._matmul_views


@pytest.mark.parametrize(
    "views, phrase",
    [
        (((1, 4, 3), (1, 3, 2), (4, 2)), "cannot read b of shape"),
        (((1, 4, 3), (1, 3, 1), (4, 2)), "does not hold"),
        (((1, 4, 3), (1, 3)), "three shapes"),
    ],
)
def test_bmm_views_that_do_not_fit_raise(views, phrase):
    from autograd_nb.ops.registry import call

    with pytest.raises(ValueError, match=phrase):
        call("_bmm", anb.ones((4, 3)), anb.ones(3), views=views)


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("k", [0, 1])
def test_bmm_vjp_into_a_strided_or_narrower_buffer(batched, k):
    # The engine's buffers are C-contiguous of the op's dtype; a VJP called with another (a
    # transposed view, which no reshape can view as (batch, m, k), or a float32 buffer) must
    # still accumulate into it, not into a copy.
    from autograd_nb.ops.registry import REGISTRY, Saved

    rng = np.random.default_rng(1)
    op = REGISTRY["_bmm"]
    a, b = rng.standard_normal((2, 4, 3)), rng.standard_normal((3, 5))
    views = ((1, 8, 3), (1, 3, 5), (2, 4, 5))
    arrays, attrs, _ = op._run([a, b], {"views": views})
    saved = Saved(arrays, None)
    lead = (6,) if batched else ()
    g = rng.standard_normal(lead + (2, 4, 5))
    shape = lead + (a.shape if k == 0 else b.shape)
    for make in (lambda: np.zeros(shape[::-1]).T, lambda: np.zeros(shape, np.float32)):
        buffer = make()
        buffer += 1
        (op.vjp_batched if batched else op.vjp)(k, g, saved, attrs, buffer)
        if k == 0:
            expected = 1 + g @ b.T
        else:
            expected = 1 + np.einsum("...ijn,ijk->...kn", g, a)
        np.testing.assert_allclose(buffer, expected, rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.bool_])
def test_outer_gives_numpys_bits(dtype):
    # Each element is the one product a[i] * b[j]: the same bits as np.outer, signed zeros and
    # non-finite values included.
    rng = np.random.default_rng(3)
    a = rng.standard_normal(37)
    b = rng.standard_normal(45)
    a[:4] = [np.inf, -0.0, np.nan, 0.0]
    b[:3] = [-np.inf, 0.0, -1.0]
    if dtype in (np.int64, np.bool_):
        a, b = rng.integers(-3, 4, 37), rng.integers(-3, 4, 45)
    a, b = a.astype(dtype), b.astype(dtype)
    with np.errstate(invalid="ignore"):
        expected = np.outer(a, b)
        got = anb.outer(anb.tensor(a), anb.tensor(b)).numpy()
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    assert np.array_equal(np.signbit(got), np.signbit(expected))
