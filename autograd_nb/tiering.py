"""Tiered first use: NumPy serves a call until its compiled kernels are in the cache.

A fresh process with an empty kernel cache would compile every kernel it meets, about a second
of numba and LLVM per function (docs/benchmarking.rst, "Compile latency"). Instead, a call
whose kernels are not known to be cached runs *tier 0*: the op's forward is NumPy code that
gives the kernels' results bit for bit (``Op.forward_numpy``: the same operations in the same
order, the fast-math functions through their NumPy twins in ``ops/_fastmath_numpy.py``, the C
library's ``asin``, ``pow``, ... element by element as the kernels call them, in
``ops/_libm_numpy.py``; products through the BLAS calls numba makes), so the results do not
change when the compiled kernels take over; and a backward walks the plan as the Python walk
of the VJP kernels does (``engine/backward.py``), calling each op's NumPy twin of its VJP
kernel instead (``Op.vjp_numpy``: the formula typed as numba types it, so a float32 operand
promotes to float64 where the kernel's does, and added into the gradient buffer as the kernel
adds it, each element's values in the kernel's order; ``ops/_numpy_vjp.py``; the ``linalg``
factorisations' twins call the SciPy LAPACK and BLAS routines their kernels call, through
ctypes with the same arguments: ``ops/_lapack_numpy.py``, ``ops/linalg.numba_dot``), so its
gradients equal the compiled backward's bit for bit, float32 included (fused chains give the unfused
bits, :mod:`autograd_nb.engine.fusion`; a custom Function's backward is its own Python, run as
the compiled walk runs it). Both compile nothing, but for a VJP without a twin, which runs
its own kernel, compiled in the process, with the same bits: an elementwise one (a special
function's derivative, a C library call over more than ``config.TIER0_LIBM_ELEMENTS``
elements) is one small loop; the others are rarer (``Op.has_vjp_numpy``: ``_bmm`` where the
own AVX-512 GEMM runs, whose forward compiles too; ``_det`` at a determinant of 0 or
infinity, whose cofactors come from numba's own SVD; ops registered with their own ``@njit``
kernels). A batch (``is_grads_batched``) runs in the compiled executor's blocks of rows
(``engine.machine.row_blocks``), each VJP over a block as the executor runs it
(``Op.vjp_numpy_rows``: every op's rows one by one, but ``_bmm``'s, stacked into one product
as its rows driver stacks them), so a batched gradient keeps the executor's bits too; where
the executor declines a batched plan (mixed dtypes, an op without a driver) the compiled
walk's ``vjp_batched`` runs the whole batch at once, which tier 0 does not follow (for
products of mixed dtypes the bits agree all the same: ``tests/test_tiering.py``). A
``_bmm`` on the own GEMM runs its rows driver's compiled products, block by block.

Meanwhile a **background process** (a niced ``python``, outside this process's GIL) replays
the calls this process made, on the same shapes and dtypes, and runs a backward over them
(:func:`autograd_nb.warmup.replay`), which compiles exactly those kernels into the shared
cache. When it finishes, those calls run compiled and the backward returns to the compiled
executor. A call is known by its key (:func:`_key`: the op, and per argument the dtype and
which dimensions are 1); the keys a worker compiled are listed in ``tiered-ready.txt`` in the
cache generation's folder, so later processes run them compiled from the start. Tier 0 goes
through the op call path's seam, :func:`autograd_nb.tensor.set_tier0` (as ``anb.compile``'s
recorder goes through ``tensor.recorder``): ``apply`` hands a call of an op in tier 0 to
:func:`_run` with the op's own ``_run``; after ``config.TIER0_LEAVE_AFTER`` calls in a row on
cached kernels the op leaves it. The fast paths read one global flag, set while any op is in
tier 0, and only then ask whether this op is.

Rules: at most one worker per process at a time and one per cache generation on the machine
(a lock file); a worker starts at the first tier-0 backward, or after
``config.TIER0_RECORD_LIMIT`` tier-0 calls; it outlives this process if need be, to finish
filling the cache. Ops that NumPy cannot serve with the kernels' bits (special functions,
linear algebra, the matrix-vector products split over threads, integer layouts) compile as
before, and so does a backward on a GPU. Should a
worker fail to start or to finish, the process leaves tier 0 and compiles as without it; a
call a worker could not replay compiles in the process. An interrupt (KeyboardInterrupt)
while a worker starts reaches the caller, and stops the worker if it has started: its calls
are recorded again, for the next one (:func:`launch`). ``AUTOGRAD_NB_TIERED=0`` turns
tiering off (the test suite does, except the tests of this module); it is also off where
numba's JIT is disabled.
"""

