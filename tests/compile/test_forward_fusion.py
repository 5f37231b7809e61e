"""Fused replayed forwards (:mod:`autograd_nb.replay.fusion`) against eager runs.

A group runs each op's own flat driver on blocks of its elements, so replays equal eager
runs bit for bit, outputs and gradients, fused or not.
"""

import threading
import warnings

import numba.core.event as numba_event
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autograd_nb as anb
from autograd_nb import config
from autograd_nb.engine import machine
from autograd_nb.ops import _pointers
from autograd_nb.replay import CompileWarning, fusion

UNARY = ("sin", "tanh", "exp", "square", "sigmoid", "softplus", "sqrt", "negative")
BINARY = ("add", "subtract", "multiply", "divide", "maximum")
#: (rows, columns): below fusion's threshold, above it, over one block (split mid-row), and
#: rows long enough to be a group's blocks (a broadcast row read in place).
SHAPES = ((3, 4), (16, 9), (9, 70), (5, 130))


def _operand(values, k, extras, which):
    """Operand ``k`` of a step: an earlier value, or a broadcast one (a column, a row, a
    0-d tensor, a Python float)."""
    if which == 0:
        return values[k % len(values)]
    return extras[(which - 1) % len(extras)]


def _run(steps, xs, extras):
    values = list(xs)
    for name, i, j, which in steps:
        a = values[i % len(values)]
        b = _operand(values, j, extras, which)
        if name in UNARY:
            argument = anb.abs(a) + 0.5 if name == "sqrt" else a * 0.5
            values.append(getattr(anb, name)(argument))
        elif name == "divide":
            values.append(a / ((b if type(b) is float else anb.abs(b)) + 1.0))
        elif name == "swap":
            values.append(anb.subtract(b, a))  # the broadcast operand first
        elif name == "sum":
            values.append(a - anb.sum(a, axis=1, keepdims=True) * 0.25)
        else:
            values.append(getattr(anb, name)(a, b))
    kept = values[len(xs) + len(values[len(xs):]) // 2:]
    return anb.sum(values[-1]) + 0.5 * anb.sum(kept[0]), values[-1], kept[0]


STEP = st.tuples(st.sampled_from(UNARY + BINARY + ("swap", "sum")), st.integers(0, 40),
                 st.integers(0, 40), st.integers(0, 4))


def _inputs(shape, seed, dtype):
    rng = np.random.default_rng(seed)
    rows, columns = shape
    xs = [anb.tensor(rng.uniform(-1, 1, shape).astype(dtype), requires_grad=True)
          for _ in range(2)]
    extras = [anb.tensor(rng.uniform(0.5, 1.5, (rows, 1)).astype(dtype), requires_grad=True),
              anb.tensor(rng.uniform(0.5, 1.5, (1, columns)).astype(dtype)),
              anb.tensor(np.array(1.25, dtype=dtype), requires_grad=True),
              0.75]
    return xs, extras


def _check_against_eager(fn, args, differentiable):
    compiled = anb.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        compiled(*args)  # records
        for _ in range(2):
            got = compiled(*args)
            want = fn(*args)
            for g, w in zip(got, want, strict=True):
                np.testing.assert_array_equal(g.numpy(), w.numpy())
            got_grads = anb.grad(got[0], differentiable, allow_unused=True,
                                 materialize_grads=True)
            want_grads = anb.grad(want[0], differentiable, allow_unused=True,
                                  materialize_grads=True)
            for g, w in zip(got_grads, want_grads, strict=True):
                _assert_reordered(g.numpy(), w.numpy())
    return compiled


def _assert_reordered(got, want):
    """Equal but for the order of a sum: the loss's gradient goes through fn's other
    outputs, where a replay's tables stop (docs/compile.rst), so paths that meet below such
    an output are added at the inputs, not where they meet (``a*c + b*c``, ``(a+b)*c``)."""
    tol = 1e-12 if want.dtype == np.float64 else 1e-5
    scale = float(np.abs(want).max()) if want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)


@settings(max_examples=10, deadline=None)
@given(steps=st.lists(STEP, min_size=1, max_size=14), shape=st.sampled_from(SHAPES),
       seed=st.integers(0, 2**16), dtype=st.sampled_from(["float64", "float32"]))
def test_random_elementwise_programs_replay_the_eager_bits(steps, shape, seed, dtype):
    xs, extras = _inputs(shape, seed, dtype)

    def fn(a, b):
        return _run(steps, (a, b), extras)

    differentiable = xs + [extras[0], extras[2]]
    _check_against_eager(fn, xs, differentiable)


