"""The op protocol (``registry.Op``, ``registry.VJPStrategy``): its size, the flags derived
from what each op's class overrides, and what an op written to the older protocol meets."""

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb.ops.registry import IDENTITY, ONE_PER_INPUT, REGISTRY, Op, VJPStrategy, defines
from autograd_nb.replay import program

#: What ``docs/adding-an-op.md`` counts: the members an op author may write or read.
OP_MEMBERS = {
    # declarations
    "name", "family", "n_inputs", "differentiable", "not_implemented", "saves",
    "saves_output", "method", "cuda_twin", "real_input_vjp", "quick_vjp_kernels",
    "vjp_strategy",
    # required hooks
    "prepare", "forward", "vjp", "rule",
    # optional hooks, each with a default that falls back to a required one
    "forward_numpy", "vjp_numpy", "has_vjp_numpy", "vjp_numpy_rows", "has_vjp_numpy_rows",
    "vjp_batched", "exec_spec", "exec_set_spec", "exec_rows_spec", "forward_spec",
    "input_block", "make_function",
    # read by the engine, never written
    "is_differentiable",
}
STRATEGY_MEMBERS = {
    "identity",
    "joint", "vjp_joint", "vjp_joint_numpy", "has_vjp_joint_numpy", "exec_joint_spec",
    "split", "vjp_split", "vjp_split_numpy", "exec_split_spec",
    "backward_alone",
}


def _public(cls):
    return {name for name in dir(cls) if not name.startswith("_")}


def test_the_protocol_has_the_size_the_docs_give():
    assert _public(Op) == OP_MEMBERS
    assert len(OP_MEMBERS) == 29
    assert _public(VJPStrategy) == STRATEGY_MEMBERS


def _overrides(cls, base, hook):
    """Whether a class between ``cls`` and ``base`` (not ``base``) has ``hook`` in its own
    dictionary: the override, found without :func:`registry.defines`' bookkeeping."""
    return any(hook in vars(c) for c in cls.__mro__ if c is not base and issubclass(c, base))


def _ops():
    yield from REGISTRY.values()
    yield program.ReplayInputs("replay_inputs", [0], [(2,)])
    yield program.ReplayOutput("replay_output", None, 0, None, None, ())


@pytest.mark.parametrize("hook", ["input_block", "exec_set_spec", "vjp_numpy"])
def test_derived_op_flags_agree_with_the_overrides(hook):
    for op in _ops():
        assert defines(op, hook) == _overrides(type(op), Op, hook), (op, hook)


@pytest.mark.parametrize("hook", ["identity", "joint", "split", "backward_alone",
                                  "vjp_joint_numpy"])
def test_derived_strategy_flags_agree_with_the_overrides(hook):
    for op in _ops():
        strategy = op.vjp_strategy
        assert isinstance(strategy, VJPStrategy), op
        assert defines(strategy, hook) == _overrides(type(strategy), VJPStrategy, hook), (
            op, hook)


def test_the_ops_that_said_so_still_do():
    # (the flags each of these ops set by hand before they were derived)
    for name in ("add", "multiply", "exp", "_bmm"):
        assert defines(REGISTRY[name], "exec_set_spec"), name
    assert defines(REGISTRY["getitem"], "input_block")
    assert REGISTRY["reshape"].vjp_strategy is IDENTITY
    for name, gives in (("add", {"identity", "joint"}), ("_bmm", {"joint", "split"})):
        strategy = REGISTRY[name].vjp_strategy
        assert {h for h in ("identity", "joint", "split") if defines(strategy, h)} == gives
    assert REGISTRY["sum"].vjp_strategy is ONE_PER_INPUT
    replayed = program.ReplayOutput("replay_output", None, 0, None, None, ())
    assert defines(replayed, "exec_set_spec")
    assert defines(replayed.vjp_strategy, "backward_alone")
    # (a stale output, no table: declines, and the engine plans)
    assert replayed.vjp_strategy.backward_alone(replayed, None, 1.0, (), True, False) is None


def test_the_strategies_answer_for_a_recorded_node():
    x = anb.tensor(np.arange(1.0, 4.0), requires_grad=True)
    node = (x * x)._node
    strategy = node.op.vjp_strategy
    assert strategy.joint(node.op, (0, 1), node)
    assert not strategy.identity(node.op, 0, node)  # (``g * b``: arithmetic)
    added = (x + 1.0)._node
    assert added.op.vjp_strategy.identity(added.op, 0, added)  # (``g``)
    assert not ONE_PER_INPUT.joint(node.op, (0, 1), node)


def _op_class(**body):
    return type("Stale", (Op,), dict(body, prepare=Op.prepare))


def test_a_leftover_flag_that_agrees_is_dropped():
    def vjp_numpy(self, k, grad_output, saved, attrs, grad_input):
        grad_input += grad_output

    stale = _op_class(has_vjp_numpy=True, vjp_numpy=vjp_numpy, sets_first_writes=False)
    assert "has_vjp_numpy" not in vars(stale) and "sets_first_writes" not in vars(stale)
    # (an instance made without ``__init__``, which would register it)
    assert object.__new__(stale).has_vjp_numpy(0, None, {}) is True
    assert object.__new__(_op_class()).has_vjp_numpy(0, None, {}) is False


@pytest.mark.parametrize("body, message", [
    ({"has_joint_vjp": True}, "derived"),
    ({"has_input_block": True}, "derived"),
    ({"joint_vjp": lambda self, ks, node: True}, "vjp_strategy"),
    ({"identity_vjp": lambda self, k, node: True}, "vjp_strategy"),
    ({"backward_alone": lambda self, *args: None}, "vjp_strategy"),
    ({"run": lambda self, arrays, attrs: None}, "'_run'"),
    ({"not_implemented_error": lambda self, k: None}, "'_not_implemented_error'"),
])
def test_an_op_written_to_the_older_protocol_is_told_where_it_went(body, message):
    with pytest.raises(TypeError, match=message):
        _op_class(**body)


def test_defines_reads_the_class_not_the_instance():
    op = object.__new__(_op_class())
    op.input_block = lambda attrs: 0  # (an instance's own attribute is no override)
    assert not defines(op, "input_block")
