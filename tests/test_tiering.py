"""Tier 0 (autograd_nb/tiering.py): NumPy forwards and NumPy twins of the VJP kernels serve a
process until a background worker has compiled its kernels into the cache.

In place: every op's ``forward_numpy`` against its compiled ``forward`` (from the registry, with
hypothesis over shapes, broadcasting and axes), and gradients through tier 0 against the
compiled ones (bit for bit, float32 too) and finite differences (the twins themselves against
the kernels: tests/ops/test_vjp_numpy.py). In fresh processes with an empty cache and tiering on
(the suite runs with ``AUTOGRAD_NB_TIERED=0``): the first gradient compiles nothing, the worker
compiles the kernels, the swap keeps the results, a later process starts compiled, and a worker
that cannot run leaves the process compiling as without tiering.
"""

import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import scipy.special
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import autograd_nb as anb
from autograd_nb import tiering
from autograd_nb.ops.elementwise import ElementwiseOp, _numpy_formula
from autograd_nb.ops.registry import REGISTRY, Op
from autograd_nb.replay import CompileWarning
from tests.checks import BLAS_PRODUCTS, COMPILE_LISTENER, check_gradients

TIERED = sorted(
    name for name, op in REGISTRY.items() if type(op).forward_numpy is not Op.forward_numpy
)
ELEMENTWISE = [n for n in TIERED if isinstance(REGISTRY[n], ElementwiseOp)]
#: The elementwise ops whose kernels call libm (or pow) where NumPy runs its own SIMD loops,
#: which differ in the last bits: tier 0 calls the same C functions element by element.
LIBM = {"power", "arcsin", "arccos", "arctan2", "log2", "log10", "arcsinh", "arccosh", "arctanh"}
NUMPY_ELEMENTWISE = ELEMENTWISE
REDUCTIONS = [n for n in TIERED if getattr(REGISTRY[n], "numpy_function", None) is not None]
# The thresholds of the kernels' functions (overflow and underflow of exp, the switches of
# tanh, sinh, expm1, the 2**20 switch of sin/cos/tan, their hardest argument) and IEEE's edges.
EDGES = [
    0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308, 1e-310,
    -1e-300, 709.782712893384, 710.0, 711.0, -745.1332191019411, -746.0, 88.72283, -103.97208,
    -87.33655, 20.0, -22.0, 40.0, -60.0, 1.0, -1.0, 0.41421356237309503, 2.414213562373095,
    1048576.0, -1048576.0000000002, 1e22, 6381956970095103.0 * 2.0**797, 1.7976931348623157e308,
    3.4028234663852886e38, 1e-40,
]


def edges(dtype):
    with np.errstate(over="ignore"):
        return np.array(EDGES).astype(dtype)


def with_extremes(data, values, dtype):
    """``values`` with some elements replaced by drawn extremes: any float of the dtype
    (hypothesis favours zeros, infinities, NaN, subnormals and the largest) or an edge."""
    width = 32 if dtype == np.float32 else 64
    extreme = st.one_of(st.floats(width=width), st.sampled_from(edges(dtype).tolist()))
    for v in values:
        if v.size:
            drawn = data.draw(st.lists(st.tuples(st.integers(0, v.size - 1), extreme),
                                       max_size=v.size))
            for i, x in drawn:
                v.flat[i] = x
    return values


def both(op, values, attrs):
    """``forward`` and ``forward_numpy`` of ``op`` on the prepared ``values``."""
    arrays, prepared = op.prepare(values, attrs)
    compiled = op.forward(arrays, prepared)
    numpy = op.forward_numpy(arrays, prepared)
    return compiled, numpy


def assert_same(compiled, numpy, dtype):
    assert numpy is not None
    assert numpy.shape == compiled.shape and numpy.dtype == compiled.dtype == dtype
    assert numpy.flags.c_contiguous
    np.testing.assert_array_equal(numpy, compiled)


def test_the_tiered_ops_cover_the_common_ones():
    # The ops of an MLP step, a simulation step and the shape and index functions.
    expected = {"add", "multiply", "divide", "tanh", "exp", "log", "_bmm", "sum", "max",
                "log_softmax", "softmax", "getitem", "_index_scatter", "reshape", "transpose",
                "broadcast_to", "concatenate", "stack", "cumsum", "where"}
    assert expected <= set(TIERED)
    assert "erf" not in TIERED  # NumPy has no erf: it compiles from its first call


def elementwise_values(op, name, dtype, shapes, rng):
    low, high = op.domain
    values = [rng.uniform(low, high, size=s).astype(dtype) for s in shapes]
    attrs = {}
    if name == "where":
        values[0] = values[0] > (low + high) / 2
    if op.params:
        attrs = {op.params[0]: low / 2, op.params[1]: high / 2}
    return values, attrs


@pytest.mark.parametrize("name", NUMPY_ELEMENTWISE)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_elementwise_forward_numpy_matches_the_kernels(name, dtype, data):
    op = REGISTRY[name]
    shapes = data.draw(
        hnp.mutually_broadcastable_shapes(num_shapes=op.n_inputs, max_dims=3, max_side=4)
    ).input_shapes
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    values, attrs = elementwise_values(op, name, dtype, shapes, rng)
    first = 1 if name == "where" else 0
    values[first:] = with_extremes(data, values[first:], dtype)
    compiled, numpy = both(op, values, attrs)
    assert_same(compiled, numpy, dtype)


