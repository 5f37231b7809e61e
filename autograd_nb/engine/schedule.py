"""The one planner of a backward: a plan's nodes become a list of steps over gradient slots.

:func:`autograd_nb.engine.backward.make_plan` decides *which* nodes run (pruned, ordered,
checked); :func:`schedule` decides *how*, once for every way a backward runs: which buffer
holds each gradient, which buffers are handed back, which are reused, where a VJP is the
identity and passes its buffer on, which elementwise chains run fused. Each interpreter walks
the same :class:`Schedule`:

* :func:`.executor.lower` writes it as rows of one table (:mod:`.machine`, whose docstring
  gives the format), which the machine runs in one call into compiled code, with or without a
  batch; the plan cache (:mod:`.plan_cache`) keeps those tables as templates, and
  ``anb.compile`` (:mod:`autograd_nb.replay`) lowers the same schedules into its programs'
  buffers;
* the Python walk (:mod:`.backward`), the reference, runs it op by op: with the ops' VJP
  kernels, on CUDA device arrays, or with their differentiable rules (``create_graph``, and
  tier 0 of :mod:`autograd_nb.tiering`).

A *slot* is one gradient buffer (:class:`Slot`): ``ARENA`` for an intermediate gradient, which
the run owns and reuses once consumed; ``RESULT`` for a gradient handed back (a target, a leaf
met, a node that retains its gradient); ``SEED`` for a caller's grad_output that is only read
(the gradient of the newest node, seeded once: usually the loss's ``1``).

A *step* (:class:`Step`) accumulates into its ``target`` slot: the VJP of ``origin``'s input
``k`` of the gradient in slot ``source``; a fused chain (``k == GROUP``, ``origin`` a
:class:`autograd_nb.engine.fusion.Group`); the joint VJP of ``origin``'s inputs that are one
tensor (``k == JOINT``: the inputs :func:`joint_inputs` names, the op's
``VJPStrategy.joint``), or of all its inputs, distinct tensors, each into its own gradient
(``k == JOINT`` with ``target`` a tuple of slots, one per input: ``VJPStrategy.split``,
``outer(x, y)``); a grad_output (``k == SEED``: ``source`` is its SEED slot); or it clears a
reused slot (``k == RESET``, ``origin`` None). Every step that writes a slot follows the step
that made it, so an interpreter may create a buffer at its first write.
"""

from typing import NamedTuple

from .. import config, tape
from ..ops.registry import defines

#: Slot kinds.
ARENA, RESULT, SEED = range(3)
#: ``Step.k`` of a step that is not one input's VJP.
GROUP, SEED_STEP, RESET, JOINT = -1, -2, -3, -4
#: ``_Planner.joined`` of a node with no JOINT step.
_NONE_JOINED = {}


class Slot(NamedTuple):
    """One gradient buffer: its kind, the edge whose gradient it first holds (a Node or a
    leaf; a reused ARENA slot holds others later, of the same shape and dtype), and for a
    SEED slot the index of its grad_output."""

    kind: int
    edge: object
    seed: int = -1


class Step(NamedTuple):
    """Accumulate into slot ``target`` (a tuple of slots for a JOINT step of distinct
    tensors; see the module docstring for ``k``)."""

    origin: object
    k: int
    source: int
    target: object


_Node = tape.Node
_new = tuple.__new__  # (a Step without NamedTuple's keyword-taking constructor: it is hot)


class Schedule:
    """A plan's steps, slots and what they give back.

    Attributes
    ----------
    steps : list of Step
        In order.
    slots : list of Slot
    slot_of : dict
        ``id`` of node or leaf -> its slot (after the run: the last one it had).
    ran : list of Node
        The nodes whose gradient was computed (a fused group's members included), in order;
        their saved buffers may be freed after the run.
    leaves : dict
        ``id`` -> the leaves given a gradient, in the order met.
    """

    __slots__ = ("steps", "slots", "slot_of", "ran", "leaves")

    def __init__(self):
        self.steps = []
        self.slots = []
        self.slot_of = {}
        self.ran = []
        self.leaves = {}

    def results(self):
        """``(edge, slot)`` of every RESULT slot."""
        return [(slot.edge, s) for s, slot in enumerate(self.slots) if slot.kind == RESULT]


