"""autograd_nb.distributed on this machine: serial against a 2-worker LocalCluster, as a table.

    python asv_bench/distributed_scaling.py [--repeat 7] [--workers 2]
                                            [--worker-numba-threads N]

Times, each the median of ``--repeat`` calls after warm-up (``benchmarks/bench_distributed.py``
defines the work, and its asv suite times the same calls):

* 64 ``ode_rollout`` gradients, each with its own spring constant (``map_grad``, default
  ``batch_size``), in this process and on a ``LocalCluster(n_workers=2, processes=True,
  threads_per_worker=1)``;
* the 4,096 x 1 Jacobian of ``wide_outputs`` (``jacobian``, default ``rows_per_task``);
* the task overhead: 64 trivial gradients one per task (``batch_size=1``), and one task alone.

Beside each wall time, the mean CPU time spent meanwhile: by this process alone for the serial
calls; by this process (the client, and the LocalCluster's scheduler and nannies) and the
workers for the cluster's.

Then the scaling model of docs/distributed.rst, with the measured per-gradient time and
per-task costs put in. The serial and the cluster calls take turns; "speed-up per turn" is
the median of the ratios of one turn's two calls. The load average is printed before and
after: on a shared machine the other processes' work is in every number.
"""

import argparse
import datetime
import math
import os
import platform
import statistics
import sys
import time

from autograd_nb import config

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def timed(call, processes):
    """Wall time of ``call()``, and the CPU time (user + system) each of ``processes`` spent
    meanwhile."""
    before = [sum(p.cpu_times()[:2]) for p in processes]
    start = time.perf_counter()
    call()
    wall = time.perf_counter() - start
    return wall, [sum(p.cpu_times()[:2]) - c for p, c in zip(processes, before)]


def model_speedup(n, gradient, costs, workers, batch):
    """Serial time over the model's wall time (docs/distributed.rst, "A scaling model"): ``n``
    gradients of ``gradient`` s each on ``workers`` one-thread workers, in tasks of ``batch``
    gradients. ``costs``: each task's CPU time on its worker and in the scheduler (which takes
    tasks one at a time), and the round trip the whole call waits for."""
    on_worker, in_scheduler, round_trip = costs
    tasks = math.ceil(n / batch)
    compute = math.ceil(tasks / workers) * (batch * gradient + on_worker)
    return n * gradient / (round_trip + max(compute, tasks * in_scheduler))


