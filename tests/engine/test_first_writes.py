"""First writes in the compiled backward (``Op.exec_set_spec``, ``executor.Lowering.first_write``).

The executor zeroes nothing up front: the first row that writes a gradient slot either writes it
whole (a VJP's "set" driver, which gives the bits its adding driver leaves in zeros) or follows
a ZERO row. Here every set driver, from the registry, is checked against its adding driver on
buffers that hold NaN first, and whole backwards are run on NaN-filled arenas and results, so
that a slot read before it is cleared or written shows.
"""

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb import config
from autograd_nb.engine import backward, executor, machine, schedule
from autograd_nb.ops._pointers import call_driver
from autograd_nb.ops.elementwise import ElementwiseOp
from autograd_nb.ops.registry import REGISTRY, call
from tests.checks import elementwise_attrs, elementwise_values

ELEMENTWISE = sorted(n for n, op in REGISTRY.items()
                     if isinstance(op, ElementwiseOp) and op.vjp_formulas)
DTYPES = [np.float32, np.float64]


def _node(op, shapes, dtype, rng):
    values = elementwise_values(op, shapes, dtype, rng)
    tensors = [anb.tensor(v, requires_grad=v.dtype.kind == "f") for v in values]
    out = call(op.name, *tensors, **elementwise_attrs(op, rng))
    assert out._node is not None and out._node.op is op
    return out._node


def _gradient(shape, dtype, rng):
    """A grad_output with zeros of both signs among its values."""
    g = rng.standard_normal(shape).astype(dtype)
    g.reshape(-1)[:3] = [0.0, -0.0, 0.0][: g.size]
    return g


def _run(spec, g, target):
    call_driver(spec.driver, [g, *spec.saved], target, spec.ints, spec.floats)
    return target


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ELEMENTWISE)
def test_a_set_driver_gives_the_bits_its_adding_driver_leaves_in_zeros(name, dtype):
    op = REGISTRY[name]
    rng = np.random.default_rng(len(name))
    shape = (4, 9)
    node = _node(op, [shape] * op.n_inputs, dtype, rng)
    g = _gradient(shape, dtype, rng)
    for k in op.vjp_formulas:
        set_spec = op.exec_set_spec(k, node)
        assert set_spec is not None, (name, k)
        added = _run(op.exec_spec(k, node), g, np.zeros(shape, dtype))
        written = _run(set_spec, g, np.full(shape, np.nan, dtype))
        assert written.tobytes() == added.tobytes(), (name, k)


@pytest.mark.parametrize("name", ["add", "multiply", "where"])
def test_an_op_with_a_broadcast_input_has_no_set_driver(name):
    # (the flat layout only: a broadcast input's gradient is a sum, and the others' first
    # writes take the adding driver after a ZERO row)
    op = REGISTRY[name]
    rng = np.random.default_rng(0)
    shapes = [(4, 9), (9,), (4, 9)][: op.n_inputs]
    node = _node(op, shapes, np.float64, rng)
    assert all(op.exec_set_spec(k, node) is None for k in op.vjp_formulas)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 4, 5), (2, 40, 70, 90), (60, 300, 2)])
def test_a_product_set_driver_gives_the_bits_of_adding_into_zeros(shape, dtype):
    # Small products take the loops, larger ones BLAS with beta 0 (``gemm_set``).
    rng = np.random.default_rng(sum(shape))
    *batch, m, inner, n = shape
    a = anb.tensor(rng.standard_normal((*batch, m, inner)).astype(dtype), requires_grad=True)
    b = anb.tensor(rng.standard_normal((*batch, inner, n)).astype(dtype), requires_grad=True)
    node = (a @ b)._node
    op = node.op
    assert op.name == "_bmm"
    g = _gradient((*batch, m, n), dtype, rng)
    for k, like in ((0, a), (1, b)):
        added = _run(op.exec_spec(k, node), g, np.zeros(like.shape, dtype))
        written = _run(op.exec_set_spec(k, node), g, np.full(like.shape, np.nan, dtype))
        assert written.tobytes() == added.tobytes(), k
        reference = g.astype(np.float64) @ np.swapaxes(b.numpy(), -1, -2) if k == 0 else (
            np.swapaxes(a.numpy(), -1, -2).astype(np.float64) @ g)
        np.testing.assert_allclose(written, reference, rtol=1e-4 if dtype == np.float32
                                   else 1e-12, atol=1e-4 if dtype == np.float32 else 1e-12)


