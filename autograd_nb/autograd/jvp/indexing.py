"""Forward rules of indexing: linear in the indexed values."""

from ...ops.registry import call
from . import jvp_rule, linear, zeros_for

jvp_rule("getitem")(linear(lambda t, attrs: call("getitem", t, index=attrs["index"])))
jvp_rule("_index_scatter")(linear(lambda t, attrs: call("_index_scatter", t, source=attrs)))


@jvp_rule("setitem")
def _setitem(tangents, primals, output, attrs):
    """``x[index] = v``, out of place: the tangent is ``tx`` with ``tv`` written at ``index``."""
    target, value = tangents
    target = zeros_for(output) if target is None else target
    value = zeros_for(primals[1]) if value is None else value
    return call("setitem", target, value, index=attrs["index"])
