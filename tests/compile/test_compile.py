"""``autograd_nb.compile``: replayed programs against eager runs of the same function.

Every check compares a replay (the second call of a signature and later) with fn run eagerly
on the same values: outputs and gradients bit for bit.
"""

import collections
import gc
import threading
import tracemalloc
import warnings

import numba.core.event as numba_event
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

import autograd_nb as anb
from autograd_nb.replay import CompileWarning

# -- random programs -------------------------------------------------------------------------

UNARY = ("sin", "tanh", "exp", "square", "sigmoid", "softplus", "cos")
BINARY = ("add", "subtract", "multiply", "maximum")
SHAPE = (3, 4)


def _run_program(steps, xs, w):
    """Apply ``steps`` (op name, operand indices) to the values ``xs``; sum of the last."""
    values = list(xs)
    for name, i, j in steps:
        a, b = values[i % len(values)], values[j % len(values)]
        if name in UNARY:
            values.append(getattr(anb, name)(a * 0.5))
        elif name in BINARY:
            values.append(getattr(anb, name)(a, b))
        elif name == "divide":
            values.append(a / (anb.exp(b) + 1.0))
        elif name == "sum_rows":
            values.append(a - anb.sum(a, axis=0, keepdims=True) * 0.1)
        elif name == "mean_cols":
            values.append(a + anb.mean(b, axis=1, keepdims=True))
        elif name == "matmul":
            values.append(anb.tanh(a @ w))
        elif name == "reshape":
            values.append(anb.reshape(anb.reshape(a, (4, 3)) * 2.0, SHAPE))
        elif name == "flip":
            values.append(a[::-1] + b[:, ::-1])
        elif name == "concat":
            values.append(anb.concatenate([a[:1], b[1:]], axis=0))
        elif name == "transpose":
            values.append(anb.transpose(anb.transpose(a) * 0.5))
    return anb.sum(values[-1]), values[-1]


STEP = st.tuples(
    st.sampled_from(UNARY + BINARY + ("divide", "sum_rows", "mean_cols", "matmul", "reshape",
                                      "flip", "concat", "transpose")),
    st.integers(0, 50), st.integers(0, 50),
)


def _leaves(seed, dtype="float64"):
    rng = np.random.default_rng(seed)
    return [anb.tensor(rng.uniform(-1, 1, SHAPE).astype(dtype), requires_grad=True)
            for _ in range(2)]


@settings(max_examples=25, deadline=None)
@given(steps=st.lists(STEP, min_size=1, max_size=12), seed=st.integers(0, 2**16))
def test_random_programs_replay_the_eager_bits(steps, seed):
    xs = _leaves(seed)
    w = anb.tensor(np.random.default_rng(seed + 1).uniform(-1, 1, (4, 4)))

    def fn(a, b):
        return _run_program(steps, (a, b), w)

    compiled = anb.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        compiled(*xs)  # records
        for _ in range(2):
            got_loss, got_last = compiled(*xs)
            want_loss, want_last = fn(*xs)
            np.testing.assert_array_equal(got_last.numpy(), want_last.numpy())
            assert got_loss.item() == want_loss.item()
            got = anb.grad(got_loss, xs, allow_unused=True, materialize_grads=True)
            want = anb.grad(want_loss, xs, allow_unused=True, materialize_grads=True)
            for g, e in zip(got, want):
                np.testing.assert_array_equal(g.numpy(), e.numpy())
    info = compiled.cache_info()
    assert (info.programs, info.traces, info.hits) == (1, 1, 2)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_backward_accumulates_into_leaves_and_closure_parameters(dtype):
    xs = _leaves(3, dtype)
    w = anb.tensor(np.eye(4, dtype=dtype) * 0.5, requires_grad=True)

    def fn(a, b):
        return anb.sum(anb.tanh(a @ w) * b)

    compiled = anb.compile(fn)
    compiled(*xs)
    for f in (fn, compiled):
        for t in (*xs, w):
            t.grad = None
        f(*xs).backward()
        if f is fn:
            want = [t.grad.numpy().copy() for t in (*xs, w)]
    for t, e in zip((*xs, w), want):
        np.testing.assert_array_equal(t.grad.numpy(), e)