def joint_inputs(node):
    """The inputs of ``node`` that a JOINT step covers, or None: those whose edge is the
    first edge that ``node`` has more than once."""
    edges = node.edges
    for k, edge in enumerate(edges):
        if edge is not None:
            ks = tuple(j for j in range(k, len(edges)) if edges[j] is edge)
            if len(ks) > 1:
                return ks
    return None


def schedule(plan, seeds, targets, all_leaves, groups=None, pass_through=True, joint=False):
    """The steps of ``plan`` (see the module docstring).

    ``seeds`` are ``(edge, grad_output)`` pairs (only the edges are read), ``targets`` the
    ``id`` of the edges asked for, ``groups`` the fused chains by ``id`` of their member nodes
    (:func:`autograd_nb.engine.fusion.groups`), and ``pass_through`` whether an identity VJP
    (the op's ``VJPStrategy.identity``) may hand its ARENA slot on to the input, with no step:
    at most one input per node, one with no slot yet, not asked for nor retaining, of the
    node's dtype. With ``joint`` (and ``config.JOINT_VJPS``), a node's inputs that are one
    tensor run as one JOINT step where the op says so (``VJPStrategy.joint``), and so do all
    its inputs where they are distinct tensors that each receive a gradient
    (``VJPStrategy.split``: a target each).
    """
    planner = _Planner(plan, targets, all_leaves, pass_through,
                       joint and config.JOINT_VJPS)
    planner.seed(seeds)
    out = planner.out
    for node in plan.nodes:
        slot = out.slot_of.get(id(node))
        if slot is None:
            continue  # (no gradient reached it)
        out.ran.append(node)
        group = groups.get(id(node)) if groups else None
        if group is not None:
            planner.group(group, slot)
        else:
            planner.node(node, slot)
    return out


