"""Forward rules of the shape ops and of the copies between devices: all linear, so each
applies the op itself to the tangent (a batch of tangents kept in front: the op's shapes and
axes behind it)."""

from ...ops.registry import call, call_view
from . import aligned, batch_shape, filled, jvp_rule, linear, shifted


def _reshape(tangent, batch, primal, attrs):
    """A view of the tangent, as torch's tangent of a view: ops never write into their
    inputs, and an in-place change of either is seen through the shared version counter.
    (A copy cost about a fifth of the PINN's batched forward over reverse under cProfile:
    its differentiable ``_bmm`` VJPs reshape each tangent four times.)"""
    return call_view("reshape", tangent, shape=batch + tuple(attrs["shape"]))


def _transpose(tangent, batch, primal, attrs):
    axes = tuple(range(len(batch))) + shifted(tuple(attrs["axes"]), batch)
    return call("transpose", tangent, axes=axes)


def _broadcast_to(tangent, batch, primal, attrs):
    shape = tuple(attrs["shape"])
    return call("broadcast_to", aligned(tangent, primal, len(shape)), shape=batch + shape)


def _astype(tangent, batch, primal, attrs):
    return call("astype", tangent, dtype=attrs["dtype"])


jvp_rule("reshape")(linear(_reshape))
jvp_rule("transpose")(linear(_transpose))
jvp_rule("broadcast_to")(linear(_broadcast_to))
jvp_rule("astype")(linear(_astype))
jvp_rule("to_cuda")(linear(lambda t, batch, p, attrs: t.to("cuda")))
jvp_rule("to_cpu")(linear(lambda t, batch, p, attrs: t.to("cpu")))


def _join(name):
    def rule(tangents, primals, output, attrs):
        """The join of the tangents (zeros for inputs without one), along the same axis."""
        batch = batch_shape(tangents, primals)
        parts, axis = filled(tangents, primals), attrs["axis"]
        if axis is None:  # (``concatenate`` of the flattened arrays)
            parts = [call("reshape", t, shape=batch + (-1,)) for t in parts]
            axis = 0
        return call(name, *parts, axis=axis % output.ndim + len(batch))

    return rule


jvp_rule("concatenate")(_join("concatenate"))
jvp_rule("stack")(_join("stack"))
