"""``Op.vjp_numpy`` (tier 0's backward, autograd_nb/tiering.py) against the ops' VJP kernels, bit
for bit: from the registry, both float dtypes, flat, scalar and broadcast layouts, values where
numba's float64 promotion of a float32 operand shows (an int literal, a register sum), repeated
targets in the kernels' order; and the ops that have no twin say so before writing anything.
"""

import numpy as np
import pytest

from autograd_nb.ops._blas import own_kernel
from autograd_nb.ops.elementwise import ElementwiseOp, _numpy_formula
from autograd_nb.ops.linalg import _blas
from autograd_nb.ops.registry import REGISTRY, Op, Saved

# They call the kernels and twins themselves, the same in either tier: the compiled pass runs
# them once.
pytestmark = pytest.mark.compiled_only

ELEMENTWISE = sorted(n for n, op in REGISTRY.items() if isinstance(op, ElementwiseOp))
#: The elementwise VJPs whose formulas call a function NumPy cannot follow (libm's, the
#: special functions) or ``**``: their kernels compile (``vjp_numpy`` says False).
WITHOUT_TWIN = {
    (name, k) for name in ELEMENTWISE for k, formula in REGISTRY[name].vjp_formulas.items()
    if _numpy_formula(formula, name) is None
}

#: (output shape, input shapes): flat, a scalar operand, broadcast rows and columns, a sum
#: over a long row (in a float64 register), a sum over rows (in the target, in turn), a 3-D
#: layout whose collapse depends on the other operand.
LAYOUTS = {
    1: [[(37,)], [(5, 9)], [(1,)], [()], [(0, 3)]],
    2: [[(6, 7), (6, 7)], [(6, 7), ()], [(), (6, 7)], [(6, 7), (7,)], [(6, 7), (6, 1)],
        [(1, 7), (6, 1)], [(300,), (1,)], [(2, 3, 40), (3, 1)], [(2, 3, 40), (1, 1, 40)],
        [(200, 9), (9,)], [(4, 1, 5), (1, 3, 1)], [(0, 7), (7,)], [(3, 1), (3, 0)]],
    3: [[(6, 7), (6, 7), (6, 7)], [(6, 1), (6, 7), (7,)], [(6, 7), (), (1, 7)],
        [(2, 3, 40), (3, 1), (40,)]],
}


def node_values(op, shapes, dtype, rng):
    low, high = op.domain
    values = [rng.uniform(low, high, size=s).astype(dtype) for s in shapes]
    attrs = {}
    if op.name == "where":
        values[0] = values[0] > (low + high) / 2
    if op.params:
        attrs = {op.params[0]: low / 2, op.params[1]: high / 2}
    if op.name in ("maximum", "minimum") and values[0].size and values[1].size:
        values[1].flat[::3] = values[0].flat[0]  # ties
        values[0].flat[0] = values[1].flat[0]
    return values, attrs


def run_both(op, k, arrays, attrs, output, grad, start):
    """Whether the op has a twin of VJP ``k`` here (``has_vjp_numpy``), and the kernel's and
    the twin's accumulation into copies of ``start`` (the twin's only where it has one)."""
    saved = Saved([a if i in op.saves else None for i, a in enumerate(arrays)],
                  output if op.saves_output else None)
    compiled, twin = start.copy(), start.copy()
    op.vjp(k, grad, saved, attrs, compiled)
    ran = op.has_vjp_numpy(k, saved, attrs)
    if ran:
        op.vjp_numpy(k, grad, saved, attrs, twin)
    return ran, compiled, twin


@pytest.mark.parametrize("name", ELEMENTWISE)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_elementwise_twins_give_the_kernels_bits(name, dtype):
    op = REGISTRY[name]
    rng = np.random.default_rng(ELEMENTWISE.index(name))
    for shapes in LAYOUTS[op.n_inputs]:
        values, attrs = node_values(op, shapes, dtype, rng)
        arrays, prepared = op.prepare(values, attrs)
        output = op.forward(arrays, prepared)
        # A gradient of every magnitude, and a target that already holds values (a second
        # contribution into the same buffer).
        grad = (rng.standard_normal(output.shape) * 10.0 ** rng.integers(-3, 4, output.shape))
        grad = np.asarray(grad, dtype=output.dtype)
        for k in range(op.n_inputs):
            if not op.is_differentiable(k):
                continue
            start = np.asarray(rng.standard_normal(arrays[k].shape) / 3, dtype=arrays[k].dtype)
            ran, compiled, twin = run_both(op, k, arrays, prepared, output, grad, start)
            if (name, k) in WITHOUT_TWIN:
                assert not ran
                continue
            assert ran, (name, k, shapes)
            np.testing.assert_array_equal(twin, compiled, err_msg=f"{name} {k} {shapes}")


