"""Every elementwise op from the registry: forward against NumPy, VJP against finite
differences (kernels and differentiable rules), second derivatives, broadcasting, dtypes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import autograd_nb as anb
from autograd_nb.ops.registry import REGISTRY, call
from tests.checks import check_gradients
from tests.reference import REFERENCE

ELEMENTWISE = sorted(name for name, op in REGISTRY.items() if op.family == "elementwise")
UNARY = [n for n in ELEMENTWISE if REGISTRY[n].n_inputs == 1 and n != "clip"]
BINARY = [n for n in ELEMENTWISE if REGISTRY[n].n_inputs == 2]


def function(name):
    """The op's public function; an internal op (``_std_root``) through ``call``."""
    if name.startswith("_"):
        return lambda *args: call(name, *args)
    return getattr(anb, name)


def sample(op, shape, rng):
    low, high = op.domain
    x = rng.uniform(low, high, size=shape)
    if op.name in ("abs", "sign", "relu", "maximum", "minimum", "clip"):
        # Keep away from the kinks, where finite differences straddle two branches.
        x = np.where(np.abs(x) < 0.05, x + 0.1, x)
    return x


def test_registry_has_the_api_elementwise_ops():
    expected = set(
        "add subtract multiply divide power maximum minimum where negative exp expm1 log log1p "
        "sqrt square abs sign sin cos tan arcsin arccos arctan sinh cosh tanh sigmoid relu "
        "softplus clip".split()
    )
    assert expected <= set(ELEMENTWISE)


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary_forward_matches_numpy(name, dtype):
    op = REGISTRY[name]
    x = sample(op, (3, 5), np.random.default_rng(0)).astype(dtype)
    got = function(name)(anb.tensor(x))
    assert got.dtype == dtype
    rtol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got.numpy(), REFERENCE[name](x), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("name", UNARY)
def test_unary_gradients(name):
    op = REGISTRY[name]
    x = sample(op, (2, 3), np.random.default_rng(1))
    check_gradients(function(name), [x])


shapes_pair = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3)


@pytest.mark.parametrize("name", BINARY)
@settings(max_examples=15, deadline=None)
@given(shapes=shapes_pair, seed=st.integers(0, 2**16))
def test_binary_broadcasting_gradients(name, shapes, seed):
    op = REGISTRY[name]
    rng = np.random.default_rng(seed)
    a, b = (sample(op, s, rng) for s in shapes.input_shapes)
    if name in ("maximum", "minimum"):
        b = b + 0.3  # no ties, where the gradient splits
    binary = function(name)
    got = binary(anb.tensor(a), anb.tensor(b))
    np.testing.assert_allclose(got.numpy(), REFERENCE[name](a, b), rtol=1e-13, atol=1e-13)
    check_gradients(binary, [a, b], second_order=seed % 3 == 0)


def test_where_gradients_flow_to_both_branches():
    rng = np.random.default_rng(2)
    condition = rng.uniform(size=(3, 4)) > 0.5
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((1, 4))
    np.testing.assert_array_equal(
        anb.where(condition, anb.tensor(a), anb.tensor(b)).numpy(), np.where(condition, a, b)
    )
    check_gradients(lambda x, y: anb.where(condition, x, y), [a, b])


@pytest.mark.parametrize("bounds", [(-0.5, 0.5), (None, 0.2), (-0.1, None)])
def test_clip(bounds):
    x = sample(REGISTRY["clip"], (4, 3), np.random.default_rng(3))
    x = np.where(np.isclose(x, 0.5, atol=0.02) | np.isclose(x, -0.5, atol=0.02), 0.0, x)
    got = anb.clip(anb.tensor(x), *bounds)
    np.testing.assert_allclose(got.numpy(), np.clip(x, *bounds))
    check_gradients(lambda t: anb.clip(t, *bounds), [x])


def test_ties_split_the_gradient_like_torch():
    a = anb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = anb.tensor([1.0, 1.0, 4.0], requires_grad=True)
    ga, gb = anb.grad(anb.maximum(a, b).sum(), (a, b))
    np.testing.assert_array_equal(ga.numpy(), [0.5, 1.0, 0.0])
    np.testing.assert_array_equal(gb.numpy(), [0.5, 0.0, 1.0])


def test_float32_stays_float32_with_python_scalars():
    x = anb.tensor(np.ones(3, np.float32), requires_grad=True)
    y = (x * 2.5 + 1) / 3.0
    assert y.dtype == np.float32
    (g,) = anb.grad(y.sum(), x)
    assert g.dtype == np.float32