# -- torch's semantics on replayed outputs --------------------------------------------------


def _compiled_pair():
    x = anb.tensor(np.linspace(-1.0, 1.0, 5), requires_grad=True)
    unused = anb.tensor(np.ones(5), requires_grad=True)

    @anb.compile
    def fn(x, unused):
        return {"y": anb.sin(x) * x, "total": [anb.sum(anb.exp(x))]}

    fn(x, unused)
    return fn, x, unused


def test_outputs_keep_structure_and_torch_errors():
    fn, x, unused = _compiled_pair()
    out = fn(x, unused)
    assert set(out) == {"y", "total"} and isinstance(out["total"], list)
    y = out["y"]
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar"):
        anb.grad(y, x)
    with pytest.raises(RuntimeError) as error:
        anb.grad(y, x, grad_outputs=anb.ones(3))
    assert "(3,)" in str(error.value) and "(5,)" in str(error.value)
    with pytest.raises(RuntimeError, match="appears to not have been used"):
        anb.grad(anb.sum(y), [x, unused])
    (g_unused,) = anb.grad(anb.sum(fn(x, unused)["y"]), unused, allow_unused=True)
    assert g_unused is None
    (g_zero,) = anb.grad(anb.sum(fn(x, unused)["y"]), unused, materialize_grads=True)
    np.testing.assert_array_equal(g_zero.numpy(), np.zeros(5))


class _Pair(collections.namedtuple("_Pair", "a b")):
    pass


class _Items(list):
    pass


@pytest.mark.parametrize("args, kwargs", [
    ((1, 2.0, "x"), {}),
    ((), {}),
    ((1, (2, 3)), {}),
    (([1, {"k": 2}],), {}),
    ((_Pair(1, 2), _Items([3, 4])), {}),
    ((1,), {"scale": 2}),
])
def test_the_flat_call_path_gives_flattens_leaves_and_structure(args, kwargs):
    # (``flatten_call``'s shortcut for positional arguments that are no containers, against
    # the general ``flatten``; and ``unflatten`` back, the flat tuple's shortcut included)
    from autograd_nb.replay import function

    leaves, structure = function.flatten_call(args, kwargs)
    assert (leaves, structure) == function.flatten((args, kwargs))
    assert function.unflatten(structure, leaves) == (args, kwargs)
    flat_leaves, flat = function.flatten(args)
    assert function.unflatten(flat, flat_leaves) == args


def test_freed_graph_and_retain_graph():
    fn, x, unused = _compiled_pair()
    total = fn(x, unused)["total"][0]
    (first,) = anb.grad(total, x, retain_graph=True)
    (second,) = anb.grad(total, x)
    np.testing.assert_array_equal(first.numpy(), second.numpy())
    np.testing.assert_allclose(first.numpy(), np.exp(x.numpy()))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        anb.grad(total, x)


def test_in_place_change_of_a_saved_input_raises_as_eager():
    fn, x, unused = _compiled_pair()
    y = fn(x, unused)["y"]
    with anb.no_grad():
        x += 1.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        anb.grad(anb.sum(y), x)


def test_batched_and_second_order_gradients():
    fn, x, unused = _compiled_pair()
    y = fn(x, unused)["y"]
    eager_y = anb.sin(x) * x
    vs = anb.tensor(np.eye(5))
    (jac,) = anb.grad(y, x, grad_outputs=vs, is_grads_batched=True, retain_graph=True)
    (want,) = anb.grad(eager_y, x, grad_outputs=vs, is_grads_batched=True, retain_graph=True)
    np.testing.assert_array_equal(jac.numpy(), want.numpy())
    (g,) = anb.grad(anb.sum(y), x, create_graph=True)
    (gg,) = anb.grad(anb.sum(g), x)
    (eg,) = anb.grad(anb.sum(eager_y), x, create_graph=True)
    (egg,) = anb.grad(anb.sum(eg), x)
    np.testing.assert_allclose(gg.numpy(), egg.numpy(), rtol=1e-12, atol=1e-12)
    assert g.grad_fn is not None


