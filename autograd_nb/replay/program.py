"""A recorded program laid out as tables, and its replay: a forward in one compiled call whose
outputs are ordinary Tensors with a backward of one compiled call.

Objects of a call, in order: the arena (every intermediate value, at fixed byte offsets), the
buffers of fn's tensor arguments, of the tensors fn reached from outside (closures, globals),
and the constants. (A tensor fn made from constants, ``anb.zeros``, is an arena value that a
copy from a constant fills: ``Trace._met``.) The forward table, a table of
:mod:`autograd_nb.engine.machine`, reads and writes them as its values, ``(object, offset)``.
Each output's backward is the eager planner's schedule lowered into the call's places
(:func:`autograd_nb.engine.executor.lower` with :class:`_CallPlaces`), a table of the same
machine.

The graph of a replayed call is two kinds of node. ``ReplayInputs`` has the call's
differentiable tensors as its edges and a gradient buffer holding all their gradients one
after another (and, after them, scratch space); its VJP for input ``k`` adds that input's part
into the input's gradient (copies it, where it is the first to write that gradient). Each
differentiable output has a ``ReplayOutput`` node with that one edge, whose VJP runs the
output's recorded backward table into the buffer, one driver call
(:func:`.interpreter.backward_driver`; where it is the first to write the buffer,
:func:`.interpreter.backward_set_driver` clears the inputs' part first, not the scratch). A
table stops at the call's other outputs its gradient goes through: their gradients are parts
of the buffer too, and ``ReplayInputs``' edges to their nodes take them on (eager's
``grad(loss, h)`` sees them). So the compiled backward executor, its batched form, the plan
cache and the Python walk all run a replayed call as they run any graph, and
``create_graph=True`` re-runs fn eagerly to record differentiable gradients. A backward from
one output whose gradient ends at the call's leaves (``grad(f(x), x)``, ``f(x).backward()``)
needs no plan: ``ReplayOutput``'s VJP strategy (``backward_alone``) runs the output's table
and hands the leaves their parts, the same two steps without the plan cache's match of the
graph.
"""

import contextlib
import sys
import threading
import weakref

import numpy as np

from .. import tape
from ..engine import backward as backward_module
from ..engine import executor, machine
from ..ops import _pointers
from ..ops.registry import DerivativeNotImplemented, ExecSpec, Op, VJPStrategy, call
from ..tensor import Tensor
from . import fusion, interpreter
from .tree import flatten

_ALIGN = 64
#: Arenas of recent calls a program keeps to reuse once their outputs are gone.
_SPARE_ARENAS = 4
#: The dtypes of a program's gradients: one of them per program (an op's complex VJP
#: without a compiled driver makes the program's backward Unsupported: ``executor.lower``).
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64),
           np.dtype(np.complex64), np.dtype(np.complex128))


class Unsupported(Exception):
    """The trace cannot become a program (the message says why); fn then runs eagerly."""


class _Like:
    """What ``tape.new_node`` reads of a result: its shape and dtype."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = shape
        self.dtype = dtype


class CallRecord:
    """What a replayed call keeps for its backward: the arrays its tables address by
    ``id`` (alive as long as the nodes), and the call's arguments, to re-run fn for
    ``create_graph``."""

    __slots__ = ("keep", "args", "kwargs", "program", "before", "nodes", "versions")

    def __init__(self, keep, args, kwargs, program, before):
        self.keep = keep
        self.args = args
        self.kwargs = kwargs
        self.program = program
        self.before = before  # (see ``Program._before_writes``)
        self.nodes = {}  # output index -> a weak reference to its node (a create_graph re-run)
        self.versions = None  # of the tensors the call read (``Program.read_checks``)


class ReplayInputs(Op):
    """Node of a replayed call's differentiable tensors (see the module docstring)."""

    family = "replay"
    saves = ()

    def __init__(self, name, offsets, shapes):  # (not registered: one per program)
        self.name = name
        self.offsets = offsets
        self.shapes = shapes
        self.n_inputs = len(offsets)
        self.sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]

    def exec_spec(self, k, node):
        return ExecSpec(interpreter.slice_accumulate_driver, (),
                        (self.offsets[k], self.sizes[k]), ())

    def exec_set_spec(self, k, node):
        return ExecSpec(interpreter.slice_copy_driver, (), (self.offsets[k], self.sizes[k]), ())

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        start = self.offsets[k]
        part = grad_output.reshape(-1)[start:start + self.sizes[k]].reshape(grad_input.shape)
        zero = grad_input == 0  # (the part itself there, sign and all: ``add_part``)
        grad_input += part
        grad_input[zero] = part[zero]

    def rule(self, k, grad_output, inputs, output, attrs):
        joined = _JOINED.get(id(grad_output))
        if joined is not None and joined[0]() is grad_output:
            # One output's ``eager_gradient``: tensor k's own gradient from that eager run,
            # with its graph and no other's (a slice of the join would carry every part's:
            # a constant gradient would require grad, an unused input look used).
            return joined[1][k]
        start = self.offsets[k]
        part = call("getitem", grad_output, index=slice(start, start + self.sizes[k]))
        return call("reshape", part, shape=self.shapes[k])


class ReplayOutput(Op):
    """Node of one differentiable output of a replayed call (see the module docstring)."""

    family = "replay"
    n_inputs = 3
    differentiable = (True, False, False)
    saves = (0, 1, 2)

    stale = False

    def __init__(self, name, program, index, table, floats, ints):
        self.name = name
        self.program = program
        self.index = index
        self.table = table
        self.floats = floats
        self.ints = ints

    def exec_spec(self, k, node):
        return ExecSpec(interpreter.backward_driver,
                        (node.saved_inputs[1], self.table, self.floats), self.ints, ())

    def exec_set_spec(self, k, node):
        return ExecSpec(interpreter.backward_set_driver,
                        (node.saved_inputs[1], self.table, self.floats), self.ints, ())

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        g = np.ascontiguousarray(grad_output, dtype=self.program.dtype)
        ids = saved[1]
        operands = np.array([g.ctypes.data, ids.ctypes.data, self.table.ctypes.data,
                             self.floats.ctypes.data, grad_input.ctypes.data], dtype=np.int64)
        entry = _pointers.entry_address(interpreter.backward_driver, self.program.dtype)
        _pointers._call_once(entry, operands, np.array(self.ints + (0,), dtype=np.int64),
                             np.zeros(1))

    def rule(self, k, grad_output, inputs, output, attrs):
        record = inputs[2]._data[()]
        # (the ``ReplayInputs`` node's edges: the call's tensors and the outputs cut here)
        return self.program.eager_gradient(record, self.index, grad_output,
                                           inputs[0]._node.edges)


