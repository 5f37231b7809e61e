"""Time every workload once per engine, in one process, check the gradients, print a table.

    python asv_bench/compare.py [--workloads a,b] [--engines autograd_nb,torch]
                                [--threads N | --threads 1,2 [--alternate 3]]
                                [--quick] [--repeat 7] [--paired R]

For each workload (``benchmarks/workloads.py``) at the sizes the issues name, and each engine
variant that can express it: build the step and call it once (the "first call" column: numba
compiling or loading its cached kernels, XLA compiling), check its gradients against
autograd_nb's (and autograd_nb's against the closed form, where the workload has one), then
time it with ``timeit``: ``repeat`` rounds of as many calls as fill ~0.2 s, and report the
median time per call. The ratio is the engine's median over autograd_nb's (above 1:
autograd_nb is faster). ``--quick`` takes 3 rounds of ~0.05 s. A variant's gradients are
checked at its first call and at its second: a compiled step (``autograd_nb:compile``) records
at its first call, which runs eagerly, and replays from its second.

The compiled variants get a table of their own: their median against eager autograd_nb's,
torch's and JAX's, and the first two calls of a fresh compiled step once the kernels are loaded
(the first records the program, the second is its first replay; each the median over
``FIRST_CALL_ROUNDS`` fresh steps, the backward templates cleared before each).

Each step is timed twice: with Python's cyclic garbage collector off, as ``timeit`` (and asv)
time by default, and with it on, as a program runs. The two differ where a step leaves many
objects for the collector to scan: the recorded graph of ``fastest_autograd`` (a Node, a Tensor
and tuples per op) makes full collections run every few steps, and each one also scans the
~120,000 objects numba holds once its kernels are loaded. A gradient that disagrees is
marked in the table and makes the exit status 1. The README's performance table is this
script's output, with the date, machine and command it prints.

The last column is the roofline (``roofline.py``): for a case whose arrays are larger than
the caches, the bytes a minimal implementation of the step must move and the rate achieved,
against NumPy's copy bandwidth measured in the same process; for a GEMM-bound one, the flops
of its products against the BLAS's own GEMM on the largest of them, measured the same way.
"x the floor" is the median over the time that ceiling allows. The machine lines print both
ceilings, and the CPU-dependent kernel choices autograd_nb made (``kernel_choices``).

``--threads N`` caps every library's thread pool (OpenMP, OpenBLAS, MKL, numba, torch, XLA) at
N before any of them is imported, and pins the process to N of its CPUs (Linux); by default
each library picks its own. ``--threads 1,2``
runs the whole comparison once per count, each in a fresh process (the caps must be set
before the imports), and adds a table of the speed-up from the first count to the others.
``--alternate K`` runs those processes K times, the counts taking turns, and reports the
median over the runs (and each turn's own speed-up): on a shared machine the load drifts
between one process and the next, and a single pair of runs is at its mercy.

``--paired R`` times a case's variants in turn instead of one after the other: R rounds, each
timing every variant for ~``seconds`` (the order rotated from round to round), GC off then on.
A row's median is over its rounds, and each ratio is the median of the ratios within a round
(the variant's time over autograd_nb's in that round). Within one process the load still
drifts from second to second; paired ratios see the same drift on both sides of each ratio,
where two medians taken a minute apart do not. Every variant's step stays alive for the
rounds, so each call's caches also hold what the other engines left (as in a program that
runs more than one thing).
"""

import argparse
import contextlib
import datetime
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import timeit
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMBA_NUM_THREADS",
)

#: How OpenMP's idle workers wait (autograd_nb sets both at import unless the user did):
#: printed beside the thread caps, not set by ``--threads``.
WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")

#: The largest gradient difference from autograd_nb's accepted, relative to its largest entry.
TOLERANCE = {"float64": 1e-8, "float32": 1e-4}

#: Fresh compiled steps whose first two calls are timed (the median is reported).
FIRST_CALL_ROUNDS = 3

#: The copy bandwidth and GEMM rates of this process (``roofline.Ceilings``), measured at
#: first use; made at first use too: ``roofline`` imports NumPy, which must wait for
#: ``limit_threads`` (OpenBLAS reads its thread count when it loads).
_CEILINGS = []


