"""The compiled check of a graph against its template (engine.graph_reader): it serves the
repeated graphs, hands anything it does not recognise to the Python check, holds the saved
buffers it gathers for the length of the run, and frees them as ``Node.free`` does.
(``test_plan_cache`` runs every template test with and without it.)"""

import sys
import threading
import weakref

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb import config, layout, tape
from autograd_nb.engine import graph_reader, plan_cache

pytestmark = pytest.mark.skipif(
    graph_reader.found_layout() is None, reason="the compiled reader does not run here"
)


@pytest.fixture(autouse=True)
def fresh_cache():
    plan_cache.clear()
    yield
    plan_cache.clear()


def loss_of(x, y):
    h = x * y + anb.softplus(x)
    s = anb.softmax(anb.stack([h, x, y * 0.5, h * h]))
    return s[0] * s[3] + anb.sum(s)


def closed_form(x, y):
    """d loss / d(x, y) of :func:`loss_of`, by central differences on the NumPy formula
    (float64, step 1e-6: agrees to ~1e-9)."""

    def value(x, y):
        h = x * y + np.log1p(np.exp(x))
        v = np.array([h, x, y * 0.5, h * h])
        s = np.exp(v - v.max())
        s /= s.sum()
        return s[0] * s[3] + s.sum()

    eps = 1e-6
    return (
        (value(x + eps, y) - value(x - eps, y)) / (2 * eps),
        (value(x, y + eps) - value(x, y - eps)) / (2 * eps),
    )


def grads(x_value, y_value):
    x = anb.tensor(x_value, requires_grad=True)
    y = anb.tensor(y_value, requires_grad=True)
    return [g.item() for g in anb.grad(loss_of(x, y), [x, y])]


def counts():
    return plan_cache.stats["hits"], plan_cache.stats["compiled"]


@pytest.mark.compiled_only
def test_repeated_graphs_are_checked_in_compiled_code():
    for _ in range(2):
        grads(0.3, -0.7)
    hits, compiled = counts()
    for value in (0.1, 0.9, -1.3):
        np.testing.assert_allclose(grads(value, 0.4), closed_form(value, 0.4), rtol=1e-7)
    assert counts() == (hits + 3, compiled + 3)


@pytest.mark.compiled_only
def test_equal_attributes_that_are_other_objects_go_to_the_python_check():
    x = anb.tensor(0.3, requires_grad=True)
    y = anb.tensor(-0.7, requires_grad=True)
    for _ in range(2):
        anb.grad(loss_of(x, y), [x, y])
    out = loss_of(x, y)
    node = out.grad_fn
    node.attrs = dict(node.attrs)  # equal, not the same dict: the compiled check says no
    hits, compiled = counts()
    got = [g.item() for g in anb.grad(out, [x, y])]
    assert counts() == (hits + 1, compiled)  # served, after the Python check
    np.testing.assert_allclose(got, closed_form(0.3, -0.7), rtol=1e-7)


def test_a_leaf_where_the_template_has_a_node_is_no_match():
    def chain(x, y, inner):
        return anb.sum(anb.tanh(inner) * y)

    x = anb.tensor(np.linspace(-1, 1, 5), requires_grad=True)
    y = anb.tensor(np.linspace(0.5, 2, 5), requires_grad=True)
    for _ in range(2):
        anb.grad(chain(x, y, anb.exp(x)), [x, y])
    hits, compiled = counts()
    gx, gy = anb.grad(chain(x, y, x), [x, y])  # tanh(x) directly: one node fewer
    assert counts() == (hits, compiled)
    t = np.tanh(x.numpy())
    np.testing.assert_allclose(gx.numpy(), (1 - t * t) * y.numpy(), rtol=1e-14)
    np.testing.assert_allclose(gy.numpy(), t, rtol=1e-14)


@pytest.mark.compiled_only
def test_gather_holds_each_saved_buffer_until_release():
    x = anb.tensor(np.linspace(-1, 1, 5), requires_grad=True)
    for _ in range(2):
        anb.grad(anb.sum(anb.tanh(x) * x), x)
    out = anb.sum(anb.tanh(x) * x)
    (template,) = next(iter(plan_cache._templates.values()))
    found = template._match_compiled([out.grad_fn])
    assert found is not None
    nodes, _, addresses, _ = found
    saved = [a for node in nodes for a in (node.saved_inputs or ()) if a is not None]
    saved += [node.saved_output for node in nodes if node.saved_output is not None]
    assert saved
    before = [sys.getrefcount(a) for a in saved]
    ids = template.object_ids.copy()
    assert graph_reader.gather(
        addresses, template.c_input_nodes, template.c_input_indices, template.c_output_nodes,
        template.c_saved_objects, ids, template.reader,
    )
    gathered = set(ids[template.c_saved_objects].tolist())
    assert gathered <= {id(a) for a in saved}
    # (Not ``zip(saved, before)``: zip's cached result tuple holds one more reference.)
    held = [sys.getrefcount(a) for a in saved]
    expected = [list(ids[template.c_saved_objects]).count(id(a)) for a in saved]
    assert [h - b for h, b in zip(held, before)] == expected
    graph_reader.release(ids, template.c_saved_objects)
    assert [sys.getrefcount(a) for a in saved] == before