class _RecordedBackward(VJPStrategy):
    """A replayed output's backward run from its recorded table, without a plan."""

    def backward_alone(self, op, node, grad, targets, all_leaves, retain_graph):
        """The backward of a replayed output alone, when its gradient ends at the call's
        leaves: the table run by the machine's loop into a fresh gradient buffer (as the
        executor's row for this node runs it, ``ReplayOutput.exec_set_spec``), each leaf's
        gradient a copy of its part (as ``ReplayInputs``' row copies it): the same bits, without the
        plan cache's graph match. None (the engine plans it) where the inputs' node has a
        node among its edges (the gradient goes on), a target is not one of its leaves, a
        leaf comes twice, a node retains its gradient, or the seed is not a host array or
        number, or the output has no table (a stale one)."""
        if op.table is None:
            return None
        inputs_node = node.edges[0]
        edges = inputs_node.edges
        if node.retained or inputs_node.retained or type(grad) not in _HOST_SEEDS:
            return None
        node_type = tape.Node
        for edge in edges:
            if type(edge) is node_type:
                return None
        if len(edges) > 1 and len(set(map(id, edges))) != len(edges):
            return None
        wanted = range(len(edges)) if all_leaves else _positions(targets, edges)
        if wanted is None:
            return None  # (a target unused, or a node: the planner says which)
        node.check_saved()  # (the freed-graph and in-place errors, before anything runs)
        dtype = op.program.dtype
        g = np.ascontiguousarray(grad, dtype=dtype).reshape(node.shape)
        size = (op.ints[1] + op.ints[2]) // dtype.itemsize
        # Cleared whole where the executor's row clears the inputs' part only: the table
        # writes each scratch slot whole, or clears it, before it reads it (the same bits).
        buffer = np.zeros(size, dtype=dtype)
        ids = node.saved_inputs[1]
        n = len(ids)
        objects = np.empty(n + 2, dtype=np.int64)  # (the call's, the gradient, the buffer)
        objects[:n] = ids
        objects[n] = id(g)
        objects[n + 1] = id(buffer)
        interpreter.run(op.table, objects, op.floats)
        inputs_op = inputs_node.op
        whole = len(edges) == 1 and inputs_op.sizes[0] == size
        results = {}
        for k in wanted:
            start = inputs_op.offsets[k]
            part = buffer if whole else buffer[start:start + inputs_op.sizes[k]].copy()
            results[id(edges[k])] = part.reshape(inputs_op.shapes[k])
        if not retain_graph:
            node.free()
        return results, {id(edge): edge for edge in edges}


ReplayOutput.vjp_strategy = _RecordedBackward()


class _CallPlaces(executor.Places):
    """Where a replayed output's backward finds its buffers (:func:`.executor.lower`'s
    strategy): its intermediate gradients in the scratch of the call's gradient buffer
    (object ``_BUFFER``, after the inputs' parts), the incoming gradient (``_GRADIENT``), the
    results in their parts of the buffer, the saved arrays where the call keeps them
    (:meth:`Program.location`; one not met is a constant). ``_GRADIENT`` and ``_BUFFER``
    become the call's last two objects in :meth:`Program._finish`. ``reads``: the buffers the
    trace met that the table reads (``(kind, index)``)."""

    def __init__(self, program, trace, nodes, position, offsets, itemsize, total):
        self.builder = machine.Builder()
        self.program = program
        self.trace = trace
        self.nodes = nodes
        self.position = position
        self.offsets = offsets
        self.itemsize = itemsize
        self.scratch_base = total * itemsize
        self.arena_size = 0
        self.reads = set()
        self.places = {}  # (object, byte offset) -> value
        self.found = {}  # id of each saved array -> its value

    def _value(self, obj, offset):
        value = self.places.get((obj, offset))
        if value is None:
            value = self.places[obj, offset] = self.builder.value(obj, offset)
        return value

    def arena_bytes(self, n_bytes):
        self.arena_size = n_bytes // self.itemsize

    def arena(self, offset, stride):
        return self._value(_BUFFER, self.scratch_base + offset)

    def seed(self, index, array, stride):
        return self._value(_GRADIENT, 0)

    def result(self, edge, shape, stride):
        return self._value(_BUFFER, self.offsets[self.position[id(edge)]] * self.itemsize)

    def saved(self, arrays, origin):
        found = self.found
        values = []
        for array in arrays:
            value = found.get(id(array))
            if value is None:
                value = found[id(array)] = self._value(*self._place(array))
            values.append(value)
        return values

    def _place(self, array):
        """``(object, byte offset)`` of a saved array (each looked up once: many nodes save
        the same input)."""
        program = self.program
        found = self.trace.find(array)
        if found is None:
            if _saved_by(self.nodes, array):
                raise Unsupported("a saved buffer the recorder did not see made")
            # Worked out from the attributes (index maps): a constant.
            program.consts.append(array)
            return program.const_base + len(program.consts) - 1, 0
        buffer, offset = found
        self.reads.add((buffer.kind, buffer.index))
        return program.location(buffer, offset)


