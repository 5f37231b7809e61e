"""Time ``mlp_train_step``'s eight matrix products on each BLAS that ``config.BLAS`` can choose
(NumPy's bundled OpenBLAS, SciPy's, and Intel MKL where it is installed), in one process, on
one thread.

    python asv_bench/blas_products.py [--rounds 15] [--calls 10] [--cpu 0]

Each product runs through ``_blas.gemm_add`` (beta 1, as the VJPs call it) on each library
by turns: per round the median of ``--calls`` calls of each, and the table gives the median of
the rounds in microseconds, each library's time over NumPy's, and whether all gave the same
bits.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchmarks.workloads import median_us, set_threads  # noqa: E402

from autograd_nb.ops import _blas  # noqa: E402


def products(rng):
    """``name -> (x, transpose_x, y, transpose_y)``: the forward's three products and the
    VJPs' five, float32, batch 256, sizes 784-512-512-10."""
    def f(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    x, w1, h1, w2, h2, w3 = f(256, 784), f(784, 512), f(256, 512), f(512, 512), f(256, 512), \
        f(512, 10)
    d3, d2, d1 = f(256, 10), f(256, 512), f(256, 512)
    return {
        "x @ W1": (x, False, w1, False), "h1 @ W2": (h1, False, w2, False),
        "h2 @ W3": (h2, False, w3, False), "h2.T @ d3": (h2, True, d3, False),
        "d3 @ W3.T": (d3, False, w3, True), "h1.T @ d2": (h1, True, d2, False),
        "d2 @ W2.T": (d2, False, w2, True), "x.T @ d1": (x, True, d1, False),
    }


def product_call(blas, x, tx, y, ty):
    """``(call, out)``: ``out += x' @ y'`` by ``blas``'s GEMM, and its ``out`` (zeros)."""
    rows = x.shape[1] if tx else x.shape[0]
    columns = y.shape[0] if ty else y.shape[1]
    out = np.zeros((rows, columns), np.float32)
    gemm = blas.gemm[np.dtype(np.float32)]
    return (lambda: _blas.gemm_add(gemm, 0, x, tx, y, ty, out)), out


def compare(libraries, operands, rounds, calls):
    """Per library the median over ``rounds`` of each round's median call, by turns, and
    whether the libraries' first products have the same bits."""
    made = {lib: product_call(blas, *operands) for lib, blas in libraries.items()}
    for call, _ in made.values():
        call()
    first = [out.copy() for _, out in made.values()]
    same = all(np.array_equal(first[0], out) for out in first[1:])
    times = {lib: [] for lib in libraries}
    for _ in range(rounds):
        for lib, (call, _) in made.items():
            times[lib].append(median_us(call, calls, warmup=0))
    return {lib: float(np.median(t)) for lib, t in times.items()}, same


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--cpu", type=int, default=None, help="pin the process to this CPU")
    args = parser.parse_args()
    set_threads(1)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    numpy_blas = _blas._numpy_blas()
    if numpy_blas is None:
        sys.exit("NumPy bundles no OpenBLAS of its own here: nothing to compare")
    libraries = {"numpy": numpy_blas, "scipy": _blas.scipy_blas()}
    mkl = _blas.PRODUCTS if _blas.PRODUCTS.name == "mkl" else _blas._mkl_blas()
    if mkl is not None:
        libraries["mkl"] = mkl
    names = {"numpy": "NumPy's OpenBLAS", "scipy": "SciPy's", "mkl": "MKL"}
    others = [lib for lib in libraries if lib != "numpy"]
    print(f"products' BLAS by default: {_blas.PRODUCTS.name}")
    print("| product | " + " | ".join(f"{names[lib]} (us)" for lib in libraries) + " | "
          + " | ".join(f"{names[lib]} / NumPy's" for lib in others) + " | same bits |")
    print("| --- |" + " ---: |" * (len(libraries) + len(others)) + " --- |")
    totals = dict.fromkeys(libraries, 0.0)
    for name, operands in products(np.random.default_rng(0)).items():
        medians, same = compare(libraries, operands, args.rounds, args.calls)
        for lib in libraries:
            totals[lib] += medians[lib]
        print(f"| `{name}` | " + " | ".join(f"{medians[lib]:.1f}" for lib in libraries) + " | "
              + " | ".join(f"{medians[lib] / medians['numpy']:.3f}" for lib in others)
              + f" | {same} |")
    print("| all eight | " + " | ".join(f"{totals[lib]:.1f}" for lib in libraries) + " | "
          + " | ".join(f"{totals[lib] / totals['numpy']:.3f}" for lib in others) + " | |")

if __name__ == "__main__":
    main()
