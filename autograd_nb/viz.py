"""Look at what the tape recorded: the graph reaching a tensor, as Graphviz DOT text.

>>> import autograd_nb as anb
>>> x = anb.tensor([1.0, 2.0], requires_grad=True)
>>> "digraph" in anb.viz.to_dot(x * x)
True
"""

from .tensor import Tensor

__all__ = ["to_dot"]

_GRAPH_HEADER = (
    "digraph autograd_nb {",
    '    node [fontname="Helvetica", fontsize=10];',
    '    edge [fontname="Helvetica", fontsize=9];',
)
_LEAF = {"shape": "box"}
_LEAF_REQUIRES_GRAD = {"shape": "box", "style": "filled", "fillcolor": "lightyellow"}
_OP = {"shape": "ellipse"}
# The output keeps its shape (box or ellipse) and gains a fill and a thick outline.
_OUTPUT = {"style": "filled", "fillcolor": "lightblue", "penwidth": "2"}


def to_dot(tensor, show_shapes=True, names=None):
    r"""The recorded graph that reaches ``tensor``, as Graphviz DOT text.

    One DOT node per recorded op (labelled with the op's name, and the shape and dtype of its
    result) and one per leaf tensor that requires grad (labelled ``leaf``, its shape and dtype,
    and ``requires_grad``); an edge from each input to the op that consumed it, one per input
    position (so ``x * x`` has two edges from ``x``), labelled with the position when the op
    has more than one input. The node that produced ``tensor`` is highlighted (filled, thick
    outline).

    Node ids are ``n0, n1, ...`` in tape order: the ops by ascending position on the tape,
    each preceded by the leaves it is the first to use, so the text is the same every time the
    same computation is recorded. Inputs through which no gradient flows (constants, tensors
    that do not require grad) are not recorded on the tape and are not drawn. Composite
    functions show the primitive ops they recorded (``outer`` records two ``reshape`` and one
    ``multiply``).

    Parameters
    ----------
    tensor : Tensor
        The output whose graph is drawn. A leaf gives a graph of one node.
    show_shapes : bool
        Put the shape and dtype of each result in its label.
    names : dict of str to Tensor, optional
        Names to show for some tensors (leaves or results): ``{"x": x, "loss": loss}`` labels
        the leaf ``x = leaf`` and the op that produced ``loss`` ``loss = sum``.

    Returns
    -------
    str
        DOT source; render it with ``dot -Tsvg`` or Sphinx's ``graphviz`` directive.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> y = anb.sum(x * x)
    >>> print(anb.viz.to_dot(y, show_shapes=False))
    digraph autograd_nb {
        node [fontname="Helvetica", fontsize=10];
        edge [fontname="Helvetica", fontsize=9];
        n0 [label="leaf\nrequires_grad", shape=box, style=filled, fillcolor=lightyellow];
        n1 [label="multiply", shape=ellipse];
        n2 [label="sum", shape=ellipse, style=filled, fillcolor=lightblue, penwidth=2];
        n0 -> n1 [label="0"];
        n0 -> n1 [label="1"];
        n1 -> n2;
    }

    With shapes (the default), each label also gives the result's shape and dtype:

    >>> print(anb.viz.to_dot(y).splitlines()[4])
        n1 [label="multiply\n(3,) float64", shape=ellipse];
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dot takes a Tensor, not {type(tensor).__name__}")
    names = _names_by_id(names)
    lines = list(_GRAPH_HEADER)
    if tensor.grad_fn is None:
        label = _leaf_label(tensor, show_shapes, names)
        lines.append(_node_line("n0", label, _leaf_style(tensor), True))
        lines.append("}")
        return "\n".join(lines)

    ids = {}
    edge_lines = []
    for node in _reachable_nodes(tensor.grad_fn):
        for edge in node.edges:
            if isinstance(edge, Tensor) and id(edge) not in ids:
                ids[id(edge)] = f"n{len(ids)}"
                label = _leaf_label(edge, show_shapes, names)
                lines.append(_node_line(ids[id(edge)], label, _leaf_style(edge), False))
        ids[id(node)] = f"n{len(ids)}"
        label = _op_label(node, show_shapes, names)
        lines.append(_node_line(ids[id(node)], label, _OP, node is tensor.grad_fn))
        for position, edge in enumerate(node.edges):
            if edge is None:
                continue
            # Which operand is which matters for subtract, divide, matmul...
            attributes = f' [label="{position}"]' if len(node.edges) > 1 else ""
            edge_lines.append(f"    {ids[id(edge)]} -> {ids[id(node)]}{attributes};")
    lines.extend(edge_lines)
    lines.append("}")
    return "\n".join(lines)


def _node_line(node_id, label, style, is_output):
    attributes = dict(style, **_OUTPUT) if is_output else style
    text = ", ".join(f"{key}={value}" for key, value in attributes.items())
    return f"    {node_id} [label={_quote(label)}, {text}];"


def _leaf_style(tensor):
    return _LEAF_REQUIRES_GRAD if tensor.requires_grad else _LEAF


def _reachable_nodes(root):
    """Every node reaching ``root`` (itself included), by ascending tape position."""
    seen = {}
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        stack.extend(
            edge
            for edge in node.edges
            if edge is not None and not isinstance(edge, Tensor) and id(edge) not in seen
        )
    return sorted(seen.values(), key=lambda node: node.seq)


def _describe(shape, dtype):
    return f"{tuple(shape)} {dtype}"


def _names_by_id(names):
    """``{id(leaf tensor or node): name}`` from ``{name: tensor}``."""
    by_id = {}
    for name, tensor in (names or {}).items():
        if not isinstance(tensor, Tensor):
            raise TypeError(f"names[{name!r}] must be a Tensor, not {type(tensor).__name__}")
        by_id[id(tensor.grad_fn if tensor.grad_fn is not None else tensor)] = name
    return by_id


def _leaf_label(tensor, show_shapes, names):
    parts = [_named("leaf", names.get(id(tensor)))]
    if show_shapes:
        parts.append(_describe(tensor.shape, tensor.dtype))
    if tensor.requires_grad:
        parts.append("requires_grad")
    return "\\n".join(parts)


def _op_label(node, show_shapes, names):
    parts = [_named(node.name, names.get(id(node)))]
    if show_shapes:
        parts.append(_describe(node.shape, node.dtype))
    return "\\n".join(parts)


def _named(kind, name):
    return kind if name is None else f"{name} = {kind}"


def _quote(text):
    # DOT strings: escape quotes; the "\n" line breaks of labels are kept as DOT escapes.
    return '"' + text.replace('"', '\\"') + '"'
