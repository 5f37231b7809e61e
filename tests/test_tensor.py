"""The Tensor surface (API.md, "Tensors"): creation functions and their dtype rules,
attributes, methods, NumPy interop, repr, operators (reflected forms included), comparisons and
logic, iteration, and the not-yet-built CUDA device."""

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb.ops.registry import FUNCTIONS
from tests.checks import check_gradients

REQUIRES_GRAD_DTYPE = "only Tensors of floating point dtype can require gradients"


def data(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# -- creation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        (1.5, np.float64),
        ([1.0, 2.0], np.float64),
        ([[1, 2], [3, 4.5]], np.float64),
        (np.ones(2, np.float32), np.float32),
        (np.float32(2.0), np.float32),
        (np.ones(2, np.float64), np.float64),
        (np.ones(2, np.float16), np.float32),
        (3, np.int64),
        ([1, 2, 3], np.int64),
        (np.ones(2, np.int32), np.int64),
        (np.ones(2, np.uint8), np.int64),
        (True, np.bool_),
        ([True, False], np.bool_),
        ([], np.float64),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, type) else v.__name__,
)
def test_tensor_dtype_rules(value, dtype):
    t = anb.tensor(value)
    assert t.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(t.numpy(), np.asarray(value))
    assert t.shape == np.shape(value)
    assert t.is_leaf and not t.requires_grad


def test_tensor_copies_and_as_tensor_shares():
    a = np.arange(6.0).reshape(2, 3)
    t = anb.tensor(a)
    assert not np.shares_memory(t.numpy(), a)
    a32 = np.ones(3, np.float32)
    for array in (a, a32):
        shared = anb.as_tensor(array)
        assert shared.numpy() is array or np.shares_memory(shared.numpy(), array)
        assert shared.dtype == array.dtype
    a[0, 0] = 100.0
    assert anb.as_tensor(a)[0, 0].item() == 100.0
    assert t[0, 0].item() == 0.0


def test_as_tensor_copies_where_it_must():
    strided = np.arange(12.0).reshape(3, 4)[:, ::2]
    t = anb.as_tensor(strided)
    np.testing.assert_array_equal(t.numpy(), strided)
    assert t.numpy().flags.c_contiguous
    ints = np.arange(3, dtype=np.int32)
    assert anb.as_tensor(ints).dtype == np.int64
    assert anb.as_tensor([1.0, 2.0]).dtype == np.float64
    assert anb.as_tensor(a := np.ones(2), dtype=np.float32).dtype == np.float32
    assert a.dtype == np.float64
    existing = anb.tensor([1.0, 2.0])
    assert anb.as_tensor(existing) is existing


def test_tensor_from_a_tensor_copies_its_data():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    t = anb.tensor(x)
    assert t.is_leaf and not t.requires_grad
    assert not np.shares_memory(t.numpy(), x.numpy())
    np.testing.assert_array_equal(t.numpy(), x.numpy())


@pytest.mark.parametrize("name", ["zeros", "ones", "empty"])
@pytest.mark.parametrize("shape", [3, (2, 3), (), (0, 2), np.int64(2)])
def test_zeros_ones_empty(name, shape):
    t = getattr(anb, name)(shape)
    want = getattr(np, name)(shape)
    assert t.shape == want.shape and t.dtype == np.float64
    if name != "empty":
        np.testing.assert_array_equal(t.numpy(), want)
    t32 = getattr(anb, name)(shape, dtype=np.float32, requires_grad=True)
    assert t32.dtype == np.float32 and t32.requires_grad and t32.is_leaf
    assert getattr(anb, name)(shape, dtype=int).dtype == np.int64


def test_full():
    np.testing.assert_array_equal(anb.full((2, 3), 1.5).numpy(), np.full((2, 3), 1.5))
    assert anb.full(3, 1.5).dtype == np.float64
    assert anb.full(3, 7).dtype == np.int64
    assert anb.full(3, True).dtype == np.bool_
    assert anb.full(3, 7, dtype=np.float32).dtype == np.float32
    assert anb.full(2, anb.tensor(2.5)).tolist() == [2.5, 2.5]
    assert anb.full((1, 2), 0.5, requires_grad=True).requires_grad


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
def test_like_functions_keep_shape_and_dtype(dtype):
    source = anb.tensor(np.ones((2, 3), dtype=dtype))
    for name, want in [("zeros_like", 0), ("ones_like", 1), ("full_like", 1)]:
        function = getattr(anb, name)
        t = function(source, 1) if name == "full_like" else function(source)
        assert t.shape == (2, 3) and t.dtype == dtype and t.device == source.device
        np.testing.assert_array_equal(t.numpy(), np.full((2, 3), want, dtype=dtype))
        assert not t.requires_grad
    e = anb.empty_like(source)
    assert e.shape == (2, 3) and e.dtype == dtype


