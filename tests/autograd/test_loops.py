"""anb.scan, fori_loop, while_loop and cond: JAX's signatures and semantics, gradients bit
for bit those of the Python loop (random bodies from hypothesis), finite differences,
checkpointed schedules against the plain one, errors, Ctrl-C, and inside anb.compile."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autograd_nb as anb
from tests.checks import check_gradients

#: The ops a random body is built from: (name, f(h, x, w) -> new h), all smooth and bounded
#: enough that a dozen steps stay finite.
OPS = [
    ("tanh", lambda h, x, w: anb.tanh(h * w + x)),
    ("sin", lambda h, x, w: anb.sin(h) + x * w),
    ("mix", lambda h, x, w: 0.5 * h + 0.25 * (x - w) * h),
    ("square", lambda h, x, w: 0.3 * anb.square(h) - x * w),
    ("exp", lambda h, x, w: anb.exp(-anb.square(h)) * w + x),
    ("sigmoid", lambda h, x, w: anb.sigmoid(h + w) * x),
]

programs = st.fixed_dictionaries({
    "ops": st.lists(st.integers(0, len(OPS) - 1), min_size=1, max_size=3),
    "length": st.integers(1, 12),
    "width": st.integers(1, 3),
    "seed": st.integers(0, 2**16),
})


def _body(ops, w):
    def body(carry, x):
        h, total = carry
        for k in ops:
            h = OPS[k][1](h, x, w)
        return (h, total + h.sum()), h * h

    return body


def _data(program):
    rng = np.random.default_rng(program["seed"])
    width, length = program["width"], program["length"]
    h0 = anb.tensor(rng.standard_normal(width), requires_grad=True)
    xs = anb.tensor(rng.standard_normal((length, width)), requires_grad=True)
    w = anb.tensor(rng.standard_normal(width), requires_grad=True)
    return h0, xs, w


def _python_scan(f, init, xs, reverse=False):
    carry, ys = init, [None] * len(xs)
    for i in (reversed(range(len(xs))) if reverse else range(len(xs))):
        carry, ys[i] = f(carry, xs[i])
    return carry, anb.stack(ys)


def _loss(carry, ys):
    h, total = carry
    return (ys * ys).sum() + h.sum() * total


def _same(got, expected):
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_array_equal(g.numpy(), e.numpy())


def _close(got, expected):
    """Gradients of a closure's tensor: a checkpointed scan sums the steps in another order."""
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-12, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(programs, st.booleans())
def test_scan_equals_python_loop(program, reverse):
    h0, xs, w = _data(program)
    body = _body(program["ops"], w)
    init = (h0, anb.tensor(0.0))
    carry, ys = anb.scan(body, init, xs, reverse=reverse)
    expected_carry, expected_ys = _python_scan(body, init, xs, reverse)
    _same([carry[0], carry[1], ys], [expected_carry[0], expected_carry[1], expected_ys])
    got = anb.grad(_loss(carry, ys), [h0, xs, w])
    _same(got, anb.grad(_loss(expected_carry, expected_ys), [h0, xs, w]))


@settings(max_examples=25, deadline=None)
@given(programs, st.booleans(), st.sampled_from([1, 2, 3, 5, "binomial"]))
def test_checkpointed_scan_equals_plain(program, reverse, schedule):
    h0, xs, w = _data(program)
    body = _body(program["ops"], w)
    init = (h0, anb.tensor(0.0))
    carry, ys = anb.scan(body, init, xs, reverse=reverse)
    plain = anb.grad(_loss(carry, ys), [h0, xs, w])
    carry_c, ys_c = anb.scan(body, init, xs, reverse=reverse, checkpoint=schedule)
    _same([carry_c[0], carry_c[1], ys_c], [carry[0], carry[1], ys])
    got = anb.grad(_loss(carry_c, ys_c), [h0, xs, w])
    _same(got[:2], plain[:2])
    _close(got[2:], plain[2:])


