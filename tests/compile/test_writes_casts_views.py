"""``anb.compile`` on the ops that used to make a signature eager: ``t[i] = v`` with its
gradient, an operand cast to another dtype inside an op (float32 with float64), and an output
that is a view of an argument (``x.detach()``).

Each test turns ``CompileWarning`` into an error (the signature must replay, not fall back)
and compares every replay, on new values at each call, with fn run eagerly: outputs and
gradients bit for bit.
"""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autograd_nb as anb
from autograd_nb import config, tiering
from autograd_nb.engine import machine
from autograd_nb.ops import _pointers
from autograd_nb.replay import CompileWarning, interpreter


@pytest.fixture(autouse=True)
def _replays():
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        yield


def _bits(values):
    return [(v.dtype, v.shape, v.tobytes()) for v in
            (np.asarray(t._data if isinstance(t, anb.Tensor) else t) for t in values)]


def _fresh(arrays, wrt=None):
    """Tensors of ``arrays``, those at the positions ``wrt`` (all: None) requiring grad."""
    return [anb.tensor(a, requires_grad=wrt is None or k in wrt) for k, a in enumerate(arrays)]


def _check(fn, make_arrays, calls=3, wrt=None):
    """fn compiled against fn eager over ``calls`` calls, each on new values: outputs and the
    gradients of the first output to the arguments at the positions ``wrt`` (all by
    default), the only ones requiring grad."""
    compiled = anb.compile(fn)
    for call in range(calls):
        arrays = make_arrays(call)
        results = []
        for f in (fn, compiled):
            args = _fresh(arrays, wrt)
            out = f(*args)
            outs = out if isinstance(out, tuple) else (out,)
            inputs = [args[k] for k in (range(len(args)) if wrt is None else wrt)]
            grads = (anb.grad(outs[0], inputs, allow_unused=True, materialize_grads=True)
                     if inputs else ())
            results.append((_bits(outs), _bits(grads)))
        assert results[0] == results[1], f"call {call}"
    return compiled


# -- t[i] = v ---------------------------------------------------------------------------------

INDICES = {
    "int": lambda n: 1,
    "negative": lambda n: -1,
    "slice": lambda n: slice(1, None),
    "step": lambda n: slice(None, None, -2),
    "repeats": lambda n: np.array([0, n - 1, 0]),
    "mask": lambda n: np.arange(n) % 2 == 0,
    "pair": lambda n: (slice(None), 0),
}


def _write_program(index):
    def fn(x, v, c):
        y = x * 2.0
        y[index] = anb.sin(v) * 3.0
        return anb.sum(y * y) + anb.sum(y * c), y
    return fn


def _value_shape(index, shape):
    target = np.empty(shape)[index].shape
    return target[1:] if len(target) > 1 else ()  # (broadcast over the first axis)


@settings(max_examples=12, deadline=None)
@given(kind=st.sampled_from(sorted(INDICES)), rows=st.integers(2, 4), cols=st.integers(1, 3),
       seed=st.integers(0, 2**16))
def test_setitem_with_its_gradient_replays_the_eager_bits(kind, rows, cols, seed):
    shape = (rows, cols)
    index = INDICES[kind](rows)
    value_shape = _value_shape(index, shape)
    rng = np.random.default_rng(seed)

    def make(call):
        return [rng.uniform(-1, 1, shape), rng.uniform(-1, 1, value_shape),
                rng.uniform(-1, 1, shape)]

    _check(_write_program(index), make)


