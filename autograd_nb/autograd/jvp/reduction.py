"""Forward rules of the reductions and scans. A batch of tangents stays in front: the
reduced (scanned) axes are shifted past it and the batch is never reduced."""

import numpy as np

from ...ops.registry import call, host_values
from . import batch_shape, jvp_rule, per_tangent, shifted, transposed_vjp


def _sum(tensor, attrs, keepdims=None, batch=None):
    """The reduction's sum of ``tensor`` (a tangent, or a product with one): over the reduced
    axes of the primal, behind the tangent's batch (``batch``: found from ``tensor``'s rank)."""
    keep = attrs["keepdims"] if keepdims is None else keepdims
    if batch is None:
        batch = tuple(tensor.shape[: tensor.ndim - len(attrs["layout"].shape)])
    return call("sum", tensor, axis=shifted(tuple(attrs["axes"]), batch), keepdims=keep)


def _kept(tensor, attrs):
    """A reduction's result with its reduced axes kept as length 1 (to broadcast)."""
    shape = attrs["layout"].shape
    kept = tuple(1 if i in attrs["axes"] else n for i, n in enumerate(shape))
    return call("reshape", tensor, shape=kept)


@jvp_rule("sum")
def _sum_jvp(tangents, primals, output, attrs):
    (tangent,) = tangents
    return None if tangent is None else _sum(tangent, attrs)


@jvp_rule("cumsum")
def _cumsum(tangents, primals, output, attrs):
    (tangent,) = tangents
    if tangent is None:
        return None
    batch = batch_shape(tangents, primals)
    # (axis=None: flattened)
    flat = call("reshape", tangent, shape=batch + tuple(attrs["layout"].shape))
    if not attrs["axes"]:
        return call("reshape", flat, shape=batch + tuple(output.shape))
    return call("cumsum", flat, axis=shifted(attrs["axes"][0], batch))


@jvp_rule("logsumexp")
def _logsumexp(tangents, primals, output, attrs):
    (tangent,), (x,) = tangents, primals
    if tangent is None:
        return None
    weights = call("exp", x - _kept(output, attrs))
    return _sum(call("multiply", weights, tangent), attrs)


@jvp_rule("softmax")
def _softmax(tangents, primals, output, attrs):
    (tangent,) = tangents
    if tangent is None:
        return None
    mean = _sum(call("multiply", output, tangent), attrs, keepdims=True)
    return call("multiply", output, tangent - mean)


@jvp_rule("log_softmax")
def _log_softmax(tangents, primals, output, attrs):
    (tangent,) = tangents
    if tangent is None:
        return None
    return tangent - _sum(call("multiply", call("exp", output), tangent), attrs, keepdims=True)


@jvp_rule("max", "min")
def _extremum(tangents, primals, output, attrs):
    """The mean of the tangents where the extremum is attained (torch's split of ties, as
    the VJP's): which elements attain it is constant almost everywhere."""
    (tangent,), (x,) = tangents, primals
    if tangent is None:
        return None
    values = host_values(x)
    y = host_values(output).reshape(
        tuple(1 if i in attrs["axes"] else n for i, n in enumerate(values.shape)))
    hits = (values == y) | (np.isnan(values) & np.isnan(y))
    share = (hits / np.sum(hits, axis=attrs["axes"], keepdims=True)).astype(values.dtype)
    return _sum(call("multiply", tangent, share), attrs)


_prod_at_zeros = None


@jvp_rule("prod")
def _prod(tangents, primals, output, attrs):
    """``prod(x) * sum(t / x)`` without zeros in ``x``; through the VJP's transpose with them
    (the product of the others, which stays right when differentiated again; once per
    tangent of a batch)."""
    global _prod_at_zeros
    (tangent,), (x,) = tangents, primals
    if tangent is None:
        return None
    if np.any(host_values(x) == 0):
        if _prod_at_zeros is None:
            _prod_at_zeros = per_tangent(transposed_vjp("prod"))
        return _prod_at_zeros(tangents, primals, output, attrs)
    ratio = _sum(call("divide", tangent, x), attrs)
    return call("multiply", output, ratio)


jvp_rule("cumprod", batched=False)(transposed_vjp("cumprod"))

