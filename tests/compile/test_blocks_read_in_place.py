"""``autograd_nb.compile``: a basic index of a result (``s[k]``, ``s[1:3]``) is read where it
lies in that result's buffer, with no instruction, until the buffer or the block is written
(then the block is copied out first), or handed out of fn (then it gets a buffer of its own).
Each program is compared bit for bit with eager runs of the same fn, over several calls."""

import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import autograd_nb as anb

SHAPE = (4, 3)


def _bits(array):
    return np.ascontiguousarray(array).view(np.uint64)


def _run(fn, seed, calls):
    """fn's outputs and the gradients of their sum, per call on fresh equal arguments."""
    results = []
    for _ in range(calls):
        rng = np.random.default_rng(seed)
        xs = [anb.tensor(rng.uniform(-1, 1, SHAPE), requires_grad=True) for _ in range(2)]
        outs = fn(*xs)
        loss = sum(anb.sum(out) for out in outs)
        grads = anb.grad(loss, xs, allow_unused=True, materialize_grads=True)
        results.append([out.detach().numpy().copy() for out in outs]
                       + [g.numpy() for g in grads])
    return results


def _replays_eagers_bits(fn, seed=0):
    compiled = anb.compile(fn)
    (eager,) = _run(fn, seed, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (compiled, not run eagerly with a warning)
        replayed = _run(compiled, seed, 3)
    for call in replayed:
        for e, r in zip(eager, call, strict=True):
            assert e.shape == r.shape
            np.testing.assert_array_equal(_bits(e), _bits(r))
    assert compiled.cache_info().hits == 2
    return compiled


def _forward_rows(compiled):
    program = next(iter(compiled._programs.values())).program
    return int(program.forward_table[0])


def _apply(name, a, b, k):
    """One step of a random program over (4, 3) values (see ``STEP``)."""
    if name == "row":  # a block: a row
        return a * 0.5 + a[k % 4]
    if name == "element":  # a block: one element
        return a * a[k % 4, k % 3]
    if name == "rows":  # a block: two rows, then one of them
        middle = a[1:3]
        return anb.concatenate([middle, a[:1], middle[k % 2:k % 2 + 1]], axis=0)
    if name == "column":  # not a block (strided): gathered
        return a + anb.reshape(a[:, k % 3], (4, 1))
    if name == "write_source":  # the buffer written after a block of it was taken
        t = a * 2.0
        block = t[k % 4]
        with anb.no_grad():
            t[(k + 1) % 4] = 0.25
            t[k % 4] = -0.5
        return t * 0.5 + block
    if name == "write_block":  # the block written: the buffer keeps its values
        t = a + 1.0
        block = t[k % 4]
        block *= b[0]
        return t - block
    if name == "block_of_block":
        return a - a[1:][k % 3][k % 3]
    return anb.tanh(a + b)


STEP = st.tuples(st.sampled_from(("row", "element", "rows", "column", "write_source",
                                  "write_block", "block_of_block", "tanh")),
                 st.integers(0, 20), st.integers(0, 20), st.integers(0, 7))


@settings(max_examples=30, deadline=None)
@given(steps=st.lists(STEP, min_size=1, max_size=10), seed=st.integers(0, 2**16),
       hand_out=st.booleans())
def test_random_programs_of_blocks_and_writes_replay_the_eager_bits(steps, seed, hand_out):
    def fn(x, y):
        values = [x, y]
        for name, i, j, k in steps:
            a, b = values[i % len(values)], values[j % len(values)]
            values.append(_apply(name, a, b, k))
        last = values[-1]
        # (a block handed out of fn, beside its buffer, or a block of a block)
        return (last, last[2]) if hand_out else (last[1:3][0] * 1.0,)

    _replays_eagers_bits(fn, seed)


def test_blocks_of_a_result_take_no_instruction():
    def by_element(x):
        s = anb.softmax(x)
        return (s[0] * s[1] + s[2] * s[3],)

    def by_strided(x):
        s = anb.softmax(x)
        return (s[::2][0] * s[::2][1] + s[1::2][0] * s[1::2][1],)

    def _run_on(fn):
        compiled = anb.compile(fn)
        x = anb.tensor(np.array([0.5, -1.0, 2.0, 0.25]), requires_grad=True)
        for _ in range(2):
            out = compiled(x)[0]
        np.testing.assert_array_equal(out.numpy(), fn(x)[0].numpy())
        return _forward_rows(compiled)

    # softmax, two products and a sum: the four elements are read in softmax's buffer.
    assert _run_on(by_element) == 4
    # A strided selection is gathered, a row each; an element of what it gathered is a block
    # of that, read in place.
    assert _run_on(by_strided) == 4 + 4


def test_a_block_handed_out_does_not_share_memory_with_its_buffer():
    def fn(x):
        s = anb.exp(x)
        return s[1:3], s, s[3]

    compiled = anb.compile(fn)
    x = anb.tensor(np.array([0.5, -1.0, 2.0, 0.25]))
    for _ in range(2):  # the recording call, then a replay
        middle, whole, last = compiled(x)
        expected_middle, expected_last = np.exp(x.numpy()[1:3]), np.exp(x.numpy()[3])
        whole[...] = 0.0  # (in place, after the call: the blocks keep their values)
        np.testing.assert_array_equal(middle.numpy(), expected_middle)
        np.testing.assert_array_equal(last.numpy(), expected_last)
        middle[...] = 7.0
        np.testing.assert_array_equal(last.numpy(), expected_last)


def test_a_block_read_after_its_buffer_is_written_keeps_its_value():
    def fn(x):
        t = x * 3.0
        first = t[0]
        with anb.no_grad():
            t[...] = 0.0
        return (first + t,)

    compiled = _replays_eagers_bits(lambda x, y: fn(x))
    # (t, then the copy of the block before the write, the write, the sum)
    assert _forward_rows(compiled) >= 4


def test_a_gradient_taken_inside_fn_then_indexed_replays_eagers_bits():
    def fn(x, y):
        energy = anb.sum(anb.sin(x) * y)
        (force,) = anb.grad(energy, [x])
        first = force[0]
        with anb.no_grad():
            force[0] = 0.0
        return (first * x + force,)

    _replays_eagers_bits(fn)
