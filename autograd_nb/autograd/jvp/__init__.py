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

The family modules (``elementwise``, ``linalg``, ...) register their rules on import; this
package imports them all at its end (:data:`FAMILIES`), so importing it registers every rule.

Tangents are not batched: each tangent has its input's shape, and
``functional.jacobian(..., strategy="forward-mode")`` runs one forward pass per basis tangent.
The helpers below are the rules' shared vocabulary.
"""

import importlib
import importlib.util

import numpy as np

from ...ops.registry import FUNCTIONS, REGISTRY, call
from ...tensor import Tensor
from ...tensor import tensor as _new_tensor
from ..api import grad
from ..grad_mode import enable_grad

#: ``{op name: rule}``.
RULES = {}


def jvp_rule(*names):
    """Register the decorated function as the forward rule of the ops ``names``."""

    def decorate(rule):
        for name in names:
            if name in RULES:
                raise ValueError(f"two forward rules for the op {name!r}")
            RULES[name] = rule
        return rule

    return decorate


def rule_of(op):
    """The forward rule of ``op``, or None when it has none."""
    return RULES.get(op.name)


def zeros_for(primal):
    """A zero tangent for ``primal`` (a Tensor, an array or a number): a Tensor of its shape
    and floating dtype, on its device."""
    shape = np.shape(primal) if not hasattr(primal, "shape") else primal.shape
    dtype = getattr(primal, "dtype", np.dtype(np.float64))
    if np.dtype(dtype).kind not in "fc":
        dtype = np.dtype(np.float64)
    zeros = call("reshape", np.zeros(shape, dtype=dtype), shape=tuple(shape))
    device = getattr(primal, "device", "cpu")
    return zeros if device == "cpu" else zeros.to(device)


def filled(tangents, primals):
    """``tangents`` with each None replaced by a zero tangent of its primal (for rules of ops
    that are linear in all their inputs together, such as ``concatenate``)."""
    return [zeros_for(p) if t is None else t for t, p in zip(tangents, primals, strict=True)]


def add_tangents(parts):
    """The sum of the Tensors in ``parts`` that are not None (None if all are)."""
    total = None
    for part in parts:
        if part is not None:
            total = part if total is None else total + part
    return total


def linear(function):
    """The rule of a one-input op that is linear in its input: ``function(tangent, attrs)``
    applies the op (with the attrs its ``prepare`` gave) to the tangent."""

    def rule(tangents, primals, output, attrs):
        (tangent,) = tangents
        return None if tangent is None else function(tangent, attrs)

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
    ``prod`` at zeros)."""
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
