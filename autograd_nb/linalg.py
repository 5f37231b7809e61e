"""Linear algebra with NumPy's ``numpy.linalg`` names: ``anb.linalg.norm(x)``.

This namespace holds no code of its own. It shows the public functions of the op registry
published as ``"linalg.<name>"`` with a ``numpy.linalg`` name (the ``ops/linalg_*.py``
modules: ``solve``, ``det``, ``norm``, ...), so a function joins it by being published so. The
top-level NumPy functions that ``numpy.linalg`` repeats with the same meaning (``matmul``,
``outer``, ``tensordot``, ``cross``) appear here too.

``numpy.linalg.trace`` and ``numpy.linalg.diagonal`` take the *last* two axes, where
``numpy.trace`` and ``numpy.diagonal`` take the first two: the top-level functions do not stand
in for them. A function whose meaning here differs from the top-level one of the same name is
published as ``"linalg.<name>"`` (``publish(fn, "linalg.trace", method=False)``), or defined
in this module.

>>> import autograd_nb as anb
>>> anb.linalg.matmul is anb.matmul
True
"""

import numpy

from . import tensor as _tensor  # noqa: F401  (loads the ops, which fill the registry)
from .ops.registry import FUNCTIONS

#: The names of ``numpy.linalg``'s public functions.
NUMPY_NAMES = frozenset(numpy.linalg.__all__) - {"LinAlgError"}

#: ``numpy.linalg`` names whose meaning differs from the top-level NumPy function of the same
#: name (they act on the last two axes): only a ``"linalg.<name>"`` entry provides them.
DIFFERENT_FROM_TOP_LEVEL = frozenset({"trace", "diagonal"})


def lookup(name):
    """The function that ``anb.linalg.<name>`` is, or None where there is none yet."""
    if name not in NUMPY_NAMES:
        return None
    function = FUNCTIONS.get("linalg." + name)
    if function is None and name not in DIFFERENT_FROM_TOP_LEVEL:
        function = FUNCTIONS.get(name)
    return function


def provided():
    """The ``numpy.linalg`` names this namespace provides, sorted."""
    return sorted(name for name in NUMPY_NAMES if name in globals() or lookup(name) is not None)


def __getattr__(name):
    function = lookup(name)
    if function is None:
        raise AttributeError(f"module 'autograd_nb.linalg' has no attribute {name!r}")
    return function


def __dir__():
    return sorted(set(globals()) | set(provided()))
