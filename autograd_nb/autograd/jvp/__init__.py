"""Forward-mode rules: for each op (by name), how a tangent of its inputs becomes the tangent of
its output.

A rule is ``rule(tangents, primals, output, attrs)``:

- ``tangents``: one entry per input of the op, the input's tangent (a Tensor of the input's
  shape; a leading batch dimension when tangents are batched, see below) or None (no tangent:
  zero);
- ``primals``: the op's inputs as it was called with them (Tensors, arrays or Python scalars);
- ``output``: the op's primal output (a Tensor);
- ``attrs``: the op's attributes after its ``prepare``.

It returns the output's tangent as a Tensor (or None for a zero tangent), built from the ops
themselves, so that it differentiates again (forward over forward, reverse over forward).

**Batched tangents** (``jacfwd``-style): at a level opened with a batch shape
(``forward_ad.dual_level(batch_shape=...)``), every tangent carries that batch in front of its
primal's shape, ``batch + primal.shape``, and so must the rule's result (``batch +
output.shape``). A rule finds the batch from its tangents (:func:`batch_shape`): elementwise
rules align each tangent to the output's rank behind the batch (:func:`aligned`), reductions and
scans shift their axes past it (:func:`shifted`), shape and indexing ops keep it in front, and
products put it where ``matmul``'s batch dimensions go. A rule registered with
``batched=False`` is run once per tangent of the batch and stacked (:func:`per_tangent`: still
one forward pass of the primals); :data:`LOOPED` names those. What cannot take a batch at all
(a custom Function's ``jvp`` without ``generate_vmap_rule``) raises
:class:`BatchedTangentError`, and ``functional.jacobian`` falls back to one forward pass per
basis tangent.

The family modules (``elementwise``, ``linalg``, ...) register their rules on import; this
package imports them all at its end (:data:`FAMILIES`), so importing it registers every rule.

The helpers below are the rules' shared vocabulary.
"""

import importlib
import importlib.util

import numpy as np

from ...ops.registry import FUNCTIONS, REGISTRY, call, call_view
from ...tensor import Tensor
from ...tensor import tensor as _new_tensor
from ..api import grad
from ..grad_mode import enable_grad

#: ``{op name: rule}``.
RULES = {}
#: The ops whose rules take a batch of tangents by running once per tangent
#: (:func:`per_tangent`); every other rule takes the batch as it is.
LOOPED = set()


class BatchedTangentError(RuntimeError):
    """Internal: a forward rule (or a custom Function's ``jvp``) that cannot take a batch of
    tangents was given one. ``functional.jacobian`` catches it and computes the Jacobian with
    one forward pass per basis tangent instead."""

    def __init__(self, name):
        super().__init__(
            f"internal error: the forward rule of {name!r} cannot take batched tangents "
            "(the caller falls back to one forward pass per tangent)"
        )
        self.name = name


def jvp_rule(*names, batched=True):
    """Register the decorated function as the forward rule of the ops ``names``.

    ``batched=False``: the rule takes unbatched tangents only; it is registered through
    :func:`per_tangent`, which runs it once per tangent of a batch."""

    def decorate(rule):
        registered = rule if batched else per_tangent(rule)
        for name in names:
            if name in RULES:
                raise ValueError(f"two forward rules for the op {name!r}")
            RULES[name] = registered
            if not batched:
                LOOPED.add(name)
        return rule

    return decorate


def rule_of(op):
    """The forward rule of ``op``, or None when it has none."""
    return RULES.get(op.name)


def _shape(value):
    return tuple(value.shape) if hasattr(value, "shape") else np.shape(value)


def batch_shape(tangents, primals):
    """The batch shape of the tangents (``()`` when they are not batched): what a tangent has
    in front of its primal's shape."""
    for tangent, primal in zip(tangents, primals, strict=False):
        if tangent is not None:
            return tuple(tangent.shape[: tangent.ndim - len(_shape(primal))])
    return ()


def aligned(tangent, primal, ndim):
    """A batched ``tangent`` of ``primal`` reshaped to ``batch + (1, ...) + primal.shape`` of
    ``len(batch) + ndim`` dimensions, so that it broadcasts from the right with values of
    ``ndim`` dimensions (an elementwise op's other inputs) with its batch kept in front."""
    shape = _shape(primal)
    if tangent is None or len(shape) >= ndim or tangent.ndim == len(shape):
        return tangent
    batch = tuple(tangent.shape[: tangent.ndim - len(shape)])
    return call_view("reshape", tangent, shape=batch + (1,) * (ndim - len(shape)) + shape)


def shifted(axes, batch):
    """Axes of a primal (an int or a tuple of ints) as axes of its tangent behind ``batch``:
    non-negative ones move past the batch, negative ones count from the end already."""
    offset = len(batch)
    if isinstance(axes, (int, np.integer)):
        return int(axes) if axes < 0 else int(axes) + offset
    return tuple(a if a < 0 else a + offset for a in axes)


def zeros_for(primal, batch=()):
    """A zero tangent for ``primal`` (a Tensor, an array or a number): a Tensor of its shape
    (behind ``batch``) and floating dtype, on its device."""
    shape = tuple(batch) + tuple(_shape(primal))
    dtype = getattr(primal, "dtype", np.dtype(np.float64))
    if np.dtype(dtype).kind not in "fc":
        dtype = np.dtype(np.float64)
    zeros = call("reshape", np.zeros(shape, dtype=dtype), shape=shape)
    device = getattr(primal, "device", "cpu")
    return zeros if device == "cpu" else zeros.to(device)


