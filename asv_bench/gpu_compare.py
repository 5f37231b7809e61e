"""Issue 5's GPU benchmarks in one process: medians, ratios, achieved bandwidth.

Runs ``benchmarks/gpu.py``'s workloads for autograd_nb (``device="cuda"``) and PyTorch CUDA,
checks every gradient against the CPU reference, and prints a table with the median time per
iteration, its ratio to autograd_nb's, for the chain backward the achieved memory bandwidth
against the card's peak, and for autograd_nb its device counters per step
(``anb.cuda.counters()``: kernel launches, driver allocations, synchronizations). Rows whose
engine has no GPU say why.

    .venv/bin/python asv_bench/gpu_compare.py                  # on a machine with a GPU
    NUMBA_ENABLE_CUDASIM=1 .venv/bin/python asv_bench/gpu_compare.py --simulator --size 64
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchmarks import gpu  # noqa: E402
from benchmarks.workloads import _chain20_data  # noqa: E402


def _median_time(step, repeat):
    step()  # compiled and warm
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _format(seconds):
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


def _counts_note(engine, step):
    """autograd_nb's counters per step, for the check column ("" for the peers)."""
    if engine != "autograd_nb":
        return ""
    counts = gpu.anb_counts_per_step(step)
    return (f"; per step: {counts['launches']:.3g} launches, {counts['allocations']:.3g} "
            f"allocations ({counts['bytes_allocated']:.3g} B), "
            f"{counts['synchronizations']:.3g} synchronizations")


def _chain_reference(size):
    """The chain's gradient on the CPU, in float64, from autograd_nb's CPU backward."""
    from benchmarks.workloads import _run_chain

    import autograd_nb as anb

    x = anb.tensor(_chain20_data(size, "float32").astype(np.float64), requires_grad=True)
    y = anb.sum(_run_chain({name: getattr(anb, name) for name in gpu.UNARY}, x))
    return anb.grad(y, x)[0].numpy()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000_000, help="chain elements")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--simulator", action="store_true",
                        help="allow numba's CUDA simulator (a smoke test, not a timing)")
    args = parser.parse_args()
    rows = []
    peak = gpu.card_bandwidth()
    chain_bytes = gpu.chain_backward_bytes(args.size)
    reference = _chain_reference(args.size)
    for engine in ("autograd_nb", "torch"):
        try:
            checked, step = gpu.make_chain_backward(engine, args.size, args.simulator)
        except NotImplementedError as reason:
            rows.append(("chain_backward", engine, None, str(reason), None))
            continue
        error = float(np.max(np.abs(checked() - reference)))
        seconds = _median_time(step, args.repeat)
        note = f"{error:.1e} vs CPU float64" + _counts_note(engine, step)
        rows.append(("chain_backward", engine, seconds, note, chain_bytes / seconds))
    jacobian = gpu.reference_jacobian()
    for engine in ("autograd_nb", "torch", "torch:jacrev"):
        if args.simulator:
            rows.append(("jacobian", engine, None, "skipped on the simulator (too slow)", None))
            continue
        try:
            checked, step = gpu.make_jacobian(engine, args.simulator)
        except NotImplementedError as reason:
            rows.append(("jacobian", engine, None, str(reason), None))
            continue
        error = float(np.max(np.abs(checked() - jacobian)))
        note = f"{error:.1e} vs closed form" + _counts_note(engine, step)
        rows.append(("jacobian", engine, _median_time(step, args.repeat), note, None))
    print(f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"Chain size: {args.size:,} float32; repeats: {args.repeat}; card peak bandwidth: "
          + (f"{peak / 1e9:.0f} GB/s" if peak else "unknown"))
    print()
    print("| workload | engine | median | time / autograd_nb's | achieved bandwidth | check |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    ours = {w: s for w, e, s, _, _ in rows if e == "autograd_nb" and s}
    for workload, engine, seconds, note, bandwidth in rows:
        if seconds is None:
            print(f"| {workload} | {engine} | not run: {note} | | | |")
            continue
        ratio = f"{seconds / ours[workload]:.3g}" if workload in ours else ""
        achieved = ""
        if bandwidth:
            achieved = f"{bandwidth / 1e9:.0f} GB/s"
            if peak:
                achieved += f" ({100 * bandwidth / peak:.0f}% of peak)"
        print(f"| {workload} | {engine} | {_format(seconds)} | {ratio} | {achieved} | {note} |")


if __name__ == "__main__":
    main()
