"""Complex operands of the ops (docs/complex.rst): values against NumPy, gradients in torch's
convention against central differences of the real and imaginary parts (tests/complex_checks.py),
to second order; the elementwise ops from the registry; ops without a complex case raise
TypeError."""

import numpy as np
import pytest

import autograd_nb as anb
import autograd_nb.numpy as anp
from autograd_nb.ops.registry import REGISTRY, call
from tests.complex_checks import check_complex_gradients

#: The elementwise ops with a complex case, and the NumPy function each is held to.
COMPLEX_UNARY = {
    "negative": np.negative, "square": np.square, "abs": np.abs, "exp": np.exp,
    "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "log2": np.log2, "log10": np.log10,
    "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "tan": np.tan, "arcsin": np.arcsin,
    "arccos": np.arccos, "arctan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "tanh": np.tanh, "arcsinh": np.arcsinh, "arccosh": np.arccosh, "arctanh": np.arctanh,
    "sigmoid": lambda z: 1 / (1 + np.exp(-z)),
    "_real": np.real, "_imag": np.imag, "_conj": np.conj, "_angle": np.angle,
}
COMPLEX_BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "power": np.power,
}
COMPLEX_ELEMENTWISE = set(COMPLEX_UNARY) | set(COMPLEX_BINARY) | {"where"}
ELEMENTWISE = sorted(
    name for name, op in REGISTRY.items() if op.family in ("elementwise", "complex")
)


def _complex(rng, shape):
    """Values away from every branch cut and pole of the functions above: real parts in
    (0.3, 0.9), imaginary parts in (0.2, 0.6)."""
    return rng.uniform(0.3, 0.9, size=shape) + 1j * rng.uniform(0.2, 0.6, size=shape)


def _function(name):
    if name.startswith("_"):
        return lambda *args: call(name, *args)
    return getattr(anb, name)


def test_the_registry_lists_each_complex_case():
    # An op says whether it has a complex case (``ElementwiseOp.complex``); this list and
    # the registry agree, so a new op's complex case is tested here.
    with_case = {name for name in ELEMENTWISE if REGISTRY[name].complex}
    assert with_case == COMPLEX_ELEMENTWISE


@pytest.mark.parametrize("name", sorted(set(ELEMENTWISE) - COMPLEX_ELEMENTWISE))
def test_elementwise_without_a_complex_case_raise_type_error(name):
    op = REGISTRY[name]
    z = anb.tensor(_complex(np.random.default_rng(0), (3,)), requires_grad=True)
    args = [z] * op.n_inputs
    attrs = {p: 0.5 for p in op.params}
    if name == "where":
        args[0] = z.real > 0
    with pytest.raises(TypeError, match="not implemented for complex"):
        call(name, *args, **attrs)