def test_like_functions_take_dtype_and_requires_grad_and_arrays():
    source = anb.tensor(np.ones(3, np.float32))
    assert anb.zeros_like(source, dtype=np.float64).dtype == np.float64
    assert anb.ones_like(source, dtype=np.dtype(np.float64)).dtype == np.float64
    assert anb.full_like(source, 2, dtype=np.float64).dtype == np.float64
    assert anb.zeros_like(source, requires_grad=True).requires_grad
    assert anb.ones_like(np.zeros((2, 2), np.float32)).dtype == np.float32
    x = anb.ones(2, requires_grad=True)
    assert not anb.zeros_like(x).requires_grad  # a fresh leaf, as torch


@pytest.mark.parametrize(
    "args", [(5,), (2, 7), (1, 2, 0.25), (5, 0, -1), (0.5, 3), (5, None, 2), (3, 3)]
)
def test_arange_matches_numpy(args):
    t = anb.arange(*args)
    want = np.arange(*args)
    np.testing.assert_array_equal(t.numpy(), want)
    assert t.dtype == (np.int64 if want.dtype.kind == "i" else np.float64)


def test_arange_dtype_and_keywords():
    assert anb.arange(3, dtype=np.float32).dtype == np.float32
    np.testing.assert_array_equal(anb.arange(6, step=2).numpy(), np.arange(6, step=2))
    assert anb.arange(3.0, requires_grad=True).requires_grad


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((0, 1), {}),
        ((0, 1, 5), {}),
        ((-2, 3, 4), {"endpoint": False}),
        ((1, 2, 1), {}),
        ((0, 10, 0), {}),
    ],
)
def test_linspace_matches_numpy(args, kwargs):
    t = anb.linspace(*args, **kwargs)
    np.testing.assert_allclose(t.numpy(), np.linspace(*args, **kwargs), rtol=0, atol=0)
    assert t.dtype == np.float64
    assert anb.linspace(0, 1, 3, dtype=np.float32).dtype == np.float32


@pytest.mark.parametrize(
    ("args", "kwargs"), [((3,), {}), ((2, 4), {}), ((3, 3), {"k": -1}), ((4, 2), {"k": 1})]
)
def test_eye_matches_numpy(args, kwargs):
    t = anb.eye(*args, **kwargs)
    np.testing.assert_array_equal(t.numpy(), np.eye(*args, **kwargs))
    assert t.dtype == np.float64
    assert anb.eye(2, dtype=np.float32).dtype == np.float32
    assert anb.eye(2, dtype=int).dtype == np.int64


@pytest.mark.parametrize(
    "make",
    [
        lambda: anb.tensor([1, 2], requires_grad=True),
        lambda: anb.tensor([True], requires_grad=True),
        lambda: anb.tensor([1.0], dtype=np.int64, requires_grad=True),
        lambda: anb.zeros(2, dtype=int, requires_grad=True),
        lambda: anb.ones(2, dtype=bool, requires_grad=True),
        lambda: anb.full(2, 3, requires_grad=True),
        lambda: anb.arange(3, requires_grad=True),
        lambda: anb.eye(2, dtype=np.int64, requires_grad=True),
        lambda: anb.zeros_like(anb.tensor([1, 2]), requires_grad=True),
        lambda: anb.tensor([1, 2]).requires_grad_(),
        lambda: setattr(anb.tensor([True]), "requires_grad", True),
    ],
)
def test_integer_and_bool_tensors_cannot_require_grad(make):
    with pytest.raises(RuntimeError, match=REQUIRES_GRAD_DTYPE):
        make()


CUDA_CALLS = [
    lambda: anb.tensor([1.0], device="cuda"),
    lambda: anb.as_tensor(np.ones(2), device="cuda"),
    lambda: anb.zeros(2, device="cuda"),
    lambda: anb.ones(2, device="cuda:0"),
    lambda: anb.empty(2, device="cuda"),
    lambda: anb.full(2, 1.0, device="cuda"),
    lambda: anb.zeros_like(anb.ones(2), device="cuda"),
    lambda: anb.ones_like(anb.ones(2), device="cuda"),
    lambda: anb.empty_like(anb.ones(2), device="cuda"),
    lambda: anb.full_like(anb.ones(2), 1.0, device="cuda"),
    lambda: anb.arange(3, device="cuda"),
    lambda: anb.linspace(0, 1, 3, device="cuda"),
    lambda: anb.eye(2, device="cuda"),
    lambda: anb.ones(2).to("cuda"),
    lambda: anb.ones(2).cuda(),
]


