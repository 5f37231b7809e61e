"""The fast paths that read CPython objects and NumPy arrays by address: one switch, one report.

Four modules read memory by address from compiled code, each probing its assumptions on the
running interpreter first: :mod:`autograd_nb.ops._pointers` (an array's data pointer: the
compiled backward executor and ``anb.compile``), :mod:`autograd_nb.layout` (the header of
objects, lists and tuples, and ``__slots__`` offsets), :mod:`autograd_nb.engine.graph_reader`
(the check of a recorded graph against a cached backward template) and
:mod:`autograd_nb.collector` (the garbage-collector hook that untracks graphs). Each keeps a
Python path that gives the same results.

They run only where this module allows it (:data:`ALLOWED`): CPython, with the GIL (compiled
readers rely on it: no other thread changes what they read), on a tested Python version, and
unless ``AUTOGRAD_NB_RAW_MEMORY=0`` turns them off. Where the interpreter allows them but a
probe fails, one :class:`FastPathWarning` says which fast path is off and why.
:func:`autograd_nb.config.capabilities` reports what runs (the package's root makes the
report: it reads the four modules, which import this one).
"""

import os
import sys
import warnings

#: The environment variable that turns every address-reading path off (``0``).
SWITCH = "AUTOGRAD_NB_RAW_MEMORY"
#: The Python versions this code is tested on (``make test`` on each; ``requires-python``).
TESTED = ((3, 10), (3, 13))


class FastPathWarning(UserWarning):
    """A fast path that reads memory by address is off here; results are the same, slower."""


def _gil_enabled():
    check = getattr(sys, "_is_gil_enabled", None)  # (3.13+: False on a free-threaded build)
    return True if check is None else bool(check())


def reasons_off():
    """Why the address-reading paths are off here (an empty list: they may run)."""
    reasons = []
    if os.environ.get(SWITCH, "1") == "0":
        reasons.append(f"{SWITCH}=0")
    if sys.implementation.name != "cpython":
        reasons.append(f"{sys.implementation.name} is not CPython")
    if not _gil_enabled():
        reasons.append("the GIL is disabled (a free-threaded build)")
    version = sys.version_info[:2]
    if not TESTED[0] <= version <= TESTED[1]:
        low, high = TESTED
        reasons.append(f"Python {version[0]}.{version[1]} is outside the tested "
                       f"{low[0]}.{low[1]} to {high[0]}.{high[1]}")
    return reasons


#: Whether the address-reading paths may run (decided once, at import).
ALLOWED = not reasons_off()

_warned = []


def unavailable(what, why):
    """Say, once per process, that the fast path ``what`` is off (``why``); nothing when
    the user turned them off."""
    if os.environ.get(SWITCH, "1") == "0" or _warned:
        return
    _warned.append((what, why))
    warnings.warn(
        f"autograd_nb: {what} is off here ({why}); results are the same, slower. "
        f"autograd_nb.config.capabilities() says what runs.",
        FastPathWarning,
        stacklevel=3,
    )

