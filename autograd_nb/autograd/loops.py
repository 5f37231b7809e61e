"""Structured control flow with JAX's signatures: ``scan``, ``fori_loop``, ``while_loop`` and
``cond``, differentiable in reverse mode.

They run eagerly: the body runs once per step and its ops are recorded as any others, so
backward walks the steps in reverse (``while_loop`` included: its trip count is known once
the forward has run). Inside ``anb.compile`` a ``scan`` or ``fori_loop`` body is recorded once
(:mod:`autograd_nb.replay.loops`) where it can be, and the loop unrolls into the recorded
program where it cannot (``while_loop`` always does, a guard per step).
``scan(..., checkpoint=...)`` keeps fewer steps' values and recomputes the rest in backward
(:func:`autograd_nb.checkpoint` around segments of steps).

The carry is a pytree (nested tuples, lists, dicts) of Tensors; numbers and arrays in
``init`` become Tensors. A body must return a carry of the same structure, shapes and
dtypes as the one it received (TypeError otherwise, naming the element and both).
"""

import numpy as np

from .. import tape
from ..ops.registry import FUNCTIONS
from ..replay import loops as _recorded
from ..tensor import Tensor, active_trace, as_tensor, zeros
from . import _tree
from .checkpoint import checkpoint as _checkpoint

#: The recursive ("binomial") schedule splits a segment into this many checkpointed parts,
#: down to segments of ``BINOMIAL_LEAF`` steps that it runs plainly. It keeps about
#: ``BINOMIAL_BRANCHES * log(n / BINOMIAL_LEAF) / log(BINOMIAL_BRANCHES)`` carries and runs
#: the forward once more per level; halving (2 parts) kept fewer carries but ran 8 forwards
#: for 500 steps (docs/loops.rst has the measurements).
BINOMIAL_BRANCHES = 8
BINOMIAL_LEAF = 8


def _as_leaf(value):
    if isinstance(value, Tensor):
        return value
    return as_tensor(np.asarray(value))


def _describe(structure):
    kind = structure[0]
    if kind == "leaf":
        return "a leaf"
    if kind == "none":
        return "None"
    if kind is dict:
        return f"a dict with keys {list(structure[1])}"
    return f"a {kind.__name__} of length {len(structure[1])}"


def _check_carry(what, in_structure, in_leaves, out_structure, out_leaves):
    """Raise TypeError where the carry's structure, a shape or a dtype changed."""
    start = f"{what} function carry input and carry output must have the same pytree structure"
    if in_structure != out_structure:
        raise TypeError(
            f"{start}, but they differ: the input carry is {_describe(in_structure)} "
            f"({_tree.unflatten(in_structure, ['*'] * len(in_leaves))!r}) and the output carry "
            f"is {_describe(out_structure)} "
            f"({_tree.unflatten(out_structure, ['*'] * len(out_leaves))!r})"
        )
    for k, (a, b) in enumerate(zip(in_leaves, out_leaves, strict=True)):
        if a.shape != b.shape or a.dtype != b.dtype:
            path = _tree.paths(in_structure)[k]  # (named only here: it costs a walk)
            raise TypeError(
                f"{start}, shape and dtype, but carry{path} has shape {a.shape} and dtype "
                f"{a.dtype} on input and shape {b.shape} and dtype {b.dtype} on output"
            )


def _carry_leaves(init):
    leaves, structure = _tree.flatten(init)
    return [_as_leaf(v) for v in leaves], structure


def _step(what, body, structure, leaves, *args):
    """Run ``body(*args, carry)`` (``args`` first) and check the carry it returns."""
    out = body(*args, _tree.unflatten(structure, leaves))
    out_leaves, out_structure = _tree.flatten(out)
    out_leaves = [_as_leaf(v) for v in out_leaves]
    _check_carry(what, structure, leaves, out_structure, out_leaves)
    return out_leaves


# -- scan -----------------------------------------------------------------------------------


def _scan_length(x_leaves, length):
    sizes = sorted({x.shape[0] if x.ndim else None for x in x_leaves}, key=str)
    if None in sizes:
        raise ValueError("scan got a value with no leading axis in xs: every leaf of xs needs one")
    if len(sizes) > 1:
        raise ValueError(
            "scan got values with different leading axis sizes: " + ", ".join(map(str, sizes))
        )
    if length is not None:
        length = int(length)
        if sizes and sizes[0] != length:
            raise ValueError(
                f"scan got `length` argument of {length} which disagrees with leading axis "
                f"sizes {sizes}."
            )
        return length
    if not sizes:
        raise ValueError("scan got no values to scan over and `length` not provided.")
    return sizes[0]


