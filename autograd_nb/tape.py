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

#: ``[seq at the last in-place change of any tensor, highest seq of a node freed, highest seq
#: of a node asked to retain its gradient]``: a graph whose nodes are all newer than the first
#: two has no stale or freed saved buffer, and one whose nodes are all newer than the third has
#: no ``retain_grad()``, which lets a cached backward skip those per-node checks
#: (``engine.plan_cache``).
marks = [-1, -1, -1]
#: Held while a mark changes: threads mark at once, and a mark must never go back (a read,
#: then a write of an older value, would hide a newer change from the checks).
_marking = threading.Lock()


def mutated():
    """Note that a tensor's buffer changed in place (every ``_version`` bump calls this)."""
    with _marking:
        marks[0] = next(_sequence)


def raise_mark(which, seq):
    """``marks[which] = max(marks[which], seq)`` (1: a node freed, 2: a node retaining)."""
    if seq > marks[which]:
        with _marking:
            if seq > marks[which]:
                marks[which] = seq


def is_grad_enabled():
    """Whether ops run now are recorded for differentiation (per thread; on by default)."""
    return _state.enabled


def set_grad_enabled_flag(flag):
    """Set this thread's grad mode; returns the previous mode."""
    previous = is_grad_enabled()
    _state.enabled = bool(flag)
    return previous


class grad_mode:
    """``with grad_mode(flag):`` this thread's grad mode is ``flag`` inside the block and the
    previous one after it, even where a KeyboardInterrupt lands at the switch. Python runs a
    signal's handler when a call returns; so the switch is the last store of ``__enter__``,
    with no call after it, where ``previous = set_grad_enabled_flag(flag)`` before a ``try``
    left the mode switched when Ctrl-C's handler ran at that call's return. (``__exit__`` can
    still take the handler at its own start, before it switches back: a path that must not
    leave the mode switched, a backward, stores the flag inline around a ``try``.)"""

    __slots__ = ("flag", "previous")

    def __init__(self, flag):
        self.flag = bool(flag)

    def __enter__(self):
        state = _state
        self.previous = state.enabled
        state.enabled = self.flag

    def __exit__(self, *exc_info):
        _state.enabled = self.previous
        return False


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
    versions : tuple
        ``(box, version, box, version, ...)``: for each saved buffer, its version box and
        the version it had when saved (flat: one tuple per node, not one per buffer, as the
        garbage collector has fewer objects to track).
    shape, dtype :
        Of the result; gradient slots are allocated from them.
    retained : list
        Weak references to tensors produced here that asked for ``retain_grad()``.
    kept : bool
        Set by :func:`autograd_nb.collector.keep_tracked` when the node is on the graph of
        some tensor's ``.grad``: the garbage collector must keep scanning it. Left unset
        otherwise (read it with ``getattr(node, "kept", False)``), which costs recording
        nothing.
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
        "kept",
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
        versions = self.versions
        for i in range(0, len(versions), 2):
            box, version = versions[i], versions[i + 1]
            if box[0] != version:
                raise RuntimeError(
                    INPLACE_MESSAGE.format(
                        index=0, name=_title(self.op.name) + "Backward", now=box[0], then=version
                    )
                )

    def free(self):
        """Drop the saved buffers (backward without ``retain_graph``)."""
        if self.needs_saved():
            # The mark, the flag, then the buffers: a free cut short anywhere (a
            # KeyboardInterrupt) leaves a node that raises the freed-graph error, never one
            # whose buffers are gone unnoticed.
            if self.seq > marks[1]:  # (the call only where it may change: a free is hot)
                raise_mark(1, self.seq)
            self.freed = True
            self.saved_inputs = None
            self.saved_output = None

    def __repr__(self):
        return f"<{_title(self.op.name)}Backward>"


def _title(name):
    return "".join(part.capitalize() for part in name.split("_"))


def record(op, edges, arrays, boxes, output, output_box, attrs):
    """Append a node for ``op``, saving only what its VJP needs.

    ``arrays`` are the op's (prepared) input arrays and ``boxes`` the version boxes of the
    tensors they came from (None for constants); ``output_box`` is the result's.
    """
    saves = op.saves
    if not saves:
        saved = _NONES.get(len(arrays)) or (None,) * len(arrays)
        versions = ()
    elif saves == _ALL_SAVED.get(len(arrays)):
        # Every input saved (binary arithmetic): the arrays as they are.
        saved = tuple(arrays)
        versions = []
        for box in boxes:
            if box is not None:
                versions += (box, box[0])
        versions = tuple(versions)
    else:
        saved = [None] * len(arrays)
        versions = []
        for k in saves:
            saved[k] = arrays[k]
            box = boxes[k]
            if box is not None:
                versions += (box, box[0])
        saved = tuple(saved)
        versions = tuple(versions)
    saved_output = None
    if op.saves_output:
        saved_output = output
        versions += (output_box, output_box[0])
    return new_node(op, tuple(edges), attrs, saved, saved_output, versions, output)


def record_one(op, edge, array, box, output, output_box, attrs):
    """:func:`record` of a one-input op whose input has the graph edge ``edge`` (not None)
    and the version box ``box``: no loops, no lists."""
    saves = op.saves
    if not saves:
        saved = _ONE_NONE
        versions = ()
    elif saves == _ONLY_FIRST:
        saved = (array,)
        versions = (box, box[0])
    else:
        return record(op, (edge,), (array,), (box,), output, output_box, attrs)
    if op.saves_output:
        versions += (output_box, output_box[0])
        return new_node(op, (edge,), attrs, saved, output, versions, output)
    return new_node(op, (edge,), attrs, saved, None, versions, output)


def record_pair(op, edge_a, edge_b, arrays, box_a, box_b, output, output_box, attrs):
    """:func:`record` of a binary op (the arithmetic operators): no loops, no lists.
    ``box_a``/``box_b`` are None for a constant."""
    saves = op.saves
    if not saves:
        saved = _TWO_NONES
        versions = ()
    elif saves == _BOTH:
        saved = arrays
        if box_a is None:
            versions = (box_b, box_b[0])
        elif box_b is None:
            versions = (box_a, box_a[0])
        else:
            versions = (box_a, box_a[0], box_b, box_b[0])
    else:  # one of them (divide saves the divisor)
        (k,) = saves
        saved = (arrays[0], None) if k == 0 else (None, arrays[1])
        box = box_a if k == 0 else box_b
        versions = () if box is None else (box, box[0])
    if op.saves_output:
        versions += (output_box, output_box[0])
        return new_node(op, (edge_a, edge_b), attrs, saved, output, versions, output)
    return new_node(op, (edge_a, edge_b), attrs, saved, None, versions, output)


def new_node(op, edges, attrs, saved_inputs, saved_output, versions, output):
    """``Node(op, edges, attrs, saved_inputs, saved_output, versions, output.shape,
    output.dtype)`` without the class call (this runs once per recorded op); the recording
    functions above make their nodes here."""
    node = _new_node(Node)
    node.op = op
    node.seq = _next(_sequence)
    node.edges = edges
    node.attrs = attrs
    node.saved_inputs = saved_inputs
    node.saved_output = saved_output
    node.versions = versions
    node.shape = output.shape
    node.dtype = output.dtype
    node.retained = None
    node.freed = False
    return node


_new_node = object.__new__
_next = next
_NONES = {n: (None,) * n for n in range(1, 9)}
_ONE_NONE = (None,)
_TWO_NONES = (None, None)
_ONLY_FIRST = (0,)
_BOTH = (0, 1)
_ALL_SAVED = {n: tuple(range(n)) for n in range(1, 9)}
