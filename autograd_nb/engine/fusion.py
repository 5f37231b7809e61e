"""Fusion: a chain of elementwise VJPs over one buffer shape runs as one loop over memory.

In a chain ``y = f20(...f2(f1(x)))`` of elementwise ops, the unfused backward runs 20 VJP
kernels, each reading the incoming gradient, the saved values and writing a gradient buffer:
60 passes over memory. A fused group computes, per element, the whole chain of derivative
formulas in registers: it reads each saved value once and writes the target once. Each
stage's value is rounded to the gradient's dtype before the next stage reads it, as a node's
own VJP kernel stores it into a gradient buffer (numba computes ``g * (1 - y * y)`` of
float32 operands in float64): a fused chain gives the unfused bits, so neither the chain
length, ``config.FUSION_MIN_ELEMENTS`` nor tier 0's unfused NumPy walk
(:mod:`autograd_nb.tiering`) changes a gradient. (The rounding still vectorises: a float32
chain of 18 nodes over 10**6 elements took as long as without it, docs/compiled-backward.rst.)

A chain of complex values fuses too (``groups(..., complex_values=True)``, the CPU executor's):
each stage is the op's complex kernel's formula, ``conj(vjp(conj(g)))``
(:func:`fused_complex_source`), rounded to the gradient's complex type as its kernel stores
it, so the bits are again the unfused ones.

A *group* is a run of nodes ``n1 -> n2 -> ... -> nm`` in backward order where every ``ni``
is an :class:`~autograd_nb.ops.elementwise.ElementwiseOp` whose gradient flows to exactly
one input (the next node of the chain, or for ``nm`` the group's target), every operand its
VJP reads has the output's shape or one element (a broadcast scalar), and every intermediate
node has no other consumer in the plan and is not asked for (a target, ``retain_grad``).
Groups are made only for buffers of at least ``config.FUSION_MIN_ELEMENTS`` elements: below
that a VJP's cost is the call, not memory, and each distinct chain would be one more kernel
to compile.

The loop of a group is generated from the ops' formulas, written to the kernel folder under
a name hashing its source (so a chain seen once is cached on disk and compiled once), and
split over the cores with ``prange`` from ``config.PARALLEL_MIN_ELEMENTS`` elements. It is a
driver of the compiled executor like any op's.
"""


from numba.np.ufunc.parallel import _launch_threads

from .. import config, tape
from ..ops import _kernels, _pointers
from ..ops._parallel import use_threads
from ..ops.elementwise import COMPLEX_IMPORTS, ElementwiseOp
from ..ops.registry import ExecSpec

#: And at most this many operand arrays: a size limit of the fused loop, below the one cap on
#: a row's operands (``machine.MAX_OPERANDS``, with the gradient and the target).
MAX_OPERANDS = 48


class Group:
    """One fused chain: ``nodes`` in backward order (``nodes[0]`` is the head, whose gradient
    slot feeds the loop), ``edges`` the input position followed at each node, and
    ``target`` the edge that receives the result."""

    __slots__ = ("nodes", "positions", "target", "kinds", "_module")

    def __init__(self, nodes, positions, kinds):
        self.nodes = nodes
        self.positions = positions
        self.kinds = kinds
        self.target = nodes[-1].edges[positions[-1]]
        self._module = None

    @property
    def head(self):
        return self.nodes[0]

    def spec(self, parallel=None):
        """``(driver, saved, ints, floats)`` for the executor (see ``Op.exec_spec``); the loop
        is split over the cores from ``config.PARALLEL_MIN_ELEMENTS`` elements where this
        process may start threads (``ops._parallel.use_threads``), unless ``parallel`` says
        otherwise."""
        operands = []
        floats = []
        for node, k in zip(self.nodes, self.positions, strict=True):
            used, _, reads_y = node.op.vjp_reads(k)
            operands += [node.saved_inputs[i] for i in used]
            if reads_y:
                operands.append(node.saved_output)
            floats.extend(node.attrs["params"])
        n = _size(self.head.shape)
        if parallel is None:
            parallel = use_threads(n)
        return ExecSpec(self.driver(parallel), operands, (n,), floats)

    def driver(self, parallel):
        """The fused loop's driver, split over the cores or not."""
        module = self.module()
        return module.driver_parallel if parallel else module.driver

    def module(self):
        """The generated module of this chain (one per distinct chain, cached)."""
        if self._module is None:
            stages = tuple(
                (node.op, k, kinds)
                for node, k, kinds in zip(self.nodes, self.positions, self.kinds, strict=True)
            )
            in_complex = self.head.dtype.kind == "c"
            module = _modules.get((stages, in_complex))
            if module is None:
                # The loop may run in parallel; its C entry is loaded from numba's cache as
                # plain machine code, which needs the threading layer's symbols
                # (allocate_sched, ...) registered: numba does that only for its dispatchers.
                _launch_threads()
                if in_complex:
                    module = _kernels.load_module("fused_complex",
                                                  fused_complex_source(stages))
                    _pointers.serves_complex(module.driver)
                    _pointers.serves_complex(module.driver_parallel)
                else:
                    module = _kernels.load_module("fused", fused_source(stages))
                if len(_modules) > 1024:
                    _modules.clear()
                _modules[(stages, in_complex)] = module
            self._module = module
        return self._module


