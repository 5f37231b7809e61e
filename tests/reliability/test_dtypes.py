"""Dtype guards: a tensor is float32, float64, complex64, complex128, int64, int32 or bool;
other data is converted losslessly or refused at creation with a TypeError, never a silent
wrong value or a numba error later; NumPy's refusals of integer and bool arithmetic hold; axes
are integers."""

import copy
import pickle

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb import dtypes

REFUSED = [np.clongdouble, object, np.str_, np.bytes_, np.longdouble, "datetime64[s]",
           "timedelta64[s]"]


@pytest.mark.parametrize("dtype", REFUSED, ids=str)
def test_refused_dtype_at_creation(dtype):
    if np.dtype(dtype) in (np.float64, np.complex128):  # longdouble is float64 on some
        pytest.skip("longdouble is float64 here")  # platforms
    for make in (
        lambda: anb.tensor([1, 2], dtype=dtype),
        lambda: anb.tensor(np.zeros(2, dtype=dtype)),
        lambda: anb.as_tensor(np.zeros(2, dtype=dtype)),
        lambda: anb.zeros(2, dtype=dtype),
        lambda: anb.ones_like(anb.zeros(2), dtype=dtype),
    ):
        with pytest.raises(TypeError, match=r"does not support the dtype .*supported: float32"):
            make()


def test_complex_data_is_kept_and_object_data_refused_not_truncated():
    z = anb.tensor([1 + 2j, 3])  # complex data stays complex (docs/complex.rst)
    assert z.dtype == np.complex128
    np.testing.assert_array_equal(anb.sum(z).numpy(), 4 + 2j)
    assert anb.tensor(np.array([1j], np.complex64)).dtype == np.complex64
    with pytest.raises(TypeError, match="complex128 data to float64: it would drop the "
                                        "imaginary part"):
        anb.tensor([1 + 2j, 3], dtype=np.float64)  # NumPy would drop the imaginary part
    with pytest.raises(TypeError, match="object"):
        anb.sum(anb.tensor([1.5, 2.25], dtype=object))
    with pytest.raises(TypeError, match="dtype"):
        anb.tensor([2**70])  # NumPy makes an object array


@pytest.mark.parametrize(
    "source, expected",
    [(">f8", np.float64), (">f4", np.float32), (np.float16, np.float32), (">i8", np.int64),
     (np.int8, np.int64), (np.uint8, np.int64), (np.uint32, np.int64), (np.int16, np.int64),
     ("<i4", np.int32), (">i4", np.int32), (np.bool_, np.bool_)],
    ids=str,
)
def test_lossless_conversion_as_requested_dtype(source, expected):
    t = anb.tensor([1, 0], dtype=source)
    assert t.dtype == np.dtype(expected) and t.dtype.isnative
    np.testing.assert_array_equal(t.numpy(), [1, 0])


def test_big_endian_float_data_and_dtype_compute():
    for t in (anb.tensor([1.0, 2.0], dtype=">f8"),
              anb.tensor(np.array([1.0, 2.0], dtype=">f8")),
              anb.as_tensor(np.array([1.0, 2.0], dtype=">f8"))):
        assert t.dtype == np.float64
        np.testing.assert_allclose(anb.exp(t).numpy(), np.exp([1.0, 2.0]), rtol=1e-15)
    x = anb.tensor([1.0], dtype=">f8", requires_grad=True)
    (g,) = anb.grad(anb.exp(x).sum(), x)
    np.testing.assert_allclose(g.numpy(), np.exp([1.0]), rtol=1e-15)


def test_float16_becomes_float32_and_computes():
    t = anb.tensor([1.0, 2.0], dtype=np.float16, requires_grad=True)
    assert t.dtype == np.float32
    (g,) = anb.grad(anb.exp(t).sum(), t)
    np.testing.assert_allclose(g.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)


def test_int32_tensors_compute():
    a = anb.tensor([1, 2, 3], dtype=np.int32)
    assert a.dtype == np.int32
    np.testing.assert_array_equal((a + a).numpy(), [2, 4, 6])
    np.testing.assert_array_equal((a * 3).numpy(), [3, 6, 9])
    assert int(anb.sum(a).item()) == 6
    np.testing.assert_allclose(anb.exp(a).numpy(), np.exp([1, 2, 3]))


def test_uint64_out_of_int64_range_raises():
    with pytest.raises(OverflowError, match="uint64"):
        anb.tensor(np.array([2**63 + 5], np.uint64))
    with pytest.raises(OverflowError, match="uint64"):
        anb.as_tensor(np.array([2**64 - 1], np.uint64))
    t = anb.tensor(np.array([2**63 - 1], np.uint64))
    assert t.dtype == np.int64 and t.item() == 2**63 - 1


def test_numpy_operands_of_other_dtypes_in_ops():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = x * np.array([2.0, 3.0], dtype=">f8")
    (g,) = anb.grad(y.sum(), x)
    np.testing.assert_array_equal(g.numpy(), [2.0, 3.0])
    np.testing.assert_allclose(anb.exp(np.array([1.0], ">f8")).numpy(), np.exp([1.0]))
    assert (x * np.array([1j, 2j])).dtype == np.complex128  # NumPy's promotion
    assert (x * 1j).dtype == np.complex128
    assert (x.astype(np.float32) * 1j).dtype == np.complex64
    with pytest.raises(TypeError, match="dtype"):
        anb.exp(np.array([1.0, 2.0], dtype=object))