@pytest.mark.parametrize("name", sorted(COMPLEX_UNARY))
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_unary_forward_matches_numpy(name, dtype):
    z = _complex(np.random.default_rng(0), (3, 4)).astype(dtype)
    got = _function(name)(anb.tensor(z))
    expected = COMPLEX_UNARY[name](z)
    assert got.dtype == expected.dtype
    rtol = 1e-6 if dtype == np.complex64 else 1e-14
    np.testing.assert_allclose(got.numpy(), expected, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("name", sorted(COMPLEX_UNARY))
def test_unary_gradients(name):
    z = _complex(np.random.default_rng(1), (2, 3))
    check_complex_gradients(_function(name), [z])


@pytest.mark.parametrize("name", sorted(COMPLEX_BINARY))
def test_binary_forward_and_gradients(name):
    rng = np.random.default_rng(2)
    a, b = _complex(rng, (2, 3)), _complex(rng, (2, 3))
    got = _function(name)(anb.tensor(a), anb.tensor(b))
    np.testing.assert_allclose(got.numpy(), COMPLEX_BINARY[name](a, b), rtol=1e-14)
    check_complex_gradients(_function(name), [a, b])


@pytest.mark.parametrize("name", sorted(COMPLEX_BINARY))
def test_binary_with_a_real_operand_keeps_its_real_gradient(name):
    # A real input of an op that computes in complex has the real part of the complex
    # gradient (torch's handle_r_to_c), broadcast and summed back to its shape.
    rng = np.random.default_rng(3)
    z, x = _complex(rng, (2, 3)), rng.uniform(0.5, 1.5, size=(3,))
    check_complex_gradients(_function(name), [z, x])
    check_complex_gradients(_function(name), [x, z])


def test_where_of_complex_and_real_branches():
    rng = np.random.default_rng(4)
    z, x = _complex(rng, (2, 3)), rng.standard_normal((2, 3))
    mask = np.array([[True, False, True], [False, True, False]])
    got = anb.where(anb.tensor(mask), anb.tensor(z), anb.tensor(x))
    np.testing.assert_array_equal(got.numpy(), np.where(mask, z, x))
    check_complex_gradients(lambda a, b: anb.where(mask, a, b), [z, x])


def test_abs_gradient_at_zero_is_zero():
    # torch's: the derivative of |z| is z / |z|, taken as 0 at 0.
    z = anb.tensor([0j, 3 + 4j], requires_grad=True)
    anb.abs(z).sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), [0, 0.6 + 0.8j])


def test_angle_and_parts():
    z = np.array([1 + 1j, -2 + 0.5j, -1 - 1j])
    t = anb.tensor(z)
    np.testing.assert_allclose(anb.angle(t).numpy(), np.angle(z))
    np.testing.assert_allclose(anb.angle(t, deg=True).numpy(), np.angle(z, deg=True))
    np.testing.assert_array_equal(anb.real(t).numpy(), z.real)
    np.testing.assert_array_equal(anb.imag(t).numpy(), z.imag)
    np.testing.assert_array_equal(anb.conjugate(t).numpy(), z.conj())
    x = np.array([-1.5, 0.0, 2.0, np.inf])
    r = anb.tensor(x)
    assert anb.real(r) is r and anb.conj(r) is r
    np.testing.assert_array_equal(anb.imag(r).numpy(), np.imag(x))
    np.testing.assert_array_equal(anb.angle(r).numpy(), np.angle(x))


def test_real_and_imag_are_attributes_as_numpys():
    z = _complex(np.random.default_rng(4), (2, 3))
    t = anb.tensor(z)
    np.testing.assert_array_equal(t.real.numpy(), z.real)
    np.testing.assert_array_equal(t.imag.numpy(), z.imag)
    assert t.real.grad_fn is None  # (no grad: nothing recorded)
    check_complex_gradients(lambda t: t.real * t.imag, [z])
    # a real tensor is its own real part; its imaginary part is zeros, as NumPy's
    x = np.array([-1.5, 0.0, np.inf])
    r = anb.tensor(x, requires_grad=True)
    assert r.real is r
    assert r.imag.dtype == np.float64 and r.imag.shape == (3,)
    np.testing.assert_array_equal(r.imag.numpy(), x.imag)
    assert not isinstance(type(t).__dict__["real"], type(lambda: None))  # a property


@pytest.mark.parametrize("name", ["_real", "_imag", "_conj", "_angle"])
def test_the_parts_of_a_0d_tensor_keep_its_shape(name):
    z = np.array(0.5 - 0.25j)
    got = _function(name)(anb.tensor(z))
    assert got.shape == np.shape(COMPLEX_UNARY[name](z)) == ()
    np.testing.assert_allclose(got.numpy(), COMPLEX_UNARY[name](z), rtol=1e-15)
    check_complex_gradients(_function(name), [z])
    check_complex_gradients(lambda t: t.real * t.imag, [z])