def ceilings():
    import roofline

    if not _CEILINGS:
        _CEILINGS.append(roofline.Ceilings())
    return _CEILINGS[0]


def limit_threads(threads):
    """Cap the thread pools, and pin the process to ``threads`` of its CPUs (where the OS
    can): effective only before numpy, torch and jax are imported."""
    for variable in THREAD_VARIABLES:
        os.environ[variable] = str(threads)
    if threads == 1:
        # XLA has no flag for N > 1 threads; its pool then spans all cores.
        flags = os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false"
        os.environ["XLA_FLAGS"] = flags.strip()
    # XLA's other threads still ran on a second core under the flag above (measured here:
    # jacobian_batched 411 us unpinned, 443 us pinned to one CPU): pinning holds every engine
    # to the same cores.
    if hasattr(os, "sched_getaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        if threads < len(cpus):
            os.sched_setaffinity(0, cpus[:threads])


def pinned_cpus():
    if not hasattr(os, "sched_getaffinity"):
        return None
    return sorted(os.sched_getaffinity(0))


def thread_line():
    names = THREAD_VARIABLES + WAIT_VARIABLES
    settings = [f"{v}={os.environ[v]}" for v in names if v in os.environ]
    if "torch" in sys.modules:
        settings.append(f"torch.get_num_threads()={sys.modules['torch'].get_num_threads()}")
    if "numba" in sys.modules:
        settings.append(f"numba threading layer {_numba_layer()}")
    cpus = pinned_cpus()
    if cpus is not None:
        settings.append(f"CPUs {','.join(map(str, cpus))}")
    return "Threads: " + (", ".join(settings) if settings else "each library's default")


def _numba_layer():
    import numba

    try:
        return numba.threading_layer()
    except ValueError:  # no parallel kernel has run yet
        return "(not started)"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def products_blas():
    """Which BLAS autograd_nb's matrix products call (``config.BLAS``), with its version."""
    from importlib import metadata

    from autograd_nb.ops import _blas

    name = _blas.PRODUCTS.name
    if name == "mkl":
        try:
            return f"Intel MKL {metadata.version('mkl')}"
        except metadata.PackageNotFoundError:
            return "Intel MKL"
    return {"numpy": "NumPy's OpenBLAS", "scipy": "SciPy's BLAS"}[name]


def kernel_choices():
    """The CPU-dependent choices autograd_nb made in this process, and what they rest on."""
    import llvmlite.binding as llvm

    from autograd_nb import config
    from autograd_nb.ops import _blas

    own = _blas.own_kernel_preferred()
    core = _blas._blas_core()
    return (
        f"Kernel choices: products by {'the own AVX-512 GEMM' if own else 'BLAS'} "
        f"(config.GEMM_KERNEL={config.GEMM_KERNEL!r}; BLAS core {core or 'not OpenBLAS'}, "
        f"numba compiles for {llvm.get_host_cpu_name()} "
        f"{'with' if _blas._compiles_for_avx512() else 'without'} AVX-512; "
        f"CPU vendor {'Intel' if _blas._intel_cpu() else 'not Intel'})"
    )


def machine_lines(started=None):
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
        f"Date: {started or datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"Machine: {cpu_model()}, {cores} cores available, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}",
        "Versions: " + ", ".join(versions),
        f"Matrix products: {products_blas()}",
    ]


def load_line():
    try:
        return "Load average at start (1, 5, 15 min): " + ", ".join(
            f"{load:.2f}" for load in os.getloadavg()
        )
    except OSError:
        return "Load average: unknown"


def time_step(step, repeat, seconds, collector=False):
    """Median seconds per call over ``repeat`` rounds of ~``seconds`` each; ``collector``:
    with the garbage collector on (``timeit`` turns it off while it times)."""
    step()
    timer = timeit.Timer(step, setup=gc.enable if collector else "pass")
    number, total = timer.autorange()
    number = max(1, round(number * seconds / total)) if total > 0 else number
    return statistics.median(t / number for t in timer.repeat(repeat=repeat, number=number))


