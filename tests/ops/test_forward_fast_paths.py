"""The eager forward's short paths record what the general path records: one CPU Tensor
(``apply``'s one-argument path, ``tape.record_one``) and the arithmetic operators
(``tensor._binary``, ``tape.record_pair``). A Tensor subclass takes the general path (one pass
over the arguments, ``tape.record``), so it is the reference: same values bit for bit, dtypes,
requires_grad, and nodes that hold the same things."""

import gc

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb import tape
from autograd_nb.ops.registry import REGISTRY
from autograd_nb.tensor import Tensor, apply


class Other(Tensor):
    """A subclass: never taken by the short paths."""

    __slots__ = ()


def as_other(t):
    """``t`` as an ``Other`` on the same data, node, flags and version box."""
    return Other._make(t._data, t._node, t._requires_grad, t._version)


def leaf(value, dtype=np.float64, requires_grad=True):
    return anb.tensor(np.asarray(value, dtype=dtype), requires_grad=requires_grad)


def inputs(shape, dtype, kind):
    """An input of each kind: a leaf that requires grad, a computed tensor, a constant."""
    rng = np.random.default_rng(0)
    data = (rng.uniform(0.5, 2.0, shape)).astype(dtype)
    if kind == "leaf":
        return anb.tensor(data, requires_grad=True)
    if kind == "computed":
        return anb.tensor(data, requires_grad=True) * 1.0
    return anb.tensor(data)


def assert_same_tensor(got, expected):
    assert type(got) is Tensor and type(expected) is Tensor
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert got.numpy().tobytes() == expected.numpy().tobytes()
    assert got.requires_grad == expected.requires_grad and got.is_leaf == expected.is_leaf
    assert got._version == {0: 0} and got._version is not expected._version
    assert not gc.is_tracked(got._version)
    assert_same_node(got.grad_fn, expected.grad_fn)


def assert_same_node(got, expected):
    if expected is None:
        assert got is None
        return
    assert type(got) is tape.Node
    assert got.op is expected.op
    # The same cached attrs (the plan cache relies on it), or for ops that build theirs per
    # call (clip's parameters), equal ones.
    assert got.attrs is expected.attrs or repr(got.attrs) == repr(expected.attrs)
    assert got.seq > expected.seq
    assert len(got.edges) == len(expected.edges)
    for g, e in zip(got.edges, expected.edges):
        if isinstance(e, Other):  # a leaf's stand-in: the edge is the leaf itself
            assert type(g) is Tensor and g._data is e._data and g._version is e._version
        else:
            assert g is e
    assert type(got.edges) is tuple and type(got.saved_inputs) is tuple
    assert len(got.saved_inputs) == len(expected.saved_inputs)
    for g, e in zip(got.saved_inputs, expected.saved_inputs):
        assert (g is None) == (e is None)
        if g is not None:
            assert g.dtype == e.dtype and g.tobytes() == e.tobytes()
    assert (got.saved_output is None) == (expected.saved_output is None)
    # Versions: the same input boxes (the result's own box differs), at the same versions.
    assert type(got.versions) is tuple and len(got.versions) == len(expected.versions)
    assert got.versions[1::2] == expected.versions[1::2]
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert got.retained is None and got.freed is False


UNARY = [
    ("softplus", {}),
    ("sqrt", {}),
    ("tanh", {}),
    ("exp", {}),
    ("negative", {}),
    ("relu", {}),
    ("sign", {}),
    ("clip", {"a_min": 0.7, "a_max": 1.5}),
    ("sum", {"axis": None, "keepdims": False}),
    ("sum", {"axis": 1, "keepdims": True}),
    ("softmax", {"axis": -1}),
    ("getitem", {"index": 1}),
    ("getitem", {"index": slice(1, None)}),
    ("getitem", {"index": (slice(None), 0)}),
]


@pytest.mark.parametrize("name, attrs", UNARY, ids=[f"{n}-{a}" for n, a in UNARY])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["leaf", "computed", "constant"])
@pytest.mark.compiled_only
def test_one_tensor_takes_the_short_path_and_records_as_the_general_one(name, attrs, dtype, kind):
    op = REGISTRY[name]
    x = inputs((3, 2), dtype, kind)
    for _ in range(2):  # a miss, then a cached hit
        expected = apply(op, (as_other(x),), dict(attrs))
        got = apply(op, (x,), dict(attrs))
        assert_same_tensor(got, expected)


@pytest.mark.parametrize("name, attrs", UNARY[:3] + UNARY[-3:])
def test_the_short_path_under_no_grad_records_nothing(name, attrs):
    x = inputs((3, 2), np.float64, "computed")
    with anb.no_grad():
        got = apply(REGISTRY[name], (x,), dict(attrs))
    assert got.grad_fn is None and not got.requires_grad


def test_integer_inputs_keep_their_dtypes_on_the_short_path():
    x = anb.tensor(np.arange(6).reshape(3, 2))
    for name, attrs in (
        ("negative", {}),
        ("sum", {"axis": 0}),
        ("getitem", {"index": 2}),
        ("sqrt", {}),
    ):
        expected = apply(REGISTRY[name], (as_other(x),), dict(attrs))
        assert_same_tensor(apply(REGISTRY[name], (x,), dict(attrs)), expected)


def test_int_getitem_of_a_vector_is_a_0d_array_of_its_own():
    s = anb.softmax(anb.stack([leaf(1.0), leaf(2.0), leaf(0.5)]))
    for k in range(3):
        item = s[k]
        assert type(item.numpy()) is np.ndarray and item.shape == ()
        assert not np.shares_memory(item.numpy(), s.numpy())
        assert item.item() == s.numpy()[k]
    s[1].backward()