def test_astype_and_to_refuse_or_convert():
    x = anb.tensor([1.0, 2.0])
    assert x.astype(np.float16).dtype == np.float32
    assert x.to(dtype=">f8").dtype == np.float64
    assert x.astype(np.complex64).dtype == np.complex64
    with pytest.raises(TypeError, match="does not support the dtype"):
        x.astype(np.clongdouble)


def test_integer_to_negative_integer_power_raises():
    with pytest.raises(ValueError, match="Integers to negative integer powers"):
        anb.tensor([1, 2, 4]) ** -1
    with pytest.raises(ValueError, match="Integers to negative integer powers"):
        anb.power(anb.tensor([1, 2, 4]), anb.tensor([1, -1, 2]))
    # Repeated layouts still check (the run cache must not skip it).
    for _ in range(3):
        np.testing.assert_array_equal((anb.tensor([1, 2, 4]) ** 2).numpy(), [1, 4, 16])
        with pytest.raises(ValueError, match="Integers to negative integer powers"):
            anb.tensor([1, 2, 4]) ** anb.tensor([2, 2, -2])
    np.testing.assert_allclose((anb.tensor([1.0, 2.0, 4.0]) ** -1).numpy(), [1, 0.5, 0.25])


def test_bool_negative_and_subtract_raise():
    with pytest.raises(TypeError, match="boolean negative"):
        -anb.tensor([True])
    with pytest.raises(TypeError, match="boolean negative"):
        anb.negative(anb.tensor([True, False]))
    with pytest.raises(TypeError, match="boolean subtract"):
        anb.tensor([True]) - anb.tensor([False])
    np.testing.assert_array_equal((-anb.tensor([1, 2])).numpy(), [-1, -2])


@pytest.mark.parametrize("axis", [1.0, 0.5, "0", (0, 1.0)])
def test_non_integer_axis_raises(axis):
    x = anb.tensor([[1.0, 2.0], [3.0, 4.0]])
    for reduce in (anb.sum, anb.mean, anb.max, anb.prod, anb.var):
        with pytest.raises(TypeError):
            reduce(x, axis=axis)


def test_non_integer_axis_raises_in_other_ops():
    x = anb.tensor([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(TypeError):
        anb.softmax(x, axis=1.0)
    with pytest.raises(TypeError):
        anb.swapaxes(x, 0.0, 1)
    with pytest.raises(TypeError):
        anb.concatenate([x, x], axis=1.0)
    assert anb.sum(x, axis=np.int64(1)).shape == (2,)


@pytest.mark.parametrize(
    "join", [anb.concatenate, anb.stack], ids=["concatenate", "stack"]
)
def test_float_axis_raises_after_the_int_axis_ran(join):
    # The layout cached for ``axis=1`` must not answer for ``axis=1.0`` (they compare equal).
    x = anb.tensor([[1.0, 2.0], [3.0, 4.0]])
    join([x, x], axis=1)
    for bad in (1.0, np.float64(1.0)):
        with pytest.raises(TypeError):
            join([x, x], axis=bad)


def test_roll_refuses_float_axis_and_shift():
    x = anb.tensor([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(TypeError):
        anb.roll(x, 1, axis=1.0)
    with pytest.raises(TypeError):
        anb.roll(x, 1.0, axis=0)
    np.testing.assert_array_equal(
        anb.roll(x, np.int64(1), axis=np.int32(1)).numpy(), np.roll(x.numpy(), 1, axis=1)
    )


def test_dtypes_module_names_supported():
    assert [d.name for d in dtypes.SUPPORTED] == ["float32", "float64", "complex64",
                                                  "complex128", "int64", "int32", "bool"]


def test_pickle_and_deepcopy_refuse_non_leaves():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match=r"graph leaves\) can be pickled"):
        pickle.dumps(y)
    with pytest.raises(RuntimeError, match="graph leaves.*deepcopy"):
        copy.deepcopy(y)
    # The refusal changes nothing: backward still works.
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


def test_pickle_and_deepcopy_keep_leaves():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    for copied in (pickle.loads(pickle.dumps(x)), copy.deepcopy(x)):
        assert copied.is_leaf and copied.requires_grad
        np.testing.assert_array_equal(copied.numpy(), [1.0, 2.0])
        np.testing.assert_array_equal(copied.grad.numpy(), [2.0, 4.0])
        copied.numpy()[0] = 7.0
        copied.grad.numpy()[0] = 7.0
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    plain = pickle.loads(pickle.dumps(anb.tensor([1, 2])))
    assert plain.dtype == np.int64 and not plain.requires_grad and plain.grad is None
    pair = copy.deepcopy([x, x])
    assert pair[0] is pair[1]
    detached = pickle.loads(pickle.dumps((x * 2).detach()))
    np.testing.assert_array_equal(detached.numpy(), [2.0, 4.0])
