"""Forward rules of the products: the product rule, each factor's tangent through the same
product (``matmul``, ``dot``, ``outer``, ``einsum`` and ``tensordot`` record ``_bmm``)."""

from ...ops.registry import call
from . import add_tangents, jvp_rule


@jvp_rule("_bmm")
def _bmm(tangents, primals, output, attrs):
    (ta, tb), (a, b) = tangents, primals
    views = {"views": attrs["views"]} if "views" in attrs else {}
    return add_tangents([
        None if ta is None else call("_bmm", ta, b, **views),
        None if tb is None else call("_bmm", a, tb, **views),
    ])
