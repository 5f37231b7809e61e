"""The backward pass: plan the reachable part of the tape, then run the VJPs in reverse order.

A run has two phases, so that an error changes nothing:

1. :func:`make_plan` walks the graph from the outputs, orders the nodes by descending tape
   position, prunes them to those that lead to a requested target, and checks every saved
   buffer (freed by an earlier backward? modified in place since?). Nothing is written.
2. :func:`run_plan` seeds the gradient slots with the grad_outputs and visits the nodes. With
   ``create_graph=False`` it calls each op's ``@njit`` VJP kernels, which *accumulate* into
   the input's gradient slot, so no separate add runs; with ``create_graph=True`` it evaluates
   the ops' differentiable rules on Tensors, recording them on the tape. On CUDA (a node whose
   gradient is a device array) the slots are device arrays and the VJPs launch the op's
   ``@cuda.jit`` kernels through :mod:`autograd_nb.cuda.dispatch`: nothing leaves the device.
   There, chains of elementwise VJPs (:func:`autograd_nb.engine.fusion.groups`) run as one
   generated kernel each (:mod:`autograd_nb.cuda.fusion`), launched when the walk reaches the
   chain's head; the chain's other nodes are skipped.

On the CPU, :func:`autograd_nb.engine.run_plan` first offers the plan to the compiled
executor (:mod:`autograd_nb.engine.executor`: phase 2 in one call into compiled code); this
walk runs what it does not take (``create_graph``, custom Functions, CUDA graphs, and
batches of those) and gives the same results.
"""

import operator

import numpy as np

from .. import config, tape
from ..ops.registry import Saved
from ..tensor import Tensor
from . import fusion


class Plan:
    """The nodes to run, in order, and where each target's gradient is found.

    Attributes
    ----------
    nodes : list of Node
        Reachable nodes that lead to a target, by descending ``seq``.
    reachable : set of int
        ``id`` of every node and leaf reached from the outputs.
    """

    __slots__ = ("nodes", "reachable", "needed")

    def __init__(self, nodes, reachable, needed):
        self.nodes = nodes
        self.reachable = reachable
        self.needed = needed


def _key(edge):
    return id(edge)


def make_plan(root_edges, target_edges, all_leaves):
    """Plan a backward from ``root_edges`` (Nodes or leaf Tensors) to ``target_edges``.

    With ``all_leaves`` every reachable leaf (and retaining node) is a target.
    """
    # The hot Python of every backward: local names, no generator per node.
    Node = tape.Node
    nodes = []
    reachable = set()
    add = reachable.add
    stack = [e for e in root_edges if e is not None]
    pop, push = stack.pop, stack.append
    while stack:
        edge = pop()
        key = id(edge)
        if key in reachable:
            continue
        add(key)
        if isinstance(edge, Node):
            nodes.append(edge)
            for e in edge.edges:
                if e is not None and id(e) not in reachable:
                    push(e)
    targets = {id(e) for e in target_edges}
    nodes.sort(key=_by_seq)
    needed = set()
    for node in nodes:  # ascending: a node's inputs are decided before it
        key = id(node)
        if all_leaves or key in targets or node.retained:
            needed.add(key)
            continue
        for edge in node.edges:
            if edge is not None and (id(edge) in needed or id(edge) in targets):
                needed.add(key)
                break
    run = [node for node in reversed(nodes) if id(node) in needed]
    for node in run:
        if node.freed or node.versions:
            node.check_saved()
    return Plan(run, reachable, needed)


_by_seq = operator.attrgetter("seq")


def _edge_wanted(edge, plan, targets, all_leaves):
    if edge is None:
        return False
    if isinstance(edge, tape.Node):
        return id(edge) in plan.needed
    return all_leaves or id(edge) in targets