def test_real_if_close_and_iscomplexobj_as_numpy():
    for values in ([2.0 + 1e-16j, 1.0], [2.0 + 1e-3j], [1.0, 2.0]):
        a = np.array(values)
        got = anp.real_if_close(anb.tensor(a))
        assert got.dtype == np.real_if_close(a).dtype
        np.testing.assert_array_equal(got.numpy(), np.real_if_close(a))
    assert anp.iscomplexobj(anb.tensor([1j])) and not anp.iscomplexobj(anb.tensor([1.0]))
    assert anp.real_if_close(np.array([1 + 0j])).dtype == np.float64  # NumPy's, on arrays


def test_numpy_names_and_ufuncs_record_on_complex_tensors():
    z = anb.tensor([1 + 2j, 3 - 1j], requires_grad=True)
    y = anp.sum(anp.abs(np.exp(z)) ** 2)
    y.backward()
    # |e^z|^2 = e^(2x): dL/dx + i dL/dy = 2 e^(2x)
    np.testing.assert_allclose(z.grad.numpy(), 2 * np.exp(2 * z.numpy().real), rtol=1e-13)
    assert anp.conjugate(z).dtype == np.complex128 and anp.angle(z).dtype == np.float64


# -- reductions, products, shapes -------------------------------------------------------------


def _reduction_cases():
    return {
        "sum": lambda z: anb.sum(z),
        "sum_axis": lambda z: anb.sum(z, axis=0),
        "sum_axes_keepdims": lambda z: anb.sum(z, axis=(0, 2), keepdims=True),
        "mean": lambda z: anb.mean(z, axis=1),
        "prod": lambda z: anb.prod(z, axis=1),
        "prod_all": lambda z: anb.prod(z),
        "cumsum": lambda z: anb.cumsum(z, axis=2),
        "cumsum_flat": lambda z: anb.cumsum(z),
        "var": lambda z: anb.var(z, axis=1),
    }


_NUMPY_REDUCTIONS = {
    "sum": lambda z: np.sum(z), "sum_axis": lambda z: np.sum(z, axis=0),
    "sum_axes_keepdims": lambda z: np.sum(z, axis=(0, 2), keepdims=True),
    "mean": lambda z: np.mean(z, axis=1), "prod": lambda z: np.prod(z, axis=1),
    "prod_all": lambda z: np.prod(z), "cumsum": lambda z: np.cumsum(z, axis=2),
    "cumsum_flat": lambda z: np.cumsum(z), "var": lambda z: np.var(z, axis=1),
}


@pytest.mark.parametrize("case", sorted(_NUMPY_REDUCTIONS))
def test_reductions(case):
    z = _complex(np.random.default_rng(5), (2, 3, 2))
    got = _reduction_cases()[case](anb.tensor(z))
    expected = _NUMPY_REDUCTIONS[case](z)
    assert got.dtype == np.asarray(expected).dtype
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-13)
    check_complex_gradients(_reduction_cases()[case], [z])


def test_prod_gradient_with_zeros():
    z = _complex(np.random.default_rng(6), (2, 3))
    z[0, 1] = 0
    z[1, :2] = 0
    check_complex_gradients(lambda t: anb.prod(t, axis=1), [z])


def _product_cases():
    return {
        "matmul": (lambda a, b: a @ b, [(3, 4), (4, 2)]),
        "matmul_batched": (lambda a, b: anb.matmul(a, b), [(2, 3, 4), (4, 2)]),
        "matvec": (lambda a, b: a @ b, [(3, 4), (4,)]),
        "dot": (lambda a, b: anb.dot(a, b), [(4,), (4,)]),
        "einsum": (lambda a, b: anb.einsum("ij,jk->ik", a, b), [(3, 4), (4, 2)]),
        "einsum_trace": (lambda a, b: anb.einsum("ij,ji->", a, b), [(3, 4), (4, 3)]),
        "outer": (lambda a, b: anb.outer(a, b), [(3,), (4,)]),
        "tensordot": (lambda a, b: anb.tensordot(a, b, axes=1), [(2, 3), (3, 2)]),
    }