def test_long_binomial_schedule_equals_plain():
    program = {"ops": [0, 2], "length": 150, "width": 2, "seed": 7}
    h0, xs, w = _data(program)
    body = _body(program["ops"], w)
    init = (h0, anb.tensor(0.0))
    plain = anb.grad(_loss(*anb.scan(body, init, xs)), [h0, xs, w])
    for schedule in ("binomial", 7):
        got = anb.grad(_loss(*anb.scan(body, init, xs, checkpoint=schedule)), [h0, xs, w])
        _same(got[:2], plain[:2])
        _close(got[2:], plain[2:])


@pytest.mark.parametrize("schedule", [None, 2, "binomial"])
def test_scan_finite_differences(schedule):
    def rollout(h0, xs, w):
        carry, ys = anb.scan(_body([0, 3], w), (h0, anb.tensor(0.0)), xs, checkpoint=schedule)
        return ys * carry[1]

    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(2), rng.standard_normal((5, 2)), rng.standard_normal(2)]
    check_gradients(rollout, arrays, second_order=schedule != "binomial")


def test_scan_pytrees_length_and_none():
    state = {"a": anb.tensor([1.0, 2.0], requires_grad=True), "b": [anb.tensor(0.5)]}
    xs = (anb.tensor(np.arange(6.0).reshape(3, 2)), anb.tensor([1.0, 2.0, 3.0]))

    def body(carry, x):
        u, v = x
        new = {"a": carry["a"] * v + u, "b": [carry["b"][0] + v]}
        return new, {"u": u.sum() * carry["b"][0], "none": None}

    carry, ys = anb.scan(body, state, xs)
    assert set(carry) == {"a", "b"} and isinstance(carry["b"], list)
    assert ys["none"] is None and ys["u"].shape == (3,)
    counted, counts = anb.scan(lambda c, _: (c + 1, c), 0, length=4)
    assert counted.item() == 4 and counts.tolist() == [0, 1, 2, 3]
    assert counts.dtype == np.int64
    (g,) = anb.grad(ys["u"].sum() + carry["a"].sum(), state["a"])
    np.testing.assert_array_equal(g.numpy(), [6.0, 6.0])


def test_fori_loop_equals_python_loop():
    x = anb.tensor([0.3, -0.7], requires_grad=True)

    def body(i, carry):
        a, b = carry
        return anb.sin(a * b) + i * 0.1, b * x

    got = anb.fori_loop(2, 9, body, (x, anb.ones(2)))
    carry = (x, anb.ones(2))
    for i in range(2, 9):
        carry = body(i, carry)
    _same(got, carry)
    _same(anb.grad(got[0].sum() + got[1].sum(), x), anb.grad(carry[0].sum() + carry[1].sum(), x))
    assert anb.fori_loop(3, 3, body, x) is x  # an empty range gives the carry back
    assert anb.fori_loop(anb.tensor(0), anb.tensor(2), lambda i, c: c * 2.0, x).shape == (2,)


@settings(max_examples=20, deadline=None)
@given(st.floats(1.5, 40.0), st.floats(1.05, 2.0), st.integers(0, 2**16))
def test_while_loop_equals_python_loop(limit, factor, seed):
    x = anb.tensor(np.random.default_rng(seed).uniform(0.2, 1.0, 3), requires_grad=True)

    def cond(v):
        return v.sum() < limit

    def body(v):
        return v * factor + anb.sin(v) * 0.1

    got = anb.while_loop(cond, body, x)
    v = x
    while cond(v).item():
        v = body(v)
    _same([got], [v])
    if got is x:
        return
    _same(anb.grad((got * got).sum(), x), anb.grad((v * v).sum(), x))


def test_while_loop_finite_differences():
    def run(x):
        # The trip count (3 here) is piecewise constant in x: the gradient is that of the
        # steps taken.
        steps = anb.while_loop(lambda c: c[1] < 3, lambda c: (anb.tanh(c[0]) * 1.5, c[1] + 1),
                               (x, anb.tensor(0)))
        return steps[0]

    check_gradients(run, [np.array([0.2, -0.4, 0.9])])


