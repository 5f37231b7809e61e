"""``anb.scan`` and ``anb.fori_loop`` inside ``anb.compile``: the body recorded once (the
program's tables do not grow with the trip count), outputs and gradients bit for bit those of
eager execution (autograd_nb/replay/loops.py)."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autograd_nb as anb
from autograd_nb.engine import machine
from autograd_nb.ops import _pointers
from autograd_nb.replay import loops

D = 3

#: Body steps: ``(name, step(h, x, w, m))`` with ``w`` a vector and ``m`` a matrix parameter.
STEPS = [
    ("tanh", lambda h, x, w, m: anb.tanh(h * w + x)),
    ("matmul", lambda h, x, w, m: h @ m + x),
    ("sin", lambda h, x, w, m: anb.sin(h) * w - x * 0.5),
    ("square", lambda h, x, w, m: h * h * 0.25 + x * w),
    ("sigmoid", lambda h, x, w, m: anb.sigmoid(h @ m) * w),
]

programs = st.fixed_dictionaries({
    "steps": st.lists(st.integers(0, len(STEPS) - 1), min_size=1, max_size=3),
    "length": st.sampled_from([1, 2, 9]),
    "reverse": st.booleans(),
    "seed": st.integers(0, 2**16),
    "wrt": st.sampled_from(["all", "params", "xs"]),
})


def _data(seed, length):
    rng = np.random.default_rng(seed)
    h0 = anb.tensor(rng.normal(size=D), requires_grad=True)
    xs = anb.tensor(rng.normal(size=(length, D)), requires_grad=True)
    w = anb.tensor(rng.normal(size=D), requires_grad=True)
    m = anb.tensor(rng.normal(size=(D, D)) * 0.5, requires_grad=True)
    return h0, xs, w, m


def _body(steps, w, m):
    def body(carry, x):
        h, total = carry
        for s in steps:
            h = STEPS[s][1](h, x, w, m)
        return (h, total + h.sum()), anb.cos(h) * w
    return body


def _program(compiled):
    (entry,) = compiled._programs.values()
    return entry.program


def _loops_in(program):
    """How many rows of the program's forward table run a recorded loop."""
    sections = machine.sections(program.forward_table)
    entry = _pointers.entry_address(loops.forward_driver, np.dtype(np.float64))
    numbers = np.flatnonzero(sections.entries == entry)
    return int(np.isin(sections.rows[:, machine.ENTRY], numbers).sum())


def _rows(table):
    return machine.sections(table).rows.shape[0]


def _same(actual, expected):
    for a, e in zip(actual, expected, strict=True):
        assert a.shape == e.shape and a.dtype == e.dtype
        assert np.array_equal(a.numpy(), e.numpy()), (a, e)


def _check(fn, args, wrt, calls=3):
    """Compiled against eager, bit for bit: values and the gradients with respect to
    ``wrt``, at the recording call and at replays; no CompileWarning (nothing ran
    eagerly)."""
    expected = fn(*args)
    expected_grads = _grads(expected, wrt)
    compiled = anb.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", anb.CompileWarning)
        for _ in range(calls):
            out = compiled(*args)
            _same([out], [expected])
            _same(_grads(out, wrt), expected_grads)
    return compiled


def _grads(out, wrt):
    return anb.grad(out, wrt, allow_unused=True, materialize_grads=True)


@settings(max_examples=12, deadline=None)
@given(programs)
def test_random_scans_compiled_match_eager_bit_for_bit(program):
    h0, xs, w, m = _data(program["seed"], program["length"])
    body = _body(program["steps"], w, m)

    def loss(h0, xs):
        (h, total), ys = anb.scan(body, (h0, anb.tensor(0.0)), xs, reverse=program["reverse"])
        return (h * h).sum() + total * 0.5 + (ys * ys).sum()

    wrt = {"all": [h0, xs, w, m], "params": [w, m], "xs": [xs]}[program["wrt"]]
    assert _loops_in(_program(_check(loss, (h0, xs), wrt))) == 1


