"""How long a new process waits for its first gradient: cold and warm kernel caches.

    python asv_bench/compile_latency.py [--warm-runs 3] [--cold-runs 1] [--breakdown 30]
                                        [--no-tiering]

Each measurement is a fresh Python process that imports autograd_nb, then computes the first
gradient of each benchmark workload (``benchmarks/workloads.py``, in that order, at the first
size ``compare.py`` runs, so a later workload reuses the kernels an earlier one compiled) and,
for contrast, a second one. The small MLP step (``tanh(x @ W1 + b1)``, ``log_softmax(h @ W2)``,
a label gather, ``mean``; float32) has a process and a cache folder of its own: what a new
user waits for.
``AUTOGRAD_NB_CACHE_DIR`` and ``NUMBA_CACHE_DIR`` point at a new temporary folder: the first
process in it starts from a cold cache and compiles every kernel it needs; the processes after
it reuse that folder, so they load the compiled kernels from disk (a warm cache, what a user
sees from the second run on). The table counts numba's compilations in each process: a warm
process that compiles much found no cache of this package version (an edited source file starts
a new generation of the cache).

A cold process serves its first calls from tier 0 (NumPy twins of the forward and VJP
kernels, ``autograd_nb/tiering.py``) while a background process compiles the
kernels: the column "specialised kernels ready" is when that process had finished, counted
from the start of the measuring process. ``--no-tiering`` measures without tier 0 (every
kernel compiles in the process before its first use).

``--breakdown N`` also lists, for the first cold process of each kind, the N functions numba
spent most time compiling (exclusive of the functions they compiled in turn) and the totals
per module. numba's ``numba:compile`` events time them: a ``cfunc``'s own wrapper is not one,
the driver it compiles is.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from compare import load_line, machine_lines  # noqa: E402

SMALL_MLP = "small MLP step (32x64-32-10, float32)"
#: ``--no-tiering``: the processes compile every kernel before its first use (as before tier 0).
TIERING_OFF = False

CHILD = r"""
import json, sys, time
start = time.perf_counter()
compiles = []
from numba.core import event


class CompileTimer(event.Listener):
    # Exclusive seconds: a compilation's own time, less the ones it started.
    def __init__(self):
        self.stack = []

    def on_start(self, ev):
        self.stack.append([time.perf_counter(), 0.0])

    def on_end(self, ev):
        began, inner = self.stack.pop()
        seconds = time.perf_counter() - began
        if self.stack:
            self.stack[-1][1] += seconds
        function = ev.data["dispatcher"].py_func
        signature = ", ".join(str(arg) for arg in ev.data["args"])
        compiles.append([function.__module__, function.__qualname__, signature,
                         seconds - inner])


event.register("numba:compile", CompileTimer())
import autograd_nb
timings = {"import": time.perf_counter() - start}


def small_mlp():
    import numpy as np
    anb = autograd_nb
    rng = np.random.default_rng(0)
    x = anb.tensor(rng.standard_normal((32, 64)).astype(np.float32))
    W1 = anb.tensor(rng.standard_normal((64, 32)).astype(np.float32) / 8, requires_grad=True)
    b1 = anb.tensor(np.zeros(32, np.float32), requires_grad=True)
    W2 = anb.tensor(rng.standard_normal((32, 10)).astype(np.float32) / 6, requires_grad=True)
    rows, labels = np.arange(32), rng.integers(0, 10, size=32)

    def step():
        h = anb.tanh(x @ W1 + b1)
        loss = -anb.log_softmax(h @ W2, axis=1)[rows, labels].mean()
        return anb.grad(loss, [W1, b1, W2])

    return step


if sys.argv[2] == "small_mlp":
    steps = {__SMALL_MLP__: small_mlp()}
else:
    sys.path.insert(0, sys.argv[1])
    from benchmarks.workloads import WORKLOADS, make_step
    steps = {name: make_step(name, "autograd_nb", **spec.compare[0])
             for name, spec in WORKLOADS.items()}
for name, step in steps.items():
    start = time.perf_counter()
    step()
    timings[name + ", first"] = time.perf_counter() - start
    start = time.perf_counter()
    step()
    timings[name + ", second"] = time.perf_counter() - start
