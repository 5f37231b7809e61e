"""The rule that no kernel, driver or NumPy twin writes into an array it was given, held in
the registry-driven tests (tests/conftest.py installs these guards for them).

Two checks, because one alone misses writes:

- **Compared bytes.** Every array an op's forward, VJP kernel or NumPy twin is given (its
  inputs, the incoming gradient, the saved inputs and output, index arrays in its attrs) and
  every array a backward is given (the seeds, every saved value and leaf of the graph) is
  copied before the call and compared byte for byte after it. This catches writes through
  raw pointers (LAPACK called through ctypes, compiled code, the executor's drivers), which
  NumPy's ``writeable`` flag does not stop.
- **Read-only flags (tier 0).** While a NumPy twin runs, the arrays it was given are marked
  ``flags.writeable = False``, so that a NumPy write raises where it happens. The compiled
  pass does not mark them: numba types a read-only array as another type and would compile
  every kernel again for it.

Only the target of a call (``grad_input``, the buffer a VJP accumulates into) may change,
and a forward's result shares no memory with its inputs.
"""

import numpy as np

from autograd_nb import engine, tape
from autograd_nb.ops.registry import REGISTRY, Saved

#: The op methods that run compiled code, and the NumPy twins (tier 0).
COMPILED = ("forward", "vjp", "vjp_batched")
TWINS = ("forward_numpy", "vjp_numpy", "vjp_numpy_rows")


class WroteIntoGiven(AssertionError):
    """A call changed an array it was given."""


def _arrays(values):
    """The host arrays among ``values`` (arrays, sequences, dicts, ``Saved``), one level
    deep for containers."""
    for value in values:
        if type(value) is np.ndarray:
            yield value
        elif isinstance(value, Saved):
            yield from _arrays(value.inputs or ())
            yield from _arrays((value.output,))
        elif isinstance(value, (list, tuple)):
            yield from _arrays(value)
        elif isinstance(value, dict):
            yield from _arrays(value.values())


class Snapshot:
    """Copies of ``arrays`` (each once), to compare with after a call."""

    def __init__(self, arrays, target=None):
        seen = {id(target)}
        self.pairs = []
        for array in arrays:
            if id(array) in seen:
                continue
            seen.add(id(array))
            self.pairs.append((array, array.copy()))

    def check(self, what):
        for array, before in self.pairs:
            if array.tobytes() != before.tobytes():
                changed = np.flatnonzero(array.reshape(-1) != before.reshape(-1))
                raise WroteIntoGiven(
                    f"{what} wrote into an array it was given: shape {array.shape}, dtype "
                    f"{array.dtype}, {changed.size} elements changed (first at flat "
                    f"{changed[:5].tolist()}: {before.reshape(-1)[changed[:3]].tolist()} -> "
                    f"{array.reshape(-1)[changed[:3]].tolist()})"
                )


class _ReadOnly:
    """Within: ``arrays`` are read-only (those that were writeable); after, writeable
    again, and so is a result that is a view of one of them."""

    def __init__(self, arrays):
        self.arrays = [a for a in arrays if a.flags.writeable]

    def __enter__(self):
        for array in self.arrays:
            array.flags.writeable = False
        return self

    def release(self, result):
        # A view is made writeable after its base (its base first frozen too raises).
        frozen = self.arrays
        while frozen:
            left = []
            for array in frozen:
                try:
                    array.flags.writeable = True
                except ValueError:
                    left.append(array)
            if len(left) == len(frozen):
                raise ValueError("a frozen array's base stays read-only")
            frozen = left
        for out in _arrays((result,)):
            if not out.flags.writeable and any(np.shares_memory(out, a) for a in self.arrays):
                out.flags.writeable = True  # (made read-only by a view of a frozen input)

    def __exit__(self, *exc):
        if exc[0] is not None:
            self.release(None)


def _given(name, args):
    """The arrays of a call of op method ``name`` that it must not change, and its target."""
    if name.startswith("forward"):
        arrays, attrs = args
        return list(_arrays((arrays, attrs))), None
    k, grad_output, saved, attrs, grad_input = args
    return list(_arrays((grad_output, saved, attrs))), grad_input


def _check_own_memory(what, result, given):
    """A forward's result is an array of its own: an in-place op on it must not change an
    input (eager outputs never share memory with their inputs)."""
    for out in _arrays((result,)):
        if any(np.shares_memory(out, a) for a in given):
            raise WroteIntoGiven(f"{what} returned an array sharing memory with an input")


def _guarded(op, name, method, freeze):
    def call(*args):
        given, target = _given(name, args)
        snapshot = Snapshot(given, target)
        if freeze:
            with _ReadOnly(a for a in given if a is not target) as frozen:
                result = method(*args)
                frozen.release(result)
        else:
            result = method(*args)
        snapshot.check(f"{op.name}.{name}")
        if name.startswith("forward") and args[1].get("view") is not True:
            # (``view=True``: a reshape the caller asked to be a view, of a buffer no one
            # else holds)
            _check_own_memory(f"{op.name}.{name}", result, given)
        return result

    call.guarded = method
    return call


def _graph_arrays(root_edges, seeds):
    """The seeds' arrays, and every saved value and leaf array of the graph behind
    ``root_edges``."""
    found = [g._data if hasattr(g, "_data") else g for _, g in seeds]
    stack, seen = list(root_edges), set()
    while stack:
        edge = stack.pop()
        if edge is None or id(edge) in seen:
            continue
        seen.add(id(edge))
        if isinstance(edge, tape.Node):
            found.extend(edge.saved_inputs or ())
            found.append(edge.saved_output)
            stack.extend(edge.edges)
        else:
            found.append(edge._data)
    return [a for a in found if type(a) is np.ndarray]


class Guards:
    """The guards installed: each op's methods wrapped (on the instance), and
    ``engine.plan_and_run`` checked as a whole. ``freeze``: twins see read-only arrays."""

    def __init__(self, freeze):
        self.freeze = freeze
        self.wrapped = []
        self.plan_and_run = None

    def install(self):
        for op in REGISTRY.values():
            for name in COMPILED + TWINS:
                method = getattr(op, name, None)
                if method is None or getattr(method, "guarded", None) is not None:
                    continue
                self.wrapped.append((op, name, name in op.__dict__, method))
                setattr(op, name, _guarded(op, name, method, self.freeze and name in TWINS))
        self.plan_and_run = engine.plan_and_run
        engine.plan_and_run = self._plan_and_run

    def uninstall(self):
        engine.plan_and_run = self.plan_and_run
        for op, name, own, method in reversed(self.wrapped):
            if own:
                setattr(op, name, method)
            else:
                op.__dict__.pop(name, None)
        self.wrapped = []

    def _plan_and_run(self, root_edges, seeds, *args, **kwargs):
        snapshot = Snapshot(_graph_arrays(root_edges, seeds))
        done = self.plan_and_run(root_edges, seeds, *args, **kwargs)
        snapshot.check("the backward")
        return done
