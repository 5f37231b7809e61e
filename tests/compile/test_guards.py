"""Branches on traced values inside ``anb.compile``, recorded as guards: every call is checked
against fn run eagerly on the same values (outputs, gradients, the arguments it writes in
place), bit for bit, whichever path the call takes."""

import threading
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autograd_nb as anb
from autograd_nb import config
from autograd_nb.replay import CompileWarning


def _same(a, b):
    """Bit for bit: tensors (or nested tuples of them, or None) of one shape and dtype."""
    if isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
        return
    if a is None or b is None:
        assert a is None and b is None
        return
    x, y = np.asarray(a.numpy()), np.asarray(b.numpy())
    assert x.shape == y.shape and x.dtype == y.dtype
    assert x.tobytes() == y.tobytes(), (x, y)


@pytest.fixture
def no_compile_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        yield


def _leaf(values, dtype=np.float64):
    return anb.tensor(np.asarray(values, dtype=dtype), requires_grad=True)


def branchy(x):
    if x.sum() > 0:  # a guard
        return anb.tanh(x) * 2.0
    return anb.exp(x) - 1.0


def test_a_branch_taken_both_ways_across_calls(no_compile_warning):
    compiled = anb.compile(branchy)
    for values in ([1.0, 2.0], [1.0, 2.0], [-1.0, -2.0], [3.0, -1.0], [-4.0, 0.5], [0.0, 0.0]):
        x, x_eager = _leaf(values), _leaf(values)
        out, expected = compiled(x), branchy(x_eager)
        _same(out, expected)
        _same(anb.grad(out.sum(), x, retain_graph=True),
              anb.grad(expected.sum(), x_eager, retain_graph=True))
        rows = anb.tensor(np.eye(2))  # (the Jacobian, a batch of VJPs)
        _same(anb.grad(out, x, rows, is_grads_batched=True),
              anb.grad(expected, x_eager, rows, is_grads_batched=True))
    info = compiled.cache_info()
    assert (info.programs, info.eager, info.traces) == (2, 0, 2)
    assert info.hits == 4  # (6 calls, 2 of them recording one path each)


def test_a_direct_truth_and_a_comparison_of_each_dtype(no_compile_warning):
    def fn(x, k, flag):
        y = x * 2.0
        if y.sum():  # bool(t) of a float tensor: a guard on t != 0
            y = y + 1.0
        if k > 2:  # an int64 argument
            y = y * 3.0
        if x.sum() >= 0.1:  # float32 compares with 0.1 cast to float32, as NumPy does
            y = y - 1.0
        if flag:  # a bool argument: its byte is the flag
            y = y * 5.0
        return y

    for dtype in (np.float32, np.float64):
        compiled = anb.compile(fn)
        for v, n, f in ((0.1, 1, True), (0.0, 3, True), (0.1, 5, False), (-0.2, 0, True),
                        (0.1, 1, True), (0.0, 3, True), (0.1, 5, False)):
            x = anb.tensor(np.full(1, v, dtype=dtype))
            k, flag = anb.tensor(np.int64(n)), anb.tensor(f)
            _same(compiled(x, k, flag), fn(x, k, flag))
        assert compiled.cache_info().traces == 4 and compiled.cache_info().hits == 3