class Program:
    """A trace laid out as tables; :meth:`replay` runs it."""

    def __init__(self, trace, outputs, fn, externals_sources, n_flags=0):
        self.fn = fn
        self.n_inputs = len(trace.inputs)
        self.input_used = [t is not None for t in trace.inputs]
        self.externals = list(trace.externals)
        self.sources = externals_sources
        self.external_layouts = [(t._data.shape, t._data.dtype) for t in self.externals]
        self.const_base = 1 + self.n_inputs + len(self.externals)
        self.consts = list(trace.consts)
        self._arena(trace)
        self._arenas = []  # recent calls' arenas (see ``_take_arena``)
        self._arena_lock = threading.Lock()
        self.written = self._written(trace)
        # A call keeps the versions of the tensors it reads (``CallRecord.versions``: the
        # arguments used, then the outside tensors); a create_graph re-run reads those it
        # does not write again, so it checks them (``_check_unchanged``).
        read = [("input", i) for i in range(self.n_inputs) if self.input_used[i]]
        read += [("external", j) for j in range(len(self.externals))]
        self.read_checks = [(p, kind, index) for p, (kind, index) in enumerate(read)
                            if (kind, index) not in self.written]
        self.outputs = self._outputs(trace, outputs)
        self._backward(trace, outputs)
        # (after the backward: a fused forward writes to the arena only what is read later)
        self.forward_table, self.forward_floats = self._forward(trace)
        del self._output_buffers
        self._finish()
        self._flags(n_flags)

    def _flags(self, n_flags):
        """The last ``n_flags`` outputs are the guards' flags (:mod:`.guards`): laid out as
        outputs, read in the arena by ``replay``'s ``check``, never handed out."""
        n = len(self.outputs) - n_flags
        self.flag_offsets = [out[1] for out in self.outputs[n:]]
        if not n_flags:
            return
        del self.outputs[n:]
        for key, entry in self.backward_outputs.items():
            self.backward_outputs[key] = (*entry[:3], [m for m in entry[3] if m < n],
                                          *entry[4:])

    # -- layout ----------------------------------------------------------------------------

    def _arena(self, trace):
        # A place per value, each at the next multiple of _ALIGN (``_pack_arena`` shares
        # them later).
        buffers = trace.arena_buffers
        n_bytes = np.fromiter((b.array.nbytes for b in buffers), dtype=np.int64,
                              count=len(buffers))
        ends = np.cumsum(-(-n_bytes // _ALIGN) * _ALIGN)
        starts = ends - (-(-n_bytes // _ALIGN) * _ALIGN)
        self.arena_offsets = starts.tolist()
        self.arena_bytes = max(int(starts[-1] + n_bytes[-1]) if buffers else 0, 1)

    def location(self, buffer, offset):
        kind = buffer.kind
        if kind == "arena":
            return 0, self.arena_offsets[buffer.index] + offset
        if kind == "input":
            return 1 + buffer.index, offset
        if kind == "external":
            return 1 + self.n_inputs + buffer.index, offset
        return self.const_base + buffer.index, offset

    def _forward(self, trace):
        builder = machine.Builder()
        events, written = trace.events, set()
        read_after = self._kept(trace)
        if trace.writes:  # (only then: the fold is a pass over every event)
            events, written = fusion.fold_in_place_writes(events, read_after)
        items, readers = fusion.plan(events)
        self._pack_arena(trace, events, items, readers, read_after)
        value, numbers = _value_numbers(builder, self.location, trace.arena_buffers,
                                        self.arena_offsets)
        # (a folded write's target is read after the program: its values reach memory; and a
        # group of one op, a broadcast gathered, may be all the program: its result is kept)
        kept = read_after | written
        scratch_at = -(-self.arena_bytes // _ALIGN) * _ALIGN
        scratch_bytes = _forward_rows(builder, value, numbers, items, kept, readers,
                                      scratch_at)
        if scratch_bytes:
            self.arena_bytes = scratch_at + scratch_bytes
        return builder.tables()

    def _pack_arena(self, trace, events, items, readers, read_after):
        """Lay the arena out again, smaller: a value only the forward reads shares its place
        with values whose lives do not overlap its own (from the item of the forward table
        that makes it to the last that reads it; a fused group is one item, as it runs in
        blocks). The values read after the forward (``read_after``: by a backward table, as
        an output), written in place, or named by a backward run inside fn keep places of
        their own; a value no item names (one a fold wrote elsewhere) takes none. Then moves
        the places already laid into the backward tables and the outputs.

        ``ode_rollout``: 3.4 MB -> 0.4 MB, most of it the values its backward reads, so that
        a call's values stay in the cache (docs/benchmarking.rst, "Where a compiled step's
        time goes")."""
        buffers = trace.arena_buffers
        if not buffers:
            return
        pinned = read_after | set(trace.writes)
        for event in events:
            if event.op == "block":
                pinned.update(fusion._read_buffers(event))
        keep = np.zeros(len(buffers), dtype=bool)
        keep[[b.index for b in pinned if b.kind == "arena"]] = True
        raw_bytes = np.array([b.array.nbytes for b in buffers], dtype=np.int64)
        offsets, size = _shared_places(_lives(buffers, events, items, readers, keep),
                                       -(-raw_bytes // _ALIGN) * _ALIGN)
        old = np.array(self.arena_offsets, dtype=np.int64)
        self.arena_offsets = offsets
        self.unpacked_arena_bytes = self.arena_bytes  # (what a place per value would take)
        self.arena_bytes = max(size, 1)
        # The places laid before: old offset -> the buffer there (of those with bytes).
        sized = raw_bytes > 0
        starts = old[sized]
        moved = np.array(offsets, dtype=np.int64)[sized]

        def move(places):
            if not starts.size:  # (every value empty: no byte is read anywhere)
                return np.minimum(places, 0)
            at = np.searchsorted(starts, places, side="right") - 1
            return moved[at] + (places - starts[at])

        for out_index, out in enumerate(self.outputs):
            if out[0] == "arena":
                self.outputs[out_index] = (out[0], int(move(np.array([out[1]]))[0]), *out[2:])
        for entry in self.backward_outputs.values():
            table = entry[0].table
            if table is None:
                continue
            values = machine.sections(table).values
            arena = values[:, machine.OBJECT] == 0
            values[arena, machine.OFFSET] = move(values[arena, machine.OFFSET])

    def _kept(self, trace):
        """The arena buffers read from outside the forward table: by a backward table, or
        handed out as (part of) an output."""
        kept = set()
        for entry in self.backward_outputs.values():
            for kind, index in entry[2]:
                if kind == "arena":
                    kept.add(trace.arena_buffers[index])
        kept.update(self._output_buffers)
        return kept

    def _written(self, trace):
        """The argument and outside tensors written in place: their versions move per call."""
        written = []
        for buffer in trace.writes:
            if buffer.kind in ("input", "external") and (buffer.kind, buffer.index) not in written:
                written.append((buffer.kind, buffer.index))
        return written

    def _outputs(self, trace, outputs):
        """Per output leaf, how a replay makes it."""
        made = []
        self._output_buffers = []  # (read by ``_kept``, then dropped: they hold the arrays)
        first = {}  # id of each output tensor -> its first position
        for n, leaf in enumerate(outputs):
            if not isinstance(leaf, Tensor):
                made.append(("value", leaf))
            elif first.setdefault(id(leaf), n) != n:
                made.append(("same", first[id(leaf)]))  # (one tensor, handed out twice)
            else:
                made.append(self._tensor_output(trace, leaf))
        return made

    def _tensor_output(self, trace, leaf):
        """How a replay makes the output tensor ``leaf`` (met first at its place)."""
        data = leaf._data
        if type(data) is not np.ndarray:
            raise Unsupported("an output on a GPU")
        for i, t in enumerate(trace.inputs):
            if t is leaf:
                return ("input", i)
        index = trace.external_index.get(id(leaf))
        if index is not None:
            return ("external", index)
        found = trace.find(data)
        if found is None:
            if leaf._node is not None:
                raise Unsupported("an output this recorder did not see made")
            return ("fresh", data.copy(), leaf._requires_grad)
        buffer, offset = found
        self._output_buffers.append(buffer)
        if buffer.kind in ("input", "external") and leaf._node is None:
            # A view of an argument or outside tensor (``x.detach()``): a replay hands out a
            # view of that tensor's buffer with its version counter, as eager's shares them.
            return ("view", buffer.kind, buffer.index, offset, data.shape, data.strides,
                    leaf._requires_grad)
        if buffer.kind != "arena" or not data.flags.c_contiguous:
            raise Unsupported("an output that is a view of an argument")
        return ("arena", self.arena_offsets[buffer.index] + offset, data.shape, data.dtype,
                leaf)

    # -- backward --------------------------------------------------------------------------

    def _backward(self, trace, outputs):
        """Per differentiable output, its backward table (from the trace's eager graph)."""
        self.backward_outputs = {}
        differentiable = [(i, t) for i, t in enumerate(trace.inputs)
                          if t is not None and t.requires_grad]
        differentiable += [(len(trace.inputs) + j, t) for j, t in enumerate(self.externals)
                           if t.requires_grad]
        self.differentiable = [("input", i) if i < self.n_inputs
                               else ("external", i - self.n_inputs) for i, _ in differentiable]
        self.dtype = None
        # (in the order they were made: an output's node is made before those whose
        # gradients go through it, see ``_connect``)
        roots = sorted(((n, o) for n, o in enumerate(self.outputs)
                        if o[0] == "arena" and o[4]._node is not None),
                       key=lambda root: root[1][4]._node.seq)
        # (a table's part ``len(self.differentiable) + m`` is output ``output_roots[m]``'s)
        self.output_roots = [n for n, _ in roots]
        if not roots or not differentiable:
            return
        dtypes = {t.dtype for _, t in differentiable} | {o[3] for _, o in roots}
        if len(dtypes) != 1 or next(iter(dtypes)) not in _FLOATS:
            raise Unsupported("differentiable tensors of several dtypes")
        dtype = self.dtype = next(iter(dtypes))
        itemsize = dtype.itemsize
        edges = [t._node if t._node is not None else t for _, t in differentiable]
        # An output another output's gradient goes through is a cut of that one's table: its
        # gradient there is a part of the buffer, and its own node takes it on (eager's
        # ``grad(loss, h)`` and ``h.retain_grad()`` see it).
        cut_nodes = [o[4]._node for _, o in roots]
        sizes = [t._data.size for _, t in differentiable] + [o[4]._data.size for _, o in roots]
        shapes_of = [t.shape for _, t in differentiable] + [o[2] for _, o in roots]
        for n, out in roots:
            root = out[4]._node
            cuts = {id(node) for node in cut_nodes if node is not root}
            all_edges = edges + [node if node is not root else None for node in cut_nodes]
            try:
                nodes, table, floats, places, mine, offsets, total = self._output_backward(
                    root, all_edges, sizes, cuts, trace, dtype)
            except DerivativeNotImplemented as error:
                # Eager raises this only where a backward needs that gradient.
                raise Unsupported(
                    f"an input whose derivative is not implemented ({error})"
                ) from error
            except RuntimeError as error:
                # Its graph was freed inside fn (by a gradient taken there, as a training
                # step does), or a saved tensor was changed in place there: a backward
                # through it raises torch's error, freed graph or in-place change.
                # Its node keeps the edges to the tensors its graph reaches, as eager's does,
                # so that a gradient of them meets the node and raises, not "unused".
                op = ReplayOutput("replay_output", self, n, None, None, ())
                op.stale = str(error).startswith("one of the variables needed")
                _, reachable = backward_module.reach([root], cuts)
                mine = [k for k, edge in enumerate(all_edges) if id(edge) in reachable]
                mine = [k for k in mine
                        if next(j for j in mine if all_edges[j] is all_edges[k]) == k]
                offsets = np.cumsum([0] + [sizes[k] for k in mine])
                self.backward_outputs[n] = (op, {}, set(), mine, ReplayInputs(
                    "replay_inputs", offsets[:-1].tolist(), [shapes_of[k] for k in mine]),
                    _Like((1,), dtype), 0, 0)
                continue
            shapes = [shapes_of[k] for k in mine]
            inputs_op = ReplayInputs("replay_inputs", offsets, shapes)
            scratch = places.arena_size
            inputs_like = _Like((total + scratch,), dtype)
            op = ReplayOutput("replay_output", self, n, table, floats,
                              (0, total * itemsize, scratch * itemsize))
            if not any(node.needs_saved() for node in nodes):
                # Eager's graph here saves nothing (``x + y``, ``sum``): a backward frees
                # nothing and a second one runs, as eager's does (its table reads no saved
                # value; the node's own arrays stay until the graph goes).
                op.saves = ()
            self.backward_outputs[n] = (op, {}, places.reads, mine, inputs_op, inputs_like,
                                        total, scratch)

    def _output_backward(self, root, all_edges, sizes, cuts, trace, dtype):
        """The backward table of the output whose node is ``root`` to the edges
        ``all_edges`` (None: not this one's), lowered into the call's places
        (:class:`_CallPlaces`): ``(nodes, table, floats, places, mine, offsets, total)``,
        with the call's own nodes it runs, and the parts of the gradient buffer: the
        indices into ``all_edges`` of the edges it reaches, their offsets, and the total."""
        edges = [e for e in all_edges if e is not None]
        target_ids = {id(e) for e in edges}
        plan = backward_module.make_plan([root], edges, False, stop=cuts)
        # The recorded call's own nodes: the plan stops at fn's arguments.
        nodes = [node for node in plan.nodes if node.seq > trace.start_seq]
        needed = {id(node) for node in nodes} | (plan.needed & target_ids)
        plan = backward_module.Plan(nodes, plan.reachable, needed)
        seeds = [(root, np.zeros(root.shape, dtype=dtype))]
        try:
            steps = executor.plan_schedule(plan, seeds, target_ids, False)
        except executor.Unsupported as error:
            raise Unsupported(f"the backward of this output: {error or 'its compiled walk'}"
                              ) from error
        # The tensors this output's gradient reaches, in the program's order: its node's
        # edges (an argument it does not depend on stays unreachable, as in eager), then the
        # outputs it goes through.
        reached = {id(edge) for edge, _ in steps.results()}
        mine = [k for k, edge in enumerate(all_edges)
                if edge is not None and id(edge) in reached]
        first = {}
        for k in mine:
            first.setdefault(id(all_edges[k]), k)
        mine = [k for k in mine if first[id(all_edges[k])] == k]
        offsets, total = [], 0
        for k in mine:
            offsets.append(total)
            total += sizes[k]
        position = {id(all_edges[k]): j for j, k in enumerate(mine)}
        places = _CallPlaces(self, trace, nodes, position, offsets, dtype.itemsize, total)
        try:
            # (its results are places in the gradient buffer of the call's inputs, which the
            # table adds into)
            executor.lower(steps, seeds, places, dtype, add_to_results=True)
        except executor.Unsupported as error:
            raise Unsupported(f"the backward of this output: {error or 'its compiled walk'}"
                              ) from error
        table, floats = places.builder.tables()
        return nodes, table, floats, places, mine, offsets, total

    def _finish(self):
        """The call's object-id template (the constants' ids filled in), and the backward
        tables' gradient objects numbered after the constants."""
        n = self.const_base + len(self.consts)
        self._dummy = np.zeros(1)
        ids = [id(self._dummy)] * n
        for c, array in enumerate(self.consts):
            ids[self.const_base + c] = id(array)
        self.ids_template = np.array(ids, dtype=np.int64)
        self.n_objects = n
        # Per output, the argument and outside tensors its backward reads: their versions are
        # taken at each call (the arena and constants, which most reads are, have none).
        self.version_reads = {}
        for n_out, (op, attrs, reads, *rest) in list(self.backward_outputs.items()):
            self.version_reads[n_out] = tuple(
                (kind, index) for kind, index in reads if kind in ("input", "external"))
            table = op.table
            if table is None:
                self.backward_outputs[n_out] = (op, attrs, reads, [], *rest)
                continue
            objects = machine.sections(table).values[:, machine.OBJECT]
            objects[objects == _GRADIENT] = n
            objects[objects == _BUFFER] = n + 1
            op.ints = (n, *op.ints[1:])
            outputs_read = self._outputs_read(reads)
            self.backward_outputs[n_out] = (op, attrs, reads, outputs_read, *rest)

    def _outputs_read(self, reads):
        """Which outputs' buffers the backward reads (their versions are then checked)."""
        arena_read = {index for kind, index in reads if kind == "arena"}
        found = []
        for n, out in enumerate(self.outputs):
            if out[0] == "arena":
                start = out[1]
                for index in arena_read:
                    if self.arena_offsets[index] == start:
                        found.append(n)
                        break
        return found

    # -- replay ----------------------------------------------------------------------------

    def _take_arena(self):
        """An arena for a call: one of an earlier call's that nothing holds any more (no
        output, no node: only this program's list), else a new one. Reusing it saves the
        page faults of a large allocation on every call."""
        with self._arena_lock:
            arenas = self._arenas
            for i in range(len(arenas)):
                # (references: the list, and getrefcount's argument)
                if sys.getrefcount(arenas[i]) == 2:
                    arena = arenas.pop(i)
                    break
            else:
                arena = np.empty(self.arena_bytes, dtype=np.uint8)
            if len(self._arenas) >= _SPARE_ARENAS:
                self._arenas.pop(0)
            self._arenas.append(arena)
        return arena

    def replay(self, leaves, args, kwargs, check=None):
        """Run the forward on the call's tensors; the output leaves. ``check(arena)``, where
        given, runs after the table: if false (a guard saw another outcome), the call stops
        there and gives None, having changed nothing but the tensors it wrote in place."""
        arena = self._take_arena()
        ids = self.ids_template.copy()
        ids[0] = id(arena)
        keep = [arena]
        versions = []  # (see ``read_checks``)
        for i in range(self.n_inputs):
            if self.input_used[i]:
                t = leaves[i]
                data = t._data
                ids[1 + i] = id(data)
                keep.append(data)
                versions.append(t._version[0])
        base = 1 + self.n_inputs
        externals = self.externals
        for j, t in enumerate(externals):
            data = t._data
            ids[base + j] = id(data)
            keep.append(data)
            versions.append(t._version[0])
        connect = bool(self.backward_outputs) and tape._state.enabled
        before = self._before_writes(leaves) if connect and self.written else None
        interpreter.run(self.forward_table, ids, self.forward_floats)
        if check is not None and not check(arena):
            return None
        for kind, index in self.written:
            t = leaves[index] if kind == "input" else externals[index]
            t._version[0] += 1
        if self.written:
            tape.mutated()
        results, boxes = self._results(leaves, arena)
        if connect:
            self._connect(leaves, results, boxes, arena, ids, keep, args, kwargs, before,
                          versions)
        return results

    def _before_writes(self, leaves):
        """Copies of the tensors this call writes, as they were before it: a create_graph
        re-run of fn (``eager_gradient``) starts from them, as the call did, and writes them,
        not the caller's tensors."""
        return [(kind, index, self._written_tensor(leaves, kind, index)._data.copy())
                for kind, index in self.written]

    def _written_tensor(self, leaves, kind, index):
        return leaves[index] if kind == "input" else self.externals[index]

    def _results(self, leaves, arena):
        """The output leaves of a replay that wrote ``arena``, and per output the version box
        of a tensor made here (None for the others)."""
        externals = self.externals
        results = []
        boxes = []
        ndarray = np.ndarray
        for out in self.outputs:
            kind = out[0]
            if kind == "arena":
                _, offset, shape, dtype, _ = out
                # (one ndarray on the arena's memory: its base is the arena, as a slice's)
                made = _make(Tensor, ndarray(shape, dtype, arena, offset))
                results.append(made)
                boxes.append(made._version)
            elif kind == "value":
                results.append(out[1])
                boxes.append(None)
            elif kind == "input":
                results.append(leaves[out[1]])
                boxes.append(None)
            elif kind == "external":
                results.append(externals[out[1]])
                boxes.append(None)
            elif kind == "same":
                results.append(results[out[1]])
                boxes.append(None)
            elif kind == "view":
                results.append(_view_of(leaves[out[2]] if out[1] == "input"
                                        else externals[out[2]], *out[3:]))
                boxes.append(None)
            else:
                results.append(Tensor._make(out[1].copy(), requires_grad=out[2]))
                boxes.append(None)
        return results, boxes

    def _connect(self, leaves, results, boxes, arena, ids, keep, args, kwargs, before,
                 versions):
        """Give the differentiable outputs their nodes (see the module docstring)."""
        externals = self.externals
        differentiable = self.differentiable
        n_args = len(differentiable)
        holder = np.empty((), dtype=object)
        holder[()] = record = CallRecord(keep, args, kwargs, self, before)
        record.versions = versions
        saved = (arena, ids, holder)
        new_node = tape.new_node
        for n, entry in self.backward_outputs.items():
            op, attrs, _, outputs_read, mine, inputs_op, inputs_like = entry[:7]
            edges = []
            for k in mine:
                if k < n_args:
                    kind, index = differentiable[k]
                    t = leaves[index] if kind == "input" else externals[index]
                else:  # (an output this one's gradient goes through: connected before)
                    t = results[self.output_roots[k - n_args]]
                edge = t._node
                edges.append(edge if edge is not None else t)
            inputs_node = new_node(inputs_op, tuple(edges), _NO_ATTRS, (None,) * len(edges),
                                   None, (), inputs_like)
            versions = []
            for kind, index in self.version_reads[n]:
                box = (leaves if kind == "input" else externals)[index]._version
                versions += (box, box[0])
            for m in outputs_read:
                box = boxes[m]
                versions += (box, box[0])
            out = results[n]
            out._node = node = new_node(op, (inputs_node, None, None), attrs, saved, None,
                                        tuple(versions), out._data)
            record.nodes[n] = weakref.ref(node)
            if op.table is None:
                if op.stale:
                    node.versions = (_STALE, 0)
                else:
                    node.free()

    # -- create_graph ----------------------------------------------------------------------

    def _check_unchanged(self, record, leaves):
        """Raise torch's in-place error if a tensor the call read (and did not write) was
        changed in place since: a re-run would read the new values (eager's graph reads
        the saved ones)."""
        for p, kind, index in self.read_checks:
            t = leaves[index] if kind == "input" else self.externals[index]
            was = record.versions[p]
            if t._version[0] != was:
                what = (f"argument {index}" if kind == "input"
                        else f"outside tensor {index} (closure or global)")
                raise RuntimeError(_changed_message(what, t, was))

    def eager_gradient(self, record, index, grad_output, edges):
        """The gradient, recorded, of output ``index`` of the call ``record`` with respect to
        the call's differentiable tensors and the outputs its table stops at, laid out as
        ``ReplayInputs``' buffer (whose node's ``edges`` are given): fn runs eagerly again on
        the call's arguments."""
        leaves = flatten((record.args, record.kwargs))[0]
        self._check_unchanged(record, leaves)
        start = next(tape._sequence)
        with tape.grad_mode(True), _as_before(self, leaves, record.before) as roots:
            result = self.fn(*record.args, **record.kwargs)
            outs = flatten(result)[0]
            out = outs[index]
            entry = self.backward_outputs[index]
            mine, scratch = entry[4], entry[8]
            n_args = len(self.differentiable)
            tensors = []
            for k in mine:
                if k < n_args:
                    kind, i = self.differentiable[k]
                    tensors.append(leaves[i] if kind == "input" else self.externals[i])
                else:
                    tensors.append(outs[self.output_roots[k - n_args]])
            # The re-run's graph is joined to the call's outputs: where the table stops at
            # one (its node takes the gradient on, and a higher derivative through a value
            # saved there reaches it), and at this one (its saved output, ``tanh``'s).
            replayed = {id(tensors[j]._node): edges[j] for j, k in enumerate(mine)
                        if k >= n_args and tensors[j]._node is not None}
            if replayed:
                _join(out, replayed, start)
            twin = record.nodes.get(index)
            grads = _cut_gradient(out, [t if k < n_args else None
                                        for t, k in zip(tensors, mine)],
                                  [edges[j] for j in range(len(mine))], grad_output,
                                  {id(edge) for edge in replayed.values()},
                                  None if twin is None else twin())
            parts = [call("reshape", g, shape=(-1,)) for g in grads]
            if scratch:
                parts.append(np.zeros(scratch, dtype=self.dtype))
            joined = call("concatenate", *parts, axis=0)
            _remember_join(joined, grads)
            roots += [joined, *grads]
            return joined


def _view_of(source, offset, shape, strides, requires_grad):
    """A Tensor on ``source``'s buffer at ``offset`` with ``shape`` and ``strides``, sharing
    its version counter: its buffer itself where that is the whole of it (eager's
    ``detach()``)."""
    data = source._data
    if offset or data.shape != shape or data.strides != strides:
        data = np.ndarray(shape, data.dtype, data, offset, strides)
    return Tensor._make(data, requires_grad=requires_grad, version=source._version)


def _positions(targets, edges):
    """The position in ``edges`` of each target, or None where one is none of them."""
    positions = []
    for target in targets:
        for k, edge in enumerate(edges):
            if edge is target:
                positions.append(k)
                break
        else:
            return None
    return positions


def _join(out, replayed, start):
    """Point the edges of ``out``'s graph made after ``start`` (a create_graph re-run's)
    that go to a node whose ``id`` is a key of ``replayed`` at that node's replayed twin,
    the value."""
    stack, seen = [out._node], set()
    while stack:
        node = stack.pop()
        if (not isinstance(node, tape.Node) or node.seq <= start or id(node) in seen
                or id(node) in replayed):
            continue
        seen.add(id(node))
        edges = node.edges
        if any(e is not None and id(e) in replayed for e in edges):
            node.edges = tuple(replayed.get(id(e), e) if e is not None else None
                               for e in edges)
        stack.extend(e for e in edges if e is not None)


def _changed_message(what, t, was):
    return (
        "one of the variables needed for gradient computation has been modified by an "
        f"inplace operation: {what} of the compiled call, of shape {list(t.shape)}, is at "
        f"version {t._version[0]}; expected version {was} instead. A create_graph=True "
        "gradient through an output of anb.compile runs fn again on the tensors it read: take "
        "it before changing them in place, or call fn uncompiled."
    )


def _cut_gradient(out, tensors, edges, grad_output, cuts, twin):
    """``autograd.grad(out, ...)`` with ``create_graph=True`` to ``edges`` (zeros where
    unused, in the shape of ``tensors``' where given, else of the node), through a plan that
    does not walk past the nodes whose ``id`` is in ``cuts``. The first step, ``out``'s own
    rule, is taken here: its saved output is ``out``'s value as the replayed output ``twin``'s
    (a higher derivative through it reaches the replayed output, as eager's does)."""
    if not isinstance(grad_output, Tensor):
        grad_output = Tensor._make(np.asarray(grad_output))
    root = out._node
    inputs, output = backward_module.unpack_inputs(root)
    if output is not None and twin is not None:
        output = Tensor._make(root.saved_output, node=twin)
    seeds = {}
    for k, edge in enumerate(root.edges):
        if edge is None:
            continue
        part = root.op.rule(k, grad_output, inputs, output, root.attrs)
        if part.dtype != edge.dtype:
            part = part.astype(edge.dtype)
        if id(edge) in seeds:
            part = seeds[id(edge)][1] + part
        seeds[id(edge)] = (edge, part)
    seeds = list(seeds.values())
    plan = backward_module.make_plan([edge for edge, _ in seeds], edges, False, stop=cuts)
    # (without retain_graph the re-run's graph is freed, as the walk frees the call's: a
    # higher derivative through it then raises, as eager's through the freed graph does)
    results, _ = backward_module.run_plan(plan, seeds, {id(e) for e in edges}, False,
                                          backward_module.walk_retains(), True)
    grads = []
    for t, edge in zip(tensors, edges):
        value = results.get(id(edge))
        if value is None:
            like = t if t is not None else edge
            value = np.zeros(like.shape, dtype=like.dtype)
        grads.append(value if isinstance(value, Tensor) else Tensor._make(value))
    return grads


@contextlib.contextmanager
def _as_before(program, leaves, before):
    """The tensors a call wrote hold, while fn re-runs, fresh copies of their values before
    the call: the re-run sees what the call saw, and its writes land in the copies (a re-run
    writing the caller's tensors again would move a parameter a second step). Yields a list
    to put the re-run's results in: their graph's version marks of those tensors are moved
    back by the re-run's writes, which the caller's tensors did not see again."""
    roots = []
    if not before:
        yield roots
        return
    start = next(tape._sequence)
    swapped = []
    try:
        for kind, index, array in before:
            t = program._written_tensor(leaves, kind, index)
            if all(t is not other for other, _, _ in swapped):  # (an argument, also outside)
                swapped.append((t, t._data, t._version[0]))
                t._data = array.copy()
        yield roots
    finally:
        shifts = {}
        for t, data, version in swapped:
            shifts[id(t._version)] = t._version[0] - version
            t._data = data
            t._version[0] = version
        _shift_versions(roots, start, shifts)


def _shift_versions(roots, start, shifts):
    """Move back by ``shifts[id(box)]`` each version mark of a node made after ``start``
    reachable from the tensors ``roots``."""
    stack = [t._node for t in roots if isinstance(t, Tensor) and t._node is not None]
    seen = set()
    while stack:
        node = stack.pop()
        if not isinstance(node, tape.Node) or id(node) in seen or node.seq <= start:
            continue
        seen.add(id(node))
        versions = node.versions
        if versions:
            node.versions = tuple(
                v - shifts.get(id(versions[i - 1]), 0) if i % 2 else v
                for i, v in enumerate(versions))
        stack.extend(node.edges)


#: ``id`` of each join ``eager_gradient`` made, alive -> (a weak reference to it, the
#: gradients it joins): ``ReplayInputs.rule`` hands each tensor its own.
_JOINED = {}


def _remember_join(joined, grads):
    key = id(joined)
    _JOINED[key] = (weakref.ref(joined, lambda _, key=key: _JOINED.pop(key, None)), grads)


_NO_ATTRS = {}
_HOST_SEEDS = (np.ndarray, float, int)  # (``_RecordedBackward.backward_alone``'s seeds)
_STALE = {0: 1}  # (a version box one past the version a stale output's node expects)
_GRADIENT = -1
_BUFFER = -2


def _lives(buffers, events, items, readers, keep):
    """Per arena value, the item of the forward table that makes it and the last that names
    it (-1, -1: kept in a place of its own, ``keep``, or named by no item: no place); a value
    read but made by no item is kept (``keep`` is updated)."""
    made = np.full(len(buffers), -1, dtype=np.int64)  # the first event that makes each
    outputs = [e.output if e.output is not None or e.op == "block" else e.operands[1][0]
               for e in events]  # (a copy's output is its target)
    made_index = np.array([-1 if out is None or out.kind != "arena" else out.index
                           for out in outputs], dtype=np.int64)
    index, first_at = np.unique(made_index, return_index=True)
    made[index[index >= 0]] = first_at[index >= 0]
    read = np.array([readers.get(b, -1) for b in buffers], dtype=np.int64)
    keep |= (made < 0) & (read >= 0)
    counts = [len(item.steps) if type(item) is fusion.Group else 1 for item in items]
    item_of = np.repeat(np.arange(len(items), dtype=np.int64), counts)
    first = np.full(len(buffers), -1, dtype=np.int64)
    last = first.copy()
    shared = ~keep & (made >= 0)
    first[shared] = item_of[made[shared]]
    last[shared] = item_of[np.maximum(read[shared], made[shared])]
    return keep, first, last


def _shared_places(lives, n_bytes):
    """Byte offsets of the arena's values and the arena's size: the kept values first, a
    place each, then the others in item order, each taking a free place of its size (one
    freed by a value whose last item came before its first) or a new one."""
    keep, first, last = lives
    offsets = np.zeros(keep.size, dtype=np.int64)
    offsets[keep] = np.cumsum(n_bytes[keep]) - n_bytes[keep]
    size = int(n_bytes[keep].sum())
    shared = np.flatnonzero(first >= 0)
    # Takings and freeings in item order, the takings of an item before its freeings.
    order = np.lexsort((np.r_[np.zeros(shared.size), np.ones(shared.size)],
                        np.r_[first[shared], last[shared]]))
    sizes = n_bytes.tolist()
    places = offsets.tolist()
    free = {}  # bytes -> free places
    for j in np.r_[shared, ~shared][order].tolist():
        if j >= 0:
            spare = free.get(sizes[j])
            if spare:
                places[j] = spare.pop()
            else:
                places[j] = size
                size += sizes[j]
        else:
            free.setdefault(sizes[~j], []).append(places[~j])
    return places, size


def _value_numbers(builder, location, arena_buffers, arena_offsets):
    """``(value, numbers)``: ``value(buffer, offset)`` the number of the builder's value at
    that place (made on first use; one per place, however the buffer is named), and
    ``numbers`` a dict of each arena buffer's (as a whole) number. ``arena_offsets``: the
    arena's places, as ``location`` reads them.

    The arena's values are numbered at once (one per distinct place, in order of place):
    a 10,000-op program names them some 100,000 times, and a dict lookup inline is the
    cheapest way to name one."""
    places = builder.values
    distinct, number = np.unique(np.asarray(arena_offsets, dtype=np.int64),
                                 return_inverse=True)
    base = len(places) // machine.VALUE
    triples = np.zeros((distinct.size, machine.VALUE), dtype=np.int64)
    triples[:, machine.OFFSET] = distinct
    places.extend(triples.reshape(-1).tolist())
    values = {(0, int(offset)): base + j for j, offset in enumerate(distinct.tolist())}
    numbers = dict(zip(arena_buffers, (number.reshape(-1) + base).tolist()))

    def value(buffer, offset):
        if not offset:
            index = numbers.get(buffer)
            if index is not None:
                return index
        where = location(buffer, offset)
        index = values.get(where)
        if index is None:
            index = values[where] = builder.value(*where)
        if not offset:
            numbers[buffer] = index
        return index

    return value, numbers


def _forward_rows(builder, value, numbers, items, kept, readers, scratch_at):
    """Add the forward table's rows of ``items`` (:func:`fusion.plan`'s); the scratch bytes
    its groups need past ``scratch_at``. (A loop per recorded op: the usual one, an op on
    whole arena buffers, is its value numbers, from ``numbers``, and its row, with no
    call.)"""
    copy_entry = _pointers.entry_address(interpreter.copy_driver, np.dtype(np.float64))
    entries = {}  # (driver, dtype) -> the builder's entry number
    rows, operand_list, int_list = builder.rows, builder.operands, builder.ints
    scratch_bytes = 0
    for event in items:
        if type(event) is fusion.Group:
            n_bytes = _group_row(builder, value, event, kept, readers, scratch_at)
            scratch_bytes = max(scratch_bytes, n_bytes)
            continue
        if event.op == "block":  # a backward run inside fn (``Trace.record_backward``)
            _block_rows(builder, value, event)
            continue
        try:
            operands = [numbers[b] for b, o in event.operands if not o]
        except KeyError:  # (a buffer not numbered yet: an argument's, a constant's, ...)
            operands = None
        if operands is None or len(operands) != len(event.operands):
            operands = [value(b, o) for b, o in event.operands]
        if event.op is None:  # a copy (an in-place write, or a kept old value)
            builder.call(copy_entry, operands, (event.spec,))
            continue
        driver, ints, floats = event.spec
        output = numbers.get(event.output)
        operands.append(value(event.output, 0) if output is None else output)
        key = (driver, event.dtype)
        entry = entries.get(key)
        if entry is None:
            entry = entries[key] = builder.entry(_pointers.entry_address(*key))
        if type(ints) is not tuple or len(floats) or len(operands) > machine.MAX_OPERANDS:
            builder.call_entry(entry, operands, ints, floats)
            continue
        # (``builder.call_entry``, inline)
        rows.extend((entry, len(operands), len(operand_list), len(int_list),
                     len(builder.floats), machine.PER_ROW))
        operand_list.extend(operands)
        int_list.extend(ints)
    return scratch_bytes


def _block_rows(builder, value, event):
    """The rows of a backward table recorded inside fn (a ``"block"`` event: a
    :class:`~autograd_nb.engine.machine.Builder` whose objects are the trace's buffers),
    appended to the program's (its ZERO rows clear its gradient buffers before their first
    writers that add)."""
    block, buffers = event.operands
    values = block.values
    step = machine.VALUE
    builder.extend(block, [value(buffers[values[v]], values[v + machine.OFFSET])
                           for v in range(0, len(values), step)])


def _group_row(builder, value, group, kept, readers, scratch_at):
    """Add a fused group's instruction (:mod:`.fusion`): its memory operands, then the
    scratch at ``scratch_at`` in the arena; the scratch bytes it needs."""
    found = fusion.scaled_add(group, kept, readers)
    if found is not None:  # (a step of gradient descent: one loop, no scratch)
        a, s, b, subtract = found
        operands = [value(*a), value(*s), value(*b), value(group.steps[1].event.output, 0)]
        builder.call(_pointers.entry_address(fusion.scaled_add_driver, group.dtype), operands,
                     (group.n, int(subtract)), [])
        return 0
    operands = []
    numbers = {}

    def memory(buffer, offset):
        index = value(buffer, offset)
        number = numbers.get(index)
        if number is None:
            number = numbers[index] = len(operands)
            operands.append(index)
        return number

    ints, floats, n_bytes = fusion.encode(group, kept, readers, memory)
    ints[3] = len(operands)
    operands.append(builder.value(0, scratch_at))
    builder.call(_pointers.entry_address(fusion.group_driver, group.dtype), operands,
                 tuple(ints), floats)
    return n_bytes


def _saved_by(nodes, array):
    """Whether one of ``nodes`` saved ``array`` (an input or its output)."""
    for node in nodes:
        if node.saved_output is array or any(a is array for a in (node.saved_inputs or ())):
            return True
    return False


_make = Tensor.__dict__["_make"].__func__  # (``Tensor._make`` without the classmethod)