@pytest.mark.parametrize("call", CUDA_CALLS)
def test_cuda_device_raises_a_clear_error_when_cuda_is_unavailable(call, monkeypatch):
    from autograd_nb.cuda import _device

    monkeypatch.setattr(_device, "unavailable_reason", lambda: "no GPU in this test")
    with pytest.raises(RuntimeError, match="device='cuda' is not available: no GPU in this test"):
        call()


def test_device_cpu_is_accepted_and_unknown_devices_raise():
    assert anb.zeros(2, device="cpu").device == "cpu"
    with pytest.raises(RuntimeError, match="unknown device"):
        anb.zeros(2, device="tpu")


def test_tensor_cannot_be_constructed_directly():
    with pytest.raises(TypeError):
        anb.Tensor([1.0])


# -- attributes -------------------------------------------------------------------------------


def test_basic_attributes_match_numpy():
    a = data((2, 3, 4))
    t = anb.tensor(a)
    assert t.shape == (2, 3, 4) and type(t.shape) is tuple
    assert t.ndim == 3 and t.size == 24 and len(t) == 2
    assert isinstance(t.dtype, np.dtype) and t.dtype == np.float64
    assert t.device == "cpu"
    s = anb.tensor(1.0)
    assert s.shape == () and s.ndim == 0 and s.size == 1


def test_requires_grad_is_settable_on_leaves_only():
    x = anb.ones(3)
    assert not x.requires_grad
    x.requires_grad = True
    assert x.requires_grad and x.is_leaf
    y = x * 2
    assert y.requires_grad and not y.is_leaf
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf"):
        y.requires_grad = False
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf"):
        y.requires_grad = True
    x.requires_grad = False
    assert not (x * 2).requires_grad
    assert x.requires_grad_() is x and x.requires_grad
    assert x.requires_grad_(False) is x and not x.requires_grad
    assert y.requires_grad_() is y  # already requires grad: nothing to change
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf"):
        y.requires_grad_(False)


def test_grad_is_settable_and_clearable():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    assert x.grad is None
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 8.0])
    x.grad = None
    assert x.grad is None
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
    x.grad = anb.tensor([10.0, 20.0])
    (x * 1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [11.0, 21.0])
    with pytest.raises(RuntimeError, match="different size"):
        x.grad = anb.zeros(3)
    with pytest.raises(RuntimeError, match="different type"):
        x.grad = anb.zeros(2, dtype=np.float32)
    with pytest.raises(TypeError):
        x.grad = np.zeros(2)
    np.testing.assert_array_equal(x.grad.numpy(), [11.0, 21.0])


def test_grad_fn_and_is_leaf():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    assert x.grad_fn is None and x.is_leaf
    assert (x * 2).grad_fn.name == "multiply"
    assert (x + 1).grad_fn.name == "add"
    assert x.sum().grad_fn.name == "sum"
    assert x[0].grad_fn.name == "getitem"
    assert anb.exp(x).grad_fn.name == "exp"
    plain = anb.tensor([1.0]) * 2
    assert plain.grad_fn is None and plain.is_leaf and not plain.requires_grad
    with anb.no_grad():
        assert (x * 2).grad_fn is None


def test_T_reverses_the_dimensions():
    a = data((2, 3, 4))
    x = anb.tensor(a, requires_grad=True)
    np.testing.assert_array_equal(x.T.numpy(), a.T)
    assert x.T.grad_fn.name == "transpose"
    check_gradients(lambda t: t.T, [data((2, 3))])


# -- methods ----------------------------------------------------------------------------------


def test_numpy_item_tolist_and_conversions():
    a = data((2, 3))
    t = anb.tensor(a)
    assert isinstance(t.numpy(), np.ndarray)
    np.testing.assert_array_equal(t.numpy(), a)
    assert t.tolist() == a.tolist()
    assert anb.tensor(3).tolist() == 3
    assert anb.tensor([[2.5]]).item() == 2.5 and type(anb.tensor([[2.5]]).item()) is float
    assert type(anb.tensor([3]).item()) is int
    assert type(anb.tensor(True).item()) is bool
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        t.item()
    assert float(anb.tensor(1.5)) == 1.5 and int(anb.tensor([7])) == 7
    assert bool(anb.tensor([1.0])) and not bool(anb.tensor(0.0))
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(t)
    assert [10, 20, 30][anb.tensor(1)] == 20  # __index__


