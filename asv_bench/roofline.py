"""How far a large-array workload runs from what the machine allows: ``compare.py``'s roofline.

Two ceilings are measured in the same process as the timings (:func:`measure`):

* **copy bandwidth**, STREAM's "copy": NumPy copying a ``COPY_BYTES`` array into another, the
  best of ``COPY_ROUNDS``, counted as STREAM counts it (the bytes read plus the bytes written);
* **GEMM rate**: the BLAS that NumPy calls (autograd_nb's products call the same library by
  default, ``config.BLAS``) multiplying the workload's own largest product, the best of
  ``GEMM_ROUNDS``, at ``2 m k n`` flops.

Each model (:data:`MODELS`, by workload) gives what a minimal implementation of one step must
do: the bytes it must move through memory (a memory-bound case) or the flops of its matrix
products (a GEMM-bound one). A row's achieved rate is that amount over its median time, and
its *floor ratio* its median over the time the ceiling allows (1: at the limit). The models
are documented in docs/benchmarking.rst ("The roofline column"); cases whose arrays fit in the
caches have no model (their limit is not memory).
"""

import time
from typing import NamedTuple

import numpy as np

#: The copy measures arrays well beyond the last-level cache (32 MiB on the machines of
#: docs/benchmarking.rst).
COPY_BYTES = 1 << 27
COPY_ROUNDS = 5
GEMM_ROUNDS = 5
#: Cases that move fewer bytes than this run from the caches: no bandwidth model.
LARGE_BYTES = 8 << 20


class Model(NamedTuple):
    """What one step of a case must do at least: ``amount`` bytes (``kind == "bytes"``) or
    flops (``"flops"``, with the product ``gemm = (m, k, n, dtype)`` whose rate bounds it)."""

    kind: str
    amount: float
    gemm: tuple = None


def _itemsize(params, default="float64"):
    return np.dtype(params.get("dtype", default)).itemsize


def seed_outer(params):
    # The forward writes y (n x n: it is the user's result), the backward reads the n x n
    # grad_outputs once; x is read and its gradient written (n each).
    n, size = params["n"], _itemsize(params)
    return _bytes((2 * n * n + 2 * n) * size)


def outer_xy(params):
    # As seed_outer, with two vectors read and two gradients written.
    n, size = params["n"], _itemsize(params)
    return _bytes((2 * n * n + 4 * n) * size)


def elementwise_chain(params):
    # A fused forward and backward read x once and write its gradient once; every
    # intermediate can stay in registers (JAX's jit does that).
    return _bytes(2 * params["size"] * _itemsize(params))


def matmul_tanh_256(params):
    # x @ w forward, then G @ w.T and x.T @ G: three 256-cubed products.
    n = 256
    return Model("flops", 3 * 2 * n**3, (n, n, n, "float64"))


def mlp_train_step(params):
    # Batch 256 through 784-512-512-10 (float32): the forward's three products, the three
    # weight gradients (as many flops) and the gradients of the two hidden layers.
    batch, sizes = 256, (784, 512, 512, 10)
    layers = [2 * batch * a * b for a, b in zip(sizes, sizes[1:])]
    return Model("flops", 2 * sum(layers) + sum(layers[1:]), (batch, 784, 512, "float32"))


def _bytes(amount):
    return Model("bytes", amount) if amount >= LARGE_BYTES else None


MODELS = {
    "seed_outer": seed_outer,
    "outer_xy": outer_xy,
    "elementwise_chain": elementwise_chain,
    "matmul_tanh_256": matmul_tanh_256,
    "mlp_train_step": mlp_train_step,
}


def model_of(workload, params):
    """The :class:`Model` of a case, or None where it has none."""
    model = MODELS.get(workload)
    return None if model is None else model(params)


def _best(run, rounds):
    run()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def copy_bandwidth(nbytes=COPY_BYTES, rounds=COPY_ROUNDS):
    """Bytes per second of NumPy's copy of an ``nbytes`` array, read plus written (STREAM's
    count), the best of ``rounds``."""
    source = np.ones(nbytes // 8)
    target = np.empty_like(source)
    return 2 * source.nbytes / _best(lambda: np.copyto(target, source), rounds)


def gemm_rate(m, k, n, dtype, rounds=GEMM_ROUNDS):
    """Flops per second of NumPy's BLAS on one ``(m, k) @ (k, n)`` product of ``dtype``."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    out = np.empty((m, n), dtype=dtype)
    return 2 * m * k * n / _best(lambda: np.matmul(a, b, out=out), rounds)


class Ceilings:
    """The ceilings measured in this process: the copy bandwidth once, each GEMM shape's
    rate at its first use."""

    def __init__(self):
        self.bandwidth = None
        self.gemm = {}

    def for_model(self, model):
        """Bytes or flops per second that bound ``model``."""
        if model.kind == "bytes":
            if self.bandwidth is None:
                self.bandwidth = copy_bandwidth()
            return self.bandwidth
        if model.gemm not in self.gemm:
            self.gemm[model.gemm] = gemm_rate(*model.gemm)
        return self.gemm[model.gemm]

    def lines(self):
        """The machine lines that say what was measured."""
        lines = []
        if self.bandwidth is not None:
            lines.append(f"Copy bandwidth: {self.bandwidth / 1e9:.1f} GB/s (NumPy copy of "
                         f"{COPY_BYTES >> 20} MiB, best of {COPY_ROUNDS}, bytes read + written)")
        for (m, k, n, dtype), rate in self.gemm.items():
            lines.append(f"BLAS GEMM: {rate / 1e9:.1f} GFLOP/s ({m}x{k} @ {k}x{n} {dtype}, "
                         f"NumPy's matmul, best of {GEMM_ROUNDS})")
        return lines


def roofline(model, seconds, ceiling):
    """A row's roofline entry: ``{"kind", "amount", "achieved", "floor_ratio"}``."""
    return {"kind": model.kind, "amount": model.amount, "achieved": model.amount / seconds,
            "floor_ratio": seconds * ceiling / model.amount}


def format_roofline(entry):
    """The table cell: the amount, the rate achieved and the time over the floor."""
    if entry is None:
        return ""
    if entry["kind"] == "bytes":
        return (f"{entry['amount'] / 1e6:.3g} MB at {entry['achieved'] / 1e9:.3g} GB/s: "
                f"{entry['floor_ratio']:.2f}x the floor")
    return (f"{entry['amount'] / 1e6:.3g} MFLOP at {entry['achieved'] / 1e9:.3g} GFLOP/s: "
            f"{entry['floor_ratio']:.2f}x the floor")
