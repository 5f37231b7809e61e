"""Suite-wide setup and reporting: which registered ops the gradient checks covered."""

import os

# numba reads NUMBA_ENABLE_CUDASIM once, when it is first imported: set it before anything
# imports numba, so the CUDA tests (tests/cuda) run on numba's simulator without a GPU. With
# AUTOGRAD_NB_TEST_GPU=1 (``make test-gpu``) the real GPU is left in place.
if os.environ.get("AUTOGRAD_NB_TEST_GPU") != "1":
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
# Tier 0 (autograd_nb/tiering.py) would run an op's first calls in NumPy and start background
# compiling processes: the suite tests the compiled kernels, and tests/test_tiering.py tests
# tier 0 (in place, and in fresh processes with it on).
os.environ.setdefault("AUTOGRAD_NB_TIERED", "0")

import sys  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from autograd_nb import collector, tape, tiering  # noqa: E402
from autograd_nb.ops.registry import FUNCTIONS, REGISTRY, Op  # noqa: E402
from tests.checks import COVERED  # noqa: E402
from tests.guards import Guards  # noqa: E402

#: The folders of the registry-driven tests: the guards of tests/guards.py hold them to "no
#: call writes into an array it was given", and ``--tier=0`` runs them again in tier 0.
GUARDED = ("ops", "autograd", "engine", "scipy")
#: The ops with a NumPy forward, which tier 0 serves (tiering.start's choice).
TIERED = sorted(
    name for name, op in REGISTRY.items() if type(op).forward_numpy is not Op.forward_numpy
)


def pytest_addoption(parser):
    parser.addoption(
        "--tier", choices=("compiled", "0"), default="compiled",
        help="'0': run every op's first calls as a fresh process does, in tier 0 "
        "(autograd_nb/tiering.py: NumPy forwards, the VJP kernels' NumPy twins), with no "
        "background worker; the tests marked compiled_only are deselected",
    )