@pytest.mark.parametrize("name", NUMPY_ELEMENTWISE)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_elementwise_forward_numpy_matches_the_kernels_everywhere(name, dtype):
    # Many values at once: the domain, every magnitude of both signs, the edges (flat, and
    # for two inputs also broadcast); once without arguments of 2**20 or more, which the
    # kernels of sin and cos take through their reduced-range loop.
    op = REGISTRY[name]
    rng = np.random.default_rng(NUMPY_ELEMENTWISE.index(name))
    n = 3000
    size = 3 * n + len(EDGES)
    for limit in (np.inf, 2.0**20):
        values, attrs = elementwise_values(op, name, dtype, [(size,)] * op.n_inputs, rng)
        first = 1 if name == "where" else 0
        with np.errstate(over="ignore", invalid="ignore"):
            for v in values[first:]:
                v[:n] = 10.0 ** rng.uniform(-320, 310, n) * rng.choice([-1, 1], n)
                v[n : 2 * n] = rng.standard_normal(n) * 30
                v[2 * n : 2 * n + len(EDGES)] = rng.permutation(edges(dtype))
                v[np.abs(v) >= limit] = 0.25
        compiled, numpy = both(op, values, attrs)
        assert_same(compiled, numpy, dtype)
        if op.n_inputs == 2:
            # (rows around the edges: within config.TIER0_LIBM_ELEMENTS for the libm ops)
            rows = slice(2 * n - 1000, 2 * n + len(EDGES) + 1000)
            columns = [v[rows].reshape(-1, 1) if i == 0 else v[:7]
                       for i, v in enumerate(values)]
            assert_same(*both(op, columns, attrs), dtype)


def test_the_ops_on_libm_functions_have_a_numpy_forward():
    # (and the tests above hold each one to its kernel's bits)
    assert LIBM <= set(NUMPY_ELEMENTWISE)
    for name in LIBM:
        op = REGISTRY[name]
        values, attrs = elementwise_values(op, name, np.float32, [(3,)] * op.n_inputs,
                                           np.random.default_rng(0))
        assert both(op, values, attrs)[1] is not None, name


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_libm_calls_leave_tier_0(dtype):
    # Element by element through the C library, ~0.7 us an element in float32: from
    # config.TIER0_LIBM_ELEMENTS on, the forward compiles, and so does the VJP's kernel.
    limit = anb.config.TIER0_LIBM_ELEMENTS[np.dtype(dtype).name]
    op = REGISTRY["power"]
    for n, served in ((limit, True), (limit + 1, False)):
        a = np.full(n, 1.5, dtype=dtype)
        arrays, attrs = op.prepare([a, a], {})
        assert (op.forward_numpy(arrays, attrs) is not None) is served
        saved = anb.engine.backward.Saved(arrays, op.forward(arrays, attrs))
        assert op.has_vjp_numpy(0, saved, attrs) is served
    assert REGISTRY["tanh"].forward_numpy(*REGISTRY["tanh"].prepare([a], {})) is not None


def test_a_power_with_a_whole_constant_exponent_has_no_numpy_formula():
    # numba raises to an integer by multiplying, not through pow: no twin of that.
    assert _numpy_formula("x ** 2", "square by power") is None
    assert _numpy_formula("x ** 2.0", "power") is not None


@pytest.mark.parametrize("name", REDUCTIONS)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_reduction_forward_numpy_matches_the_kernels(name, data):
    op = REGISTRY[name]
    dtype = data.draw(st.sampled_from([np.float32, np.float64]))
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = rng.uniform(0.5, 1.5, size=shape).astype(dtype)
    if data.draw(st.booleans()):
        (x,) = with_extremes(data, [x], dtype)
    if op.single_axis:
        attrs = {"axis": data.draw(st.integers(-len(shape), len(shape) - 1))}
    elif name in ("cumsum", "cumprod"):
        attrs = {"axis": data.draw(st.sampled_from([None, *range(len(shape))]))}
    else:
        axes = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=3))
        attrs = {"axis": tuple(axes) or None, "keepdims": data.draw(st.booleans())}
    compiled, numpy = both(op, [x], attrs)
    if numpy is None:  # non-adjacent axes: the kernels' permuted layout serves them
        assert REGISTRY[name].prepare([x], attrs)[1]["layout"].permuted is not None
        return
    assert_same(compiled, numpy, dtype)


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_long_reductions_keep_the_kernels_order(name, dtype):
    # Rows long enough for NumPy's pairwise sum and the kernels' eight running sums to part,
    # and softmax over lanes with -inf, inf and NaN.
    rng = np.random.default_rng(REDUCTIONS.index(name))
    positive = name in ("prod", "cumprod")
    for shape, axis in [((3, 1000), 1), ((1000, 3), 0), ((5, 200, 4), 1), ((7, 131), -1),
                        ((4000,), 0), ((2, 9), 1)]:
        x = rng.uniform(0.99, 1.01, shape) if positive else rng.standard_normal(shape) * 5
        x = x.astype(dtype)
        assert_same(*both(REGISTRY[name], [x], {"axis": axis}), dtype)
    x = rng.standard_normal((6, 5)).astype(dtype)
    x[1, 2], x[2, :], x[3, 1], x[4, 0], x[5, :] = -np.inf, -np.inf, np.inf, np.nan, 1e30
    assert_same(*both(REGISTRY[name], [x], {"axis": 1}), dtype)