@pytest.mark.parametrize("kind", ["slice", "repeats", "mask"])
def test_setitem_drivers_give_the_python_walks_and_the_twins_bits(kind):
    # Eager: the compiled executor (setitem's drivers) against the Python walk over its
    # kernels and tier 0's NumPy twins, one gradient and a batch of them.
    shape = (4, 3)
    index = INDICES[kind](4)
    rng = np.random.default_rng(3)
    arrays = [rng.uniform(-1, 1, shape), rng.uniform(-1, 1, _value_shape(index, shape)),
              rng.uniform(-1, 1, shape)]
    fn = _write_program(index)
    seeds = anb.tensor(rng.uniform(-1, 1, (2,) + shape))
    results = {}
    for mode in ("python", "compiled", "tier0"):
        config.COMPILED_BACKWARD = mode != "python"
        tiering.backward_pending = mode == "tier0"
        try:
            args = _fresh(arrays)
            results[mode] = _bits(anb.grad(fn(*args)[0], args))
            args = _fresh(arrays)
            results[mode] += _bits(anb.grad(fn(*args)[1], args[:2], grad_outputs=seeds,
                                            is_grads_batched=True))
        finally:
            config.COMPILED_BACKWARD = True
            tiering.backward_pending = False
            tiering._grad_leaves.clear()
    assert results["compiled"] == results["python"] == results["tier0"]


def test_a_time_stepping_loop_writing_a_state_buffer():
    steps, n = 6, 4

    def rollout(x0, k):
        u = anb.zeros((steps, n))
        u[0] = x0
        for i in range(1, steps):
            u[i] = u[i - 1] + 0.1 * anb.sin(k * u[i - 1])
        return anb.sum(u * u), u

    rng = np.random.default_rng(0)
    _check(rollout, lambda call: [rng.uniform(-1, 1, n), rng.uniform(0.5, 2, n)])


