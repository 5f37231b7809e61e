"""Suite-wide reporting: which registered ops the gradient checks covered."""

from autograd_nb.ops.registry import FUNCTIONS, REGISTRY
from tests.checks import COVERED


def pytest_terminal_summary(terminalreporter):
    ops = sorted(name for name, op in REGISTRY.items() if op.family != "custom")
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
