"""The backward pass: plan the reachable part of the tape, schedule it, run the steps.

A run has three phases, so that an error changes nothing before the last:

1. :func:`make_plan` walks the graph from the outputs, orders the nodes by descending tape
   position, prunes them to those that lead to a requested target, and checks every saved
   buffer (freed by an earlier backward? modified in place since?). Nothing is written.
2. :func:`autograd_nb.engine.schedule.schedule` turns the plan into steps over gradient
   slots: the one planner of every way a backward runs.
3. An interpreter runs the steps. On the CPU, :func:`autograd_nb.engine.run_plan` first offers
   the plan to the compiled executor (:mod:`autograd_nb.engine.executor`: the steps as tables,
   one call into compiled code). :func:`run_plan` here is the Python walk, the reference, which
   runs what the executor does not take (``create_graph``, custom Functions, CUDA graphs, and
   batches of those) and gives the same results: with ``create_graph=False`` each step calls
   an op's ``@njit`` VJP kernel, which *accumulates* into the input's gradient buffer, so no
   separate add runs; with ``create_graph=True`` it evaluates the ops' differentiable rules on
   Tensors, recording them on the tape. Tier 0 (:mod:`autograd_nb.tiering`) runs the same
   walk with each kernel's NumPy twin (``Op.vjp_numpy``), which gives its bits. On CUDA (a
   node whose gradient is a device array) the buffers are device arrays and the VJPs launch
   the op's ``@cuda.jit`` kernels through :mod:`autograd_nb.cuda.dispatch`: nothing leaves the
   device. There, chains of elementwise VJPs (:func:`autograd_nb.engine.fusion.groups`) run as
   one generated kernel each (:mod:`autograd_nb.cuda.fusion`).
"""

import operator
import threading

import numpy as np

from .. import config, tape
from ..ops.registry import Saved, call
from ..tensor import Tensor, saved_tangents
from . import fusion, schedule


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


def make_plan(root_edges, target_edges, all_leaves, stop=None):
    """Plan a backward from ``root_edges`` (Nodes or leaf Tensors) to ``target_edges``.

    With ``all_leaves`` every reachable leaf (and retaining node) is a target. ``stop`` (a set
    of ``id`` of nodes among the targets) cuts the graph there: a gradient reaching such a
    node is its result, and the plan does not walk on into the node's inputs (a replayed
    call's output that another output's gradient goes through, :mod:`autograd_nb.replay`).
    """
    nodes, reachable = reach(root_edges, stop) if stop else _reach(root_edges)
    targets = {id(e) for e in target_edges}
    nodes.sort(key=_by_seq)
    needed = _needed(nodes, targets, all_leaves)
    if stop:
        needed.update(key for key in stop if key in reachable)
    run = [node for node in reversed(nodes) if id(node) in needed]
    for node in run:
        if node.freed or node.versions:
            node.check_saved()
        if node.op.not_implemented:
            _check_implemented(node, needed, targets, all_leaves)
    return Plan(run, reachable, needed)


def _check_implemented(node, needed, targets, all_leaves):
    """Raise where the plan needs the gradient of an input of ``node`` whose derivative is
    not implemented (``Op.not_implemented``): an edge the schedule would follow."""
    for k in node.op.not_implemented:
        edge = node.edges[k]
        if edge is None:
            continue
        if isinstance(edge, tape.Node):
            wanted = id(edge) in needed
        else:
            wanted = all_leaves or id(edge) in targets
        if wanted:
            raise node.op._not_implemented_error(k)


def _reach(root_edges):
    """The nodes reachable from ``root_edges``, and the ``id`` of every node and leaf met."""
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
    return nodes, reachable


def reach(root_edges, stop=()):
    """The nodes reachable from ``root_edges`` (Nodes or leaf Tensors), not walking into the
    nodes whose ``id`` is in ``stop`` (they are met, not returned), and the ``id`` of every
    node and leaf met: the first step of :func:`make_plan`, for planners of their own
    (:mod:`autograd_nb.replay` cuts a replayed call's graph with it)."""
    Node = tape.Node
    nodes = []
    reachable = set()
    stack = [e for e in root_edges if e is not None]
    while stack:
        edge = stack.pop()
        key = id(edge)
        if key in reachable:
            continue
        reachable.add(key)
        if isinstance(edge, Node) and key not in stop:
            nodes.append(edge)
            stack.extend(e for e in edge.edges if e is not None and id(e) not in reachable)
    return nodes, reachable