import json
import os
import pickle
import subprocess
import sys
import tempfile
import threading
import time
import warnings

import numba
import numpy as np

from . import cache, config
from .ops.registry import Op
from .tape import Node
from .tensor import in_tier0 as _served
from .tensor import set_tier0

ENABLED = os.environ.get("AUTOGRAD_NB_TIERED", "1") != "0" and not numba.config.DISABLE_JIT

#: The name of the list of warmed ops in the generation folder; ``BACKWARD`` marks the
#: compiled backward warmed.
READY_FILE = "tiered-ready.txt"
BACKWARD = "<backward>"

#: Whether a backward walks the NumPy twins of the VJP kernels instead of the compiled executor.
backward_pending = False

_ops = {}  # name -> op, of the ops whose CPU calls tier 0 serves (``tensor.set_tier0``)
_numpy_ops = set()  # the names of those with a NumPy forward (the others are only recorded)
_hits = {}  # name -> consecutive calls of the op on cached kernels
_ready = set()  # "name key" of the calls whose kernels are cached (see ``_key``)
_pending = set()  # "name key" served by tier 0, recorded, not cached yet
_failed = set()  # "name key" a worker could not run: they compile in this process
_backward_ready = False
_warming = None  # the keys run while ``warming()`` is on
_lock = threading.Lock()
_calls = []  # recorded tier-0 calls: (op name, key, argument specs, attrs)
_grad_leaves = set()  # id of the arrays of leaves that took a gradient (``note_backward``)
_backwards = []  # (roots as (op name, shape), batch) of the backwards met
_produced = {}  # id(output array) -> (call index, array)
_recorded_bytes = 0
_in_twins = threading.local()
_roots = threading.local()  # ``arrays``: the outputs of the backward about to run
_worker = None  # the worker's ``_Launch`` while one starts, runs, or its calls are settled
_owner = os.getpid()
_last_try = 0.0
#: When the last worker finished, and the seconds since this module started (for reports).
_started_at = time.perf_counter()
ready_after = None


def _ready_path():
    return os.path.join(cache.generation_folder(), READY_FILE)


def _read_ready():
    path = _ready_path()
    try:
        with open(path, encoding="utf-8") as stream:
            return {line.strip() for line in stream if line.strip()}
    except OSError:
        return set()
    except ValueError as error:  # (not UTF-8 text: a damaged file)
        _discard_ready(path, error)
        return set()


def _discard_ready(path, error):
    """Warn of the damaged list of cached calls at ``path``, and remove it: its calls run tier
    0 once more, and the next worker lists them anew."""
    warnings.warn(
        f"autograd_nb's kernel cache: {path} is not a list of cached calls ({error}); "
        f"removed, so the calls it listed run tier 0 until a background process lists them "
        f"again. Deleting the cache folder is safe.",
        cache.KernelCacheWarning,
        stacklevel=3,
    )
    _remove(path)


def _key(op, values):
    """What selects an op's kernels, as text: its name, and per argument the dtype and which
    dimensions are 1 (the broadcast pattern; sizes are left out), or a scalar's type."""
    parts = [op.name]
    for value in values:
        if type(value) is np.ndarray:
            parts.append(value.dtype.str + ":" + "".join(["1" if d == 1 else "n"
                                                          for d in value.shape]))
        else:
            parts.append(type(value).__name__)
    return " ".join(parts)


def _update_backward():
    global backward_pending
    backward_pending = bool(_ops) and (not _backward_ready or bool(_pending))


def start(registry):
    """Put every op with a NumPy forward in tier 0 (called once, at import, after every op
    is registered); the calls whose kernels a worker has cached run them at once."""
    global _backward_ready
    if not ENABLED:
        return
    _ready.update(_read_ready())
    _backward_ready = BACKWARD in _ready
    for op in registry.values():
        if type(op).forward_numpy is not Op.forward_numpy:
            _numpy_ops.add(op.name)
        _enter(op)
    _update_backward()


def _enter(op):
    _ops[op.name] = op
    set_tier0(op, _run)