class _Planner:
    """The state of one :func:`schedule`: its output, and the ARENA slots consumed, by shape
    and dtype, to reuse."""

    def __init__(self, plan, targets, all_leaves, pass_through, joint):
        self.out = Schedule()
        self.joint = joint
        self.plan = plan
        self.targets = targets
        self.all_leaves = all_leaves
        self.pass_through = pass_through
        self.free = {}

    def seed(self, seeds):
        """The grad_outputs: the newest node's, when it is seeded once and not asked for, is
        its SEED slot as it is (only read); every other one is accumulated into its edge's
        slot."""
        out = self.out
        nodes = self.plan.nodes
        newest = nodes[0] if nodes else None
        seeded = [id(edge) for edge, _ in seeds]
        for index, (edge, _) in enumerate(seeds):
            key = id(edge)
            slot = out.slot_of.get(key)
            out.slots.append(Slot(SEED, edge, index))
            seed_slot = len(out.slots) - 1
            if (
                slot is None and edge is newest and key not in self.targets
                and not edge.retained and seeded.count(key) == 1
            ):
                out.slot_of[key] = seed_slot
                continue
            if slot is None:
                slot = self.slot(edge)
            out.steps.append(Step(None, SEED_STEP, seed_slot, slot))
            if not isinstance(edge, tape.Node):
                out.leaves[key] = edge

    def group(self, group, slot):
        """A fused chain from its head's ``slot`` into its target's."""
        out = self.out
        out.ran.extend(group.nodes[1:])
        target = group.target
        if not isinstance(target, tape.Node):
            out.leaves[id(target)] = target
        target_slot = out.slot_of.get(id(target))
        if target_slot is None:
            target_slot = self.slot(target)
        out.steps.append(Step(group, GROUP, slot, target_slot))
        self.release(group.head, slot)

    def node(self, node, slot):
        """The VJPs of ``node``, reading its gradient's ``slot`` (the hot loop of planning a
        backward: local names)."""
        out = self.out
        slot_of = out.slot_of
        steps = out.steps
        needed = self.plan.needed
        Node = _Node
        strategy = node.op.vjp_strategy
        passable = (self.pass_through and out.slots[slot].kind == ARENA
                    and defines(strategy, "identity"))
        joint = self.joint
        joined = self.joined(node) if joint and defines(strategy, "joint") else _NONE_JOINED
        if (joined is _NONE_JOINED and joint and defines(strategy, "split")
                and self.split(node, slot)):
            return
        k = -1
        for edge in node.edges:
            k += 1
            step_k = joined.get(k, k)
            if edge is None or step_k is None:
                continue
            key = id(edge)
            if type(edge) is Node or isinstance(edge, Node):
                if key not in needed:
                    continue
                if (passable and step_k >= 0 and key not in slot_of
                        and self.passes(node, k, edge)):
                    slot_of[key] = slot
                    passable = None  # (passed on: the slot is the input's now)
                    continue
            elif self.all_leaves or key in self.targets:
                out.leaves[key] = edge
            else:
                continue
            target = slot_of.get(key)
            if target is None:
                target = self.slot(edge)
            steps.append(_new(Step, (node, step_k, slot, target)))
        if passable is not None:
            self.release(node, slot)

    def joined(self, node):
        """The step kind of each input of ``node`` that one JOINT step covers: JOINT for the
        first, None (no step) for the others."""
        ks = joint_inputs(node)
        if ks is None or not node.op.vjp_strategy.joint(node.op, ks, node):
            return _NONE_JOINED
        return dict.fromkeys(ks[1:], None) | {ks[0]: JOINT}

    def split(self, node, slot):
        """One JOINT step with a target per input where ``node``'s inputs are distinct tensors
        that each receive a gradient and the op says so (``VJPStrategy.split``); whether it was
        made."""
        edges = node.edges
        if len({id(edge) for edge in edges}) != len(edges):
            return False
        for edge in edges:
            if edge is None:
                return False
            needed = (id(edge) in self.plan.needed if isinstance(edge, _Node)
                      else self.all_leaves or id(edge) in self.targets)
            if not needed:
                return False
        if not node.op.vjp_strategy.split(node.op, node):
            return False
        out = self.out
        targets = []
        for edge in edges:
            if not isinstance(edge, _Node):
                out.leaves[id(edge)] = edge
            target = out.slot_of.get(id(edge))
            targets.append(self.slot(edge) if target is None else target)
        out.steps.append(Step(node, JOINT, slot, tuple(targets)))
        self.release(node, slot)
        return True

    def passes(self, node, k, edge):
        """Whether ``node``'s VJP ``k`` may hand its slot on to the node ``edge`` (no slot
        yet)."""
        return (
            id(edge) not in self.targets
            and not edge.retained and edge.dtype == node.dtype
            and node.op.vjp_strategy.identity(node.op, k, node)
        )

    def release(self, node, slot):
        """``node``'s gradient is consumed: its ARENA slot may be reused."""
        if self.out.slots[slot].kind == ARENA:
            key = (node.shape, node.dtype)
            reusable = self.free.get(key)
            if reusable is None:
                self.free[key] = [slot]
            else:
                reusable.append(slot)

    def slot(self, edge):
        """The slot that first receives ``edge``'s gradient: a RESULT slot for a leaf, a
        target or a node that retains its gradient; else an ARENA slot, a consumed one of its
        shape and dtype where there is one (cleared first by a RESET step)."""
        out = self.out
        key = id(edge)
        slots = out.slots
        if type(edge) is not _Node and not isinstance(edge, _Node) or (
            key in self.targets or edge.retained
        ):
            slot = len(slots)
            slots.append(_new(Slot, (RESULT, edge, -1)))
        else:
            reusable = self.free.get((edge.shape, edge.dtype))
            if reusable:
                # (the slot keeps its first edge: one of the same shape and dtype)
                slot = reusable.pop()
                out.steps.append(_new(Step, (None, RESET, slot, slot)))
            else:
                slot = len(slots)
                slots.append(_new(Slot, (ARENA, edge, -1)))
        out.slot_of[key] = slot
        return slot