def _needed(nodes, targets, all_leaves):
    """``id`` of the ``nodes`` (by ascending ``seq``) that lead to a target."""
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
    return needed


_by_seq = operator.attrgetter("seq")


def unpack_inputs(node):
    """The saved inputs of ``node`` as Tensors connected to the graph, and its saved output
    (or None): the arguments of its op's differentiable ``rule``."""
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
    # (while a dual level is open, the saved values' tangents come back: forward over reverse)
    saved_tangents((*tensors, output), (*node.saved_inputs, node.saved_output))
    return tensors, output


def _leaf_view(leaf, array):
    # The op computed on a cast copy of the leaf (float32 input of a float64 op): connect the
    # copy to the leaf through a recorded cast so gradients still reach it.
    return call("astype", leaf, dtype=array.dtype)


def run_plan(plan, seeds, targets, all_leaves, retain_graph, create_graph, batch=None,
             twins=False):
    """Run ``plan``'s schedule (:func:`.schedule.schedule`) step by step; return the gradients
    by ``id`` of every target, retaining node and leaf met, and the leaves met.

    ``seeds`` is a list of ``(edge, grad)`` pairs: the output's node or leaf, and its
    grad_output (an array, or a Tensor when ``create_graph``). With ``batch``, every
    grad_output and gradient buffer has a leading batch dimension of that size, and the ops'
    batched VJPs run the whole batch at once over the shared forward values.

    The VJPs are the ops' kernels, which accumulate into a buffer (on a GPU where the
    gradients are device arrays, each fused chain one generated kernel); with
    ``create_graph`` the ops' differentiable rules, evaluated on Tensors and recorded; with
    ``twins`` (tier 0, :mod:`autograd_nb.tiering`; host arrays) the kernels' NumPy twins
    (``Op.vjp_numpy``; with ``batch``, one block of the compiled executor's rows,
    ``Op.vjp_numpy_rows``), which give the compiled backward's bits and compile nothing; a
    VJP without one runs its kernel, which compiles (:func:`has_twins` says whether any
    but quick elementwise ones will).
    """
    walk_rules = create_graph
    device = not walk_rules and not twins and _touches_device(plan, seeds)
    groups = _device_groups(plan, seeds, targets, all_leaves) if device else None
    # (an identity VJP passes a host buffer on as a view in the input's shape)
    steps = schedule.schedule(plan, seeds, targets, all_leaves, groups,
                              pass_through=not walk_rules and not device,
                              joint=not walk_rules and not device)
    lead = () if batch is None else (batch,)
    buffers = [None] * len(steps.slots)
    for s, slot in enumerate(steps.slots):
        if slot.kind == schedule.SEED:
            buffers[s] = _seed_buffer(slot.edge, seeds[slot.seed][1], walk_rules, lead)
    # The grad mode switched by stores with no call between them and the ``try`` (not
    # ``tape.grad_mode``, whose ``__exit__`` may take a Ctrl-C at its start, before it
    # switches back): an interrupted backward leaves the mode as it was.
    state = tape._state
    previous = state.enabled
    state.enabled = bool(create_graph)
    try:
        if walk_rules:
            _walk_rules(steps, buffers, retain_graph)
        else:
            _walk_kernels(steps, buffers, retain_graph, lead, batch, twins)
    finally:
        state.enabled = previous
    results = {id(edge): buffers[s] for edge, s in steps.results() if buffers[s] is not None}
    return results, steps.leaves