def test_np_asarray_shares_memory_and_casts():
    t = anb.tensor([1.0, 2.0])
    assert np.shares_memory(np.asarray(t), t.numpy())
    a32 = np.asarray(t, dtype=np.float32)
    assert a32.dtype == np.float32
    copy = np.array(t)
    assert not np.shares_memory(copy, t.numpy())
    np.testing.assert_array_equal(np.exp(np.asarray(t)), np.exp([1.0, 2.0]))


def test_detach_shares_data_and_version_counter():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    d = y.detach()
    assert d.is_leaf and not d.requires_grad and d.grad_fn is None
    assert np.shares_memory(d.numpy(), y.numpy())
    d[0] = 10.0
    assert y[0].item() == 10.0
    assert y._version_number == d._version_number == 1
    y += 1
    assert d._version_number == 2 and d[0].item() == 11.0


def test_to_cpu_and_astype():
    x = anb.tensor([1.5, -2.5], requires_grad=True)
    assert x.cpu() is x and x.to("cpu") is x and x.to(device="cpu") is x
    assert x.to(dtype=np.float64) is x
    y = x.to(np.float32)
    assert y.dtype == np.float32 and y.grad_fn.name == "astype"
    z = x.to("cpu", np.float32)
    assert z.dtype == np.float32
    (g,) = anb.grad((y * y).sum(), x)
    assert g.dtype == np.float64
    np.testing.assert_allclose(g.numpy(), [3.0, -5.0])


def test_astype_gradient_is_cast_back_to_the_input_dtype():
    x = anb.tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)
    y = x.astype(np.float64)
    assert y.dtype == np.float64
    (y * y).sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])


def test_astype_to_integer_or_bool_leaves_the_graph():
    x = anb.tensor([1.7, -2.2, 0.0], requires_grad=True)
    i = x.astype(np.int64)
    np.testing.assert_array_equal(i.numpy(), np.array([1.7, -2.2, 0.0]).astype(np.int64))
    assert i.dtype == np.int64 and not i.requires_grad and i.grad_fn is None
    b = x.astype(bool)
    assert b.tolist() == [True, True, False] and not b.requires_grad
    f = anb.tensor([1, 2]).astype(np.float64)
    assert f.dtype == np.float64 and not f.requires_grad


def test_reduction_and_shape_methods_match_numpy():
    a = data((2, 3))
    x = anb.tensor(a, requires_grad=True)
    np.testing.assert_allclose(x.sum(axis=0).numpy(), a.sum(axis=0))
    np.testing.assert_allclose(x.sum().numpy(), a.sum())
    np.testing.assert_allclose(x.sum(axis=1, keepdims=True).numpy(), a.sum(1, keepdims=True))
    for shaped in (x.reshape(3, 2), x.reshape((3, 2)), x.reshape([3, 2]), x.reshape(3, -1)):
        np.testing.assert_array_equal(shaped.numpy(), a.reshape(3, 2))
    np.testing.assert_array_equal(x.reshape(6).numpy(), a.reshape(6))
    np.testing.assert_array_equal(x.reshape(-1).numpy(), a.reshape(-1))
    np.testing.assert_array_equal(anb.tensor(2.0).reshape(()).numpy(), np.array(2.0))
    b = data((2, 3, 4))
    y = anb.tensor(b)
    for axes in ((1, 0, 2), ((2, 0, 1),), ([2, 1, 0],), (), (None,)):
        want = b.transpose(*axes)
        np.testing.assert_array_equal(y.transpose(*axes).numpy(), want)
    np.testing.assert_allclose(x.exp().numpy(), np.exp(a))
    np.testing.assert_allclose(x.clip(-0.5, 0.5).numpy(), np.clip(a, -0.5, 0.5))
    check_gradients(lambda t: t.reshape(3, 2).transpose(1, 0).exp().sum(axis=0), [a])