# -- guards ------------------------------------------------------------------------------------

SCALE = anb.tensor(np.full(4, 2.0))


def _scaled(x):
    return anb.sum(x * SCALE)


def test_each_guard_records_again():
    compiled = anb.compile(lambda x, k: anb.sum(x * k))
    x = anb.tensor(np.ones(4), requires_grad=True)
    compiled(x, 2.0)
    compiled(x, 2.0)
    assert compiled.cache_info().traces == 1
    calls = [
        (anb.tensor(np.ones(5), requires_grad=True), 2.0),  # shape
        (anb.tensor(np.ones(4, dtype=np.float32), requires_grad=True), 2.0),  # dtype
        (anb.tensor(np.ones(4)), 2.0),  # requires_grad
        (x, 3.0),  # a non-tensor argument's value
    ]
    for i, args in enumerate(calls):
        assert compiled(*args).item() == pytest.approx(float(np.sum(args[0].numpy()) * args[1]))
        assert compiled.cache_info().traces == 2 + i
    with anb.no_grad():
        out = compiled(x, 2.0)
    assert out.grad_fn is None and compiled.cache_info().traces == 6
    with pytest.raises(TypeError, match="not hashable"):
        compiled(x, np.ones(4))


def test_captured_globals_and_closures_are_read_at_every_call():
    global SCALE
    compiled = anb.compile(_scaled)
    x = anb.tensor(np.ones(4), requires_grad=True)
    compiled(x)
    assert compiled(x).item() == 8.0
    with anb.no_grad():
        SCALE *= 2.0  # updated in place: seen without recording again
    assert compiled(x).item() == 16.0 and compiled.cache_info().traces == 1
    old = SCALE
    try:
        SCALE = anb.tensor(np.full(4, -1.0))  # rebound: a guard records again
        assert compiled(x).item() == -4.0 and compiled.cache_info().traces == 2
    finally:
        SCALE = old

    w = anb.tensor(np.full(4, 3.0), requires_grad=True)
    closure = anb.compile(lambda x: anb.sum(x * w))
    closure(x)
    assert closure(x).item() == 12.0
    w = anb.tensor(np.full(4, 5.0), requires_grad=True)  # the cell now holds another tensor
    assert closure(x).item() == 20.0 and closure.cache_info().traces == 2