def has_twins(plan, batched=False):
    """Whether every VJP of ``plan``'s nodes has a NumPy twin (``Op.has_vjp_numpy``; for
    blocks of batch rows where ``batched``, ``Op.has_vjp_numpy_rows``) or is quick to compile
    (``Op.quick_vjp_kernels``: elementwise): whether tier 0's backward of ``plan`` compiles
    at most a few small loops (a special function's derivative, a C library call over more
    than ``config.TIER0_LIBM_ELEMENTS``). Any other VJP without a twin (``_bmm`` on the own
    AVX-512 GEMM, whose forward compiles that GEMM anyway, and in a batch its rows driver's
    products; ``_det`` at a zero determinant; an op registered with its own kernels) runs
    its kernel too, compiled in the process."""
    for node in plan.nodes:
        op, saved = node.op, None
        for k, edge in enumerate(node.edges):
            if edge is None or not op.is_differentiable(k) or op.quick_vjp_kernels:
                continue
            if saved is None:
                saved = Saved(node.saved_inputs, node.saved_output)
            has = op.has_vjp_numpy_rows if batched else op.has_vjp_numpy
            if not has(k, saved, node.attrs):
                return False
    return True


def _seed_buffer(edge, grad, walk_rules, lead):
    """A grad_output as its SEED slot's buffer (only read)."""
    if walk_rules:
        return grad.astype(edge.dtype) if grad.dtype != edge.dtype else grad
    if type(grad) is not np.ndarray and not isinstance(grad, (float, int)):
        from ..cuda import _device  # a CUDA device array (only read: a copy only to cast)

        if grad.dtype != edge.dtype:
            grad = _device.copy(grad, edge.dtype)
        return grad.reshape(lead + edge.shape)
    return np.ascontiguousarray(grad, dtype=edge.dtype).reshape(lead + edge.shape)


def _by_origin(steps, buffers, retain_graph):
    """The steps of both walks, each with whether it is its origin's first: a RESET step
    clears its buffer here, and unless ``retain_graph`` an origin's saved buffers are freed
    once its steps are done (the run's other nodes at the end)."""
    current = None
    for step in steps.steps:
        if step.k == schedule.RESET:  # (between a node's steps: not a change of origin)
            buffers[step.target] = None
            continue
        origin = step.origin
        first = origin is not current
        if first:
            if current is not None and not retain_graph:
                _free(current)
            current = origin
        yield step, first
    if not retain_graph:
        _free_rest(steps, current)


def _walk_kernels(steps, buffers, retain_graph, lead, batch, twins=False):
    """The steps with the ops' VJP kernels (``Op.vjp``, ``Op.vjp_batched``; their CUDA twins
    for device arrays; with ``twins`` their NumPy twins, ``Op.vjp_numpy``), each
    accumulating into its target's buffer, made at its first write."""
    slots = steps.slots
    saved = None
    for (origin, k, source, target), first in _by_origin(steps, buffers, retain_graph):
        if first and origin is not None and k != schedule.GROUP:
            saved = Saved(origin.saved_inputs, origin.saved_output)
        grad = buffers[source]
        if type(target) is tuple:  # (a JOINT step of distinct tensors: a target each)
            _split_vjp(origin, grad, saved, [_fresh(buffers, t, origin, grad, lead, slots)
                                             for t in target], lead, twins)
            continue
        edge = slots[target].edge if k < 0 else origin.edges[k]
        buffer = buffers[target]
        fresh = buffer is None
        if fresh and k == schedule.GROUP:
            # (a fused chain writes every element of its target: no zeros to add into)
            buffer = buffers[target] = _empty_on_device(lead + edge.shape, edge.dtype)
        elif fresh:
            buffer = buffers[target] = _zeros_for(origin, grad, lead + edge.shape, edge.dtype)
        if k == schedule.SEED_STEP:
            _accumulate(buffer, grad)
        elif k == schedule.GROUP:
            _run_group(origin, grad, buffer, batch, overwrite=fresh)
        elif k == schedule.JOINT:
            _joint_vjp(origin, grad, saved, buffer, lead, twins)
        else:
            _vjp(origin, k, grad, saved, buffer, lead, batch, twins)