def format_seconds(seconds):
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


def case_label(workload, params):
    return " ".join([workload] + [f"{name}={value}" for name, value in params.items()])


def relative_difference(grads, reference):
    """max |a - b| over all the gradient arrays, over the largest |b|."""
    import numpy as np

    pairs = list(zip(grads, reference, strict=True))
    difference = max(
        float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
        for a, b in pairs
    )
    scale = max(float(np.max(np.abs(np.asarray(b, np.float64)))) for b in reference)
    if not all(np.asarray(a).shape == np.asarray(b).shape for a, b in pairs):
        return float("inf")
    return difference / scale if scale > 0 else difference


def run_case(workload, params, variants, repeat, seconds, paired=0):
    """One row per engine variant: dicts with the timings and the gradient check; with
    ``paired`` rounds, the variants timed in turn (``time_paired``)."""
    import numpy as np
    from benchmarks.workloads import make_step

    label = case_label(workload, params)
    rows = []
    grads_of, second_grads_of = {}, {}
    steps = {}
    for variant in variants:
        row = {"case": label, "workload": workload, "engine": variant}
        rows.append(row)
        start = timeit.default_timer()
        try:
            with fallbacks_noted(row):
                step = make_step(workload, variant, **params)
                grads_of[variant] = [np.array(g) for g in step()]
                row["first_call"] = timeit.default_timer() - start
                # A compiled step's first call runs eagerly; its second is the first replay.
                second_grads_of[variant] = [np.array(g) for g in step()]
        except NotImplementedError as error:
            row["skipped"] = str(error)
            print(f"  {label} / {variant}: skipped ({error})", file=sys.stderr, flush=True)
            continue
        if paired:
            steps[variant] = step
            continue
        row["median"] = time_step(step, repeat, seconds)
        row["median_gc"] = time_step(step, repeat, seconds, collector=True)
        print_timed(label, row)
    if paired:
        time_paired(rows, steps, paired, seconds)
        for row in rows:
            if "median" in row:
                print_timed(label, row)
        steps.clear()
    add_roofline(rows, workload, params)
    # After every variant is timed: clearing the backward templates slows no timed call.
    for row in rows:
        if is_compiled(row["engine"]) and "skipped" not in row:
            row["trace"], row["first_replay"] = compiled_first_calls(
                workload, row["engine"], params
            )
    check_gradients(rows, workload, params, grads_of, second_grads_of)
    add_ratios(rows)
    return rows


def add_roofline(rows, workload, params, measured=None):
    """Each timed row's roofline entry (``roofline.py``) where the case has a model, against
    the ceilings ``measured`` (by default this process's, :func:`ceilings`)."""
    import roofline

    model = roofline.model_of(workload, params)
    if model is None:
        return
    ceiling = (measured or ceilings()).for_model(model)
    for row in rows:
        if "median" in row:
            row["roofline"] = roofline.roofline(model, row["median"], ceiling)


def print_timed(label, row):
    print(
        f"  {label} / {row['engine']}: {format_seconds(row['median'])}"
        f" (GC on: {format_seconds(row['median_gc'])})"
        f" (first call {format_seconds(row['first_call'])})",
        file=sys.stderr,
        flush=True,
    )


def calls_per_round(step, seconds):
    """Calls of ``step`` that take about ``seconds`` (at least one)."""
    number, total = timeit.Timer(step).autorange()
    return max(1, round(number * seconds / total)) if total > 0 else number


