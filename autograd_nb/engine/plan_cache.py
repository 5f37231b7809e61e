"""Backward plans cached by graph structure.

A training loop or a simulation records the same graph every step: only the arrays differ.
The first backwards of a structure plan it (:func:`autograd_nb.engine.make_plan`) and lower
it into a table (:mod:`.executor`; :mod:`.machine` runs it); from the second, the table is
kept in a :class:`Template`, and later backwards of the same structure skip both phases.
What is left per step is one pass over the graph that

* walks it in the template's order (each node is one edge of an earlier one) and checks that
  it *is* the template's structure: each node's op, attributes (the same dict, or an equal
  one), dtype and arity; each edge going to the same position, to the same leaf, or nowhere;
  no ``retain_grad`` anywhere;
* checks the saved buffers' versions (the in-place and freed-buffer errors fire from here,
  before anything runs, as from :func:`make_plan`);
* gathers the arrays the drivers read (saved values, the seeds, fresh result buffers);

then the same compiled call as an uncached backward, and the freeing of the saved buffers.
The walk, its checks, the gathering and the freeing run in compiled code that reads the nodes'
memory (:mod:`.graph_reader`, a few nanoseconds per node). Where that code cannot say the
graph is the template's (an attribute dict equal to the template's but another object, a
custom Function's node), or cannot run here, the same checks run in Python, without an object
made per node: each pass is a ``map`` into one list of the graph's length (the nodes, their
ops, their attributes, their saved arrays), compared or gathered at C level.

Anything that does not match falls through to the uncached path, which gives the same bits:
a template only ever replays what planning and table writing produced for an identical
graph. A structure that keeps changing under one key stops being remembered.
"""

import threading
from collections import deque
from itertools import chain, compress, repeat
from operator import attrgetter, eq, getitem, is_not, itemgetter

import numpy as np

from .. import config, layout, tape
from ..ops._parallel import parallel_allowed
from . import executor, fusion, graph_reader

_templates = {}  # key -> (Template, ...), most recent first
_misses = {}  # key -> uncached runs of that key
#: Held while ``_templates`` and ``_misses`` change. Threads may back-propagate graphs of one
#: structure at once: a key's tuple of templates is replaced, never changed, so that a run
#: reads a consistent one without the lock.
_lock = threading.Lock()

#: Counters for tests and benchmarks: backwards served from a template, those of them whose
#: graph was checked in compiled code (:mod:`.graph_reader`), and templates made.
stats = {"hits": 0, "compiled": 0, "made": 0}


def clear():
    """Forget every template (tests; a changed ``config`` does this implicitly by key)."""
    with _lock:
        _templates.clear()
        _misses.clear()


def key_of(root_edges, targets, all_leaves, batch=None):
    """The key under which templates of this request are kept; None when it is not cached
    (an output that is a leaf). A batched request (``batch`` rows) has keys of its own, and
    so has a forked child that may not start parallel regions (its fused loops: serial)."""
    node_type = tape.Node
    if len(root_edges) == 1:  # (the same key as below, without the list: ~0.5 us)
        edge = root_edges[0]
        if type(edge) is not node_type:
            return None
        return (all_leaves, len(targets), config.FUSE_BACKWARD, config.JOINT_VJPS,
                parallel_allowed(), batch, edge.op, edge.shape, edge.dtype)
    parts = [all_leaves, len(targets), config.FUSE_BACKWARD, config.JOINT_VJPS,
             parallel_allowed(), batch]
    for edge in root_edges:
        if type(edge) is not node_type:
            return None
        parts.append(edge.op)
        parts.append(edge.shape)
        parts.append(edge.dtype)
    return tuple(parts)


def run(key, root_edges, seeds, targets, retain_graph, allow_unused):
    """Run the backward from a template of ``key``; None when none matches (nothing ran).

    Returns ``(results, leaves)`` as :func:`autograd_nb.engine.run_plan`.
    """
    templates = _templates.get(key)
    if not templates:
        return None
    for template in templates:
        done = template.run(root_edges, seeds, targets, retain_graph, allow_unused)
        if done is not None:
            stats["hits"] += 1
            if template is not templates[0]:
                _move_to_front(key, template)
            return done
    return None