def test_paths_are_bounded_then_the_signature_runs_eagerly(monkeypatch):
    monkeypatch.setattr(config, "COMPILE_MAX_PATHS", 2)

    def three_ways(x):
        if x.sum() > 1.0:
            return x * 2.0
        if x.sum() > 0.0:
            return x * 3.0
        return x * 4.0

    compiled = anb.compile(three_ways)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        for v in (2.0, 0.5, 2.0, 0.5):
            x = _leaf([v])
            _same(compiled(x), three_ways(x))
    assert compiled.cache_info().programs == 2
    with pytest.warns(CompileWarning, match=r"more than 2 paths.*COMPILE_MAX_PATHS.*"
                                            r"test_guards.py:\d+"):
        x = _leaf([-1.0])
        _same(compiled(x), three_ways(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)  # (warned once)
        for v in (2.0, -1.0, 0.5):
            x = _leaf([v])
            out = compiled(x)
            _same(out, three_ways(x))
            assert out.grad_fn.name != "ReplayOutputBackward"  # (eager now)
    assert compiled.cache_info().eager == 1


def test_strict_raises_at_a_branch_as_before():
    strict = anb.compile(branchy, strict=True)
    with pytest.raises(RuntimeError, match=r"strict=True.*comparison.*test_guards.py"):
        strict(_leaf([1.0]))

    def truth(x):
        return x * 2.0 if x else x

    with pytest.raises(RuntimeError, match=r"strict=True.*bool\(tensor\)"):
        anb.compile(truth, strict=True)(_leaf([1.0]))


@pytest.mark.parametrize("convert", ["float", "item", "numpy"])
def test_values_handed_to_python_still_run_eagerly(convert):
    def fn(x):
        s = anb.sum(x)
        value = {"float": float, "item": lambda t: t.item(),
                 "numpy": lambda t: t.numpy()}[convert](s)
        return x * 2.0 if value > 0 else x * 3.0

    compiled = anb.compile(fn)
    what = {"float": r"float\(tensor\)", "item": r"tensor\.item\(\)",
            "numpy": r"tensor\.numpy\(\)"}[convert]
    with pytest.warns(CompileWarning, match=rf"{what}.*test_guards.py:\d+"):
        compiled(_leaf([1.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        for v in (-1.0, 1.0):
            x = _leaf([v])
            _same(compiled(x), fn(x))
    assert compiled.cache_info().eager == 1


def fixed_point(x, a):
    """``cos``'s fixed point near ``x`` scaled by ``a``: a Python ``while`` on an error
    estimate (one guard per step: a path per trip count)."""
    err = anb.abs(anb.cos(a * x) - x).sum()
    while err > 1e-6:
        x = anb.cos(a * x)
        err = anb.abs(anb.cos(a * x) - x).sum()
    return x


def test_a_while_loop_on_an_error_estimate(no_compile_warning):
    compiled = anb.compile(fixed_point)
    for start, scale in ((0.5, 1.0), (0.5, 1.0), (0.1, 0.7), (0.5, 1.0), (0.9, 0.3)):
        x, a = anb.tensor([start]), _leaf([scale])
        a_eager = _leaf([scale])
        out, expected = compiled(x, a), fixed_point(x, a_eager)
        _same(out, expected)
        _same(anb.grad(out.sum(), a), anb.grad(expected.sum(), a_eager))
    assert compiled.cache_info().traces == 3 and compiled.cache_info().hits == 2


def test_anb_while_loop_and_cond_are_guarded(no_compile_warning):
    def newton(x0, a):
        return anb.while_loop(lambda c: anb.abs(c * c - a) > 1e-9,
                              lambda c: 0.5 * (c + a / c), x0)

    def chosen(x):
        return anb.cond(x.sum() > 0, lambda v: v * v, lambda v: -anb.sin(v), x)

    for fn, cases in ((newton, (2.0, 2.0, 9.0, 2.0)), (chosen, (1.0, -1.0, 2.0, -3.0))):
        compiled = anb.compile(fn)
        for v in cases:
            x, x_eager = _leaf(v), _leaf(v)  # (while_loop's cond gives a scalar)
            args = (anb.tensor(1.0), x) if fn is newton else (x,)
            eager_args = (anb.tensor(1.0), x_eager) if fn is newton else (x_eager,)
            out, expected = compiled(*args), fn(*eager_args)
            _same(out, expected)
            _same(anb.grad(out.sum(), x), anb.grad(expected.sum(), x_eager))
        assert compiled.cache_info().traces == 2
    # An integer pred: nonzero is true, a guard on it != 0.
    counted = anb.compile(lambda k, x: anb.cond(k, lambda v: v * 2.0, lambda v: v, x))
    x = anb.tensor([1.5])
    for n in (0, 3, 0, -1):
        _same(counted(anb.tensor(np.int64(n)), x), x * 2.0 if n else x)
    assert counted.cache_info().traces == 2


def step(p, g):
    """An update written in place around a guard: before it, and on one path after it."""
    with anb.no_grad():
        p -= 0.5 * g
    if p.sum() > 0:
        with anb.no_grad():
            p *= 0.5
        return p * 3.0
    return p - 1.0


def test_in_place_writes_around_a_guard_are_never_half_done(no_compile_warning):
    compiled = anb.compile(step)
    p, p_eager = anb.tensor([1.0, 2.0]), anb.tensor([1.0, 2.0])
    for g in ([1.0, 1.0], [1.0, 1.0], [4.0, 4.0], [-6.0, -6.0], [1.0, 1.0], [9.0, 9.0],
              [-20.0, -20.0]):
        g = anb.tensor(g)
        out, expected = compiled(p, g), step(p_eager, g)
        _same(out, expected)
        _same(p, p_eager)  # (written once, along the path taken)
    assert compiled.cache_info().traces == 2 and compiled.cache_info().hits >= 3


def test_in_place_writes_and_gradients_around_a_guard(no_compile_warning):
    def fn(x, state):
        y = anb.sin(x) + state  # (state is not saved: written below, as eager allows)
        with anb.no_grad():
            state -= 0.5
        if y.sum() > 0:
            return y * y
        return -y

    compiled = anb.compile(fn)
    state, state_eager = anb.tensor([0.5]), anb.tensor([0.5])
    for v in (1.0, 1.0, -1.0, 2.0, -2.0, -2.0):
        x, x_eager = _leaf([v]), _leaf([v])
        out, expected = compiled(x, state), fn(x_eager, state_eager)
        _same(out, expected)
        _same(state, state_eager)
        out.sum().backward()
        expected.sum().backward()
        _same(x.grad, x_eager.grad)
    assert compiled.cache_info().traces == 2


def test_second_order_and_inner_gradients_through_guarded_programs(no_compile_warning):
    def inner(x):
        energy = (x * x * x).sum()
        (force,) = anb.grad(energy, x)
        if force.sum() > 1.0:
            return force * 2.0
        return force - 1.0

    compiled, compiled_branchy = anb.compile(inner), anb.compile(branchy)
    for v in (1.0, 0.1, 1.0, 0.2):
        x, x_eager = _leaf([v, v]), _leaf([v, v])
        _same(compiled(x), inner(x_eager))
        out, expected = compiled_branchy(x), branchy(x_eager)
        (g,) = anb.grad(out.sum(), x, create_graph=True)
        (g_eager,) = anb.grad(expected.sum(), x_eager, create_graph=True)
        _same(g, g_eager)
        _same(anb.grad(g.sum(), x), anb.grad(g_eager.sum(), x_eager))
    assert compiled.cache_info().traces == 2


def test_a_comparison_result_used_as_a_value(no_compile_warning):
    def fn(x):
        positive = x.sum() > 0  # recorded: read by where, handed out, branched on
        y = anb.where(positive, x, -x)
        if positive:
            y = y * 2.0
        return y, positive

    compiled = anb.compile(fn)
    for v in (1.0, -1.0, 1.0, -2.0):
        x, x_eager = _leaf([v, 0.5]), _leaf([v, 0.5])
        (y, positive), (y_eager, positive_eager) = compiled(x), fn(x_eager)
        _same((y, positive), (y_eager, positive_eager))
        _same(anb.grad(y.sum(), x), anb.grad(y_eager.sum(), x_eager))
    assert compiled.cache_info().traces == 2


def test_a_guard_on_a_closure_tensor_changed_in_place(no_compile_warning):
    threshold = anb.tensor([0.0])

    def fn(x):
        return x * 2.0 if x.sum() > threshold else x * 3.0

    compiled = anb.compile(fn)
    x = anb.tensor([1.0])
    for t in (0.0, 5.0, 0.0, 5.0):
        with anb.no_grad():
            threshold[...] = t
        _same(compiled(x), fn(x))
    assert compiled.cache_info().traces == 2


def test_threads_replaying_other_paths_do_not_disturb_each_other(no_compile_warning):
    compiled = anb.compile(branchy)
    values = {0: [1.0, 2.0], 1: [-1.0, -2.0]}
    expected = {k: branchy(anb.tensor(v)) for k, v in values.items()}
    barrier = threading.Barrier(2)
    failures = []

    def run(k):
        barrier.wait()
        for _ in range(40):
            out = compiled(anb.tensor(values[k]))
            if out.numpy().tobytes() != expected[k].numpy().tobytes():
                failures.append((k, out.numpy()))

    threads = [threading.Thread(target=run, args=(k,)) for k in values]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    assert compiled.cache_info().programs == 2


@settings(max_examples=10, deadline=None)
@given(st.lists(st.floats(-3.0, 3.0), min_size=1, max_size=8))
def test_any_sequence_of_calls_matches_eager(starts):
    compiled = anb.compile(step)
    p, p_eager = anb.tensor([1.0, -1.0]), anb.tensor([1.0, -1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        for v in starts:
            g = anb.tensor([v, v])
            _same(compiled(p, g), step(p_eager, g))
            _same(p, p_eager)


def test_tensors_used_as_an_index_are_values_read():
    # An index is an attribute of the recorded op, frozen there: a traced tensor (a
    # comparison's result, an integer argument) used as one makes the signature eager.
    def masked(x):
        return x[x.sum() > 0] * 2.0

    def gathered(x, i):
        return x[i] * 2.0

    for fn, calls in ((masked, [(anb.tensor([1.0, 2.0]),), (anb.tensor([-1.0, -2.0]),)]),
                      (gathered, [(anb.tensor([1.0, 2.0, 3.0]), anb.tensor([0, 1])),
                                  (anb.tensor([1.0, 2.0, 3.0]), anb.tensor([2, 2]))])):
        compiled = anb.compile(fn)
        with pytest.warns(CompileWarning, match=r"a tensor used as an index"):
            _same(compiled(*calls[0]), fn(*calls[0]))
        with warnings.catch_warnings():
            warnings.simplefilter("error", CompileWarning)
            for args in calls[::-1]:
                _same(compiled(*args), fn(*args))
        assert compiled.cache_info().eager == 1


def test_a_guard_reads_a_value_made_in_a_fused_group(monkeypatch, no_compile_warning):
    monkeypatch.setattr(config, "REPLAY_FUSION_MIN_ELEMENTS", 1)  # (a one-element chain fuses)

    def fn(x, p):
        y = anb.tanh(x * 2.0) + 1.0  # a fused group whose value the guard reads
        with anb.no_grad():
            p -= 0.25 * y  # (folded: written by the op itself)
        if y > 1.0:
            return anb.sin(y) * x
        return anb.cos(y) * x

    compiled = anb.compile(fn)
    p, p_eager = anb.tensor(0.0), anb.tensor(0.0)
    for v in (0.5, 0.5, -0.5, 0.3, -0.2, -0.2):
        x, x_eager = _leaf(v), _leaf(v)
        out, expected = compiled(x, p), fn(x_eager, p_eager)
        _same(out, expected)
        _same(p, p_eager)
        _same(anb.grad(out, x), anb.grad(expected, x_eager))
    assert compiled.cache_info().traces == 2