def time_paired(rows, steps, rounds, seconds, clock=timeit.default_timer):
    """Time the ``steps`` (by variant) in turn: ``rounds`` rounds, each timing every variant's
    calls for ~``seconds`` with the collector off and then on, the order rotated from round to
    round. Each row gets its medians over the rounds and its times per round (``rounds`` and
    ``rounds_gc``, read by ``add_ratios`` and ``paired_ratio``). ``clock`` is the timer (a
    test hands a fake one)."""
    variants = list(steps)
    numbers = {v: calls_per_round(steps[v], seconds) for v in variants}
    times = {v: ([], []) for v in variants}
    for turn in range(rounds):
        shift = turn % len(variants)
        for variant in variants[shift:] + variants[:shift]:
            for collector, column in zip((False, True), times[variant]):
                timer = timeit.Timer(
                    steps[variant], setup=gc.enable if collector else "pass", timer=clock
                )
                column.append(timer.timeit(numbers[variant]) / numbers[variant])
    for row in rows:
        if row["engine"] in times:
            off, on = times[row["engine"]]
            row["rounds"], row["rounds_gc"] = off, on
            row["median"], row["median_gc"] = statistics.median(off), statistics.median(on)


def paired_ratio(row, baseline, key="median"):
    """``row``'s time over ``baseline``'s: the median of the per-round ratios where both were
    timed in the same rounds (``--paired``), else the ratio of the medians."""
    rounds = "rounds" if key == "median" else "rounds_gc"
    if rounds in row and rounds in baseline and len(row[rounds]) == len(baseline[rounds]):
        return statistics.median(a / b for a, b in zip(row[rounds], baseline[rounds]))
    return row[key] / baseline[key]


@contextlib.contextmanager
def fallbacks_noted(row):
    """Note in ``row["fallback"]`` why a compiled function ran eagerly (its
    ``CompileWarning``), so that its row says so; every warning is still shown."""
    caught = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            yield
    finally:
        for warning in caught:
            if warning.category.__name__ == "CompileWarning":
                row.setdefault("fallback", str(warning.message))
            warnings.showwarning(
                warning.message, warning.category, warning.filename, warning.lineno
            )


def is_compiled(variant):
    """Whether ``variant`` runs through ``anb.compile`` (``autograd_nb:compile...``)."""
    return variant.startswith("autograd_nb:compile")


def compiled_first_calls(workload, variant, params, rounds=FIRST_CALL_ROUNDS):
    """A fresh compiled step's first call (it records) and second (its first replay), each the
    median over ``rounds`` fresh steps (``workloads.compiled_first_calls``)."""
    from benchmarks import workloads

    times = [workloads.compiled_first_calls(workload, variant, **params) for _ in range(rounds)]
    trace, replay = (statistics.median(column) for column in zip(*times))
    print(
        f"  {case_label(workload, params)} / {variant}: first call (records)"
        f" {format_seconds(trace)}, second (first replay) {format_seconds(replay)}",
        file=sys.stderr,
        flush=True,
    )
    return trace, replay


def check_gradients(rows, workload, params, grads_of, second_grads_of):
    """autograd_nb's gradient against the closed form, or else torch's; every other variant's
    against autograd_nb's, at its first call and at its second (a compiled step's first
    replay)."""
    from benchmarks.workloads import WORKLOADS

    spec = WORKLOADS[workload]
    tolerance = spec.tolerance or TOLERANCE[params.get("dtype", spec.dtype)]
    for row in rows:
        if row["engine"] not in grads_of:
            continue
        if row["engine"] == "autograd_nb":
            if spec.closed_form is not None:
                against, references = "closed form", [spec.closed_form(**params)]
            else:
                against, references = "torch", [grads_of.get("torch")]
            calls = [grads_of[row["engine"]]]
        else:
            against = "autograd_nb"
            references = [grads_of.get("autograd_nb"), second_grads_of.get("autograd_nb")]
            calls = [grads_of[row["engine"]], second_grads_of[row["engine"]]]
        if references[0] is None:
            row["check_against"] = f"unchecked: no {against} gradient"
            continue
        row["check"] = max(
            relative_difference(grads, reference)
            for grads, reference in zip(calls, references)
            if reference is not None
        )
        row["check_against"] = against
        row["check_ok"] = row["check"] <= tolerance


def add_ratios(rows):
    for key, ratio in (("median", "ratio"), ("median_gc", "ratio_gc")):
        baseline = next((r for r in rows if r["engine"] == "autograd_nb" and key in r), None)
        for row in rows:
            if baseline and key in row:
                row[ratio] = paired_ratio(row, baseline, key)


