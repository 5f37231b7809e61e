"""Tiered first use: NumPy serves an op until its compiled kernels are in the cache.

A fresh process with an empty kernel cache would compile every kernel it meets, about a
second of numba and LLVM per function (docs/benchmarking.rst, "Cold start"). Instead, while an
op's kernels are not known to be cached, its eager forward runs NumPy code that gives the
same values (``Op.forward_numpy``; to a few ulp where NumPy's math library or summation order
differs from the kernels'), and a backward walks the ops' differentiable rules in Python. Both
compile nothing.

Meanwhile a **background process** (a niced ``python``, outside this process's GIL) replays
the calls this process made, on the same shapes and dtypes, and runs a backward over them,
which compiles exactly those kernels into the shared cache. When it finishes, the ops it
compiled leave tier 0 here (their ``run`` overrides are removed: no check remains on the hot
path) and the backward returns to the compiled executor. A list of the ops a worker compiled
(``tiered-ready.txt`` in the cache generation's folder) lets later processes start on the
compiled tier.

Rules: at most one worker per process at a time and one per cache generation on the machine
(a lock file); a worker starts at the first backward that walked rules, or after ``RECORD_LIMIT``
tier-0 calls; it outlives this process if need be, to finish filling the cache. Ops that
NumPy cannot serve (special functions, linear algebra, integer layouts) compile as before;
so do backward passes on a GPU or over a batch (``is_grads_batched``). Should a worker fail
to start or to finish, the process leaves tier 0 and compiles as without it.
``AUTOGRAD_NB_TIERED=0`` turns tiering off (the test suite does, except the tests of this
module); it is also off where numba's JIT is disabled.
"""

import json
import os
import pickle
import subprocess
import sys
import tempfile
import threading
import time

import numba
import numpy as np

from . import cache

ENABLED = os.environ.get("AUTOGRAD_NB_TIERED", "1") != "0" and not numba.config.DISABLE_JIT

#: Tier-0 calls recorded for the worker before it starts without waiting for a backward.
RECORD_LIMIT = 2000
#: Bytes of input arrays the recording keeps at most (beyond it, calls are not recorded).
RECORD_BYTES = 64 << 20
#: The name of the list of warmed ops in the generation folder; ``BACKWARD`` marks the
#: compiled backward warmed.
READY_FILE = "tiered-ready.txt"
BACKWARD = "<backward>"

#: Whether a backward walks the differentiable rules instead of the compiled executor.
backward_pending = False

_ops = {}  # name -> op, of the ops in tier 0
_warming = None  # the names of the ops run while ``warming()`` is on
_lock = threading.Lock()
_calls = []  # recorded tier-0 calls: (op name, argument specs, attrs)
_produced = {}  # id(output array) -> (call index, array)
_recorded_bytes = 0
_in_rules = threading.local()
_worker = None  # the running worker's Popen
_owner = os.getpid()
_last_try = 0.0
#: When the last worker finished, and the seconds since this module started (for reports).
_started_at = time.perf_counter()
ready_after = None


def _ready_path():
    return os.path.join(cache.generation_folder(), READY_FILE)


def _read_ready():
    try:
        with open(_ready_path(), encoding="utf-8") as stream:
            return {line.strip() for line in stream if line.strip()}
    except OSError:
        return set()


def start(registry):
    """Put every op with a NumPy forward whose kernels no worker has cached yet in tier 0
    (called once, at import, after every op is registered)."""
    global backward_pending
    if not ENABLED:
        return
    from .ops.registry import Op

    ready = _read_ready()
    backward_pending = BACKWARD not in ready
    for name, op in registry.items():
        if name in ready or type(op).forward_numpy is Op.forward_numpy:
            continue
        _enter(op)


def _enter(op):
    _ops[op.name] = op

    def run(values, attrs, op=op):
        return _run(op, values, attrs)

    op.run = run
    op.run_with_constants = run


def _leave(op):
    for name in ("run", "run_with_constants"):
        op.__dict__.pop(name, None)
    _ops.pop(op.name, None)


def in_tier0(op):
    """Whether ``op``'s eager forward runs NumPy now."""
    return "run" in op.__dict__


def _run(op, values, attrs):
    arrays, prepared = op.prepare(values, attrs)
    if _warming is not None:  # ``warming()``: compile, and list the op as cached
        _warming.add(op.name)
        return arrays, prepared, op.forward(arrays, prepared)
    output = op.forward_numpy(arrays, prepared)
    if output is None:
        output = op.forward(arrays, prepared)
    if not getattr(_in_rules, "active", False):
        _record(op, values, attrs, output)
    return arrays, prepared, output