def test_cond():
    x = anb.tensor(3.0, requires_grad=True)
    for value, expected in ((3.0, 6.0), (-3.0, -1.0)):
        x = anb.tensor(value, requires_grad=True)
        y = anb.cond(x > 0, lambda v: v * v, lambda v: -v, x)
        assert anb.grad(y, x)[0].item() == expected
    assert anb.cond(1, lambda: "yes", lambda: "no") == "yes"
    with pytest.raises(TypeError, match="boolean or integer scalar"):
        anb.cond(anb.tensor([True, False]), lambda: 1, lambda: 2)
    with pytest.raises(TypeError, match="boolean or integer scalar"):
        anb.cond(anb.tensor(0.5), lambda: 1, lambda: 2)


# -- errors ----------------------------------------------------------------------------------


def test_carry_shape_change_names_both():
    with pytest.raises(TypeError, match=r"carry\[1\] has shape \(2,\) and dtype float64 on "
                       r"input and shape \(3,\) and dtype float64 on output"):
        anb.scan(lambda c, x: ((c[0], anb.ones(3)), x), (anb.ones(1), anb.ones(2)),
                 anb.ones((2, 1)))
    with pytest.raises(TypeError, match="scan body function carry input and carry output must "
                       "have the same pytree structure"):
        anb.scan(lambda c, x: ((c, c), x), anb.ones(1), anb.ones((2, 1)))


def test_carry_dtype_change_names_both():
    with pytest.raises(TypeError, match=r"fori_loop body function carry.*carry has shape \(\) "
                       r"and dtype int64 on input and shape \(\) and dtype float64"):
        anb.fori_loop(0, 2, lambda i, c: c * 0.5, 1)
    with pytest.raises(TypeError, match=r"while_loop body.*carry\['v'\].*float32 on output"):
        anb.while_loop(lambda c: c["v"].sum() < 3.0, lambda c: {"v": c["v"].astype("float32")},
                       {"v": anb.zeros(2)})


def test_bad_arguments():
    with pytest.raises(ValueError, match="different leading axis sizes: 2, 3"):
        anb.scan(lambda c, x: (c, None), 0.0, (anb.ones(2), anb.ones(3)))
    with pytest.raises(ValueError, match="`length` argument of 4 which disagrees"):
        anb.scan(lambda c, x: (c, None), 0.0, anb.ones(3), length=4)
    with pytest.raises(ValueError, match="no values to scan over and `length` not provided"):
        anb.scan(lambda c, x: (c, None), 0.0)
    with pytest.raises(ValueError, match="checkpoint must be None, a positive int or"):
        anb.scan(lambda c, x: (c, None), 0.0, anb.ones(3), checkpoint="sqrt")
    with pytest.raises(ValueError, match="at least 1"):
        anb.scan(lambda c, x: (c, None), 0.0, anb.ones(3), checkpoint=0)
    with pytest.raises(TypeError, match="must return a pair"):
        anb.scan(lambda c, x: c, 0.0, anb.ones(3))
    with pytest.raises(TypeError, match="must return a boolean scalar"):
        anb.while_loop(lambda c: c, lambda c: c, anb.ones(2))
    with pytest.raises(TypeError, match="integer scalar"):
        anb.fori_loop(0.0, 3, lambda i, c: c, 1.0)


# -- Ctrl-C ----------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["body", "cond"])
def test_interrupted_while_loop_leaves_state_clean(where):
    x = anb.tensor([0.5, 1.5], requires_grad=True)
    before = x.numpy().copy()
    steps = []

    def cond(v):
        if where == "cond" and len(steps) == 50:
            raise KeyboardInterrupt
        return anb.tensor(True)  # never false

    def body(v):
        steps.append(1)
        if where == "body" and len(steps) == 50:
            raise KeyboardInterrupt
        return anb.sin(v) + x

    with pytest.raises(KeyboardInterrupt):
        anb.while_loop(cond, body, x)
    np.testing.assert_array_equal(x.numpy(), before)
    assert x.grad is None and x.grad_fn is None and anb.is_grad_enabled()
    (g,) = anb.grad(anb.while_loop(lambda v: v.sum() < 10.0, lambda v: v * 2.0, x).sum(), x)
    np.testing.assert_array_equal(g.numpy(), [8.0, 8.0])


