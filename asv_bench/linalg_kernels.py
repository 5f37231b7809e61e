"""Time the LAPACK and BLAS kernels behind ``anb.linalg``'s backward (``ops/_lapack.py``), and
the choices that set its constants, on one thread.

    python asv_bench/linalg_kernels.py [--orders 64,512] [--cpu 1]

Each row is the best of 5 rounds of ``timeit`` (the minimum: on a shared machine the load only
adds time), in microseconds, per order:

- ``rates``: GFLOP/s of OpenBLAS's GEMM, ``trmm``, ``trsm`` and ``trtri`` (through SciPy) and
  of ``_lapack.triangular_inverse``, for the module docstring's "Speed";
- ``inverse``: ``_lapack.lu_inverse`` of LU factors for ``LEAVES`` pairs, and LAPACK's
  ``getri`` on the same factors;
- ``spd-inverse``: ``lu_inverse`` of Cholesky factors for several first leaves, and
  LAPACK's ``potri``;
- ``cholesky-reverse``: ``linalg_cholesky._cholesky_adjoint`` for ``CHOLESKY_BLOCKS`` pairs,
  and the factorisation (``potrf``) it reverses, for scale;
- ``potrf``: LAPACK's ``potrf`` with ``"L"`` and with ``"U"`` (``_lapack.potrf_upper``).
"""

import argparse
import os
import sys
import timeit

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_name] = "1"

import numpy as np  # noqa: E402
import scipy.linalg.blas as blas  # noqa: E402
import scipy.linalg.lapack as lapack  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from autograd_nb.ops import _lapack, linalg_cholesky  # noqa: E402


def best(function, rounds=5):
    """Microseconds per call: the minimum over ``rounds`` of ``timeit.repeat``."""
    function()
    number = 1
    while timeit.timeit(function, number=number) < 0.01:
        number *= 2
    return min(min(timeit.repeat(function, number=number, repeat=7)) for _ in range(rounds)) / (
        number / 1e6
    )


def spd(n, rng):
    x = rng.standard_normal((n, n))
    return x @ x.T / n + np.eye(n)


def rates(n, rng):
    a = np.asfortranarray(rng.standard_normal((n, n)) + 3 * np.sqrt(n) * np.eye(n))
    lower = np.asfortranarray(np.tril(a))
    b = np.asfortranarray(rng.standard_normal((n, n)))
    routines = _lapack.routines(np.float64)
    flops = {"gemm": 2 * n**3, "trmm": n**3, "trsm": n**3, "trtri": n**3 / 3,
             "triangular_inverse": n**3 / 3}
    times = {
        "gemm": best(lambda: blas.dgemm(1.0, a, b)),
        "trmm": best(lambda: blas.dtrmm(1.0, lower, b, lower=1)),
        "trsm": best(lambda: blas.dtrsm(1.0, lower, b, lower=1)),
        "trtri": best(lambda: lapack.dtrtri(lower, lower=1)),
        "triangular_inverse": best(
            lambda: _lapack.triangular_inverse(routines, lower.T.copy(), False, False)
        ),
    }
    return {name: f"{flops[name] / t / 1e3:.1f} GFLOP/s ({t:.1f})" for name, t in times.items()}


def inverse(n, rng):
    a = rng.standard_normal((n, n)) + 3 * np.sqrt(n) * np.eye(n)
    routines = _lapack.routines(np.float64)
    packed, out = np.empty((n, n + 1)), np.empty((n, n))
    _lapack.lu_factor_into(routines, a, packed)
    factors, pivots, _ = lapack.dgetrf(a)
    rows = {
        f"leaves {leaves}": best(lambda leaves=leaves: _lapack.lu_inverse(routines, packed, out,
                                                                          leaves))
        for leaves in ((16, 16), (32, 16), (64, 16), (16, 8), (16, 32))
    }
    rows["getri"] = best(lambda: lapack.dgetri(factors, pivots))
    return rows


def spd_inverse(n, rng):
    a = spd(n, rng)
    routines = _lapack.routines(np.float64)
    packed, out = np.empty((n, n + 1)), np.empty((n, n))
    _lapack.lu_factor_into(routines, a, packed)
    lower = np.asfortranarray(np.linalg.cholesky(a))
    rows = {
        f"first leaf {leaf}": best(lambda leaf=leaf: _lapack.lu_inverse(routines, packed, out,
                                                                        (leaf, 16)))
        for leaf in (16, 32, 64)
    }
    rows["potri"] = best(lambda: lapack.dpotri(lower, lower=1))
    return rows


def cholesky_reverse(n, rng):
    a = spd(n, rng)
    routines = _lapack.routines(np.float64)
    lower = np.linalg.cholesky(a)
    bar, work = np.tril(rng.standard_normal((n, n))), np.empty((n, n))

    def reverse(blocks):
        np.copyto(work, bar)
        linalg_cholesky._cholesky_adjoint(routines, lower, work, blocks)

    rows = {f"blocks {blocks}": best(lambda blocks=blocks: reverse(blocks))
            for blocks in ((64, 16), (32, 16), (128, 16), (64, 8), (64, 32))}
    rows["potrf"] = best(lambda: _lapack.cholesky_into(routines, a, work))
    return rows


def potrf(n, rng):
    a = np.asfortranarray(spd(n, rng))
    return {"L": best(lambda: lapack.dpotrf(a, lower=1)),
            "U": best(lambda: lapack.dpotrf(a, lower=0))}


TABLES = {"rates": rates, "inverse": inverse, "spd-inverse": spd_inverse,
          "cholesky-reverse": cholesky_reverse, "potrf": potrf}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", default="64,512")
    parser.add_argument("--cpu", type=int, default=None, help="pin the process to this CPU")
    parser.add_argument("--tables", default=",".join(TABLES))
    args = parser.parse_args()
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, [args.cpu])
    for name in args.tables.split(","):
        for n in (int(v) for v in args.orders.split(",")):
            rows = TABLES[name](n, np.random.default_rng(n))
            cells = ", ".join(
                f"{key}: {value if isinstance(value, str) else f'{value:.1f}'}"
                for key, value in rows.items()
            )
            print(f"{name}, n = {n}: {cells}", flush=True)


if __name__ == "__main__":
    main()