#: ``_bmm`` shapes (batch, m, k, n) over the forward's paths: rank one, its own loops, BLAS's
#: dot, matrix-vector both ways and GEMM, on one thread and on OpenBLAS's, and empty ones.
PRODUCTS = [(1, 1, 1, 1), (2, 3, 1, 4), (3, 4, 5, 2), (1, 8, 8, 8), (1, 9, 9, 9), (2, 1, 300, 1),
            (1, 1, 600, 7), (4, 1, 300, 5), (3, 5, 300, 1), (1, 32, 64, 32), (1, 32, 32, 10),
            (2, 100, 70, 90), (1, 1, 1000, 1000), (1, 700, 3000, 1), (1, 200, 300, 400),
            (1, 0, 3, 4), (1, 3, 0, 4)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_match_on_every_path(dtype):
    rng = np.random.default_rng(3)
    for batch, m, k, n in PRODUCTS:
        a = rng.standard_normal((batch, m, k)).astype(dtype)
        b = rng.standard_normal((batch, k, n)).astype(dtype)
        assert_same(*both(REGISTRY["_bmm"], [a, b], {}), dtype)
    # A matrix-vector product of the size ``_matvec`` splits: reassociated sums, compiled.
    a = rng.standard_normal((1, 300, 300)).astype(dtype)
    assert both(REGISTRY["_bmm"], [a, a[:, :, :1].copy()], {})[1] is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_product_shape_and_index_forwards_match(dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4, 5)).astype(dtype)
    b = rng.standard_normal((3, 5, 2)).astype(dtype)
    assert_same(*both(REGISTRY["_bmm"], [a, b], {}), dtype)
    assert_same(*both(REGISTRY["_bmm"], [a.reshape(12, 5), b[0]],
                      {"views": ((1, 12, 5), (1, 5, 2), (12, 2))}), dtype)
    assert_same(*both(REGISTRY["transpose"], [a], {"axes": (2, 0, 1)}), dtype)
    assert_same(*both(REGISTRY["broadcast_to"], [a[:, :1]], {"shape": (2, 3, 4, 5)}), dtype)
    for name in ("concatenate", "stack"):
        for axis in (0, 1, -1):
            assert_same(*both(REGISTRY[name], [a, a * 2], {"axis": axis}), dtype)
    assert_same(*both(REGISTRY["concatenate"], [a, b.reshape(3, 2, 5)], {"axis": 1}), dtype)
    index = (np.array([0, 2, 2]), slice(None), np.array([1, 1, 4]))
    compiled, numpy = both(REGISTRY["getitem"], [a], {"index": index})
    assert_same(compiled, numpy, dtype)
    source = REGISTRY["getitem"].prepare([a], {"index": index})[1]
    assert_same(*both(REGISTRY["_index_scatter"], [compiled], {"source": source}), dtype)


def test_integer_and_special_layouts_keep_the_kernels():
    ints = np.arange(6).reshape(2, 3)
    assert both(REGISTRY["add"], [ints, ints], {})[1] is None
    assert both(REGISTRY["_bmm"], [ints.reshape(1, 2, 3), ints.reshape(1, 3, 2)], {})[1] is None
    assert REGISTRY["erf"].forward_numpy([np.ones(2)], {}) is None


@pytest.fixture(autouse=True)
def _blas_products(monkeypatch):
    """The products on the BLAS (tests.checks.BLAS_PRODUCTS says why); the tests of tier 0
    under the own GEMM set it themselves."""
    monkeypatch.setattr(anb.config, "GEMM_KERNEL", BLAS_PRODUCTS["AUTOGRAD_NB_GEMM"])


@pytest.fixture
def tier0(monkeypatch):
    """Tier 0 in this process, with no worker: the tiered ops run NumPy, a backward the twins."""
    monkeypatch.setattr(tiering, "ENABLED", True)
    monkeypatch.setattr(tiering, "launch", lambda: None)
    monkeypatch.setattr(tiering, "backward_pending", True)
    monkeypatch.setattr(tiering, "_numpy_ops", set(TIERED))
    for name in TIERED:
        tiering._enter(REGISTRY[name])
    try:
        yield
    finally:
        for name in TIERED:
            tiering._leave(REGISTRY[name])
        tiering._calls.clear()
        tiering._produced.clear()
        tiering._pending.clear()
        tiering._recorded_bytes = 0


#: MLP sizes (batch, inputs, hidden, classes): products small enough for their loops, and
#: through BLAS's GEMM with long float64 sums over classes and rows.
MLP_SIZES = [(8, 6, 5, 3), (64, 128, 64, 10)]


def mlp_step(dtype, sizes=MLP_SIZES[0]):
    batch, inputs, hidden, classes = sizes
    rng = np.random.default_rng(0)
    x = anb.tensor(rng.standard_normal((batch, inputs)).astype(dtype))
    w1 = anb.tensor(rng.standard_normal((inputs, hidden)).astype(dtype) / inputs**0.5,
                    requires_grad=True)
    b1 = anb.tensor(rng.standard_normal(hidden).astype(dtype), requires_grad=True)
    w2 = anb.tensor(rng.standard_normal((hidden, classes)).astype(dtype) / 3,
                    requires_grad=True)
    rows, labels = np.arange(batch), rng.integers(0, classes, size=batch)

    def loss():
        h = anb.tanh(x @ w1 + b1)
        return -anb.log_softmax(h @ w2, axis=1)[rows, labels].mean()

    return loss, [w1, b1, w2]


def no_kernel_vjps(monkeypatch):
    """Within: an op's VJP kernel (``Op.vjp``) raises, so tier 0's backward must run twins."""

    def refuse(*args):
        raise AssertionError("a VJP kernel ran in tier 0's backward")

    for op in REGISTRY.values():
        monkeypatch.setattr(op, "vjp", refuse, raising=False)


def leave_tier0():
    """The tiered ops and the backward run compiled from here on (as when the worker is
    done)."""
    for name in TIERED:
        tiering._leave(REGISTRY[name])
    tiering.backward_pending = False


