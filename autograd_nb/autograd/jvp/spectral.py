"""Forward rules of the FFT and signal families (``ops/fft.py``, ``ops/signal.py``).

The transforms are linear: a tangent's tangent is the same transform of the tangent, with the
same length, axis, normalization and real/complex variant (``_fft_r2c`` of a real tangent is
complex, ``_fft_c2r`` of a complex one real). ``_convolve`` is bilinear:
``d(a * b) = da * b + a * db`` in the same mode.

A batch of tangents stays in front: a transform's axis is shifted past it, and ``_convolve``
(over every axis) convolves along the batch axis with length 1, which leaves it as it is:
``da`` with ``b`` read as ``(1, *b.shape)``, and in the "full" mode ``a`` read so with ``db``.
``a * db`` in the "valid" mode (which needs the first factor the larger along every axis)
runs once per tangent.
"""

from ...ops.registry import call
from . import batch_shape, jvp_rule, per_tangent, shifted

#: The attributes of each transform that its call takes again (``m``, the input's length
#: along the axis, comes from the tangent).
_TRANSFORM_ATTRS = {
    "_fft_resize": ("axis", "n"),
    "_fft_c2c": ("axis", "n", "norm", "inverse"),
    "_fft_r2c": ("axis", "n", "norm", "double", "conj"),
    "_fft_c2r": ("axis", "n", "norm", "halve", "conj"),
}


def _linear_jvp(name, keys):
    def rule(tangents, primals, output, attrs):
        (tangent,) = tangents
        if tangent is None:
            return None
        kept = {key: attrs[key] for key in keys}
        batch = batch_shape(tangents, primals)
        if batch:
            kept["axis"] = shifted(kept["axis"], batch)
        return call(name, tangent, **kept)

    rule.__name__ = rule.__qualname__ = f"{name}_jvp"
    return rule


for _name, _keys in _TRANSFORM_ATTRS.items():
    jvp_rule(_name)(_linear_jvp(_name, _keys))


def _unbatched_convolve(tangents, primals, output, attrs):
    da, db = tangents
    a, b = primals
    mode = attrs["mode"]
    total = None
    if da is not None:
        total = call("_convolve", da, b, mode=mode)
    if db is not None:
        term = call("_convolve", a, db, mode=mode)
        total = term if total is None else total + term
    return total


_convolve_per_tangent = per_tangent(_unbatched_convolve)


def _leading_one(x):
    return call("reshape", x, shape=(1,) + tuple(x.shape))


@jvp_rule("_convolve")
def _convolve_jvp(tangents, primals, output, attrs):
    da, db = tangents
    a, b = primals
    batch = batch_shape(tangents, primals)
    mode = attrs["mode"]
    if not batch:
        return _unbatched_convolve(tangents, primals, output, attrs)
    if db is not None and mode != "full":
        return _convolve_per_tangent(tangents, primals, output, attrs)
    count = 1
    for n in batch:
        count *= n
    total = None
    if da is not None:
        rows = call("reshape", da, shape=(count,) + tuple(a.shape))
        total = call("_convolve", rows, _leading_one(b), mode=mode)
    if db is not None:
        rows = call("reshape", db, shape=(count,) + tuple(b.shape))
        term = call("_convolve", _leading_one(a), rows, mode=mode)
        total = term if total is None else total + term
    return call("reshape", total, shape=batch + tuple(output.shape))
