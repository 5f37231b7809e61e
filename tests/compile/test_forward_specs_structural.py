"""The forward drivers of compiled programs (``Op.forward_spec``) of the structural ops, from the
registry: matmul's ``_bmm``, the shape ops and indexing, and through them the composites built
on them (matmul, dot, einsum, tensordot, stacks, splits, pads, flips, ...). Run once through
their C entry, as the interpreter runs them, they give the eager forward's bits, on the
recorded values and on new values of the same shapes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import autograd_nb as anb
from autograd_nb import config
from autograd_nb.ops import _blas, linalg
from autograd_nb.ops._pointers import call_driver
from autograd_nb.ops.registry import REGISTRY
from tests.ops.test_indexing import INDICES

#: The families' modules: every op they register is covered here.
MODULES = ("autograd_nb.ops.linalg", "autograd_nb.ops.shape", "autograd_nb.ops.indexing")
OPS = sorted(name for name, op in REGISTRY.items() if type(op).__module__ in MODULES)

DTYPES = [np.float32, np.float64]
fast = settings(max_examples=15, deadline=None)


def same_bits(got, expected):
    """Equal shapes, dtypes and bytes (NaN payloads and the sign of zero included)."""
    return (got.shape == expected.shape and got.dtype == expected.dtype
            and got.tobytes() == expected.tobytes())


def replay(spec, arrays, output):
    """``spec``'s driver on ``arrays`` into a new buffer of ``output``'s shape and dtype,
    filled with NaN bytes first (so a driver must write all of it)."""
    driver, ints, floats = spec
    out = np.empty(output.shape, dtype=output.dtype)
    out.reshape(-1).view(np.uint8).fill(0xFF)
    call_driver(driver, arrays, out, ints, floats)
    return out


def new_values(array, rng, kind):
    """Other values of ``array``'s shape and dtype: for floats, ``"any"`` with NaN, infinities
    and -0.0 among them (data movement must keep their bits), ``"finite"`` normal ones and
    ``"small"`` in [0, 100) (casts to integers)."""
    shape, dtype = array.shape, array.dtype
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind == "i":
        return rng.integers(-50, 50, size=shape).astype(dtype)
    if dtype.kind == "u":
        return rng.integers(0, 100, size=shape).astype(dtype)
    if kind == "small":
        return np.asarray(rng.uniform(0, 100, size=shape), dtype=dtype)
    values = np.asarray(rng.standard_normal(shape) * 10, dtype=dtype)
    if kind == "any" and values.size:
        flat = values.reshape(-1)
        picks = rng.integers(0, flat.size, size=4)
        flat[picks] = np.array([np.nan, np.inf, -np.inf, -0.0], dtype=dtype)
    return values


def value_kind(op, output):
    if op.name == "_bmm":
        return "finite"
    if op.name == "astype" and output.dtype.kind in "iu":
        return "small"
    return "any"


def assert_replays(op, arrays, attrs, output, rng=None):
    """The spec recorded on the eager forward's ``(arrays, attrs, output)`` gives its bits, and
    those of the eager forward on new values of the same shapes."""
    rng = rng or np.random.default_rng(0)
    spec = op.forward_spec(arrays, attrs, output)
    assert spec is not None, op.name
    assert all(a.flags.c_contiguous for a in arrays), op.name
    assert same_bits(replay(spec, arrays, output), output), (op.name, attrs)
    kind = value_kind(op, output)
    others = [new_values(a, rng, kind) for a in arrays]
    expected = op.forward(others, attrs)
    assert same_bits(replay(spec, others, expected), expected), (op.name, attrs)


def run(name, values, **attrs):
    """The eager forward of op ``name`` (``op._run``), checked as ``assert_replays``."""
    op = REGISTRY[name]
    arrays, attrs, output = op._run(values, attrs)
    assert_replays(op, arrays, attrs, output)
    return output


class Checked:
    """Within it, every eager forward of this file's ops (run by a public function, a
    composite or a Tensor method) is checked as ``assert_replays``, when it runs: an in-place
    write afterwards (``t[i] = v``) must not change what it saw. ``names`` lists them."""

    def __init__(self):
        self.names = []

    def __enter__(self):
        for name in OPS:
            op = REGISTRY[name]
            for method in ("_run", "_run_with_constants"):
                setattr(op, method, self._checking(op, getattr(op, method)))
        return self

    def _checking(self, op, method):
        def checked(values, attrs):
            arrays, attrs, output = method(values, attrs)
            assert_replays(op, arrays, attrs, output)
            self.names.append(op.name)
            return arrays, attrs, output

        return checked

    def __exit__(self, *exc):
        for name in OPS:
            vars(REGISTRY[name]).pop("_run", None)
            vars(REGISTRY[name]).pop("_run_with_constants", None)


def tensor(shape, dtype, seed=0):
    return anb.tensor(new_values(np.empty(shape, dtype), np.random.default_rng(seed), "finite"))


# -- coverage ----------------------------------------------------------------------------------

#: A plain float64 case of every op of the families, as ``(values, attrs)``.
X = np.arange(24.0).reshape(2, 3, 4)
#: What ``_index_scatter`` takes as its attrs: those of the ``getitem`` it is the adjoint of.
SOURCE = REGISTRY["getitem"]._run([X], {"index": (1, Ellipsis)})[1]
PLAIN = {
    "_bmm": ([X, np.ones((2, 4, 5))], {}),
    "reshape": ([X], {"shape": (6, 4)}),
    "transpose": ([X], {"axes": (2, 0, 1)}),
    "broadcast_to": ([X[:1]], {"shape": (3, 3, 4)}),
    "astype": ([X], {"dtype": np.float32}),
    "concatenate": ([X, X], {"axis": 1}),
    "stack": ([X, X], {"axis": -1}),
    "getitem": ([X], {"index": (1, slice(None, None, -1))}),
    "setitem": ([X, np.ones(4)], {"index": (0, 1)}),
    "_index_scatter": ([np.ones((3, 4))], {"source": SOURCE}),
}

#: Cases of these ops with no forward driver (``forward_spec`` gives None), and why.
NO_DRIVER = {
    "astype": "to or from float16, complex or other dtypes numba's casts do not cover, and "
    "float to uint32 / uint64 (NumPy's results for NaN and negative values differ from "
    "numba's)",
}


def test_every_op_of_the_families_has_a_plain_case():
    assert sorted(PLAIN) == OPS


@pytest.mark.parametrize("name", OPS)
def test_every_op_has_a_driver_for_plain_float64(name):
    values, attrs = PLAIN[name]
    run(name, values, **attrs)


# -- _bmm and the linalg composites ------------------------------------------------------------

#: (a, b) shapes that take each path of ``_bmm``'s forward.
BMM_PATHS = {
    "empty": ((2, 0, 3), (2, 3, 4)),
    "zeros": ((2, 3, 0), (2, 0, 4)),
    "rank_one": ((3, 5, 1), (3, 1, 6)),
    "loops": ((2, 3, 4), (2, 4, 5)),
    "matvec": ((1, 512, 256), (1, 256, 1)),
    "blas": ((3, 20, 30), (3, 30, 40)),
    # Below ``SPLIT_MIN_WORK``, where OpenBLAS at two threads gave other bits than at one.
    "blas_held": ((1, 250, 33), (1, 33, 250)),
    "blas_threaded": ((1, 130, 128), (1, 128, 128)),
}
PATHS = {"empty": linalg._EMPTY, "zeros": linalg._ZEROS, "rank_one": linalg._RANK_ONE,
         "loops": linalg._LOOPS, "matvec": linalg._MATVEC, "blas": linalg._BLAS,
         "blas_held": linalg._BLAS, "blas_threaded": linalg._BLAS}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", list(BMM_PATHS))
def test_bmm_paths(path, dtype):
    rng = np.random.default_rng(1)
    a, b = (new_values(np.empty(s, dtype), rng, "finite") for s in BMM_PATHS[path])
    assert linalg._forward_path(a, b) == PATHS[path]
    get = _blas.PRODUCTS.get_threads
    threads = get() if get is not None else None
    run("_bmm", [a, b])
    if threads is not None:  # the driver gave OpenBLAS's threads back as it found them
        assert get() == threads


@pytest.mark.parametrize("dtype", DTYPES)
def test_matvec_driver_gives_the_bits_of_the_blocks(dtype):
    # The driver runs a matrix-vector product on one thread; the eager forward runs it in
    # blocks over numba's threads once they have started (``_matvec``).
    rng = np.random.default_rng(9)
    a, b = (new_values(np.empty(s, dtype), rng, "finite") for s in BMM_PATHS["matvec"])
    blocks = np.empty((1, 512, 1), dtype=dtype)
    linalg._matvec_blocks(a[0], b[0, :, 0], blocks[0, :, 0])
    arrays, attrs, output = REGISTRY["_bmm"]._run([a, b], {})
    assert same_bits(output, blocks)
    assert same_bits(replay(REGISTRY["_bmm"].forward_spec(arrays, attrs, output), arrays,
                            output), blocks)


@pytest.mark.parametrize("dtype", DTYPES)
def test_bmm_own_kernel(dtype, monkeypatch):
    monkeypatch.setattr(config, "GEMM_KERNEL", "own")
    rng = np.random.default_rng(2)
    a = new_values(np.empty((2, 24, 40), dtype), rng, "finite")
    b = new_values(np.empty((2, 40, 72), dtype), rng, "finite")
    arrays, attrs, output = REGISTRY["_bmm"]._run([a, b], {})
    assert REGISTRY["_bmm"].forward_spec(arrays, attrs, output)[1][5] != 0  # the own tiles
    assert_replays(REGISTRY["_bmm"], arrays, attrs, output)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_bmm_integers_and_booleans(dtype):
    rng = np.random.default_rng(3)
    for shapes in (((2, 3, 4), (2, 4, 5)), ((1, 9, 1), (1, 1, 7)), ((2, 3, 0), (2, 0, 2))):
        run("_bmm", [new_values(np.empty(s, dtype), rng, "finite") for s in shapes])


@fast
@given(
    dtype=st.sampled_from(DTYPES),
    batch=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, max_side=3),
    sizes=st.tuples(*[st.integers(0, 5)] * 3),
    vectors=st.tuples(st.booleans(), st.booleans()),
)
def test_matmul_layouts(dtype, batch, sizes, vectors):
    m, k, n = sizes
    a_shape = (k,) if vectors[0] else batch.input_shapes[0] + (m, k)
    b_shape = (k,) if vectors[1] else batch.input_shapes[1] + (k, n)
    with Checked() as checked:
        anb.matmul(tensor(a_shape, dtype), tensor(b_shape, dtype, 1))
    assert "_bmm" in checked.names


#: Composites that record ops of this file (``tril`` and ``triu`` record only ``where``).
LINALG_COMPOSITES = {
    "dot_vectors": lambda t: anb.dot(t((4,)), t((4,))),
    "dot_matrix_vector": lambda t: anb.dot(t((3, 4)), t((4,))),
    "dot_nd": lambda t: anb.dot(t((2, 3, 4)), t((5, 4, 2))),
    "outer": lambda t: anb.outer(t((2, 3)), t((4,))),
    "inner": lambda t: anb.inner(t((2, 3)), t((4, 3))),
    "tensordot": lambda t: anb.tensordot(t((3, 4, 5)), t((4, 5, 2))),
    "tensordot_axes": lambda t: anb.tensordot(t((3, 4)), t((2, 3)), axes=([0], [1])),
    "einsum_matmul": lambda t: anb.einsum("ij,jk->ik", t((3, 4)), t((4, 2))),
    "einsum_batched": lambda t: anb.einsum("bij,bkj->bik", t((2, 3, 4)), t((2, 5, 4))),
    "einsum_diagonal": lambda t: anb.einsum("ii->i", t((3, 3))),
    "einsum_ellipsis": lambda t: anb.einsum("...j,j", t((4, 3, 2)), t((2,))),
    "einsum_three": lambda t: anb.einsum("ij,jk,kl->il", t((2, 3)), t((3, 4)), t((4, 2))),
    "kron": lambda t: anb.kron(t((2, 3)), t((3, 2))),
    "cross": lambda t: anb.cross(t((4, 3)), t((4, 3))),
    "trace": lambda t: anb.trace(t((3, 4)), offset=1),
    "trace_dtype": lambda t: anb.trace(t((3, 3)), dtype=np.float32),
    "diagonal": lambda t: anb.diagonal(t((2, 3, 4)), offset=-1, axis1=2, axis2=1),
    "diag": lambda t: anb.diag(t((4,)), k=1),
    "diag_of_matrix": lambda t: anb.diag(t((3, 4)), k=-1),
    "multi_dot": lambda t: anb.linalg.multi_dot([t((2, 3)), t((3, 4)), t((4,))]),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(LINALG_COMPOSITES))
def test_linalg_composites(name, dtype):
    seeds = iter(range(100))
    with Checked() as checked:
        LINALG_COMPOSITES[name](lambda shape: tensor(shape, dtype, next(seeds)))
    assert checked.names


# -- shape ops and the assembly composites -----------------------------------------------------

shapes = hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=3)
nonempty = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=3)


@fast
@given(dtype=st.sampled_from(DTYPES), shape=shapes, data=st.data())
def test_shape_ops(dtype, shape, data):
    x = new_values(np.empty(shape, dtype), np.random.default_rng(4), "any")
    ndim = len(shape)
    axes = tuple(data.draw(st.permutations(range(ndim))))
    run("transpose", [x], axes=axes)
    run("reshape", [x], shape=tuple(data.draw(st.permutations(shape))))
    run("reshape", [x], shape=(-1,), view=True)  # eagerly a view; the driver copies
    lead = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2)))
    kept = [data.draw(st.booleans()) for _ in shape]
    ones = x[tuple(slice(None) if k else slice(0, 1) for k in kept)].copy()
    run("broadcast_to", [ones], shape=lead + shape)
    axis = data.draw(st.integers(-ndim, ndim - 1))
    other = x.copy()
    run("concatenate", [x, other, x], axis=axis)
    run("concatenate", [x, other], axis=None)
    run("stack", [x, other], axis=data.draw(st.integers(-ndim - 1, ndim)))
    run("stack", [x], axis=0)


@fast
@given(dtype=st.sampled_from(DTYPES), shape=nonempty, data=st.data())
def test_assembly_composites(dtype, shape, data):
    ndim = len(shape)
    axis = data.draw(st.integers(-ndim, ndim - 1))
    with Checked() as checked:
        x = tensor(shape, dtype)
        anb.expand_dims(x, axis)
        anb.squeeze(anb.expand_dims(x, 0), axis=0)
        anb.swapaxes(x, 0, axis)
        anb.moveaxis(x, 0, axis)
        anb.flip(x, axis)
        anb.flip(x)
        anb.roll(x, data.draw(st.integers(-4, 4)), axis=axis)
        anb.roll(x, 2)
        anb.repeat(x, data.draw(st.integers(0, 3)), axis=axis)
        anb.repeat(x, [1, 0, 2][: shape[axis]] + [1] * (shape[axis] - 3), axis=axis)
        anb.tile(x, data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
        anb.pad(x, data.draw(st.integers(0, 2)), constant_values=1.5)
        for mode in ("edge", "reflect", "symmetric", "wrap"):
            anb.pad(x, [(1, 2)] * ndim, mode=mode)
        anb.split(x, [1], axis=axis)
        anb.array_split(x, 2, axis=axis)
        anb.take(x, [0, -1, 0], axis=axis)
        anb.sort(x, axis=axis)
        anb.diff(x, axis=axis)
        anb.ravel(x)
        anb.flatten(x, "F")
        anb.atleast_3d(x)
        anb.vstack([x, x])
        anb.hstack([x, x])
        anb.dstack([x, x])
        anb.column_stack([x, x])
        anb.append(x, x)
        if ndim >= 2:
            anb.rot90(x, data.draw(st.integers(-3, 3)))
            indices = np.argsort(x.numpy(), axis=axis)
            anb.take_along_axis(x, indices, axis=axis)
    assert {"getitem", "reshape", "transpose", "concatenate"} <= set(checked.names)


#: The dtypes ``astype``'s driver converts between.
CAST = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
        np.uint64, np.float32, np.float64]


@pytest.mark.parametrize("target", CAST, ids=lambda t: np.dtype(t).name)
def test_astype(target):
    rng = np.random.default_rng(5)
    for source in CAST:
        source, target_dtype = np.dtype(source), np.dtype(target)
        if source.kind == "f" and target_dtype in (np.uint32, np.uint64):
            continue
        kind = "small" if target_dtype.kind in "iu" else "any"
        run("astype", [new_values(np.empty((3, 5), source), rng, kind)], dtype=target)


@pytest.mark.parametrize("pair", [(np.float64, np.uint32), (np.float32, np.uint64),
                                  (np.float64, np.float16), (np.float16, np.float32),
                                  (np.float64, np.complex128)])
def test_astype_without_driver(pair):
    assert "astype" in NO_DRIVER
    source, target = pair
    op = REGISTRY["astype"]
    arrays, attrs, output = op._run([np.ones(3, dtype=source)], {"dtype": target})
    assert op.forward_spec(arrays, attrs, output) is None


# -- indexing ----------------------------------------------------------------------------------


@fast
@given(dtype=st.sampled_from(DTYPES), shape=shapes, data=st.data())
def test_basic_indices(dtype, shape, data):
    rng = np.random.default_rng(6)
    x = new_values(np.empty(shape, dtype), rng, "any")
    index = data.draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    selected = run("getitem", [x], index=index)
    # The value broadcast over the selection: whole, its last dimension, or one element.
    value_shapes = [selected.shape, selected.shape[-1:], (), (1,) + selected.shape]
    value = new_values(np.empty(data.draw(st.sampled_from(value_shapes)), dtype), rng, "any")
    run("setitem", [x, value], index=index)
    source = REGISTRY["getitem"]._run([x], {"index": index})[1]
    run("_index_scatter", [new_values(selected, rng, "any")], source=source)


@st.composite
def advanced_indices(draw, shape):
    """An index of ``shape`` with integer arrays (negative, repeated) or a boolean mask,
    after slices (negative steps too) and maybe None, before a slice, an Ellipsis, None or a
    second integer array (which broadcasts with the first)."""
    ndim = len(shape)
    axis = draw(st.integers(0, ndim - 1))
    lead = tuple(draw(st.sampled_from([slice(None), slice(None, None, -1)])) for _ in range(axis))
    if draw(st.booleans()):
        width = draw(st.integers(1, min(2, ndim - axis)))
        return lead + (draw(hnp.arrays(np.bool_, shape[axis:axis + width])),)
    index_shape = draw(st.sampled_from([(2,), (3,), (2, 2)]))

    def integers(n):
        return draw(hnp.arrays(np.int64, index_shape, elements=st.integers(-n, n - 1)))

    rest = ()
    if axis + 1 < ndim:
        rest = draw(st.sampled_from([(), (slice(1, None),), (Ellipsis,), (None,), "array"]))
        if rest == "array":
            rest = (integers(shape[axis + 1]),)
    prefix = (None,) if draw(st.booleans()) else ()
    return prefix + lead + (integers(shape[axis]),) + rest


@fast
@given(dtype=st.sampled_from(DTYPES), shape=nonempty, data=st.data())
def test_advanced_indices(dtype, shape, data):
    rng = np.random.default_rng(7)
    x = new_values(np.empty(shape, dtype), rng, "any")
    index = data.draw(advanced_indices(shape))
    selected = run("getitem", [x], index=index)
    value_shapes = [selected.shape, selected.shape[-1:], ()]
    value = new_values(np.empty(data.draw(st.sampled_from(value_shapes)), dtype), rng, "any")
    run("setitem", [x, value], index=index)
    source = REGISTRY["getitem"]._run([x], {"index": index})[1]
    run("_index_scatter", [new_values(selected, rng, "any")], source=source)


@pytest.mark.parametrize("index", [index for _, index in INDICES],
                         ids=[name for name, _ in INDICES])
def test_numpy_index_forms(index):
    # tests/ops/test_indexing.py's index forms, over an array of its shape (3, 4, 5).
    rng = np.random.default_rng(10)
    x = new_values(np.empty((3, 4, 5)), rng, "any")
    selected = run("getitem", [x], index=index)
    run("setitem", [x, new_values(np.empty(selected.shape[-1:]), rng, "any")], index=index)
    source = REGISTRY["getitem"]._run([x], {"index": index})[1]
    run("_index_scatter", [new_values(selected, rng, "any")], source=source)


@pytest.mark.parametrize("dtype", DTYPES)
def test_repeated_positions(dtype):
    # setitem keeps NumPy's last write; _index_scatter adds repeats in order (float sums of
    # different orders differ in the last bits).
    rng = np.random.default_rng(8)
    x = new_values(np.empty((4, 5), dtype), rng, "any")
    index = (np.array([[1, 3, 1], [1, 0, 3]]), slice(None, None, -1))
    run("setitem", [x, new_values(np.empty((2, 3, 5), dtype), rng, "finite")], index=index)
    run("setitem", [x, new_values(np.empty((3, 1), dtype), rng, "finite")], index=index)
    source = REGISTRY["getitem"]._run([x], {"index": index})[1]
    values = new_values(np.empty((2, 3, 5), dtype), rng, "finite") * 1e3
    run("_index_scatter", [values], source=source)


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_setitem_and_getitem(dtype):
    with Checked() as checked:
        t = tensor((3, 4), dtype)
        t[1:, ::-2] = tensor((2,), dtype, 1)
        t[np.array([0, 0, 2])] = 2.5
        t[t.numpy() > 0] = 0.0
        t[..., None, 1]
        t[[2, 0], [1, 1]]
    assert checked.names.count("setitem") == 3 and "getitem" in checked.names