def tier0_and_compiled(dtype, monkeypatch, sizes=MLP_SIZES[0]):
    """An MLP step's loss and gradients in tier 0 (NumPy twins only), then compiled: the
    same loss."""
    loss, params = mlp_step(dtype, sizes)
    assert all(tiering.in_tier0(REGISTRY[n]) for n in ("tanh", "_bmm", "log_softmax"))
    value = loss()
    with monkeypatch.context() as patch:
        no_kernel_vjps(patch)
        grads = anb.grad(value, params)
    assert tiering._calls  # what the worker would replay
    leave_tier0()
    compiled_value = loss()
    compiled = anb.grad(compiled_value, params)
    np.testing.assert_array_equal(value.numpy(), compiled_value.numpy())
    for g, c in zip(grads, compiled, strict=True):
        assert type(g._data) is np.ndarray and g.dtype == c.dtype and g.shape == c.shape
    return [g.numpy() for g in grads], [c.numpy() for c in compiled]


def test_tier0_serves_an_op_through_the_call_paths_seam(tier0, monkeypatch):
    # No op's method is replaced on its instance (``tensor.set_tier0`` is the seam), and every
    # eager way into an op reaches tier 0: an operator, the function, a constant operand, a
    # unary call, an in-place update that records nothing.
    shadowed = {name: [k for k in vars(op) if callable(getattr(type(op), k, None))]
                for name, op in REGISTRY.items()}
    assert not any(shadowed.values()), shadowed
    monkeypatch.setattr(tiering, "_ready", set())
    served = []
    for name in ("add", "exp"):
        op = REGISTRY[name]
        assert tiering.in_tier0(op)
        monkeypatch.setattr(op, "forward_numpy", lambda arrays, attrs, op=op: (
            served.append(op.name) or type(op).forward_numpy(op, arrays, attrs)))
    x, y = anb.tensor([1.0, 2.0]), anb.tensor([3.0, 4.0])

    def every_way():
        p = anb.tensor([1.0, 2.0])
        with anb.no_grad():
            p += y
        return [(x + y).numpy(), anb.add(x, y).numpy(), (x + 1.0).numpy(),
                anb.exp(x).numpy(), p.numpy()]

    in_tier0 = every_way()
    assert served == ["add", "add", "add", "add", "exp"]
    for name in ("add", "exp"):
        tiering._leave(REGISTRY[name])
        assert not tiering.in_tier0(REGISTRY[name])
    served.clear()
    compiled = every_way()
    assert served == []  # (the ops' own runs)
    for value, expected in zip(in_tier0, compiled, strict=True):
        np.testing.assert_array_equal(value, expected)
    np.testing.assert_array_equal(compiled[0], [4.0, 6.0])


@pytest.mark.parametrize("sizes", MLP_SIZES)
def test_tier0_gradients_equal_the_compiled_ones(tier0, monkeypatch, sizes):
    grads, compiled = tier0_and_compiled(np.float64, monkeypatch, sizes)
    for g, c in zip(grads, compiled, strict=True):
        np.testing.assert_array_equal(g, c)


@pytest.mark.parametrize("sizes", MLP_SIZES)
def test_tier0_float32_gradients_equal_the_compiled_ones(tier0, monkeypatch, sizes):
    # The VJP kernels compute in float64 what numba promotes (``1 - y * y``: an int literal;
    # log_softmax's float64 sum) and round once into the gradient: so do the twins.
    grads, compiled = tier0_and_compiled(np.float32, monkeypatch, sizes)
    for g, c in zip(grads, compiled, strict=True):
        np.testing.assert_array_equal(g, c)


def _mT(x):
    return anb.linalg.matrix_transpose(x)


#: Losses through each linalg factorisation's VJP, of ``a`` (24 x 24: past the factors'
#: leaves of 16) and ``b`` (24 x 6).
LINALG_LOSSES = {
    "slogdet": lambda a, b: anb.linalg.slogdet(a)[1],
    "det": lambda a, b: anb.linalg.det(a * 0.5),
    "solve": lambda a, b: anb.linalg.solve(a, b).sum(),
    "solve_vector": lambda a, b: anb.linalg.solve(a, b[:, 0]).sum(),
    "inv": lambda a, b: anb.linalg.inv(a).sum(),
    "cholesky": lambda a, b: anb.linalg.cholesky(a @ _mT(a)).sum(),
    "eigh": lambda a, b: (anb.linalg.eigh(a + _mT(a))[1] ** 2 * a).sum(),
    "eigvalsh": lambda a, b: anb.linalg.eigvalsh(a + _mT(a)).sum(),
    "svd": lambda a, b: (anb.linalg.svd(a[:, :9], full_matrices=False)[0] * a[:, :9]).sum(),
    "svdvals": lambda a, b: anb.linalg.svdvals(a).sum(),
    "qr_wide": lambda a, b: anb.linalg.qr(a[:7]).R.sum(),
    "qr_tall": lambda a, b: (anb.linalg.qr(a[:, :5]).Q * a[:, :5]).sum(),
    "pinv": lambda a, b: anb.linalg.pinv(a[:, :8]).sum(),
}


