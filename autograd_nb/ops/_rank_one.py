"""Both VJPs of a product of a tensor with itself into its gradient, in one pass.

``outer(x, x)`` is ``_bmm`` of a column ``(m, 1)`` and a row ``(1, n)`` of one tensor, so both
of its VJPs add into ``x``'s gradient: ``g @ b`` (row sums of ``g`` weighted by ``b``) and
``a @ g`` (column sums weighted by ``a``). Two matrix-vector products read ``g``, ``m * n``
elements, twice; :func:`joint_add` reads each row once and does both, with the column sums in
a scratch of ``n`` elements that stays in the cache (docs/benchmarking.rst, "One pass per
VJP"). ``outer(x, y)`` of two tensors has the same two sums, each into its own gradient:
:func:`pair_add` (``m`` and ``n`` may differ), twin :func:`pair_add_numpy`.

The order of every sum is fixed, so that the kernel gives the same bits on every CPU and
:func:`joint_add_numpy`, its NumPy twin (tier 0), gives them too: a row's weighted sum runs in
``LANES`` interleaved partial sums (element ``c`` into lane ``c % LANES``, each lane in order of
``c``), the lanes folded in halves (lane ``i`` plus lane ``i + half``), plus the leftover
``n % LANES`` elements summed in order; a column's sum runs over the rows in order. No fused
multiply-add: each product is rounded, then added, as NumPy adds.

A dot product of a tensor with itself (``einsum("ij,ij->", x, x)``: ``_bmm`` of a row
``(1, K)`` and a column ``(K, 1)`` of one tensor, per batch entry) has the VJPs ``g * b`` and
``a * g``, each a pass over ``x`` and the gradient buffer: :func:`joint_scale_add` makes one,
each product added twice, in turn, as the two VJPs one after the other add it.
"""

import numpy as np
from numba import njit

#: Interleaved partial sums per row. An elementwise loop over 32 lanes is what numba's
#: loop vectorizer packs into vectors (its SLP vectorizer is off, and reordering a sum is not
#: allowed): 2.5 ms for n = 2,000 float64 where 8 lanes stayed scalar (7.6 ms), and the
#: column sums, added in the same loop, vectorise with it.
LANES = 32


@njit(cache=True, nogil=True)
def _row_pass(row, b, weight, col, lanes):
    """The weighted sum ``row @ b`` in the fixed order (module docstring), its partial sums in
    ``lanes`` (``LANES`` elements), and ``weight * row`` added into ``col``, in one loop."""
    lanes[:] = 0
    whole = row.size // LANES * LANES
    for base in range(0, whole, LANES):
        for lane in range(LANES):
            value = row[base + lane]
            lanes[lane] += value * b[base + lane]
            col[base + lane] += weight * value
    tail = row.dtype.type(0)
    for c in range(whole, row.size):
        value = row[c]
        tail += value * b[c]
        col[c] += weight * value
    half = LANES
    while half > 1:
        half //= 2
        for lane in range(half):
            lanes[lane] = lanes[lane] + lanes[lane + half]
    return lanes[0] + tail


@njit(cache=True, nogil=True)
def _sums(g, a, b):
    """``(g @ b, a @ g)`` in the fixed order (module docstring), in one pass over ``g``."""
    m, n = g.shape
    col = np.zeros(n, dtype=g.dtype)
    rows = np.empty(m, dtype=g.dtype)
    lanes = np.empty(LANES, dtype=g.dtype)
    for r in range(m):
        rows[r] = _row_pass(g[r], b, a[r], col, lanes)
    return rows, col


@njit(cache=True, nogil=True)
def _add_sum(out, total, overwrite):
    """``out += total`` (``out = +0.0 + total`` where ``overwrite``: the bits of adding into
    zeros, ``-0.0`` included)."""
    if overwrite:
        zero = total.dtype.type(0)
        for i in range(total.size):
            out[i] = zero + total[i]
    else:
        for i in range(total.size):
            out[i] = out[i] + total[i]