def test_mixed_precision_promotes_and_grads_keep_input_dtype():
    a = anb.tensor(np.ones(3, np.float32), requires_grad=True)
    b = anb.tensor(np.full(3, 2.0), requires_grad=True)
    y = a * b
    assert y.dtype == np.float64
    ga, gb = anb.grad(y.sum(), (a, b))
    assert ga.dtype == np.float32 and gb.dtype == np.float64
    np.testing.assert_array_equal(ga.numpy(), [2, 2, 2])


def test_integer_arithmetic_keeps_int_and_exp_gives_float():
    i = anb.tensor([1, 2, 3])
    assert (i + i).dtype == np.int64
    assert anb.exp(i).dtype == np.float64
    np.testing.assert_allclose(anb.exp(i).numpy(), np.exp([1, 2, 3]))


def test_power_edge_cases_match_torch():
    # d/da a**0 is 0 even at a = 0; d/db 0**b is 0 for b >= 0 (torch's conventions).
    a = anb.tensor([0.0, 2.0], requires_grad=True)
    b = anb.tensor([0.0, 3.0], requires_grad=True)
    ga, gb = anb.grad(anb.power(a, b).sum(), (a, b))
    np.testing.assert_allclose(ga.numpy(), [0.0, 12.0])
    np.testing.assert_allclose(gb.numpy(), [0.0, 8 * np.log(2)])


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("scalar_side", [0, 1])
def test_scalar_operand_kernels_agree_with_the_strided_ones(name, scalar_side, monkeypatch):
    """``x * 0.9``: one-element operands take the flat scalar variants (read once, outside the
    loop); they must give the strided kernels' results, forward and VJP, bit for bit."""
    from autograd_nb.ops import _kernels

    op = REGISTRY[name]
    rng = np.random.default_rng(3)
    full = sample(op, (5, 7), rng)
    one = sample(op, (), rng)
    arrays = [full, one] if scalar_side else [one, full]

    def run():
        tensors = [anb.tensor(a, requires_grad=True) for a in arrays]
        y = function(name)(*tensors)
        grads = anb.grad(y, tensors, grad_outputs=anb.tensor(np.linspace(-1, 1, 35)
                                                              .reshape(5, 7)))
        return [y.numpy()] + [g.numpy() for g in grads]

    uses = []
    original = _kernels.scalar_mask

    def counting(*args):
        found = original(*args)
        uses.append(found)
        return found

    def clear():
        op._attrs_cache.clear()
        op._exec_cache.clear()
        op._run_cache.clear()

    monkeypatch.setattr(_kernels, "scalar_mask", counting)
    clear()
    scalar = run()
    assert any(mask for mask in uses), "the scalar variants were not used"
    monkeypatch.setattr(_kernels, "scalar_mask", lambda *args: None)
    clear()
    strided = run()
    clear()
    for a, b in zip(scalar, strided, strict=True):
        np.testing.assert_array_equal(a, b)


# -- the cached eager path (``Op._run``) against prepare + forward --------------------------------


def _same_attr(got, expected):
    if isinstance(expected, np.ndarray):
        return isinstance(got, np.ndarray) and np.array_equal(got, expected)
    if hasattr(expected, "index") and hasattr(expected, "input_shape"):  # indexing's Selection
        return (got.index, got.input_shape, got.basic) == (
            expected.index, expected.input_shape, expected.basic
        )
    return got == expected


def assert_run_matches_general(op, arrays, attrs=None):
    """``op._run`` gives what ``prepare`` + ``forward`` give: the same prepared arrays, attrs
    and result bits, on the call that fills its cache and on the one that reads it. Returns
    the result."""
    attrs = attrs or {}
    prepared, expected_attrs = op.prepare(list(arrays), dict(attrs))
    expected = op.forward(prepared, expected_attrs)
    for _ in range(2):
        got_arrays, got_attrs, got = op._run(list(arrays), dict(attrs))
        assert len(got_arrays) == len(prepared)
        for g, e in zip(got_arrays, prepared, strict=True):
            assert g.dtype == e.dtype and g.shape == e.shape and g.flags.c_contiguous
            np.testing.assert_array_equal(g, e)
        assert set(got_attrs) == set(expected_attrs)
        for key, value in expected_attrs.items():
            # "exec": the executor's per-shape cache, filled lazily (either may be ahead)
            assert key == "exec" or _same_attr(got_attrs[key], value), key
        assert type(got) is np.ndarray and got.flags.c_contiguous
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert got.tobytes() == expected.tobytes()  # the same bits, NaNs included
    return got


