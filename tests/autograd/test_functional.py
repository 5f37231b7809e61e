"""anb.autograd.functional: vjp, jvp, jacobian, hessian, hvp, vhp.

Checked against hand-derived Jacobians and Hessians, against central finite differences for
random smooth functions, against each other (vectorize=True against the row loop, the products
against contractions of the full matrices), and for torch's tuple shapes, create_graph and
strict semantics and errors.
"""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autograd_nb as anb
from autograd_nb.autograd import functional
from autograd_nb.autograd.functional import hessian, hvp, jacobian, jvp, vhp, vjp

X4 = np.array([1.0, 2.0, 3.0, 4.0])


def outer_self(x):
    return anb.outer(x, x)


def outer_jacobian(x):
    """``∂(x_i x_j)/∂x_k = δ_ik x_j + x_i δ_jk``, shape ``(n, n, n)``."""
    eye = np.eye(len(x))
    return np.einsum("ik,j->ijk", eye, x) + np.einsum("i,jk->ijk", x, eye)


def numerical_jacobian(function, arrays, eps=1e-6):
    """Central differences of ``function`` (arrays -> array) w.r.t. each of ``arrays``: one
    block of shape ``output.shape + array.shape`` per array."""
    arrays = [np.array(a, dtype=np.float64) for a in arrays]
    output_shape = np.shape(function(*arrays))
    blocks = []
    for i, array in enumerate(arrays):
        block = np.zeros(output_shape + array.shape)
        columns = block.reshape(output_shape + (-1,))
        for c in range(array.size):
            plus = [a.copy() for a in arrays]
            minus = [a.copy() for a in arrays]
            plus[i].reshape(-1)[c] += eps
            minus[i].reshape(-1)[c] -= eps
            columns[..., c] = (function(*plus) - function(*minus)) / (2 * eps)
        blocks.append(block)
    return blocks


def plain(function):
    """``function`` on NumPy arrays, without recording."""

    def evaluate(*arrays):
        with anb.no_grad():
            result = function(*(anb.tensor(a) for a in arrays))
        return np.array(result.numpy())

    return evaluate


def counting_grad(monkeypatch):
    """Record the ``is_grads_batched`` flag of every grad call the functional API makes."""
    calls = []
    real_grad = functional.grad

    def spy(*args, **kwargs):
        calls.append(kwargs.get("is_grads_batched", False))
        return real_grad(*args, **kwargs)

    monkeypatch.setattr(functional, "grad", spy)
    return calls


# -- the worked example: the full Jacobian of y = outer(x, x) ------------------------------------


@pytest.mark.parametrize("vectorize", [False, True])
def test_jacobian_of_outer_is_delta_x_plus_x_delta(vectorize):
    J = jacobian(outer_self, anb.tensor(X4), vectorize=vectorize)
    assert J.shape == (4, 4, 4)
    np.testing.assert_array_equal(J.numpy(), outer_jacobian(X4))
    assert not J.requires_grad


def test_jacobian_of_outer_is_one_batched_vjp_against_the_identity():
    # The batch of grad_outputs: the 16 rows of the 16 x 16 identity, each shaped like y.
    x = anb.tensor(X4, requires_grad=True)
    y = outer_self(x)
    grad_outputs = anb.tensor(np.eye(16).reshape(16, 4, 4))
    (rows,) = anb.grad(y, x, grad_outputs, is_grads_batched=True)
    assert rows.shape == (16, 4)
    J = jacobian(outer_self, x, vectorize=True)
    np.testing.assert_array_equal(rows.numpy().reshape(4, 4, 4), J.numpy())


def test_vectorize_makes_one_batched_grad_call_and_the_loop_one_per_row(monkeypatch):
    calls = counting_grad(monkeypatch)
    jacobian(lambda x: (outer_self(x), x.sum()), anb.tensor(X4), vectorize=True)
    assert calls == [True]
    calls.clear()
    jacobian(lambda x: (outer_self(x), x.sum()), anb.tensor(X4), vectorize=False)
    assert calls == [False] * 17


def test_hessian_vectorize_makes_one_batched_call_for_the_outer_jacobian(monkeypatch):
    calls = counting_grad(monkeypatch)
    hessian(lambda x: (x**3).sum(), anb.tensor(X4), vectorize=True)
    assert calls == [False, True]  # the gradient, then all rows of its Jacobian at once