def test_setitem_keeps_torchs_in_place_errors():
    def on_leaf(x, v):
        x[0] = v
        return x

    def saved_then_written(x, v):
        y = x * 2.0
        z = anb.sin(y)  # (saves y)
        y[0] = v
        return anb.sum(z)

    x = anb.tensor([1.0, 2.0], requires_grad=True)
    v = anb.tensor(3.0, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        anb.compile(on_leaf)(x, v)
    compiled = anb.compile(saved_then_written)
    for f in (saved_then_written, compiled, compiled):
        out = f(x, v)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            anb.grad(out, (x, v))


# -- mixed dtypes -----------------------------------------------------------------------------

def test_float32_operands_of_float64_ops_are_cast_rows():
    def fn(a, b, data):
        # ``a * b`` and ``data + b`` promote the float32 operands inside the ops.
        return anb.sum(anb.sin(a * b) + data * b) * 2.0, a + data

    rng = np.random.default_rng(1)

    def make(call):
        return [rng.uniform(-1, 1, 5).astype(np.float32), rng.uniform(-1, 1, 5),
                rng.uniform(-1, 1, 5).astype(np.float32)]

    # (the gradient to b, float64; the float32 tensors' gradients: see the next test)
    _check(fn, make, wrt=[1])
    with anb.no_grad():
        _check(lambda a, b, data: fn(a, b, data)[0] + 0.0, make, calls=2, wrt=[])


def test_an_explicit_cast_replays():
    def fn(x, w):
        return anb.sum(x.astype(np.float64) * w), anb.sin(x).astype(np.float64)

    rng = np.random.default_rng(2)
    _check(fn, lambda call: [rng.uniform(-1, 1, 3).astype(np.float32), rng.uniform(-1, 1, 3)],
           wrt=[1])


def test_a_gradient_across_dtypes_still_runs_eagerly():
    # Backward tables are of one dtype (docs/compile.rst, "Fallback"): a float32 tensor
    # whose gradient comes from float64 ops keeps the eager path, with its warning.
    def fn(a, b):
        return anb.sum(a * b)

    def cast_out(b):
        return anb.tanh(b).astype(np.float32)

    a = anb.tensor(np.ones(3, np.float32), requires_grad=True)
    b = anb.tensor(np.ones(3), requires_grad=True)
    with pytest.warns(CompileWarning, match="several dtypes"):
        anb.compile(fn)(a, b)
    def round_trip(b):
        return anb.sum(anb.sin(b.astype(np.float32)).astype(np.float64))

    with pytest.warns(CompileWarning, match="several dtypes"):
        anb.compile(cast_out)(b)
    with pytest.warns(CompileWarning, match="gradients of float32 and float64"):
        anb.compile(round_trip)(b)


# -- outputs that are views of arguments ------------------------------------------------------

def test_detached_outputs_are_views_sharing_the_version_counter():
    outside = anb.tensor([5.0, 6.0])

    def fn(x, w):
        return anb.sum(x * w), x.detach(), outside.detach(), x[1:], w

    compiled = _check(fn, lambda call: [np.arange(3.0) + call, np.ones(3) * call])
    x = anb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = anb.tensor([1.0, 1.0, 1.0], requires_grad=True)
    total, d, o, tail, same = compiled(x, w)
    assert d._data is x._data and d._version is x._version and not d.requires_grad
    assert o._data is outside._data and o._version is outside._version
    assert same is w
    with anb.no_grad():
        x[0] = 7.0  # (visible through the view, its version moved, as eagerly)
    assert d.tolist() == [7.0, 2.0, 3.0] and d._version[0] == x._version[0] == 1
    assert tail.tolist() == [2.0, 3.0]  # (a basic index copies, eagerly as in a replay)
    d[1] = 9.0
    assert x.tolist()[1] == 9.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        anb.grad(total, w)  # (x, saved by x * w, changed since: torch's error)
    total, *_ = compiled(x, w)
    (g,) = anb.grad(total, w)
    assert g.tolist() == x.tolist()


def test_a_buffer_made_inside_fn_starts_from_its_first_values_at_every_call():
    # ``anb.zeros`` inside fn is each call's own buffer: a replay neither reads what an
    # earlier call wrote into it nor hands out one call's buffer again.
    def fn(x):
        u = anb.zeros(3)
        y = u[1] * 1.0 + x
        u[1] = x
        u[2] = y * 2.0
        return y, u

    compiled = _check(fn, lambda call: [np.array(call + 1.5)])
    first = compiled(anb.tensor(1.0))[1]
    second = compiled(anb.tensor(2.0))[1]
    assert first.tolist() == [0.0, 1.0, 2.0] and second.tolist() == [0.0, 2.0, 4.0]


def test_an_indexed_output_of_an_argument_has_the_eager_gradient():
    def fn(x):
        return x[1:], x[::-2] * 2.0

    compiled = anb.compile(fn)
    rng = np.random.default_rng(4)
    for call in range(3):
        data = rng.uniform(-1, 1, 5)
        results = []
        for f in (fn, compiled):
            x = anb.tensor(data, requires_grad=True)
            tail, flipped = f(x)
            seeds = (anb.tensor(np.arange(4.0) + call), anb.tensor(np.ones(3)))
            results.append(_bits([tail, flipped, *anb.grad((tail, flipped), x, seeds)]))
        assert results[0] == results[1]


def _copy_rows(compiled):
    """The copy rows of the forward table of the compiled function's one program."""
    program = next(iter(compiled._programs.values())).program
    table = machine.sections(program.forward_table)
    copy = _pointers.entry_address(interpreter.copy_driver, np.dtype(np.float64))
    return sum(1 for entry in table.rows[:, machine.ENTRY].tolist()
               if entry != machine.ZERO and table.entries[entry] == copy)


def test_a_constant_made_inside_fn_and_only_read_is_not_copied_at_each_call():
    def read_only(x):
        c = anb.full(x.shape, 0.5)
        return x * c + c

    def written(x):
        c = anb.full(x.shape, 0.5)
        c += x
        return c * c

    counts = [_copy_rows(_check(fn, lambda call: [np.arange(4.0) * call], wrt=[]))
              for fn in (read_only, written)]
    assert counts[0] == 0 and counts[1] >= 1  # (the written one: filled at each call)
