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

The family modules (``elementwise``, ``linalg``, ...) register their rules on import.
"""

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
