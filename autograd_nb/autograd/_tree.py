"""Pytrees for the loops and ``checkpoint``: nested tuples, lists and dicts (and
namedtuples) as a list of leaves plus a structure that compares with ``==``."""


def flatten(tree):
    """``(leaves, structure)``; ``None`` is a leaf-less node, as JAX's."""
    leaves = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree, leaves):
    kind = type(tree)
    if tree is None:
        return ("none",)
    if kind is tuple or kind is list:
        return (kind, tuple(_flatten(item, leaves) for item in tree))
    if kind is dict:
        keys = tuple(sorted(tree))
        return (dict, keys, tuple(_flatten(tree[k], leaves) for k in keys))
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):  # a namedtuple
        return (kind, tuple(_flatten(item, leaves) for item in tree))
    leaves.append(tree)
    return ("leaf",)


def unflatten(structure, leaves):
    """The tree of ``structure`` with ``leaves`` in order."""
    return _unflatten(structure, iter(leaves))


def _unflatten(structure, it):
    kind = structure[0]
    if kind == "leaf":
        return next(it)
    if kind == "none":
        return None
    if kind is dict:
        return {k: _unflatten(s, it) for k, s in zip(structure[1], structure[2], strict=True)}
    items = [_unflatten(s, it) for s in structure[1]]
    if kind is tuple or kind is list:
        return kind(items)
    return kind(*items)


def paths(structure, prefix=""):
    """The name of each leaf (``"[0]['v']"``), in flatten's order, for error messages."""
    kind = structure[0]
    if kind == "leaf":
        return [prefix]
    if kind == "none":
        return []
    if kind is dict:
        out = []
        for key, sub in zip(structure[1], structure[2], strict=True):
            out += paths(sub, f"{prefix}[{key!r}]")
        return out
    out = []
    for i, sub in enumerate(structure[1]):
        out += paths(sub, f"{prefix}[{i}]")
    return out