# -- inside anb.compile ------------------------------------------------------------------------


def _compiled_matches_eager(loss, args, wrt, expect_warning=None):
    expected = loss(*args)
    expected_grads = anb.grad(expected, wrt)
    compiled = anb.compile(loss)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):  # the recording call, then replays
            out = compiled(*args)
            _same([out], [expected])
            _same(anb.grad(out, wrt), expected_grads)
    messages = [str(w.message) for w in caught if issubclass(w.category, anb.CompileWarning)]
    if expect_warning is None:
        assert not messages
    else:
        assert len(messages) == 1 and expect_warning in messages[0]


@settings(max_examples=10, deadline=None)
@given(programs)
def test_scan_and_fori_loop_inside_compile(program):
    h0, xs, w = _data(program)
    body = _body(program["ops"], w)

    def scanned(h0, xs):
        return _loss(*anb.scan(body, (h0, anb.tensor(0.0)), xs))

    def counted(h0):
        return anb.fori_loop(0, program["length"], lambda i, h: OPS[0][1](h, i * 0.1, w), h0).sum()

    _compiled_matches_eager(scanned, (h0, xs), [h0, xs, w])
    _compiled_matches_eager(counted, (h0,), [h0, w])


def test_while_loop_records_its_trip_count_and_checkpoint_runs_eagerly_inside_compile():
    x = anb.tensor([0.5, 0.25], requires_grad=True)

    def grown(x):
        return anb.while_loop(lambda v: v.sum() < 5.0, lambda v: v * 1.5 + x, x).sum()

    def checkpointed(x):
        return _loss(*anb.scan(_body([0], x), (x, anb.tensor(0.0)), anb.ones((6, 2)),
                               checkpoint=2))

    def chosen(x):
        return anb.cond(x.sum() > 0, lambda v: anb.sin(v) * v, lambda v: -v, x).sum()

    _compiled_matches_eager(grown, (x,), [x])  # (unrolled, guarded on each step's cond)
    _compiled_matches_eager(chosen, (x,), [x])  # (the branch taken, behind a guard)
    _compiled_matches_eager(chosen, (-x,), [x])
    _compiled_matches_eager(checkpointed, (x,), [x], expect_warning="anb.checkpoint")


def _graph_size(tensor):
    """The nodes a tensor's graph holds (what a backward would keep alive)."""
    seen, stack = set(), [tensor.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or isinstance(node, anb.Tensor) or id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(node.next_functions)
    return len(seen)


def test_checkpointed_scan_keeps_fewer_steps():
    w = anb.tensor([0.5, -0.5], requires_grad=True)
    init = anb.tensor([0.1, 0.2], requires_grad=True)

    def body(c, _):
        return anb.tanh(c * w + 0.1), None

    sizes = {
        schedule: _graph_size(anb.scan(body, init, length=400, checkpoint=schedule)[0])
        for schedule in (None, 20, "binomial")
    }
    assert sizes[None] >= 400 * 3  # every step's nodes
    assert sizes[20] <= 2 * (400 // 20)  # one checkpoint node per segment (and its output)
    assert sizes["binomial"] <= 2 * 8  # the top level's parts only


def test_scan_of_length_zero():
    init = anb.tensor(1.0, requires_grad=True)
    calls = []

    def body(c, x):
        calls.append(anb.is_grad_enabled())
        return c + x.sum(), {"a": c * x}

    carry, ys = anb.scan(body, init, anb.ones((0, 3)))
    assert carry is init and ys["a"].shape == (0, 3) and ys["a"].dtype == np.float64
    assert calls == [False]  # run once, to learn the shapes of ys, recording nothing
    assert anb.scan(lambda c, x: (c, None), 2.0, length=0)[1] is None
