"""How long a new process waits for its first gradient: cold and warm kernel caches.

    python asv_bench/compile_latency.py [--warm-runs 3] [--cold-runs 1]

Each measurement is a fresh Python process that imports autograd_nb, then computes the first
gradient of each benchmark workload (``benchmarks/workloads.py``, in that order, at the first
size ``compare.py`` runs, so a later workload reuses the kernels an earlier one compiled) and,
for contrast, a second one.
``AUTOGRAD_NB_CACHE_DIR`` and ``NUMBA_CACHE_DIR`` point at a new temporary folder: the first
process in it starts from a cold cache and compiles every kernel it needs; the processes after
it reuse that folder, so they load the compiled kernels from disk (a warm cache, what a user
sees from the second run on).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from compare import machine_lines  # noqa: E402

CHILD = r"""
import json, sys, time
start = time.perf_counter()
import autograd_nb
timings = {"import": time.perf_counter() - start}
sys.path.insert(0, sys.argv[1])
from benchmarks.workloads import WORKLOADS, make_step
for workload, spec in WORKLOADS.items():
    step = make_step(workload, "autograd_nb", **spec.compare[0])
    start = time.perf_counter()
    step()
    timings[workload + ", first"] = time.perf_counter() - start
    start = time.perf_counter()
    step()
    timings[workload + ", second"] = time.perf_counter() - start
print(json.dumps(timings))
"""


def run_child(cache_dir):
    env = dict(os.environ)
    env["AUTOGRAD_NB_CACHE_DIR"] = os.path.join(cache_dir, "kernels")
    env["NUMBA_CACHE_DIR"] = os.path.join(cache_dir, "numba")
    done = subprocess.run(
        [sys.executable, "-c", CHILD, HERE], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"the measuring process failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(cold_runs, warm_runs):
    cold, warm = [], []
    for _ in range(cold_runs):
        cache_dir = tempfile.mkdtemp(prefix="autograd_nb_cache_")
        try:
            cold.append(run_child(cache_dir))
            if not warm:
                warm.extend(run_child(cache_dir) for _ in range(warm_runs))
        finally:
            shutil.rmtree(cache_dir, ignore_errors=True)
    return cold, warm


def median_of(runs, key):
    return statistics.median(run[key] for run in runs)


def first_gradients_total(run):
    return sum(seconds for key, seconds in run.items() if not key.endswith("second"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold-runs", type=int, default=1)
    parser.add_argument("--warm-runs", type=int, default=3)
    args = parser.parse_args(argv)
    cold, warm = measure(args.cold_runs, args.warm_runs)
    print("\n".join(machine_lines()))
    print(f"Medians over {args.cold_runs} cold-cache and {args.warm_runs} warm-cache processes.")
    print()
    print("| step (seconds, in a fresh process) | cold cache | warm cache |")
    print("| --- | ---: | ---: |")
    for key in cold[0]:
        print(f"| {key} | {median_of(cold, key):.3f} | {median_of(warm, key):.3f} |")
    cold_total = statistics.median(first_gradients_total(run) for run in cold)
    warm_total = statistics.median(first_gradients_total(run) for run in warm)
    print(f"| import + first grad of each workload | {cold_total:.3f} | {warm_total:.3f} |")


if __name__ == "__main__":
    main()