def filled(tangents, primals):
    """``tangents`` with each None replaced by a zero tangent of its primal (for rules of ops
    that are linear in all their inputs together, such as ``concatenate``)."""
    batch = batch_shape(tangents, primals)
    return [zeros_for(p, batch) if t is None else t
            for t, p in zip(tangents, primals, strict=True)]


def in_columns(solve, rhs, ndim):
    """``solve(rhs)`` for ``rhs``, matrices of ``ndim`` dimensions behind a batch of tangents,
    where ``solve`` acts on each column alike (a solve, a product from the left): the batch
    moved into the columns, one call of ``batch size * k`` columns, and moved back."""
    count = rhs.ndim - ndim
    if count <= 0:
        return solve(rhs)
    batch, k = tuple(rhs.shape[:count]), rhs.shape[-1]
    order = tuple(range(count, rhs.ndim - 1)) + tuple(range(count)) + (rhs.ndim - 1,)
    moved = call("transpose", rhs, axes=order)  # (..., n, *batch, k)
    # (views: the transposes made new buffers, and neither view leaves this function)
    columns = call_view("reshape", moved, shape=tuple(moved.shape[: ndim - 1]) + (-1,))
    result = solve(columns)
    back = call_view("reshape", result, shape=tuple(result.shape[:-1]) + batch + (k,))
    return call("transpose", back, axes=tuple(int(i) for i in np.argsort(order)))


def per_tangent(rule):
    """A rule for batched tangents from ``rule``, which takes unbatched ones: ``rule`` once per
    tangent of the batch, the results stacked (each is recorded, so the stack differentiates
    again). Unbatched tangents go to ``rule`` as they are."""

    def batched_rule(tangents, primals, output, attrs):
        batch = batch_shape(tangents, primals)
        if not batch:
            return rule(tangents, primals, output, attrs)
        count = int(np.prod(batch))
        rows = [None if t is None else call("reshape", t, shape=(count,) + _shape(p))
                for t, p in zip(tangents, primals, strict=False)]
        results = []
        for b in range(count):
            each = [None if r is None else call("getitem", r, index=(b, Ellipsis))
                    for r in rows]
            results.append(rule(each, primals, output, attrs))
        if all(r is None for r in results):
            return None
        dtype = np.result_type(*[r.dtype for r in results if r is not None])
        if dtype.kind == "c" and output.dtype.kind != "c":  # (as the seam fits one tangent)
            results = [r if r is None or r.dtype.kind != "c" else call("_real", r)
                       for r in results]
        results = [zeros_for(output) if r is None else r for r in results]
        stacked = call("stack", *results, axis=0)
        return call("reshape", stacked, shape=tuple(batch) + tuple(output.shape))

    batched_rule.__name__ = batched_rule.__qualname__ = getattr(rule, "__name__", "rule")
    batched_rule.__module__ = rule.__module__
    batched_rule.unbatched = rule
    return batched_rule


def add_tangents(parts):
    """The sum of the Tensors in ``parts`` that are not None (None if all are)."""
    total = None
    for part in parts:
        if part is not None:
            total = part if total is None else total + part
    return total


def linear(function):
    """The rule of a one-input op that is linear in its input: ``function(tangent, batch,
    primal, attrs)`` applies the op (with the attrs its ``prepare`` gave, to a tangent with
    the batch ``batch`` in front of ``primal``'s shape) to the tangent."""

    def rule(tangents, primals, output, attrs):
        (tangent,) = tangents
        if tangent is None:
            return None
        return function(tangent, batch_shape(tangents, primals), primals[0], attrs)

    return rule


def zero(tangents, primals, output, attrs):
    """The rule of an op whose result is locally constant in its inputs (``floor``,
    ``sign``): a zero tangent."""
    return None


def transposed_vjp(name):
    """The rule of the op ``name`` as the transpose of its differentiable VJP rule
    (``Op.rule``, linear in its gradient ``g``): the gradient in ``g`` of ``<vjp(g), t>``,
    recorded (``create_graph``) so that it differentiates again. Two passes where a rule of
    its own takes one: for ops whose forward derivative has no simpler form (``cumprod``,
    ``prod`` at zeros). It takes unbatched tangents (register it with ``batched=False``)."""
    op = REGISTRY[name]

    def rule(tangents, primals, output, attrs):
        if all(t is None for t in tangents):
            return None
        seed = _new_tensor(np.zeros(output.shape, dtype=output.dtype), requires_grad=True,
                           device=output.device)
        with enable_grad():
            inputs = [p if isinstance(p, Tensor) else _new_tensor(np.asarray(p))
                      for p in primals]
            parts = []
            for k, tangent in enumerate(tangents):
                if tangent is None:
                    continue
                contribution = op.rule(k, seed, inputs, output, attrs)
                if contribution.dtype.kind == "c" or tangent.dtype.kind == "c":
                    contribution = FUNCTIONS["real"](FUNCTIONS["conj"](contribution) * tangent)
                else:
                    contribution = contribution * tangent
                parts.append(call("sum", contribution))
            (result,) = grad(add_tangents(parts), seed, create_graph=True, allow_unused=True,
                             materialize_grads=True)
        return result

    return rule


#: The family modules, in import order. Those not written yet are skipped: the linalg, special
#: and spectral (FFT, signal, complex linalg) rules arrive with their own modules.
FAMILIES = (
    "elementwise", "shape", "indexing", "reduction", "contractions", "linalg", "special",
    "spectral",
)

for _family in FAMILIES:
    if importlib.util.find_spec(f"{__name__}.{_family}") is not None:
        importlib.import_module(f"{__name__}.{_family}")
