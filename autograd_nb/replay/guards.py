"""Branches on traced values as guards: the instruction a recorded program runs where fn
turned a traced one-element tensor into a Python bool (``if x.sum() > 0:``, ``while err >
tol:``), and the check a replay makes of its outcomes.

A guard is an ordinary instruction of the forward table: :data:`GUARD` is an op (not
registered: no public function) whose driver, :func:`compare_driver`, compares two
one-element operands and writes the outcome (one byte, 0 or 1) into its result, a buffer of
the arena (:mod:`autograd_nb.ops._pointers`' convention: the operands' data pointers, then
the result's; ``ints[0]`` the comparison). The recorder (:meth:`.tracer.Trace.compared`,
:meth:`.tracer.Trace.truth`) records one where a comparison of one-element operands runs,
and, where fn asks for the truth of a traced value, a copy of that byte into a flag of its
own (or a comparison with zero), and notes the outcome it saw. After a replay's table has
run, :class:`Path` reads the flags from the call's arena and compares them with the
outcomes recorded (:mod:`.function` decides what a different outcome means). An op whose
forward driver can fail where eager raises (a singular ``solve``) writes such a flag itself,
a guard whose outcome recorded is 0 (:meth:`.tracer.Trace._failure_flag`).
"""

import numpy as np
from numba import njit

from ..ops import _pointers
from ..ops.registry import Op

#: The comparisons recorded as guards, by NumPy ufunc name, and their codes in the driver.
CODES = {"less": 0, "less_equal": 1, "greater": 2, "greater_equal": 3, "equal": 4,
         "not_equal": 5}
#: The operand dtypes whose guards have a driver (others keep the eager fallback).
DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64))

_BYTE = np.empty(0, dtype=np.uint8)


@njit(cache=True, nogil=True)
def compare_driver(operands, ints, floats, like):
    """``result[0] = a[0] <op> b[0]`` (one byte), with ``a``, ``b`` of ``like``'s dtype and
    ``<op>`` the comparison ``ints[0]`` (:data:`CODES`)."""
    a = _pointers.array_at(operands[0], 1, like)[0]
    b = _pointers.array_at(operands[1], 1, like)[0]
    code = ints[0]
    if code == 0:
        outcome = a < b
    elif code == 1:
        outcome = a <= b
    elif code == 2:
        outcome = a > b
    elif code == 3:
        outcome = a >= b
    elif code == 4:
        outcome = a == b
    else:
        outcome = a != b
    _pointers.array_at(operands[2], 1, _BYTE)[0] = 1 if outcome else 0


class GuardOp(Op):
    """A comparison of two one-element values into a byte, as a program instruction (see the
    module docstring). Not registered, not differentiable: its result is a bool tensor."""

    name = "guard_compare"
    family = "replay"
    n_inputs = 2
    differentiable = (False, False)
    method = False

    def __init__(self):  # (not registered: it has no public function)
        pass


GUARD = GuardOp()


class Guard:
    """One branch fn took while recording: the flag (a one-byte arena buffer, as a Tensor the
    program hands back to the replay only), the outcome seen, and where in fn."""

    __slots__ = ("flag", "outcome", "filename", "line")

    def __init__(self, flag, outcome, filename, line):
        self.flag = flag
        self.outcome = outcome
        self.filename = filename
        self.line = line


class Path:
    """The outcomes one recorded program expects of its guards, and the check of a call's:
    ``offsets`` of the flags in the call's arena (laid out by the program), ``outcomes`` as
    recorded, ``where`` each guard's ``(file, line)``."""

    __slots__ = ("offsets", "outcomes", "expected", "where", "_one")

    def __init__(self, offsets, outcomes, where):
        self.offsets = np.asarray(offsets, dtype=np.intp)
        self.outcomes = tuple(bool(o) for o in outcomes)
        self.expected = np.asarray(self.outcomes, dtype=np.uint8)
        self.where = list(where)
        self._one = (int(offsets[0]), int(self.outcomes[0])) if len(offsets) == 1 else None

    @classmethod
    def of(cls, guards, offsets):
        """The path of a recording's ``guards`` (:class:`Guard`), their flags at
        ``offsets``; None for a recording without guards."""
        if not guards:
            return None
        return cls(offsets, [guard.outcome for guard in guards],
                   [(guard.filename, guard.line) for guard in guards])

    def holds(self, arena):
        """Whether the call whose arena this is took this path (every flag as recorded)."""
        if self._one is not None:  # (the usual case: one branch; a byte read, no array)
            offset, outcome = self._one
            return arena[offset] == outcome
        return bool(np.array_equal(arena[self.offsets], self.expected))

    def observed(self, arena):
        """The outcomes a call took, up to and with the first that differs from this path's
        (those after it ran on the wrong path: they mean nothing)."""
        if self._one is not None:
            return (bool(arena[self._one[0]]),)
        flags = arena[self.offsets] != 0
        differs = np.flatnonzero(flags != self.expected.astype(bool))
        end = int(differs[0]) + 1 if differs.size else len(self.outcomes)
        return tuple(flags[:end].tolist())

    def continues(self, observed):
        """Whether this path takes the outcomes ``observed`` (a prefix of a call's)."""
        return self.outcomes[:len(observed)] == observed