def _record(op, values, attrs, output):
    global _recorded_bytes
    specs = []
    with _lock:
        for value in values:
            found = _produced.get(id(value)) if type(value) is np.ndarray else None
            if found is not None and found[1] is value:
                specs.append(("out", found[0]))
            elif type(value) is np.ndarray:
                _recorded_bytes += value.nbytes
                specs.append(("leaf", value))
            else:
                specs.append(("const", value))
        if _recorded_bytes > RECORD_BYTES or len(_calls) >= RECORD_LIMIT:
            return  # (the calls so far are enough to warm these ops)
        _recorded_bytes += getattr(output, "nbytes", 0)
        _produced[id(output)] = (len(_calls), output)
        _calls.append((op.name, specs, dict(attrs)))
        full = len(_calls) >= RECORD_LIMIT
    if full:
        launch(backward=False)


class rules_walk:
    """Context of a backward that walks rules: the ops it runs are not recorded."""

    def __enter__(self):
        _in_rules.active = True

    def __exit__(self, *exc):
        _in_rules.active = False


def after_backward():
    """Called after a backward that walked rules: start a worker for what ran so far."""
    launch(backward=True)


def launch(backward):
    """Start the background worker on the calls recorded so far, unless one is running (in
    this process, or for this cache generation on the machine)."""
    global _worker, _calls, _produced, _recorded_bytes, _last_try
    if not ENABLED or os.getpid() != _owner:
        return
    with _lock:
        if _worker is not None or not _calls:
            return
        if not any(name in _ops for name, _, _ in _calls) and not backward_pending:
            _calls, _produced, _recorded_bytes = [], {}, 0  # all warmed meanwhile
            return
        now = time.perf_counter()
        if now - _last_try < 1.0:
            return
        _last_try = now
        held = _lock_generation()
        if held is None:  # another process's worker fills this generation: try later
            return
        held.close()
        calls, _calls, _produced, _recorded_bytes = _calls, [], {}, 0
    try:
        payload = pickle.dumps({"calls": calls, "backward": backward})
    except Exception:  # an attribute that does not pickle: those kernels compile on use
        return
    try:
        handle, path = tempfile.mkstemp(prefix="anb-tier-", suffix=".pkl")
        with os.fdopen(handle, "wb") as stream:
            stream.write(payload)
        env = dict(os.environ, AUTOGRAD_NB_TIERED="0")
        worker = subprocess.Popen(
            [sys.executable, "-c", _WORKER, path],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, start_new_session=True,
        )
    except OSError:  # no interpreter to start: compile here, as without tiering
        give_up()
        return
    _worker = worker
    threading.Thread(target=_wait, args=(worker,), daemon=True,
                     name="autograd_nb-tier-worker").start()


class warming:
    """Within: every op compiles (no tier 0, no worker), and the ops that ran are written to
    the generation's list of cached ops when it ends (``python -m autograd_nb warmup``)."""

    def __enter__(self):
        global _warming, backward_pending
        self._pending = backward_pending
        if not ENABLED:
            return self
        _warming, backward_pending = set(), False
        return self

    def __exit__(self, kind, *rest):
        global _warming, backward_pending
        ran, _warming = _warming, None
        if ran is None:  # (tiering off)
            return
        if kind is not None:
            backward_pending = self._pending
            return
        for name in ran:
            op = _ops.get(name)
            if op is not None:
                _leave(op)
        _write_ready(ran | {BACKWARD})


def _write_ready(names):
    try:
        ready = _read_ready() | set(names)
        cache.write_atomically(_ready_path(), "".join(f"{n}\n" for n in sorted(ready)).encode())
    except OSError:
        pass


def give_up():
    """Leave tier 0 for good in this process: every op compiles on use, as without tiering
    (a worker could not start, or failed)."""
    global backward_pending
    for op in list(_ops.values()):
        _leave(op)
    backward_pending = False


def _wait(worker):
    global _worker, backward_pending, ready_after
    out, _ = worker.communicate()
    try:
        warmed = set(json.loads(out.decode().strip().splitlines()[-1])["ready"])
    except (ValueError, IndexError, KeyError):
        warmed = None
    if worker.returncode != 0 or warmed is None:
        give_up()
        warmed = set()
    for name in warmed:
        op = _ops.get(name)
        if op is not None:
            _leave(op)
    if BACKWARD in warmed:
        backward_pending = False
    ready_after = time.perf_counter() - _started_at
    _worker = None
    if _calls:
        launch(backward=backward_pending)