def test_the_tables_do_not_grow_with_the_trip_count():
    """One row runs the whole loop: the forward and backward tables of 2 and 40 trips have
    the same rows."""
    sizes = []
    for length in (2, 40):
        h0, xs, w, m = _data(0, length)
        body = _body([0, 1], w, m)

        def loss(h0, xs, body=body):
            (h, total), ys = anb.scan(body, (h0, anb.tensor(0.0)), xs)
            return h.sum() + total + ys.sum()

        program = _program(_check(loss, (h0, xs), [h0, xs, w, m], calls=2))
        backward = [entry[0].table for entry in program.backward_outputs.values()]
        sizes.append((_rows(program.forward_table), [_rows(t) for t in backward]))
    assert sizes[0] == sizes[1]


def test_the_loop_values_and_outputs_without_grad():
    h0, xs, w, m = _data(1, 5)
    body = _body([0, 4], w, m)

    def rollout(h0, xs):
        return anb.scan(body, (h0, anb.tensor(0.0)), xs)

    (h, total), ys = rollout(h0, xs)
    compiled = anb.compile(rollout)
    for _ in range(2):
        (hc, totalc), ysc = compiled(h0, xs)
        _same([hc, totalc, ysc], [h, total, ys])
    with anb.no_grad():
        (hn, totaln), ysn = compiled(h0, xs)
        assert not hn.requires_grad and not ysn.requires_grad
    _same([hn, totaln, ysn], [h, total, ys])


def test_fori_loop_recorded_once_and_backward_into_grad():
    w = anb.tensor([0.5, -1.0, 0.25], requires_grad=True)

    def make(length):
        def run(h0):
            return anb.fori_loop(0, length, lambda i, h: anb.tanh(h * w + 0.1), h0).sum()
        return run

    rows = []
    for length in (3, 30):
        h0 = anb.tensor([0.1, 0.2, 0.3], requires_grad=True)
        compiled = _check(make(length), (h0,), [h0, w])
        rows.append(_rows(_program(compiled).forward_table))
        assert _loops_in(_program(compiled)) == 1
        expected = anb.grad(make(length)(h0), [h0, w])
        w.grad = h0.grad = None
        compiled(h0).backward()
        _same([h0.grad, w.grad], expected)
        w.grad = None
    assert rows[0] == rows[1]


def test_fori_loop_whose_body_reads_i_unrolls_and_matches():
    """A body using ``i`` records other tables for another ``i``: it unrolls (correct,
    one copy per trip)."""
    w = anb.tensor([0.5, -1.0], requires_grad=True)
    rows = []
    for length in (2, 4):
        def run(h0, length=length):
            return anb.fori_loop(0, length, lambda i, h: h * w + i * 0.5, h0).sum()

        h0 = anb.tensor([1.0, 2.0], requires_grad=True)
        program = _program(_check(run, (h0,), [h0, w]))
        assert _loops_in(program) == 0
        rows.append(_rows(program.forward_table))
    assert rows[0] < rows[1]


def test_scan_without_xs_and_a_closure_intermediate():
    """``length`` without ``xs``, ``y = None``, and a closure value computed in fn (its
    gradient flows on to the parameter it came from)."""
    w = anb.tensor([0.3, 0.7, -0.2], requires_grad=True)

    def loss(x0):
        scale = w * 2.0
        (x, v), ys = anb.scan(lambda c, _: ((c[0] + 0.1 * c[1], c[1] - 0.1 * c[0] * scale),
                                            None), (x0, anb.zeros(3)), length=12)
        assert ys is None
        return (x * x).sum() + (v * v).sum()

    compiled = _check(loss, (anb.tensor([1.0, -0.5, 0.25], requires_grad=True),), [w],
                      calls=2)
    assert _loops_in(_program(compiled)) == 1


def test_a_carry_changing_dtype_raises_inside_compile_too():
    compiled = anb.compile(lambda h: anb.scan(lambda c, x: (c > 0, c), h, length=2))
    with pytest.raises(TypeError, match="float64.*bool"):
        compiled(anb.tensor([1.0, 2.0]))