def _move_to_front(key, template):
    with _lock:
        kept = _templates.get(key)
        if kept and template in kept:  # (another thread may have dropped it meanwhile)
            _templates[key] = (template, *[t for t in kept if t is not template])


def wanted(key):
    """Count an uncached run of ``key``; whether the run should leave a template (the key's
    second uncached run on, up to ``config.PLAN_CACHE_MAX_MISSES``)."""
    with _lock:
        misses = _misses.get(key, 0) + 1
        _misses[key] = misses
    return 2 <= misses <= config.PLAN_CACHE_MAX_MISSES


def remember(plan, executed, key, root_edges, targets):
    """Keep the executor's run of ``plan`` (:class:`.executor.Executed`) as a template of
    ``key`` (of ``root_edges`` and the target edges ``targets``), before its saved buffers are
    freed."""
    template = Template.make(plan, executed.tables, executed.schedule.ran, root_edges, targets,
                             executed.leaves)
    if template is None:
        return
    with _lock:
        stats["made"] += 1
        kept = (template, *_templates.pop(key, ()))[:config.PLAN_CACHE_PER_KEY]
        if len(_templates) >= config.PLAN_CACHE_MAX_KEYS:
            del _templates[next(iter(_templates))]
        _templates[key] = kept


class _NotCached(Exception):
    """Raised while making a template of a graph the cache does not replay."""