def compare(workloads, engines, repeat, seconds, paired=0):
    from benchmarks.workloads import WORKLOADS, engine_of

    rows = []
    for workload in workloads:
        spec = WORKLOADS[workload]
        variants = [v for v in spec.variants if v in engines or engine_of(v) in engines]
        for params in spec.compare:
            rows += run_case(workload, params, variants, repeat, seconds, paired)
    return rows


def format_row(row, with_threads=False):
    import roofline

    cells = [f"`{row['case']}`", row["engine"]]
    if with_threads:
        cells.append(str(row["threads"]))
    if "skipped" in row:
        return "| " + " | ".join(cells + [f"not run: {row['skipped']}", "", "", "", "", "", ""]
                                 ) + " |"
    ratio = f"{row['ratio']:.3g}" if "ratio" in row else "n/a"
    ratio_gc = f"{row['ratio_gc']:.3g}" if "ratio_gc" in row else "n/a"
    if "check" in row:
        check = f"{row['check']:.1e} vs {row['check_against']}"
        check = check if row["check_ok"] else f"**MISMATCH** {check}"
    else:
        check = row.get("check_against", "")
    median_gc = format_seconds(row["median_gc"]) if "median_gc" in row else "n/a"
    cells += [format_seconds(row["median"]), ratio, median_gc, ratio_gc,
              format_seconds(row["first_call"]), check,
              roofline.format_roofline(row.get("roofline"))]
    return "| " + " | ".join(cells) + " |"


def print_table(rows, with_threads=False):
    threads = " threads |" if with_threads else ""
    print(
        f"| workload | engine |{threads} median | time / autograd_nb's | median, GC on "
        "| time / autograd_nb's, GC on | first call | max gradient difference "
        "| roofline (minimal bytes or flops, rate, median over the floor) |"
    )
    print(
        "| --- | --- |" + (" ---: |" if with_threads else "") + " ---: | ---: | ---: | ---: | ---: "
        "| --- | --- |"
    )
    for row in rows:
        print(format_row(row, with_threads))


def print_compiled(rows, with_threads=False):
    """The ``anb.compile`` variants: their median against eager autograd_nb's, torch's and
    JAX's in the same case (above 1: the compiled step is faster), and a fresh compiled step's
    first two calls."""
    compiled = [r for r in rows if is_compiled(r["engine"]) and "median" in r]
    if not compiled:
        return
    peers = ("autograd_nb", "torch", "jax")
    timed = {(r["case"], r["threads"], r["engine"]): r for r in rows if "median" in r}
    print()
    print(
        "anb.compile: median, the eager engines' and JAX jit's medians over it, and the first "
        "two calls of a fresh compiled step (kernels loaded, backward templates cleared):"
    )
    print()
    threads = " threads |" if with_threads else ""
    print(
        f"| workload | engine |{threads} median | "
        + " | ".join(f"{peer} / compiled" for peer in peers)
        + " | first call (records) | second call (first replay) | both |"
    )
    print("| --- | --- |" + (" ---: |" if with_threads else "") + " ---: |" * (len(peers) + 4))
    for row in compiled:
        cells = [f"`{row['case']}`", row["engine"]]
        if with_threads:
            cells.append(str(row["threads"]))
        cells.append(format_seconds(row["median"]))
        for peer in peers:
            other = timed.get((row["case"], row["threads"], peer))
            cells.append(f"{paired_ratio(other, row):.3g}" if other else "n/a")
        first_calls = [row.get("trace"), row.get("first_replay")]
        if None not in first_calls:
            first_calls.append(sum(first_calls))
        cells += [format_seconds(t) if t is not None else "n/a" for t in first_calls]
        if "fallback" in row:
            cells[1] += f" (**ran eagerly**: {row['fallback']})"
        print("| " + " | ".join(cells) + " |")