@pytest.mark.compiled_only
def test_a_backward_from_a_template_frees_the_saved_buffers():
    x = anb.tensor(np.linspace(-1, 1, 5), requires_grad=True)
    for _ in range(2):
        anb.grad(anb.sum(anb.tanh(x) * anb.exp(x)), x)
    out = anb.sum(anb.tanh(x) * anb.exp(x))
    nodes = []
    stack = [out.grad_fn]
    while stack:
        node = stack.pop()
        if isinstance(node, tape.Node):
            nodes.append(node)
            stack.extend(node.edges)
    buffers = [weakref.ref(node.saved_output) for node in nodes
               if node.saved_output is not None]
    assert buffers
    hits, compiled = counts()
    anb.grad(out, x)
    assert counts() == (hits + 1, compiled + 1)
    for node in nodes:
        if node.needs_saved():
            assert node.freed is True
            assert node.saved_inputs is None and node.saved_output is None
    assert all(ref() is None for ref in buffers)  # by reference counting, at once
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        anb.grad(out, x)


@pytest.mark.compiled_only
def test_threads_backward_from_one_template_at_once():
    values = [-1 + 0.05 * k for k in range(40)]
    config.CACHED_PLANS = False
    try:
        expected = [grads(value, 0.4) for value in values]
    finally:
        config.CACHED_PLANS = True
    for _ in range(2):
        grads(0.3, -0.7)
    errors = []

    def work():
        try:
            for value, bits in zip(values, expected):
                assert grads(value, 0.4) == bits  # the uncached backward's, to the bit
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    hits = plan_cache.stats["hits"]
    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert plan_cache.stats["hits"] == hits + 4 * len(values)


def test_layout_facts_hold_here():
    assert layout.lists_as_expected() and layout.tuples_as_expected()
    # CPython 3.12 replaced an int's size field (``lv_tag``): the probe says so, and the
    # readers then take the seq numbers in Python.
    assert layout.ints_as_expected() == (sys.version_info < (3, 12))
    if not layout.ints_as_expected():
        return
    for n in (0, 1, 2**30 - 1, 2**30, 2**59 + 17):
        assert layout.read_int(id(n)) == n
    assert layout.read_int(id(-5)) == -1 and layout.read_int(id(2**62)) == -1


def test_objects_at_gives_new_references():
    things = [object(), [1], "".join(["te", "xt"])]  # (not an interned, immortal string)
    before = [sys.getrefcount(t) for t in things]
    back = layout.objects_at(np.array([id(t) for t in things], dtype=np.int64))
    assert all(a is b for a, b in zip(back, things))
    assert [sys.getrefcount(t) - 1 for t in things] == before
    del back
    assert [sys.getrefcount(t) for t in things] == before
    assert layout.objects_at(np.empty(0, dtype=np.int64)) == []


def test_a_sequence_op_given_one_more_input_is_no_match():
    a, b, c = (anb.tensor(v, requires_grad=True) for v in (0.3, -0.2, 0.9))
    d = anb.tensor(0.5)  # no gradient: its edge leads nowhere

    def loss(parts):
        s = anb.softmax(anb.stack(parts))
        return s[0] * 2.0 + s[1]

    for _ in range(2):
        anb.grad(loss([a, b, c]), [a, b, c])
    hits, compiled = counts()
    got = [g.item() for g in anb.grad(loss([a, b, c, d]), [a, b, c])]
    assert counts() == (hits, compiled)
    config.CACHED_PLANS = False
    try:
        expected = [g.item() for g in anb.grad(loss([a, b, c, d]), [a, b, c])]
    finally:
        config.CACHED_PLANS = True
    assert got == expected


def test_pack_keeps_each_part_in_order():
    parts = [np.array([3, 1, 4]), np.array([], dtype=np.int64), np.array([[1, 5], [9, 2]])]
    packed = graph_reader.pack(*parts)
    assert packed.dtype == np.int64
    for i, part in enumerate(parts):
        np.testing.assert_array_equal(packed[packed[i]:packed[i + 1]], part.ravel())
    assert packed[len(parts)] == len(packed)