def test_every_method_marked_function_is_a_tensor_method():
    # The generic mechanism: a public function marked ``method`` is callable on a Tensor and
    # means the same as the function with the tensor first.
    methods = [name for name, function in FUNCTIONS.items() if function.is_method]
    assert {"sum", "reshape", "transpose", "exp", "clip"} <= set(methods)
    for name in methods:
        if name in ("real", "imag"):  # NumPy's attributes: properties (test_complex.py)
            assert isinstance(anb.Tensor.__dict__[name], property), name
            continue
        assert callable(getattr(anb.Tensor, name)), name
    a = np.abs(data((2, 3))) + 0.1
    x = anb.tensor(a)
    for name, args, kwargs in [
        ("exp", (), {}),
        ("sum", (), {"axis": 1}),
        ("clip", (0.2, 0.9), {}),
        ("swapaxes", (0, 1), {}),
        ("sqrt", (), {}),
        ("transpose", (), {}),
    ]:
        method_result = getattr(x, name)(*args, **kwargs)
        function_result = getattr(anb, name)(x, *args, **kwargs)
        np.testing.assert_array_equal(method_result.numpy(), function_result.numpy())


def test_len_and_iteration():
    a = data((3, 2))
    x = anb.tensor(a, requires_grad=True)
    assert len(x) == 3
    rows = list(x)
    assert len(rows) == 3 and all(isinstance(r, anb.Tensor) for r in rows)
    for row, want in zip(rows, a, strict=True):
        np.testing.assert_array_equal(row.numpy(), want)
    total = rows[0] * 1.0
    for row in rows[1:]:
        total = total + row * 2.0
    total.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1, 1], [2, 2], [2, 2]])
    assert [v.item() for v in anb.tensor([1, 2, 3])] == [1, 2, 3]
    with pytest.raises(TypeError):
        len(anb.tensor(1.0))
    with pytest.raises(TypeError):
        iter(anb.tensor(1.0))


def test_repr():
    assert repr(anb.tensor([1.0, 2.5])) == "tensor([1. , 2.5])"
    assert repr(anb.tensor(3.0)) == "tensor(3.)"
    assert repr(anb.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(anb.tensor([1.0], requires_grad=True)) == "tensor([1.], requires_grad=True)"
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    assert repr(x * 2) == "tensor([2., 4.], grad_fn=<MultiplyBackward>)"
    assert repr(x.sum()) == "tensor(3., grad_fn=<SumBackward>)"
    assert "dtype=float32" in repr(anb.ones(2, dtype=np.float32))
    assert repr(anb.ones((2, 2))) == "tensor([[1., 1.],\n        [1., 1.]])"
    assert repr(anb.zeros(0)) == "tensor([])"
    assert repr(anb.zeros((2, 0))) == "tensor([], size=(2, 0))"
    big = repr(anb.arange(10000.0))
    assert "..." in big and len(big) < 200


# -- operators --------------------------------------------------------------------------------

BINARY = {
    "+": (lambda a, b: a + b, np.add),
    "-": (lambda a, b: a - b, np.subtract),
    "*": (lambda a, b: a * b, np.multiply),
    "/": (lambda a, b: a / b, np.divide),
    "**": (lambda a, b: a**b, np.power),
    "@": (lambda a, b: a @ b, np.matmul),
}


def _operands(symbol, seed=0):
    rng = np.random.default_rng(seed)
    if symbol == "@":
        return rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    a = rng.uniform(0.5, 2.0, size=(2, 3))
    return a, rng.uniform(0.5, 2.0, size=(3,))


@pytest.mark.parametrize("symbol", list(BINARY))
def test_binary_operators_every_operand_kind(symbol):
    apply, reference = BINARY[symbol]
    a, b = _operands(symbol)
    want = reference(a, b)
    for left, right in [(anb.tensor(a), anb.tensor(b)), (anb.tensor(a), b), (a, anb.tensor(b))]:
        got = apply(left, right)
        assert isinstance(got, anb.Tensor), (type(left), type(right))
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-14)
    if symbol != "@":
        for scalar in (2.0, 3, np.float64(1.5)):
            for got, want in [
                (apply(anb.tensor(a), scalar), reference(a, scalar)),
                (apply(scalar, anb.tensor(a)), reference(scalar, a)),
            ]:
                assert isinstance(got, anb.Tensor)
                np.testing.assert_allclose(got.numpy(), want, rtol=1e-14)