def _unpack_inputs(node):
    """The saved inputs as Tensors connected to the graph (for differentiable rules)."""
    tensors = []
    for k, array in enumerate(node.saved_inputs):
        if array is None:
            tensors.append(None)
            continue
        edge = node.edges[k]
        if edge is None:
            tensors.append(Tensor._make(array))
        elif isinstance(edge, tape.Node):
            if array.shape != edge.shape and array.size == np.prod(edge.shape):
                # Saved as a view in another shape (``_bmm``'s views): the gradient the rule
                # gives this Tensor goes to ``edge``, so it must have ``edge``'s shape.
                array = array.reshape(edge.shape)
            tensors.append(Tensor._make(array, node=edge))
        else:
            tensors.append(edge if edge._data is array else _leaf_view(edge, array))
    output = None
    if node.saved_output is not None:
        output = Tensor._make(node.saved_output, node=node)
    return tensors, output


def _leaf_view(leaf, array):
    # The op computed on a cast copy of the leaf (float32 input of a float64 op): connect the
    # copy to the leaf through a recorded cast so gradients still reach it.
    from ..ops.registry import call

    return call("astype", leaf, dtype=array.dtype)


def run_plan(plan, seeds, targets, all_leaves, retain_graph, create_graph, batch=None,
             rules=False):
    """Run ``plan``; return the gradient slots by ``id`` of node/leaf and the leaves met.

    With ``rules`` (tier 0, :mod:`autograd_nb.tiering`; ``create_graph`` false, no batch)
    the VJPs are the ops' differentiable rules, evaluated without recording, as for
    ``create_graph``; the gradients come back as arrays.

    ``seeds`` is a list of ``(edge, grad)`` pairs: the output's node or leaf, and its
    grad_output (an array, or a Tensor when ``create_graph``). With ``batch``, every
    grad_output and gradient slot has a leading batch dimension of that size, and the ops'
    batched VJPs run the whole batch at once over the shared forward values.

    A VJP that is the identity (``reshape``, ``add`` and other elementwise ops whose
    derivative formula is ``g``, on an input of the output's shape and dtype) into an input
    with no gradient yet passes the node's gradient buffer on as that input's, a view in the
    input's shape, instead of zeroing a new buffer and copying into it: at most one input per
    node, and only for a buffer this run owns (not a node asked for, nor one that retains
    its gradient).
    """
    slots = {}
    leaves = {}
    captured = {}
    lead = () if batch is None else (batch,)
    walk_rules = create_graph or rules
    for edge, grad in seeds:
        if rules:
            grad = Tensor._make(grad)
        _add_into(slots, edge, grad, walk_rules, lead)
        if not isinstance(edge, tape.Node):
            leaves[id(edge)] = edge
    groups = {} if walk_rules else _device_groups(plan, seeds, targets, all_leaves)
    previous_mode = tape.set_grad_enabled_flag(create_graph)
    try:
        for node in plan.nodes:
            key = id(node)
            grad = slots.pop(key, None)
            if grad is None:
                continue
            captured[key] = grad
            group = groups.get(key) if groups else None
            if group is not None and group.head is node and type(grad) is not np.ndarray:
                _run_group(group, grad, slots, leaves, lead, batch)
                if not retain_graph:
                    for member in group.nodes:
                        member.free()
                continue
            if walk_rules:
                inputs, output = _unpack_inputs(node)
            op = node.op
            movable = (
                not walk_rules and type(grad) is np.ndarray and key not in targets
                and not node.retained and op.has_identity_vjp
            )
            for k, edge in enumerate(node.edges):
                if not _edge_wanted(edge, plan, targets, all_leaves):
                    continue
                if not isinstance(edge, tape.Node):
                    leaves[id(edge)] = edge
                if walk_rules:
                    contribution = node.op.rule(k, grad, inputs, output, node.attrs)
                    _add_into(slots, edge, contribution, True)
                    continue
                buffer = slots.get(id(edge))
                if (
                    buffer is None and movable and grad.dtype == edge.dtype
                    and op.identity_vjp(k, node)
                ):
                    slots[id(edge)] = grad.reshape(lead + edge.shape)
                    movable = False
                    continue
                if buffer is None:
                    buffer = _zeros_for(node, grad, lead + edge.shape, edge.dtype)
                    slots[id(edge)] = buffer
                saved = Saved(node.saved_inputs, node.saved_output)
                if type(grad) is not np.ndarray:
                    _device_vjp(node, k, grad, saved, buffer, batch)
                elif batch is None:
                    node.op.vjp(k, grad, saved, node.attrs, buffer)
                else:
                    node.op.vjp_batched(k, grad, saved, node.attrs, buffer)
            if not retain_graph:
                node.free()
    finally:
        tape.set_grad_enabled_flag(previous_mode)
    captured.update(slots)
    if rules:  # fresh arrays, as the kernels' walk gives (a rule may pass a seed through)
        captured = {key: np.array(value._data, copy=True) for key, value in captured.items()}
    return captured, leaves