def pytest_collection_modifyitems(config, items):
    if config.getoption("--tier") != "0":
        return
    kept = [item for item in items if item.get_closest_marker("compiled_only") is None]
    dropped = [item for item in items if item.get_closest_marker("compiled_only") is not None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _lock_simulator_shared_arrays():
    """numba-cuda's simulator gives a block's threads one shared array per source line: the
    first thread to ask makes it, the others find it in a dict. The look-up and the store are
    not under a lock, so threads starting at once can each make one, and those compute with
    tiles no other thread loads (``test_bmm[2-5-3-6-float64]`` failed once in a suite run:
    the outputs of the block's first three threads). The same look-up, under a lock."""
    from numba.cuda.simulator import kernelapi

    lock = threading.Lock()
    unlocked = kernelapi.FakeCUDAShared.array

    def array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:  # (dynamic shared memory; an error)
            return unlocked(self, shape, dtype, alignment)
        if isinstance(dtype, kernelapi.types.Type):
            dtype = kernelapi.numpy_support.as_dtype(dtype)
        caller = traceback.extract_stack(sys._getframe())[-2][0:2]  # (the kernel's line)
        with lock:
            found = self._allocations.get(caller)
            if found is None:
                found = self._allocations[caller] = np.empty(shape, dtype)
        return found

    kernelapi.FakeCUDAShared.array = array


if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    _lock_simulator_shared_arrays()


@pytest.fixture(autouse=True)
def _grad_mode_left_on():
    """A test that leaves this thread's grad mode off errors, and the mode is switched back on,
    so that the tests after it are not failed by it (one interrupted backward that left it off
    failed 279 tests after it)."""
    yield
    if not tape._state.enabled:
        tape.set_grad_enabled_flag(True)
        pytest.fail("the test left the grad mode switched off")


class _SysWithoutExecnetReceiver:
    """``sys`` for autograd_nb.collector, with ``_current_frames`` leaving out the thread of
    a pytest-xdist worker's execnet receiver (see :func:`one_python_thread`)."""

    def __getattr__(self, name):
        return getattr(sys, name)

    @staticmethod
    def _current_frames():
        return {ident: frame for ident, frame in sys._current_frames().items()
                if not _is_execnet_receiver(frame)}


def _is_execnet_receiver(frame):
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_thread_receiver" and "execnet" in code.co_filename:
            return True
        frame = frame.f_back
    return False


@pytest.fixture
def one_python_thread(monkeypatch):
    """collector's Python walk untracks only in a process where one thread runs Python
    (``len(sys._current_frames()) == 1``; autograd_nb/collector.py). A pytest-xdist worker
    (``make test`` runs ``-n 2``) has a second one from its start: execnet's receiver,
    blocked reading the controller's pipe, which touches no tensor and no node. The walk is
    shown the threads without it, so it runs in a worker as in a plain pytest process; any
    other thread still counts."""
    monkeypatch.setattr(collector, "sys", _SysWithoutExecnetReceiver())


def _guarded(request):
    parts = request.node.path.relative_to(request.config.rootpath).parts
    return len(parts) > 2 and parts[0] == "tests" and parts[1] in GUARDED


@pytest.fixture(autouse=True)
def _given_arrays_unchanged(request):
    """In the registry-driven tests, no op call and no backward writes into an array it was
    given (tests/guards.py); with ``--tier=0`` every tiered op runs in tier 0, and the NumPy
    twins see read-only arrays."""
    if not _guarded(request):
        yield
        return
    tier0 = request.config.getoption("--tier") == "0"
    guards = Guards(freeze=tier0)
    guards.install()
    if tier0:
        _enter_tier0()
    try:
        yield
    finally:
        if tier0:
            _leave_tier0()
        guards.uninstall()


def _enter_tier0():
    """Tier 0 as a fresh process has it, with no worker: the tiered ops run NumPy and a
    backward the twins (as test_tiering.py's ``tier0`` fixture, for every test)."""
    _saved_tiering.update(ENABLED=tiering.ENABLED, launch=tiering.launch)
    tiering.ENABLED = True
    tiering.launch = _hand_over
    tiering._numpy_ops.update(TIERED)
    for name in TIERED:
        tiering._enter(REGISTRY[name])
    tiering.backward_pending = True


def _hand_over():
    """``tiering.launch`` in the tier-0 pass: the recorded calls are dropped, as a launch
    hands them to its worker, but no worker starts, so every call stays in tier 0."""
    with tiering._lock:
        tiering._calls, tiering._produced, tiering._recorded_bytes = [], {}, 0
        tiering._backwards.clear()


def _leave_tier0():
    for name in TIERED:
        tiering._leave(REGISTRY[name])
    tiering._calls.clear()
    tiering._produced.clear()
    tiering._pending.clear()
    tiering._backwards.clear()
    tiering._grad_leaves.clear()
    tiering._recorded_bytes = 0
    tiering.backward_pending = False
    for name, value in _saved_tiering.items():
        setattr(tiering, name, value)


_saved_tiering = {}


def pytest_sessionfinish(session):
    """Under pytest-xdist (``make test`` runs ``-n 2``) each worker checks its share: it
    hands the ops it covered to the controller, which reports them for the whole run."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["covered"] = {k: sorted(v) for k, v in COVERED.items()}


@pytest.hookimpl(optionalhook=True)  # (an xdist hook: known only where xdist is installed)
def pytest_testnodedown(node, error):
    """(pytest-xdist's hook, on the controller: a worker finished; its covered ops.)"""
    for kind, names in getattr(node, "workeroutput", {}).get("covered", {}).items():
        COVERED[kind].update(names)


def pytest_terminal_summary(terminalreporter):
    # (An op with no differentiable input, such as linalg's ``_lu``, has nothing to check.)
    ops = sorted(name for name, op in REGISTRY.items()
                 if op.family != "custom" and any(op.differentiable or (True,)))
    if not COVERED["first"]:
        return  # no gradient check ran in this selection
    first = [n for n in ops if n in COVERED["first"]]
    second = [n for n in ops if n in COVERED["second"]]
    write = terminalreporter.write_line
    write(
        f"registry coverage: {len(ops)} ops, {len([f for f in FUNCTIONS if f[0] != '_'])} "
        f"public functions; gradient-checked against finite differences: {len(first)} ops, "
        f"second order: {len(second)}"
    )
    missing = sorted(set(ops) - set(second))
    if missing:
        write(f"registry coverage: not checked to second order in this run: {missing}")
