"""CPython's object layout, for the compiled code that reads Python objects directly.

Two places walk many Python objects per call and would pay tens of nanoseconds per object in
Python: the garbage-collector hook (:mod:`autograd_nb.collector`) and the check of a recorded
graph against a cached backward template (:mod:`autograd_nb.engine.plan_cache`). Both read
the objects' memory from ``@njit`` code instead, by address (``id()``), with the facts this
module finds on the running interpreter:

* every object starts with its reference count and its type pointer;
* a list keeps its length and a pointer to its item array after that header, a tuple its
  length and then its items inline;
* a class with ``__slots__`` keeps each slot at a fixed offset, found by storing a marker in
  the slot and looking for it (:func:`slot_offset`);
* a non-negative int below 2**60 is its digit count and 30-bit digits (:func:`read_int`).

Each fact is checked on this interpreter before it is used (``*_as_expected``: the list and
tuple layouts at import, in :data:`SUPPORTED`; ints when the graph reader first needs them);
where one fails, or under ``NUMBA_DISABLE_JIT``, the callers keep their Python paths.
Compiled readers hold the GIL (no ``nogil``), so no other thread changes what they read
meanwhile.

:func:`objects_at` turns an array of addresses back into Python objects (new references,
~4 ns each); :data:`incref`/:data:`decref` are the interpreter's own functions, for compiled
code that must keep an object alive past the call that found it.
"""

import ctypes
import sys

from llvmlite import ir
from numba import config as numba_config
from numba import njit, types
from numba.extending import intrinsic

from . import _cpython
from .ops._pointers import load_address

TYPE_OFFSET = 8
#: A list's or tuple's length.
SIZE_OFFSET = 16
#: A list's pointer to its item array; a tuple's first item.
ITEMS_OFFSET = 24
#: An int's digit count (its sign is that of the count), then its digits.
INT_DIGITS = 24
INT_DIGIT_BITS = 30

incref = types.ExternalFunction("Py_IncRef", types.void(types.int64))
decref = types.ExternalFunction("Py_DecRef", types.void(types.int64))


@intrinsic
def _load_uint32(typingctx, address):
    def codegen(context, builder, signature, args):
        value = builder.load(builder.inttoptr(args[0], ir.IntType(32).as_pointer()))
        return builder.zext(value, ir.IntType(64))

    return types.int64(types.int64), codegen


@intrinsic
def store_address(typingctx, address, value):
    """Store the int64 ``value`` at ``address``."""

    def codegen(context, builder, signature, args):
        builder.store(args[1], builder.inttoptr(args[0], ir.IntType(64).as_pointer()))
        return context.get_dummy_value()

    return types.void(types.int64, types.int64), codegen


@njit(inline="always")
def replace_slot(address, value):
    """Set the object slot at ``address`` to the object at ``value`` (not null), as
    ``setattr`` does: take a reference to the new value, then drop the old one's (an empty
    slot's null is fine: ``Py_DecRef`` ignores it)."""
    old = load_address(address)
    incref(value)
    store_address(address, value)
    decref(old)


@njit(inline="always")
def read_int(address):
    """The value of the int object at ``address``, or -1 where it is negative or not below
    2**60."""
    count = load_address(address + SIZE_OFFSET)
    if count == 0:
        return 0
    if count == 1:
        return _load_uint32(address + INT_DIGITS)
    if count == 2:
        return _load_uint32(address + INT_DIGITS) | (
            _load_uint32(address + INT_DIGITS + 4) << INT_DIGIT_BITS
        )
    return -1


def word_at(address):
    return ctypes.c_ssize_t.from_address(address).value


def slot_offset(cls, name):
    """Where instances of ``cls`` keep their ``name`` slot, found by looking for a marker
    stored there; None if not found."""
    probe = object.__new__(cls)
    marker = object()
    setattr(probe, name, marker)
    for offset in range(16, cls.__basicsize__, 8):
        if word_at(id(probe) + offset) == id(marker):
            return offset
    return None


def lists_as_expected():
    probe = [object(), object()]
    return (
        word_at(id(probe) + TYPE_OFFSET) == id(list)
        and word_at(id(probe) + SIZE_OFFSET) == 2
        and word_at(word_at(id(probe) + ITEMS_OFFSET) + 8) == id(probe[1])
    )


def tuples_as_expected():
    probe = (object(), object(), object())
    return (
        word_at(id(probe) + TYPE_OFFSET) == id(tuple)
        and word_at(id(probe) + SIZE_OFFSET) == 3
        and word_at(id(probe) + ITEMS_OFFSET + 16) == id(probe[2])
    )


def ints_as_expected():
    """Whether :func:`read_int` reads this interpreter's ints (3.12 changed their header)."""
    if sys.byteorder != "little":
        return False
    probes = [0, 1, 7, 2**30 - 1, 2**30, 2**30 + 12345, 2**45 + 3, 2**60 - 1]
    try:
        return all(read_int(id(n)) == n for n in probes) and read_int(id(2**61)) == -1
    except Exception:  # noqa: BLE001 - any failure means: not this layout
        return False


def objects_at(addresses, count=None):
    """The objects at ``addresses`` (a C-contiguous int64 array of live objects' ids), or at
    its first ``count`` entries, as a list of new references."""
    if count is None:
        count = len(addresses)
    if not count:
        return []
    return (ctypes.py_object * count).from_buffer(addresses)[:]


#: Whether compiled code may read objects here at all (:mod:`autograd_nb._cpython` allows it,
#: and the layouts are as expected).
SUPPORTED = (
    _cpython.ALLOWED and not numba_config.DISABLE_JIT and lists_as_expected()
    and tuples_as_expected()
)
if _cpython.ALLOWED and not numba_config.DISABLE_JIT and not SUPPORTED:
    _cpython.unavailable("reading graphs from compiled code (cached backward checks, the "
                         "garbage-collector hook)", "CPython's list or tuple layout differs")
