"""Forward rules of the FFT and signal families (``ops/fft.py``, ``ops/signal.py``).

The transforms are linear: a tangent's tangent is the same transform of the tangent, with the
same length, axis, normalization and real/complex variant (``_fft_r2c`` of a real tangent is
complex, ``_fft_c2r`` of a complex one real). ``_convolve`` is bilinear:
``d(a * b) = da * b + a * db`` in the same mode.
"""

from ...ops.registry import call
from . import jvp_rule

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
        return call(name, tangent, **{key: attrs[key] for key in keys})

    rule.__name__ = rule.__qualname__ = f"{name}_jvp"
    return rule


for _name, _keys in _TRANSFORM_ATTRS.items():
    jvp_rule(_name)(_linear_jvp(_name, _keys))


@jvp_rule("_convolve")
def _convolve_jvp(tangents, primals, output, attrs):
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