@pytest.mark.parametrize("symbol", list(BINARY))
def test_binary_operator_gradients_including_reflected(symbol):
    apply, _ = BINARY[symbol]
    a, b = _operands(symbol, seed=1)
    check_gradients(lambda x, y: apply(x, y), [a, b], second_order=symbol in ("*", "**"))
    check_gradients(lambda y: apply(a, y), [b], second_order=False)  # NumPy array on the left
    check_gradients(lambda x: apply(x, b), [a], second_order=False)
    if symbol != "@":
        check_gradients(lambda y: apply(1.5, y), [b], second_order=False)
        check_gradients(lambda x: apply(x, 2.0), [a], second_order=False)


def test_unary_operators():
    a = data((2, 3))
    x = anb.tensor(a, requires_grad=True)
    np.testing.assert_array_equal((-x).numpy(), -a)
    assert (-x).grad_fn.name == "negative"
    np.testing.assert_array_equal((+x).numpy(), a)
    np.testing.assert_array_equal(abs(x).numpy(), np.abs(a))
    check_gradients(lambda t: -t, [a])


def test_integer_operators_keep_int64():
    i = anb.tensor([1, 2, 3])
    assert (i + i).dtype == np.int64 and (i * 2).dtype == np.int64 and (2 - i).dtype == np.int64
    np.testing.assert_array_equal((i + 1).numpy(), [2, 3, 4])
    assert (i / 2).dtype == np.float64


COMPARISONS = {
    "<": (lambda a, b: a < b, np.less),
    "<=": (lambda a, b: a <= b, np.less_equal),
    ">": (lambda a, b: a > b, np.greater),
    ">=": (lambda a, b: a >= b, np.greater_equal),
    "==": (lambda a, b: a == b, np.equal),
    "!=": (lambda a, b: a != b, np.not_equal),
}


@pytest.mark.parametrize("symbol", list(COMPARISONS))
def test_comparisons_give_bool_tensors_without_grad(symbol):
    apply, reference = COMPARISONS[symbol]
    a = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    b = np.array([2.0, 2.0, 2.0])
    x = anb.tensor(a, requires_grad=True)
    for left, right, want in [
        (x, anb.tensor(b), reference(a, b)),
        (x, b, reference(a, b)),
        (x, 2.0, reference(a, 2.0)),
        (b, x, reference(b, a)),
    ]:
        got = apply(left, right)
        assert isinstance(got, anb.Tensor)
        assert got.dtype == np.bool_
        assert not got.requires_grad and got.grad_fn is None
        np.testing.assert_array_equal(got.numpy(), want)


def test_logical_operators_on_bool_tensors():
    p = np.array([True, True, False, False])
    q = np.array([True, False, True, False])
    tp, tq = anb.tensor(p), anb.tensor(q)
    for got, want in [
        (tp & tq, p & q),
        (tp | tq, p | q),
        (tp ^ tq, p ^ q),
        (~tp, ~p),
        (p & tq, p & q),
        (tp | q, p | q),
        (q ^ tp, q ^ p),
        (tp & True, p & True),
    ]:
        assert isinstance(got, anb.Tensor) and got.dtype == np.bool_
        np.testing.assert_array_equal(got.numpy(), want)
    x = anb.tensor([0.5, 1.5, 2.5], requires_grad=True)
    mask = (x > 1) & (x < 2)
    assert mask.tolist() == [False, True, False] and not mask.requires_grad


def test_tensors_are_hashable_by_identity():
    x, y = anb.ones(2), anb.ones(2)
    assert len({x, y, x}) == 2
    assert {x: 1}[x] == 1


def test_recorded_edges_for_tensors_constants_and_non_differentiable_inputs():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = anb.tensor([3.0, 4.0])
    condition = anb.tensor([True, False])
    cases = [
        (anb.where(condition, x, y), (None, x, None)),  # the condition takes no gradient
        (2.0 * x, (None, x)),  # a Python scalar: the uncached path
        (x * np.array([1.0, 5.0]), (x, None)),
        (x * y, (x, None)),
        (y * x * x, ("multiply", x)),  # a computed input: its node
    ]
    for result, expected in cases:
        edges = result.grad_fn.next_functions
        assert len(edges) == len(expected)
        for edge, want in zip(edges, expected):
            if isinstance(want, str):
                assert edge.name == want
            else:
                assert edge is want
    assert anb.where(condition, y, y).grad_fn is None
    with anb.no_grad():
        assert (x * x).grad_fn is None and not (x * x).requires_grad


def test_cached_ops_still_catch_in_place_changes_of_saved_inputs():
    x = anb.tensor(2.0, requires_grad=True)
    h = x * 1.0
    z = h * h  # saves h
    h += 1.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()
