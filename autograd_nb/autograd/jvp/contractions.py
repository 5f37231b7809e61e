"""Forward rules of the products: the product rule, each factor's tangent through the same
product (``matmul``, ``dot``, ``outer``, ``einsum`` and ``tensordot`` record ``_bmm``).

A batch of tangents goes where ``matmul``'s batch dimensions go. A batched left factor is read
as ``batch + view`` and multiplied by the right factor's view with ``matmul``, which folds the
batch into the rows of one product when that factor is a single matrix. A batched right
factor has its batch moved into its columns (:func:`~autograd_nb.autograd.jvp.in_columns`):
one product with the left factor as it is, never broadcast over the batch; that costs a copy
of the tangent and of the result, where transposing the product instead
(``(tb^T a^T)^T``) would copy those and the left matrix too.
"""

from ...ops.linalg import matmul
from ...ops.registry import call, call_view
from . import add_tangents, batch_shape, in_columns, jvp_rule


def _view(x, shape):
    """``x`` read in ``shape``: a view of its buffer (internal to the rule, as ``matmul``'s
    operands are), so the batched product copies nothing to reshape."""
    return call_view("reshape", x, shape=tuple(shape))


def _batched_products(ta, tb, a, b, output, views, batch):
    a_view, b_view, _ = views
    parts = []
    if ta is not None:
        parts.append(matmul(_view(ta, batch + a_view), _view(b, b_view)))
    if tb is not None:
        a = _view(a, a_view)
        tb = _view(tb, batch + b_view)
        parts.append(in_columns(lambda columns: matmul(a, columns), tb, len(b_view)))
    return call("reshape", add_tangents(parts), shape=batch + tuple(output.shape))


@jvp_rule("_bmm")
def _bmm(tangents, primals, output, attrs):
    (ta, tb), (a, b) = tangents, primals
    batch = batch_shape(tangents, primals)
    if batch:
        views = attrs.get("views") or (tuple(a.shape), tuple(b.shape), tuple(output.shape))
        return _batched_products(ta, tb, a, b, output, tuple(map(tuple, views)), batch)
    views = {"views": attrs["views"]} if "views" in attrs else {}
    return add_tangents([
        None if ta is None else call("_bmm", ta, b, **views),
        None if tb is None else call("_bmm", a, tb, **views),
    ])