def _rows(compiled):
    program = next(iter(compiled._programs.values())).program
    return int(program.forward_table[0])


def _chain(x, column, v):
    d = x * column - v  # ``column`` (n, 1) is gathered into a register
    force = 2.0 * (d * d) - 0.1 * x  # ``d`` is saved for the backward: written
    v = v + 0.01 * force
    return anb.sum(x + 0.01 * v), v


@pytest.fixture
def chain_inputs():
    rng = np.random.default_rng(0)
    x = anb.tensor(rng.standard_normal((64, 2)), requires_grad=True)
    column = anb.tensor(rng.uniform(1, 2, (64, 1)), requires_grad=True)
    v = anb.tensor(rng.standard_normal((64, 2)))
    return x, column, v


def test_a_chain_runs_as_one_instruction(chain_inputs, monkeypatch):
    x, column, v = chain_inputs
    fused = _check_against_eager(_chain, chain_inputs, [x, column])
    monkeypatch.setattr(config, "FUSE_REPLAY", False)
    unfused = _check_against_eager(_chain, chain_inputs, [x, column])
    # 10 elementwise ops and the sum: one group and the sum's instruction.
    assert (_rows(unfused), _rows(fused)) == (11, 2)
    a, b = fused(*chain_inputs), unfused(*chain_inputs)
    for got, want in zip(a, b, strict=True):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_values_read_after_the_group_are_written(chain_inputs):
    x, column, v = chain_inputs
    compiled = anb.compile(_chain)
    compiled(*chain_inputs)
    loss, v_next = compiled(*chain_inputs)
    want_loss, want_v = _chain(*chain_inputs)
    np.testing.assert_array_equal(v_next.numpy(), want_v.numpy())  # an output
    # ``d`` (read by the VJPs of ``d * d``) comes from the arena the group wrote.
    got = anb.grad(loss, [x, column])
    want = anb.grad(want_loss, [x, column])
    for g, w in zip(got, want, strict=True):
        _assert_reordered(g.numpy(), w.numpy())  # (the loss goes through v_next)