@pytest.mark.parametrize("func", [outer_self, lambda x: x, lambda x: x.reshape(2, 2) * 1.0])
def test_the_kept_identity_is_read_only_and_no_jacobian_shares_it(func):
    # The vectorized basis is one read-only identity kept between calls: each Jacobian
    # must still be a new writable array, and writing into it must not reach the next one.
    first = jacobian(func, anb.tensor(X4), vectorize=True)
    (basis,), _ = functional._standard_basis((anb.zeros(first.shape[:-1]),))  # the same one
    assert not basis.numpy().flags.writeable
    assert first.numpy().flags.writeable
    assert not np.may_share_memory(first.numpy(), basis.numpy())
    expected = first.numpy().copy()
    first.numpy()[...] = 7.0
    second = jacobian(func, anb.tensor(X4), vectorize=True)
    np.testing.assert_array_equal(second.numpy(), expected)
    assert not np.may_share_memory(first.numpy(), second.numpy())


def test_the_identity_cache_keeps_at_most_its_budget(monkeypatch):
    monkeypatch.setattr(functional, "_identities", {})
    monkeypatch.setattr(anb.config, "IDENTITY_CACHE_BYTES", 3 * 8 * 8 * 8)  # three 8 x 8
    kept = [functional._identity(8, np.dtype(np.float64)) for _ in range(2)]
    assert kept[0] is kept[1]  # the second call reuses the first
    for n in (8, 9, 10):  # 8x8 and 9x9 fit; 10x10 does not fit beside them
        functional._identity(n, np.dtype(np.float64))
    assert sum(a.nbytes for a in functional._identities.values()) <= 3 * 8 * 8 * 8
    assert list(functional._identities) == [(10, np.dtype(np.float64))]
    big = functional._identity(20, np.dtype(np.float64))  # over the budget alone: not kept
    np.testing.assert_array_equal(big, np.eye(20))
    assert (20, np.dtype(np.float64)) not in functional._identities


def test_forward_mode_jacobian_of_outer():
    J = jacobian(outer_self, anb.tensor(X4), vectorize=True, strategy="forward-mode")
    np.testing.assert_allclose(J.numpy(), outer_jacobian(X4), rtol=0, atol=1e-14)


def test_vjp_jvp_of_outer_are_contractions_of_the_jacobian():
    rng = np.random.default_rng(0)
    u, w = rng.standard_normal((4, 4)), rng.standard_normal(4)
    full = outer_jacobian(X4)
    y, left = vjp(outer_self, anb.tensor(X4), anb.tensor(u))
    np.testing.assert_allclose(y.numpy(), np.outer(X4, X4))
    np.testing.assert_allclose(left.numpy(), np.einsum("ij,ijk->k", u, full))
    np.testing.assert_allclose(left.numpy(), u @ X4 + u.T @ X4)
    y, right = jvp(outer_self, anb.tensor(X4), anb.tensor(w))
    np.testing.assert_allclose(right.numpy(), np.einsum("ijk,k->ij", full, w))
    np.testing.assert_allclose(right.numpy(), np.outer(w, X4) + np.outer(X4, w))


# -- closed-form Hessians ----------------------------------------------------------------------


@pytest.mark.parametrize("vectorize", [False, True])
def test_hessian_of_sum_of_cubes_is_diag_6x(vectorize):
    H = hessian(lambda x: (x**3).sum(), anb.tensor(X4), vectorize=vectorize)
    np.testing.assert_allclose(H.numpy(), np.diag(6 * X4))


def test_forward_over_reverse_hessian_of_sum_of_cubes():
    H = hessian(
        lambda x: (x**3).sum(),
        anb.tensor(X4),
        vectorize=True,
        outer_jacobian_strategy="forward-mode",
    )
    np.testing.assert_allclose(H.numpy(), np.diag(6 * X4))


@pytest.mark.parametrize("vectorize", [False, True])
def test_hessian_of_quadratic_form_is_a_plus_a_transpose(vectorize):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 3))
    x = rng.standard_normal(3)
    H = hessian(lambda x: x @ anb.tensor(a) @ x, anb.tensor(x), vectorize=vectorize)
    np.testing.assert_allclose(H.numpy(), a + a.T, rtol=1e-12, atol=1e-12)


def test_hessian_of_a_matrix_input_has_shape_input_input():
    x = np.arange(1.0, 7.0).reshape(2, 3)
    H = hessian(lambda x: (x**3).sum(), anb.tensor(x))
    assert H.shape == (2, 3, 2, 3)
    np.testing.assert_allclose(H.numpy().reshape(6, 6), np.diag(6 * x.reshape(-1)))


