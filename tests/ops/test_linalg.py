"""Linear algebra: matmul, dot, outer and einsum against NumPy (tests/reference.py), gradients
against finite differences (kernels, differentiable rules, second order), dtypes and errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import autograd_nb as anb
from autograd_nb.ops import _blas, linalg
from autograd_nb.ops.registry import FUNCTIONS
from tests.checks import check_gradients
from tests.reference import REFERENCE

fast = settings(max_examples=12, deadline=None)


def check_against_numpy(name, arrays, *args, rtol=1e-12):
    got = getattr(anb, name)(*args, *(anb.tensor(a) for a in arrays))
    expected = np.asarray(REFERENCE[name](*args, *arrays))
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    np.testing.assert_allclose(got.numpy(), expected, rtol=rtol, atol=rtol)
    return got


def test_registry_has_the_api_linalg_functions():
    for name in ("matmul", "dot", "outer", "einsum"):
        assert FUNCTIONS[name].family == "linalg"
        assert name in REFERENCE
        assert "Examples" in FUNCTIONS[name].__doc__


# -- matmul ------------------------------------------------------------------------------------


@fast
@given(
    batch=hnp.mutually_broadcastable_shapes(
        num_shapes=2, min_dims=0, max_dims=2, min_side=0, max_side=3
    ),
    core=st.tuples(st.integers(1, 3), st.integers(0, 3), st.integers(1, 3)),
    vector=st.sampled_from(["", "a", "b", "ab"]),
    seed=st.integers(0, 2**16),
)
def test_matmul(batch, core, vector, seed):
    m, k, n = core
    rng = np.random.default_rng(seed)
    a_shape = (k,) if "a" in vector else batch.input_shapes[0] + (m, k)
    b_shape = (k,) if "b" in vector else batch.input_shapes[1] + (k, n)
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    check_against_numpy("matmul", [a, b])
    check_gradients(anb.matmul, [a, b], second_order=seed % 3 == 0)


@pytest.mark.parametrize(
    "a_shape, b_shape",
    [
        ((3,), (3,)),
        ((2, 1, 3, 4), (5, 4, 2)),
        ((3, 4), (5, 4, 2)),
        ((3,), (2, 3, 4)),
        ((2, 3, 4), (4,)),
        ((1, 2, 3), (1, 1, 3, 2)),
        ((2, 0), (0, 3)),
        ((0, 3), (3, 2)),
    ],
)
def test_matmul_edge_cases(a_shape, b_shape):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    got = check_against_numpy("matmul", [a, b])
    if a_shape == b_shape == (3,):
        assert got.shape == ()
    check_gradients(anb.matmul, [a, b])


def test_matmul_through_blas():
    # Products above linalg.SMALL_PRODUCT run through BLAS, the others through loops.
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 9, 8)), rng.standard_normal((8, 10))
    assert 9 * 8 * 10 > linalg.SMALL_PRODUCT
    check_against_numpy("matmul", [a, b])
    check_gradients(anb.matmul, [a, b], second_order=False)
    a, b = rng.standard_normal((2, 9, 8)), rng.standard_normal((2, 8, 10))
    check_gradients(anb.matmul, [a, b], second_order=False)


def test_matmul_operator_and_numpy_operands():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 2))
    x = anb.tensor(a, requires_grad=True)
    np.testing.assert_allclose((x @ b).numpy(), a @ b)
    np.testing.assert_allclose((b @ x).numpy(), b @ a)
    (g,) = anb.grad((x @ b).sum(), x)
    np.testing.assert_allclose(g.numpy(), np.ones((2, 2)) @ b.T)


@pytest.mark.parametrize("name", ["matmul", "dot", "outer"])
def test_float32_stays_float32(name):
    rng = np.random.default_rng(3)
    a = anb.tensor(rng.standard_normal((2, 3)).astype(np.float32), requires_grad=True)
    b = anb.tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    y = getattr(anb, name)(a, b)
    expected = REFERENCE[name](a.numpy(), b.numpy())
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-5)
    ga, gb = anb.grad(y.sum(), (a, b))
    assert ga.dtype == gb.dtype == np.float32


def test_mixed_precision_promotes_and_grads_keep_input_dtype():
    rng = np.random.default_rng(4)
    for shape in [(4, 5), (20, 30)]:  # loops and BLAS
        a = anb.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
        b = anb.tensor(rng.standard_normal(shape[::-1]), requires_grad=True)
        y = a @ b
        assert y.dtype == np.float64
        ga, gb = anb.grad(y.sum(), (a, b))
        assert ga.dtype == np.float32 and gb.dtype == np.float64
        ones = np.ones((shape[0], shape[0]))
        np.testing.assert_allclose(ga.numpy(), ones @ b.numpy().T, rtol=1e-5)
        np.testing.assert_allclose(gb.numpy(), a.numpy().astype(np.float64).T @ ones)


@pytest.mark.parametrize("name", ["matmul", "dot", "outer", "einsum"])
def test_integers_stay_exact(name):
    a = np.arange(6).reshape(2, 3)
    b = np.arange(12).reshape(3, 4) - 5
    args = ("ij,jk",) if name == "einsum" else ()
    check_against_numpy(name, [a, b], *args)
    if name in ("matmul", "dot"):
        check_against_numpy(name, [a > 2, b > 0])  # bool stays bool


# -- dot ---------------------------------------------------------------------------------------

DOT_SHAPES = [
    ((), ()),
    ((), (3, 2)),
    ((2, 3), ()),
    ((3,), (3,)),
    ((2, 3), (3,)),
    ((2, 2, 3), (3,)),
    ((3,), (3, 2)),
    ((3,), (2, 3, 4)),
    ((2, 3), (3, 4)),
    ((2, 3, 4), (5, 4, 2)),
    ((2, 4), (3, 2, 4, 2)),
    ((0, 3), (3,)),
    ((2, 0), (3, 0, 2)),
]


@pytest.mark.parametrize("a_shape, b_shape", DOT_SHAPES)
def test_dot(a_shape, b_shape):
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    check_against_numpy("dot", [a, b])
    check_gradients(anb.dot, [a, b])


@fast
@given(
    a_shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=3),
    b_shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=3),
    seed=st.integers(0, 2**16),
)
def test_dot_is_a_tensordot_not_a_broadcast(a_shape, b_shape, seed):
    b_shape = list(b_shape)
    b_shape[max(len(b_shape) - 2, 0)] = a_shape[-1]
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    check_against_numpy("dot", [a, b])
    check_gradients(anb.dot, [a, b], second_order=seed % 3 == 0)


def test_dot_method():
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(anb.tensor(a).dot(anb.tensor(a.T)).numpy(), a.dot(a.T))


# -- outer -------------------------------------------------------------------------------------


@fast
@given(
    a_shape=hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3),
    b_shape=hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3),
)
def test_outer_flattens(a_shape, b_shape):
    rng = np.random.default_rng(len(a_shape) + len(b_shape))
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    check_against_numpy("outer", [a, b])
    check_gradients(anb.outer, [a, b])


def test_outer_api_example():
    x = anb.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y = anb.outer(x, x)
    (g,) = anb.grad(y, x, grad_outputs=anb.ones_like(y))
    np.testing.assert_array_equal(g.numpy(), [20.0, 20.0, 20.0, 20.0])


# -- einsum ------------------------------------------------------------------------------------

EINSUM_CASES = [
    # matrix products, explicit and implicit output
    ("ij,jk", [(2, 3), (3, 4)]),
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk->ki", [(2, 3), (3, 4)]),
    ("ij,kj->ik", [(2, 3), (4, 3)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ijk,jil->kl", [(2, 3, 4), (3, 2, 5)]),
    ("ab,ba", [(2, 3), (3, 2)]),
    # permutations, sums over labels appearing once
    ("ij", [(2, 3)]),
    ("ji", [(2, 3)]),
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ij->i", [(2, 3)]),
    ("i->", [(4,)]),
    ("aB", [(2, 3)]),  # implicit order is alphabetical, upper case first
    ("Ba,aC", [(2, 3), (3, 4)]),
    # diagonals and traces
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("ii->", [(1, 1)]),
    ("iij->ji", [(2, 2, 3)]),
    ("iijj->ij", [(2, 2, 3, 3)]),
    ("ijji", [(2, 3, 3, 2)]),
    ("ii,i->i", [(3, 3), (3,)]),
    # elementwise, inner and outer products
    ("i,i", [(3,), (3,)]),
    ("i,j->ij", [(2,), (3,)]),
    ("i,j,k->ijk", [(2,), (3,), (2,)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]),
    ("ij,ij->", [(2, 3), (2, 3)]),
    ("bi,bi->b", [(4, 3), (4, 3)]),
    (",ij->ij", [(), (2, 3)]),
    # more than two operands, contracted left to right
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("i,i,i->", [(3,), (3,), (3,)]),
    ("ab,bc,ca", [(2, 3), (3, 4), (4, 2)]),
    ("ij,j,jk->ik", [(2, 3), (3,), (3, 2)]),
    # ellipsis and broadcasting
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("...j,j", [(4, 3, 2), (2,)]),
    ("i...->...", [(2, 3)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("...,...", [(2, 3), (3,)]),
    ("...i,...i->...", [(2, 1, 3), (5, 3)]),
    ("ij...,jk...->ik...", [(2, 3, 4), (3, 2, 1)]),
    ("ij,jk", [(2, 1), (3, 4)]),  # length 1 broadcasts, as in NumPy
    ("ij,ij->ij", [(2, 1), (1, 3)]),
    # empty dimensions
    ("ij,kj->ik", [(0, 3), (2, 3)]),
    ("ij,jk", [(2, 0), (0, 3)]),
]


@pytest.mark.parametrize("subscripts, shapes", EINSUM_CASES)
def test_einsum(subscripts, shapes):
    rng = np.random.default_rng(6)
    arrays = [rng.standard_normal(s) for s in shapes]
    check_against_numpy("einsum", arrays, subscripts)
    check_gradients(lambda *ts: anb.einsum(subscripts, *ts), arrays)


@fast
@given(
    batch=hnp.mutually_broadcastable_shapes(
        num_shapes=2, min_dims=0, max_dims=3, min_side=0, max_side=3
    ),
    core=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3)),
    seed=st.integers(0, 2**16),
)
def test_einsum_batched_matmul_broadcasts(batch, core, seed):
    m, k, n = core
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch.input_shapes[0] + (m, k))
    b = rng.standard_normal(batch.input_shapes[1] + (k, n))
    got = check_against_numpy("einsum", [a, b], "...ij,...jk->...ik")
    np.testing.assert_allclose(got.numpy(), np.matmul(a, b), rtol=1e-12)
    check_gradients(
        lambda x, y: anb.einsum("...ij,...jk->...ik", x, y), [a, b], second_order=seed % 3 == 0
    )


def test_einsum_interleaved_form_and_spaces():
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    expected = np.einsum(a, [0, 1], b, [1, 2], [0, 2])
    got = anb.einsum(anb.tensor(a), [0, 1], anb.tensor(b), [1, 2], [0, 2])
    np.testing.assert_allclose(got.numpy(), expected)
    got = anb.einsum(anb.tensor(a), [Ellipsis, 1], anb.tensor(b), [1, 2])
    np.testing.assert_allclose(got.numpy(), np.einsum(a, [Ellipsis, 1], b, [1, 2]))
    got = anb.einsum(" i j , j k -> i k ", anb.tensor(a), anb.tensor(b))
    np.testing.assert_allclose(got.numpy(), a @ b)


def test_einsum_float32_and_numpy_operands():
    rng = np.random.default_rng(8)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    x = anb.tensor(a, requires_grad=True)
    y = anb.einsum("ij,kj->ik", x, a)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.numpy(), np.einsum("ij,kj->ik", a, a), rtol=1e-5)
    (g,) = anb.grad(y.sum(), x)
    assert g.dtype == np.float32
    identity = anb.einsum("ij", a)  # a new Tensor even when nothing is computed
    assert isinstance(identity, anb.Tensor) and identity.numpy() is not a
    assert anb.einsum("ij", x) is not x


def test_einsum_diagonal_gradient_reaches_only_the_diagonal():
    x = anb.tensor(np.arange(9.0).reshape(3, 3), requires_grad=True)
    (g,) = anb.grad(anb.einsum("ii", x), x)
    np.testing.assert_array_equal(g.numpy(), np.eye(3))


EINSUM_ERRORS = [
    # NumPy 2.4 words these two the other way round; ours say what happened.
    ("ij,jk", [(2, 3)], "fewer operands provided"),
    ("ij", [(2, 3), (3,)], "more operands provided"),
    ("ij", [], "at least one operand"),
    ("ij", [(2,)], "too many subscripts for operand 0"),
    ("i", [(2, 3)], "operand has more dimensions than subscripts"),
    ("...i->i", [(2, 3)], "output has more dimensions than subscripts"),
    ("i->j", [(2,)], "output subscript 'j' which never appeared in an input"),
    ("i->ii", [(2,)], "includes output subscript 'i' multiple times"),
    ("i.j", [(2, 3)], "'.' that is not part of an ellipsis"),
    ("...i...", [(3,)], "'.' that is not part of an ellipsis"),
    ("i1", [(2, 3)], "invalid subscript '1'"),
    ("ij->i->j", [(2, 3)], "invalid subscript '-'"),
    ("ii", [(2, 3)], "dimensions in operand 0 for collapsing index 'i' don't match (2 != 3)"),
    ("ij,jk->ik", [(2, 3), (4, 4)], "could not be broadcast together"),
]


@pytest.mark.parametrize("subscripts, shapes, phrase", EINSUM_ERRORS)
def test_einsum_errors_match_numpy(subscripts, shapes, phrase):
    arrays = [np.ones(s) for s in shapes]
    with pytest.raises(ValueError):
        np.einsum(subscripts, *arrays)
    with pytest.raises(ValueError) as ours:
        anb.einsum(subscripts, *(anb.tensor(a) for a in arrays))
    assert phrase in str(ours.value), str(ours.value)


# -- errors of matmul and dot ------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, a_shape, b_shape, phrases",
    [
        ("matmul", (), (3,), ["Input operand 0 does not have enough dimensions"]),
        ("matmul", (3,), (), ["Input operand 1 does not have enough dimensions"]),
        ("matmul", (3, 4), (5, 2), ["mismatch in its core dimension", "(3, 4)", "(5, 2)"]),
        ("matmul", (3,), (4,), ["mismatch in its core dimension", "(3,)", "(4,)"]),
        (
            "matmul",
            (2, 3, 4),
            (5, 4, 2),
            ["could not be broadcast together", "(2, 3, 4)", "(5, 4, 2)"],
        ),
        ("dot", (2, 3), (4, 5), ["shapes (2,3) and (4,5) not aligned: 3 (dim 1) != 4 (dim 0)"]),
        ("dot", (3,), (4,), ["shapes (3,) and (4,) not aligned: 3 (dim 0) != 4 (dim 0)"]),
        (
            "dot",
            (2, 3, 4),
            (5, 3, 2),
            ["shapes (2,3,4) and (5,3,2) not aligned: 4 (dim 2) != 3 (dim 1)"],
        ),
    ],
)
def test_shape_errors(name, a_shape, b_shape, phrases):
    a, b = np.ones(a_shape), np.ones(b_shape)
    with pytest.raises(ValueError):
        REFERENCE[name](a, b)
    x = anb.tensor(a, requires_grad=True)
    with pytest.raises(ValueError) as ours:
        getattr(anb, name)(x, anb.tensor(b))
    for phrase in phrases:
        assert phrase in str(ours.value), str(ours.value)
    assert x.grad is None


# -- batched VJPs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a_shape, b_shape, dtype",
    [
        ((2, 3), (3, 4), np.float64),
        ((2, 2, 3), (2, 3, 4), np.float64),
        ((3,), (2, 3, 4), np.float64),
        ((12, 10), (10, 9), np.float64),  # BLAS
        ((2, 12, 10), (2, 10, 9), np.float32),  # BLAS
        ((2, 3), (3, 4), np.float32),
        ((2, 1, 30), (2, 30, 20), np.float64),  # BLAS, one row per batch entry
        ((2, 20, 30), (2, 30, 1), np.float64),  # BLAS, one column per batch entry
        ((40, 30), (30,), np.float64),  # BLAS, matrix @ vector
    ],
)
def test_batched_vjps_match_rows(a_shape, b_shape, dtype):
    # The batched VJP runs one product for all vectors; it must equal one VJP per vector.
    rng = np.random.default_rng(9)
    a = anb.tensor(rng.standard_normal(a_shape).astype(dtype), requires_grad=True)
    b = anb.tensor(rng.standard_normal(b_shape), requires_grad=True)
    y = anb.matmul(a, b)
    v = rng.standard_normal((4,) + y.shape)
    batched = anb.grad(
        y, (a, b), grad_outputs=anb.tensor(v), is_grads_batched=True, retain_graph=True
    )
    for row in range(v.shape[0]):
        expected = anb.grad(y, (a, b), grad_outputs=anb.tensor(v[row]), retain_graph=True)
        for got, want in zip(batched, expected, strict=True):
            assert got.dtype == want.dtype
            rtol = 1e-5 if got.dtype == np.float32 else 1e-12
            np.testing.assert_allclose(got.numpy()[row], want.numpy(), rtol=rtol, atol=rtol)


# -- the batched VJPs' GEMM helpers ------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("transpose_x", [False, True])
@pytest.mark.parametrize("transpose_y", [False, True])
@pytest.mark.parametrize("own", [False, True])  # SciPy's BLAS, ops._gemm's own kernel
@pytest.mark.parametrize("rows, depth, columns", [(5, 7, 6), (13, 300, 70)])
def test_gemm_add_accumulates_transposed_and_strided_operands(
    dtype, transpose_x, transpose_y, own, rows, depth, columns
):
    # (13, 300, 70): the own kernel's row tail, two depth blocks and padded last columns.
    rng = np.random.default_rng(20)
    x = rng.standard_normal((depth, rows) if transpose_x else (rows, depth)).astype(dtype)
    y = rng.standard_normal((columns, depth) if transpose_y else (depth, columns)).astype(dtype)
    # The target is every other row of a wider buffer: rows with a leading dimension.
    buffer = rng.standard_normal((rows, 2, columns)).astype(dtype)
    out = buffer[:, 1, :]
    want = out.astype(np.float64) + (x.T if transpose_x else x).astype(np.float64) @ (
        y.T if transpose_y else y
    ).astype(np.float64)
    untouched = buffer[:, 0, :].copy()
    _blas.gemm_add(*_blas.product_kernel(dtype, own), x, transpose_x, y, transpose_y, out)
    rtol = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(buffer[:, 1, :], want, rtol=rtol, atol=rtol)
    np.testing.assert_array_equal(buffer[:, 0, :], untouched)


@pytest.mark.parametrize("transpose_y", [False, True])
@pytest.mark.parametrize("own", [False, True])
@pytest.mark.parametrize("width", [9, 70])  # 70 columns: the own kernel's tiles
def test_product_of_one_hot_rows_equals_the_gemm(transpose_y, own, width):
    rng = np.random.default_rng(21)
    kernel = _blas.product_kernel(np.float64, own)
    y = rng.standard_normal((width, 11) if transpose_y else (11, width))
    x = np.zeros((6, 11))
    x[np.arange(5), rng.integers(0, 11, 5)] = rng.standard_normal(5)  # row 5 stays zero
    columns = np.empty(6, dtype=np.int64)
    assert linalg._one_hot_rows(x, columns)
    assert columns[5] == -1
    start = rng.standard_normal((6, width))
    by_rows, by_gemm = start.copy(), start.copy()
    linalg._product_add(*kernel, x, y, transpose_y, by_rows, columns, True)
    _blas.gemm_add(*kernel, x, False, y, transpose_y, by_gemm)
    np.testing.assert_array_equal(by_rows, by_gemm)
    x[2, 0] = x[2, 1] = 1.0  # two nonzeros in a row: not one-hot
    assert not linalg._one_hot_rows(x, columns)
    assert linalg._all_finite(y)
    y[0, 0] = np.nan
    assert not linalg._all_finite(y)