def _vjp(node, k, grad, saved, buffer, lead, batch, twins=False):
    """Accumulate VJP ``k`` of ``node`` of ``grad`` into ``buffer`` (on the device of
    ``grad``; with ``twins``, through the op's NumPy twin). A real input's buffer receives
    the real part of a complex contribution (:func:`real_part_for`; the op's own VJP keeps
    it where ``Op.real_input_vjp``)."""
    if grad.dtype.kind == "c" and buffer.dtype.kind != "c" and not node.op.real_input_vjp:
        dtype = np.result_type(buffer.dtype, np.complex64)
        whole = _zeros_for(None, buffer, buffer.shape, dtype)  # (on the buffer's device)
        _vjp(node, k, grad, saved, whole, lead, batch, twins)
        if type(buffer) is np.ndarray:
            buffer += whole.real
        else:
            _accumulate(buffer, whole)  # (the device's addition keeps the real part)
        return
    if grad.shape[len(lead):] != node.shape:  # (a buffer passed on by an identity)
        grad = grad.reshape(lead + node.shape)
    if type(grad) is np.ndarray and np.may_share_memory(grad, buffer):
        # An identity passed this buffer on to its target, which is also this step's (both
        # edges of x + x): read a copy, so that no VJP writes into the gradient it is given.
        grad = grad.copy()
    if twins:
        _twin_vjp(node, k, grad, saved, buffer, batch)
    elif type(grad) is not np.ndarray:
        _device_vjp(node, k, grad, saved, buffer, batch)
    elif batch is None:
        node.op.vjp(k, grad, saved, node.attrs, buffer)
    else:
        node.op.vjp_batched(k, grad, saved, node.attrs, buffer)


def _joint_vjp(node, grad, saved, buffer, lead, twins):
    """Accumulate the joint VJP of ``node``'s inputs that are one tensor (a JOINT step, host
    arrays) into ``buffer``: the op's kernel, or with ``twins`` its NumPy twin where it has
    one; in a batch (``lead``, its rows) once per row, as the compiled executor runs it
    (``executor.Lowering.joint_spec``), so that each row has the bits of the same step
    outside a batch."""
    ks = schedule.joint_inputs(node)
    if grad.shape[len(lead):] != node.shape:  # (a buffer passed on by an identity)
        grad = grad.reshape(lead + node.shape)
    if np.may_share_memory(grad, buffer):
        grad = grad.copy()
    op, attrs = node.op, node.attrs
    strategy = op.vjp_strategy
    joint = (strategy.vjp_joint_numpy
             if twins and strategy.has_vjp_joint_numpy(op, ks, saved, attrs)
             else strategy.vjp_joint)
    if not lead:
        joint(op, ks, grad, saved, attrs, buffer)
        return
    for row in range(lead[0]):
        joint(op, ks, grad[row, ...], saved, attrs, buffer[row, ...])  # (a view, a 0-d row too)


def _fresh(buffers, slot, node, grad, lead, slots):
    """The buffer of ``slot``, zeros made at its first write."""
    buffer = buffers[slot]
    if buffer is None:
        edge = slots[slot].edge
        buffer = buffers[slot] = _zeros_for(node, grad, lead + edge.shape, edge.dtype)
    return buffer


def _split_vjp(node, grad, saved, targets, lead, twins):
    """Accumulate the VJPs of all of ``node``'s inputs, distinct tensors, into their buffers
    ``targets`` in one joint VJP (a JOINT step with a target each, ``VJPStrategy.split``): the
    op's kernel, or with ``twins`` its NumPy twin; in a batch once per row, as
    :func:`_joint_vjp`."""
    if grad.shape[len(lead):] != node.shape:  # (a buffer passed on by an identity)
        grad = grad.reshape(lead + node.shape)
    if any(np.may_share_memory(grad, target) for target in targets):
        grad = grad.copy()
    op, attrs = node.op, node.attrs
    split = op.vjp_strategy.vjp_split_numpy if twins else op.vjp_strategy.vjp_split
    if not lead:
        split(op, grad, saved, attrs, targets)
        return
    for row in range(lead[0]):
        split(op, grad[row, ...], saved, attrs, [target[row, ...] for target in targets])


def _twin_vjp(node, k, grad, saved, buffer, batch):
    """Tier 0's VJP: the op's NumPy twin (for a block of batch rows, ``Op.vjp_numpy_rows``);
    where it has none its kernel, compiled in the process (in a batch row by row, as the
    compiled executor runs an op without a rows driver)."""
    op, attrs = node.op, node.attrs
    if batch is None:
        if op.has_vjp_numpy(k, saved, attrs):
            op.vjp_numpy(k, grad, saved, attrs, buffer)
        else:
            op.vjp(k, grad, saved, attrs, buffer)
    elif op.has_vjp_numpy_rows(k, saved, attrs):
        op.vjp_numpy_rows(k, grad, saved, attrs, buffer)
    else:
        for b in range(batch):
            op.vjp(k, grad[b, ...], saved, attrs, buffer[b, ...])