def print_scaling(rows, counts, runs=None):
    """Speed-up of each engine from the first thread count to the others; with ``runs`` (the
    rows of each alternated process, in order), also each turn's own speed-up."""
    print()
    print(f"Thread scaling (speed-up: median at --threads {counts[0]} over median at N):")
    print()
    each = f" | speed-up at {counts[1]}, per turn" if runs else ""
    print(
        "| workload | engine | "
        + " | ".join(f"--threads {n}" for n in counts)
        + " | "
        + " | ".join(f"speed-up at {n}" for n in counts[1:])
        + each
        + " |"
    )
    print("| --- | --- |" + " ---: |" * (2 * len(counts) - 1) + (" --- |" if runs else ""))
    medians = {}
    for row in rows:
        if "median" in row:
            medians[(row["case"], row["engine"], row["threads"])] = row["median"]
    seen = []
    for row in rows:
        key = (row["case"], row["engine"])
        if key in seen:
            continue
        seen.append(key)
        times = [medians.get((*key, n)) for n in counts]
        cells = [format_seconds(t) if t else "n/a" for t in times]
        cells += [f"{times[0] / t:.2f}x" if times[0] and t else "n/a" for t in times[1:]]
        if runs:
            cells.append(", ".join(_turn_speedups(runs, key, counts)))
        print(f"| `{key[0]}` | {key[1]} | " + " | ".join(cells) + " |")


def _turn_speedups(runs, key, counts):
    """The speed-up from the first count to the second within each turn of the alternation
    (the scaling table's last column names the second count)."""
    turns = [runs[i:i + len(counts)] for i in range(0, len(runs), len(counts))]
    speedups = []
    for turn in turns:
        first, second = (
            next((r.get("median") for r in rows if (r["case"], r["engine"]) == key), None)
            for rows in turn[:2]
        )
        speedups.append(f"{first / second:.2f}x" if first and second else "n/a")
    return speedups


def _csv(text):
    return [item.strip() for item in text.split(",") if item.strip()]


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=_csv, help="comma-separated; default: all")
    parser.add_argument(
        "--engines",
        type=_csv,
        help="comma-separated engines or variants (torch:jacrev); default: all",
    )
    parser.add_argument(
        "--threads",
        type=lambda text: [int(n) for n in _csv(text)],
        help="cap every library's thread pool at N; a list (1,2) runs once per count",
    )
    parser.add_argument(
        "--alternate",
        type=int,
        default=1,
        help="with a list of thread counts: run the processes this many times, alternating "
        "the counts (1, 2, 1, 2, ...), and report medians over the runs",
    )
    parser.add_argument(
        "--paired",
        type=int,
        default=0,
        metavar="R",
        help="time each case's variants in turn, R rounds, and give per-round ratios",
    )
    parser.add_argument("--quick", action="store_true", help="3 rounds of ~0.05 s per row")
    parser.add_argument("--repeat", type=int, help="timing rounds (default 7; 3 with --quick)")
    parser.add_argument("--json", help=argparse.SUPPRESS)  # rows for a parent process
    return parser, parser.parse_args(argv)


def command_line(argv):
    arguments = sys.argv[1:] if argv is None else argv
    return "python asv_bench/compare.py " + " ".join(
        a for a in arguments if not a.startswith("--json")
    )


def main(argv=None):
    parser, args = parse_args(argv)
    counts = args.threads or []
    if args.alternate < 1 or (args.alternate > 1 and len(counts) < 2):
        parser.error("--alternate K needs K >= 1 and a list of thread counts (--threads 1,2)")
    if args.paired < 0 or (args.paired and len(counts) > 1):
        parser.error("--paired R needs R >= 0 and at most one thread count")
    if len(counts) > 1:
        return run_per_thread_count(args, counts, command_line(argv))
    if counts:
        limit_threads(counts[0])
    from benchmarks.workloads import ENGINES, WORKLOADS

    variants = {v for spec in WORKLOADS.values() for v in spec.variants}
    unknown_workloads = set(args.workloads or ()) - set(WORKLOADS)
    unknown_engines = set(args.engines or ()) - set(ENGINES) - variants
    if unknown_workloads or unknown_engines:
        parser.error(
            f"unknown {sorted(unknown_workloads | unknown_engines)}; workloads: "
            f"{sorted(WORKLOADS)}; engines: {sorted(set(ENGINES) | variants)}"
        )
    workloads = args.workloads or list(WORKLOADS)
    # autograd_nb always runs: it is the reference for both the gradients and the ratios.
    engines = {"autograd_nb"} | set(args.engines or ENGINES)
    repeat = args.repeat or (3 if args.quick else 7)
    seconds = 0.05 if args.quick else 0.2
    load = load_line()
    started = datetime.datetime.now(datetime.timezone.utc)
    rows = compare(workloads, engines, repeat, seconds, args.paired)
    for row in rows:
        row["threads"] = counts[0] if counts else "default"
    header = machine_lines(started) + [thread_line(), load, kernel_choices()]
    header += ceilings().lines()
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"header": header, "rows": rows}, out)
        return 0 if all(r.get("check_ok", True) for r in rows) else 1
    sys.stderr.flush()
    print("\n".join(header))
    print(f"Command: {command_line(argv)}")
    if args.paired:
        print(f"Paired: each case's variants timed in turn, {args.paired} rounds; ratios are "
              "medians of the per-round ratios.")
    print()
    print_table(rows)
    print_compiled(rows)
    print_descriptions(workloads)
    return 0 if all(r.get("check_ok", True) for r in rows) else 1