def _leave(op):
    set_tier0(op, None)
    _ops.pop(op.name, None)
    _hits.pop(op.name, None)


def in_tier0(op):
    """Whether ``op``'s eager forward may run NumPy now (its calls whose kernels are cached
    already run them)."""
    return _served(op)


def _run(op, compiled, values, attrs):
    key = _key(op, values)
    if _warming is not None:  # ``warming()``: compile, and list the call as cached
        _warming.add(key)
        return compiled(values, attrs)
    if key in _ready or key in _failed:
        hits = _hits.get(op.name, 0) + 1
        _hits[op.name] = hits
        if hits >= config.TIER0_LEAVE_AFTER:
            _leave(op)
        done = compiled(values, attrs)
        if (_pending or _calls) and not getattr(_in_twins, "active", False):
            # Recorded too while others are: the worker replays a connected graph, so that
            # the backward reaches the ops before this one.
            _record(op, key, values, attrs, done[2])
        return done
    _hits[op.name] = 0
    if op.name in _numpy_ops:
        arrays, prepared = op.prepare(values, attrs)
        output = op.forward_numpy(arrays, prepared)
        if output is None:
            output = op.forward(arrays, prepared)
        done = arrays, prepared, output
    else:
        done = compiled(values, attrs)  # (no NumPy forward: compiles, and is recorded all the
        # same, so that the worker compiles its backward)
    if not getattr(_in_twins, "active", False):
        _record(op, key, values, attrs, done[2])
    return done


def _record(op, key, values, attrs, output):
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
        limit = config.TIER0_RECORD_LIMIT
        if (len(_calls) >= limit or _recorded_bytes > config.TIER0_RECORD_BYTES) and (
            key in _pending or key in _ready
        ):
            return  # (enough calls of this kind to warm it; new kinds are still recorded)
        _recorded_bytes += getattr(output, "nbytes", 0)
        _produced[id(output)] = (len(_calls), output)
        _calls.append((op.name, key, specs, dict(attrs)))
        if key not in _ready and key not in _failed:
            _pending.add(key)
            _update_backward()
        full = len(_calls) == limit
    if full:
        launch()


class twins_walk:
    """Context of tier 0's backward (the NumPy twins' walk): an op it runs is not recorded."""

    def __enter__(self):
        _in_twins.active = True

    def __exit__(self, *exc):
        _in_twins.active = False


def note_outputs(arrays):
    """The arrays of the outputs the next backward of this thread differentiates (called by
    ``grad`` and ``backward`` while the backward is in tier 0), for :func:`note_backward`."""
    _roots.arrays = arrays


def note_backward(plan, seeds, batch):
    """Before tier 0's backward: what the worker's backward should repeat (the
    leaves that take a gradient, the outputs differentiated, the batch), so that it compiles
    the kernels of this backward and not of another."""
    with _lock:
        for node in plan.nodes:
            for edge in node.edges:
                if edge is not None and not isinstance(edge, Node):
                    _grad_leaves.add(id(edge._data))
        arrays, _roots.arrays = getattr(_roots, "arrays", None) or (), None
        roots = []
        for array in arrays:
            found = _produced.get(id(array))
            if found is None or found[1] is not array:
                return  # (an output no recorded call made: nothing the worker could repeat)
            roots.append(found[0])
        if roots and len(_backwards) < 64:
            _backwards.append((roots, batch))


def after_backward():
    """Called after tier 0's backward: start a worker for what ran so far."""
    launch()


def launch():
    """Start the background worker on the calls recorded so far, unless one is running (in
    this process, or for this cache generation on the machine)."""
    if not ENABLED or os.getpid() != _owner:
        return
    launched, taken = _Launch(), []
    try:
        with _lock:
            if not _take_recorded(launched, taken):
                return
        _start_worker(launched, *taken[0])
    except BaseException:
        # An interrupt (KeyboardInterrupt is no Exception): no worker is left half started,
        # and the calls are recorded again, for a later launch.
        _abandon(launched, taken)
        raise


class _Launch:
    """One start of the worker, which ``_worker`` holds from the moment it takes the recorded
    calls until they are settled or put back: its process (set before the process starts),
    the file of the calls sent to it, and whether that end is claimed (by the thread that
    waits for the worker, or by ``launch`` after an interrupt: whichever comes first)."""

    __slots__ = ("process", "path", "claimed")

    def __init__(self):
        self.process = self.path = None
        self.claimed = False