def test_the_common_elementwise_vjps_have_twins():
    names = {name for name, _ in WITHOUT_TWIN}
    # (only the special functions' derivatives, which call digamma, i0, j1, ..., have none)
    assert {"digamma", "gammaln", "i0", "i1", "polygamma", "j0", "j1", "jn", "y0", "y1", "yn",
            "iv", "ive", "gamma", "gammainc", "betainc"} <= names
    assert {REGISTRY[name].family for name in names} <= {"special", "special-internal"}
    assert not names & {"add", "subtract", "multiply", "divide", "tanh", "exp", "log", "sin",
                        "sqrt", "sigmoid", "maximum", "where", "clip", "abs", "arcsin",
                        "power"}


def test_an_op_without_vjp_numpy_has_no_twin():
    op = REGISTRY["digamma"]
    assert type(op).vjp_numpy is not Op.vjp_numpy
    assert ("digamma", 0) in WITHOUT_TWIN


def check_twins(op, values, attrs, rng, scale=1.0):
    """Every differentiable input's twin against its kernel, on a node of ``values``."""
    arrays, prepared = op.prepare(values, attrs)
    output = op.forward(arrays, prepared)
    grad = np.asarray(rng.standard_normal(output.shape) * scale, dtype=output.dtype)
    for k, array in enumerate(arrays):
        if not op.is_differentiable(k) or array.dtype.kind != "f":
            continue
        start = np.asarray(rng.standard_normal(array.shape) / 3, dtype=array.dtype)
        ran, compiled, twin = run_both(op, k, arrays, prepared, output, grad, start)
        assert ran, (op.name, k)
        np.testing.assert_array_equal(twin, compiled, err_msg=f"{op.name} {k} {attrs}")


AXIS_OPS = sorted(n for n, op in REGISTRY.items() if getattr(op, "numpy_vjp", None) is not None)
#: Rows long enough for a float32 sum to part from a float64 one, lanes along each axis,
#: several axes, all of them (None).
AXES = [((3, 1000), 1), ((1000, 3), 0), ((5, 200, 4), 1), ((7, 131), -1), ((4000,), 0),
        ((2, 9), 1), ((4, 5, 6), (1, 2)), ((4, 5, 6), None), ((6, 1), 0), ((3, 0, 2), 1),
        ((4, 5, 6), (0, 2)), ((2, 3, 4, 5), (0, 2))]  # (the last two: non-adjacent axes)