def test_small_chains_stay_unfused():
    x = anb.tensor(np.linspace(-1, 1, 12).reshape(3, 4), requires_grad=True)
    compiled = _check_against_eager(lambda x: (anb.sum(anb.sin(x) * x + 1.0),), [x], [x])
    assert _rows(compiled) == 4


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_broadcast_rows_gathered_read_in_place_or_made_the_blocks(dtype):
    rng = np.random.default_rng(2)

    def fn(x, b):
        return (anb.sum(anb.tanh(x + b) * 2.0),)

    rows = {}
    lengths = (config.REPLAY_GATHER_ROW - 1, config.REPLAY_GATHER_ROW, config.REPLAY_ROW_MIN)
    for columns in lengths:
        x = anb.tensor(rng.standard_normal((64, columns)).astype(dtype), requires_grad=True)
        b = anb.tensor(rng.standard_normal(columns).astype(dtype), requires_grad=True)
        rows[columns] = _rows(_check_against_eager(fn, [x, b], [x, b]))
    # Short rows: the bias gathered, the add in the group with tanh and the product; longer
    # rows: the add on its own (its driver reads the bias row by row), then the group; rows
    # of REPLAY_ROW_MIN and more: one group whose blocks are the rows, reading the bias.
    assert rows == dict(zip(lengths, (2, 3, 2)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_layer_with_its_bias_is_one_group_of_row_blocks(dtype, monkeypatch):
    # tanh(h @ W + b) over a batch of 3-D rows, the bias a slice of a larger tensor (read at
    # an offset), a second bias of the same length, and a row of another length (not fused
    # with them: a group's blocks are rows of one length).
    rng = np.random.default_rng(9)
    h = anb.tensor(rng.standard_normal((2, 5, 7)).astype(dtype), requires_grad=True)
    w = anb.tensor(rng.standard_normal((7, 160)).astype(dtype), requires_grad=True)
    both = anb.tensor(rng.standard_normal(330).astype(dtype), requires_grad=True)
    other = anb.tensor(rng.standard_normal(800).astype(dtype), requires_grad=True)

    def fn(h, w, both, other):
        z = anb.tanh(h @ w + both[10:170]) * both[170:]
        flat = anb.reshape(z, (2, 800))
        return anb.sum(anb.sigmoid(flat + other) * 0.5), z

    compiled = _check_against_eager(fn, [h, w, both, other], [h, w, both, other])
    assert _drivers(compiled, np.dtype(dtype)) == {"group": 2}
    # unfused, the same function has an instruction per op
    monkeypatch.setattr(config, "REPLAY_ROW_MIN", config.REPLAY_ROW_MAX + 1)
    unfused = _check_against_eager(fn, [h, w, both, other], [h, w, both, other])
    assert _rows(unfused) > _rows(compiled)


def _drivers(compiled, dtype):
    """The fused drivers of the forward table: "group", "scaled add", counted."""
    program = next(iter(compiled._programs.values())).program
    table = machine.sections(program.forward_table)
    named = {_pointers.entry_address(fusion.group_driver, dtype): "group",
             _pointers.entry_address(fusion.scaled_add_driver, dtype): "scaled add"}
    found = [named.get(int(table.entries[e])) for e in table.rows[:, machine.ENTRY]
             if e != machine.ZERO]
    return {name: found.count(name) for name in set(found) if name is not None}


SCALED_ADDS = {
    "a - s * b": lambda a, b, s: a - s * b,
    "a + b * s": lambda a, b, s: a + b * s,
    "s * b + a": lambda a, b, s: s * b + a,
    "a - b * (0-d tensor)": lambda a, b, s: a - b * anb.tensor(np.asarray(s, a.dtype)),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("form", sorted(SCALED_ADDS))
def test_a_scaled_add_is_one_loop_with_the_eager_bits(dtype, form):
    # Random values: a multiply-add contracted into an fma (one rounding) would differ.
    rng = np.random.default_rng(5)
    a = anb.tensor(rng.standard_normal((9, 70)).astype(dtype), requires_grad=True)
    b = anb.tensor(rng.standard_normal((9, 70)).astype(dtype), requires_grad=True)
    combine = SCALED_ADDS[form]

    def fn(a, b):
        total = combine(a, b, 0.37)
        return anb.sum(total), total

    compiled = _check_against_eager(fn, [a, b], [a, b])
    assert _drivers(compiled, np.dtype(dtype)) == {"scaled add": 1}


ALONE = {
    "x * row": lambda x, row, column: x * row,
    "column * x": lambda x, row, column: column * x,
    "row / column": lambda x, row, column: row / column,
    "maximum(x, row)": lambda x, row, column: anb.maximum(x, row),
}


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("form", sorted(ALONE))
def test_a_lone_broadcast_op_whose_result_is_only_an_output(form, dtype, requires_grad):
    # A program of one op that gathers a short broadcast row or column is one group: its
    # result, read by nothing but the caller, must still reach the arena (it once stayed in
    # the group's register, and the output was uninitialised memory).
    rng = np.random.default_rng(10)
    x = anb.tensor(rng.uniform(1, 2, (5, 4)).astype(dtype), requires_grad=requires_grad)
    row = anb.tensor(rng.uniform(1, 2, 4).astype(dtype), requires_grad=requires_grad)
    column = anb.tensor(rng.uniform(1, 2, (5, 1)).astype(dtype))
    fn = ALONE[form]
    compiled = anb.compile(fn)
    for _ in range(3):  # records, then replays
        got, want = compiled(x, row, column), fn(x, row, column)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    if requires_grad:
        seed = anb.tensor(rng.standard_normal(want.shape).astype(dtype))
        got_grads = anb.grad(compiled(x, row, column), (x, row), grad_outputs=seed,
                             allow_unused=True, materialize_grads=True)
        want_grads = anb.grad(want, (x, row), grad_outputs=seed, allow_unused=True,
                              materialize_grads=True)
        for g, w in zip(got_grads, want_grads, strict=True):
            np.testing.assert_array_equal(g.numpy(), w.numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_multiply_by_a_gathered_operand_then_an_add_stays_a_group(dtype):
    # A multiply whose other operand is gathered (a column over rows) has a layout that is a
    # tuple: recording it once raised TypeError (found by this file's random programs).
    rng = np.random.default_rng(8)
    a = anb.tensor(rng.standard_normal((16, 9)).astype(dtype), requires_grad=True)
    column = anb.tensor(rng.uniform(0.5, 1.5, (16, 1)).astype(dtype), requires_grad=True)

    def fn(a, column):
        total = a * column + a
        return anb.sum(total), total

    compiled = _check_against_eager(fn, [a, column], [a, column])
    assert _drivers(compiled, np.dtype(dtype)) == {"group": 1}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_descent_step_in_place_is_one_loop_with_the_eager_bits(dtype):
    rng = np.random.default_rng(6)
    start = rng.standard_normal((9, 70)).astype(dtype)
    g = anb.tensor(rng.standard_normal((9, 70)).astype(dtype))

    def step(p, g):
        with anb.no_grad():
            p -= 0.01 * g
        return (anb.sum(p),)

    compiled = anb.compile(step)
    p_compiled, p_eager = anb.tensor(start.copy()), anb.tensor(start.copy())
    for _ in range(3):
        compiled(p_compiled, g)
        step(p_eager, g)
    np.testing.assert_array_equal(p_compiled.numpy(), p_eager.numpy())
    assert _drivers(compiled, np.dtype(dtype)) == {"scaled add": 1}


def test_a_product_read_again_keeps_the_group():
    rng = np.random.default_rng(7)
    a = anb.tensor(rng.standard_normal((9, 70)), requires_grad=True)
    b = anb.tensor(rng.standard_normal((9, 70)), requires_grad=True)

    def fn(a, b):
        product = 0.37 * b
        total = a - product
        return anb.sum(total), total, product  # the product is an output: it reaches memory

    compiled = _check_against_eager(fn, [a, b], [a, b])
    assert _drivers(compiled, np.dtype(np.float64)) == {"group": 1}


def test_a_new_fused_function_of_known_ops_compiles_nothing(chain_inputs):
    x, column, v = chain_inputs
    first = anb.compile(_chain)
    for _ in range(2):
        anb.grad(first(*chain_inputs)[0], x)

    def second(x, column, v):
        d = column * x - v
        return anb.sum(3.0 * (d * d) - 0.5 * x + v), d

    with numba_event.install_recorder("numba:compile") as recorded:
        compiled = anb.compile(second)
        for _ in range(3):
            anb.grad(compiled(*chain_inputs)[0], x)
    assert recorded.buffer == []
    assert _rows(compiled) == 2


def test_threads_replay_fused_programs_each_on_its_own_values():
    compiled = anb.compile(lambda x: (anb.sum(anb.tanh(x * 1.5 - 0.25) * x),))
    rng = np.random.default_rng(3)
    xs = [anb.tensor(rng.standard_normal(700), requires_grad=True) for _ in range(4)]
    compiled(xs[0])
    wrong = []

    def work(x):
        want = anb.grad(anb.sum(anb.tanh(x * 1.5 - 0.25) * x), x)[0].numpy()
        for _ in range(50):
            got = anb.grad(compiled(x)[0], x)[0].numpy()
            if not np.array_equal(got, want):
                wrong.append(got)

    threads = [threading.Thread(target=work, args=(x,)) for x in xs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong


def _copies(compiled):
    """The copy instructions of the compiled function's one program."""
    from autograd_nb.ops import _pointers
    from autograd_nb.replay import interpreter

    program = next(iter(compiled._programs.values())).program
    table = machine.sections(program.forward_table)
    copy = _pointers.entry_address(interpreter.copy_driver, np.dtype(np.float64))
    return sum(1 for entry in table.rows[:, machine.ENTRY].tolist()
               if entry != machine.ZERO and table.entries[entry] == copy)


@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("shape", [(3, 4), (40, 30)])
def test_in_place_updates_write_into_their_target(fuse, shape, monkeypatch):
    # ``p -= lr * g`` and ``q *= q`` (the target read by the op writing it) replay without a
    # copy and give the eager bits; ``r``'s new value is also returned through a second op,
    # and ``s``'s fresh value is read again after the write (kept: its copy stays).
    monkeypatch.setattr(config, "FUSE_REPLAY", fuse)
    rng = np.random.default_rng(4)
    start = [rng.standard_normal(shape) for _ in range(4)]

    def step(params, g):
        p, q, r, s = params
        with anb.no_grad():
            p -= 0.1 * g
            q *= q
            r += g
            fresh = s * 0.5
            s[...] = fresh
        return anb.sum(r * 2.0), fresh + 1.0

    g = anb.tensor(rng.standard_normal(shape))
    eager = [anb.tensor(a.copy()) for a in start]
    replayed = [anb.tensor(a.copy()) for a in start]
    compiled = anb.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        for _ in range(3):
            want, got = step(eager, g), compiled(replayed, g)
            for w, o in zip(want, got, strict=True):
                np.testing.assert_array_equal(o.numpy(), w.numpy())
            for e, r in zip(eager, replayed, strict=True):
                np.testing.assert_array_equal(r.numpy(), e.numpy())
    assert compiled.cache_info().traces == 1
    assert _copies(compiled) == 1  # ``s[...] = fresh`` only