@pytest.mark.parametrize("vectorize", [False, True])
def test_hessian_blocks_of_two_inputs(vectorize):
    # f = sum(x**2 * y): H_xx = diag(2y), H_xy = H_yx = diag(2x), H_yy = 0.
    x, y = np.array([1.0, -2.0, 0.5]), np.array([3.0, 1.0, 2.0])
    H = hessian(lambda x, y: (x**2 * y).sum(), (anb.tensor(x), anb.tensor(y)), vectorize=vectorize)
    assert isinstance(H, tuple) and all(isinstance(row, tuple) and len(row) == 2 for row in H)
    np.testing.assert_allclose(H[0][0].numpy(), np.diag(2 * y))
    np.testing.assert_allclose(H[0][1].numpy(), np.diag(2 * x))
    np.testing.assert_allclose(H[1][0].numpy(), np.diag(2 * x))
    np.testing.assert_allclose(H[1][1].numpy(), np.zeros((3, 3)))


def test_hvp_and_vhp_of_quadratic_form():
    rng = np.random.default_rng(2)
    a, x, v = rng.standard_normal((3, 3)), rng.standard_normal(3), rng.standard_normal(3)

    def quadratic(x):
        return x @ anb.tensor(a) @ x

    value, hv = hvp(quadratic, anb.tensor(x), anb.tensor(v))
    np.testing.assert_allclose(value.numpy(), x @ a @ x)
    np.testing.assert_allclose(hv.numpy(), (a + a.T) @ v)
    value, vh = vhp(quadratic, anb.tensor(x), anb.tensor(v))
    np.testing.assert_allclose(vh.numpy(), v @ (a + a.T))


def test_hvp_is_the_transpose_of_vhp_for_an_asymmetric_use():
    # A scalar function whose Hessian is symmetric but v hits different blocks.
    x, y = np.array([0.3, -1.2]), np.array([0.7, 2.0])
    v = (anb.tensor([1.0, 0.0]), anb.tensor([0.0, 2.0]))

    def f(x, y):
        return (anb.sin(x) * anb.exp(y)).sum()

    _, hv = hvp(f, (anb.tensor(x), anb.tensor(y)), v)
    _, vh = vhp(f, (anb.tensor(x), anb.tensor(y)), v)
    H = hessian(f, (anb.tensor(x), anb.tensor(y)))
    full = np.block([[H[0][0].numpy(), H[0][1].numpy()], [H[1][0].numpy(), H[1][1].numpy()]])
    flat_v = np.concatenate([v[0].numpy(), v[1].numpy()])
    np.testing.assert_allclose(np.concatenate([hv[0].numpy(), hv[1].numpy()]), full @ flat_v)
    np.testing.assert_allclose(np.concatenate([vh[0].numpy(), vh[1].numpy()]), flat_v @ full)


# -- random smooth functions against finite differences ----------------------------------------

SMOOTH = [
    lambda x, y: anb.tanh(x) * anb.sin(y).sum(),
    lambda x, y: anb.outer(anb.ravel(x), anb.exp(anb.ravel(y) * 0.5)),
    lambda x, y: anb.log1p(x**2) + anb.cos(y).sum() * anb.sigmoid(x),
    lambda x, y: anb.softmax(anb.ravel(x), axis=0) * anb.logsumexp(y),
]

SCALAR = [
    lambda x, y: (anb.tanh(x) * x).sum() + anb.sin(y).sum() * (x**2).sum(),
    lambda x, y: anb.logsumexp(anb.ravel(x)) * anb.exp(anb.ravel(y) * 0.3).sum(),
    lambda x, y: (anb.outer(anb.ravel(x), anb.ravel(y)) ** 2).sum() + anb.cos(x).prod(),
]

shapes = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)


@settings(max_examples=30, deadline=None)
@given(
    kind=st.integers(0, len(SMOOTH) - 1), x_shape=shapes, y_shape=shapes, seed=st.integers(0, 2**16)
)
def test_jacobian_matches_finite_differences(kind, x_shape, y_shape, seed):
    rng = np.random.default_rng(seed)
    x, y = rng.uniform(-1, 1, x_shape), rng.uniform(-1, 1, y_shape)
    function = SMOOTH[kind]
    inputs = (anb.tensor(x), anb.tensor(y))
    J = jacobian(function, inputs)
    numeric = numerical_jacobian(plain(function), (x, y))
    for block, expected in zip(J, numeric, strict=True):
        assert block.shape == expected.shape
        np.testing.assert_allclose(block.numpy(), expected, rtol=1e-6, atol=1e-8)
    batched = jacobian(function, inputs, vectorize=True)
    forward = jacobian(function, inputs, vectorize=True, strategy="forward-mode")
    for loop_block, batched_block, forward_block in zip(J, batched, forward, strict=True):
        np.testing.assert_allclose(
            batched_block.numpy(), loop_block.numpy(), rtol=1e-12, atol=1e-14
        )
        np.testing.assert_allclose(
            forward_block.numpy(), loop_block.numpy(), rtol=1e-12, atol=1e-14
        )


