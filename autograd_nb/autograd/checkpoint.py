"""``checkpoint``: trade compute for memory, with ``torch.utils.checkpoint.checkpoint``'s
semantics.

The forward runs ``fn`` once and keeps only its inputs: one node (a :class:`Function`)
stands for the whole of ``fn`` in the graph. Its backward runs ``fn`` again with grad mode
on, from the same inputs and NumPy's global random state, and backpropagates through that
recomputed graph, which goes as soon as the backward is done.

``fn`` may read tensors from outside its arguments (a closure's parameters): the forward
records ``fn`` once (its graph is dropped right after) to find the leaves it reaches, and
those become inputs of the node too, so they receive gradients as they would without the
checkpoint.
"""

import warnings

import numpy as np

from .. import tape
from ..tensor import Tensor
from . import _tree
from .api import grad, recorder_trace
from .function import Function

REENTRANT_WARNING = (
    "anb.checkpoint: the use_reentrant parameter should be passed explicitly, as "
    "torch.utils.checkpoint asks. use_reentrant=False is recommended; both variants run the "
    "same implementation here, and use_reentrant=True only refuses keyword arguments, as "
    "torch's reentrant variant does."
)

CLOSURE_NODE = (
    "anb.checkpoint: the checkpointed function reads a tensor that requires grad, is not a "
    "leaf and is not one of its arguments (it comes from a closure or a global). Pass it as "
    "an argument of the function."
)


#: Why a signature of ``anb.compile`` that checkpoints runs eagerly (its CompileWarning).
RECORDING = (
    "anb.checkpoint (a program cannot recompute a segment in its backward yet; eagerly, "
    "the memory stays bounded)"
)


class _State:
    """What the forward hands to the backward besides the saved tensors."""

    __slots__ = (
        "function", "leaves", "structure", "positions", "rng", "outputs", "meta", "check",
    )


def checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True,
               determinism_check="default", **kwargs):
    """Run ``function(*args, **kwargs)`` without keeping its intermediate values; recompute
    them in backward.

    The gradients are those of ``function(*args, **kwargs)`` called directly, bit for bit
    (the recomputation runs the same ops on the same values). Only ``args`` (and the
    tensors ``function`` reads from closures) are kept between the forward and the
    backward, so the memory of a long chain falls to its inputs and outputs.

    Parameters
    ----------
    function : callable
        Takes ``*args, **kwargs`` and returns a Tensor or a tuple/list/dict of them (other
        values allowed).
    *args, **kwargs
        Its arguments: Tensors (nested in tuples, lists and dicts too) and other values.
    use_reentrant : bool, optional
        torch asks for it explicitly and warns when it is left out (defaulting to ``True``);
        so does this function. Both values run the same implementation, which supports
        ``grad``, ``backward(inputs=...)`` and ``create_graph=True``; ``True`` refuses
        keyword arguments, as torch's reentrant variant does.
    preserve_rng_state : bool, default True
        Restore NumPy's global random state (``np.random``) before the recomputation, so a
        function that draws from it sees the same numbers twice.
    determinism_check : {"default", "none"}
        ``"default"`` checks that the recomputed outputs have the forward's shapes and
        dtypes (RuntimeError otherwise).

    Returns
    -------
    What ``function`` returned; its Tensors require grad where they depend on a tensor
    that does.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([0.5, 1.0], requires_grad=True)
    >>> def block(x):
    ...     return anb.sin(anb.exp(x)) * x
    >>> y = anb.checkpoint(block, x, use_reentrant=False)
    >>> y.grad_fn
    <CheckpointFunctionBackward>
    >>> anb.grad(y.sum(), x)[0].tolist() == anb.grad(block(x).sum(), x)[0].tolist()
    True
    """
    if use_reentrant is None:
        warnings.warn(REENTRANT_WARNING, stacklevel=2)
        use_reentrant = True
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    if determinism_check not in ("default", "none"):
        raise ValueError(
            "determinism_check should be one of ['default', 'none'], but got "
            f"{determinism_check!r}"
        )
    if not tape.is_grad_enabled():
        return function(*args, **kwargs)
    trace = recorder_trace()
    if trace is not None:
        trace.refuse(RECORDING)
    leaves, structure = _tree.flatten((args, kwargs))
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, Tensor)]
    state = _State()
    state.function, state.structure, state.positions = function, structure, positions
    state.leaves = [None if i in set(positions) else leaf for i, leaf in enumerate(leaves)]
    state.rng = np.random.get_state() if preserve_rng_state else None
    state.check = determinism_check == "default"
    explicit = [leaves[i] for i in positions]
    stand_ins = [_detached(t, t.requires_grad) for t in explicit]
    start = next(tape._sequence)
    outputs = _call(state, stand_ins)
    out_leaves, out_structure = _tree.flatten(outputs)
    closure = _closure_leaves(out_leaves, start, {id(s) for s in stand_ins})
    state.outputs = [
        _detached(o, False) if isinstance(o, Tensor) else o for o in out_leaves
    ]
    differentiable = [isinstance(o, Tensor) and o.requires_grad for o in out_leaves]
    state.meta = [
        (o.shape, o.dtype) if isinstance(o, Tensor) else None for o in out_leaves
    ]
    del outputs, out_leaves, stand_ins  # (the recorded graph goes here)
    results = CheckpointFunction.apply(state, differentiable, *explicit, *closure)
    return _tree.unflatten(out_structure, results)