def test_value_dependent_python_warns_once_or_raises_under_strict():
    def fn(x):
        if float(anb.sum(x)) > 0:  # a branch on a traced value
            return x * 2.0
        return x * 3.0

    x = anb.tensor(np.ones(3), requires_grad=True)
    compiled = anb.compile(fn)
    with pytest.warns(CompileWarning, match=r"float\(tensor\).*test_compile.py:\d+"):
        compiled(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        negative = anb.tensor(-np.ones(3), requires_grad=True)  # the same signature
        np.testing.assert_array_equal(compiled(negative).numpy(), fn(negative).numpy())
        np.testing.assert_array_equal(compiled(x).numpy(), fn(x).numpy())
    assert compiled.cache_info().eager == 1
    strict = anb.compile(fn, strict=True)
    with pytest.raises(RuntimeError, match=r"strict=True.*float\(tensor\).*test_compile.py"):
        strict(x)
    # Python ints and slices index without reading values.
    indexed = anb.compile(lambda x: x[1:] * x[0], strict=True)
    indexed(x)
    np.testing.assert_array_equal(indexed(x).numpy(), (x[1:] * x[0]).numpy())


def test_ops_without_a_driver_fall_back_with_one_warning():
    class Double(anb.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            return g * 2.0

    def fn(x):
        return anb.sum(Double.apply(anb.sin(x)))

    x = anb.tensor(np.linspace(0, 1, 4), requires_grad=True)
    compiled = anb.compile(fn)
    with pytest.warns(CompileWarning, match="runs eagerly"):
        compiled(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (g,) = anb.grad(compiled(x), x)
    np.testing.assert_allclose(g.numpy(), 2 * np.cos(x.numpy()))


def test_complex_values_run_eagerly_with_a_warning_naming_them():
    def fn(z, x):
        return anb.sum(anb.abs(anb.exp(z) * x) ** 2)

    z = anb.tensor([1 + 1j, -0.5j], requires_grad=True)
    x = anb.tensor([2.0, 3.0], requires_grad=True)
    compiled = anb.compile(fn)
    with pytest.warns(CompileWarning, match=r"abs \(complex operands"):
        compiled(z, x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (one warning per signature)
        out = compiled(z, x)
    got = anb.grad(out, [z, x])
    expected = anb.grad(fn(z, x), [z, x])
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(g.numpy(), e.numpy())


def test_bad_input_raises_the_eager_error():
    compiled = anb.compile(lambda a, b: a @ b)
    a, b = anb.ones((2, 3)), anb.ones((3, 4))
    compiled(a, b)
    with pytest.raises(ValueError) as eager:
        a @ anb.ones((2, 4))
    with pytest.raises(ValueError) as replayed:
        compiled(a, anb.ones((2, 4)))
    assert str(replayed.value) == str(eager.value)
    np.testing.assert_array_equal(compiled(a, b).numpy(), np.full((2, 4), 3.0))


# -- in-place updates, threads, memory, compilation ---------------------------------------------


def test_in_place_updates_inside_fn_replay_in_order():
    w = anb.tensor(np.linspace(0.0, 1.0, 4), requires_grad=True)
    x = anb.tensor(np.ones(4))

    @anb.compile
    def update(x, lr):
        nonlocal w  # (``-=`` on a Tensor updates it in place and rebinds the same object)
        with anb.no_grad():
            w -= lr * anb.cos(w) * x
            x[1:] = x[:-1] * 2.0
        return anb.sum(w * x)

    reference_w = w.numpy().copy()
    reference_x = x.numpy().copy()
    for _ in range(4):
        version = w._version_number
        out = update(x, 0.1)
        reference_w -= 0.1 * np.cos(reference_w) * reference_x
        reference_x[1:] = reference_x[:-1] * 2.0
        np.testing.assert_array_equal(w.numpy(), reference_w)
        np.testing.assert_array_equal(x.numpy(), reference_x)
        assert out.item() == float(np.sum(reference_w * reference_x))
        assert w._version_number == version + 1
    assert update.cache_info().traces == 1


def test_replays_from_several_threads_agree():
    w = anb.tensor(np.random.default_rng(0).standard_normal((8, 8)), requires_grad=True)
    compiled = anb.compile(lambda x: anb.sum(anb.tanh(x @ w)))
    inputs = [anb.tensor(np.random.default_rng(i).standard_normal((4, 8)), requires_grad=True)
              for i in range(8)]
    compiled(inputs[0])
    want = [anb.grad(anb.sum(anb.tanh(x @ w)), x)[0].numpy() for x in inputs]
    failures = []

    def work(i):
        for _ in range(50):
            outs = [compiled(x) for x in inputs]  # several replays alive at once
            for x, out, expected in zip(inputs, outs, want):
                if not np.array_equal(anb.grad(out, x)[0].numpy(), expected):
                    failures.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_memory_stays_flat_over_many_calls():
    x = anb.tensor(np.ones(64), requires_grad=True)
    compiled = anb.compile(lambda x: anb.sum(anb.sin(x) * x))
    for _ in range(50):
        anb.grad(compiled(x), x)
    gc.collect()
    tracemalloc.start()
    try:
        first, _ = tracemalloc.get_traced_memory()
        for _ in range(3000):
            anb.grad(compiled(x), x)
        gc.collect()
        last, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert last - first < 200_000


def test_a_new_function_of_known_ops_compiles_nothing():
    x = anb.tensor(np.linspace(-1, 1, 6).reshape(2, 3), requires_grad=True)
    first = anb.compile(lambda x: anb.sum(anb.sin(x) * x + 1.0, axis=1))
    for _ in range(2):
        anb.grad(anb.sum(first(x)), x)
    second = anb.compile(lambda x: anb.sum(x * anb.sin(x) + 2.0, axis=1))
    with numba_event.install_recorder("numba:compile") as recorded:
        for _ in range(3):
            anb.grad(anb.sum(second(x)), x)
    assert recorded.buffer == []
    # (the recorder sees compilations: a fresh function compiles under it)
    with numba_event.install_recorder("numba:compile") as check:
        njit(lambda v: v + 1)(1)
    assert check.buffer


def _rollout(x, v, steps):
    """Values read only by the next few ops (slices, a column, a join), values the backward
    reads, a view handed out, and a gradient taken inside: the arena's places are shared."""
    for _ in range(steps):
        d = x[1:] - x[:-1]
        length = anb.sqrt(anb.sum(d * d, axis=1, keepdims=True))
        pull = (length - 1.0) / length * d
        zero = anb.zeros((1, 2))
        force = anb.concatenate([pull, zero]) - anb.concatenate([zero, pull]) - 0.1 * x
        v = v + 0.05 * force
        x = x + 0.05 * v
    inner = anb.grad(anb.sum(anb.square(x[2:] - x[:-2])), x)[0]
    return anb.sum(v * v) + anb.sum(anb.tanh(inner)), x[1:3]


def test_values_only_the_forward_reads_share_arena_places():
    rng = np.random.default_rng(8)
    x0 = anb.tensor(rng.standard_normal((12, 2)) + np.arange(12.0)[:, None],
                    requires_grad=True)
    v0 = anb.tensor(rng.standard_normal((12, 2)) * 0.1)
    compiled = anb.compile(_rollout)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        for _ in range(3):
            want_energy, want_view = _rollout(x0, v0, 20)
            energy, view = compiled(x0, v0, 20)
            assert energy.item() == want_energy.item()
            np.testing.assert_array_equal(view.numpy(), want_view.numpy())
            for out, want_out in ((energy, want_energy), (view, want_view)):
                seed = anb.ones_like(out)
                got = anb.grad(out, x0, grad_outputs=seed, retain_graph=True)[0]
                want = anb.grad(want_out, x0, grad_outputs=seed, retain_graph=True)[0]
                np.testing.assert_array_equal(got.numpy(), want.numpy())
    (entry,) = compiled._programs.values()
    program = entry.program
    # 20 steps of ~10 values of 12 x 2: those only the forward reads take a few places.
    assert program.arena_bytes < program.unpacked_arena_bytes / 3


# -- gradients inside fn ------------------------------------------------------------------------


def _energy(x):
    d = x[1:] - x[:-1]
    return 5.0 * anb.sum(anb.square(anb.sqrt(anb.sum(d * d, axis=1)) - 1.0))


def _euler_step(x, v):
    force = -anb.grad(_energy(x), x)[0]  # the inner backward is part of the program
    v = v + 0.01 * force
    return x + 0.01 * v, v


def test_a_simulation_step_with_forces_from_grad_replays_the_eager_bits():
    rng = np.random.default_rng(4)
    x0 = anb.tensor(rng.standard_normal((8, 2)) + np.arange(8.0)[:, None], requires_grad=True)
    v0 = anb.zeros((8, 2))
    compiled = anb.compile(_euler_step)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        results = []
        for step in (_euler_step, compiled, compiled):
            x, v = x0, v0
            for _ in range(6):
                x, v = step(x, v)
            results.append((x.numpy().copy(), v.numpy().copy()))
    for x, v in results[1:]:
        np.testing.assert_array_equal(x, results[0][0])
        np.testing.assert_array_equal(v, results[0][1])
    info = compiled.cache_info()
    assert info.eager == 0 and info.traces == 1  # (a leaf x0, then intermediates: one signature)


def test_a_whole_training_step_replays_the_eager_bits():
    rng = np.random.default_rng(5)
    inputs = anb.tensor(rng.standard_normal((16, 4)))
    labels = rng.integers(0, 3, 16)
    start = [rng.standard_normal((4, 8)) * 0.5, np.zeros(8), rng.standard_normal((8, 3)) * 0.5]

    def train(params, lr):
        w1, b1, w2 = params
        logits = anb.tanh(inputs @ w1 + b1) @ w2
        loss = -anb.mean(anb.log_softmax(logits, axis=1)[np.arange(16), labels])
        grads = anb.grad(loss, params)
        with anb.no_grad():
            for p, g in zip(params, grads):
                p -= lr * g
        return loss

    eager = [anb.tensor(p, requires_grad=True) for p in start]
    replayed = [anb.tensor(p, requires_grad=True) for p in start]
    compiled = anb.compile(train)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        for _ in range(4):
            want, got = train(eager, 0.1), compiled(replayed, 0.1)
            assert got.item() == want.item()
            for p, q in zip(eager, replayed):
                np.testing.assert_array_equal(q.numpy(), p.numpy())
    assert compiled.cache_info().traces == 1
    loss = compiled(replayed, 0.1)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()  # its graph was freed by the gradient inside, as in eager


def test_backward_inside_fn_runs_eagerly_with_a_warning():
    def fn(x):
        loss = anb.sum(x * x)
        loss.backward()
        return loss

    x = anb.tensor(np.ones(3), requires_grad=True)
    compiled = anb.compile(fn)
    with pytest.warns(CompileWarning, match=r"backward\(\) inside"):
        compiled(x)
    compiled(x)
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 4.0))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: anb.where(x > 0, x, 2.0 * x),  # a comparison's mask
        lambda x: anb.where(anb.numpy.isfinite(x), x, 0.0),  # a function without a gradient
        lambda x: x[anb.numpy.argmax(x)] * x,  # an index worked out from values
    ],
    ids=["comparison", "isfinite", "argmax"],
)
def test_values_read_outside_the_ops_are_never_frozen(fn):
    x = anb.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    compiled = anb.compile(fn)
    with pytest.warns(CompileWarning):
        compiled(x)
    other = anb.tensor(np.array([-3.0, 1.5, 0.25]), requires_grad=True)  # same signature
    np.testing.assert_array_equal(compiled(other).numpy(), fn(other).numpy())