OPERATORS = [
    "__add__",
    "__sub__",
    "__mul__",
    "__truediv__",
    "__pow__",
    "__radd__",
    "__rsub__",
    "__rmul__",
    "__rtruediv__",
    "__rpow__",
]


@pytest.mark.parametrize("method", OPERATORS)
@pytest.mark.parametrize("other", ["leaf", "computed", "constant", 2.0, 3])
@pytest.mark.parametrize("shape", [(), (4, 2)])
def test_operators_record_as_the_general_path(method, other, shape):
    x = inputs(shape, np.float64, "computed")
    y = inputs(shape, np.float64, other) if isinstance(other, str) else other
    reflected = method.startswith("__r")
    name = {
        "add": "add",
        "sub": "subtract",
        "mul": "multiply",
        "truediv": "divide",
        "pow": "power",
    }[method.strip("_").removeprefix("r")]
    args = (y, x) if reflected else (x, y)
    for _ in range(2):
        expected = apply(
            REGISTRY[name], tuple(as_other(a) if isinstance(a, Tensor) else a for a in args), {}
        )
        got = getattr(x, method)(y)
        assert_same_tensor(got, expected)


@pytest.mark.parametrize(
    "make",
    [
        lambda h: h * h,
        lambda h: 2.0 / h,
        lambda h: h**2.0,
        lambda h: anb.softplus(h),
    ],
)
def test_a_saved_input_changed_in_place_makes_backward_raise(make):
    h = leaf([1.0, 2.0]) * 1.0
    loss = anb.sum(make(h))
    alias = h.detach()
    alias += 1.0  # shares h's version box
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


@pytest.mark.parametrize(
    "make",
    [
        lambda h: anb.sqrt(h),
        lambda h: h / 2.0,
        lambda h: anb.softmax(h),
        lambda h: anb.exp(h),
    ],
)
def test_a_saved_output_changed_in_place_makes_backward_raise(make):
    y = make(leaf([1.0, 2.0]))
    loss = anb.sum(y * 1.0)
    y.detach()[0] = 3.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_the_result_version_box_counts_in_place_writes():
    x = leaf([1.0, 2.0])
    y = anb.exp(x)
    z = y + 1.0
    assert y._version_number == 0 and z._version_number == 0
    z += 1.0
    z[0] = 5.0
    assert z._version_number == 2 and y._version_number == 0
    assert type(z._version_number) is int


def test_gradients_through_short_paths_match_the_general_path():
    data = np.array([0.3, -1.2, 2.0])

    def loss(x):
        s = anb.softmax(anb.stack([anb.softplus(x[0]), x[1] * x[2], x[2] / 3.0 - x[0]]))
        return anb.sum(anb.sqrt(s + 1.0) * 2.0) + s[1]

    x = anb.tensor(data, requires_grad=True)
    loss(x).backward()
    # The general path throughout: every argument of every op is a subclass instance.
    reference = as_other(anb.tensor(data, requires_grad=True))
    _general_loss(reference).backward()
    assert x.grad.numpy().tobytes() == reference.grad.numpy().tobytes()


def _general_loss(x):
    def run(name, *args, **attrs):
        return apply(
            REGISTRY[name], tuple(as_other(a) if type(a) is Tensor else a for a in args), attrs
        )

    items = [run("getitem", x, index=k) for k in range(3)]
    parts = [
        run("softplus", items[0]),
        run("multiply", items[1], items[2]),
        run("subtract", run("divide", items[2], 3.0), items[0]),
    ]
    s = run("softmax", run("stack", *parts, axis=0), axis=-1)
    total = run(
        "sum", run("multiply", run("sqrt", run("add", s, 1.0)), 2.0), axis=None, keepdims=False
    )
    return run("add", total, run("getitem", s, index=1))


# -- the strided forward kernel's rows of innermost stride 0 or 1 ------------------------------

ROW_PATTERNS = [
    ((5, 7), (5, 7)),  # both rows contiguous, same shape: the flat kernel, for contrast
    ((5, 7), (7,)),  # a bias on a batch: strides 1 and 1 along the row
    ((5, 1), (1, 7)),  # an outer product: strides 0 and 1
    ((1, 7), (5, 1)),  # 1 and 0
    ((3, 5, 1), (5, 7)),  # three dimensions collapsed to rows
]


@pytest.mark.parametrize("a_shape, b_shape", ROW_PATTERNS)
@pytest.mark.parametrize("name", ["multiply", "subtract", "maximum"])
def test_broadcast_rows_match_numpy_bit_for_bit(name, a_shape, b_shape):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    got = getattr(anb, name)(anb.tensor(a), anb.tensor(b)).numpy()
    np.testing.assert_array_equal(got, getattr(np, name)(a, b))


@pytest.mark.parametrize(
    "shapes", [((5, 1), (1, 7), (5, 7)), ((1, 7), (5, 7), (5, 1)), ((5, 7), (7,), (1,))]
)
def test_three_input_rows_match_numpy(shapes):
    rng = np.random.default_rng(5)
    condition = rng.standard_normal(shapes[0]) > 0
    x, y = rng.standard_normal(shapes[1]), rng.standard_normal(shapes[2])
    got = anb.where(anb.tensor(condition), anb.tensor(x), anb.tensor(y)).numpy()
    np.testing.assert_array_equal(got, np.where(condition, x, y))