def default_batch(n, workers):
    """map_grad's default batch_size for one-thread workers."""
    return max(1, math.ceil(n / (config.MAP_GRAD_TASKS_PER_THREAD * workers)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--worker-numba-threads",
        type=int,
        help="NUMBA_NUM_THREADS of each worker (default: numba's, one per CPU)",
    )
    args = parser.parse_args()

    import numpy as np
    import psutil
    from benchmarks.bench_distributed import ensemble, nothing, spring_rollout_energy, wide_outputs
    from distributed import Client, LocalCluster

    from autograd_nb.distributed import jacobian, map_grad, warm_workers

    load_before = os.getloadavg()
    inputs = ensemble()
    trivial = [(np.array([float(i)]),) for i in range(64)]
    x = np.array([0.3])

    def gradients(client):
        return lambda: map_grad(spring_rollout_energy, inputs, client=client)

    def wide_jacobian(client):
        return lambda: jacobian(wide_outputs, x, client=client)

    def trivial_tasks(client):
        return lambda: map_grad(nothing, trivial, client=client, batch_size=1)

    def one_task(client):
        return lambda: map_grad(nothing, trivial[:1], client=client)

    calls = [
        ("64 ode_rollout gradients", gradients),
        ("Jacobian 1 -> 4096", wide_jacobian),
        ("64 trivial tasks", trivial_tasks),
        ("1 trivial task", one_task),
    ]
    env = {}
    if args.worker_numba_threads:
        env["NUMBA_NUM_THREADS"] = str(args.worker_numba_threads)
    start = time.perf_counter()
    cluster = LocalCluster(
        n_workers=args.workers,
        processes=True,
        threads_per_worker=1,
        dashboard_address=":0",
        env=env,
    )
    client = Client(cluster)
    started = time.perf_counter() - start
    start = time.perf_counter()
    warm_workers(client, spring_rollout_energy, inputs[0])
    warm_workers(client, wide_outputs, (x,), mode="jacobian")
    warmed = time.perf_counter() - start
    # The CPU time of this process (the client, and the LocalCluster's scheduler and nannies)
    # and of the workers.
    here = psutil.Process()
    workers = [psutil.Process(pid) for pid in client.run(os.getpid).values()]
    processes = {"serial": [here], "cluster": [here, *workers]}
    # The two sides take turns, call by call: on a shared machine the load drifts, and each
    # turn's ratio compares two calls made a moment apart.
    sides = {"serial": None, "cluster": client}
    times = {(name, side): [] for name, _ in calls for side in sides}
    cpu = {(name, side): [] for name, _ in calls for side in sides}
    for name, make in calls:
        for where in sides.values():
            for _ in range(3):
                make(where)()
        for _ in range(args.repeat):
            for side, where in sides.items():
                wall, spent = timed(make(where), processes[side])
                times[name, side].append(wall)
                cpu[name, side].append(spent)
    client.close()
    cluster.close()
    load_after = os.getloadavg()
    serial = {name: statistics.median(times[name, "serial"]) for name, _ in calls}
    distributed = {name: statistics.median(times[name, "cluster"]) for name, _ in calls}
    ratio = {
        name: statistics.median(
            a / b for a, b in zip(times[name, "serial"], times[name, "cluster"])
        )
        for name, _ in calls
    }

    print(
        f"date: {datetime.date.today()}; machine: {platform.machine()}, "
        f"{os.cpu_count()} CPUs, {platform.python_implementation()} "
        f"{platform.python_version()}"
    )
    print(
        f"command: python asv_bench/distributed_scaling.py --repeat {args.repeat} "
        f"--workers {args.workers}"
        + (f" --worker-numba-threads {env['NUMBA_NUM_THREADS']}" if env else "")
    )
    print(
        "load average (1, 5, 15 min) before: {:.2f} {:.2f} {:.2f}".format(*load_before)
        + "; after: {:.2f} {:.2f} {:.2f}".format(*load_after)
    )
    print(f"cluster start: {started:.2f} s; warm_workers (both workloads): {warmed:.2f} s")
    print()
    header = (
        f"| {'work':<26} | {'1 process':>10} | {f'{args.workers} workers':>10} | "
        "speed-up | speed-up per turn | CPU, 1 process | CPU, cluster |"
    )
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    # psutil reads CPU times in clock ticks (10 ms): means, not medians, per process.
    cpu = {key: [statistics.mean(p) for p in zip(*spent)] for key, spent in cpu.items()}
    for name, _ in calls:
        print(
            f"| {name:<26} | {serial[name] * 1e3:7.1f} ms | {distributed[name] * 1e3:7.1f} ms |"
            f" {serial[name] / distributed[name]:7.2f}x | {ratio[name]:16.2f}x |"
            f" {sum(cpu[name, 'serial']) * 1e3:11.1f} ms | {sum(cpu[name, 'cluster']) * 1e3:9.1f}"
            " ms |"
        )

    # The costs of a task beyond its work, from the tasks that do almost nothing: the CPU time
    # per task in the workers and in this process (client and scheduler), and the round trip of
    # one task alone.
    in_scheduler, *on_workers = (spent / 64 for spent in cpu["64 trivial tasks", "cluster"])
    costs = (sum(on_workers), in_scheduler, distributed["1 trivial task"])
    gradient = serial["64 ode_rollout gradients"] / 64
    print()
    print(
        f"per task: {costs[0] * 1e3:.2f} ms of CPU in the workers, {costs[1] * 1e3:.2f} ms in "
        f"the client and scheduler; one task's round trip: {costs[2] * 1e3:.2f} ms; "
        f"one ode_rollout gradient: {gradient * 1e3:.2f} ms"
    )
    print()
    print("scaling model (docs/distributed.rst), with these costs: the speed-up over one process")
    print("of 64 gradients, and of 64 gradients per worker (a workload that grows with P)")
    columns = (
        "64, default batch",
        "64, batch_size=1",
        "64 per worker, default",
        "64 per worker, 1 task each",
    )
    print("| workers | " + " | ".join(columns) + " |")
    print("|---------|" + "|".join("-" * (len(c) + 2) for c in columns) + "|")
    for workers in (args.workers, 10, 100, 1000):
        n = 64 * workers
        speedups = (
            model_speedup(64, gradient, costs, workers, default_batch(64, workers)),
            model_speedup(64, gradient, costs, workers, 1),
            model_speedup(n, gradient, costs, workers, default_batch(n, workers)),
            model_speedup(n, gradient, costs, workers, 64),
        )
        cells = [f"{value:{len(c) - 1}.1f}x" for value, c in zip(speedups, columns)]
        print(f"| {workers:>7} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