def _detached(tensor, requires_grad):
    """A leaf sharing ``tensor``'s data and version counter."""
    return Tensor._make(tensor._data, requires_grad=requires_grad, version=tensor._version)


def _call(state, tensors):
    leaves = list(state.leaves)
    for i, t in zip(state.positions, tensors, strict=True):
        leaves[i] = t
    args, kwargs = _tree.unflatten(state.structure, leaves)
    with tape.grad_mode(True):
        return state.function(*args, **kwargs)


def _closure_leaves(out_leaves, start, inner):
    """The leaves requiring grad that the graph recorded since ``start`` reaches, other
    than the stand-ins of the arguments (``inner``: their ids), in a stable order."""
    found = {}
    stack = []
    for out in out_leaves:
        if isinstance(out, Tensor) and out.requires_grad:
            _visit(out, out._node, start, inner, found, stack)
    seen = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for edge in node.edges:
            if edge is None:
                continue
            if isinstance(edge, Tensor):
                _visit(edge, None, start, inner, found, stack)
            else:
                _visit(None, edge, start, inner, found, stack)
    return list(found.values())


def _visit(tensor, node, start, inner, found, stack):
    if node is None:
        if id(tensor) not in inner:
            found.setdefault(id(tensor), tensor)
    elif node.seq > start:
        stack.append(node)
    else:
        raise RuntimeError(CLOSURE_NODE)


class CheckpointFunction(Function):
    """The node that stands for a checkpointed function (its grad_fn prints as
    ``<CheckpointFunctionBackward>``)."""

    @staticmethod
    def forward(ctx, state, differentiable, *tensors):
        ctx.state = state
        ctx.save_for_backward(*tensors)
        outputs = []
        for out, flag in zip(state.outputs, differentiable, strict=True):
            if isinstance(out, Tensor):
                out = Tensor._make(out._data, version=out._version)
                if not flag:
                    ctx.mark_non_differentiable(out)
            outputs.append(out)
        state.outputs = None  # (the node's outputs hold them now)
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *grad_outputs):
        state = ctx.state
        saved = ctx.saved_tensors
        needs = ctx.needs_input_grad[2:]
        n = len(state.positions)
        explicit, closure = list(saved[:n]), list(saved[n:])
        if tape.is_grad_enabled():  # create_graph
            return (None, None, *_higher_order(state, explicit, closure, needs, grad_outputs))
        stand_ins = [_detached(t, flag) for t, flag in zip(explicit, needs, strict=False)]
        return (None, None, *_vjp(state, stand_ins, closure, needs, grad_outputs, False))


def _vjp(state, stand_ins, closure, needs, grad_outputs, create_graph):
    """The gradients of the recomputed outputs at ``grad_outputs``, with respect to the
    arguments' stand-ins (leaves: the gradient stops there, never counting a path through
    another argument twice) and the closure's leaves."""
    outputs = _recompute(state, stand_ins)
    targets = [(k, t) for k, t in enumerate(stand_ins + closure) if needs[k]]
    pairs = [
        (o, g) for o, g in zip(outputs, grad_outputs, strict=True)
        if isinstance(o, Tensor) and o.requires_grad and g is not None
    ]
    result = [None] * len(needs)
    if not pairs or not targets:
        return result
    grads = grad(
        [o for o, _ in pairs], [t for _, t in targets],
        grad_outputs=[g for _, g in pairs], allow_unused=True, create_graph=create_graph,
    )
    for (k, _), g in zip(targets, grads, strict=True):
        result[k] = g
    return result


def _higher_order(state, explicit, closure, needs, grad_outputs):
    """With ``create_graph``: the first-order gradients as a checkpointed function of the
    arguments and the grad_outputs, so that they are differentiated again (recomputing once
    more) while the arguments' stand-ins stay leaves."""
    given = [g for g in grad_outputs if isinstance(g, Tensor)]

    def first_order(stand_ins, given_in):
        it = iter(given_in)
        full = [next(it) if isinstance(g, Tensor) else g for g in grad_outputs]
        return tuple(_vjp(state, list(stand_ins), closure, needs, full, True))

    return checkpoint(
        first_order, tuple(explicit), tuple(given), use_reentrant=False,
        preserve_rng_state=False,  # (the recomputation inside restores state.rng itself)
    )


def _recompute(state, stand_ins):
    current = None
    if state.rng is not None:
        current = np.random.get_state()
        np.random.set_state(state.rng)
    try:
        outputs = _call(state, stand_ins)
    finally:
        if current is not None:
            np.random.set_state(current)
    leaves, _ = _tree.flatten(outputs)
    if len(leaves) != len(state.meta):
        raise RuntimeError(
            f"anb.checkpoint: the recomputation returned {len(leaves)} values; the forward "
            f"returned {len(state.meta)}. The checkpointed function must be deterministic."
        )
    if state.check:
        _check_metadata(leaves, state.meta)
    return leaves


def _check_metadata(leaves, meta):
    for i, (out, expected) in enumerate(zip(leaves, meta, strict=True)):
        got = (out.shape, out.dtype) if isinstance(out, Tensor) else None
        if got != expected:
            raise RuntimeError(
                "anb.checkpoint: recomputed values have different metadata than during the "
                f"forward pass: output {i} had (shape, dtype) {expected} in the forward and "
                f"{got} in the recomputation. The checkpointed function must be "
                "deterministic."
            )
