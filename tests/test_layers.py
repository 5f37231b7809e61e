"""Imports flow one way: autograd/ -> engine/ -> tape.py -> ops/ (tensor.py is the surface);
replay/ sits above engine/, tiering.py between engine/ and tensor.py, cache.py and config.py
at the bottom. And no modules import each other in a circle. Imports inside functions count as
much as those at module level: a late import that closes a circle ties the modules into one
all the same."""

import ast
import functools
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "autograd_nb"

#: ``{path relative to the package: source}`` of every module of the package.
SOURCES = {p.relative_to(PACKAGE).as_posix(): p.read_text() for p in sorted(PACKAGE.rglob("*.py"))}


def layer_of(relative):
    return pathlib.PurePath(relative).parts[0].removesuffix(".py")


#: The package's root, ``autograd_nb/__init__.py`` (``import autograd_nb``), as a layer.
ROOT = "__init__"
#: Every top-level part of the package: a subpackage, a module, the root.
LAYERS = {layer_of(relative) for relative in SOURCES}
#: What sits above the engine and the layers below it.
TOP = {"autograd", "replay", "warmup", ROOT}

# For each layer, the layers it must not import, at module level or inside a function.
FORBIDDEN = {
    "config": LAYERS - {"config"},
    "cache": LAYERS - {"cache", "config"},
    "ops": TOP | {"engine", "tiering", "tape", "tensor", "cuda"},
    "tape": TOP | {"engine", "tiering", "tensor", "ops"},
    "collector": TOP | {"engine", "tiering", "tensor"},
    "layout": TOP | {"engine", "tiering", "tape", "tensor"},
    "cuda": TOP | {"engine", "tiering", "tape", "tensor"},
    "tensor": TOP | {"engine", "tiering", "numpy"},
    "tiering": TOP | {"engine"},
    "engine": TOP,
    "replay": TOP - {"replay"},
}


def module_file(parts, modules):
    """The file among ``modules`` of the module named by ``parts`` (its ``__init__.py`` for a
    package; ``[]`` is the root), or None."""
    for relative in ("/".join(parts) + ".py", "/".join([*parts, "__init__.py"])):
        if relative in modules:
            return relative
    return None


def _import_module_call(node):
    """The name that ``importlib.import_module("...")`` imports, or None for another node."""
    if (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        and node.func.attr == "import_module" and node.args
        and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
    ):
        return node.args[0].value
    return None


def _named_modules(node, package):
    """``(parts, instead)`` for each module of autograd_nb that ``node`` names: the parts of
    its name below the package, and the module to take where that names none
    (``from .tensor import Tensor`` names ``tensor.Tensor``: the module is ``tensor``)."""
    if isinstance(node, ast.ImportFrom):
        if node.level:
            if node.level - 1 > len(package):
                return
            module = package[: len(package) - node.level + 1]
            module += node.module.split(".") if node.module else []
        else:
            parts = (node.module or "").split(".")
            if parts[0] != "autograd_nb":
                return
            module = parts[1:]
        for alias in node.names:
            yield [*module, alias.name], module
        return
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        names = [_import_module_call(node)] if _import_module_call(node) else []
    for name in names:
        parts = name.split(".")
        if parts[0] == "autograd_nb":
            yield parts[1:], parts[1:]


def imported_modules(source, relative, modules=SOURCES):
    """The files among ``modules`` that the module at ``relative`` imports, anywhere in its
    source: ``from .x import name`` imports ``x`` (or the module ``x.name``),
    ``import autograd_nb`` and ``from autograd_nb import grad`` the root's ``__init__.py``, and
    ``importlib.import_module("autograd_nb.x")`` ``x``."""
    for parts, instead in _names_in(source, relative):
        target = module_file(parts, modules) or module_file(instead, modules)
        if target is not None:
            yield target