class Template:
    """A planned and tabled backward, with what identifies its graph.

    Positions number the graph's nodes: the distinct outputs first, then every other node
    reached, each as edge ``k`` of an earlier position (``tree``). Leaves are numbered apart.
    """

    @classmethod
    def make(cls, plan, tables, ran, root_edges, targets, met):
        try:
            return cls(plan, tables, ran, root_edges, targets, met)
        except _NotCached:
            return None

    def __init__(self, plan, tables, ran, root_edges, targets, met):
        position, nodes = self._number_roots(root_edges)
        leaf_index, leaves, leaf_links = self._number_reached(nodes, position)
        for node in nodes:
            if node.retained:
                raise _NotCached  # retained gradients are filled from the plan's nodes
        self._leaf_lists(leaf_links, len(leaves))
        self.ops = [node.op for node in nodes]
        self.attrs = [node.attrs for node in nodes]
        # Positions of ops taking a sequence (their arity is not fixed) with their arity.
        self.variadic = [(p, len(node.edges)) for p, node in enumerate(nodes)
                         if node.op.n_inputs is None]
        self.dtype = tables.dtype
        self.batch = tables.batch
        self.dtypes = [node.dtype for node in nodes]
        self.leaf_shapes = [leaf.shape for leaf in leaves]
        self.needed = [position[id(node)] for node in plan.nodes]
        self.to_free = [position[id(node)] for node in ran if node.needs_saved()]
        self.targets = [_target_position(edge, position, leaf_index) for edge in targets]
        self.met = [leaf_index[key] for key in met]  # leaves given a gradient, in order
        self._objects(tables, position, leaf_index, nodes)
        self._gather_lists(tables)
        self.table = tables.table
        self.floats = tables.floats
        self.arena_size = tables.arena_size
        self._reader_arrays(len(leaves))

    def _number_roots(self, root_edges):
        """``(position, nodes)``: the distinct outputs' positions by ``id`` and the outputs in
        that order; sets ``root_positions``."""
        position = {}  # id(node) -> position
        nodes = []
        self.root_positions = []
        for edge in root_edges:
            if id(edge) not in position:
                position[id(edge)] = len(nodes)
                nodes.append(edge)
            self.root_positions.append(position[id(edge)])
        return position, nodes

    def _number_reached(self, nodes, position):
        """Extend ``nodes`` and ``position`` by every node reached from them; ``(leaf_index,
        leaves, leaf_links)`` likewise for the leaves. Sets ``tree``, ``links`` and
        ``nones``."""
        node_type = tape.Node
        leaf_index = {}
        leaves = []
        self.tree = []  # (parent position, edge index) of each non-root position
        self.links = []  # (position, edge index, position) of the other node edges
        self.nones = []  # (position, edge index) of edges that lead nowhere
        leaf_links = []  # (position, edge index, leaf index)
        i = 0
        while i < len(nodes):
            for k, edge in enumerate(nodes[i].edges):
                if edge is None:
                    self.nones.append((i, k))
                elif type(edge) is node_type:
                    j = position.get(id(edge))
                    if j is None:
                        position[id(edge)] = len(nodes)
                        nodes.append(edge)
                        self.tree.append((i, k))
                    else:
                        self.links.append((i, k, j))
                else:
                    j = leaf_index.get(id(edge))
                    if j is None:
                        j = leaf_index[id(edge)] = len(leaves)
                        leaves.append(edge)
                    leaf_links.append((i, k, j))
            i += 1
        return leaf_index, leaves, leaf_links

    def _leaf_lists(self, leaf_links, n_leaves):
        """Leaf edges as parallel lists (from position, edge index, leaf index), and the first
        edge of each leaf."""
        self.leaf_from = [i for i, _, _ in leaf_links]
        self.leaf_k = [k for _, k, _ in leaf_links]
        self.leaf_j = [j for _, _, j in leaf_links]
        first = {}
        for link, j in enumerate(self.leaf_j):
            first.setdefault(j, link)
        self.leaf_first = [first[j] for j in range(n_leaves)]

    def _objects(self, tables, position, leaf_index, nodes):
        """How to find each object of the tables in a matching graph."""
        node_type = tape.Node
        self.objects = []  # per object: the array itself when constant, else None
        self.saved = []  # (object, position, saved index or -1 for the output)
        self.seeds = []  # (object, seed index)
        self.results = []  # (object, position or -2 - leaf index, shape)
        group_operands = None  # the current fused group's operands, in its spec's order
        for j, (array, origin) in enumerate(zip(tables.objects, tables.origins, strict=True)):
            self.objects.append(None)
            if type(origin) is fusion.Group:
                if group_operands is None or group_operands[0] is not origin:
                    group_operands = (origin, iter(_group_operands(origin)))
                node, index = next(group_operands[1])
                self.saved.append((j, position[id(node)], index))
                continue
            if type(origin) is tuple:
                kind, what = origin
                if kind == "arena":
                    continue  # (made per run: ``executor.run_tables``)
                if kind == "seed":
                    self.seeds.append((j, what))
                elif type(what) is node_type:
                    self.results.append((j, position[id(what)], array.shape))
                else:
                    self.results.append((j, -2 - leaf_index[id(what)], array.shape))
                continue
            found = _find_saved(array, origin, position)
            if found is None:
                # Not a saved buffer: derived from the attributes (index maps), which a
                # matching graph has equal: keep this very array.
                self.objects[j] = array
            else:
                self.saved.append((j, *found))

    def _gather_lists(self, tables):
        """Index arrays for :meth:`run`'s C-level gathering of the saved buffers."""
        ids = [0 if array is None else id(array) for array in self.objects]
        self.object_ids = np.array(ids, dtype=np.int64)
        # The constant operands themselves, kept alive for ``object_ids``.
        self.constants = [array for array in self.objects if array is not None]
        inputs = [(j, p, k) for j, p, k in self.saved if k >= 0]
        outputs = [(j, p) for j, p, k in self.saved if k < 0]
        self.input_objects = np.array([j for j, _, _ in inputs], dtype=np.intp)
        self.input_nodes = [p for _, p, _ in inputs]
        self.input_indices = [k for _, _, k in inputs]
        self.output_objects = np.array([j for j, _ in outputs], dtype=np.intp)
        self.output_nodes = [p for _, p in outputs]
        # Result buffers: their objects, shapes, and where their node or leaf sits.
        self.result_objects = np.array([j for j, _, _ in self.results], dtype=np.intp)
        self.result_shapes = [shape for _, _, shape in self.results]
        self.result_object = self.results[0][0] if len(self.results) == 1 else None
        self.result_nodes = [(where >= 0, where if where >= 0 else -2 - where)
                             for _, where, _ in self.results]
        del self.objects, self.saved, self.results

    def _reader_arrays(self, n_leaves):
        """The template as the flat int64 arrays of :func:`graph_reader.match` and
        :func:`graph_reader.gather` (``self.reader`` None where they do not run here)."""
        self.reader = graph_reader.found_layout()
        if self.reader is None:
            return

        def flat(rows):
            return np.array([v for row in rows for v in row], dtype=np.int64)

        def ids(objects):
            return np.fromiter(map(id, objects), np.int64, len(objects))

        self.n_nodes = len(self.ops)
        self.c_match = graph_reader.pack(
            flat(self.tree), ids(self.ops), ids(self.dtypes), ids(self.attrs),
            flat(self.variadic), flat(self.links), flat(self.nones),
            flat(zip(self.leaf_from, self.leaf_k, self.leaf_j)),
        )
        self.n_leaves = n_leaves
        self.first_leaf_edges = [(self.leaf_from[link], self.leaf_k[link])
                                 for link in self.leaf_first]
        self.c_input_nodes = np.array(self.input_nodes, dtype=np.int64)
        self.c_input_indices = np.array(self.input_indices, dtype=np.int64)
        self.c_output_nodes = np.array(self.output_nodes, dtype=np.int64)
        self.c_saved_objects = np.concatenate(
            [self.input_objects, self.output_objects]).astype(np.int64)
        self.c_to_free = np.array(self.to_free, dtype=np.int64)
        self.c_gather = graph_reader.pack(self.c_input_nodes, self.c_input_indices,
                                          self.c_output_nodes, self.c_saved_objects)

    def _match_compiled(self, root_edges):
        """``(nodes, leaves, addresses, oldest)`` as :meth:`_match` and :meth:`_match_leaves`
        find them, from :func:`graph_reader.match`; None where it could not verify the graph
        (the Python checks then decide). ``oldest`` is None where ints are not read."""
        if len(root_edges) == 1 and self.root_positions == _ONE_ROOT:
            distinct = root_edges
        else:
            distinct = self._distinct_roots(root_edges)
            if distinct is None:
                return None
        # One array for what ``match`` finds: the nodes (from the outputs, written here), the
        # leaves, the oldest seq. The nodes' part is the addresses ``gather`` and ``free`` read.
        n_nodes = self.n_nodes
        found = np.empty(n_nodes + self.n_leaves + 1, dtype=np.int64)
        for r, edge in enumerate(distinct):
            found[r] = id(edge)
        if not graph_reader.match_packed(len(distinct), self.c_match, self.reader, found):
            return None
        if n_nodes == len(distinct):
            # Only the outputs (one op, most often): the leaves read off their edges, which
            # the check found to be tensors (each ``objects_at`` costs ~0.5 us).
            nodes = list(distinct)
            leaves = [nodes[i].edges[k] for i, k in self.first_leaf_edges]
        else:
            objects = layout.objects_at(found, n_nodes + self.n_leaves)
            nodes, leaves = objects[:n_nodes], objects[n_nodes:]
        if not self._leaf_data_match(leaves):
            return None
        oldest = found[-1].item()
        return nodes, leaves, found, None if oldest < 0 else oldest

    def run(self, root_edges, seeds, targets, retain_graph, allow_unused):
        found = (self.reader is not None and self._match_compiled(root_edges)
                 or self._match_python(root_edges))  # compiled, else the Python checks
        if found is None:
            return None
        nodes, leaves, addresses, oldest = found
        if not self._match_targets(nodes, leaves, targets, allow_unused):
            return None
        if not _unretained_and_current(nodes, oldest, self.needed):
            return None
        for _, grad in seeds:
            if type(grad) is not np.ndarray and type(grad) is not float and type(grad) is not int:
                return None
        results = self._gather_and_run(nodes, leaves, seeds, addresses)
        if not retain_graph and self.to_free:
            self._free(nodes, root_edges, addresses)
        if addresses is not None:
            stats["compiled"] += 1
        if len(self.met) == 1:
            leaf = leaves[self.met[0]]
            return results, {id(leaf): leaf}
        met = list(map(leaves.__getitem__, self.met))
        return results, dict(zip(map(id, met), met))

    def _gather_and_run(self, nodes, leaves, seeds, addresses):
        """Gather the saved buffers into the tables' objects and run them; the results as
        :meth:`_results`. ``addresses``: the nodes' as :meth:`_match_compiled` found them, or
        None."""
        ids = self.object_ids.copy()
        # The saved buffers: compiled (holding a reference to each until the run is over), or
        # by C-level maps (no Python per node).
        held = addresses is not None and graph_reader.gather_packed(
            addresses, self.c_gather, ids, self.reader)
        if not held:
            inputs = list(map(getitem, map(_saved_inputs, map(nodes.__getitem__,
                                                                 self.input_nodes)),
                              self.input_indices))
            ids[self.input_objects] = np.fromiter(map(id, inputs), np.int64, len(inputs))
            outputs = list(map(_saved_output, map(nodes.__getitem__, self.output_nodes)))
            ids[self.output_objects] = np.fromiter(map(id, outputs), np.int64, len(outputs))
        try:
            return self._run_tables(nodes, leaves, seeds, ids, self.dtype)
        finally:
            if held:
                graph_reader.release(ids, self.c_saved_objects)

    def _match_python(self, root_edges):
        """``(nodes, leaves, None, None)`` as :meth:`_match_compiled` finds them, by the
        Python checks; None where the graph is not the template's."""
        nodes = self._match(root_edges)
        if nodes is None:
            return None
        leaves = self._match_leaves(nodes)
        if leaves is None:
            return None
        return nodes, leaves, None, None

    def _free(self, nodes, root_edges, addresses):
        """Free the saved buffers of the nodes that have them, as ``Node.free``."""
        # Every node of a graph is older than its outputs (edges lead to earlier nodes), so
        # the outputs' seq bounds the newest freed node's: a mark at most that late. Marked
        # before freeing, and flagged before the buffers go (as ``Node.free``): a free cut
        # short (a KeyboardInterrupt) leaves nodes that raise the freed-graph error.
        tape.raise_mark(1, max(map(_seq, root_edges)))
        if addresses is not None:
            graph_reader.free(addresses, self.c_to_free, self.reader)
            return
        freed = list(map(nodes.__getitem__, self.to_free))
        n = len(freed)
        deque(map(setattr, freed, repeat("freed", n), repeat(True, n)), 0)
        deque(map(setattr, freed, repeat("saved_inputs", n), repeat(None, n)), 0)
        deque(map(setattr, freed, repeat("saved_output", n), repeat(None, n)), 0)

    def _run_tables(self, nodes, leaves, seeds, ids, dtype):
        """Add the seeds and fresh result buffers to ``ids`` and run the tables; the results
        as :meth:`_results`."""
        batch = self.batch
        lead = () if batch is None else (batch,)
        kept = []
        for j, s in self.seeds:
            edge, grad = seeds[s]
            # Only read (added into the output's slot): the caller's array itself where it is
            # C-contiguous and of the plan's dtype, else a converted copy.
            seed = np.ascontiguousarray(grad, dtype=dtype)
            shape = lead + edge.shape
            if seed.shape != shape:
                seed = seed.reshape(shape)
            kept.append(seed)
            ids[j] = id(seed)
        results = self._results(nodes, leaves, ids, dtype)
        if batch is None:
            executor.run_tables(self.table, ids, self.floats, self.arena_size, dtype)
        else:
            executor.run_batched_tables(self.table, ids, self.floats, self.arena_size, dtype,
                                        batch)
        return results

    def _results(self, nodes, leaves, ids, dtype):
        """Fresh result buffers by ``id`` of their node or leaf (their ids in ``ids``), left to
        the tables to clear or write whole (``executor.Lowering.first_write``)."""
        if len(self.result_shapes) == 1:  # (one target: the maps below cost ~1 us more)
            array = executor.uninitialised(self.result_shapes[0], dtype)
            ids[self.result_object] = id(array)
            is_node, i = self.result_nodes[0]
            return {id(nodes[i] if is_node else leaves[i]): array}
        arrays = list(map(executor.uninitialised, self.result_shapes,
                          repeat(dtype, len(self.result_shapes))))
        ids[self.result_objects] = np.fromiter(map(id, arrays), np.int64, len(arrays))
        owners = [nodes[i] if is_node else leaves[i] for is_node, i in self.result_nodes]
        return dict(zip(map(id, owners), arrays))

    def _distinct_roots(self, root_edges):
        """The outputs' nodes at the template's first positions (an output given twice where
        the template had it twice), or None."""
        distinct = []
        positions = self.root_positions
        if len(root_edges) != len(positions):
            return None
        for edge, p in zip(root_edges, positions):
            if p == len(distinct):
                distinct.append(edge)
            elif distinct[p] is not edge:
                return None
        return distinct

    def _match(self, root_edges):
        """The graph's nodes by position, or None if its structure is not the template's."""
        nodes = self._distinct_roots(root_edges)
        if nodes is None:
            return None
        append = nodes.append
        try:
            for p, k in self.tree:
                append(nodes[p].edges[k])
        except (IndexError, AttributeError):
            return None
        # Node by node, in C-level maps: the op, dtype and arity. Only nodes
        # have an ``op``: a leaf or None where the template has a node fails here.
        try:
            if list(map(_op, nodes)) != self.ops:
                return None
        except AttributeError:
            return None
        if list(map(_dtype, nodes)) != self.dtypes:
            return None
        for p, arity in self.variadic:  # the other ops' arity is fixed
            if len(nodes[p].edges) != arity:
                return None
        attrs = list(map(_attrs, nodes))
        if not (_all_identical(attrs, self.attrs) or self._equal_attrs(attrs)):
            return None
        return nodes if self._same_edges(nodes) else None

    def _equal_attrs(self, attrs):
        """Whether the attribute dicts that are not the template's very objects equal them."""
        for i in compress(range(len(attrs)), map(is_not, attrs, self.attrs)):
            if not _same_attrs(attrs[i], self.attrs[i]):
                return False
        return True

    def _same_edges(self, nodes):
        """Whether the edges off the tree lead where the template's do (an earlier position,
        or nowhere)."""
        for i, k, j in self.links:
            if nodes[i].edges[k] is not nodes[j]:
                return False
        for i, k in self.nones:
            if nodes[i].edges[k] is not None:
                return False
        return True

    def _match_leaves(self, nodes):
        """The graph's leaves by index, or None if they are not the template's (a node or
        None where it has a leaf, one leaf where it has two, another dtype or shape)."""
        edges = list(map(getitem, map(_edges, map(nodes.__getitem__, self.leaf_from)),
                         self.leaf_k))
        leaves = list(map(edges.__getitem__, self.leaf_first))
        if not _all_identical(edges, list(map(leaves.__getitem__, self.leaf_j))):
            return None
        if len(set(map(id, leaves))) != len(leaves):  # two of the template's are one here
            return None
        return leaves if self._leaf_data_match(leaves) else None

    def _leaf_data_match(self, leaves):
        """Whether the leaves' buffers have the template's shapes and dtype."""
        dtype = self.dtype
        if len(leaves) == 1:  # (most small graphs: the maps below cost ~0.5 us more)
            data = getattr(leaves[0], "_data", None)  # only tensors have it
            return (data is not None and data.shape == self.leaf_shapes[0]
                    and data.dtype == dtype)
        try:
            data = list(map(_data, leaves))
        except AttributeError:
            return False
        return list(map(_shape, data)) == self.leaf_shapes and all(
            map(eq, map(_dtype, data), repeat(dtype, len(data))))

    def _match_targets(self, nodes, leaves, targets, allow_unused):
        if len(targets) != len(self.targets):
            return False
        for edge, where in zip(targets, self.targets):
            if where is None:
                continue  # unreachable in the template: checked below
            if where >= 0:
                # A node target must be at its position only: a graph may merge two of the
                # template's nodes into one (its gradients are the same), not a target.
                if nodes[where] is not edge or nodes.count(edge) != 1:
                    return False
            elif leaves[-2 - where] is not edge:
                return False
        return None not in self.targets or self._unused_unreached(nodes, leaves, targets,
                                                                    allow_unused)

    def _unused_unreached(self, nodes, leaves, targets, allow_unused):
        """Whether the targets the template does not reach are not reached here either."""
        if not allow_unused:
            return False  # the uncached path raises the unused-input error
        reached = None
        node_type = tape.Node
        for edge, where in zip(targets, self.targets):
            if where is not None:
                continue
            if type(edge) is node_type:
                if edge in nodes:
                    return False
                continue
            if reached is None:
                reached = set(map(id, leaves))  # every leaf edge is in the template
            if id(edge) in reached:
                return False
        return True


