"""Recording a program: fn runs eagerly once while every op it applies is written down.

While a :class:`Trace` is active on a thread, this module's recorder sits in the one recording
seam of :mod:`autograd_nb.tensor`, its ``recorder`` slot (``tensor.set_recorder``; nothing
is patched). With a recorder there, the eager fast paths take the general one, and
``tensor.apply`` tells this thread's trace each op it ran at the top level (:meth:`Trace.ran`:
its inputs, its attributes and where its result lives), as the in-place updates tell theirs
(:meth:`Trace.mark`, :meth:`Trace.wrote`, :meth:`Trace.copied`), ``detach`` its source
(:meth:`Trace.detached`), the Tensor methods that turn
values into Python (``item``, ``numpy``, ``float()``, ...) and NumPy's functions without a
gradient call :meth:`Trace.read_value`, a comparison operator calls :meth:`Trace.compared`
and ``bool()`` :meth:`Trace.truth` (a branch: a guard, :mod:`.guards`, where it can be),
and ``Tensor.grad`` refuses. So
:mod:`autograd_nb.replay.program` can lay the program out. The slot's ``trace`` is a
thread-local: other threads run the eager code unchanged (the general path), and while no
thread records the slot is empty: the eager fast paths pay nothing for this module (they read
the one flag they read before, ``tensor._detour``), the general path, ``Tensor._make``,
``Tensor.grad`` and the value methods one global read.

Values are found by memory: every buffer the trace meets (inputs, results, tensors from
outside) is kept alive and registered by its data pointer, so an op reading a view of a
buffer (``reshape``) is read at the right offset, and no address is reused while recording.

A result that is one block of an op result met (a basic index, ``s[k]``: ``Op.input_block``)
is not a buffer of its own: it is read where it lies in that buffer, with no instruction (a
10,000-op scalar graph reads a third of its values so). Until that buffer is written: an
in-place write into it, or into the block, first copies each such block out, at that point of
the program, into a buffer of its own (:meth:`Trace._separate`), as does handing the block, or
the buffer, out of fn. (A gradient taken inside fn writes new arrays only, never a buffer met:
``record_backward``.)
"""

import gc
import importlib
import os
import sys
import threading

import numpy as np

from .. import config, engine, tape
from ..engine import executor, machine
from ..ops import _pointers
from ..ops.registry import REGISTRY, defines
from ..tensor import Tensor
from . import guards as guards_module

# (``autograd_nb.tensor`` the attribute is the function that makes tensors)
tensor_module = importlib.import_module("autograd_nb.tensor")


class _Local(threading.local):
    """The recorder ``tensor.set_recorder`` installs: its ``trace`` is this thread's."""

    trace = None  # (a class default: every thread reads None until it records)


_local = _Local()
_install_lock = threading.Lock()
_active = [0]  # traces active in any thread (the recorder stays installed while positive)

#: The op of a cast row (an operand promoted to another dtype inside an op: ``_cast``).
_ASTYPE = REGISTRY["astype"]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def current():
    return _local.trace


class Buffer:
    """A buffer met while recording: its array (kept alive), where it lives in a replay
    (``kind``: "arena", "input", "external" or "const", and an index), and (read when first
    needed) its byte range."""

    __slots__ = ("array", "kind", "index", "_start")

    def __init__(self, array, kind, index):
        self.array = array
        self.kind = kind
        self.index = index
        self._start = None

    @property
    def start(self):
        if self._start is None:
            self._start = _address(self.array)
        return self._start

    @property
    def end(self):
        return self.start + self.array.nbytes


def _within(found, base, start, end):
    """The location of the bytes ``start`` to ``end`` in ``base``, whose own location is
    ``found``; None where they are not in ``base``."""
    buffer, at = found
    if at or buffer.array is not base:  # (a block read in place: in memory of its own)
        base_start = _address(base)
        if base_start <= start and end <= base_start + base.nbytes:
            return buffer, at + start - base_start
    elif buffer.start <= start and end <= buffer.end:
        return buffer, start - buffer.start
    return None


def _address(array):
    return array.__array_interface__["data"][0]