def wait(timeout=None):
    """Wait for the running worker, if any (tests, benchmarks); True when none runs after."""
    worker = _worker
    if worker is None:
        return True
    deadline = None if timeout is None else time.perf_counter() + timeout
    while _worker is worker:
        if deadline is not None and time.perf_counter() > deadline:
            return False
        time.sleep(0.01)
    return True


def status():
    """What tier 0 serves now: ``{"enabled", "tier0_ops", "backward_pending", "worker",
    "recorded_calls", "ready_after"}`` (``ready_after``: seconds from import to the last
    worker's finish)."""
    return {
        "enabled": ENABLED,
        "tier0_ops": len(_ops),
        "backward_pending": backward_pending,
        "worker": _worker is not None,
        "recorded_calls": len(_calls),
        "ready_after": ready_after,
    }


def _after_fork_in_child():
    global _worker, _calls, _produced, _recorded_bytes
    _worker = None
    _calls, _produced, _recorded_bytes = [], {}, 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# -- the worker ---------------------------------------------------------------------------


def _lock_generation():
    """An exclusive lock on the generation's worker lock file, or None if another holds it
    (where ``fcntl`` is missing, as on Windows, the file unlocked)."""
    path = os.path.join(cache.generation_folder(), "tiered-worker.lock")
    try:
        stream = open(path, "a")  # noqa: SIM115 - held for the worker's life
    except OSError:
        return None
    try:
        import fcntl
    except ImportError:
        return stream
    try:
        fcntl.flock(stream, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        stream.close()
        return None
    return stream


def replay(calls, backward):
    """Run the recorded ``calls`` on Tensors (float inputs requiring grad) and, with
    ``backward``, a gradient of the sum of the final results; three times, as a training
    loop would (the compiled executor, then the backward template made from it and its
    check on a new graph). Returns the names of the ops that ran, and ``BACKWARD`` when the
    backward did."""
    ran, made = set(), {}
    for _ in range(3 if backward else 1):
        if not _replay_once(calls, backward, ran, made):
            break
    return ran


def _replay_once(calls, backward, ran, made):
    # ``made``: the leaf Tensors, kept across the replays as a program keeps its parameters
    # (the backward template is keyed by them).
    import autograd_nb as anb

    from .ops.registry import REGISTRY
    from .tensor import apply

    results, leaves, used = [], [], set()
    for position, (name, specs, attrs) in enumerate(calls):
        args = []
        for k, (kind, value) in enumerate(specs):
            if kind == "out":
                used.add(value)
                args.append(results[value])
            elif kind == "leaf":
                leaf = made.get((position, k))
                if leaf is None:
                    leaf = anb.tensor(value, requires_grad=value.dtype.kind == "f")
                    made[position, k] = leaf
                if leaf.requires_grad:
                    leaves.append(leaf)
                args.append(leaf)
            else:
                args.append(value)
        if any(a is None for a in args):
            results.append(None)
            continue
        try:
            results.append(apply(REGISTRY[name], args, dict(attrs)))
            ran.add(name)
        except Exception:
            results.append(None)
    if not backward or not leaves:
        return False
    finals = [
        r for i, r in enumerate(results)
        if i not in used and r is not None and r.requires_grad and r.dtype.kind == "f"
    ]
    if not finals:
        return False
    try:
        loss = anb.sum(finals[0])
        for r in finals[1:]:
            loss = loss + anb.sum(r).astype(loss.dtype)
        anb.grad(loss, leaves, allow_unused=True)
    except Exception:
        return False
    ran.add(BACKWARD)
    return True


def _worker_main(path):
    try:
        os.nice(10)
    except OSError:
        pass
    with open(path, "rb") as stream:
        program = pickle.load(stream)
    os.remove(path)
    held = _lock_generation()
    if held is None:  # another worker fills this generation: nothing marked ready here
        print(json.dumps({"ready": []}))
        return
    ran = replay(program["calls"], program["backward"])
    _write_ready(ran)
    print(json.dumps({"ready": sorted(ran)}))


_WORKER = "import sys; from autograd_nb import tiering; tiering._worker_main(sys.argv[1])"