@pytest.mark.parametrize("compiled_backward", [True, False])
def test_a_recorded_loop_in_a_signature_that_then_runs_eagerly(compiled_backward, monkeypatch):
    """A value read after the loop makes the signature eager: the recording call's result
    holds the loop's node, whose VJP (the compiled executor's row, or the Python walk's
    call) gives eager's gradients."""
    monkeypatch.setattr(anb.config, "COMPILED_BACKWARD", compiled_backward)
    h0, xs, w, m = _data(3, 4)
    body = _body([0, 1], w, m)

    def loss(h0, xs):
        (h, total), ys = anb.scan(body, (h0, anb.tensor(0.0)), xs)
        out = (h * h).sum() + total + ys.sum()
        return out * 2.0 if float(out) > 0 else out

    expected = loss(h0, xs)
    wrt = [h0, xs, w, m]
    with pytest.warns(anb.CompileWarning, match="reached Python"):
        out = anb.compile(loss)(h0, xs)
    assert _has_loop_node(out)
    _same([out], [expected])
    _same(anb.grad(out, wrt, retain_graph=True), anb.grad(expected, wrt, retain_graph=True))
    _same(anb.grad(out, [w]), anb.grad(expected, [w]))  # (one input: its VJP alone)


def _has_loop_node(tensor):
    stack, seen = [tensor._node], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen or not hasattr(node, "edges"):
            continue
        seen.add(id(node))
        if isinstance(node.op, loops.Loop):
            return True
        stack.extend(node.edges)
    return False


def test_a_scan_inside_a_scan_body_is_recorded_once_too():
    h0, xs, w, m = _data(5, 5)
    xss = anb.tensor(np.random.default_rng(5).normal(size=(4, 5, D)), requires_grad=True)

    def inner(c, x):
        return anb.tanh(c @ m + x), c * x

    def outer(c, xs):
        c2, ys = anb.scan(inner, c, xs)
        return c2 * w, ys.sum()

    def loss(h0, xss):
        c, ys = anb.scan(outer, h0, xss)
        return (c * c).sum() + ys.sum()

    program = _program(_check(loss, (h0, xss), [h0, xss, w, m]))
    assert _loops_in(program) == 1  # (the inner loop is a row of the outer body's table)


def test_pytree_xs_and_ys_of_two_shapes_reversed():
    rng = np.random.default_rng(1)
    w = anb.tensor(rng.normal(size=D), requires_grad=True)

    def body(c, x):
        a = anb.tanh(c["h"] * w + x["u"]) - x["v"]
        return {"h": a}, (a * 2.0, anb.sin(a).sum())

    def loss(h0, u, v):
        c, (y1, y2) = anb.scan(body, {"h": h0}, {"u": u, "v": v}, reverse=True)
        return (c["h"] * c["h"]).sum() + (y1 * y1).sum() + y2.sum()

    h0 = anb.tensor(rng.normal(size=D), requires_grad=True)
    u = anb.tensor(rng.normal(size=(6, D)), requires_grad=True)
    v = anb.tensor(rng.normal(size=(6, D)))
    assert _loops_in(_program(_check(loss, (h0, u, v), [h0, u, w]))) == 1


def test_a_y_that_is_the_carry_unrolls_and_matches():
    """``return c, c``: the loop unrolls (its gradient's sum order could not be eager's)."""
    w = anb.tensor([0.5, -1.0], requires_grad=True)

    def loss(h0, xs):
        h, ys = anb.scan(lambda c, x: (lambda n: (n, n))(anb.tanh(c * w + x)), h0, xs)
        return h.sum() + (ys * ys).sum()

    h0 = anb.tensor([0.1, 0.2], requires_grad=True)
    xs = anb.tensor(np.linspace(-1.0, 1.0, 8).reshape(4, 2), requires_grad=True)
    assert _loops_in(_program(_check(loss, (h0, xs), [h0, xs, w]))) == 0
