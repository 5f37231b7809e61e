"""Imports flow one way: autograd/ -> engine/ -> tape.py -> ops/ (tensor.py is the surface)."""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "autograd_nb"

# For each layer, the layers it must not import at module level.
FORBIDDEN = {
    "ops": {"autograd", "engine", "tape", "tensor"},
    "tape": {"autograd", "engine", "tensor", "ops"},
    "collector": {"autograd", "engine", "tensor"},
    "layout": {"autograd", "engine", "tape", "tensor"},
    "tensor": {"autograd", "engine"},
    "engine": {"autograd"},
    "cuda": {"autograd", "engine", "tape", "tensor"},
}


def layer_of(relative):
    return pathlib.PurePath(relative).parts[0].removesuffix(".py")


def imported_layers(source, relative):
    """Top-level parts of autograd_nb that a module at ``relative`` imports at module level."""
    package = list(pathlib.PurePath(relative).parent.parts)
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ImportFrom) or not node.level:
            continue
        base = package[: len(package) - (node.level - 1)]
        module = base + (node.module.split(".") if node.module else [])
        if module:
            yield module[0]
        else:  # ``from .. import tape, engine``: the names are the layers
            yield from (alias.name for alias in node.names)


FILES = sorted(
    str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
    if layer_of(p.relative_to(PACKAGE)) in FORBIDDEN
)


@pytest.mark.parametrize("relative", FILES)
def test_no_upward_imports(relative):
    source = (PACKAGE / relative).read_text()
    found = set(imported_layers(source, relative)) & FORBIDDEN[layer_of(relative)]
    assert not found, f"{relative} imports {found} at module level"


@pytest.mark.parametrize(
    "relative, source, layer",
    [
        ("ops/bad.py", "from ..engine import backward\n", "engine"),
        ("ops/bad.py", "from .. import tape\n", "tape"),
        ("tape.py", "from .ops import registry\n", "ops"),
    ],
)
def test_upward_imports_are_seen(relative, source, layer):
    assert layer in set(imported_layers(source, relative))
