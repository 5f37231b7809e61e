"""Nested tuples, lists, dicts and namedtuples of a call's arguments and of its result, as
a list of leaves and a hashable structure (``anb.compile`` keys its programs by the
structure, and :mod:`.program` flattens again where fn runs eagerly)."""


def flatten(tree):
    """``(leaves, structure)`` of nested tuples, lists and dicts (a hashable structure)."""
    leaves = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree, leaves):
    kind = type(tree)
    if kind is tuple or kind is list:
        return (kind, tuple(_flatten(item, leaves) for item in tree))
    if kind is dict:
        keys = tuple(tree)
        return (dict, keys, tuple(_flatten(tree[k], leaves) for k in keys))
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):  # a namedtuple
        return (kind, tuple(_flatten(item, leaves) for item in tree))
    leaves.append(tree)
    return None


#: Arity -> the structure of ``flatten((args, {}))`` where no argument is a container.
_FLAT_CALLS = {}


def flatten_call(args, kwargs):
    """``flatten((args, kwargs))``, without its recursion for the usual call: positional
    arguments only, none of them a tuple, list or dict."""
    if not kwargs:
        for arg in args:
            if isinstance(arg, (tuple, list, dict)):
                break
        else:
            structure = _FLAT_CALLS.get(len(args))
            if structure is None:
                structure = _FLAT_CALLS[len(args)] = flatten((args, kwargs))[1]
            return list(args), structure
    return flatten((args, kwargs))


def unflatten(structure, leaves):
    kind = structure[0] if structure is not None else None
    if (kind is tuple or kind is list) and not any(structure[1]):
        return kind(leaves)  # (a flat tuple or list: every item a leaf)
    it = iter(leaves)
    return _unflatten(structure, it)


def _unflatten(structure, it):
    if structure is None:
        return next(it)
    kind = structure[0]
    if kind is dict:
        return {k: _unflatten(s, it) for k, s in zip(structure[1], structure[2])}
    items = [_unflatten(s, it) for s in structure[1]]
    if kind is tuple or kind is list:
        return kind(items)
    return kind(*items)
