"""Recording: what ran, on which buffers, what it saved, and the versions of what it saved.

Each differentiable op that runs with grad mode on appends an entry, a :class:`Node`, that
becomes the ``grad_fn`` of its result. The tape is not a global list: a node is owned by the
tensors (and later nodes) that reach it, and goes when they go, so a training loop of any length
runs in constant memory. "Reverse tape order" is the descending order of ``Node.seq``, a counter
taken when the op ran; it is a valid topological order because an op runs after its inputs.
"""

import itertools
import threading


class _State(threading.local):
    # A class default: reading it never takes the slow failing-lookup path of getattr.
    enabled = True


_state = _State()
_sequence = itertools.count()


def is_grad_enabled():
    """Whether ops run now are recorded for differentiation (per thread; on by default)."""
    return _state.enabled


def set_grad_enabled_flag(flag):
    """Set this thread's grad mode; returns the previous mode."""
    previous = is_grad_enabled()
    _state.enabled = bool(flag)
    return previous


FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)

INPLACE_MESSAGE = (
    "one of the variables needed for gradient computation has been modified by an inplace "
    "operation: output {index} of {name} is at version {now}; expected version {then} "
    "instead."
)


class Node:
    """One recorded op application: the ``grad_fn`` of the tensor it produced.

    Attributes
    ----------
    op : Op
        The registered op (or a custom Function's adapter).
    seq : int
        Position on the tape; backward visits nodes in descending ``seq``.
    edges : tuple
        Per input: ``None`` (no gradient flows there), the producing ``Node``, or the leaf
        Tensor whose ``.grad`` receives the gradient.
    attrs : dict
        The op's canonical attributes (axes, shapes, parameters).
    saved_inputs : tuple or None
        Arrays the VJP needs, by input position (None where not saved); None once freed.
    saved_output : ndarray or None
        The result, when the VJP needs it.
    versions : tuple of (list, int)
        For each saved buffer, its version box and the version it had when saved.
    shape, dtype :
        Of the result; gradient slots are allocated from them.
    retained : list
        Weak references to tensors produced here that asked for ``retain_grad()``.
    """

    __slots__ = (
        "op",
        "seq",
        "edges",
        "attrs",
        "saved_inputs",
        "saved_output",
        "versions",
        "shape",
        "dtype",
        "retained",
        "freed",
        "__weakref__",
    )

    def __init__(self, op, edges, attrs, saved_inputs, saved_output, versions, shape, dtype):
        self.op = op
        self.seq = next(_sequence)
        self.edges = edges
        self.attrs = attrs
        self.saved_inputs = saved_inputs
        self.saved_output = saved_output
        self.versions = versions
        self.shape = shape
        self.dtype = dtype
        self.retained = None
        self.freed = False

    @property
    def name(self):
        """The name of the op that produced the tensor (``"multiply"``)."""
        return self.op.name

    @property
    def next_functions(self):
        """Per input, the producing node, the leaf tensor, or None (as torch's)."""
        return self.edges

    def needs_saved(self):
        return bool(self.op.saves) or self.op.saves_output

    def check_saved(self):
        """Raise if the saved buffers were freed or modified in place since the forward."""
        if self.freed and self.needs_saved():
            raise RuntimeError(FREED_MESSAGE)
        for box, version in self.versions:
            if box[0] != version:
                raise RuntimeError(
                    INPLACE_MESSAGE.format(
                        index=0, name=_title(self.op.name) + "Backward", now=box[0], then=version
                    )
                )

    def free(self):
        """Drop the saved buffers (backward without ``retain_graph``)."""
        if self.needs_saved():
            self.saved_inputs = None
            self.saved_output = None
            self.freed = True

    def __repr__(self):
        return f"<{_title(self.op.name)}Backward>"


def _title(name):
    return "".join(part.capitalize() for part in name.split("_"))


def record(op, edges, arrays, boxes, output, output_box, attrs):
    """Append a node for ``op``, saving only what its VJP needs.

    ``arrays`` are the op's (prepared) input arrays and ``boxes`` the version boxes of the
    tensors they came from (None for constants); ``output_box`` is the result's.
    """
    saved = [None] * len(arrays)
    versions = []
    for k in op.saves:
        saved[k] = arrays[k]
        if boxes[k] is not None:
            versions.append((boxes[k], boxes[k][0]))
    saved_output = None
    if op.saves_output:
        saved_output = output
        versions.append((output_box, output_box[0]))
    return Node(
        op, tuple(edges), attrs, tuple(saved), saved_output, tuple(versions),
        output.shape, output.dtype,
    )