@settings(max_examples=25, deadline=None)
@given(
    kind=st.integers(0, len(SCALAR) - 1), x_shape=shapes, y_shape=shapes, seed=st.integers(0, 2**16)
)
def test_hessian_matches_finite_differences_of_the_gradient(kind, x_shape, y_shape, seed):
    rng = np.random.default_rng(seed)
    x, y = rng.uniform(-1, 1, x_shape), rng.uniform(-1, 1, y_shape)
    function = SCALAR[kind]
    inputs = (anb.tensor(x), anb.tensor(y))

    def gradient(*arrays):
        tensors = [anb.tensor(a, requires_grad=True) for a in arrays]
        return anb.grad(function(*tensors), tensors)

    H = hessian(function, inputs)
    for i in range(2):
        numeric = numerical_jacobian(lambda *a, i=i: gradient(*a)[i].numpy(), (x, y))
        for j in range(2):
            assert H[i][j].shape == inputs[i].shape + inputs[j].shape
            np.testing.assert_allclose(H[i][j].numpy(), numeric[j], rtol=1e-5, atol=1e-7)
    batched = hessian(function, inputs, vectorize=True)
    sizes = (x.size, y.size)
    for i in range(2):
        for j in range(2):
            np.testing.assert_allclose(
                batched[i][j].numpy(), H[i][j].numpy(), rtol=1e-12, atol=1e-14
            )
            # Symmetry: block (i, j) is the transpose of block (j, i).
            np.testing.assert_allclose(
                H[i][j].numpy().reshape(sizes[i], sizes[j]),
                H[j][i].numpy().reshape(sizes[j], sizes[i]).T,
                rtol=1e-9,
                atol=1e-12,
            )


@settings(max_examples=20, deadline=None)
@given(
    kind=st.integers(0, len(SMOOTH) - 1), x_shape=shapes, y_shape=shapes, seed=st.integers(0, 2**16)
)
def test_vjp_and_jvp_are_contractions_of_the_jacobian(kind, x_shape, y_shape, seed):
    rng = np.random.default_rng(seed)
    x, y = rng.uniform(-1, 1, x_shape), rng.uniform(-1, 1, y_shape)
    function = SMOOTH[kind]
    inputs = (anb.tensor(x), anb.tensor(y))
    J = jacobian(function, inputs)
    out_shape = J[0].shape[: J[0].ndim - len(x_shape)]
    u = rng.standard_normal(out_shape)
    w = (rng.standard_normal(x_shape), rng.standard_normal(y_shape))
    output, left = vjp(function, inputs, anb.tensor(u))
    np.testing.assert_allclose(output.numpy(), plain(function)(x, y))
    right_expected = 0
    for block, left_j, w_j in zip(J, left, w, strict=True):
        flat = block.numpy().reshape(u.size, -1)
        np.testing.assert_allclose(
            left_j.numpy().reshape(-1), u.reshape(-1) @ flat, rtol=1e-10, atol=1e-12
        )
        right_expected = right_expected + flat @ w_j.reshape(-1)
    _, right = jvp(function, inputs, (anb.tensor(w[0]), anb.tensor(w[1])))
    assert right.shape == out_shape
    np.testing.assert_allclose(right.numpy().reshape(-1), right_expected, rtol=1e-10, atol=1e-12)


# -- tuple-ness of inputs and outputs ----------------------------------------------------------


@pytest.mark.parametrize("vectorize", [False, True])
def test_jacobian_result_nesting_mirrors_inputs_and_outputs(vectorize):
    a, b = anb.tensor([1.0, 2.0]), anb.tensor([[1.0, 2.0, 3.0]])

    def shapes_of(result):
        if isinstance(result, tuple):
            return tuple(shapes_of(r) for r in result)
        return result.shape

    def jac(func, inputs):
        return shapes_of(jacobian(func, inputs, vectorize=vectorize))

    assert jac(lambda a: a * 2, a) == (2, 2)
    assert jac(lambda a: (a * 2, a.sum()), a) == ((2, 2), (2,))
    assert jac(lambda a, b: a * b.sum(), (a, b)) == ((2, 2), (2, 1, 3))
    assert jac(lambda a, b: (a * b.sum(), b * 2), (a, b)) == (
        ((2, 2), (2, 1, 3)),
        ((1, 3, 2), (1, 3, 1, 3)),
    )
    assert jac(lambda a: (a * 2,), (a,)) == (((2, 2),),)
    assert jac(lambda a: (a**2).sum(), anb.tensor(3.0)) == ()