def print_descriptions(workloads):
    from benchmarks.workloads import WORKLOADS

    print()
    for workload in workloads:
        print(f"- `{workload}`: {WORKLOADS[workload].description}")


def run_per_thread_count(args, counts, command):
    """Each count in a fresh process (the caps must precede the imports); one table. With
    ``--alternate K`` the counts' processes run K times in turn, and each cell is the median
    over the K runs."""
    import tempfile

    runs, headers = [], []
    for _ in range(args.alternate):
        for count in counts:
            argv = ["--threads", str(count)]
            for name in ("workloads", "engines"):
                if getattr(args, name):
                    argv += [f"--{name}", ",".join(getattr(args, name))]
            argv += ["--quick"] if args.quick else []
            argv += ["--repeat", str(args.repeat)] if args.repeat else []
            with tempfile.NamedTemporaryFile(suffix=".json") as out:
                done = subprocess.run(
                    [sys.executable, os.path.abspath(__file__), *argv, "--json", out.name],
                    check=False,
                )
                if done.returncode not in (0, 1):
                    raise SystemExit(f"the run with --threads {count} failed")
                result = json.load(open(out.name))
            headers.append((count, result["header"]))
            runs.append(result["rows"])
    rows = merge_runs(runs)
    sys.stderr.flush()
    print("\n".join(headers[0][1][:3]))
    for count, header in headers:
        print(f"{header[3]} (run with --threads {count}); {header[4].lower()}")
        for line in header[6:]:
            print(f"{line} (run with --threads {count})")
    print(f"Command: {command}")
    if args.alternate > 1:
        print(f"Each cell: the median over {args.alternate} runs per thread count, the counts' "
              "processes taking turns.")
    print()
    print_table(rows, with_threads=True)
    print_compiled(rows, with_threads=True)
    print_scaling(rows, counts, runs if args.alternate > 1 else None)
    print_descriptions(args.workloads or list(dict.fromkeys(r["workload"] for r in rows)))
    return 0 if all(r.get("check_ok", True) for r in rows) else 1


def merge_runs(runs):
    """One row per workload, engine and thread count: the medians over the runs that timed it
    (times, ratios and a compiled step's first calls), its first run's first call, and its
    worst gradient check."""
    merged = {}
    for rows in runs:
        for row in rows:
            key = (row["case"], row["engine"], row["threads"])
            merged.setdefault(key, []).append(row)
    result = []
    for same in merged.values():
        row = dict(same[0])
        for name in ("median", "median_gc", "ratio", "ratio_gc", "trace", "first_replay"):
            values = [r[name] for r in same if name in r]
            if values:
                row[name] = statistics.median(values)
        checked = [r for r in same if "check" in r]
        if checked:
            worst = max(checked, key=lambda r: (not r["check_ok"], r["check"]))
            row["check"], row["check_ok"] = worst["check"], worst["check_ok"]
        result.append(row)
    return result


if __name__ == "__main__":
    sys.exit(main())