#: The ``retain_graph`` of the innermost walk of rules on this thread (:func:`walk_retains`).
_walking = threading.local()


def walk_retains():
    """Whether the walk of differentiable rules now calling a rule retains its graph (True
    outside one): a rule that builds a graph of its own to differentiate (a replayed call's
    output re-running fn, :mod:`autograd_nb.replay`) frees it as the walk frees its nodes."""
    return getattr(_walking, "retain_graph", True)


def _walk_rules(steps, buffers, retain_graph):
    """The steps with the ops' differentiable rules (``Op.rule``) on Tensors: each adds a new
    Tensor into its target (``create_graph`` records them)."""
    outer = walk_retains()
    _walking.retain_graph = retain_graph
    try:
        _walk_rule_steps(steps, buffers, retain_graph)
    finally:
        _walking.retain_graph = outer


def _walk_rule_steps(steps, buffers, retain_graph):
    slots = steps.slots
    inputs = output = None
    for (origin, k, source, target), first in _by_origin(steps, buffers, retain_graph):
        if first and origin is not None:
            inputs, output = unpack_inputs(origin)
        grad = buffers[source]
        if k == schedule.SEED_STEP:
            contribution = grad
        else:
            contribution = origin.op.rule(k, grad, inputs, output, origin.attrs)
        edge = slots[target].edge if k < 0 else origin.edges[k]
        contribution = real_part_for(edge, contribution)
        if contribution.dtype != edge.dtype:
            contribution = contribution.astype(edge.dtype)
        current_value = buffers[target]
        buffers[target] = contribution if current_value is None else current_value + contribution


def real_part_for(edge, contribution):
    """``contribution`` to the gradient of ``edge``, its real part where ``edge`` is real and
    it is complex (torch's ``handle_r_to_c``: a real input of an op that computed in complex,
    ``x * 1j``, has the real part of the complex gradient, ``dL/dx``). The kernels' walk keeps
    the same part in :func:`_vjp`; the compiled executor runs plans of one dtype only."""
    if contribution.dtype.kind == "c" and edge.dtype.kind != "c":
        return call("_real", contribution)
    return contribution


def _free(origin):
    """Free the saved buffers of a node, or of a fused group's nodes."""
    if type(origin) is fusion.Group:
        for node in origin.nodes:
            node.free()
    elif origin is not None:
        origin.free()


def _free_rest(steps, last):
    """Free the last origin walked, and the nodes of the run with no step (no input wanted a
    gradient)."""
    _free(last)
    for node in steps.ran:
        if not node.freed:
            node.free()


def _accumulate(buffer, grad):
    if type(buffer) is np.ndarray:
        buffer += grad
    else:
        from ..cuda import _device

        _device.add_into(buffer, grad)


def _device_groups(plan, seeds, targets, all_leaves):
    """The fusion groups of a plan that runs on the GPU, by ``id`` of every member node (CPU
    graphs fuse in the compiled executor, not in this walk)."""
    if not config.CUDA_FUSE_BACKWARD:
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


def _run_group(group, grad, buffer, batch, overwrite=False):
    """Run a fused chain from its head's gradient ``grad`` (a device array) into its target's
    buffer (storing into it where ``overwrite``: a fresh buffer, not added into)."""
    from ..cuda import fusion as cuda_fusion

    cuda_fusion.run_group(group, grad, buffer, 1 if batch is None else batch, overwrite)


def _empty_on_device(shape, dtype):
    from ..cuda import _device

    return _device.empty(shape, dtype)


def _zeros_for(node, grad, shape, dtype):
    """A zero gradient buffer for an input of ``node``, on that input's device: the device of
    the node's gradient, except across a transfer op (``input_device``); for a grad_output
    (``node`` None), its device."""
    device = None if node is None else getattr(node.op, "input_device", None)
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