def test_vjp_jvp_results_mirror_inputs_and_outputs():
    a, b = anb.tensor([1.0, 2.0]), anb.tensor(3.0)
    output, result = vjp(lambda a, b: (a * b, b * 2), (a, b), (anb.ones(2), anb.tensor(1.0)))
    assert isinstance(output, tuple) and isinstance(result, tuple)
    np.testing.assert_allclose(result[0].numpy(), [3.0, 3.0])
    np.testing.assert_allclose(result[1].numpy(), 1.0 + 2.0 + 2.0)
    output, result = jvp(lambda a, b: (a * b, b * 2), (a, b), (anb.ones(2), anb.tensor(1.0)))
    assert isinstance(result, tuple) and [r.shape for r in result] == [(2,), ()]
    np.testing.assert_allclose(result[0].numpy(), [3.0 + 1.0, 3.0 + 2.0])
    np.testing.assert_allclose(result[1].numpy(), 2.0)
    output, result = vjp(lambda a: a * 2, a, anb.ones(2))
    assert isinstance(output, anb.Tensor) and isinstance(result, anb.Tensor)


def test_v_may_be_omitted_for_single_elements():
    x = anb.tensor([2.0])
    np.testing.assert_allclose(vjp(lambda x: (x**3).sum(), anb.tensor(X4))[1].numpy(), 3 * X4**2)
    np.testing.assert_allclose(jvp(lambda x: x**3, x)[1].numpy(), [12.0])
    np.testing.assert_allclose(hvp(lambda x: (x**3).sum(), x)[1].numpy(), [12.0])
    np.testing.assert_allclose(vhp(lambda x: (x**3).sum(), x)[1].numpy(), [12.0])


@pytest.mark.parametrize("vectorize", [False, True])
def test_dtype_follows_the_input(vectorize):
    x = anb.tensor([1.0, 2.0], dtype=np.float32)
    J = jacobian(lambda x: anb.outer(x, x), x, vectorize=vectorize)
    assert J.dtype == np.float32
    np.testing.assert_allclose(J.numpy(), outer_jacobian(np.array([1.0, 2.0])))
    H = hessian(lambda x: (x**3).sum(), x, vectorize=vectorize)
    assert H.dtype == np.float32


@pytest.mark.parametrize("vectorize", [False, True])
def test_unused_inputs_and_constant_outputs_give_zeros(vectorize):
    x, y = anb.tensor([1.0, 2.0]), anb.tensor([3.0, 4.0, 5.0])
    J = jacobian(lambda x, y: (x * 2, anb.ones(4)), (x, y), vectorize=vectorize)
    np.testing.assert_allclose(J[0][0].numpy(), 2 * np.eye(2))
    np.testing.assert_allclose(J[0][1].numpy(), np.zeros((2, 3)))
    np.testing.assert_allclose(J[1][0].numpy(), np.zeros((4, 2)))
    np.testing.assert_allclose(J[1][1].numpy(), np.zeros((4, 3)))
    _, result = vjp(lambda x, y: x * 2, (x, y), anb.ones(2))
    np.testing.assert_allclose(result[1].numpy(), np.zeros(3))
    _, result = jvp(lambda x, y: (x * 2, anb.ones(4)), (x, y), (anb.ones(2), anb.ones(3)))
    np.testing.assert_allclose(result[1].numpy(), np.zeros(4))


@pytest.mark.parametrize("vectorize", [False, True])
def test_empty_outputs_and_inputs(vectorize):
    x = anb.tensor([1.0, 2.0, 3.0])
    assert jacobian(lambda x: x[:0], x, vectorize=vectorize).shape == (0, 3)
    J = jacobian(lambda x: (x[:0], x * 2), x, vectorize=vectorize)
    assert [block.shape for block in J] == [(0, 3), (3, 3)]
    np.testing.assert_allclose(J[1].numpy(), 2 * np.eye(3))
    assert jacobian(lambda x: x * 2, anb.zeros(0), vectorize=vectorize).shape == (0, 0)