#: Fused modules by chain (ops, input positions, operand kinds): a program repeats its chains,
#: and writing and hashing the source each time would cost more than the loop.
_modules = {}


def _size(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _is_complex(node):
    """Whether ``node`` computed in complex: the fused kernels come from the real formulas."""
    return node.dtype.kind == "c" or any(
        a is not None and a.dtype.kind == "c" for a in node.saved_inputs or ()
    )


def _link(node, needed, targets, all_leaves, complex_values=False):
    """The one input position through which ``node``'s gradient flows, and the kinds
    ("full"/"scalar", then " real" for a real operand of a complex node) of the operands its
    VJP reads; None if the node cannot be fused. A complex node fuses only with
    ``complex_values`` (the compiled executor's chains, on the CPU), where its complex VJP
    runs a compiled kernel (``ElementwiseOp.fuses_complex``)."""
    op = node.op
    if not isinstance(op, ElementwiseOp) or op.input_kinds is not None:
        return None
    in_complex = _is_complex(node)
    if in_complex and not (complex_values and node.dtype.kind == "c"):
        return None
    attrs = node.attrs
    shape = attrs["shape"]
    position = None
    for k, edge in enumerate(node.edges):
        if isinstance(edge, tape.Node):
            wanted = id(edge) in needed
        else:
            wanted = edge is not None and (all_leaves or id(edge) in targets)
        if wanted:
            if position is not None:
                return None
            position = k
    if position is None or attrs["shapes"][position] != shape:
        return None
    if in_complex and not op.fuses_complex(position, node):
        return None
    kinds = _operand_kinds(node, position, in_complex)
    return None if kinds is None else (position, kinds)


def _operand_kinds(node, position, in_complex):
    """``_link``'s kinds of the operands VJP ``position`` of ``node`` reads, or None."""
    attrs = node.attrs
    shape = attrs["shape"]
    used, _, _ = node.op.vjp_reads(position)
    kinds = []
    for i in used:
        operand_shape = attrs["shapes"][i]
        if operand_shape == shape:
            kind = "full"
        elif _size(operand_shape) == 1:
            kind = "scalar"
        else:
            return None
        if in_complex and node.saved_inputs[i].dtype.kind != "c":
            kind += " real"
        kinds.append(kind)
    return tuple(kinds)


def groups(plan, targets, all_leaves, roots, minimum=None, complex_values=False):
    """The fused groups of ``plan``, by ``id`` of every node they contain (``roots``: ``id``
    of the seeded edges, which cannot be inside a chain), over buffers of at least
    ``minimum`` elements (default ``config.FUSION_MIN_ELEMENTS``); chains of complex values
    too with ``complex_values`` (the CPU's loops; the GPU's fused kernels are real)."""
    if minimum is None:
        minimum = config.FUSION_MIN_ELEMENTS
    candidates = _candidates(plan, targets, all_leaves, minimum, complex_values)
    if len(candidates) < 2:
        return {}
    consumers = _consumer_counts(plan)
    found = {}
    for node in plan.nodes:  # backward order: a chain is met at its head first
        key = id(node)
        if key in found or key not in candidates:
            continue
        chain, positions, kinds = _chain_from(node, candidates, consumers, found, targets,
                                              roots)
        if len(chain) >= 2:
            group = Group(chain, positions, kinds)
            for member in chain:
                found[id(member)] = group
    return found


def _candidates(plan, targets, all_leaves, minimum, complex_values):
    """``_link`` of each node of ``plan`` that can be fused, by ``id``."""
    candidates = {}
    for node in plan.nodes:
        if _size(node.shape) >= minimum and isinstance(node.op, ElementwiseOp):
            link = _link(node, plan.needed, targets, all_leaves, complex_values)
            if link is not None:
                candidates[id(node)] = link
    return candidates


def _consumer_counts(plan):
    """How many edges of ``plan``'s nodes lead to each node, by ``id``."""
    consumers = {}
    for node in plan.nodes:
        for edge in node.edges:
            if edge is not None and isinstance(edge, tape.Node):
                consumers[id(edge)] = consumers.get(id(edge), 0) + 1
    return consumers


def _chain_from(node, candidates, consumers, found, targets, roots):
    """``(chain, positions, kinds)``: the nodes of the chain headed by ``node``, following
    each one's gradient position while the next can join, with their positions and operand
    kinds."""
    chain, positions, kinds = [node], [], []
    current = node
    operands = 0
    while True:
        position, operand_kinds = candidates[id(current)]
        positions.append(position)
        kinds.append(operand_kinds)
        operands += _operand_count(current, position)
        following = current.edges[position]
        following_key = id(following)
        if (
            len(chain) >= config.FUSION_MAX_NODES
            or not isinstance(following, tape.Node)
            or following_key not in candidates
            or following_key in found
            or consumers.get(following_key, 0) != 1
            or following_key in targets
            or following_key in roots
            or following.retained
            or following.shape != current.shape
            or following.dtype != current.dtype
            or operands + _operand_count(following, candidates[following_key][0])
            > MAX_OPERANDS
        ):
            return chain, positions, kinds
        chain.append(following)
        current = following


def _operand_count(node, position):
    """How many arrays VJP ``position`` of ``node`` reads in a fused loop (besides ``g``)."""
    used, _, reads_y = node.op.vjp_reads(position)
    return len(used) + bool(reads_y)


# -- source generation -------------------------------------------------------------------------


#: The rounding of every stage but the last (``_kernels.fused_stage``): a chain on the CPU
#: has one dtype (the executor runs no other), the target's.
_ROUNDING = "_as_result({}, target[i_])"


_LOOP_JIT = '@njit(cache=True, error_model="numpy", nogil=True{parallel})'


def fused_source(stages):
    """Source of the fused loop and its executor driver for ``stages``: ``(op, position,
    operand kinds)`` per node, head first."""
    lines = [_kernels.HEADER, "from autograd_nb.ops._fastmath import _as_result", ""]
    arguments = []  # loop arguments after ``g``: operand arrays, in the driver's order
    loads = []
    body = []
    unpack = []
    n_params = 0
    trig = set()  # arrays passed to sin/cos (checked, for the reduced-range loop)
    all_small = True
    for stage, (op, position, kinds) in enumerate(stages):
        used, _, reads_y = op.vjp_reads(position)
        rename = {name: f"{name}_{stage}" for name in op.input_names + op.params}
        rename["g"] = "g_"
        rename["y"] = f"y_{stage}"
        formula = op.vjp_formulas[position]
        trig_names = _kernels.trig_arguments(formula, {op.input_names[i] for i in used})
        all_small = all_small and trig_names is not None
        for i, kind in zip(used, kinds, strict=True):
            array = f"o{len(arguments)}"
            arguments.append((array, kind))
            at = "i_" if kind == "full" else "0"
            loads.append(f"{rename[op.input_names[i]]} = {array}[{at}]")
            if trig_names and op.input_names[i] in trig_names:
                trig.add(array)
        if reads_y:
            array = f"o{len(arguments)}"
            arguments.append((array, "full"))
            loads.append(f"{rename['y']} = {array}[i_]")
        for name in op.params:
            unpack.append(f"{rename[name]} = params[{n_params}]")
            n_params += 1
        rounding = None if stage == len(stages) - 1 else _ROUNDING
        body.append(f"g_ = {_kernels.fused_stage(formula, rename, rounding)}")
    names = ", ".join(["g"] + [a for a, _ in arguments] + ["target", "params"])
    # With sin/cos/tan of saved values: the reduced-range loop where no argument is 2**20 or
    # more, else that loop for the others and the full functions for the rest
    # (``_kernels.flat_loops``, ``ops._fastmath``).
    small = None
    if all_small and trig:
        at = dict(arguments)
        small = (" and ".join(f"trig_arguments_small({a})" for a in sorted(trig)),
                 " and ".join(f"trig_small({a}[{'i_' if at[a] == 'full' else 0}])"
                              for a in sorted(trig)))
    for suffix, parallel, loop in (("", "", "range"), ("_parallel", ", parallel=True", "prange")):
        lines.append(_LOOP_JIT.format(parallel=parallel))
        lines.append(f"def loop{suffix}({names}):")
        lines.extend("    " + line for line in unpack)
        lines += _kernels.flat_loops("target", ["g_ = g[i_]"] + loads + body, [("+=", "g_")],
                                     small, loop)
        lines.append("")
    lines += _driver_lines(arguments, names, f"    params = floats[:{n_params}]")
    return "\n".join(lines)


def _driver_lines(arguments, names, params_line=None):
    """The two drivers of a fused chain's loops (so that an executor entry compiles only the
    loop it runs): the gradient, one array per ``arguments`` entry (``(array, kind)``: a
    ``kind`` starting with "full" has the result's ``n`` elements, else one; one ending with
    "real" is read as reals of ``like``'s precision) and the target, from ``operands``."""
    lines = []
    for suffix in ("", "_parallel"):
        lines.append(_LOOP_JIT.format(parallel=""))
        lines.append(f"def driver{suffix}(operands, ints, floats, like):")
        lines.append("    n = ints[0]")
        lines.append("    g = array_at(operands[0], n, like)")
        for j, (array, kind) in enumerate(arguments):
            length = "n" if kind.startswith("full") else 1
            element = "like.real" if kind.endswith("real") else "like"
            lines.append(f"    {array} = array_at(operands[{j + 1}], {length}, {element})")
        lines.append(f"    target = array_at(operands[{len(arguments) + 1}], n, like)")
        if params_line is not None:
            lines.append(params_line)
        lines.append(f"    loop{suffix}({names})")
        lines.append("")
    return lines




_COMPLEX_ROUNDING = """
@intrinsic
def _as_complex_result(typingctx, value, like):
    # ``value`` rounded to ``like``'s complex type, as a store into a buffer of it rounds.
    def codegen(context, builder, signature, args):
        return context.cast(builder, args[0], signature.args[0], signature.return_type)

    return like(value, like), codegen

"""


def fused_complex_source(stages):
    """:func:`fused_source` of a chain of complex values: each stage the complex kernel's
    formula (``conj(vjp(conj(g)))``, ``ElementwiseOp.fuses_complex``), rounded to the
    target's complex type but for the last, real operands read as reals of its precision
    (``like.real``)."""
    lines = ["# Generated by autograd_nb.engine.fusion (a complex chain); do not edit.",
             "from numba.extending import intrinsic", COMPLEX_IMPORTS, _COMPLEX_ROUNDING]
    arguments = []  # (array, kind) after ``g``, in the driver's order
    loads, body = [], []
    for stage, (op, position, kinds) in enumerate(stages):
        used, _, reads_y = op.vjp_reads(position)
        rename = {name: f"{name}_{stage}" for name in op.input_names}
        rename.update(g="conj(g_)", y=f"y_{stage}")
        for i, kind in zip(used, kinds, strict=True):
            array = f"o{len(arguments)}"
            arguments.append((array, kind))
            at = "i_" if kind.startswith("full") else "0"
            loads.append(f"{rename[op.input_names[i]]} = {array}[{at}]")
        if reads_y:
            array = f"o{len(arguments)}"
            arguments.append((array, "full"))
            loads.append(f"{rename['y']} = {array}[i_]")
        expression = f"conj({_kernels.rename(op.vjp_formulas[position], rename)})"
        if stage < len(stages) - 1:
            expression = f"_as_complex_result({expression}, target[i_])"
        body.append(f"g_ = {expression}")
    names = ", ".join(["g"] + [a for a, _ in arguments] + ["target"])
    for suffix, parallel, loop in (("", "", "range"), ("_parallel", ", parallel=True", "prange")):
        lines.append(_LOOP_JIT.format(parallel=parallel))
        lines.append(f"def loop{suffix}({names}):")
        lines.append(f"    for i_ in {loop}(target.shape[0]):")
        lines.extend(f"        {line}" for line in ["g_ = g[i_]", *loads, *body])
        lines.append("        target[i_] += g_")
        lines.append("")
    lines += _driver_lines(arguments, names)
    return "\n".join(lines)
