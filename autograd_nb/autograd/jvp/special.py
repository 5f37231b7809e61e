"""Forward rules of the ``special`` family (``ops/special.py``, ``ops/special_bessel.py``).

Each op is elementwise and real, with one derivative formula per differentiable input (its
formula row, from which its VJP and differentiable rule come). Its Jacobian in each input is
diagonal, so the tangent of the output is the sum over the inputs of the tangent times that
derivative: the op's differentiable rule applied to the tangent, broadcast to the output's
shape (no sum back down to the input's shape). The derivatives chain within the family, so
the rules differentiate again.

An input whose derivative has no formula (a Bessel order, the ``order`` of ``polygamma``, the
shape parameters of ``_gammainc_da``, ...) raises ``DerivativeNotImplemented`` when it is given
a tangent, as the VJP does, never a silent zero.

A batch of tangents is aligned to the output's rank behind its batch and broadcast to
``batch + shape``, which the rule is told is the shape to give back (nothing summed).
"""

import numpy as np

from ...ops import special_bessel  # noqa: F401 - registers the Bessel ops
from ...ops.registry import REGISTRY, call
from ...ops.special import SpecialOp
from . import aligned, batch_shape, jvp_rule


def special_jvp(op):
    """The forward rule of the elementwise special function ``op``."""

    def rule(tangents, primals, output, attrs):
        shape = batch_shape(tangents, primals) + tuple(attrs["shape"])
        out_attrs = dict(attrs, shapes=[shape] * len(tangents))
        # (a Python number among the inputs, as the VJP's rule sees it: an array)
        inputs = [p if hasattr(p, "dtype") else np.asarray(p) for p in primals]
        total = None
        for k, tangent in enumerate(tangents):
            if tangent is None:
                continue
            if k in op.not_implemented:
                raise op._not_implemented_error(k)
            if not op.is_differentiable(k):
                continue
            if tuple(tangent.shape) != shape:
                tangent = aligned(tangent, primals[k], len(attrs["shape"]))
                tangent = call("broadcast_to", tangent, shape=shape)
            term = op.rule(k, tangent, inputs, output, out_attrs)
            total = term if total is None else total + term
        return total

    rule.__name__ = rule.__qualname__ = f"{op.name}_jvp"
    return rule


#: The names of the ops given a rule here.
SPECIAL_OPS = tuple(name for name, op in REGISTRY.items() if isinstance(op, SpecialOp))

for _name in SPECIAL_OPS:
    jvp_rule(_name)(special_jvp(REGISTRY[_name]))
