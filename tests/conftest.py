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

from autograd_nb import tape  # noqa: E402
from autograd_nb.ops.registry import FUNCTIONS, REGISTRY  # noqa: E402
from tests.checks import COVERED  # noqa: E402


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