def test_reading_grad_inside_runs_eagerly():
    w = anb.tensor(np.ones(3), requires_grad=True)
    anb.sum(w * w).backward()
    compiled = anb.compile(lambda x: x * w.grad)
    x = anb.ones(3)
    with pytest.warns(CompileWarning, match=r"\.grad read inside"):
        compiled(x)
    w.grad = anb.tensor(np.full(3, 7.0))
    np.testing.assert_array_equal(compiled(x).numpy(), np.full(3, 7.0))


def test_an_argument_that_is_also_captured_records_again_when_they_part():
    w = anb.tensor(np.full(3, 2.0), requires_grad=True)
    compiled = anb.compile(lambda x: anb.sum(x * w))
    compiled(w)  # the argument is the closure's tensor: one buffer, read twice
    assert compiled(w).item() == 12.0
    other = anb.tensor(np.full(3, 5.0), requires_grad=True)
    assert compiled(other).item() == 30.0
    assert compiled.cache_info().traces == 2


def test_an_in_place_change_inside_fn_of_a_saved_value_raises_as_eager():
    def fn(x):
        y = x * 2.0
        z = y * y
        y += 1.0  # z saved y: its backward must refuse
        return anb.sum(z)

    x = anb.tensor(np.ones(3), requires_grad=True)
    compiled = anb.compile(fn)
    for _ in range(3):
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            compiled(x).backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        fn(x).backward()


