"""Sphinx configuration of the autograd_nb site.

Build with ``make docs`` (``sphinx-build -W -b html docs docs/_build/html``: every warning is an
error). The ``>>>`` examples of the pages run as doctests in ``make test``
(tests/test_docs.py), with the standard library only.
"""

import doctest
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "_ext"))
sys.path.insert(0, os.path.dirname(HERE))  # the package, when it is not installed

import autograd_nb  # noqa: E402

project = "autograd_nb"
author = "the autograd_nb developers"
copyright = "2026, the autograd_nb developers"
version = release = autograd_nb.__version__

# Graphviz pictures render as SVG when the `dot` program is installed (apt-get install graphviz);
# without it, graphviz_fallback shows the same DOT source as a highlighted code block and says so
# in the build log, so the build passes with -W on a machine without graphviz.
graphviz_dot = os.environ.get("GRAPHVIZ_DOT", "dot")
HAVE_DOT = shutil.which(graphviz_dot) is not None

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",
    "sphinx.ext.mathjax",
    "sphinx.ext.graphviz" if HAVE_DOT else "graphviz_fallback",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store"]

# numpydoc-style docstrings, read by napoleon.
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False

autodoc_member_order = "bysource"
autodoc_typehints = "none"

nitpicky = False

# `sphinx-build -b doctest` runs the same examples as tests/test_docs.py, with the same flags.
doctest_default_flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
graphviz_output_format = "svg"

html_theme = "alabaster"
html_title = "autograd_nb"
html_theme_options = {
    "description": "Reverse-mode autograd with torch.autograd semantics over NumPy names, "
    "compiled with numba.",
    "fixed_sidebar": True,
}


# -- signatures ----------------------------------------------------------------------------------
# Elementwise functions are generated from their op's scalar formula and take ``*args``; show the
# formula's input and parameter names instead (``add(a, b)``, ``clip(x, a_min, a_max)``), read
# from the registry so they cannot drift. Tensor and Function are not constructed directly.
_NO_CONSTRUCTOR = {"autograd_nb.Tensor", "autograd_nb.autograd.Function"}


def _signature(app, what, name, obj, options, signature, return_annotation):
    from autograd_nb.ops.registry import FUNCTIONS, REGISTRY

    if what == "class" and name in _NO_CONSTRUCTOR:
        return "", return_annotation
    op = REGISTRY.get(getattr(obj, "__name__", ""))
    if what == "function" and op is not None and FUNCTIONS.get(op.name) is obj:
        names = getattr(op, "input_names", None)
        if names is not None:
            return "(" + ", ".join(tuple(names) + tuple(op.params)) + ")", return_annotation
    return None


def setup(app):
    app.connect("autodoc-process-signature", _signature)
