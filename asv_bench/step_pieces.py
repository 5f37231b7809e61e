"""The pieces of ``mlp_train_step`` that ``program_rows.py`` pointed at, eager, beside torch and
NumPy where they have the same operation; and a replayed broadcast add, its operand gathered
into a fused group's register, read in place by the add alone, or read in place by a group whose
blocks are the rows (``config.REPLAY_GATHER_ROW``, ``REPLAY_ROW_MIN``), per row length.

    python asv_bench/step_pieces.py [--rounds N]

Each line is the median of ``--rounds`` calls, after three untimed ones (numba compiling or
loading its kernels). Run it with ``compare.py --threads 1``'s caps and pinned to one CPU for
numbers comparable to its tables:

    NUMBA_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 AUTOGRAD_NB_TIERED=0 \\
        taskset -c 0 python asv_bench/step_pieces.py
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from benchmarks.workloads import median_us  # noqa: E402

import autograd_nb as anb  # noqa: E402
from autograd_nb import config  # noqa: E402

try:
    import torch
except ImportError:  # a peer only: the lines without it still print
    torch = None


def _pieces():
    """``(name, {engine: function})`` per piece."""
    rng = np.random.default_rng(0)

    def data(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    h, bias, g = data(256, 512), data(512), np.ones((256, 512), np.float32)
    x, w1, w2, g1 = data(256, 784), data(784, 512), data(512, 512), data(256, 512)
    p, update = data(784, 512), data(784, 512)
    A, B = anb.tensor(h, requires_grad=True), anb.tensor(bias, requires_grad=True)
    total = A + B
    X, W1 = anb.tensor(x), anb.tensor(w1, requires_grad=True)
    H, W2 = anb.tensor(h, requires_grad=True), anb.tensor(w2, requires_grad=True)
    product1, product2 = X @ W1, H @ W2
    P, U = anb.tensor(p), anb.tensor(update)

    def anb_update():
        with anb.no_grad():
            P.__isub__(U)

    pieces = [
        ("bias add, both gradients, (256, 512) + (512,)",
         {"autograd_nb": lambda: anb.grad(total, (A, B), grad_outputs=g, retain_graph=True)}),
        ("weight gradient x.T @ g, 784 x 512 from 256 rows",
         {"autograd_nb": lambda: anb.grad(product1, W1, grad_outputs=g1, retain_graph=True),
          "numpy": lambda: x.T @ g1}),
        ("weight gradient h.T @ g, 512 x 512 from 256 rows",
         {"autograd_nb": lambda: anb.grad(product2, W2, grad_outputs=g1, retain_graph=True),
          "numpy": lambda: h.T @ g1}),
        ("p -= u under no_grad, 784 x 512",
         {"autograd_nb": anb_update, "numpy": lambda: np.subtract(p, update, out=p)}),
        ("tanh, 256 x 512", {"autograd_nb": lambda: anb.tanh(A.detach()),
                             "numpy": lambda: np.tanh(h)}),
    ]
    if torch is not None:
        torch.set_num_threads(1)
        TA, TB = torch.tensor(h, requires_grad=True), torch.tensor(bias, requires_grad=True)
        t_total, tg = TA + TB, torch.tensor(g)
        TP, TU = torch.tensor(p), torch.tensor(update)
        pieces[0][1]["torch"] = lambda: torch.autograd.grad(t_total, (TA, TB), tg,
                                                            retain_graph=True)
        pieces[3][1]["torch"] = lambda: TP.sub_(TU)
        pieces[4][1]["torch"] = lambda: torch.tanh(TA.detach())
    return pieces


def _gather_pieces():
    """``(z + b) * 1.5`` replayed, ``b`` a row broadcast over ``z``, recorded three ways: the
    row gathered into the group's register, the add unfused reading it in place (its strided
    driver), and the group's blocks made the rows, each reading the row in place."""
    rng = np.random.default_rng(1)
    pieces = []
    shapes = [(size // n, n) for size in (4096, 131072) for n in (16, 64, 128, 512, 4096)
              if n < size]  # (131,072 in rows of 512: mlp_train_step's 256 x 512)
    never = config.REPLAY_ROW_MAX + 1
    ways = {"gathered": lambda n: (n + 1, never),
            "unfused": lambda n: (n, never),
            "rows in place": lambda n: (n, n)}
    for shape, dtype in [(s, np.float32) for s in shapes] + [((256, 512), np.float64)]:
        z = anb.tensor(rng.standard_normal(shape).astype(dtype))
        b = anb.tensor(rng.standard_normal(shape[1]).astype(dtype))
        runs = {}
        for how, thresholds in ways.items():
            compiled = anb.compile(lambda z, b: (z + b) * 1.5)
            saved = config.REPLAY_GATHER_ROW, config.REPLAY_ROW_MIN
            config.REPLAY_GATHER_ROW, config.REPLAY_ROW_MIN = thresholds(shape[1])
            try:
                compiled(z, b)  # (records under these thresholds)
            finally:
                config.REPLAY_GATHER_ROW, config.REPLAY_ROW_MIN = saved
            runs[how] = lambda compiled=compiled, z=z, b=b: compiled(z, b)
        name = np.dtype(dtype).name
        pieces.append((f"replayed (z + b) * 1.5, z {shape[0]} x {shape[1]} {name}", runs))
    return pieces


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--rows-only", action="store_true",
                        help="only the replayed broadcast adds")
    args = parser.parse_args()
    pieces = _gather_pieces() if args.rows_only else _pieces() + _gather_pieces()
    for name, engines in pieces:
        cells = [f"{engine} {median_us(run, args.rounds):.1f} us" for engine, run in
                 engines.items()]
        print(f"{name}: " + ", ".join(cells))


if __name__ == "__main__":
    main()
