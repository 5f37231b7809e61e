"""Linear algebra: one batched-matmul primitive, ``(batch, m, k) @ (batch, k, n)``, and the
NumPy functions composed from it (matmul with its 1-D and batch-broadcasting rules, dot, outer,
einsum). The kernels call BLAS through numba's ``np.dot`` (hence SciPy at run time).
"""

import numpy as np
from numba import njit

from . import _broadcast
from .registry import Op, call, public


@njit(cache=True, nogil=True)
def _bmm_forward(a, b, out):
    for i in range(a.shape[0]):
        np.dot(a[i], b[i], out[i])


@njit(cache=True, nogil=True)
def _bmm_vjp_a(g, b, grad_a, scratch):
    # grad_a[i] += g[i] @ b[i].T
    for i in range(g.shape[0]):
        np.dot(g[i], b[i].T, scratch)
        grad_a[i] += scratch


@njit(cache=True, nogil=True)
def _bmm_vjp_b(g, a, grad_b, scratch):
    # grad_b[i] += a[i].T @ g[i]
    for i in range(g.shape[0]):
        np.dot(a[i].T, g[i], scratch)
        grad_b[i] += scratch


class BatchedMatmul(Op):
    """``_bmm(a, b)``: ``a (batch, m, k) @ b (batch, k, n)``, the primitive of this family."""

    name = "_bmm"
    family = "linalg"
    n_inputs = 2
    saves = (0, 1)
    method = False

    def prepare(self, values, attrs):
        a, b = values
        dtype = np.result_type(a, b)
        if dtype.kind != "f":
            dtype = np.dtype(np.float64)
        a = np.asarray(a, dtype=dtype, order="C")
        b = np.asarray(b, dtype=dtype, order="C")
        if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
            raise ValueError(f"_bmm needs (batch, m, k) and (batch, k, n), got {a.shape}, {b.shape}")
        return [a, b], {}

    def forward(self, arrays, attrs):
        a, b = arrays
        out = np.empty((a.shape[0], a.shape[1], b.shape[2]), dtype=a.dtype)
        if out.size:
            if a.shape[2] == 0:
                out[...] = 0
            else:
                _bmm_forward(a, b, out)
        return out

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        a, b = saved[0], saved[1]
        if grad_output.size == 0 or grad_input.size == 0:
            return
        if k == 0:
            scratch = np.empty(a.shape[1:], dtype=a.dtype)
            _bmm_vjp_a(grad_output, b, grad_input, scratch)
        else:
            scratch = np.empty(b.shape[1:], dtype=b.dtype)
            _bmm_vjp_b(grad_output, a, grad_input, scratch)

    def rule(self, k, grad_output, inputs, output, attrs):
        a, b = inputs
        if k == 0:
            return call("_bmm", grad_output, call("transpose", b, axes=(0, 2, 1)))
        return call("_bmm", call("transpose", a, axes=(0, 2, 1)), grad_output)

    def make_function(self):
        return None


BatchedMatmul()


@public(family="linalg")
def matmul(a, b):
    """Matrix product with NumPy's rules: 1-D operands are promoted (and the added dimension
    removed), leading dimensions are batch dimensions and broadcast.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.ones((2, 3), requires_grad=True)
    >>> out = anb.matmul(x, anb.ones((3, 4)))
    >>> out.shape
    (2, 4)
    """
    a_shape, b_shape = np.shape(a), np.shape(b)
    if len(a_shape) == 0 or len(b_shape) == 0:
        raise ValueError("matmul: Input operand does not have enough dimensions")
    a2 = a if len(a_shape) > 1 else call("reshape", a, shape=(1,) + a_shape)
    b2 = b if len(b_shape) > 1 else call("reshape", b, shape=b_shape + (1,))
    a_shape2, b_shape2 = np.shape(a2), np.shape(b2)
    m, k = a_shape2[-2:]
    k2, n = b_shape2[-2:]
    if k != k2:
        raise ValueError(
            f"matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc "
            f"signature (n?,k),(k,m?)->(n?,m?) (size {k2} is different from {k}); "
            f"shapes {a_shape} and {b_shape}"
        )
    batch = _broadcast.broadcast_shapes(a_shape2[:-2], b_shape2[:-2])
    size = int(np.prod(batch, dtype=np.int64))
    a3 = _as_batch(a2, a_shape2, batch, size)
    b3 = _as_batch(b2, b_shape2, batch, size)
    out = call("_bmm", a3, b3)
    shape = batch + ((m,) if len(a_shape) > 1 else ()) + ((n,) if len(b_shape) > 1 else ())
    return call("reshape", out, shape=shape)


def _as_batch(x, shape, batch, size):
    full = batch + tuple(shape[-2:])
    if tuple(shape) != full:
        x = call("broadcast_to", x, shape=full)
    return call("reshape", x, shape=(size,) + tuple(shape[-2:]))