def test_cpu_programs_still_compile_once_the_process_has_used_cuda(monkeypatch):
    import importlib

    tensor_module = importlib.import_module("autograd_nb.tensor")
    monkeypatch.setattr(tensor_module, "_cuda_used", True)  # (a CUDA tensor existed)
    x = anb.tensor(np.linspace(-1.0, 1.0, 4), requires_grad=True)
    compiled = anb.compile(lambda x: anb.sum(anb.sin(x) * x))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        compiled(x)
        compiled(x)
    assert compiled.cache_info().programs == 1


_GLOBAL_PARAMETER = anb.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)


@pytest.mark.parametrize("where", ["closure", "global"])
def test_an_outside_tensor_handed_back_as_it_is_stays_that_tensor(where):
    # fn returns a tensor it did not compute and no op of it reads: a replay once returned a
    # copy made when recording (stale after an in-place update, and without a gradient).
    w = anb.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    if where == "closure":
        def fn(x):
            return x * 2.0, w
    else:
        w = _GLOBAL_PARAMETER

        def fn(x):
            return x * 2.0, _GLOBAL_PARAMETER
    compiled = anb.compile(fn)
    x = anb.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        for _ in range(3):  # records, then replays
            doubled, out = compiled(x)
            assert out is w
            np.testing.assert_array_equal(doubled.numpy(), np.full(3, 2.0))
            with anb.no_grad():
                w += 10.0
        seed = anb.tensor(np.array([0.5, -1.0, 2.0]))
        (got,) = anb.grad(compiled(x)[1], w, grad_outputs=seed)
    np.testing.assert_array_equal(got.numpy(), seed.numpy())
    assert compiled.cache_info().traces == 1


