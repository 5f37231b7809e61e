"""cuda tensors: creation, moving data, errors, interop, and autograd entry points on the GPU."""

import subprocess
import sys

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb.cuda import _device


def cuda_tensor(data, **kwargs):
    return anb.tensor(data, device="cuda", **kwargs)


# -- creation and moving data ------------------------------------------------------------------


def test_tensor_lives_on_the_device_and_comes_back_unchanged():
    data = np.arange(6.0).reshape(2, 3)
    x = cuda_tensor(data)
    assert x.device == "cuda"
    assert _device.is_device_array(x._data)
    assert (x.shape, x.dtype, x.ndim, x.size) == ((2, 3), np.float64, 2, 6)
    back = x.cpu()
    assert back.device == "cpu"
    np.testing.assert_array_equal(back.numpy(), data)
    assert x.to("cuda") is x and back.to("cpu") is back


@pytest.mark.parametrize("data", [3.5, [1, 2], [[True, False]], np.float32([1.5, 2.5])])
def test_dtypes_follow_the_cpu_rules(data):
    assert cuda_tensor(data).dtype == anb.tensor(data).dtype
    assert cuda_tensor(data).cpu().tolist() == anb.tensor(data).tolist()


@pytest.mark.parametrize(
    "name, args",
    [("zeros", ((2, 3),)), ("ones", (4,)), ("full", ((2,), 7.5)), ("arange", (5,)),
     ("linspace", (0, 1, 5)), ("eye", (3,))],
)
def test_creation_functions_take_device(name, args):
    made = getattr(anb, name)(*args, device="cuda")
    expected = getattr(anb, name)(*args)
    assert made.device == "cuda"
    assert made.dtype == expected.dtype
    np.testing.assert_array_equal(made.cpu().numpy(), expected.numpy())


@pytest.mark.parametrize("name", ["zeros_like", "ones_like", "empty_like", "full_like"])
def test_like_functions_keep_the_device_unless_told(name):
    x = cuda_tensor(np.ones((2, 2), np.float32))
    args = (x, 3.0) if name == "full_like" else (x,)
    made = getattr(anb, name)(*args)
    assert (made.device, made.dtype, made.shape) == ("cuda", np.float32, (2, 2))
    if name != "empty_like":
        expected = getattr(anb, name)(*((anb.ones((2, 2), dtype=np.float32),) + args[1:]))
        np.testing.assert_array_equal(made.cpu().numpy(), expected.numpy())
    assert getattr(anb, name)(*args, device="cpu").device == "cpu"


def test_item_tolist_repr_and_bool_copy_for_display():
    x = cuda_tensor([[2.5]], requires_grad=True)
    assert x.item() == 2.5 and x.tolist() == [[2.5]] and bool(x) and float(x) == 2.5
    assert repr(x) == "tensor([[2.5]], device='cuda', requires_grad=True)"
    assert repr(cuda_tensor([1.0], dtype=np.float32)) == (
        "tensor([1.], device='cuda', dtype=float32)"
    )


def test_comparisons_and_logic_stay_on_the_device():
    a, b = np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 1.0])
    x, y = cuda_tensor(a), cuda_tensor(b)
    for result, expected in [
        (x < y, a < b), (x <= 2.0, a <= 2.0), (x == y, a == b), (x != y, a != b),
        ((x > 1.5) & (y > 1.5), (a > 1.5) & (b > 1.5)), (~(x > 2.0), ~(a > 2.0)),
        ((x > 2.5) | (y > 2.5), (a > 2.5) | (b > 2.5)),
    ]:
        assert result.device == "cuda"
        np.testing.assert_array_equal(result.cpu().numpy(), expected)


def test_in_place_ops_write_into_the_device_buffer():
    x = cuda_tensor([1.0, 2.0, 3.0])
    buffer = x._data
    x += 1.0
    x *= cuda_tensor([2.0, 2.0, 2.0])
    x[0] = 10.0
    x[[1, 1]] = cuda_tensor(7.0)
    assert x._data is buffer and x._version_number == 4
    np.testing.assert_array_equal(x.cpu().numpy(), [10.0, 7.0, 8.0])


def test_recorded_in_place_setitem_gives_the_cpu_gradients():
    grads = {}
    for device in ("cpu", "cuda"):
        w = anb.tensor([1.0, 2.0], requires_grad=True, device=device)
        v = anb.tensor(3.0, requires_grad=True, device=device)
        t = w * 2.0
        t[1] = v * v
        (t * t).backward(anb.ones(2, device=device))
        grads[device] = (w.grad, v.grad)
    for cuda_grad, cpu_grad in zip(grads["cuda"], grads["cpu"]):
        assert cuda_grad.device == "cuda"
        np.testing.assert_allclose(cuda_grad.cpu().numpy(), cpu_grad.numpy())