def _device_groups(plan, seeds, targets, all_leaves):
    """The fusion groups of a plan that runs on the GPU, by ``id`` of every member node; ``{}``
    for a host-only plan (CPU graphs fuse in the compiled executor, not here)."""
    if not _touches_device(plan, seeds):
        return {}
    from ..cuda import fusion as cuda_fusion

    if not cuda_fusion.ENABLED:
        return {}
    roots = {id(edge) for edge, _ in seeds}
    return fusion.groups(plan, targets, all_leaves, roots, config.CUDA_FUSION_MIN_ELEMENTS)


def _touches_device(plan, seeds):
    """Whether some gradient of ``plan`` lives on the GPU: a seed is a device array, or a
    transfer op (``x.cuda()``, ``.cpu()``) crosses devices."""
    if any(type(grad) is not np.ndarray for _, grad in seeds):  # (NumPy seeds: no import)
        from ..cuda import _device

        if _device.any_device_array(grad for _, grad in seeds):
            return True
    return any(getattr(node.op, "input_device", None) is not None for node in plan.nodes)


def _run_group(group, grad, slots, leaves, lead, batch):
    """Run a fused chain from its head's gradient ``grad`` (a device array) into its target's
    slot, which it creates and records (as a leaf met) as the chain's last VJP would have."""
    from ..cuda import fusion as cuda_fusion

    target = group.target
    key = id(target)
    if not isinstance(target, tape.Node):
        leaves[key] = target
    buffer = slots.get(key)
    if buffer is None:
        buffer = _zeros_for(group.nodes[-1], grad, lead + target.shape, target.dtype)
        slots[key] = buffer
    cuda_fusion.run_group(group, grad, buffer, 1 if batch is None else batch)


def _add_into(slots, edge, grad, create_graph, lead=()):
    key = id(edge)
    current = slots.get(key)
    if create_graph:
        if grad.dtype != edge.dtype:
            grad = grad.astype(edge.dtype)
        slots[key] = grad if current is None else current + grad
    elif type(grad) is not np.ndarray:  # a CUDA device array: the slot stays on the device
        from ..cuda import _device

        if current is None:
            slots[key] = _device.copy(grad, edge.dtype).reshape(lead + edge.shape)
        else:
            _device.add_into(current, grad)
    elif current is None:
        slots[key] = np.array(grad, dtype=edge.dtype, copy=True).reshape(lead + edge.shape)
    else:
        current += grad


def _zeros_for(node, grad, shape, dtype):
    """A zero gradient buffer for an input of ``node``, on that input's device: the device of
    the node's gradient, except across a transfer op (``input_device``)."""
    device = getattr(node.op, "input_device", None)
    if device is None:
        device = "cpu" if type(grad) is np.ndarray else "cuda"
    if device == "cpu":
        return np.zeros(shape, dtype=dtype)
    from ..cuda import _device

    return _device.zeros(shape, dtype)


def _device_vjp(node, k, grad, saved, buffer, batch):
    """A VJP whose grad_output is a device array: the op's CUDA implementation runs it."""
    from ..cuda import dispatch

    if batch is None:
        dispatch.vjp(node.op, k, grad, saved, node.attrs, buffer)
    else:
        dispatch.vjp_batched(node.op, k, grad, saved, node.attrs, buffer)
