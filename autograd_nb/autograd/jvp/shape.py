"""Forward rules of the shape ops and of the copies between devices: all linear, so each
applies the op itself to the tangent."""

from ...ops.registry import call, call_view
from . import filled, jvp_rule, linear


def _reshape(tangent, attrs):
    """A view of the tangent where the primal's reshape was one (``matmul``'s operands)."""
    if attrs.get("view") is True:
        return call_view("reshape", tangent, shape=attrs["shape"])
    return call("reshape", tangent, shape=attrs["shape"])


jvp_rule("reshape")(linear(_reshape))
jvp_rule("transpose")(linear(lambda t, attrs: call("transpose", t, axes=attrs["axes"])))
jvp_rule("broadcast_to")(linear(lambda t, attrs: call("broadcast_to", t, shape=attrs["shape"])))
jvp_rule("astype")(linear(lambda t, attrs: call("astype", t, dtype=attrs["dtype"])))
jvp_rule("to_cuda")(linear(lambda t, attrs: t.to("cuda")))
jvp_rule("to_cpu")(linear(lambda t, attrs: t.to("cpu")))


def _join(name):
    def rule(tangents, primals, output, attrs):
        """The join of the tangents (zeros for inputs without one), along the same axis."""
        return call(name, *filled(tangents, primals), axis=attrs["axis"])

    return rule


jvp_rule("concatenate")(_join("concatenate"))
jvp_rule("stack")(_join("stack"))
