"""The documentation under docs/ stays true: its examples run, and its API page misses nothing.

Each page's ``>>>`` examples run as one doctest (standard library only; Sphinx is not needed):
the whole text of a ``.rst`` page, and the fenced code blocks of a Markdown (``.md``) page. The
Sphinx build itself is ``make docs``; ``test_sphinx_build`` repeats it here only where Sphinx
and myst-parser (the ``docs`` extra) are installed.
"""

import doctest
import importlib
import importlib.util
import inspect
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import autograd_nb as anb

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(DOCS.glob("*.rst")) + sorted(DOCS.glob("*.md"))
#: Pages that teach by example: each must have some.
EXAMPLE_PAGES = {
    "index.rst",
    "getting-started.rst",
    "grad-outputs.rst",
    "higher-order.rst",
    "compiled-backward.rst",
    "cuda.rst",
    "custom-ops.rst",
    "numpy.rst",
    "compile.rst",
    "loops.rst",
    "complex.rst",
    "forward-mode.rst",
}
FLAGS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS

_AUTODOC = re.compile(r"^\.\. auto(?:function|class|exception|data|module)::\s+(\S+)", re.MULTILINE)
_CURRENT_MODULE = re.compile(r"^\.\. currentmodule::\s+(\S+)", re.MULTILINE)
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


def test_pages_exist():
    names = {page.name for page in PAGES}
    expected = EXAMPLE_PAGES | {"benchmarking.rst", "api.rst"}
    assert expected <= names


def markdown_examples(text):
    """The fenced code blocks of a Markdown page that hold ``>>>`` examples, one after another."""
    blocks, current, fence = [], None, None
    for line in text.splitlines():
        match = _FENCE.match(line)
        if current is None:
            if match:
                current, fence = [], match.group(1)
        elif (
            match
            and line.strip() == fence[0] * len(line.strip())
            and (len(line.strip()) >= len(fence))
        ):
            blocks.append(textwrap.dedent("\n".join(current)))
            current = None
        else:
            current.append(line)
    return "\n\n".join(
        b for b in blocks if any(s.lstrip().startswith(">>>") for s in b.splitlines())
    )


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_page_examples(page):
    """The page's ``>>>`` examples, run in order in one namespace (as ``doctest.testfile``)."""
    text = page.read_text(encoding="utf-8")
    if page.suffix == ".md":
        text = markdown_examples(text)
    test = doctest.DocTestParser().get_doctest(
        text, {"__name__": "__main__"}, page.name, str(page), 0
    )
    report = []
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
    if page.name in EXAMPLE_PAGES:
        assert runner.tries > 0, f"{page.name} has no >>> examples"


def documented_names():
    """Fully qualified names of the autodoc directives in api.rst."""
    text = (DOCS / "api.rst").read_text(encoding="utf-8")
    names = set()
    module = None
    for line in text.splitlines():
        if match := _CURRENT_MODULE.match(line):
            module = match.group(1)
        elif match := _AUTODOC.match(line):
            name = match.group(1)
            names.add(
                name if module is None or name.startswith("autograd_nb") else f"{module}.{name}"
            )
    return names


def _resolve(qualified):
    parts = qualified.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            obj = getattr(obj, attribute)
        return obj
    raise ImportError(qualified)


def test_api_page_lists_every_public_name():
    documented = documented_names()
    missing = [
        name
        for name in anb.__all__
        if name != "autograd" and f"autograd_nb.{name}" not in documented
    ]
    assert not missing, f"api.rst does not document autograd_nb.{missing}"
    for module_name in (
        "autograd_nb.autograd",
        "autograd_nb.autograd.functional",
        "autograd_nb.viz",
    ):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        names = getattr(module, "__all__", [])
        # anb.grad is anb.autograd.grad: documented once, under either name.
        # Submodules (autograd.functional) are checked name by name in their own turn.
        missing = [
            name
            for name in names
            if not inspect.ismodule(getattr(module, name))
            and f"{module_name}.{name}" not in documented
            and not (module_name == "autograd_nb.autograd" and f"autograd_nb.{name}" in documented)
        ]
        assert not missing, f"api.rst does not document {module_name}.{missing}"


def test_api_page_names_exist():
    for name in documented_names():
        assert _resolve(name) is not None, name


def _graphviz_blocks(text):
    blocks = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(".. graphviz::"):
            body = []
            for following in lines[i + 1 :]:
                if following.strip() and not following.startswith(" "):
                    break
                body.append(following)
            # Drop the directive's options (":caption: ..." and its continuation lines).
            source = textwrap.dedent("\n".join(body)).strip("\n").splitlines()
            start = next(k for k, s in enumerate(source) if s.startswith(("digraph", "graph")))
            blocks.append("\n".join(source[start:]).strip())
    return blocks


def test_tape_picture_is_what_to_dot_prints():
    """The rendered tape on compiled-backward.rst is the output its own doctest checks."""
    text = (DOCS / "compiled-backward.rst").read_text(encoding="utf-8")
    examples = doctest.DocTestParser().get_examples(text)
    printed = [e.want.strip() for e in examples if "viz.to_dot(" in e.source]
    assert printed, "compiled-backward.rst has no to_dot example"
    pictures = _graphviz_blocks(text)
    assert printed[0] in pictures


@pytest.mark.skipif(
    importlib.util.find_spec("sphinx") is None or importlib.util.find_spec("myst_parser") is None,
    reason="Sphinx and myst-parser (the docs extra) are not installed; `make docs` builds the site",
)
@pytest.mark.slow
def test_sphinx_build(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            "html",
            str(DOCS),
            str(tmp_path / "html"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
