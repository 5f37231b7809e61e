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

import pytest  # noqa: E402

from autograd_nb import tape  # noqa: E402
from autograd_nb.ops.registry import FUNCTIONS, REGISTRY  # noqa: E402
from tests.checks import COVERED  # noqa: E402


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
