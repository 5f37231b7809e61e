"""``anb.viz.to_dot``: the DOT text names every recorded op and leaf once, with their edges."""

import re

import pytest

import autograd_nb as anb

_NODE = re.compile(r'^\s*(n\d+) \[label="((?:[^"\\]|\\.)*)"(.*)\];$')
_EDGE = re.compile(r"^\s*(n\d+) -> (n\d+)(?: \[label=\"(\d+)\"\])?;$")


def parse(dot):
    """The nodes ({id: (label lines, attributes)}) and edges [(tail, head, label)] of ``dot``."""
    lines = dot.splitlines()
    assert lines[0] == "digraph autograd_nb {"
    assert lines[-1] == "}"
    nodes, edges = {}, []
    for line in lines[1:-1]:
        if line.strip().startswith(("node ", "edge ")):
            continue
        if match := _NODE.match(line):
            node_id, label, attributes = match.groups()
            assert node_id not in nodes
            nodes[node_id] = (label.split("\\n"), attributes)
            continue
        match = _EDGE.match(line)
        assert match, f"unexpected DOT line: {line!r}"
        edges.append(match.groups())
    for tail, head, _ in edges:
        assert tail in nodes and head in nodes
    return nodes, edges


def recorded(tensor):
    """The nodes and leaves that reach ``tensor``, walked independently of viz."""
    nodes, leaves, stack = {}, {}, [tensor.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in nodes:
            continue
        nodes[id(node)] = node
        for edge in node.edges:
            if isinstance(edge, anb.Tensor):
                leaves[id(edge)] = edge
            elif edge is not None:
                stack.append(edge)
    return list(nodes.values()), list(leaves.values())


def highlighted(nodes):
    return [node_id for node_id, (_, attributes) in nodes.items() if "penwidth=2" in attributes]


def test_chain_structure_and_labels():
    x = anb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = anb.sum(anb.exp(x) * 2.0)
    nodes, edges = parse(anb.viz.to_dot(y))
    ops, leaves = recorded(y)
    assert len(nodes) == len(ops) + len(leaves) == 4
    assert [labels[0] for labels, _ in nodes.values()] == ["leaf", "exp", "multiply", "sum"]
    assert nodes["n0"][0] == ["leaf", "(3,) float64", "requires_grad"]
    assert nodes["n1"][0] == ["exp", "(3,) float64"]
    assert nodes["n3"][0] == ["sum", "() float64"]
    # The constant 2.0 is not recorded: multiply has one edge, labelled with its position.
    assert edges == [("n0", "n1", None), ("n1", "n2", "0"), ("n2", "n3", None)]
    assert highlighted(nodes) == ["n3"]


def test_ids_follow_tape_order_and_output_is_stable():
    a = anb.tensor([1.0, 2.0], requires_grad=True)
    b = anb.tensor([3.0, 4.0], requires_grad=True)
    c = anb.sin(b)  # recorded first: b and sin come before a
    y = anb.sum(c - a)
    dot = anb.viz.to_dot(y)
    nodes, edges = parse(dot)
    assert [labels[0] for labels, _ in nodes.values()] == ["leaf", "sin", "leaf", "subtract", "sum"]
    assert ("n1", "n3", "0") in edges and ("n2", "n3", "1") in edges
    assert anb.viz.to_dot(y) == dot
    # The same computation recorded again gives the same text.
    a2 = anb.tensor([1.0, 2.0], requires_grad=True)
    b2 = anb.tensor([3.0, 4.0], requires_grad=True)
    assert anb.viz.to_dot(anb.sum(anb.sin(b2) - a2)) == dot


def test_leaf_only():
    x = anb.tensor([[1.0, 2.0]], requires_grad=True)
    nodes, edges = parse(anb.viz.to_dot(x))
    assert edges == []
    assert nodes["n0"][0] == ["leaf", "(1, 2) float64", "requires_grad"]
    assert highlighted(nodes) == ["n0"]

    constant = anb.tensor([1, 2])
    nodes, edges = parse(anb.viz.to_dot(constant))
    assert list(nodes) == ["n0"] and edges == []
    assert nodes["n0"][0] == ["leaf", "(2,) int64"]


def test_diamond_counts_the_shared_input_once():
    x = anb.tensor([0.5, 1.5], requires_grad=True)
    h = anb.tanh(x)
    left = anb.exp(h)
    right = anb.sin(h)
    y = anb.sum(left + right)
    nodes, edges = parse(anb.viz.to_dot(y))
    ops, leaves = recorded(y)
    assert len(nodes) == len(ops) + len(leaves) == 6
    assert [labels[0] for labels, _ in nodes.values()].count("tanh") == 1
    assert [labels[0] for labels, _ in nodes.values()].count("leaf") == 1
    tanh_id = next(i for i, (labels, _) in nodes.items() if labels[0] == "tanh")
    assert sorted(head for tail, head, _ in edges if tail == tanh_id) == ["n2", "n3"]
    # One edge per recorded input position.
    assert len(edges) == sum(e is not None for op in ops for e in op.edges) == 6


def test_shared_leaf_used_twice_by_one_op():
    x = anb.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y = anb.outer(x, x)
    nodes, edges = parse(anb.viz.to_dot(y))
    ops, leaves = recorded(y)
    assert len(leaves) == 1
    assert len(nodes) == len(ops) + 1
    assert [labels[0] for labels, _ in nodes.values()].count("leaf") == 1
    # outer is one product node reading the leaf twice: two edges, labelled 0 and 1
    output = highlighted(nodes)[0]
    assert nodes[output][0] == ["_bmm", "(4, 4) float64"]
    assert sorted(label for _, head, label in edges if head == output) == ["0", "1"]


def test_show_shapes_false_and_float32():
    x = anb.tensor([1.0, 2.0], dtype="float32", requires_grad=True)
    y = x * x
    nodes, _ = parse(anb.viz.to_dot(y, show_shapes=False))
    assert [labels for labels, _ in nodes.values()] == [["leaf", "requires_grad"], ["multiply"]]
    nodes, _ = parse(anb.viz.to_dot(y))
    assert nodes["n1"][0] == ["multiply", "(2,) float32"]


def test_graph_after_backward_is_still_drawn():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    y = anb.sum(anb.exp(x))
    before = anb.viz.to_dot(y)
    y.backward()
    assert anb.viz.to_dot(y) == before


def test_rejects_non_tensors():
    with pytest.raises(TypeError, match="Tensor"):
        anb.viz.to_dot([1.0, 2.0])