@functools.cache
def _names_in(source, relative):
    """Every ``(parts, instead)`` of :func:`_named_modules` in ``source`` (parsed once: the
    circle tests read the whole package again and again)."""
    package = list(pathlib.PurePath(relative).parent.parts)
    return [named for node in ast.walk(ast.parse(source))
            for named in _named_modules(node, package)]


def imported_layers(source, relative):
    """Top-level parts of autograd_nb that the module at ``relative`` imports."""
    return {layer_of(target) for target in imported_modules(source, relative)}


def import_graph(sources):
    """``{file: the files it imports}`` over ``sources`` (``{file: source}``)."""
    return {relative: set(imported_modules(source, relative, sources)) - {relative}
            for relative, source in sources.items()}


def circles(graph):
    """The strongly connected components of ``graph`` of more than one file: modules that
    import each other, directly or around a circle (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while not component or w != v:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


FILES = sorted(relative for relative in SOURCES if layer_of(relative) in FORBIDDEN)

#: Modules with rules of their own, inside their layer: ``{file: the layers it may import}``.
#: The table machine runs tables, whoever wrote them: it knows no graph, plan or program, so
#: it imports nothing of the engine around it (nor of tape, tensor, replay), only ops/ (the
#: drivers' calling convention) and config.
MODULE_ALLOWED = {"engine/machine.py": {"ops", "config"}}


@pytest.mark.parametrize("relative", FILES)
def test_no_upward_imports(relative):
    found = imported_layers(SOURCES[relative], relative) & FORBIDDEN[layer_of(relative)]
    assert not found, f"{relative} imports {found}"


@pytest.mark.parametrize("relative", sorted(MODULE_ALLOWED))
def test_modules_with_rules_of_their_own_import_only_what_they_may(relative):
    found = set(imported_modules(SOURCES[relative], relative)) - {relative}
    outside = {target for target in found if layer_of(target) not in MODULE_ALLOWED[relative]}
    assert not outside, f"{relative} imports {outside}"


def test_a_machine_importing_the_engine_around_it_is_seen():
    source = SOURCES["engine/machine.py"] + "\n\ndef _late():\n    from . import schedule\n"
    found = set(imported_modules(source, "engine/machine.py"))
    assert "engine/schedule.py" in found
    assert layer_of("engine/schedule.py") not in MODULE_ALLOWED["engine/machine.py"]


@pytest.mark.parametrize(
    "relative, source, layer",
    [
        ("ops/bad.py", "from ..engine import backward\n", "engine"),
        ("ops/bad.py", "from .. import tape\n", "tape"),
        ("tape.py", "from .ops import registry\n", "ops"),
        ("tensor.py", "def f():\n    from .autograd import backward\n", "autograd"),
        ("tiering.py", "def f():\n    import autograd_nb as anb\n", ROOT),
        ("config.py", "class C:\n    def f(self):\n        from . import cache\n", "cache"),
        ("engine/bad.py", "import importlib\nimportlib.import_module('autograd_nb.replay')\n",
         "replay"),
    ],
)
def test_upward_imports_are_seen(relative, source, layer):
    assert layer in imported_layers(source, relative)


def test_no_import_circles():
    found = circles(import_graph(SOURCES))
    assert not found, f"modules that import each other (in a circle): {found}"


@pytest.mark.parametrize(
    "relative, late_import, circle",
    [
        ("config.py", "from . import cache", {"config.py", "cache.py"}),
        ("ops/registry.py", "from ..tensor import Tensor", {"ops/registry.py", "tensor.py"}),
        ("tiering.py", "import autograd_nb as anb", {"tiering.py", "__init__.py"}),
        ("tensor.py", "from .autograd import backward", {"tensor.py", "autograd/api.py"}),
        ("replay/program.py", "from .function import CompiledFunction",
         {"replay/program.py", "replay/function.py"}),
    ],
)
def test_a_late_import_that_closes_a_circle_is_seen(relative, late_import, circle):
    sources = dict(SOURCES)
    sources[relative] += f"\n\ndef _late():\n    {late_import}\n"
    assert any(circle <= set(component) for component in circles(import_graph(sources)))