def layout_variant(x, kind):
    """``x`` in the same values, C-contiguous or as a strided (non-contiguous) view."""
    if kind == "contiguous" or x.ndim == 0:
        return x
    padded = np.empty(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
    padded[..., ::2] = x
    return padded[..., ::2]


@pytest.mark.parametrize("name", BINARY)
@settings(max_examples=15, deadline=None)
@given(
    shapes=shapes_pair,
    seed=st.integers(0, 2**16),
    dtype=st.sampled_from([np.float32, np.float64]),
    layouts=st.tuples(*[st.sampled_from(["contiguous", "strided"])] * 2),
)
def test_binary_run_matches_the_general_path(name, shapes, seed, dtype, layouts):
    op = REGISTRY[name]
    rng = np.random.default_rng(seed)
    arrays = [
        layout_variant(sample(op, s, rng).astype(dtype), kind)
        for s, kind in zip(shapes.input_shapes, layouts, strict=True)
    ]
    got = assert_run_matches_general(op, arrays)
    # A second set of values of the same layout reads the cache and still computes afresh.
    others = [layout_variant(sample(op, a.shape, rng).astype(dtype), kind)
              for a, kind in zip(arrays, layouts, strict=True)]
    again = assert_run_matches_general(op, others)
    np.testing.assert_allclose(got, REFERENCE[name](*arrays), rtol=1e-5,
                               atol=_rounding_atol(arrays))
    np.testing.assert_allclose(again, REFERENCE[name](*others), rtol=1e-5,
                               atol=_rounding_atol(others))


def _rounding_atol(arrays):
    """A few ulps of the inputs' magnitude (at least 1): a result that cancels (float32
    ``logaddexp(-0.56, -0.86)`` is -0.0042, from -0.56 + 0.556) carries the rounding of its
    larger intermediates, in the kernels as in NumPy's reference."""
    scale = max([1.0] + [float(np.max(np.abs(a))) for a in arrays if a.size])
    return 4 * np.finfo(arrays[0].dtype).eps * scale


@pytest.mark.parametrize("name", UNARY)
@settings(max_examples=8, deadline=None)
@given(
    shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3),
    dtype=st.sampled_from([np.float32, np.float64, np.int64]),
    layout=st.sampled_from(["contiguous", "strided"]),
)
def test_unary_run_matches_the_general_path(name, shape, dtype, layout):
    op = REGISTRY[name]
    x = layout_variant(sample(op, shape, np.random.default_rng(0)).astype(dtype), layout)
    assert_run_matches_general(op, [x])


def test_mixed_dtypes_and_params_take_the_general_path():
    a32, a64 = np.ones(3, np.float32), np.full(3, 2.0)
    for op, arrays, attrs in [
        (REGISTRY["multiply"], [a32, a64], {}),
        (REGISTRY["add"], [np.arange(3), a64], {}),
        (REGISTRY["clip"], [a64], {"a_min": 0.0, "a_max": 1.5}),
        (REGISTRY["where"], [a64 > 1, a64, a32], {}),
    ]:
        assert_run_matches_general(op, arrays, attrs)


def test_eager_results_and_recorded_attrs_equal_the_general_paths():
    """Through Tensors (``apply``'s cached path) and through a Python scalar (the general
    one): the same values, and nodes of one shape share the general path's attrs."""
    x = anb.tensor(np.linspace(-1, 1, 6).reshape(2, 3), requires_grad=True)
    y = anb.tensor(np.linspace(0.5, 2, 3), requires_grad=True)
    cached = [x * y, x * y]
    general = x * np.linspace(0.5, 2, 3)
    for z in cached:
        np.testing.assert_array_equal(z.numpy(), general.numpy())
        assert z.grad_fn.attrs is general.grad_fn.attrs
        assert z.grad_fn.next_functions == (x, y)
    (g,) = anb.grad((cached[0] * cached[1]).sum(), y)
    np.testing.assert_allclose(g.numpy(), 2 * (x.numpy() ** 2 * y.numpy()).sum(axis=0))


@pytest.mark.compiled_only
def test_run_skips_prepare_once_cached(monkeypatch):
    op = REGISTRY["multiply"]
    op._run([np.ones((2, 3)), np.ones(3)], {})
    monkeypatch.setattr(op, "prepare", lambda *args: pytest.fail("prepare ran again"))
    _, _, out = op._run([np.full((2, 3), 2.0), np.arange(3.0)], {})
    np.testing.assert_array_equal(out, np.full((2, 3), 2.0) * np.arange(3.0))