@pytest.mark.parametrize("case", sorted(_product_cases()))
@pytest.mark.parametrize("kinds", ["cc", "cr", "rc"])
def test_products(case, kinds):
    function, shapes = _product_cases()[case]
    rng = np.random.default_rng(7)
    arrays = [_complex(rng, s) if k == "c" else rng.standard_normal(s)
              for k, s in zip(kinds, shapes)]
    reference = {"matmul": np.matmul, "matmul_batched": np.matmul, "matvec": np.matmul,
                 "dot": np.dot, "outer": np.outer,
                 "einsum": lambda a, b: np.einsum("ij,jk->ik", a, b),
                 "einsum_trace": lambda a, b: np.einsum("ij,ji->", a, b),
                 "tensordot": lambda a, b: np.tensordot(a, b, axes=1)}[case]
    got = function(*(anb.tensor(a) for a in arrays))
    assert got.dtype == np.complex128
    np.testing.assert_allclose(got.numpy(), reference(*arrays), rtol=1e-13)
    check_complex_gradients(function, arrays)


def _structural_cases():
    return {
        "reshape": lambda z: z.reshape(3, 4),
        "transpose": lambda z: anb.transpose(z, (1, 0, 2)),
        "basic_index": lambda z: z[1:, ::2, 0],
        "advanced_index": lambda z: z[[0, 1, 1], :, [1, 0, 1]],
        "concatenate": lambda z: anb.concatenate([z, z * 2j], axis=1),
        "stack": lambda z: anb.stack([z, anb.conj(z)], axis=-1),
        "broadcast_to": lambda z: anb.broadcast_to(z[:, :1], (3, 2, 3, 2)),
        "flip": lambda z: anb.flip(z, axis=1),
        "diff": lambda z: anb.diff(z, axis=1),
        "cumprod": lambda z: anb.cumprod(z, axis=1),
    }


_NUMPY_STRUCTURAL = {
    "reshape": lambda z: z.reshape(3, 4), "transpose": lambda z: np.transpose(z, (1, 0, 2)),
    "basic_index": lambda z: z[1:, ::2, 0], "advanced_index": lambda z: z[[0, 1, 1], :, [1, 0, 1]],
    "concatenate": lambda z: np.concatenate([z, z * 2j], axis=1),
    "stack": lambda z: np.stack([z, np.conj(z)], axis=-1),
    "broadcast_to": lambda z: np.broadcast_to(z[:, :1], (3, 2, 3, 2)),
    "flip": lambda z: np.flip(z, axis=1), "diff": lambda z: np.diff(z, axis=1),
    "cumprod": lambda z: np.cumprod(z, axis=1),
}


@pytest.mark.parametrize("case", sorted(_NUMPY_STRUCTURAL))
def test_shapes_indexing_and_assembly(case):
    z = _complex(np.random.default_rng(8), (2, 3, 2))
    got = _structural_cases()[case](anb.tensor(z))
    assert got.dtype == np.complex128
    np.testing.assert_allclose(got.numpy(), _NUMPY_STRUCTURAL[case](z), rtol=1e-14)
    check_complex_gradients(_structural_cases()[case], [z])


#: The composites docs/complex.rst lists, each with its NumPy reference.
_COMPOSITES = {
    "reciprocal": (anb.reciprocal, np.reciprocal),
    "exp2": (anb.exp2, np.exp2),
    "sinc": (anb.sinc, np.sinc),
    "nan_to_num": (anb.nan_to_num, np.nan_to_num),
    "nansum": (lambda z: anb.nansum(z, axis=0), lambda z: np.nansum(z, axis=0)),
    "average": (lambda z: anb.average(z, axis=1, weights=[1.0, 2.0, 0.5]),
                lambda z: np.average(z, axis=1, weights=[1.0, 2.0, 0.5])),
    "inner": (lambda z: anb.inner(z, z[::-1]), lambda z: np.inner(z, z[::-1])),
    "kron": (lambda z: anb.kron(z, z[:1]), lambda z: np.kron(z, z[:1])),
    "trace": (anb.trace, np.trace),
    "take": (lambda z: anb.take(z, [2, 0, 2]), lambda z: np.take(z, [2, 0, 2])),
    "squeeze": (lambda z: anb.squeeze(z[:1]), lambda z: np.squeeze(z[:1])),
    "hstack": (lambda z: anb.hstack([z, z]), lambda z: np.hstack([z, z])),
}