def test_moves_are_recorded_so_gradients_cross_devices():
    x = anb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x.cuda() * 3.0).cpu() * x
    assert y.grad_fn.next_functions[0].name == "to_cpu"
    y.backward(anb.ones(3))
    assert x.grad.device == "cpu"
    np.testing.assert_allclose(x.grad.numpy(), 6.0 * x.numpy())
    # and back again, to second order
    z = cuda_tensor([0.5, 1.5], requires_grad=True)
    (g,) = anb.grad((z.cpu() ** 3).cuda(), z, anb.ones(2, device="cuda"), create_graph=True)
    (gg,) = anb.grad(g, z, anb.ones(2, device="cuda"))
    assert (g.device, gg.device) == ("cuda", "cuda")
    np.testing.assert_allclose(gg.cpu().numpy(), 6.0 * np.array([0.5, 1.5]))


# -- errors ------------------------------------------------------------------------------------


def test_numpy_of_a_cuda_tensor_raises_like_torch():
    x = cuda_tensor([1.0])
    with pytest.raises(TypeError, match="can't convert cuda device type tensor to numpy"):
        x.numpy()
    with pytest.raises(TypeError, match=r"Tensor.cpu\(\)"):
        np.asarray(x)


@pytest.mark.parametrize(
    "operation",
    [
        lambda c, h: c + h,
        lambda c, h: h * c,
        lambda c, h: anb.where(c > 0, c, h),
        lambda c, h: anb.concatenate([c, h]),
        lambda c, h: c < h,
    ],
)
def test_mixing_devices_names_both(operation):
    c = cuda_tensor([1.0, 2.0], requires_grad=True)
    h = anb.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="cuda and cpu"):
        operation(c, h)
    assert c.grad is None and c.grad_fn is None


def test_scalars_numpy_constants_and_0d_cpu_tensors_mix_with_cuda():
    c = cuda_tensor([1.0, 2.0])
    for other in (2.0, 2, np.float64(2.0), np.array([2.0, 2.0]), anb.tensor(2.0)):
        result = c * other
        assert result.device == "cuda"
        np.testing.assert_array_equal(result.cpu().numpy(), [2.0, 4.0])


def test_grad_output_on_another_device_names_both():
    x = cuda_tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    with pytest.raises(RuntimeError, match="cpu.*cuda"):
        anb.grad(y, x, grad_outputs=anb.ones(2))
    with pytest.raises(RuntimeError, match="located on cpu"):
        x.grad = anb.ones(2)


def test_unavailable_cuda_is_a_clear_error(monkeypatch):
    reason = "no GPU here (test)"
    monkeypatch.setattr(_device, "unavailable_reason", lambda: reason)
    for make in (
        lambda: anb.tensor([1.0], device="cuda"),
        lambda: anb.zeros(2, device="cuda"),
        lambda: anb.ones(2).cuda(),
        lambda: anb.ones(2).to("cuda"),
    ):
        with pytest.raises(RuntimeError, match=r"device='cuda' is not available: no GPU here"):
            make()
    assert not anb.cuda.is_available()


def test_unknown_devices_are_refused():
    with pytest.raises(RuntimeError, match="unknown device"):
        anb.tensor([1.0], device="tpu")
    with pytest.raises(RuntimeError, match="'cuda:1' is not available"):
        anb.tensor([1.0], device="cuda:1")
    assert anb.tensor([1.0], device="cuda:0").device == "cuda"