@pytest.mark.parametrize("vectorize", [False, True])
def test_zero_dimensional_inputs(vectorize):
    # Each batch row of a 0-d gradient is a 0-d buffer: it must be written in place.
    x = anb.tensor(3.0)
    J = jacobian(lambda x: (x**2).sum(), x, vectorize=vectorize)
    assert J.shape == ()
    np.testing.assert_allclose(J.numpy(), 6.0)
    J = jacobian(
        lambda x: anb.broadcast_to(x, (2,)) * anb.tensor([1.0, 2.0]), x, vectorize=vectorize
    )
    np.testing.assert_allclose(J.numpy(), [1.0, 2.0])
    H = hessian(lambda x: x**3, x, vectorize=vectorize)
    np.testing.assert_allclose(H.numpy(), 18.0)


# -- inputs are detached; results detached unless create_graph ---------------------------------


def test_callers_tensors_are_left_alone_and_results_detached():
    x = anb.tensor(X4, requires_grad=True)
    for result in (
        jacobian(outer_self, x),
        jacobian(outer_self, x, vectorize=True),
        hessian(lambda x: (x**3).sum(), x),
        *vjp(outer_self, x, anb.ones((4, 4))),
        *jvp(outer_self, x, anb.ones(4)),
        *hvp(lambda x: (x**3).sum(), x, anb.ones(4)),
        *vhp(lambda x: (x**3).sum(), x, anb.ones(4)),
    ):
        assert not result.requires_grad and result.grad_fn is None
    assert x.grad is None and x.is_leaf


def test_works_under_no_grad():
    with anb.no_grad():
        J = jacobian(outer_self, anb.tensor(X4), vectorize=True)
        H = hessian(lambda x: (x**3).sum(), anb.tensor(X4))
        _, hv = hvp(lambda x: (x**3).sum(), anb.tensor(X4), anb.ones(4))
        assert not anb.is_grad_enabled()
    np.testing.assert_array_equal(J.numpy(), outer_jacobian(X4))
    np.testing.assert_allclose(H.numpy(), np.diag(6 * X4))
    np.testing.assert_allclose(hv.numpy(), 6 * X4)


def test_function_capturing_the_caller_tensor_is_not_confused_with_the_input():
    # func also uses the caller's x directly: that path is a constant for the Jacobian.
    x = anb.tensor(X4, requires_grad=True)
    J = jacobian(lambda z: z * x, x)
    np.testing.assert_allclose(J.numpy(), np.diag(X4))


@pytest.mark.parametrize("vectorize", [False, True])
def test_create_graph_jacobian_is_differentiable(vectorize):
    # sum over i, j, k of (δ_ik x_j + x_i δ_jk) = 2n * sum(x): its gradient is 2n everywhere.
    x = anb.tensor(X4, requires_grad=True)
    J = jacobian(outer_self, x, create_graph=True, vectorize=vectorize)
    assert J.requires_grad
    np.testing.assert_array_equal(J.numpy(), outer_jacobian(X4))
    (g,) = anb.grad(J.sum(), x)
    np.testing.assert_allclose(g.numpy(), np.full(4, 8.0))


@pytest.mark.parametrize("vectorize", [False, True])
def test_create_graph_hessian_is_differentiable(vectorize):
    # H = diag(6x) for sum(x**3); d(trace H)/dx = 6.
    x = anb.tensor(X4, requires_grad=True)
    H = hessian(lambda x: (x**3).sum(), x, create_graph=True, vectorize=vectorize)
    (g,) = anb.grad(H.sum(), x)
    np.testing.assert_allclose(g.numpy(), np.full(4, 6.0))


def test_create_graph_products_are_differentiable():
    x = anb.tensor(X4, requires_grad=True)
    v = anb.tensor([1.0, -1.0, 2.0, 0.5])
    # vjp of sum(x**3) against 1 is 3x**2; its derivative is 6x.
    output, result = vjp(lambda x: (x**3).sum(), x, create_graph=True)
    assert output.requires_grad and result.requires_grad
    np.testing.assert_allclose(anb.grad(result.sum(), x)[0].numpy(), 6 * X4)
    # jvp of x**3 against v is 3x**2 v; summed, its derivative is 6xv.
    _, result = jvp(lambda x: x**3, x, v, create_graph=True)
    np.testing.assert_allclose(anb.grad(result.sum(), x)[0].numpy(), 6 * X4 * v.numpy())
    # hvp/vhp of sum(x**3) against v are 6xv; summed, the derivative is 6v.
    for product in (hvp, vhp):
        _, result = product(lambda x: (x**3).sum(), x, v, create_graph=True)
        np.testing.assert_allclose(result.numpy(), 6 * X4 * v.numpy())
        np.testing.assert_allclose(anb.grad(result.sum(), x)[0].numpy(), 6 * v.numpy())


