"""Each op names its CUDA twin beside its CPU class (``@cuda_twin``); these checks need no GPU:
the twins are read from the CUDA modules' source, which importing the package never loads."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import autograd_nb
from autograd_nb.ops.registry import REGISTRY

CUDA = Path(autograd_nb.__file__).resolve().parent / "cuda"


def _classes(module):
    tree = ast.parse((CUDA / f"{module}.py").read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.ClassDef)}


def test_every_op_but_the_cpu_only_ones_names_a_cuda_class():
    for name, op in REGISTRY.items():
        if op.family == "custom" or getattr(op, "cpu_only", False):
            continue
        twin = op.cuda_twin
        assert twin is not None, name
        assert twin.name in _classes(twin.module), (name, twin)


def test_no_op_inherits_the_twin_of_another_op():
    """A subclass of a registered op's class (``Cumprod(Cumsum)``) names its own twin."""
    for name, op in REGISTRY.items():
        if op.cuda_twin is None:
            continue
        declaring = next(c for c in type(op).__mro__ if "cuda_twin" in vars(c))
        assert vars(declaring).get("name", name) == name, (name, declaring)


@pytest.mark.slow
def test_importing_and_running_on_the_cpu_loads_no_cuda_module():
    code = (
        "import sys, autograd_nb as anb\n"
        "x = anb.tensor([1.0, 2.0], requires_grad=True)\n"
        "anb.sum(anb.exp(x) @ x).backward()\n"
        "print('numba.cuda' in sys.modules)\n"
        "print(sorted(m for m in sys.modules if m.startswith('autograd_nb.cuda.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # (the device pool's bookkeeping and the counters are plain Python: no numba.cuda)
    assert out.stdout.split("\n", 2)[:2] == [
        "False",
        str(["autograd_nb.cuda._counters", "autograd_nb.cuda._device", "autograd_nb.cuda.memory"]),
    ]