@pytest.fixture
def nan_buffers(monkeypatch):
    """Arenas and result buffers that hold NaN until the tables clear or write them."""
    monkeypatch.setattr(executor, "uninitialised",
                        lambda shape, dtype: np.full(shape, np.nan, dtype))


def _tables_of(monkeypatch, run):
    """The executor tables ``run`` builds (the last backward's)."""
    found = []
    original = executor.Tables.execute

    def capture(self):
        found.append(self)
        return original(self)

    with monkeypatch.context() as patch:
        patch.setattr(executor.Tables, "execute", capture)
        patch.setattr(config, "CACHED_PLANS", False)  # (a template would skip the tables)
        run()
    assert found, "the backward did not run in the compiled executor"
    return found[-1]


def _rows(tables):
    """Per row of ``tables``: its driver's name (None for a ZERO row), its operand values
    (for a driver: the gradient's, the saved arrays', the target's) and its ints."""
    table = machine.sections(tables.table)
    names = [d.py_func.__name__ for d in tables.drivers]
    rows = []
    for r, row in enumerate(table.rows):
        entry = row[machine.ENTRY]
        name = None if entry == machine.ZERO else names[entry]
        rows.append((name, table.row_operands(r).tolist(), table.ints[row[machine.INTS]:]))
    return rows


def _mlp(dtype):
    rng = np.random.default_rng(3)
    # (hidden gradients of 64 x 64, above ``executor.SMALL_SLOT_BYTES``)
    x = anb.tensor(rng.standard_normal((64, 12)).astype(dtype))
    w1 = anb.tensor(rng.standard_normal((12, 64)).astype(dtype) * 0.3, requires_grad=True)
    b1 = anb.tensor(np.zeros(64, dtype), requires_grad=True)
    w2 = anb.tensor(rng.standard_normal((64, 5)).astype(dtype) * 0.3, requires_grad=True)
    h = anb.tanh(x @ w1 + b1)
    loss = -anb.log_softmax(h @ w2, axis=-1)[np.arange(64), rng.integers(0, 5, 64)].mean()
    return loss, [w1, b1, w2]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.compiled_only
def test_an_mlp_backward_on_nan_buffers_clears_or_writes_every_slot_first(
        nan_buffers, monkeypatch, dtype):
    loss, params = _mlp(dtype)
    tables = _tables_of(monkeypatch, lambda: anb.grad(loss, params, retain_graph=True))
    got = [g.numpy() for g in anb.grad(loss, params, retain_graph=True)]
    assert all(np.isfinite(g).all() for g in got)
    walked = [g.numpy() for g in _python_walk(monkeypatch, loss, params)]
    for a, b in zip(got, walked):
        assert a.tobytes() == b.tobytes()
    # The products' and tanh's first writes are set drivers: no ZERO row before them.
    rows = _rows(tables)
    set_rows = [r for r in rows if r[0] is not None and r[0].endswith("_set_exec")]
    assert set_rows, [r[0] for r in rows]
    zeroed = {r[1][0] for r in rows if r[0] is None}
    assert not zeroed & {r[1][-1] for r in set_rows}
    products = [r for r in rows if r[0] == "_bmm_driver"]
    assert products and all(r[2][8] == 1 for r in products)


def _python_walk(monkeypatch, loss, params):
    with monkeypatch.context() as patch:
        patch.setattr(config, "COMPILED_BACKWARD", False)
        return anb.grad(loss, params, retain_graph=True)