@pytest.mark.parametrize("case", sorted(_COMPOSITES))
def test_composites(case):
    ours, theirs = _COMPOSITES[case]
    z = _complex(np.random.default_rng(12), (2, 3))
    got = ours(anb.tensor(z))
    assert got.dtype == np.asarray(theirs(z)).dtype
    np.testing.assert_allclose(got.numpy(), theirs(z), rtol=1e-13)
    check_complex_gradients(ours, [z])


def test_nan_to_num_of_complex_parts():
    z = np.array([complex(np.nan, 1.0), complex(2.0, np.inf), complex(-np.inf, np.nan)])
    np.testing.assert_array_equal(anb.nan_to_num(anb.tensor(z)).numpy(), np.nan_to_num(z))


def test_assembly_of_complex_and_real_parts():
    rng = np.random.default_rng(9)
    z, x = _complex(rng, (2, 3)), rng.standard_normal((2, 3))
    got = anb.concatenate([anb.tensor(z), anb.tensor(x)])
    np.testing.assert_array_equal(got.numpy(), np.concatenate([z, x]))
    check_complex_gradients(lambda a, b: anb.stack([a, b]), [z, x])


def test_setitem_of_a_complex_value():
    rng = np.random.default_rng(10)
    z, w = _complex(rng, (2, 3)), _complex(rng, (3,))

    def function(a, b):
        out = a * 1.0
        out[1] = b
        return out

    expected = z.copy()
    expected[1] = w
    np.testing.assert_array_equal(function(anb.tensor(z), anb.tensor(w)).numpy(), expected)
    check_complex_gradients(function, [z, w])


# -- what has no complex case ------------------------------------------------------------------


@pytest.mark.parametrize("function", [
    lambda z: anb.maximum(z, z), lambda z: anb.minimum(z, 1.0), lambda z: anb.floor(z),
    lambda z: anb.ceil(z), lambda z: anb.trunc(z), lambda z: anb.sign(z),
    lambda z: anb.clip(z, 0, 1), lambda z: anb.max(z), lambda z: anb.min(z, axis=0),
    lambda z: anb.logsumexp(z), lambda z: anb.softmax(z), lambda z: anb.fabs(z),
    lambda z: anb.deg2rad(z), lambda z: z < z, lambda z: z >= 1.0, lambda z: anp.less(z, z),
    lambda z: anp.greater_equal(z, 0), lambda z: anb.remainder(z, 2.0),
    lambda z: anb.arctan2(z, z),
], ids=[
    "maximum", "minimum", "floor", "ceil", "trunc", "sign", "clip", "max", "min", "logsumexp",
    "softmax", "fabs", "deg2rad", "lt", "ge", "np.less", "np.greater_equal", "remainder",
    "arctan2",
])
def test_ops_without_a_complex_case_raise_type_error(function):
    z = anb.tensor(_complex(np.random.default_rng(11), (3, 3)), requires_grad=True)
    with pytest.raises(TypeError, match="complex"):
        function(z)


def test_equality_compares_complex_values():
    z = anb.tensor([1 + 1j, 2 + 0j])
    np.testing.assert_array_equal((z == anb.tensor([1 + 1j, 2 + 1j])).numpy(), [True, False])
    np.testing.assert_array_equal((z != 2).numpy(), [True, False])