def _take_recorded(launched, taken):
    """Under ``_lock``, where a worker is due and may start: move the recorded calls into
    ``taken`` and mark ``_worker`` with ``launched``. Whether it did."""
    global _worker, _calls, _produced, _recorded_bytes, _backwards, _last_try
    if _worker is not None or not _calls:
        return False
    if not any(key in _pending for _, key, _, _ in _calls):
        _calls, _produced, _recorded_bytes = [], {}, 0  # all warmed meanwhile
        return False
    now = time.perf_counter()
    if now - _last_try < 1.0:
        return False
    _last_try = now
    held = _lock_generation()
    if held is None:  # another process's worker fills this generation: try later
        return False
    held.close()
    taken.append((_calls, _produced, _recorded_bytes, _backwards, set(_grad_leaves)))
    # One statement of stores, with no call in it, so that no signal's handler runs inside:
    # an interrupt finds the calls either still recorded or taken with ``_worker`` marked.
    _calls, _produced, _recorded_bytes, _backwards, _worker = [], {}, 0, [], launched
    return True


def _start_worker(launched, calls, produced, recorded_bytes, backwards, grad_leaves):
    """Send the taken calls to a new worker process, and start the thread that waits for it
    (where they do not pickle, or no process starts, settle them in place instead)."""
    global _worker
    sent = [
        (name, key, [("leaf", v, id(v) in grad_leaves) if kind == "leaf" else (kind, v)
                     for kind, v in specs], attrs)
        for name, key, specs, attrs in calls
    ]
    try:
        payload = pickle.dumps({"calls": sent, "backwards": backwards})
    except Exception:  # an attribute that does not pickle: those calls compile in place
        _settle(calls, set())
        _worker = None
        return
    try:
        handle, launched.path = tempfile.mkstemp(prefix="anb-tier-", suffix=".pkl")
        with os.fdopen(handle, "wb") as stream:
            stream.write(payload)
        # Made, then noted, then started: an interrupt inside ``Popen`` (as it waits for the
        # child's ``exec``) leaves a process that ``_abandon`` must still find.
        launched.process = subprocess.Popen.__new__(subprocess.Popen)
        launched.process.__init__(
            [sys.executable, "-c", _WORKER, launched.path],
            env=dict(os.environ, AUTOGRAD_NB_TIERED="0"), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
        )
    except OSError:  # no interpreter to start: compile here, as without tiering
        _remove(launched.path)
        _worker = None
        give_up()
        return
    threading.Thread(target=_wait, args=(launched, calls), daemon=True,
                     name="autograd_nb-tier-worker").start()


def _abandon(launched, taken):
    """After an interrupt in :func:`launch`: stop the worker it started, if any, and record
    the calls it took again, in front of those recorded since."""
    global _worker
    if not _claim(launched):
        return  # (nothing was taken, or the worker's thread has settled the calls)
    process = launched.process
    if getattr(process, "pid", None) is not None:  # (None: interrupted before it started)
        try:
            process.kill()
            process.wait()
        except OSError:
            pass
        if process.stdout is not None:  # (its thread may not have started to read it)
            process.stdout.close()
    _remove(launched.path)  # (unless the worker read it, and removed it, first)
    with _lock:
        _put_back(*taken[0][:4])
        _worker = None


def _claim(launched):
    """Whether the caller is the one that ends ``launched`` (see :class:`_Launch`)."""
    with _lock:
        if _worker is not launched or launched.claimed:
            return False
        launched.claimed = True
        return True


def _put_back(calls, produced, recorded_bytes, backwards):
    """Under ``_lock``: the taken ``calls`` recorded again, before those recorded since, whose
    positions move up by as many."""
    global _calls, _produced, _recorded_bytes, _backwards
    shift = len(calls)
    later = [
        (name, key, [("out", v + shift) if kind == "out" else (kind, v) for kind, v in specs],
         attrs)
        for name, key, specs, attrs in _calls
    ]
    moved = {ident: (i + shift, array) for ident, (i, array) in _produced.items()}
    _calls, _produced = calls + later, {**produced, **moved}
    _recorded_bytes += recorded_bytes
    _backwards = backwards + [([i + shift for i in roots], batch) for roots, batch in _backwards]


def _remove(path):
    """Remove the file at ``path`` if there is one (None: no path)."""
    if path is not None:
        try:
            os.remove(path)
        except OSError:
            pass