_op = attrgetter("op")
_attrs = attrgetter("attrs")
_dtype = attrgetter("dtype")
_edges = attrgetter("edges")
_retained = attrgetter("retained")
_freed = attrgetter("freed")
_seq = attrgetter("seq")
_data = attrgetter("_data")
_shape = attrgetter("shape")
_versions = attrgetter("versions")
_saved_inputs = attrgetter("saved_inputs")
_saved_output = attrgetter("saved_output")
_first = itemgetter(0)
_ONE_ROOT = [0]


def _unretained_and_current(nodes, oldest, needed):
    """False where a node of ``nodes`` has ``retain_grad()``; raises as :func:`make_plan` where
    a saved buffer the plan needs (positions ``needed``) was freed or changed in place.
    ``oldest``: the nodes' smallest ``seq``, or None (read here)."""
    # No retain_grad(): certain when every node is newer than the newest node that got one
    # (the usual case), else read off each node.
    if oldest is None:
        oldest = min(map(_seq, nodes))
    if oldest <= tape.marks[2] and any(map(_retained, nodes)):
        return False
    # None of the saved buffers may be stale when every node is newer than the last in-place
    # change and than every freed node (the common case). Otherwise each node's flags and
    # versions are read: all the graph's nodes, a superset of those the plan needs.
    mutated, freed, _ = tape.marks
    if oldest > mutated and oldest > freed:
        return True
    if any(map(_freed, nodes)) or not _versions_current(nodes):
        for p in needed:  # as make_plan: the first stale node in plan order raises
            nodes[p].check_saved()
    return True