@pytest.mark.parametrize("add_to_results", [False, True])
def test_tables_built_to_add_to_results_only_add_there(add_to_results):
    # ``anb.compile``'s replayed outputs place their results in a gradient buffer that their
    # driver adds into: those tables neither clear nor write whole a result slot.
    rng = np.random.default_rng(6)
    x = anb.tensor(rng.standard_normal((64, 64)), requires_grad=True)
    w = anb.tensor(rng.standard_normal((64, 64)), requires_grad=True)
    root = anb.sum(anb.tanh(x @ w))._node
    plan = backward.make_plan([root], [x, w], False)
    tables, steps, _ = executor.build(plan, [(root, np.ones(()))], {id(x), id(w)}, False,
                                      np.dtype(np.float64), add_to_results=add_to_results)
    # (the result slots' values: the values on the result objects)
    table = machine.sections(tables.table)
    result_objects = {j for j, origin in enumerate(tables.origins)
                      if type(origin) is tuple and origin[0] == "result"}
    results = {v for v, obj in enumerate(table.values[:, machine.OBJECT].tolist())
               if obj in result_objects}
    assert len(result_objects) == sum(slot.kind == schedule.RESULT for slot in steps.slots)
    rows = _rows(tables)
    zeroed = {r[1][0] for r in rows if r[0] is None}
    overwritten = {r[1][-1] for r in rows if r[0] == "_bmm_driver" and r[2][8]}
    assert len(results) == 2
    if add_to_results:
        assert not (zeroed | overwritten) & results
    else:
        assert overwritten == results  # (both products' VJPs write their result whole)


def test_replayed_outputs_give_the_eager_gradients():
    # Two outputs of one compiled call, each with its replayed backward table, reaching x and
    # w: their gradients sum as eager's do.
    @anb.compile
    def f(x, w):
        h = anb.tanh(x @ w)
        return h.sum(), (h * h).sum()

    rng = np.random.default_rng(5)
    x = anb.tensor(rng.standard_normal((6, 4)), requires_grad=True)
    w = anb.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    for _ in range(3):
        a, b = f(x, w)
        got = anb.grad(a + 2.0 * b, [x, w])
    h = anb.tanh(x @ w)
    want = anb.grad(h.sum() + 2.0 * (h * h).sum(), [x, w])
    for g, e in zip(got, want):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.compiled_only
def test_a_replayed_loss_writes_its_buffer_and_the_gradients_first(
        nan_buffers, monkeypatch, dtype):
    # A compiled loss's backward in the executor: the replayed output's driver clears the
    # inputs' part of its gradient buffer itself (not the scratch: its table writes that) and
    # each input's part is copied into the input's gradient, with no ZERO row before either.
    rng = np.random.default_rng(4)
    x = anb.tensor(rng.standard_normal((64, 12)).astype(dtype))
    w1 = anb.tensor(rng.standard_normal((12, 64)).astype(dtype) * 0.3, requires_grad=True)
    b1 = anb.tensor(rng.standard_normal(64).astype(dtype), requires_grad=True)
    w2 = anb.tensor(rng.standard_normal((64, 5)).astype(dtype) * 0.3, requires_grad=True)
    params = [w1, b1, w2]

    def loss(w1, b1, w2):
        return anb.sum(anb.tanh(anb.tanh(x @ w1 + b1) @ w2))

    compiled = anb.compile(loss)
    want = [g.numpy() for g in anb.grad(loss(*params), params)]
    compiled(*params)  # (records)
    out = compiled(*params)
    tables = _tables_of(monkeypatch, lambda: anb.grad(out, params, retain_graph=True))
    got = [g.numpy() for g in anb.grad(compiled(*params), params)]
    for a, b in zip(got, want):
        assert a.tobytes() == b.tobytes()
    rows = _rows(tables)
    firsts = [r for r in rows if r[0] in ("backward_set_driver", "slice_copy_driver")]
    assert sorted(r[0] for r in firsts) == ["backward_set_driver"] + ["slice_copy_driver"] * 3
    zeroed = {r[1][0] for r in rows if r[0] is None}
    assert not zeroed & {r[1][-1] for r in firsts}
