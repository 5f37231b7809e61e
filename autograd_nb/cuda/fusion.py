"""Fused elementwise VJP chains on the GPU: one generated ``@cuda.jit`` kernel per chain.

The CPU planner (:func:`autograd_nb.engine.fusion.groups`) finds chains ``n1 -> ... -> nm``
of elementwise nodes whose gradient flows through exactly one input; this module runs such a
group on device arrays. Unfused, a chain of ``m`` VJPs is ``m`` launches, each reading a
gradient buffer and the saved values and writing the next gradient buffer. Fused, each thread
reads the head's gradient element, applies the chain's derivative formulas in registers (the
same formula strings as every other kernel) and adds the result into the target once. Each
stage but the last rounds its value to the dtype of the gradient buffer the node's own VJP
kernel would store it in (``ops._kernels.fused_stage``, as the CPU's fused loops do), so a
fused chain gives the unfused bits, float32 included.

The kernel of a chain::

    fused(g, o0, o1, .., target, params, batch, n)

reads each operand ``o*`` at the element's index (a "full" operand, of the chain's shape) or
at 0 (a "scalar" one, a broadcast constant such as the ``0.9`` of ``x * 0.9``), takes the
ops' parameters (``clip``'s bounds) from the ``params`` tuple, passed by value like the other
elementwise kernels' (no host-to-device copy per launch), and accumulates (``+=``) into
``target``, or stores into it (``=``) when the target's buffer is fresh: the chain writes
every one of its elements, so the buffer needs no zero fill first. The batch of
``is_grads_batched`` is the grid's second dimension: row ``b`` of ``g`` and of ``target``
starts at ``b * n``, over the same saved values; a plain VJP is a batch of one.

The source is written to the kernel folder through
:func:`autograd_nb.ops._kernels.load_module`, under a name hashing it: the same chain gives the
same module (and numba-cuda's on-disk cache), in this process and the next. A per-process dict
keyed by the chain's structure (ops, input positions, operand kinds, roundings) skips even
writing and hashing the source on a repeated backward.

This module takes the group as built by the planner (``nodes``, ``positions``, ``kinds``,
``target``) and never imports the engine (``cuda`` sits below it).
"""

import numpy as np

from ..ops import _kernels as cpu_kernels
from . import _kernels
from ._kernels import flat, launch_batched

#: Fused kernels by chain: ``((op, position, operand kinds, rounding), ...)``, head first.
_kernels_by_chain = {}
_CACHE_MAX = 1024


def chain_of(group):
    """The structure of ``group`` that its kernel depends on: per node, head first,
    ``(op, input position, operand kinds, rounding)``, ``rounding`` the name of the dtype of
    the gradient buffer its VJP's value would be stored in unfused (the next node's; None
    for the last node, which adds into the target)."""
    roundings = [np.dtype(node.dtype).name for node in group.nodes[1:]] + [None]
    return tuple(zip((node.op for node in group.nodes), group.positions, group.kinds,
                     roundings))


def kernel_for(chain, overwrite=False):
    """The fused ``@cuda.jit`` kernel of ``chain`` (generated and loaded on first use), which
    stores into its target where ``overwrite``, else adds."""
    key = (chain, overwrite)
    kernel = _kernels_by_chain.get(key)
    if kernel is None:
        module = cpu_kernels.load_module("cuda_fused", fused_source(chain, overwrite))
        if len(_kernels_by_chain) >= _CACHE_MAX:
            _kernels_by_chain.clear()
        kernel = _kernels_by_chain[key] = module.fused
    return kernel


def run_group(group, grad_output, grad_target, batch=1, overwrite=False):
    """Accumulate the VJP of the whole chain ``group`` into ``grad_target``.

    Parameters
    ----------
    group : autograd_nb.engine.fusion.Group
        The chain; its saved values are device arrays.
    grad_output : device array
        The gradient of the head's result (with a leading batch dimension if ``batch > 1``).
    grad_target : device array
        The gradient buffer of the group's target, of the same size as ``grad_output``.
    batch : int
        Rows of ``grad_output`` and ``grad_target`` (``is_grads_batched``), 1 otherwise.
    overwrite : bool
        Store the chain's VJP into ``grad_target`` (a fresh buffer: every element is
        written) instead of adding it (saves the zero fill's launch and its pass over
        memory).
    """
    if batch <= 0 or grad_target.size == 0:
        return
    size = grad_target.size // batch
    kernel = kernel_for(chain_of(group), overwrite)
    launch_batched(kernel, size, batch, flat(grad_output), *operands(group), flat(grad_target),
                   params(group), batch, size)


def operands(group):
    """The saved arrays the chain's formulas read, flat, in the kernel's argument order."""
    arrays = []
    for node, position in zip(group.nodes, group.positions):
        used, _, reads_y = node.op.vjp_reads(position)
        arrays += [flat(node.saved_inputs[i]) for i in used]
        if reads_y:
            arrays.append(flat(node.saved_output))
    return arrays


def params(group):
    """The ops' parameters, in the kernel's order (never empty: simple argument types)."""
    values = [float(p) for node in group.nodes for p in node.attrs["params"]]
    return tuple(values) or (0.0,)


# -- source generation -------------------------------------------------------------------------


def fused_source(chain, overwrite=False):
    """Source of the kernel ``fused`` of ``chain`` (see the module docstring); it stores
    into ``target`` where ``overwrite``, else adds."""
    arguments = []  # operand array names, in argument order
    unpack = []  # parameter loads, once per thread
    body = []  # per element: operand loads and one derivative formula per stage
    n_params = 0
    for stage, (op, position, kinds, rounding) in enumerate(chain):
        used, _, reads_y = op.vjp_reads(position)
        names = {name: f"{name}_{stage}" for name in op.input_names + op.params}
        names["g"] = f"g_{stage}"
        names["y"] = f"y_{stage}"
        for i, kind in zip(used, kinds, strict=True):
            array = f"o{len(arguments)}"
            arguments.append(array)
            index = "i_" if kind == "full" else "0"
            body.append(f"{names[op.input_names[i]]} = {array}[{index}]")
        if reads_y:
            array = f"o{len(arguments)}"
            arguments.append(array)
            body.append(f"{names['y']} = {array}[i_]")
        for name in op.params:
            unpack.append(f"{names[name]} = params[{n_params}]")
            n_params += 1
        # One name per stage: each may have its own type (float32 loads, float64 params).
        expression = cpu_kernels.fused_stage(op.vjp_formulas[position], names,
                                             rounding and f"np.{rounding}({{}})")
        body.append(f"g_{stage + 1} = {expression}")
    signature = ", ".join(["g", *arguments, "target", "params", "batch", "n"])
    lines = [_kernels.HEADER, "import numpy as np", "", _kernels.JIT,
             f"def fused({signature}):"]
    lines += ["    " + line for line in unpack]
    lines += [
        "    i0_, b0_ = cuda.grid(2)",
        "    si_, sb_ = cuda.gridsize(2)",
        "    for b_ in range(b0_, batch, sb_):",
        "        for i_ in range(i0_, n, si_):",
        "            g_0 = g[b_ * n + i_]",
    ]
    lines += ["            " + line for line in body]
    store = "=" if overwrite else "+="
    lines += [f"            target[b_ * n + i_] {store} g_{len(chain)}", ""]
    return "\n".join(lines)