@pytest.mark.parametrize("name", AXIS_OPS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reduction_twins_give_the_kernels_bits(name, dtype):
    op = REGISTRY[name]
    rng = np.random.default_rng(AXIS_OPS.index(name))
    for shape, axis in AXES:
        if op.single_axis and not isinstance(axis, int) or 0 in shape and name in ("max", "min"):
            continue  # (an empty max raises, as NumPy's)
        if name in ("prod", "cumprod"):
            x = rng.uniform(0.9, 1.1, shape)
            x.flat[::7] = 0.0  # zeros: the products of the others, without division
        elif name in ("max", "min"):
            x = rng.integers(-3, 4, shape) * 0.5  # ties share the gradient
        else:
            x = rng.standard_normal(shape) * 5
        attrs = {"axis": axis} if op.single_axis or name == "cumsum" else {
            "axis": axis, "keepdims": bool(rng.integers(2))}
        check_twins(op, [x.astype(dtype)], attrs, rng)
    # Lanes of -inf, inf and NaN (softmax's and max's special cases).
    x = rng.standard_normal((6, 5)).astype(dtype)
    x[1, 2], x[2, :], x[3, 1], x[4, 0], x[5, :] = -np.inf, -np.inf, np.inf, np.nan, 1e30
    check_twins(op, [x], {"axis": 1}, rng)


def test_the_reductions_have_twins():
    assert {"sum", "prod", "max", "min", "logsumexp", "softmax", "log_softmax", "cumsum",
            "cumprod", "_norm2"} <= set(AXIS_OPS)


#: ``_bmm`` shapes (batch, m, k, n): its loops, BLAS's GEMM on one thread and on OpenBLAS's,
#: matrix-vector shapes and rank one.
PRODUCTS = [(1, 1, 1, 1), (2, 3, 1, 4), (3, 4, 5, 2), (1, 8, 8, 8), (1, 9, 9, 9), (2, 1, 300, 1),
            (1, 1, 600, 7), (4, 1, 300, 5), (3, 5, 300, 1), (1, 32, 64, 32), (2, 100, 70, 90),
            (1, 200, 300, 400), (1, 0, 3, 4)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_product_twins_give_the_kernels_bits(dtype):
    op = REGISTRY["_bmm"]
    rng = np.random.default_rng(5)
    for batch, m, k, n in PRODUCTS:
        a = rng.standard_normal((batch, m, k)).astype(dtype)
        b = rng.standard_normal((batch, k, n)).astype(dtype)
        if own_kernel(a.dtype) and _blas(a.dtype, m, k, n):
            arrays, attrs = op.prepare([a, b], {})
            assert not op.has_vjp_numpy(0, Saved(arrays, None), attrs)
            continue
        check_twins(op, [a, b], {}, rng)
    a = rng.standard_normal((12, 5)).astype(dtype)
    b = rng.standard_normal((5, 2)).astype(dtype)
    check_twins(op, [a, b], {"views": ((1, 12, 5), (1, 5, 2), (12, 2))}, rng)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_shape_and_index_twins_give_the_kernels_bits(dtype):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((3, 4, 5)).astype(dtype)
    check_twins(REGISTRY["reshape"], [a], {"shape": (12, 5)}, rng)
    check_twins(REGISTRY["transpose"], [a], {"axes": (2, 0, 1)}, rng)
    for source in ((4, 1), (3, 1, 5), (1, 1, 1), (5,)):
        check_twins(REGISTRY["broadcast_to"], [rng.standard_normal(source).astype(dtype)],
                    {"shape": (2, 3, 4, 5)}, rng, scale=1e3)
    other = np.float64 if dtype == np.float32 else np.float32
    check_twins(REGISTRY["astype"], [a], {"dtype": other}, rng)
    for name in ("concatenate", "stack"):
        for axis in (0, 1, -1):
            check_twins(REGISTRY[name], [a, a * 2], {"axis": axis}, rng)
    indexes = [
        (slice(None, None, 2), 1), (Ellipsis, slice(1, 4)), 2,
        (np.array([0, 2, 2, 0, 2]), slice(None), np.array([1, 1, 4, 1, 1])),  # repeats
        a > 0.3, (np.array([1, 1, 1]),),
    ]
    for index in indexes:
        check_twins(REGISTRY["getitem"], [a], {"index": index}, rng, scale=1e3)
        source = REGISTRY["getitem"].prepare([a], {"index": index})[1]
        picked = a[index]
        check_twins(REGISTRY["_index_scatter"], [np.ascontiguousarray(picked)],
                    {"source": source}, rng)
    for index, value in [((slice(None), 1), a[:, 1, :1] * 3),
                         ((np.array([0, 2, 0]), 1), a[0, 0] * 2),
                         (a > 0, np.asarray(2.0, dtype))]:
        check_twins(REGISTRY["setitem"], [a, value], {"index": index}, rng)


def _matrices(rng, shape, dtype, kind="general"):
    """Square matrices of ``shape``: general (LU), symmetric positive definite (Cholesky's
    path of ``_lu``), or symmetric with repeated eigenvalues."""
    n = shape[-1]
    a = rng.standard_normal(shape)
    if kind == "general":
        a = a + n**0.5 * np.eye(n)
    elif kind == "spd":
        a = a @ np.swapaxes(a, -1, -2) + n * np.eye(n)
    elif kind == "repeated":  # (eigenvalues 1, 1, 1, 4, ...: gaps of exactly 0)
        q = np.linalg.qr(a)[0]
        w = np.ones(n)
        w[n // 2 :] = 4.0
        a = q @ (w[:, None] * np.swapaxes(q, -1, -2))
        a = (a + np.swapaxes(a, -1, -2)) / 2
    return a.astype(dtype)


def _lu_values(rng, a_shape, b_shape, dtype, kind):
    a = _matrices(rng, a_shape, dtype, kind)
    lu = REGISTRY["_lu"].forward([a], {})
    return a, lu, rng.standard_normal(b_shape).astype(dtype)


#: Orders: one, the factor's loops (up to ``LAPACK_LEAVES``), the recursions above them, and
#: Cholesky's inverse by ``lauum`` (above ``LAPACK_TRMM_MAX``).
ORDERS = [1, 5, 40, 100]
KINDS = ["general", "spd"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lu_solve_twins_give_the_kernels_bits(dtype):
    op = REGISTRY["_lu_solve"]
    rng = np.random.default_rng(11)
    # (vectors, a few columns: a loop; more columns: GEMM; a batch)
    for n, batch, columns in [(1, (), None), (5, (), None), (40, (), 3), (40, (2,), 9),
                              (100, (), None), (7, (2, 3), 4), (16, (3,), 6)]:
        for kind in KINDS:
            b_shape = (*batch, n) if columns is None else (*batch, n, columns)
            a, lu, b = _lu_values(rng, (*batch, n, n), b_shape, dtype, kind)
            for transpose in (False, True):
                check_twins(op, [a, lu, b], {"transpose": transpose}, rng)


@pytest.mark.parametrize("name", ["_slogdet", "_det"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_determinant_twins_give_the_kernels_bits(name, dtype):
    op = REGISTRY[name]
    rng = np.random.default_rng(12)
    for n in ORDERS + [33, 70]:
        for kind in KINDS:
            for batch in ((), (3,)):
                a = _matrices(rng, (*batch, n, n), dtype, kind)
                if name == "_det":  # (a determinant near 1: no overflow)
                    a = a / np.abs(np.linalg.det(a.astype(np.float64)))[..., None, None] ** (1 / n)
                    a = a.astype(dtype)
                lu = REGISTRY["_lu"].forward([a], {})
                check_twins(op, [a, lu], {}, rng)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_singular_determinants(dtype):
    # _slogdet's twin writes nan as its kernel does; _det's cofactors (numba's SVD) have none.
    rng = np.random.default_rng(13)
    a = _matrices(rng, (2, 4, 4), dtype)
    a[1, 3] = 0  # (a zero row: U has an exact zero)
    lu = REGISTRY["_lu"].forward([a], {})
    check_twins(REGISTRY["_slogdet"], [a, lu], {}, rng)
    op = REGISTRY["_det"]
    arrays, attrs = op.prepare([a, lu], {})
    assert not op.has_vjp_numpy(0, Saved(arrays, op.forward(arrays, attrs)), attrs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cholesky_twin_gives_the_kernels_bits(dtype):
    # Orders within one inner block, across inner blocks, across outer blocks (64, 16).
    rng = np.random.default_rng(14)
    for shape in [(1, 1), (5, 5), (16, 16), (40, 40), (3, 20, 20), (150, 150)]:
        check_twins(REGISTRY["_cholesky"], [_matrices(rng, shape, dtype, "spd")], {}, rng)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_eigh_twin_gives_the_kernels_bits(dtype):
    rng = np.random.default_rng(15)
    for shape, kind in [((1, 1), "spd"), ((6, 6), "spd"), ((2, 30, 30), "spd"),
                        ((8, 8), "repeated"), ((3, 3), "general")]:
        a = _matrices(rng, shape, dtype, kind)
        a = (a + np.swapaxes(a, -1, -2)) / 2
        for upper in (False, True):
            check_twins(REGISTRY["_eigh"], [a], {"upper": upper}, rng)


#: Matrix shapes: tall, wide, square, a row, a column, a batch.
RECTANGLES = [(7, 4), (4, 7), (6, 6), (1, 5), (5, 1), (2, 30, 20), (1, 1), (20, 45)]


@pytest.mark.parametrize("name", ["_svd", "_qr", "_pinv"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rectangular_twins_give_the_kernels_bits(name, dtype):
    op = REGISTRY[name]
    rng = np.random.default_rng(16)
    for shape in RECTANGLES:
        a = rng.standard_normal(shape).astype(dtype)
        attrs = {"rcond": 1e-15} if name == "_pinv" else {}
        check_twins(op, [a], attrs, rng)
    if name != "_qr":  # rank-deficient: a zero singular value, equal ones
        a = np.zeros((6, 4), dtype)
        a[np.arange(3), np.arange(3)] = [2, 2, 1]
        check_twins(op, [a], {"rcond": 1e-6} if name == "_pinv" else {}, rng)


def test_the_linalg_vjps_have_twins():
    names = {"_lu_solve", "_slogdet", "_det", "_cholesky", "_eigh", "_svd", "_qr", "_pinv"}
    assert all(type(REGISTRY[n]).vjp_numpy is not Op.vjp_numpy for n in names)
    linalg = {n for n, op in REGISTRY.items() if op.family == "linalg" and any(
        op.is_differentiable(k) for k in range(op.n_inputs))}
    assert {n for n in linalg if type(REGISTRY[n]).vjp_numpy is Op.vjp_numpy} == set()