# A warm process that compiles much measured a cold cache (an edited package: a new generation).
timings["numba compilations"] = len(compiles)
# Tier 0 (autograd_nb/tiering.py): when the background process had compiled the kernels these
# steps use (0: none ran, the cache had them or tiering is off).
from autograd_nb import tiering
ran = tiering.status()["worker"] or tiering.ready_after is not None
tiering.wait(900)
timings["specialised kernels ready"] = time.perf_counter() - start if ran else 0.0
print(json.dumps({"timings": timings, "compiles": compiles if sys.argv[3] == "1" else []}))
""".replace("__SMALL_MLP__", repr(SMALL_MLP))


def run_child(cache_dir, what, breakdown=False):
    env = dict(os.environ)
    env["AUTOGRAD_NB_TIERED"] = "0" if TIERING_OFF else "1"  # (the benchmarks turn it off)
    env["AUTOGRAD_NB_CACHE_DIR"] = os.path.join(cache_dir, "kernels")
    env["NUMBA_CACHE_DIR"] = os.path.join(cache_dir, "numba")
    done = subprocess.run(
        [sys.executable, "-c", CHILD, HERE, what, str(int(breakdown))],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the measuring process failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(cold_runs, warm_runs, what, breakdown=False):
    """Timings of ``cold_runs`` cold-cache processes and ``warm_runs`` warm-cache ones running
    ``what`` ("small_mlp" or "workloads"), and the first cold process's compilations."""
    cold, warm, compiles = [], [], None
    for _ in range(cold_runs):
        cache_dir = tempfile.mkdtemp(prefix="autograd_nb_cache_")
        try:
            result = run_child(cache_dir, what, breakdown and compiles is None)
            cold.append(result["timings"])
            if compiles is None:
                compiles = result["compiles"]
            if not warm:
                warm.extend(run_child(cache_dir, what)["timings"] for _ in range(warm_runs))
        finally:
            shutil.rmtree(cache_dir, ignore_errors=True)
    return cold, warm, compiles


def median_of(runs, key):
    return statistics.median(run[key] for run in runs)


def first_gradients_total(run):
    return sum(seconds for key, seconds in run.items() if key == "import" or key.endswith("first"))


def module_family(module):
    """Generated kernel modules (``anb_<tag>_<digest>``) by tag; the others as they are."""
    found = re.match(r"anb_(.+)_[0-9a-f]{16}$", module)
    if found:
        return "anb_" + found.group(1)
    return "numba (its own functions)" if module.startswith("numba.") else module


def print_breakdown(title, compiles, top):
    total = sum(seconds for *_, seconds in compiles)
    print(
        f"\n{title}: {len(compiles)} compilations of "
        f"{len({(module, name) for module, name, *_ in compiles})} functions, {total:.1f} s."
    )
    print()
    print("| function (exclusive seconds) | signature | seconds |")
    print("| --- | --- | ---: |")
    for module, name, signature, seconds in sorted(compiles, key=lambda c: -c[3])[:top]:
        signature = signature if len(signature) <= 80 else signature[:77] + "..."
        print(f"| `{module}.{name}` | {signature} | {seconds:.3f} |")
    families = {}
    for module, *_, seconds in compiles:
        count, summed = families.get(module_family(module), (0, 0.0))
        families[module_family(module)] = (count + 1, summed + seconds)
    print()
    print("| module | compilations | seconds |")
    print("| --- | ---: | ---: |")
    for family, (count, seconds) in sorted(families.items(), key=lambda f: -f[1][1]):
        print(f"| {family} | {count} | {seconds:.3f} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold-runs", type=int, default=1)
    parser.add_argument("--warm-runs", type=int, default=3)
    parser.add_argument(
        "--breakdown",
        type=int,
        default=0,
        metavar="N",
        help="list the N slowest compilations of the first cold processes",
    )
    parser.add_argument(
        "--no-tiering",
        action="store_true",
        help="AUTOGRAD_NB_TIERED=0: no NumPy tier, every kernel compiles before its first use",
    )
    args = parser.parse_args(argv)
    global TIERING_OFF
    TIERING_OFF = args.no_tiering
    load = load_line()
    results = {
        what: measure(args.cold_runs, args.warm_runs, what, args.breakdown > 0)
        for what in ("small_mlp", "workloads")
    }
    print("\n".join(machine_lines()))
    print(load)
    print(f"Medians over {args.cold_runs} cold-cache and {args.warm_runs} warm-cache processes"
          f"{', tiering off' if TIERING_OFF else ''}.")
    print()
    print("| step (seconds, in a fresh process) | cold cache | warm cache |")
    print("| --- | ---: | ---: |")
    for what, (cold, warm, _) in results.items():
        label = SMALL_MLP if what == "small_mlp" else "each workload"
        for key in cold[0]:
            if key == "numba compilations":
                continue
            row = f"{key} (own process)" if what == "small_mlp" and key == "import" else key
            print(f"| {row} | {median_of(cold, key):.3f} | {median_of(warm, key):.3f} |")
        cold_total = statistics.median(first_gradients_total(run) for run in cold)
        warm_total = statistics.median(first_gradients_total(run) for run in warm)
        print(f"| import + first grad of {label} | {cold_total:.3f} | {warm_total:.3f} |")
        key = "numba compilations"
        print(
            f"| {key} in that process | {median_of(cold, key):.0f} | {median_of(warm, key):.0f} |"
        )
    if args.breakdown:
        for what, title in (("small_mlp", SMALL_MLP), ("workloads", "The workloads")):
            print_breakdown(title, results[what][2], args.breakdown)


if __name__ == "__main__":
    main()