@pytest.mark.parametrize("name", sorted(LINALG_LOSSES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tier0_linalg_gradients_equal_the_compiled_ones(tier0, monkeypatch, name, dtype):
    # Every linalg factorisation's VJP has a NumPy twin: tier 0 walks the twins (no VJP
    # kernel runs), and the gradient keeps the compiled backward's bits.
    rng = np.random.default_rng(2)
    start = rng.standard_normal((24, 24)).astype(dtype)
    b = anb.tensor(rng.standard_normal((24, 6)).astype(dtype))

    def loss(x):
        return LINALG_LOSSES[name](anb.tanh(x) + 3 * np.eye(24, dtype=dtype), b)

    x = anb.tensor(start, requires_grad=True)
    value = loss(x)
    assert anb.engine.backward.has_twins(anb.engine.make_plan([value._node], [x], False))
    with monkeypatch.context() as patch:
        no_kernel_vjps(patch)
        (g,) = anb.grad(value, x)
    leave_tier0()
    compiled = anb.tensor(start, requires_grad=True)
    (c,) = anb.grad(loss(compiled), compiled)
    np.testing.assert_array_equal(g.numpy(), c.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_vjp_without_a_twin_runs_its_kernel_in_tier0(tier0, dtype):
    # ``det``'s VJP at a zero determinant takes the cofactors from numba's own SVD, which has
    # no NumPy twin: tier 0 runs that VJP's kernel (compiling it), and the gradient keeps the
    # compiled backward's bits (the differentiable rules would raise LinAlgError here).
    start = np.array([[1.0, 2.0, 0.5], [2.0, 4.0, 1.0], [0.3, -1.0, 2.0]], dtype=dtype)

    def loss(x):
        return anb.linalg.det(x * 1.5)

    x = anb.tensor(start, requires_grad=True)
    value = loss(x)
    assert not anb.engine.backward.has_twins(anb.engine.make_plan([value._node], [x], False))
    (g,) = anb.grad(value, x)
    leave_tier0()
    compiled = anb.tensor(start, requires_grad=True)
    (c,) = anb.grad(loss(compiled), compiled)
    assert g.shape == c.shape == start.shape
    np.testing.assert_array_equal(g.numpy(), c.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tier0_runs_the_kernel_of_an_elementwise_vjp_without_a_twin(tier0, dtype):
    # ``gammaln``'s derivative calls digamma, which has no NumPy twin: that one VJP runs its
    # kernel in tier 0's walk (the others their twins), and the gradient keeps its bits.
    rng = np.random.default_rng(4)
    start = rng.uniform(0.5, 2, (4, 3)).astype(dtype)
    x = anb.tensor(start, requires_grad=True)
    value = anb.sum(anb.special.gammaln(anb.tanh(x) + 1.0) * 1.5)
    assert anb.engine.backward.has_twins(anb.engine.make_plan([value._node], [x], False))
    (g,) = anb.grad(value, x)
    leave_tier0()
    compiled = anb.tensor(start, requires_grad=True)
    (c,) = anb.grad(anb.sum(anb.special.gammaln(anb.tanh(compiled) + 1.0) * 1.5), compiled)
    np.testing.assert_array_equal(g.numpy(), c.numpy())
    t = np.tanh(start.astype(np.float64))
    np.testing.assert_allclose(g.numpy(), 1.5 * scipy.special.digamma(t + 1) * (1 - t * t),
                               rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_tier0_backward_runs_a_custom_function_as_the_compiled_walk_does(tier0):
    class Cube(anb.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 3.0 * x * x

    x = anb.tensor(np.linspace(-1, 1, 7).astype(np.float32), requires_grad=True)
    value = anb.sum(anb.tanh(Cube.apply(x)))
    assert anb.engine.backward.has_twins(anb.engine.make_plan([value._node], [x], False))
    (g,) = anb.grad(value, x, retain_graph=True)
    leave_tier0()
    np.testing.assert_array_equal(g.numpy(), anb.grad(value, x)[0].numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tier0_batched_gradients_equal_the_compiled_ones_without_products(tier0, dtype):
    # Each row on its own, as the executor runs these VJPs (only ``_bmm`` stacks its rows).
    rng = np.random.default_rng(6)
    x = anb.tensor(rng.standard_normal((6, 5)).astype(dtype), requires_grad=True)
    b = anb.tensor(rng.standard_normal(5).astype(dtype), requires_grad=True)
    y = anb.softmax(anb.tanh(x * 0.7 + b), axis=1) * anb.sigmoid(x)
    seeds = anb.tensor(rng.standard_normal((3, 6, 5)).astype(dtype))
    grads = anb.grad(y, [x, b], grad_outputs=seeds, is_grads_batched=True, retain_graph=True)
    tiering.backward_pending = False
    compiled = anb.grad(y, [x, b], grad_outputs=seeds, is_grads_batched=True)
    for g, c in zip(grads, compiled, strict=True):
        np.testing.assert_array_equal(g.numpy(), c.numpy())


def assert_same_bits(computed, expected):
    assert computed.dtype == expected.dtype and computed.shape == expected.shape
    kind = f"u{computed.dtype.itemsize}"
    np.testing.assert_array_equal(computed.view(kind), expected.view(kind))


def batched_tier0_and_compiled(make, arrays, seeds, monkeypatch):
    """The batched gradients of ``make(*leaves)`` for ``seeds`` in tier 0 (the twins only,
    no VJP kernel), then compiled (the executor's blocks of rows)."""
    leaves = [anb.tensor(a, requires_grad=True) for a in arrays]
    y = make(*leaves)
    seeds = anb.tensor(seeds)
    plan = anb.engine.make_plan([y._node], leaves, False)
    assert anb.engine.backward.has_twins(plan, batched=True)
    with monkeypatch.context() as patch:
        no_kernel_vjps(patch)
        grads = anb.grad(y, leaves, grad_outputs=seeds, is_grads_batched=True,
                         retain_graph=True)
    tiering.backward_pending = False
    compiled = anb.grad(y, leaves, grad_outputs=seeds, is_grads_batched=True)
    return [g.numpy() for g in grads], [c.numpy() for c in compiled]


#: ``a @ b`` (shapes) through each case of ``_bmm``'s rows driver: stacked rows (matrix @
#: matrix for ``a``'s gradient, vector @ matrix, a batch of matrix @ vector), one product per
#: row (``b``'s gradient, batched matmul), BLAS or the loops as the stacked size decides.
BATCHED_PRODUCTS = [((2, 8), (8, 8)), ((8, 64), (64, 32)), ((16, 300), (300, 40)),
                    ((40,), (40, 30)), ((30, 40), (40,)), ((3, 20, 50), (3, 50, 1)),
                    ((3, 1, 50), (3, 50, 16)), ((3, 4, 5), (3, 5, 6))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", BATCHED_PRODUCTS, ids=str)
@pytest.mark.parametrize("batch", [3, 200])  # one block of rows; three
def test_tier0_batched_products_give_the_compiled_bits(tier0, monkeypatch, dtype, shapes,
                                                         batch):
    # Tier 0 runs the executor's blocks of rows, each ``_bmm`` VJP over a block at once as
    # its rows driver does (``vjp_numpy_rows``): row by row, a product of BLAS size per row
    # ran its loops where the block's ran BLAS, and stacked rows made other GEMMs.
    rng = np.random.default_rng(7)
    arrays = [rng.standard_normal(shape).astype(dtype) for shape in shapes]
    out_shape = np.matmul(*arrays).shape
    seeds = rng.standard_normal((batch, *out_shape)).astype(dtype)
    grads, compiled = batched_tier0_and_compiled(lambda a, b: a @ b, arrays, seeds,
                                                 monkeypatch)
    for g, c in zip(grads, compiled, strict=True):
        assert_same_bits(g, c)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", [((16, 300), (300, 128)), ((3, 40, 50), (3, 50, 96)),
                                    ((2, 8), (8, 64))], ids=str)
def test_tier0_with_the_own_gemm_gives_the_compiled_bits(tier0, monkeypatch, dtype, shapes):
    # Products by ``_gemm``'s own AVX-512 kernel (as where the BLAS lacks such kernels) have
    # no twin: tier 0 runs the VJP's kernel, and in a batch the rows driver's products.
    monkeypatch.setattr(anb.config, "GEMM_KERNEL", "own")
    rng = np.random.default_rng(11)
    arrays = [rng.standard_normal(shape).astype(dtype) for shape in shapes]
    out_shape = np.matmul(*arrays).shape
    leaves = [anb.tensor(a, requires_grad=True) for a in arrays]
    y = leaves[0] @ leaves[1]
    single = rng.standard_normal(out_shape).astype(dtype)
    seeds = rng.standard_normal((200, *out_shape)).astype(dtype)
    tier0 = [anb.grad(y, leaves, grad_outputs=anb.tensor(single), retain_graph=True),
             anb.grad(y, leaves, grad_outputs=anb.tensor(seeds), is_grads_batched=True,
                      retain_graph=True)]
    tiering.backward_pending = False
    compiled = [anb.grad(y, leaves, grad_outputs=anb.tensor(single), retain_graph=True),
                anb.grad(y, leaves, grad_outputs=anb.tensor(seeds), is_grads_batched=True)]
    for got, want in zip(tier0, compiled, strict=True):
        for g, c in zip(got, want, strict=True):
            assert_same_bits(g.numpy(), c.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sizes", [(2, 8, 8), (8, 64, 32)], ids=str)
@pytest.mark.parametrize("batch", [3, 200])
def test_tier0_batched_mlp_layer_gives_the_compiled_bits(tier0, monkeypatch, dtype, sizes,
                                                         batch):
    rows, inputs, outputs = sizes
    rng = np.random.default_rng(8)
    arrays = [rng.standard_normal(shape).astype(dtype)
              for shape in ((rows, inputs), (inputs, outputs), (outputs,))]
    seeds = rng.standard_normal((batch, rows, outputs)).astype(dtype)
    grads, compiled = batched_tier0_and_compiled(lambda x, w, b: anb.tanh(x @ w + b), arrays,
                                                 seeds, monkeypatch)
    for g, c in zip(grads, compiled, strict=True):
        assert_same_bits(g, c)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", [((8, 64), (64, 32)), ((40,), (40, 30))], ids=str)
def test_tier0_batched_one_hot_seeds_give_the_compiled_bits(tier0, monkeypatch, dtype,
                                                            shapes):
    # A Jacobian's seeds reach the product as one-hot rows, which the rows driver adds row
    # by row instead of a GEMM (``_one_hot_add``).
    rng = np.random.default_rng(9)
    arrays = [rng.standard_normal(shape).astype(dtype) for shape in shapes]
    size = np.matmul(*arrays).size
    seeds = (1.5 * np.eye(size, dtype=dtype)).reshape((size, *np.matmul(*arrays).shape))
    grads, compiled = batched_tier0_and_compiled(lambda a, b: a @ b, arrays, seeds,
                                                 monkeypatch)
    for g, c in zip(grads, compiled, strict=True):
        assert_same_bits(g, c)


@pytest.mark.parametrize("batch", [3, 200])
@pytest.mark.parametrize("shapes", [((8, 64), (64, 32)), ((2, 8), (8, 8)),
                                    ((3, 20, 50), (3, 50, 16))], ids=str)
def test_tier0_batched_where_the_executor_declines_gives_the_compiled_bits(tier0, batch,
                                                                           shapes):
    # Gradients of two dtypes: the compiled executor declines the batched plan, and the
    # compiled walk runs each op's ``vjp_batched`` over the whole batch, where tier 0 runs
    # the executor's blocks of rows.
    rng = np.random.default_rng(3)
    a = anb.tensor(rng.standard_normal(shapes[0]).astype(np.float32), requires_grad=True)
    b = anb.tensor(rng.standard_normal(shapes[1]), requires_grad=True)
    y = anb.tanh(a.astype("float64") @ b)
    seeds = anb.tensor(rng.standard_normal((batch, *y.shape)))
    grads = anb.grad(y, [a, b], grad_outputs=seeds, is_grads_batched=True, retain_graph=True)
    tiering.backward_pending = False
    ran = []
    run = anb.engine.executor.run
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(anb.engine.executor, "run", lambda *args: ran.append(run(*args)))
        compiled = anb.grad(y, [a, b], grad_outputs=seeds, is_grads_batched=True)
    assert ran == [None]
    for g, c in zip(grads, compiled, strict=True):
        assert_same_bits(g.numpy(), c.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tier0_batched_runs_the_kernel_of_an_elementwise_vjp_without_a_twin(tier0, dtype):
    # ``gammaln``'s VJP kernel runs once per row of each block, as the executor runs it.
    rng = np.random.default_rng(10)
    start = rng.uniform(0.5, 2, (4, 30)).astype(dtype)
    w = anb.tensor(rng.standard_normal((30, 20)).astype(dtype))
    x = anb.tensor(start, requires_grad=True)
    y = anb.special.gammaln(anb.tanh(x) + 1.0) @ w
    seeds = anb.tensor(rng.standard_normal((130, 4, 20)).astype(dtype))
    (g,) = anb.grad(y, x, grad_outputs=seeds, is_grads_batched=True, retain_graph=True)
    tiering.backward_pending = False
    (c,) = anb.grad(y, x, grad_outputs=seeds, is_grads_batched=True)
    assert_same_bits(g.numpy(), c.numpy())


def test_tier0_in_place_arithmetic_runs(tier0):
    # ``p -= lr * g`` under no_grad: the operators' in-place path asks tier 0's override of
    # ``run_pair`` for an ``out`` (it once took two arguments only, and raised).
    rng = np.random.default_rng(3)
    start = rng.standard_normal((4, 3))
    p = anb.tensor(start.copy(), requires_grad=True)
    (g,) = anb.grad(anb.sum(anb.tanh(p)), p)
    with anb.no_grad():
        p -= 0.5 * g
        p += 1.0
    assert tiering.in_tier0(REGISTRY["subtract"])
    np.testing.assert_array_equal(p.numpy(), (start - 0.5 * g.numpy()) + 1.0)


def test_tier0_gradients_against_finite_differences(tier0):
    rng = np.random.default_rng(1)
    check_gradients(
        lambda a, b: anb.sum(anb.softmax(a @ b, axis=0) * anb.exp(a[:, :1])),
        [rng.standard_normal((3, 4)), rng.standard_normal((4, 2))],
        second_order=False,
    )


def test_tier0_backward_keeps_the_engine_rules(tier0):
    # .backward() into .grad, retain_graph, freed graphs and a grad_output of the wrong shape.
    x = anb.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y = anb.outer(x, x)
    (g,) = anb.grad(y, x, grad_outputs=anb.ones_like(y), retain_graph=True)
    np.testing.assert_array_equal(g.numpy(), [20.0, 20.0, 20.0, 20.0])
    with pytest.raises(RuntimeError, match=r"\[4, 4\].*\[3\]|shape"):
        anb.grad(y, x, grad_outputs=anb.ones(3))
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [20.0, 20.0, 20.0, 20.0])
    with pytest.raises(RuntimeError, match="second time"):
        y.sum().backward()
    z = anb.tanh(x)
    (h,) = anb.grad(z.sum(), x, create_graph=True)  # create_graph: the rules, recorded
    (h2,) = anb.grad(h.sum(), x)
    t = np.tanh(x.numpy())
    np.testing.assert_allclose(h2.numpy(), -2 * t * (1 - t * t), rtol=1e-12)


def test_tier0_seeds_are_not_returned_as_gradients(tier0):
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    seed = anb.tensor([5.0, 6.0])
    (g,) = anb.grad(x + 0.0, x, grad_outputs=seed)
    g.numpy()[0] = 0.0  # the result is the caller's own buffer, never the seed's
    np.testing.assert_array_equal(seed.numpy(), [5.0, 6.0])


CHILD = COMPILE_LISTENER + textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    import autograd_nb as anb
    from autograd_nb import tiering
    from autograd_nb.ops.registry import REGISTRY
    if sys.argv[1] == "broken":
        tiering._WORKER = "raise SystemExit(3)"
    rng = np.random.default_rng(0)
    x = anb.tensor(rng.standard_normal((16, 8)).astype(np.float32))
    w = anb.tensor(rng.standard_normal((8, 4)).astype(np.float32), requires_grad=True)
    b = anb.tensor(np.zeros(4, np.float32), requires_grad=True)
    labels = rng.integers(0, 4, size=16)

    z = anb.tensor(np.linspace(-1, 1, 5000), requires_grad=True)

    def step():
        loss = -anb.log_softmax(anb.tanh(x @ w + b), axis=1)[np.arange(16), labels].mean()
        grads = [g.numpy().tolist() for g in anb.grad(loss, [w, b])]
        grads.append(float(loss.numpy()))
        if sys.argv[1] == "many":  # two more programs: a fused chain, a batched Jacobian
            h = z
            for _ in range(4):
                h = anb.sin(h * 0.9 + 0.1)
            anb.grad(anb.sum(h), z)
            y = anb.tanh(w.T @ x.T)
            anb.grad(y, w, grad_outputs=anb.ones((2,) + y.shape), is_grads_batched=True)
        return grads

    before = len(compiles)
    first = step()
    first = step()  # (twice: a loop's steps, from which the backward templates come)
    during = compiles[before:]
    tier0 = tiering.status()["pending_calls"] > 0, tiering.backward_pending
    finished = tiering.wait(timeout=240)
    after_wait = tiering.status()["pending_calls"] > 0, tiering.backward_pending
    before = len(compiles)
    second = step()
    pending = tiering.status()["pending_calls"]
    anb.tanh(anb.tensor(np.ones((16, 4), np.float64)))  # a new dtype: tier 0 again
    new_call = tiering.status()["pending_calls"] - pending
    print(json.dumps({"tier0": tier0, "during": during, "finished": finished,
                      "after_wait": after_wait, "after_compiles": compiles[before:],
                      "first": first, "second": second, "new_call": new_call}))
    """
)


def run_child(cache, mode="normal"):
    env = dict(os.environ, AUTOGRAD_NB_TIERED="1", AUTOGRAD_NB_CACHE_DIR=str(cache / "k"),
               NUMBA_CACHE_DIR=str(cache / "n"), **BLAS_PRODUCTS)
    done = subprocess.run([sys.executable, "-c", CHILD, mode], env=env, capture_output=True,
                          text=True, timeout=400, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def ours(compiles):
    """The compilations of autograd_nb's kernels (not numba's or the layout probe's)."""
    return [c for c in compiles if c.startswith(("anb_", "autograd_nb.ops", "autograd_nb.engine"))]


@pytest.mark.slow
def test_cold_process_compiles_nothing_first_then_swaps(tmp_path):
    cold = run_child(tmp_path)
    assert cold["tier0"] == [True, True]
    assert ours(cold["during"]) == []  # the first gradients: NumPy and the twins only
    assert cold["finished"] and cold["after_wait"] == [False, False]
    assert ours(cold["after_compiles"]) == []  # the worker's kernels, loaded from the cache
    # The loss and the float32 gradients: tier 0's forwards and VJP twins give the kernels' bits.
    assert cold["first"] == cold["second"]
    assert cold["new_call"] == 1
    (ready,) = list((tmp_path / "k").glob(f"*/{tiering.READY_FILE}"))
    lines = ready.read_text().splitlines()
    assert {"tanh", "_bmm", "log_softmax", "getitem", tiering.BACKWARD} <= {
        line.split()[0] for line in lines
    }
    assert "tanh <f4:nn" in lines  # the call's dtype and broadcast pattern
    warm = run_child(tmp_path)  # a later process starts on the compiled tier
    assert warm["tier0"] == [False, False]
    assert ours(warm["during"]) == [] and ours(warm["after_compiles"]) == []
    assert warm["first"] == cold["second"]


@pytest.mark.slow
def test_a_later_process_compiles_nothing_for_what_ran(tmp_path):
    # Three programs (an MLP step, a chain the backward fuses, a batched Jacobian), each
    # twice: the worker repeats them, with the same leaves, outputs and batch, so a later
    # process finds every kernel it needs in the cache.
    cold = run_child(tmp_path, "many")
    assert ours(cold["during"]) == [] and cold["finished"]
    warm = run_child(tmp_path, "many")
    assert ours(warm["during"]) == [] and ours(warm["after_compiles"]) == []


@pytest.mark.slow
def test_a_worker_that_fails_leaves_the_process_compiling(tmp_path):
    result = run_child(tmp_path, "broken")
    assert result["tier0"] == [True, True]
    assert result["new_call"] == 0  # (tier 0 left for good)
    assert result["finished"] and result["after_wait"] == [False, False]
    assert ours(result["after_compiles"])  # compiled here, as without tiering
    assert result["first"] == result["second"]
    assert not list((tmp_path / "k").glob(f"*/{tiering.READY_FILE}"))


@pytest.mark.slow
def test_warmup_lists_what_it_compiled(tmp_path):
    env = dict(os.environ, AUTOGRAD_NB_TIERED="1", AUTOGRAD_NB_CACHE_DIR=str(tmp_path / "k"),
               NUMBA_CACHE_DIR=str(tmp_path / "n"), **BLAS_PRODUCTS)
    done = subprocess.run(
        [sys.executable, "-m", "autograd_nb", "warmup", "--ops", "tanh", "--dtypes", "float32",
         "--no-progress"],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stderr
    (ready,) = list((tmp_path / "k").glob(f"*/{tiering.READY_FILE}"))
    lines = ready.read_text().splitlines()
    assert {"tanh <f4:nn", "sum <f4:nn", tiering.BACKWARD} <= set(lines)
    probe = textwrap.dedent(
        """
        import numpy as np
        import autograd_nb as anb
        from autograd_nb import tiering
        x = anb.tensor(np.ones((5, 7), np.float32), requires_grad=True)
        anb.grad(anb.sum(anb.tanh(x)), x)  # warmed: compiled, nothing pending
        ready = tiering.status()["pending_calls"], tiering.backward_pending
        anb.cos(x)  # not warmed: tier 0
        print(*ready, tiering.status()["pending_calls"])
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.stdout.split() == ["0", "False", "1"], done.stderr


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_compiled_step_with_a_gradient_inside_records_in_tier0(tier0, dtype):
    # In tier 0 (a cold kernel cache) the gradient inside fn used to run the twins' walk,
    # which has no tables to record, and the signature then ran eagerly for good.
    rng = np.random.default_rng(3)
    x = anb.tensor(rng.standard_normal((8, 6)).astype(dtype))
    rows, labels = np.arange(8), rng.integers(0, 3, size=8)
    start = [rng.standard_normal(shape).astype(dtype) / 3 for shape in ((6, 5), (5,), (5, 3))]

    def step(params):
        w1, b1, w2 = params
        loss = -anb.log_softmax(anb.tanh(x @ w1 + b1) @ w2, axis=1)[rows, labels].mean()
        grads = anb.grad(loss, params)
        with anb.no_grad():
            for p, g in zip(params, grads):
                p -= 0.1 * g
        return grads

    compiled = anb.compile(step)
    params, eager_params = ([anb.tensor(a.copy(), requires_grad=True) for a in start]
                            for _ in range(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        for _ in range(3):
            for g, w in zip(compiled(params), step(eager_params), strict=True):
                np.testing.assert_array_equal(g.numpy(), w.numpy())
    assert tiering.backward_pending  # (eager code is still in tier 0)
    info = compiled.cache_info()
    assert (info.programs, info.eager, info.traces) == (1, 0, 1)