def test_create_graph_reaches_v_that_requires_grad():
    x = anb.tensor(X4)
    v = anb.tensor([1.0, 0.0, 0.0, 0.0], requires_grad=True)
    _, result = jvp(outer_self, x, v, create_graph=True)
    (g,) = anb.grad(result.sum(), v)  # sum(outer(v, x) + outer(x, v)) = 2 sum(v) sum(x)
    np.testing.assert_allclose(g.numpy(), np.full(4, 2 * X4.sum()))


# -- strict mode -------------------------------------------------------------------------------

ONES3 = anb.ones(3)

STRICT = [
    (
        "vjp const output",
        lambda: vjp(lambda x: anb.ones(3), ONES3, ONES3, strict=True),
        "Output 0 of the user-provided function does not require gradients",
    ),
    (
        "vjp unused input",
        lambda: vjp(lambda x, y: x * 2, (ONES3, anb.ones(2)), ONES3, strict=True),
        "The output of the user-provided function is independent of input 1",
    ),
    (
        "jvp unused input",
        lambda: jvp(lambda x, y: x * 2, (ONES3, anb.ones(2)), (ONES3, anb.ones(2)), strict=True),
        "The output of the user-provided function is independent of input 1",
    ),
    (
        "jvp linear, create_graph",
        lambda: jvp(lambda x: x * 2, ONES3, ONES3, strict=True, create_graph=True),
        "The jacobian of the user-provided function is independent of input 0. This is not "
        "allowed in strict mode when create_graph=True.",
    ),
    (
        "jacobian unused input",
        lambda: jacobian(lambda x, y: x * 2, (ONES3, anb.ones(2)), strict=True),
        "Output 0 of the user-provided function is independent of input 1",
    ),
    (
        "jacobian linear, create_graph",
        lambda: jacobian(lambda x: x * 2, ONES3, strict=True, create_graph=True),
        "The jacobian of the user-provided function is independent of input 0. This is not "
        "allowed in strict mode when create_graph=True.",
    ),
    (
        "jacobian vectorize",
        lambda: jacobian(lambda x: x * 2, ONES3, strict=True, vectorize=True),
        "`strict=True` and `vectorized=True` are not supported together",
    ),
    (
        "hessian linear",
        lambda: hessian(lambda x: (x * 2).sum(), ONES3, strict=True),
        "jacobian of the user-provided function with respect to input 0 is independent of the "
        "input",
    ),
    (
        "hessian unused input",
        lambda: hessian(lambda x, y: (x**3).sum(), (ONES3, anb.ones(2)), strict=True),
        "jacobian of the user-provided function with respect to input 1 is independent of the "
        "input",
    ),
    (
        "hvp linear",
        lambda: hvp(lambda x: (x * 3).sum(), ONES3, ONES3, strict=True),
        "jacobian of the user-provided function with respect to input 0 is independent",
    ),
    (
        "vhp linear",
        lambda: vhp(lambda x: (x * 3).sum(), ONES3, ONES3, strict=True),
        "jacobian of the user-provided function with respect to input 0 is independent",
    ),
    (
        "vhp unused input",
        lambda: vhp(
            lambda x, y: (x**3).sum(), (ONES3, anb.ones(2)), (ONES3, anb.ones(2)), strict=True
        ),
        "The output of the user-provided function is independent of input 1",
    ),
]


@pytest.mark.parametrize("call, message", [s[1:] for s in STRICT], ids=[s[0] for s in STRICT])
def test_strict_errors(call, message):
    with pytest.raises(RuntimeError, match=re.escape(message)):
        call()


def test_strict_passes_when_everything_depends_on_everything():
    x = anb.tensor(X4)
    np.testing.assert_array_equal(jacobian(outer_self, x, strict=True).numpy(), outer_jacobian(X4))
    np.testing.assert_allclose(
        hessian(lambda x: (x**3).sum(), x, strict=True).numpy(), np.diag(6 * X4)
    )
    vjp(outer_self, x, anb.ones((4, 4)), strict=True)
    jvp(outer_self, x, anb.ones(4), strict=True)


# -- v and argument errors ---------------------------------------------------------------------