class warming:
    """Within: every op compiles (no tier 0, no worker), and the calls that ran are written to
    the generation's list of cached calls when it ends (``python -m autograd_nb warmup``)."""

    def __enter__(self):
        global _warming
        if ENABLED:
            _warming = set()
        return self

    def __exit__(self, kind, *rest):
        global _warming, _backward_ready
        ran, _warming = _warming, None
        if ran is None or kind is not None:
            return
        with _lock:
            _ready.update(ran)
            _backward_ready = True
            _update_backward()
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
    for op in list(_ops.values()):
        _leave(op)
    _pending.clear()
    _update_backward()


def _settle(calls, ran):
    """The keys of ``calls`` that a worker ran are cached; the others compile in place."""
    global _backward_ready
    with _lock:
        for _, key, _, _ in calls:
            _pending.discard(key)
            if key in ran:
                _ready.add(key)
            elif key not in _ready:
                _failed.add(key)
        if BACKWARD in ran:
            _backward_ready = True
        _update_backward()


def _wait(launched, calls):
    """The worker's thread: wait for the worker, then settle its calls (or leave tier 0 where
    it failed), and start the next worker if calls were recorded meanwhile."""
    global _worker
    try:
        out, _ = launched.process.communicate()
    except Exception:  # (``_abandon`` closed its output: it ends this launch)
        out = b""
    if not _claim(launched):
        return
    try:
        _finish(launched.process, calls, out)
    except BaseException:  # (a fault here: what remains compiles in place, as without tiering)
        give_up()
        raise
    finally:
        _worker = None
    if _calls:
        launch()


def _finish(worker, calls, out):
    """Settle ``calls`` by the worker's report ``out``, or leave tier 0 where it failed."""
    global ready_after
    try:
        report = json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        report = None
    if worker.returncode != 0 or not isinstance(report, dict):
        give_up()
        return
    if report.get("busy"):  # another process's worker came first: recorded anew when met
        with _lock:
            for _, key, _, _ in calls:
                _pending.discard(key)
            _update_backward()
    else:
        _settle(calls, set(report["ready"]))
    ready_after = time.perf_counter() - _started_at


def wait(timeout=None):
    """Wait until the calls recorded so far are compiled: for the running worker and those
    started after it (tests, benchmarks). True when no worker runs and none is due."""
    global _last_try
    deadline = None if timeout is None else time.perf_counter() + timeout
    while True:
        if _worker is None:
            with _lock:
                due = any(key in _pending for _, key, _, _ in _calls)
            if not due:
                return True
            _last_try = 0.0  # (start it now, not after launch's pause)
            launch()
            if _worker is None and not ENABLED:
                return False
            # (None still: another process's worker holds this generation; asked again below)
        if deadline is not None and time.perf_counter() > deadline:
            return False
        time.sleep(0.01)


def status():
    """What tier 0 serves now: ``{"enabled", "tier0_ops", "pending_calls",
    "backward_pending", "worker", "recorded_calls", "ready_after"}`` (``ready_after``:
    seconds from import to the last worker's finish)."""
    return {
        "enabled": ENABLED,
        "tier0_ops": len(_ops),
        "pending_calls": len(_pending),
        "backward_pending": backward_pending,
        "worker": _worker is not None,
        "recorded_calls": len(_calls),
        "ready_after": ready_after,
    }


def _after_fork_in_child():
    global _worker, _calls, _produced, _recorded_bytes
    _worker = None
    _calls, _produced, _recorded_bytes = [], {}, 0
    _backwards.clear()
    _grad_leaves.clear()


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


def _worker_main(path, replay):
    """The worker process: ``replay`` (:func:`autograd_nb.warmup.replay`, which runs the
    whole package) the calls sent in the file ``path``, and list the keys that ran as
    ready."""
    try:
        os.nice(10)
    except OSError:
        pass
    with open(path, "rb") as stream:
        program = pickle.load(stream)
    os.remove(path)
    held = _lock_generation()
    if held is None:  # another worker fills this generation: this one is asked again later
        print(json.dumps({"busy": True}))
        return
    ran = replay(program["calls"], program["backwards"])
    _write_ready(ran)
    print(json.dumps({"ready": sorted(ran)}))


_WORKER = ("import sys; from autograd_nb import tiering, warmup; "
           "tiering._worker_main(sys.argv[1], warmup.replay)")