def test_a_tensor_made_inside_fn_is_a_new_tensor_per_call():
    def fn(x):
        return x * 2.0, anb.tensor(np.array([1.0, 2.0]))

    compiled = anb.compile(fn)
    x = anb.ones(3)
    first = compiled(x)[1]
    second = compiled(x)[1]  # (a replay)
    assert first is not second
    with anb.no_grad():
        second += 5.0  # the caller's to change: the next call's is untouched
    np.testing.assert_array_equal(compiled(x)[1].numpy(), [1.0, 2.0])
    assert compiled.cache_info().traces == 1


def test_create_graph_through_a_replay_keeps_constant_gradients_constant():
    # fn reads x linearly and p through sin: with create_graph, eager's gradient of x is a
    # constant (no graph) and p's has one; the replay once gave x's a graph too.
    p = anb.tensor(0.8, requires_grad=True)
    x = anb.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)

    def fn(x):
        return anb.sum(x * 2.0) + anb.sin(p)

    compiled = anb.compile(fn)
    compiled(x)
    for f in (fn, compiled):
        g_x, g_p = anb.grad(f(x), (x, p), create_graph=True)
        assert not g_x.requires_grad and g_x.grad_fn is None
        np.testing.assert_array_equal(g_x.numpy(), np.full(3, 2.0))
        assert g_p.requires_grad
        (second,) = anb.grad(g_p, p)
        np.testing.assert_allclose(second.item(), -np.sin(0.8), rtol=1e-15)
        with pytest.raises(RuntimeError, match="does not require grad"):
            anb.grad(anb.sum(g_x * g_x), x)


