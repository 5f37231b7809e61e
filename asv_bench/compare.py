"""Time every workload once per installed engine, in this one process, and print a table.

    python asv_bench/compare.py [--repeat 7] [--threads N] [--workload NAME] [--engine NAME]

Each engine's step is warmed up first (compilation is not timed; see compile_latency.py),
then timed with ``timeit``: ``repeat`` rounds of as many calls as fill ~0.2 s, and the median
time per call is reported. The ratio is the engine's median over autograd_nb's (above 1:
autograd_nb is faster). The gradients of every engine are checked against autograd_nb's.
The README's performance table is this script's output, with the date and machine it prints.

``--threads N`` caps every library's thread pool (OpenBLAS, OpenMP/MKL, torch, XLA) at N
before any of them is imported; by default each library picks its own. On small machines
(2 cores) multithreaded OpenBLAS can stall for whole scheduler ticks on a 256x256 matmul,
so compare with ``--threads 1`` as well before drawing conclusions.
"""

import argparse
import datetime
import os
import platform
import statistics
import sys
import timeit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMBA_NUM_THREADS",
)


def limit_threads(threads):
    """Cap the thread pools; effective only before numpy, torch and jax are imported."""
    for variable in THREAD_VARIABLES:
        os.environ[variable] = str(threads)
    if threads == 1:
        os.environ["XLA_FLAGS"] = (
            os.environ.get("XLA_FLAGS", "")
            + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        ).strip()


def thread_line():
    settings = [f"{v}={os.environ[v]}" for v in THREAD_VARIABLES if v in os.environ]
    if "torch" in sys.modules:
        settings.append(f"torch.get_num_threads()={sys.modules['torch'].get_num_threads()}")
    return "Threads: " + (", ".join(settings) if settings else "each library's default")


def cpu_model():
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_lines():
    import numba
    import numpy as np
    from benchmarks.workloads import ENGINES, engine_version

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    versions = [f"numpy {np.__version__}", f"numba {numba.__version__}"]
    versions += [
        f"{engine} {version}"
        for engine in ENGINES
        if (version := engine_version(engine)) is not None
    ]
    return [
        f"Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"Machine: {cpu_model()}, {cores} cores available, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}",
        "Versions: " + ", ".join(versions),
        thread_line(),
    ]


def time_step(step, repeat):
    for _ in range(3):
        step()
    timer = timeit.Timer(step)
    number, total = timer.autorange()
    number = max(1, int(number * 0.2 / total)) if total > 0 else number
    return statistics.median(t / number for t in timer.repeat(repeat=repeat, number=number))


def format_seconds(seconds):
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


def compare(workloads, engines, repeat):
    import numpy as np
    from benchmarks.workloads import make_step

    rows = []
    for workload in workloads:
        reference = None
        baseline = None
        for engine in engines:
            try:
                step = make_step(workload, engine)
            except NotImplementedError as error:
                print(f"skip {workload} / {engine}: {error}", file=sys.stderr)
                continue
            grads = step()
            if reference is None:
                reference = grads
            else:
                pairs = zip(grads, reference, strict=True)
                difference = max(float(np.max(np.abs(a - b))) for a, b in pairs)
                scale = max(float(np.max(np.abs(b))) for b in reference)
                if difference > 1e-8 * max(scale, 1.0):
                    raise AssertionError(
                        f"{workload}: {engine}'s gradient differs from {engines[0]}'s by "
                        f"{difference:.3g}"
                    )
            median = time_step(step, repeat)
            if engine == "autograd_nb":
                baseline = median
            ratio = f"{median / baseline:.3g}" if baseline else "n/a"
            rows.append((workload, engine, format_seconds(median), ratio))
            print(f"  {workload} / {engine}: {format_seconds(median)}", file=sys.stderr, flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", type=int, help="cap every library's thread pool")
    parser.add_argument("--workload", action="append", help="repeatable; default: all")
    parser.add_argument("--engine", action="append", help="repeatable; default: all")
    args = parser.parse_args(argv)
    if args.threads is not None:
        limit_threads(args.threads)
    from benchmarks.workloads import DESCRIPTIONS, ENGINES, WORKLOADS

    for name, known in (("workload", WORKLOADS), ("engine", ENGINES)):
        unknown = set(getattr(args, name) or ()) - set(known)
        if unknown:
            parser.error(f"unknown {name} {sorted(unknown)}; choose from {sorted(known)}")
    workloads = args.workload or list(WORKLOADS)
    # autograd_nb first: it is the reference for both the gradients and the ratios.
    engines = ["autograd_nb"] + [e for e in (args.engine or ENGINES) if e != "autograd_nb"]
    rows = compare(workloads, engines, args.repeat)
    sys.stderr.flush()
    print("\n".join(machine_lines()))
    print()
    print("| workload | engine | median per forward+backward | time / autograd_nb's |")
    print("| --- | --- | ---: | ---: |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()
    for workload in workloads:
        print(f"- `{workload}`: {DESCRIPTIONS[workload]}")


if __name__ == "__main__":
    main()