class Event:
    """One recorded op: ``op`` on ``operands`` (per input a ``(Buffer, byte offset)``), the
    result's location, and its forward spec; for a copy (``op`` None: from ``operands[0]``
    into ``operands[1]``), the byte count."""

    __slots__ = ("op", "operands", "output", "spec", "dtype")

    def __init__(self, op, operands, output, spec, dtype):
        self.op = op
        self.operands = operands
        self.output = output
        self.spec = spec
        self.dtype = dtype


class Trace:
    """The record of one call of fn (see the module docstring)."""

    def __init__(self, inputs, guards=True):
        # The buffers met, but the ops' results and the blocks copied out (``_own``), which
        # are in ``arena_buffers`` only.
        self.buffers = []
        # id of each array met -> its location, ``(Buffer, byte offset)``: ``(its own Buffer,
        # 0)``, one tuple per buffer, not one per use; a block's place in a result
        # (``_alias``). Every array met is kept alive: ids are not reused meanwhile.
        self.by_id = {}
        self.events = []
        self.externals = []  # tensors from outside fn's arguments, in order met
        self.external_index = {}
        self.consts = []
        self.arena_buffers = []
        # Blocks of results read in place (``_alias``): per buffer, ``id`` -> the block's
        # array; per block's ``id``, its buffer.
        self.aliases = {}
        self.aliased = {}
        self.unsupported = None  # why the program cannot replay, with where
        self.value_dependent = None  # (what, file, line) of the first value read
        self.inputs = inputs
        self.writes = []  # the target Buffer of each in-place write (``record_copy``)
        # The buffer of each tensor fn made from constants (``_met``) -> (the copy filling it,
        # the constant it is filled from).
        self.made_buffers = {}
        self.created = set()  # ids of the tensors made while recording (``made``)
        self.depth = 0  # (how deep in an op's own ``_run``: not recorded there)
        # Branches on traced values become guards (:mod:`.guards`) where ``guarding``;
        # else (``compile(strict=True)``) they are values read, as ``float(t)`` is.
        self.guarding = guards
        self.guards = []
        self.start_seq = next(tape._sequence)
        for i, t in enumerate(inputs):
            if t is not None:
                self._add(t._data, "input", i)

    # -- buffers ---------------------------------------------------------------------------

    def _add(self, array, kind, index):
        buffer = Buffer(array, kind, index)
        self.buffers.append(buffer)
        self.by_id.setdefault(id(array), (buffer, 0))
        return buffer

    def find(self, array, scan=True):
        """``(Buffer, byte offset)`` of the buffer holding ``array``, or None. ``scan``: also
        look by address through every buffer (for a view of a view of one)."""
        by_id = self.by_id
        found = by_id.get(id(array))  # (the usual case: the very array met before)
        if found is not None:
            return found
        base = array.base
        if base is None:
            return None  # owns its memory: met before it would have been found above
        start = None  # (its address, read only when needed: a view of a temporary is not)
        while isinstance(base, np.ndarray):  # a view of a buffer met (``reshape``'s)
            found = by_id.get(id(base))
            if found is not None:
                if start is None:
                    start = _address(array)
                    end = start + array.nbytes
                within = _within(found, base, start, end)
                if within is not None:
                    return within
            base = base.base
        if not scan:
            return None
        if start is None:
            start = _address(array)
            end = start + array.nbytes
        return self._find_bytes(start, end)  # a view of a view: by address

    def _find_bytes(self, start, end):
        """``(Buffer, byte offset)`` of the buffer holding the bytes ``start`` to ``end``, or
        None."""
        for buffers in (self.buffers, self.arena_buffers):
            for buffer in buffers:
                if buffer.start <= start and end <= buffer.end:
                    return buffer, start - buffer.start
        return None

    def external(self, tensor):
        index = self.external_index.get(id(tensor))
        if index is None:
            index = self.external_index[id(tensor)] = len(self.externals)
            self.externals.append(tensor)
            self._add(tensor._data, "external", index)
        return index

    def adopt_outputs(self, outputs):
        """Make each output tensor that fn neither received, computed, nor made (a closure's
        or global's tensor handed back as it is) an outside tensor of the program, so that a
        replay returns that very tensor, as fn does, and not a copy of its values then; and
        settle the buffers of the tensors fn made (``_settle``)."""
        for leaf in outputs:
            if (not isinstance(leaf, Tensor) or id(leaf) in self.created
                    or id(leaf) in self.external_index or type(leaf._data) is not np.ndarray
                    or any(t is leaf for t in self.inputs) or self.find(leaf._data) is not None):
                continue
            self.external(leaf)
        if self.made_buffers:
            self._settle(outputs)

    def const(self, array):
        self.consts.append(array)
        return self._add(array, "const", len(self.consts) - 1)

    def located(self, array, tensor, saved):
        """Where the prepared input ``array`` lives; ``tensor`` is the argument it came from
        (None for a constant, then frozen: a copy, unless ``saved``, the node's own)."""
        if type(array) is not np.ndarray:
            self.refuse("an input on a GPU")
            return None
        if not array.flags.c_contiguous:
            self.refuse("a non-contiguous operand")
            return None
        found = self.find(array)
        if found is not None:
            return found
        if tensor is not None:
            if type(tensor._data) is np.ndarray and self.find(tensor._data) is None:
                self._met(tensor)
                found = self.find(array)
                if found is not None:
                    return found
            found = self._cast(tensor, array)
            if found is not None:
                return found
            self.refuse("an operand converted from a tensor (a dtype cast or a copy)")
            return None
        return self.const(array if saved else array.copy()), 0

    def _met(self, tensor):
        """Register ``tensor``, met for the first time as an operand: a tensor fn made from
        constants (``anb.zeros``: a state buffer it may then write in place) is a buffer of
        each call's own, its first values copied in from a constant here in the program (a
        replay must not see the values an earlier call wrote into it); a tensor from outside
        fn is an outside tensor of the program, read afresh at each call."""
        data = tensor._data
        if id(tensor) not in self.created or not data.flags.c_contiguous:
            self.external(tensor)
            return
        initial = self.const(data.copy())
        buffer = Buffer(data, "arena", len(self.arena_buffers))
        self.arena_buffers.append(buffer)
        self.by_id[id(data)] = (buffer, 0)
        copy = Event(None, [(initial, 0), (buffer, 0)], None, data.nbytes, data.dtype)
        self.events.append(copy)
        self.made_buffers[buffer] = (copy, initial)

    def _settle(self, outputs):
        """Each buffer of a tensor fn made from constants (``_met``) that fn neither wrote in
        place nor handed out becomes the constant itself: no copy per call (a replay reads
        the values it was made with, as the copy would give)."""
        written = set(self.writes)
        for leaf in outputs:
            if isinstance(leaf, Tensor) and type(leaf._data) is np.ndarray:
                found = self.find(leaf._data)
                if found is not None:
                    written.add(found[0])
        frozen = {buffer: initial for buffer, (_, initial) in self.made_buffers.items()
                  if buffer not in written}
        if not frozen:
            return
        copies = {id(self.made_buffers[buffer][0]) for buffer in frozen}
        self.events = [event for event in self.events if id(event) not in copies]
        self.arena_buffers = [b for b in self.arena_buffers if b not in frozen]
        for index, buffer in enumerate(self.arena_buffers):
            buffer.index = index
        for buffer, initial in frozen.items():
            buffer.kind, buffer.index = "const", initial.index
            self.buffers.append(buffer)  # (found by address as the buffers met are)

    def _cast(self, tensor, array):
        """Where ``array``, ``tensor``'s values cast to another dtype by an op's ``prepare``
        (float32 and float64 operands promoted), lives: a buffer of its own, made by a cast
        row (``astype``'s forward driver) at this point of the program; None where it is not
        such a cast, or the driver has no case for the two dtypes."""
        data = tensor._data
        source = self.find(data) if type(data) is np.ndarray else None
        if (source is None or data.dtype == array.dtype or data.shape != array.shape
                or not data.flags.c_contiguous):
            return None
        cast = _ASTYPE.forward_spec([data], {"dtype": array.dtype}, array)
        if cast is None or not np.array_equal(data.astype(array.dtype), array,
                                              equal_nan=array.dtype.kind in "fc"):
            return None
        buffer = Buffer(array, "arena", len(self.arena_buffers))
        self.arena_buffers.append(buffer)
        self.by_id[id(array)] = (buffer, 0)
        self.events.append(Event(_ASTYPE, [source], buffer, cast, array.dtype))
        return buffer, 0

    def refuse(self, why):
        if self.unsupported is None:
            self.unsupported = (why, *_caller())

    # -- what ``tensor.apply`` and the other entry points tell (``tensor.recorder``) -------

    def ran(self, op, args, arrays, attrs, output, result):
        """``tensor.apply`` ran ``op`` on ``args`` (Tensors or not), prepared as ``arrays``
        and ``attrs``, giving ``output``, the data of the Tensor ``result``."""
        self.created.add(id(result))
        tensors = [arg if isinstance(arg, Tensor) else None for arg in args]
        self.record_op(op, tensors, arrays, attrs, output, result._node)

    def made(self, tensor):
        """A Tensor was made (``Tensor._make``) while this thread records."""
        self.created.add(id(tensor))

    def detached(self, tensor):
        """``tensor.detach()``: a view of its buffer. One from outside fn becomes an outside
        tensor of the program, so that a replay hands out a view of its buffer then, as fn
        does (not a copy of its values now)."""
        data = tensor._data
        if (type(data) is np.ndarray and id(tensor) not in self.created
                and self.find(data) is None):
            self.external(tensor)

    def mark(self):
        """Where the program is, before an in-place update (for :meth:`wrote`)."""
        return len(self.events)

    def wrote(self, mark, target_array):
        """An in-place update since ``mark`` wrote the result of the last op recorded into
        ``target_array``."""
        if self.unsupported is None:
            if len(self.events) == mark or self.events[-1].output is None:
                self.refuse("an in-place update this recorder cannot follow")
            else:
                self.record_copy(self.events[-1].output.array, target_array)

    def copied(self, source, copy):
        """``copy = source.copy()`` (an in-place op keeping the old value for a VJP)."""
        self.record_fresh_copy(source, copy)

    # -- events ----------------------------------------------------------------------------

    def record_op(self, op, tensors, arrays, attrs, output, node):
        """Note ``op``, run on ``arrays`` (prepared from the arguments, with ``tensors`` the
        Tensor each came from, or None) with the prepared ``attrs``, which gave ``output``
        (and the ``node`` recorded, or None). This runs once per op recorded: the usual
        case (operands that are buffers met, a result owning its memory) takes no call."""
        if self.unsupported is not None:
            return
        by_id = self.by_id
        try:  # (the usual case: every operand a buffer met, read as it is)
            operands = [by_id[id(array)] for array in arrays]
        except KeyError:
            operands = self._operands(tensors, arrays, node)
            if operands is None:
                return
        if defines(op, "input_block") and self._alias(op, operands, arrays, attrs, output):
            return
        # (A result owning its memory, or a view of a temporary of the op's, is new.)
        if output.base is not None and self.find(output, scan=False) is not None:
            # A view of a buffer already met (``reshape``'s view): no instruction.
            if not output.flags.c_contiguous:
                self.refuse(f"{op.name}: a non-contiguous view")
            return
        spec = op.forward_spec(arrays, attrs, output)
        if spec is None or (_is_complex(arrays, output)
                            and not _pointers.complex_capable(spec[0])):
            self.refuse(f"{op.name} ({_why_no_driver(arrays, output)})")
            return
        if not output.flags.c_contiguous:
            self.refuse(f"{op.name}: a non-contiguous result")
            return
        if len(spec) > 3:  # (a driver that may fail: its flag after the inputs)
            spec = spec[:3]
            operands = [*operands, self._failure_flag()]
        arena = self.arena_buffers
        buffer = Buffer(output, "arena", len(arena))  # (in ``arena_buffers`` only)
        by_id.setdefault(id(output), (buffer, 0))
        arena.append(buffer)
        self.events.append(Event(op, operands, buffer, spec, output.dtype))

    def _failure_flag(self):
        """The location of a new one-byte flag that an op's driver sets where it fails (a
        singular matrix, where eager raises: ``Op.forward_spec``), a guard whose outcome
        recorded is 0: a replay where it is 1 keeps nothing, and fn is recorded again,
        eagerly, raising eager's error (:mod:`.guards`). Recorded with ``strict=True`` too:
        no value reaches fn's Python."""
        flag = np.zeros(1, dtype=np.bool_)
        buffer = Buffer(flag, "arena", len(self.arena_buffers))
        self.arena_buffers.append(buffer)
        self.by_id[id(flag)] = (buffer, 0)
        self.guards.append(guards_module.Guard(Tensor._make(flag), False, *_caller()))
        return buffer, 0

    def _alias(self, op, operands, arrays, attrs, output):
        """Whether ``output`` is read where it lies in its input's buffer, a result's, from
        now on (see the module docstring): noted so, with no instruction."""
        source, offset = operands[0]
        if (source.kind != "arena" or not output.size or id(output) in self.by_id
                or output.dtype != arrays[0].dtype or not arrays[0].flags.c_contiguous
                or not output.flags.c_contiguous):
            return False
        at = op.input_block(attrs)
        if at is None:
            return False
        self.by_id[id(output)] = (source, offset + at * output.itemsize)
        self.aliased[id(output)] = source
        self.aliases.setdefault(source, {})[id(output)] = output
        return True

    def _separate(self, buffer):
        """Copy each block read in place in ``buffer`` into a buffer of its own, here in the
        program (before a write into ``buffer``)."""
        for array in list(self.aliases.get(buffer, {}).values()):
            self._own(array)

    def _own(self, array):
        """The block ``array`` (read in place) copied, here in the program, into a buffer of
        its own, where it is read from then on."""
        source = self.aliased.pop(id(array))
        blocks = self.aliases[source]
        del blocks[id(array)]
        if not blocks:
            del self.aliases[source]
        found = self.by_id[id(array)]
        buffer = Buffer(array, "arena", len(self.arena_buffers))
        self.arena_buffers.append(buffer)
        self.by_id[id(array)] = (buffer, 0)
        self.events.append(Event(None, [found, (buffer, 0)], None, array.nbytes, array.dtype))

    def own_outputs(self, outputs):
        """Give each output tensor, and the blocks read in place in its buffer, a buffer of
        its own: an output does not share memory with another value (it may be changed in
        place after the call; eager's values are separate arrays)."""
        if not self.aliased:
            return
        for leaf in outputs:
            if not isinstance(leaf, Tensor) or type(leaf._data) is not np.ndarray:
                continue
            array = leaf._data
            while isinstance(array, np.ndarray):
                if id(array) in self.aliased:
                    self._own(array)
                array = array.base
            found = self.find(leaf._data)
            if found is not None:
                self._separate(found[0])

    def _operands(self, tensors, arrays, node):
        """``record_op``'s locations of the operands where one is not a buffer met, or None
        (then the trace is refused)."""
        operands = []
        for k, (tensor, array) in enumerate(zip(tensors, arrays)):
            if tensor is not None and array is tensor._data:
                found = self.by_id.get(id(array))
                if found is not None:
                    operands.append(found)
                    continue
            found = self._operand(tensor, array, node, k)
            if found is None:
                return None
            operands.append(found)
        return operands

    def _operand(self, tensor, array, node, k):
        """``record_op``'s location of operand ``k`` outside the usual case, or None (then
        the trace is refused)."""
        if tensor is not None and id(tensor._data) not in self.by_id:
            if type(tensor._data) is not np.ndarray:
                self.refuse("a tensor on a GPU")
                return None
            if self.find(tensor._data) is None:
                self._met(tensor)
        saved = node.saved_inputs if node is not None else None
        own = saved is not None and k < len(saved) and saved[k] is array
        return self.located(array, tensor, own)

    def record_copy(self, source, target_array):
        """An in-place write: ``target_array[...] = source`` (both ndarrays)."""
        if self.unsupported is not None:
            return
        found_source = self.find(source)
        found_target = self.find(target_array)
        if found_target is not None and found_target[0] in self.aliases:
            self._separate(found_target[0])  # (the blocks read in place keep their values)
            found_target = self.find(target_array)
        if found_source is None or found_target is None or not target_array.flags.c_contiguous:
            self.refuse("an in-place write this recorder cannot follow")
            return
        if source.nbytes != target_array.nbytes:
            self.refuse("an in-place write with broadcasting")
            return
        self.events.append(Event(None, [found_source, found_target], None,
                                 target_array.nbytes, target_array.dtype))
        self.writes.append(found_target[0])

    def record_fresh_copy(self, source, copy):
        """``copy = source.copy()`` (``_inplace`` keeping the old value for a VJP)."""
        if self.unsupported is not None or type(copy) is not np.ndarray:
            return
        found = self.find(source)
        if found is None:
            self.refuse("a copy of an unknown buffer")
            return
        buffer = self._add(copy, "arena", len(self.arena_buffers))
        self.arena_buffers.append(buffer)
        self.events.append(Event(None, [found, (buffer, 0)], None, copy.nbytes, copy.dtype))

    def inner_backward(self, root_edges, seeds, targets, all_leaves, retain_graph,
                       create_graph, allow_unused, batch):
        """``engine.plan_and_run`` while recording: run the backward as the machine runs it,
        its table lowered into the trace's buffers, and add that table to the program (a
        gradient inside fn: forces ``-grad(energy, x)``, a training step)."""
        plan = engine.make_plan(root_edges, targets, all_leaves)
        if not allow_unused:
            for edge in targets:
                if id(edge) not in plan.reachable:
                    raise RuntimeError(engine.UNUSED_INPUT)
        if create_graph or batch is not None:
            self.refuse("a gradient inside with create_graph or is_grads_batched")
        target_ids = {id(e) for e in targets}
        done = None
        if self.unsupported is None:
            done = self.record_backward(plan, seeds, target_ids, all_leaves)
        if done is None:
            # (not tier 0's walk: the recording compiles the forward's drivers already)
            results, leaves, executed = engine.run_plan(
                plan, seeds, target_ids, all_leaves, True, create_graph, batch, tier0=False,
            )
            ran = plan.nodes if executed is None else executed.schedule.ran
            self.refuse("a gradient inside that the compiled executor cannot run")
        else:
            results, leaves, ran = done
        # (the graph is retained for the recording, which reads the saved buffers, and freed
        # after it)
        if not retain_graph:
            for node in ran:
                node.free()
        return results, leaves, plan

    def record_backward(self, plan, seeds, targets, all_leaves):
        """Run the backward of ``plan`` in the machine, its table lowered into this trace's
        buffers (:class:`_TracePlaces`), and add the table to the program as a block:
        ``(results, leaves, ran)``, or None (nothing ran) where the machine cannot run it."""
        dtype = executor.plan_dtype(plan, seeds)
        if dtype is None or not config.COMPILED_BACKWARD or not _pointers.SUPPORTED:
            return None
        places = _TracePlaces(self, dtype)
        try:
            steps = executor.plan_schedule(plan, seeds, targets, all_leaves)
            executor.lower(steps, seeds, places, dtype)
        except executor.Unsupported:
            return None
        places.resolve()
        table, floats = places.builder.tables()
        ids = np.fromiter((id(buffer.array) for buffer in places.objects), dtype=np.int64,
                          count=len(places.objects))
        machine.run(table, ids, floats)
        if self.unsupported is None:
            self.events.append(Event("block", (places.builder, places.objects), None, None,
                                     dtype))
        return places.results, steps.leaves, steps.ran

    def _object_location(self, array, origin, saved_by_nodes):
        """Where a backward table's seed or saved ``array`` (read by ``origin``) lives: a
        buffer met or a constant."""
        found = self.find(array)
        if found is not None:
            return found
        if type(origin) is tuple and origin[0] == "seed":
            if not np.all(array == 1):
                self.refuse("a grad_outputs converted from a tensor (a dtype cast)")
            return self.const(array), 0
        if id(array) in saved_by_nodes:
            self.refuse("a saved buffer the recorder did not see made")
        return self.const(array), 0

    def read_value(self, tensor, what):
        """``tensor``'s values were handed to Python (``what``)."""
        data = tensor._data
        if self.value_dependent is not None or type(data) is not np.ndarray:
            return
        found = self.find(data)
        if found is None:
            # Not met yet: a tensor fn made from constants (the same at every call), or one
            # from outside, a closure's or global's, whose values a later call may change.
            if id(tensor) in self.created:
                return
        elif found[0].kind == "const":
            return
        self.value_dependent = (what, *_caller())


    # -- guards (branches on traced values, :mod:`.guards`) -------------------------------

    def compared(self, ufunc, args, result):
        """A comparison operator ``ufunc(*args)`` gave the bool Tensor ``result``: whether it
        needs no value read, being recorded as a guard instruction (one traced element on
        each side, of one dtype a guard runs: ``x.sum() > 0``) or reading no traced value;
        False: its values reach Python (:meth:`read_value`, as before guards)."""
        code = guards_module.CODES.get(ufunc.__name__)
        data = result._data
        if (not self.guarding or self.value_dependent is not None or code is None
                or len(args) != 2 or type(data) is not np.ndarray or data.size != 1):
            return False
        like = _guard_dtype(args)
        if like is None:
            return False
        traced = False
        for arg in args:
            if isinstance(arg, Tensor):
                found = self.find(arg._data)
                traced |= (id(arg) not in self.created if found is None
                           else found[0].kind != "const")
        if not traced or self.unsupported is not None:
            return True  # (constants: the same outcome at every call; or eager anyway)
        operands = []
        for arg in args:
            if isinstance(arg, Tensor):
                found = self.located(arg._data, arg, False)
                if found is None:
                    return True  # (refused: the signature runs eagerly)
                operands.append(found)
            else:
                operands.append((self.const(np.full(1, arg, dtype=like)), 0))
        buffer = Buffer(data, "arena", len(self.arena_buffers))
        self.arena_buffers.append(buffer)
        self.by_id[id(data)] = (buffer, 0)
        self.events.append(Event(guards_module.GUARD, operands, buffer,
                                 (guards_module.compare_driver, (code,), ()), like))
        return True

    def truth(self, tensor):
        """fn branches on ``tensor`` (``bool(t)``): a traced one-element value gets a guard,
        an instruction writing its truth into a flag of its own, and the outcome seen is
        noted (:class:`.guards.Guard`); one this cannot follow is a value read, as before."""
        data = tensor._data
        if type(data) is not np.ndarray or data.size != 1:
            return  # (bool() raises for several elements)
        if not self.guarding or self.value_dependent is not None:
            self.read_value(tensor, "bool(tensor)")
            return
        if data.dtype != np.bool_ and data.dtype not in guards_module.DTYPES:
            self.read_value(tensor, "bool(tensor)")
            return
        found = self.find(data)
        if found is None:
            if id(tensor) in self.created:
                return  # (made from constants: the same outcome at every call)
            self.external(tensor)
            found = self.find(data)
        elif found[0].kind == "const":
            return
        if self.unsupported is not None or found is None:
            return
        flag = np.full(1, bool(data.reshape(-1)[0]), dtype=np.bool_)
        buffer = Buffer(flag, "arena", len(self.arena_buffers))
        self.arena_buffers.append(buffer)
        self.by_id[id(flag)] = (buffer, 0)
        if data.dtype == np.bool_:  # (a comparison's result: its byte copied)
            self.events.append(Event(None, [found, (buffer, 0)], None, 1, data.dtype))
        else:
            zero = (self.const(np.zeros(1, dtype=data.dtype)), 0)
            self.events.append(Event(
                guards_module.GUARD, [found, zero], buffer,
                (guards_module.compare_driver, (guards_module.CODES["not_equal"],), ()),
                data.dtype))
        self.guards.append(guards_module.Guard(Tensor._make(flag), bool(flag[0]), *_caller()))