V_ERRORS = [
    (
        "vjp v None",
        lambda: vjp(lambda x: x * 2, ONES3),
        RuntimeError,
        "The vector v can only be None if the user-provided function returns a single Tensor "
        "with a single element.",
    ),
    (
        "vjp v shape",
        lambda: vjp(lambda x: x * 2, ONES3, anb.ones(2)),
        RuntimeError,
        "v has invalid size: should be (3,) but got (2,).",
    ),
    (
        "vjp v entry shape",
        lambda: vjp(lambda x: (x, x), ONES3, (ONES3, anb.ones(2))),
        RuntimeError,
        "Entry 1 in v has invalid size: should be (3,) but got (2,).",
    ),
    (
        "vjp v tuple length",
        lambda: vjp(lambda x: (x, x), ONES3, (ONES3,)),
        RuntimeError,
        "v is a tuple of invalid length: should be 2 but got 1.",
    ),
    (
        "vjp v too many",
        lambda: vjp(lambda x: x * 2, ONES3, (ONES3, ONES3)),
        RuntimeError,
        "The given v should contain a single Tensor.",
    ),
    (
        "jvp v None",
        lambda: jvp(lambda x: x * 2, ONES3),
        RuntimeError,
        "The vector v can only be None if the input to the user-provided function is a single "
        "Tensor with a single element.",
    ),
    (
        "jvp v shape",
        lambda: jvp(lambda x: x * 2, ONES3, anb.ones((3, 1))),
        RuntimeError,
        "v has invalid size: should be (3,) but got (3, 1).",
    ),
    (
        "hvp v None",
        lambda: hvp(lambda x: x.sum(), ONES3),
        RuntimeError,
        "The vector v can only be None if the input",
    ),
    (
        "vhp v tuple length",
        lambda: vhp(lambda x, y: x.sum(), (ONES3, ONES3), (ONES3,)),
        RuntimeError,
        "v is a tuple of invalid length: should be 2 but got 1.",
    ),
    (
        "v not a tensor",
        lambda: vjp(lambda x: x * 2, ONES3, np.ones(3)),
        TypeError,
        "The v given to vjp must be either a Tensor or a tuple of Tensors",
    ),
    (
        "inputs a list",
        lambda: jacobian(lambda x, y: x, [ONES3, ONES3]),
        TypeError,
        "The inputs given to jacobian must be either a Tensor or a tuple of Tensors",
    ),
    (
        "outputs not tensors",
        lambda: jacobian(lambda x: 3.0, ONES3),
        TypeError,
        "The outputs of the user-provided function given to jacobian must be either a Tensor",
    ),
    (
        "hessian of a vector",
        lambda: hessian(lambda x: x * 2, ONES3),
        RuntimeError,
        "The Tensor returned by the function given to hessian should contain a single element",
    ),
    (
        "hessian of a tuple",
        lambda: hessian(lambda x: (x.sum(),), ONES3),
        RuntimeError,
        "The function given to hessian should return a single Tensor",
    ),
    (
        "hvp of a vector",
        lambda: hvp(lambda x: x * 2, ONES3, ONES3),
        RuntimeError,
        "The Tensor returned by the function given to hvp should contain a single element",
    ),
    (
        "vhp of a tuple",
        lambda: vhp(lambda x: (x.sum(),), ONES3, ONES3),
        RuntimeError,
        "The function given to vhp should return a single Tensor",
    ),
    (
        "integer input",
        lambda: jacobian(lambda x: x * 2, anb.tensor([1, 2])),
        RuntimeError,
        "only Tensors of floating point dtype can require gradients",
    ),
    (
        "unknown strategy",
        lambda: jacobian(lambda x: x, ONES3, strategy="sideways"),
        ValueError,
        'Expected strategy to be either "forward-mode" or "reverse-mode"',
    ),
    (
        "unknown hessian strategy",
        lambda: hessian(lambda x: x.sum(), ONES3, outer_jacobian_strategy="sideways"),
        ValueError,
        'Expected strategy to be either "forward-mode" or "reverse-mode"',
    ),
    (
        "forward-mode without vectorize",
        lambda: jacobian(lambda x: x, ONES3, strategy="forward-mode"),
        NotImplementedError,
        "only implemented for `vectorize=True`",
    ),
    (
        "forward-mode with create_graph",
        lambda: jacobian(
            lambda x: x, ONES3, strategy="forward-mode", vectorize=True, create_graph=True
        ),
        NotImplementedError,
        '`create_graph=True` and `strategy="forward-mode"` are not supported together',
    ),
    (
        "forward-mode with strict",
        lambda: jacobian(lambda x: x, ONES3, strategy="forward-mode", vectorize=True, strict=True),
        RuntimeError,
        '`strict=True` and `strategy="forward-mode"` are not supported together',
    ),
]


@pytest.mark.parametrize(
    "call, error, message", [e[1:] for e in V_ERRORS], ids=[e[0] for e in V_ERRORS]
)
def test_argument_errors(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()