@njit(cache=True, nogil=True)
def pair_add(g, a, b, out_a, out_b, overwrite_a, overwrite_b):
    """``out_a += g @ b`` and ``out_b += a @ g`` for a matrix ``g (m, n)`` and vectors
    ``a, out_a (m,)``, ``b, out_b (n,)``, in one pass over ``g`` (each ``=`` where its
    ``overwrite``): the VJPs of ``outer(a, b)``, the bits of one VJP per input where that
    VJP sums in this order."""
    rows, col = _sums(g, a, b)
    _add_sum(out_a, rows, overwrite_a)
    _add_sum(out_b, col, overwrite_b)


def pair_add_numpy(g, a, b, out_a, out_b, overwrite_a, overwrite_b):
    """:func:`pair_add` in NumPy, bit for bit (tier 0's twin)."""
    rows, col = _sums_numpy(g, a, b)
    for out, total, overwrite in ((out_a, rows, overwrite_a), (out_b, col, overwrite_b)):
        if overwrite:
            out[...] = 0.0 + total
        else:
            out += total


@njit(cache=True, nogil=True)
def joint_add(g, a, b, out, overwrite):
    """``out += g @ b + a @ g`` for a matrix ``g (m, n)`` and vectors ``a (m,)``, ``b (n,)``,
    ``out (n,)`` with ``m == n`` (``out = ...`` where ``overwrite``): element ``i`` becomes
    ``(out[i] + (g @ b)[i]) + (a @ g)[i]``, as the two VJPs one after the other."""
    n = g.shape[1]
    rows, col = _sums(g, a, b)
    if overwrite:  # (``+0.0`` first: the bits of adding into zeros, ``-0.0`` included)
        zero = g.dtype.type(0)
        for i in range(n):
            out[i] = (zero + rows[i]) + col[i]
    else:
        for i in range(n):
            out[i] = (out[i] + rows[i]) + col[i]


def _sums_numpy(g, a, b):
    """:func:`_sums` in NumPy, bit for bit. A reduction over an axis that is not the
    innermost adds in order along it; ``initial`` starts it at ``+0.0``, as the kernel's sums
    start."""
    m, n = g.shape
    whole = n // LANES * LANES
    products = (g[:, :whole] * b[:whole]).reshape(m, whole // LANES, LANES)
    lanes = np.add.reduce(products, axis=1, initial=0.0)
    tail = np.zeros(m, dtype=g.dtype)
    for c in range(whole, n):
        tail += g[:, c] * b[c]
    half = LANES
    while half > 1:
        half //= 2
        lanes = lanes[:, :half] + lanes[:, half:2 * half]
    rows = lanes[:, 0] + tail
    products = a[:, None] * g
    if n == 1:  # (one column: NumPy would sum it as contiguous memory, pairwise; cumsum is
        # in order)
        col = np.cumsum(np.concatenate((np.zeros(1, g.dtype), products[:, 0])))[-1:]
    else:
        col = np.add.reduce(products, axis=0, initial=0.0)
    return rows, col


def joint_add_numpy(g, a, b, out, overwrite):
    """:func:`joint_add` in NumPy, bit for bit (tier 0's twin)."""
    rows, col = _sums_numpy(g, a, b)
    if overwrite:
        out[...] = (0.0 + rows) + col
    else:
        out += rows
        out += col


@njit(cache=True, nogil=True)
def joint_scale_add(g, x, out, overwrite):
    """``out += g[:, None] * x`` twice, for ``g (batch,)``, ``x`` and ``out (batch, K)``:
    element ``(i, c)`` becomes ``(out + p) + p`` with ``p = g[i] * x[i, c]`` rounded (``+0.0``
    for ``out`` where ``overwrite``)."""
    batch, n = x.shape
    zero = x.dtype.type(0)
    for i in range(batch):
        scale = g[i]
        row, target = x[i], out[i]
        if overwrite:
            for c in range(n):
                product = scale * row[c]
                target[c] = (zero + product) + product
        else:
            for c in range(n):
                product = scale * row[c]
                target[c] = (target[c] + product) + product


def joint_scale_add_numpy(g, x, out, overwrite):
    """:func:`joint_scale_add` in NumPy, bit for bit (tier 0's twin)."""
    product = g[:, None] * x
    if overwrite:
        out[...] = (0.0 + product) + product
    else:
        out += product
        out += product