class _Scan:
    """One scan's body and structures, run over segments of its steps."""

    def __init__(self, f, carry_structure, x_structure, n_x, reverse):
        self.f = f
        self.carry_structure = carry_structure
        self.x_structure = x_structure
        self.n_x = n_x
        self.reverse = reverse
        self.y_structure = None

    def segment(self, carry, xs, length):
        """Run ``length`` steps from ``carry`` (a tuple of leaves) over ``xs`` (a tuple of
        leaves with that leading axis); returns ``(carry, ys)``, ys stacked in index order."""
        carry = list(carry)
        ys = [None] * length
        order = range(length - 1, -1, -1) if self.reverse else range(length)
        for i in order:
            x = _tree.unflatten(self.x_structure, [leaf[i] for leaf in xs])
            carry, ys[i] = self._one(carry, x)
        return tuple(carry), tuple(self._stack(ys, length))

    def _one(self, carry, x):
        out = self.f(_tree.unflatten(self.carry_structure, carry), x)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError(
                "scan body function must return a pair (carry, y), not "
                f"{type(out).__name__}"
            )
        new_carry, y = out
        out_leaves, out_structure = _tree.flatten(new_carry)
        out_leaves = [_as_leaf(v) for v in out_leaves]
        _check_carry("scan body", self.carry_structure, carry, out_structure, out_leaves)
        y_leaves, y_structure = _tree.flatten(y)
        if self.y_structure is None:
            self.y_structure = y_structure
        elif y_structure != self.y_structure:
            raise TypeError(
                "scan body function must return ys of the same pytree structure at every "
                f"step: {_describe(self.y_structure)} at one step, {_describe(y_structure)} "
                "at another"
            )
        return out_leaves, [_as_leaf(v) for v in y_leaves]

    def body(self, carry, x_leaves):
        """One step on lists of leaves, ``(carry, ys)`` (a loop recorded once calls it)."""
        return self._one(list(carry), _tree.unflatten(self.x_structure, x_leaves))

    def _stack(self, ys, length):
        if not ys:
            return []
        return [FUNCTIONS["stack"]([y[k] for y in ys]) for k in range(len(ys[0]))]

    def bisect(self, carry, xs, length):
        """``segment`` with a recursive schedule: split into ``BINOMIAL_BRANCHES`` parts,
        each checkpointed and split again, down to ``BINOMIAL_LEAF`` steps."""
        if length <= BINOMIAL_LEAF:
            return self.segment(carry, xs, length)
        parts = min(BINOMIAL_BRANCHES, -(-length // BINOMIAL_LEAF))
        cuts = [length * p // parts for p in range(parts + 1)]
        bounds = list(zip(cuts[:-1], cuts[1:]))
        return self._checkpointed(self.bisect, carry, xs, bounds)

    def _checkpointed(self, run, carry, xs, bounds):
        """``run`` over each of ``bounds`` (in the scan's direction), checkpointed."""
        pieces = [None] * len(bounds)
        for s in (range(len(bounds) - 1, -1, -1) if self.reverse else range(len(bounds))):
            a, b = bounds[s]
            carry, pieces[s] = _checkpoint(
                run, carry, tuple(x[a:b] for x in xs), b - a, use_reentrant=False
            )
        return carry, _concatenate(pieces)

    def every(self, carry, xs, length, k):
        """``segment`` over segments of ``k`` steps, each checkpointed."""
        bounds = [(a, min(a + k, length)) for a in range(0, length, k)]
        return self._checkpointed(self.segment, carry, xs, bounds)


def _concatenate(parts):
    parts = [p for p in parts if p]
    if not parts:
        return ()
    return tuple(
        FUNCTIONS["concatenate"]([p[k] for p in parts]) for k in range(len(parts[0]))
    )


def scan(f, init, xs=None, length=None, reverse=False, unroll=1, checkpoint=None):
    """Loop ``f`` over the leading axis of ``xs``, carrying a state: JAX's ``lax.scan``.

    The same as::

        def scan(f, init, xs, length=None):
            if xs is None:
                xs = [None] * length
            carry = init
            ys = []
            for x in xs:
                carry, y = f(carry, x)
                ys.append(y)
            return carry, stack(ys)

    for pytrees (nested tuples, lists, dicts) of Tensors in ``init``, ``xs`` and ``y``.

    Parameters
    ----------
    f : callable
        ``f(carry, x) -> (carry, y)``. The carry it returns must have the structure, shapes
        and dtypes of the one it receives (TypeError otherwise, naming the element).
    init : pytree of Tensor
        The first carry; numbers and arrays become Tensors.
    xs : pytree of Tensor, optional
        Sliced along their (common) leading axis, one slice per step; None with ``length``
        gives ``x = None``.
    length : int, optional
        The number of steps; needed when ``xs`` is None, checked against it otherwise. With
        no steps, the body runs once under ``no_grad`` (on zeros shaped like a slice of
        ``xs``) to learn the shapes of the empty ``ys``, as JAX traces it once.
    reverse : bool, default False
        Run from the last slice to the first; ``ys`` keep the order of ``xs``.
    unroll : int, default 1
        Accepted for JAX's signature; the eager loop runs one step at a time.
    checkpoint : None, int or "binomial", optional
        What backward keeps. None: every step's values (the fastest backward). An int
        ``k``: the carry every ``k`` steps; each segment is recomputed in backward (one
        extra forward, about ``n / k + k`` steps' values in memory). ``"binomial"``: a
        recursive halving schedule (Griewank-style) that keeps O(log n) carries and
        recomputes O(n log n) steps. The gradients of ``init`` and ``xs`` are those of the
        plain loop bit for bit; those of tensors ``f`` reads from closures are summed in
        another order (equal to rounding).

    Returns
    -------
    (carry, ys)
        The last carry, and the ``y``s stacked on a new leading axis (the structure of ``y``,
        each leaf with one dimension more).

    Examples
    --------
    A running sum, and its gradient:

    >>> import autograd_nb as anb
    >>> xs = anb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> total, partial = anb.scan(lambda c, x: (c + x, c * x), anb.tensor(0.0), xs)
    >>> total, partial
    (tensor(6., grad_fn=<AddBackward>), tensor([0., 2., 9.], grad_fn=<StackBackward>))
    >>> anb.grad(partial.sum(), xs)
    (tensor([5., 4., 3.]),)

    Checkpointed every 2 steps: the same gradient.

    >>> _, partial = anb.scan(lambda c, x: (c + x, c * x), anb.tensor(0.0), xs, checkpoint=2)
    >>> anb.grad(partial.sum(), xs)
    (tensor([5., 4., 3.]),)
    """
    carry, carry_structure = _carry_leaves(init)
    x_leaves, x_structure = _tree.flatten(xs)
    x_leaves = [_as_leaf(v) for v in x_leaves]
    n = _scan_length(x_leaves, length)
    if not isinstance(unroll, (bool, int, np.integer)) or int(unroll) < 0:
        raise TypeError(f"scan's unroll must be a non-negative int or a bool, not {unroll!r}")
    loop = _Scan(f, carry_structure, x_structure, len(x_leaves), bool(reverse))
    if n == 0:
        return _empty_scan(loop, carry, x_leaves)
    carry, xs_leaves = tuple(carry), tuple(x_leaves)
    trace = active_trace() if checkpoint is None else None
    recorded = None
    if trace is not None:  # (inside anb.compile: the body recorded once, where it can be)
        recorded = _recorded.record(trace, loop.body, carry, xs_leaves, n, loop.reverse)
    if recorded is not None:
        carry, ys = recorded
    elif checkpoint is None:
        carry, ys = loop.segment(carry, xs_leaves, n)
    elif checkpoint == "binomial":
        carry, ys = loop.bisect(carry, xs_leaves, n)
    elif isinstance(checkpoint, (int, np.integer)) and not isinstance(checkpoint, bool):
        if checkpoint < 1:
            raise ValueError(f"scan's checkpoint must be at least 1, not {checkpoint}")
        carry, ys = loop.every(carry, xs_leaves, n, int(checkpoint))
    else:
        raise ValueError(
            f"scan's checkpoint must be None, a positive int or 'binomial', not {checkpoint!r}"
        )
    return (
        _tree.unflatten(carry_structure, carry),
        _tree.unflatten(loop.y_structure, list(ys)),
    )


def _empty_scan(loop, carry, x_leaves):
    """Zero steps: ``init``, and empty ys of the shapes one step would give (as JAX traces
    the body once, this runs it once, under ``no_grad``, on zeros shaped like a slice)."""
    x = _tree.unflatten(
        loop.x_structure, [zeros(v.shape[1:], dtype=v.dtype) for v in x_leaves]
    )
    with tape.grad_mode(False):
        _, y_leaves = loop._one(list(carry), x)
    ys = [zeros((0, *y.shape), dtype=y.dtype) for y in y_leaves]
    return (
        _tree.unflatten(loop.carry_structure, carry),
        _tree.unflatten(loop.y_structure, ys),
    )


# -- fori_loop, while_loop, cond -----------------------------------------------------------


def _index(value, what):
    if isinstance(value, Tensor):
        if value.size != 1 or value.dtype.kind not in "iu":
            raise TypeError(f"fori_loop's {what} must be an integer scalar, not {value!r}")
        return int(value.item())
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"fori_loop's {what} must be an integer scalar, not {value!r}")
    return int(value)


def fori_loop(lower, upper, body_fun, init_val):
    """``for i in range(lower, upper): val = body_fun(i, val)``: JAX's ``lax.fori_loop``.

    Parameters
    ----------
    lower, upper : int
        The range of ``i`` (Python ints, or integer scalar Tensors read once).
    body_fun : callable
        ``body_fun(i, val) -> val``, ``i`` a Python int; the carry keeps its structure,
        shapes and dtypes (TypeError otherwise).
    init_val : pytree of Tensor

    Returns
    -------
    The last ``val`` (``init_val`` itself when the range is empty).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor(2.0, requires_grad=True)
    >>> y = anb.fori_loop(0, 3, lambda i, v: v * x + i, anb.tensor(1.0))
    >>> y
    tensor(12., grad_fn=<AddBackward>)
    >>> anb.grad(y, x)
    (tensor(13.),)
    """
    lower, upper = _index(lower, "lower"), _index(upper, "upper")
    leaves, structure = _carry_leaves(init_val)
    trace = active_trace()
    if trace is not None and upper > lower:  # (inside anb.compile, where it can be)

        def body_at(i):
            return lambda carry, _: (_step("fori_loop body", body_fun, structure, carry, i), ())

        recorded = _recorded.record(trace, body_at(lower), leaves, (), upper - lower, False,
                                    twin=body_at(lower + 1))
        if recorded is not None:
            return _tree.unflatten(structure, recorded[0])
    for i in range(lower, upper):
        leaves = _step("fori_loop body", body_fun, structure, leaves, i)
    return _tree.unflatten(structure, leaves)


def _truth(value, what):
    """A scalar boolean's value (a bool Tensor, NumPy bool or Python bool)."""
    if isinstance(value, Tensor):
        if value.shape != () or value.dtype != np.bool_:
            raise TypeError(
                f"{what} must return a boolean scalar, but got a Tensor of shape "
                f"{value.shape} and dtype {value.dtype}"
            )
        return bool(value)  # (inside anb.compile: a guard, see docs/compile.rst)
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype == np.bool_:
        return bool(value)
    raise TypeError(f"{what} must return a boolean scalar, but got {value!r}")


def while_loop(cond_fun, body_fun, init_val):
    """``while cond_fun(val): val = body_fun(val)``: JAX's ``lax.while_loop``, and
    differentiable in reverse mode (the trip count is known once the forward has run).

    Parameters
    ----------
    cond_fun : callable
        ``cond_fun(val)`` returns a boolean scalar (a bool Tensor of shape ``()``, or a
        Python/NumPy bool).
    body_fun : callable
        ``body_fun(val) -> val``, keeping the carry's structure, shapes and dtypes.
    init_val : pytree of Tensor

    Returns
    -------
    The first ``val`` for which ``cond_fun`` is false.

    Notes
    -----
    A loop that never ends stops with Ctrl-C: the KeyboardInterrupt leaves ``init_val``,
    the grad mode and every ``.grad`` as they were (the steps' graph goes with the
    intermediate carries).

    Examples
    --------
    Double until above 10, and differentiate through the steps taken:

    >>> import autograd_nb as anb
    >>> x = anb.tensor(1.5, requires_grad=True)
    >>> y = anb.while_loop(lambda v: v < 10.0, lambda v: v * 2.0, x)
    >>> y
    tensor(12., grad_fn=<MultiplyBackward>)
    >>> anb.grad(y, x)
    (tensor(8.),)
    """
    leaves, structure = _carry_leaves(init_val)
    while _truth(cond_fun(_tree.unflatten(structure, leaves)), "while_loop's cond_fun"):
        leaves = _step("while_loop body", body_fun, structure, leaves)
    return _tree.unflatten(structure, leaves)


def cond(pred, true_fun, false_fun, *operands):
    """``true_fun(*operands) if pred else false_fun(*operands)``: JAX's ``lax.cond``.

    Parameters
    ----------
    pred : bool or scalar Tensor
        A boolean (or integer: nonzero is true) scalar.
    true_fun, false_fun : callable
        Called with ``*operands``; only the chosen one runs, so (unlike JAX) the two are
        not checked against each other.
    *operands
        Passed to the branch.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor(3.0, requires_grad=True)
    >>> y = anb.cond(x > 0, lambda v: v * v, lambda v: -v, x)
    >>> anb.grad(y, x)
    (tensor(6.),)
    """
    if isinstance(pred, Tensor):
        if pred.shape != () or pred.dtype.kind not in "biu":
            raise TypeError(
                "cond's pred must be a boolean or integer scalar, but got a Tensor of shape "
                f"{pred.shape} and dtype {pred.dtype}"
            )
        chosen = bool(pred)  # (inside anb.compile: a guard, see docs/compile.rst)
    elif isinstance(pred, (bool, int, np.bool_, np.integer)):
        chosen = bool(pred)
    else:
        raise TypeError(f"cond's pred must be a boolean or integer scalar, not {pred!r}")
    return (true_fun if chosen else false_fun)(*operands)