class _TracePlaces(executor.Places):
    """Where a backward run inside fn keeps its buffers while it is recorded
    (:func:`.executor.lower`'s strategy): its intermediate gradients in a scratch array, a
    new arena buffer of the trace (object 0), its results in new arena buffers, its seeds and
    saved arrays where the trace met them (a constant where it did not: :meth:`resolve`).
    ``objects``: the trace's buffers, by the builder's object numbers."""

    def __init__(self, trace, dtype):
        self.builder = machine.Builder()
        self.trace = trace
        self.dtype = dtype
        self.objects = [None]
        self.results = {}  # id of each result's edge -> its array
        self.pending = []  # (value, array, origin) of the seeds and saved arrays

    def _new_buffer(self, array):
        trace = self.trace
        buffer = trace._add(array, "arena", len(trace.arena_buffers))
        trace.arena_buffers.append(buffer)
        return buffer

    def arena_bytes(self, n_bytes):
        scratch = np.empty(max(n_bytes // self.dtype.itemsize, 1), dtype=self.dtype)
        self.objects[0] = self._new_buffer(scratch)

    def arena(self, offset, stride):
        return self.builder.value(0, offset, stride)

    def seed(self, index, array, stride):
        return self._later(array, ("seed", index))

    def result(self, edge, shape, stride):
        array = np.empty(shape, dtype=self.dtype)  # (cleared or written whole by the table)
        self.results[id(edge)] = array
        self.objects.append(self._new_buffer(array))
        return self.builder.value(len(self.objects) - 1, 0, stride)

    def saved(self, arrays, origin):
        return [self._later(array, origin) for array in arrays]

    def _later(self, array, origin):
        value = self.builder.value(-1, 0)
        self.pending.append((value, array, origin))
        return value

    def resolve(self):
        """Find the seeds and saved arrays among the buffers met (once all are known: a
        saved buffer the recorder did not see made refuses the program)."""
        saved_by_nodes = _saved_by_nodes(origin for _, _, origin in self.pending)
        values = self.builder.values
        for value, array, origin in self.pending:
            buffer, offset = self.trace._object_location(array, origin, saved_by_nodes)
            self.objects.append(buffer)
            at = value * machine.VALUE
            values[at + machine.OBJECT] = len(self.objects) - 1
            values[at + machine.OFFSET] = offset


def _guard_dtype(args):
    """The one dtype in which a guard compares ``args`` as NumPy does (every tensor of it,
    one element each; Python numbers cast to it), or None."""
    like = None
    for arg in args:
        if isinstance(arg, Tensor):
            data = arg._data
            if type(data) is not np.ndarray or data.size != 1 or (
                    like is not None and data.dtype != like):
                return None
            like = data.dtype
        elif not isinstance(arg, (bool, int, float, np.bool_, np.integer, np.floating)):
            return None
    if like not in guards_module.DTYPES:
        return None
    try:
        values = [arg._data if isinstance(arg, Tensor) else arg for arg in args]
        if np.result_type(*values) != like:
            return None
        for arg in args:
            if not isinstance(arg, Tensor):
                np.array(arg, dtype=like)  # (a Python int out of int64's range raises)
    except (OverflowError, TypeError, ValueError):
        return None
    return like


def _saved_by_nodes(origins):
    """The ids of the arrays the tape nodes among a backward table's ``origins`` saved."""
    saved = set()
    for origin in origins:
        if isinstance(origin, tape.Node):
            for array in (origin.saved_inputs or ()):
                saved.add(id(array))
            saved.add(id(origin.saved_output))
    return saved


def _caller():
    """``(file, line)`` of the innermost frame outside autograd_nb."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not os.path.abspath(filename).startswith(_PACKAGE):
            return filename, frame.f_lineno
        frame = frame.f_back
    return "<unknown>", 0


class gc_paused:
    """Context manager: Python's cyclic garbage collector paused (while a program is recorded
    and laid out: the recorder's many small objects made it collect hundreds of times, measured
    at about half the recording time of a 10,000-op function). Restored when the last of the
    threads recording at once is done, and only if it was on."""

    _count = [0]
    _was_enabled = [False]
    _lock = threading.Lock()

    def __enter__(self):
        with self._lock:
            if self._count[0] == 0:
                self._was_enabled[0] = gc.isenabled()
                gc.disable()
            self._count[0] += 1
        return self

    def __exit__(self, *exc):
        with self._lock:
            self._count[0] -= 1
            if self._count[0] == 0 and self._was_enabled[0]:
                gc.enable()
        return False


class recording:
    """Context manager: record the ops this thread applies into ``trace`` (the recorder is in
    ``tensor.recorder`` while a thread records)."""

    def __init__(self, trace):
        self.trace = trace
        trace.depth = 0

    def __enter__(self):
        if current() is not None:
            raise RuntimeError("autograd_nb.compile: a compiled function is being recorded "
                               "already on this thread")
        with _install_lock:
            if _active[0] == 0:
                tensor_module.set_recorder(_local)
            _active[0] += 1
        _local.trace = self.trace
        engine.set_backward_hook(self.trace.inner_backward)
        return self.trace

    def __exit__(self, *exc):
        _local.trace = None
        engine.set_backward_hook(None)
        with _install_lock:
            _active[0] -= 1
            if _active[0] == 0:
                tensor_module.set_recorder(None)
        return False


def _is_complex(arrays, output):
    """Whether an op recorded computes in complex: then its driver must be one that computes
    the complex case (``_pointers.serves_complex``)."""
    return output.dtype.kind == "c" or any(
        getattr(a, "dtype", None) is not None and a.dtype.kind == "c" for a in arrays
    )


def _why_no_driver(arrays, output):
    """Why an op recorded has no forward driver, for the warning: complex operands where the
    op has no compiled complex driver for them (docs/complex.rst), or another case of the
    op's."""
    if _is_complex(arrays, output):
        return ("complex operands it has no compiled driver for: a program with them "
                "runs eagerly")
    return "no forward driver for this case"