@pytest.mark.slow
def test_importing_the_package_does_not_import_numba_cuda():
    # (the counters and the pool's statistics are read without it too)
    code = ("import sys, autograd_nb; autograd_nb.cuda.counters(); "
            "autograd_nb.cuda.memory_stats(); print('numba.cuda' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


# -- interop -----------------------------------------------------------------------------------


def test_cuda_array_interface_only_on_cuda_tensors():
    assert not hasattr(anb.ones(2), "__cuda_array_interface__")
    described = cuda_tensor(np.ones((2, 3), np.float32)).__cuda_array_interface__
    assert described["shape"] == (2, 3)
    assert described["typestr"] == np.dtype(np.float32).str
    assert described["version"] >= 2


def test_as_tensor_shares_device_memory_both_ways():
    x = cuda_tensor([1.0, 2.0, 3.0])
    shared = anb.as_tensor(x._data)  # a numba device array
    assert shared.device == "cuda" and shared._data is x._data
    view = anb.as_tensor(_Exporter(x))  # any __cuda_array_interface__ exporter
    assert view.device == "cuda"
    x[0] = 5.0
    assert view.tolist() == [5.0, 2.0, 3.0]
    view[2] = -1.0
    assert x.tolist() == [5.0, 2.0, -1.0]
    copied = anb.as_tensor(_Exporter(x), device="cpu")
    assert copied.device == "cpu" and copied.tolist() == [5.0, 2.0, -1.0]


def test_a_strided_foreign_array_is_copied_contiguous():
    x = cuda_tensor(np.arange(6.0).reshape(2, 3))
    described = dict(x.__cuda_array_interface__, shape=(3, 2), strides=(8, 24))  # x.T
    exporter = _Exporter(x)
    exporter.__cuda_array_interface__ = described
    transposed = anb.as_tensor(exporter)
    assert transposed.device == "cuda"
    np.testing.assert_array_equal(transposed.cpu().numpy(), np.arange(6.0).reshape(2, 3).T)


def test_as_tensor_casts_when_asked():
    x = cuda_tensor([1.5, 2.5])
    cast = anb.as_tensor(_Exporter(x), dtype=np.float32)
    assert (cast.device, cast.dtype, cast.tolist()) == ("cuda", np.float32, [1.5, 2.5])


def test_numba_roundtrip_through_the_interface():
    cuda = pytest.importorskip("numba.cuda")
    if not hasattr(cuda, "as_cuda_array"):
        pytest.skip("numba's CUDA simulator has no as_cuda_array; make test-gpu checks it")
    x = cuda_tensor([1.0, 2.0])
    array = cuda.as_cuda_array(x)
    assert array.__cuda_array_interface__["data"] == x.__cuda_array_interface__["data"]
    np.testing.assert_array_equal(array.copy_to_host(), [1.0, 2.0])


class _Exporter:
    """A foreign GPU array: only the CUDA Array Interface of a tensor's memory."""

    def __init__(self, tensor):
        self.__cuda_array_interface__ = tensor.__cuda_array_interface__


# -- autograd on the device --------------------------------------------------------------------


def test_backward_accumulates_grad_on_the_device():
    x = cuda_tensor([1.0, -2.0, 3.0], requires_grad=True)
    for _ in range(2):
        (anb.sigmoid(x) * x).backward(anb.ones(3, device="cuda"))
    assert x.grad.device == "cuda"
    s = 1 / (1 + np.exp(-x.cpu().numpy()))
    np.testing.assert_allclose(x.grad.cpu().numpy(), 2 * (s * (1 - s) * x.cpu().numpy() + s))


def test_default_grad_output_and_materialized_zeros_are_on_the_device():
    x = cuda_tensor([2.0], requires_grad=True)
    unused = cuda_tensor([[1.0, 2.0]], requires_grad=True)
    gx, gu = anb.grad(x * x, (x, unused), materialize_grads=True)
    assert (gx.device, gu.device) == ("cuda", "cuda")
    assert gx.tolist() == [4.0] and gu.tolist() == [[0.0, 0.0]]


def test_jacobian_by_batched_vjps_on_the_device():
    rng = np.random.default_rng(0)
    w, x0 = rng.standard_normal((3, 4)), rng.standard_normal(4)
    for device in ("cpu", "cuda"):
        x = anb.tensor(x0, requires_grad=True, device=device)
        y = anb.tanh(anb.tensor(w, device=device) * x)  # (3, 4), broadcast over rows
        eye = anb.tensor(np.eye(12).reshape(12, 3, 4), device=device)
        (jacobian,) = anb.grad(y, x, eye, is_grads_batched=True)
        assert jacobian.device == device and jacobian.shape == (12, 4)
        if device == "cpu":
            expected = jacobian.numpy()
    np.testing.assert_allclose(jacobian.cpu().numpy(), expected, rtol=1e-12)


def test_the_split_and_unsplit_broadcast_reductions_agree(monkeypatch):
    from autograd_nb.cuda import elementwise

    results, chunks = [], []
    for threads in (1, 1 << 16):  # one thread per target element, or many with atomics
        monkeypatch.setattr(anb.config, "CUDA_VJP_REDUCTION_THREADS", threads)
        chunks.append(elementwise._chunk(2, 6))  # b's 2 elements, each a sum of 6
        b = cuda_tensor(np.array([[0.5], [1.5]]), requires_grad=True)
        x = cuda_tensor(np.linspace(-1, 1, 12).reshape(3, 2, 2))
        (g,) = anb.grad(x * b, b, anb.ones((3, 2, 2), device="cuda"))
        results.append(g.cpu().numpy())
    assert chunks == [6, 1]  # both ways ran
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12)
    np.testing.assert_allclose(results[0], np.linspace(-1, 1, 12).reshape(3, 2, 2).sum(
        axis=(0, 2)).reshape(2, 1))