@pytest.mark.parametrize("allow_unused", [False, True])
def test_a_saved_tensor_changed_inside_fn_raises_on_every_replay_as_eager(allow_unused):
    # The output's node once had no edges: a gradient of x said "unused", or gave None or
    # zeros with allow_unused / materialize_grads, instead of eager's in-place error.
    def fn(x, w):
        y = anb.sum(x * w)  # (multiply saves w)
        with anb.no_grad():
            w *= 0.5
        return y

    compiled = anb.compile(fn)
    for f in (fn, compiled, compiled, compiled):  # eager, records, replays
        x = anb.tensor(np.ones(3), requires_grad=True)
        w = anb.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
        out = f(x, w)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            anb.grad(out, [x], allow_unused=allow_unused, materialize_grads=allow_unused)


def test_a_loss_whose_graph_fn_freed_raises_the_freed_graph_error_on_replay():
    def fn(x, w):
        loss = anb.sum(anb.tanh(x * w))
        (g,) = anb.grad(loss, w)  # frees the graph
        return loss, g

    compiled = anb.compile(fn)
    x = anb.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    w = anb.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    for f in (fn, compiled, compiled, compiled):
        loss, g = f(x, w)
        np.testing.assert_array_equal(g.numpy(), fn(x, w)[1].numpy())
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            anb.grad(loss, [x], allow_unused=True)


@pytest.mark.parametrize("make", [float, np.float32, np.float64], ids=["float", "f32", "f64"])
def test_float_arguments_are_keyed_by_their_bits(make):
    # 0.0 == -0.0 once shared a program (x * -0.0 replayed as x * 0.0: +0 for -0, and 1 / that
    # +inf for -inf); nan != nan recorded again at every call.
    def fn(x, k):
        return 1.0 / (x * k)

    compiled = anb.compile(fn)
    x = anb.tensor(np.array([1.0, 2.0]))
    for k in (make(0.0), make(-0.0), make(-0.0), make(0.0), make("nan"), make("nan")):
        np.testing.assert_array_equal(compiled(x, k).numpy(), fn(x, k).numpy())
        assert np.signbit(compiled(x, k).numpy()).tolist() == np.signbit(fn(x, k).numpy()).tolist()
    assert compiled.cache_info().traces == 3  # 0.0, -0.0, nan


def test_create_graph_through_a_replay_keeps_each_gradients_own_graph():
    # d/dx sum(x @ W) does not depend on x: eager's second derivative in x is unused; the
    # replay's first-order gradients were once slices of one join, each connected to all.
    w = anb.tensor(np.arange(9.0).reshape(3, 3), requires_grad=True)

    def fn(x):
        return anb.sum(x @ w)

    compiled = anb.compile(fn)
    x = anb.tensor(np.ones(3), requires_grad=True)
    compiled(x)
    for f in (fn, compiled):
        g_x, g_w = anb.grad(f(x), [x, w], create_graph=True)
        second = anb.grad(anb.sum(g_x * g_x), [x, w], allow_unused=True, retain_graph=True)
        assert second[0] is None
        np.testing.assert_array_equal(second[1].numpy(), 2 * np.outer(w.numpy().sum(1), np.ones(3)))
        with pytest.raises(RuntimeError, match="not have been used in the graph"):
            anb.grad(anb.sum(g_x * g_x), [x, w])


def test_an_output_handed_out_twice_is_one_tensor():
    # ``(y, {"again": y})``: one tensor, as eager's; a replay once made a Tensor per place.
    x = anb.tensor(np.arange(1.0, 4.0), requires_grad=True)

    def fn(x):
        y = anb.exp(x)
        return y, {"again": y, "x": x}, x

    compiled = anb.compile(fn)
    compiled(x)
    for f in (fn, compiled):
        y, more, same_x = f(x)
        assert more["again"] is y and more["x"] is x and same_x is x
        y.retain_grad()
        anb.sum(y * 2.0).backward()
        np.testing.assert_array_equal(more["again"].grad.numpy(), np.full(3, 2.0))