def _versions_current(nodes):
    """Whether every saved buffer of ``nodes`` still has the version it was saved at."""
    flat = list(chain.from_iterable(map(_versions, nodes)))  # box, version, box, ...
    return all(map(eq, map(_first, flat[0::2]), flat[1::2]))


def _all_identical(a, b):
    """Whether the lists hold the very same objects (C-level; False when unsure)."""
    return sum(map(is_not, a, b)) == 0


def _group_operands(group):
    """``(node, saved index)`` of each operand of a fused group's driver, in the order of
    :meth:`autograd_nb.engine.fusion.Group.spec`."""
    for node, k in zip(group.nodes, group.positions, strict=True):
        used, _, reads_y = node.op.vjp_reads(k)
        for i in used:
            yield node, i
        if reads_y:
            yield node, -1


def _find_saved(array, node, position):
    """``(position, saved index)`` (-1: the output) of ``array`` among ``node``'s saved
    buffers; None if it is none of them."""
    candidates = []
    if node.saved_inputs is not None:
        candidates = [k for k, saved in enumerate(node.saved_inputs) if saved is array]
    if node.saved_output is array:
        candidates.append(-1)
    if not candidates:
        return None
    if len(candidates) > 1:
        # One buffer saved twice is fine when both came from one tensor (x * x), not when
        # one of them is a constant that happens to be that buffer this time.
        first = node.edges[candidates[0]] if candidates[0] >= 0 else None
        if first is None or any(k < 0 or node.edges[k] is not first for k in candidates):
            raise _NotCached
    return position[id(node)], candidates[0]


def _target_position(edge, position, leaf_index):
    """Where target ``edge`` sits in a template: its position, ``-2 - leaf index``, or None
    where it is not reached (allow_unused)."""
    if id(edge) in position:
        return position[id(edge)]
    if id(edge) in leaf_index:
        return -2 - leaf_index[id(edge)]
    return None


def _same_attrs(a, b):
    """Whether two attribute dicts are equal (their ops then read the same ints and floats)."""
    if a.keys() != b.keys():
        return False
    for name, value in a.items():
        if name == "exec":
            continue  # a per-shape cache of the executor's, filled on demand
        if not _same_value(value, b[name]):
            return False
    return True


def _same_value(a, b):
    """Whether two attribute values are equal: of the same types, arrays of the same dtype,
    shape and contents, tuples and lists item by item, other objects by their ``==``."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is np.ndarray:
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    if kind is tuple or kind is list:
        return len(a) == len(b) and all(map(_same_value, a, b))
    if kind is slice:
        return _same_value((a.start, a.stop, a.step), (b.start, b.stop, b.step))
    try:
        return bool(a == b)
    except (ValueError, TypeError):
        return False
