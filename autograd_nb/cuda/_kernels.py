"""``@cuda.jit`` kernels: generated from the elementwise formulas, plus the data-movement ones.

Elementwise kernels come from the *same* formula strings as the CPU's ``@njit`` kernels (see
:mod:`autograd_nb.ops._kernels`): the generated source is written to a real file with
:func:`autograd_nb.ops._kernels.load_module`, so numba-cuda's ``cache=True`` keeps the compiled
kernels between processes and an edited formula gives a new file. The formula vocabulary of
:mod:`autograd_nb.ops._scalar` becomes device functions compiled from the very same Python
functions (``where``, ``maximum``, ``sigmoid``, ``floor``, ``digamma``, ...); ``exp``, ``log``,
``erf``, ... are CUDA's libdevice math through ``math``.

Per elementwise op the module holds:

* ``forward(x0.., out, params)``: flat, every operand of the output's size;
* ``forward_strided(x0, sx0, .., out, shape, params)``: operands read through element strides
  over the (collapsed) output shape, stride 0 on broadcast dimensions;
* per differentiable input ``k``, ``vjp{k}`` (flat) and ``vjp{k}_strided``. Both take a batch
  of grad_outputs (``is_grads_batched``; 1 for a plain VJP) as the grid's second dimension,
  over the same saved values, and *accumulate* into the gradient buffer.

A VJP into a broadcast input is a sum over the broadcast dimensions. ``vjp{k}_strided`` runs
it without write races: the output's dimensions are ordered "kept" (the input has them) then
"reduced" (broadcast), each thread owns one input element and one chunk of its reduction, sums
the chunk in a register and adds it once: with ``+=`` when one chunk covers the whole
reduction, with ``cuda.atomic.add`` when the reduction is split over threads (a small input
broadcast over a large output, e.g. a bias, would otherwise leave the GPU idle).

An op's complex case (docs/complex.rst) is a second module of the same kernels, generated
from its complex formulas (``op.complex_formulas()``: a holomorphic row's VJPs conjugated,
``a ** b`` as ``power``) over the names of :mod:`._complex_scalar`. CUDA's atomics are real,
so its strided VJPs sum a target element's whole reduction in one thread, and the
data-movement scatters into complex arrays add the two parts, each atomically.

Every kernel is a grid-stride loop, so any launch size computes every element.
"""

import ast
import sys
import types

from numba import cuda

from .. import config
from ..ops import _kernels as cpu_kernels
from ..ops import _scalar
from . import _complex_scalar, _counters

#: The most blocks launched along one grid dimension (CUDA's limit for y and z); grid-stride
#: loops cover the rest.
GRID_LIMIT = 65535

# -- the formula vocabulary as device functions (compiled from the CPU's Python source) --------


def _device_twins():
    """A device function per ``@njit`` function of :mod:`autograd_nb.ops._scalar` and of the
    modules it takes scalars from (``_scalar_bessel``), compiled from the same Python source.
    Each twin reads its global names from a copy of its module's namespace in which the other
    ``@njit`` functions of those modules are their twins (``polygamma`` calls ``digamma``'s
    twin), so that one source serves both targets. A function that calls a CPU library (a
    module's ``DEVICE_STANDINS``: SciPy's Bessel functions) is its stand-in's twin."""
    modules = {_scalar.__name__: _scalar}
    for value in vars(_scalar).values():
        source = getattr(value, "py_func", None)
        if source is not None and source.__module__.startswith(_scalar.__name__):
            modules[source.__module__] = sys.modules[source.__module__]
    namespaces = {name: dict(vars(module)) for name, module in modules.items()}
    twins = {}
    for module_name, namespace in namespaces.items():
        for value in list(namespace.values()):
            source = getattr(value, "py_func", None)
            if source is not None and source.__module__ == module_name:
                clone = types.FunctionType(
                    source.__code__, namespace, source.__name__, source.__defaults__
                )
                twins[module_name, source.__name__] = cuda.jit(device=True)(clone)
    _use_standins(twins, namespaces)
    for namespace in namespaces.values():
        for name, value in list(namespace.items()):
            source = getattr(value, "py_func", None)
            if source is not None and (source.__module__, source.__name__) in twins:
                namespace[name] = twins[source.__module__, source.__name__]
    namespace = namespaces[_scalar.__name__]
    return {name: namespace[name] for name in _scalar.SCALAR_NAMES}


def _use_standins(twins, module_names):
    """Make each function of a module's ``DEVICE_STANDINS`` (those that call a CPU library,
    SciPy's) its stand-in's twin, in ``twins`` (keyed by module and function name)."""
    for module_name in module_names:
        standins = getattr(sys.modules[module_name], "DEVICE_STANDINS", {})
        for name, standin in standins.items():
            twins[module_name, name] = twins[module_name, standin.py_func.__name__]


globals().update(_device_twins())

_GENERATOR_VERSION = "1"

HEADER = f"""# Generated by autograd_nb.cuda._kernels (generator {_GENERATOR_VERSION}); do not edit.
from numba import cuda
{_scalar.math_import_line()}
from autograd_nb.cuda._kernels import {", ".join(_scalar.SCALAR_NAMES)}

"""

#: The header of a complex case's module: the complex vocabulary of :mod:`._complex_scalar`.
COMPLEX_HEADER = HEADER.splitlines()[0] + f"""
# (the complex case)
from numba import cuda
from autograd_nb.cuda._complex_scalar import {", ".join(_complex_scalar.NAMES)}

"""

JIT = "@cuda.jit(cache=True)"


# -- launching ---------------------------------------------------------------------------------


def _geometry(count):
    threads = max(1, min(int(config.CUDA_THREADS_PER_BLOCK), count))
    blocks = max(1, min(GRID_LIMIT, -(-count // threads)))
    return blocks, threads


def launch_grid(kernel, grid, block, *args):
    """``kernel[grid, block](*args)``: every launch of the backend goes through here, where
    :func:`autograd_nb.cuda.counters` counts it."""
    _counters.add("launches")
    kernel[grid, block](*args)


def launch(kernel, count, *args):
    """Launch a one-dimensional grid-stride ``kernel`` over ``count`` items.

    Blocks are never wider than ``count`` (numba's simulator runs a Python thread per CUDA
    thread, and a small launch on a GPU gains nothing from idle threads).
    """
    if count <= 0:
        return
    blocks, threads = _geometry(count)
    launch_grid(kernel, blocks, threads, *args)


def launch_batched(kernel, count, batch, *args):
    """Launch a kernel over ``count`` items (grid x) for each of ``batch`` rows (grid y)."""
    if count <= 0 or batch <= 0:
        return
    blocks, threads = _geometry(count)
    launch_grid(kernel, (blocks, min(batch, GRID_LIMIT)), (threads, 1), *args)


def flat(device_array):
    """A one-dimensional view of a C-contiguous device array."""
    return device_array.reshape(device_array.size)


# -- data movement (hand-written) --------------------------------------------------------------


@cuda.jit
def _fill(out, value):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = value


@cuda.jit
def _copy(source, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = source[i]


@cuda.jit
def _copy_real(source, out):
    # (a complex source into a real array: its real part, as NumPy's cast)
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = source[i].real


@cuda.jit
def _add(source, target):
    for i in range(cuda.grid(1), target.size, cuda.gridsize(1)):
        target[i] += source[i]


@cuda.jit
def _add_real(source, target):
    # (a complex gradient into a real input's: its real part, torch's ``handle_r_to_c``)
    for i in range(cuda.grid(1), target.size, cuda.gridsize(1)):
        target[i] += source[i].real


@cuda.jit(device=True)
def _offsets(i, shape, source_offset, source_strides, target_offset, target_strides):
    # Position ``i`` (C order over ``shape``) read through two sets of element strides.
    rem = i
    source_at = source_offset
    target_at = target_offset
    for d in range(len(shape) - 1, -1, -1):
        c = rem % shape[d]
        rem //= shape[d]
        source_at += c * source_strides[d]
        target_at += c * target_strides[d]
    return source_at, target_at


@cuda.jit
def _copy_strided(source, source_offset, source_strides, target, target_offset, target_strides,
                  shape, count):
    for i in range(cuda.grid(1), count, cuda.gridsize(1)):
        s, t = _offsets(i, shape, source_offset, source_strides, target_offset, target_strides)
        target[t] = source[s]


@cuda.jit
def _add_strided(source, source_offset, source_strides, target, target_offset, target_strides,
                 shape, count):
    # Atomic: stride-0 (broadcast) dimensions and repeated positions add into one element.
    for i in range(cuda.grid(1), count, cuda.gridsize(1)):
        s, t = _offsets(i, shape, source_offset, source_strides, target_offset, target_strides)
        cuda.atomic.add(target, t, source[s])


@cuda.jit
def _add_strided_complex(source, source_offset, source_strides, target, target_offset,
                         target_strides, shape, count):
    # CUDA's atomics are real: the two parts of a complex target, each atomically.
    for i in range(cuda.grid(1), count, cuda.gridsize(1)):
        s, t = _offsets(i, shape, source_offset, source_strides, target_offset, target_strides)
        value = source[s]
        cuda.atomic.add(target.real, t, value.real)
        cuda.atomic.add(target.imag, t, value.imag)


# The gathers and scatters take a batch of rows (``is_grads_batched``, grid y; 1 otherwise):
# row ``b`` of the indexed array starts at ``b * row``, row ``b`` of the packed one at
# ``b * index.size``, over one shared index.


@cuda.jit
def _take(source, row, index, out, batch):
    i0, b0 = cuda.grid(2)
    si, sb = cuda.gridsize(2)
    n = index.size
    for b in range(b0, batch, sb):
        for i in range(i0, n, si):
            out[b * n + i] = source[b * row + index[i]]


@cuda.jit
def _put(source, index, target):
    for i in range(cuda.grid(1), index.size, cuda.gridsize(1)):
        target[index[i]] = source[i]


@cuda.jit
def _put_add(source, index, target, row, batch):
    i0, b0 = cuda.grid(2)
    si, sb = cuda.gridsize(2)
    n = index.size
    for b in range(b0, batch, sb):
        for i in range(i0, n, si):
            cuda.atomic.add(target, b * row + index[i], source[b * n + i])


@cuda.jit
def _put_add_complex(source, index, target, row, batch):
    i0, b0 = cuda.grid(2)
    si, sb = cuda.gridsize(2)
    n = index.size
    for b in range(b0, batch, sb):
        for i in range(i0, n, si):
            value = source[b * n + i]
            cuda.atomic.add(target.real, b * row + index[i], value.real)
            cuda.atomic.add(target.imag, b * row + index[i], value.imag)


@cuda.jit
def _fill_at(out, row, index, value, batch):
    i0, b0 = cuda.grid(2)
    si, sb = cuda.gridsize(2)
    for b in range(b0, batch, sb):
        for i in range(i0, index.size, si):
            out[b * row + index[i]] = value


def _is_complex(array):
    return array.dtype.kind == "c"


def _real_of_complex(source, target):
    """Whether ``source`` is complex and ``target`` real: a cast or an addition then takes
    the real part (the generic kernels would not compile a complex-to-real store)."""
    return _is_complex(source) and not _is_complex(target)


def fill_array(out, value):
    """``out[...] = value``."""
    launch(_fill, out.size, flat(out), value)


def fill_at(out, device_index, value, batch=1):
    """``out.flat[index] = value`` for a device int64 index array (in each of ``batch``
    rows of ``out``)."""
    launch_batched(_fill_at, device_index.size, batch, flat(out), out.size // batch,
                   device_index, value, batch)


def copy_flat(source, out):
    """``out.flat[:] = source.flat`` (cast to ``out``'s dtype; a complex source's real part
    into a real ``out``)."""
    kernel = _copy_real if _real_of_complex(source, out) else _copy
    launch(kernel, out.size, flat(source), flat(out))


def add_flat(source, target):
    """``target.flat += source.flat`` (same size; no two threads touch one element; a
    complex source's real part into a real ``target``)."""
    kernel = _add_real if _real_of_complex(source, target) else _add
    launch(kernel, target.size, flat(source), flat(target))


def _as_tuple(values):
    return tuple(int(v) for v in values)


def copy_strided(source, source_offset, source_strides, target, target_offset, target_strides,
                 shape):
    """``target[t_off + pos . t_strides] = source[s_off + pos . s_strides]`` for every
    position ``pos`` of ``shape`` (element strides; flat buffers)."""
    _strided(_copy_strided, source, source_offset, source_strides, target, target_offset,
             target_strides, shape)


def add_strided(source, source_offset, source_strides, target, target_offset, target_strides,
                shape):
    """As :func:`copy_strided`, accumulating (atomically) instead of storing."""
    kernel = _add_strided_complex if _is_complex(target) else _add_strided
    _strided(kernel, source, source_offset, source_strides, target, target_offset,
             target_strides, shape)


def _strided(kernel, source, source_offset, source_strides, target, target_offset,
             target_strides, shape):
    from ..ops import _broadcast

    count = 1
    for n in shape:
        count *= int(n)
    if count == 0:
        return
    collapsed, (s_strides, t_strides) = _broadcast.collapse(
        tuple(shape), [list(source_strides), list(target_strides)]
    )
    launch(kernel, count, flat(source), int(source_offset), _as_tuple(s_strides), flat(target),
           int(target_offset), _as_tuple(t_strides), _as_tuple(collapsed), count)


def take(source, device_index, out, batch=1):
    """``out.flat[i] = source.flat[index[i]]`` (for each of ``batch`` rows of ``source``
    and ``out``)."""
    launch_batched(_take, device_index.size, batch, flat(source), source.size // batch,
                   device_index, flat(out), batch)


def put(source, device_index, target):
    """``target.flat[index[i]] = source.flat[i]`` (indices must be distinct)."""
    launch(_put, device_index.size, flat(source), device_index, flat(target))


def put_add(source, device_index, target, batch=1):
    """``target.flat[index[i]] += source.flat[i]``; repeated indices accumulate (atomics);
    for each of ``batch`` rows of ``source`` and ``target``."""
    kernel = _put_add_complex if _is_complex(target) else _put_add
    launch_batched(kernel, device_index.size, batch, flat(source), device_index, flat(target),
                   target.size // batch, batch)


# -- generated elementwise kernels -------------------------------------------------------------


def elementwise_source(inputs, params, forward, vjps, complex_case=False):
    """Source of the ``@cuda.jit`` kernels of one elementwise op (see the module docstring).

    The arguments are those of :func:`autograd_nb.ops._kernels.elementwise_source`, and the
    VJP kernels take the same arrays as the CPU's (only those the formula reads). With
    ``complex_case`` the formulas are an op's complex ones (:func:`complex_formulas`), over
    the names of :mod:`._complex_scalar`, and the strided VJPs sum each target element's
    reduction in one thread (CUDA has no complex atomics).
    """
    lines = [COMPLEX_HEADER if complex_case else HEADER]
    unpack = [f"    {name} = params[{i}]" for i, name in enumerate(params)]
    every = list(range(len(inputs)))
    _emit_forward(lines, inputs, every, unpack, forward)
    for k, formula in sorted(vjps.items()):
        used, reads_g, reads_y = cpu_kernels.vjp_arguments(inputs, params, formula)
        _emit_vjp(lines, k, inputs, used, unpack, formula, reads_g, reads_y, complex_case)
    return "\n".join(lines)


class _PowerCalls(ast.NodeTransformer):
    """``a ** b`` as ``power(a, b)`` (:func:`._complex_scalar.power`)."""

    def visit_BinOp(self, node):
        node = self.generic_visit(node)
        if not isinstance(node.op, ast.Pow):
            return node
        return ast.copy_location(
            ast.Call(ast.Name("power", ast.Load()), [node.left, node.right], []), node
        )


def _complex_formula(formula):
    tree = ast.fix_missing_locations(_PowerCalls().visit(cpu_kernels.parse(formula)))
    return ast.unparse(tree)


def complex_formulas(forward, vjps, conjugated):
    """An op's complex formulas as the device kernels compute them: ``**`` as ``power``,
    and where ``conjugated`` (a holomorphic row's real VJPs) each VJP as
    ``conj(vjp(conj(g)))``, which is torch's ``g * conj(f'(z))`` for a VJP ``g * f'(z)``."""
    device_vjps = {}
    for k, formula in vjps.items():
        if conjugated:
            formula = f"conj({cpu_kernels.rename(formula, {'g': 'conj(g)'})})"
        device_vjps[k] = _complex_formula(formula)
    return _complex_formula(forward), device_vjps


def formula_source(inputs, formula):
    """Source of the forward kernels alone, for a formula with no derivative (comparisons)."""
    lines = [HEADER]
    _emit_forward(lines, inputs, list(range(len(inputs))), [], formula)
    return "\n".join(lines)


def _decompose(position, first, stop, pairs, indent):
    """Lines that add ``c * stride`` to each ``offset`` of ``pairs`` for the coordinates of
    ``position`` over ``shape[first:stop]`` (C order)."""
    pad = " " * indent
    end = "-1" if first == "0" else f"{first} - 1"
    lines = [f"{pad}rem_ = {position}", f"{pad}for d_ in range({stop} - 1, {end}, -1):"]
    lines += [f"{pad}    c_ = rem_ % shape[d_]", f"{pad}    rem_ //= shape[d_]"]
    lines += [f"{pad}    {offset} += c_ * {strides}[d_]" for offset, strides in pairs]
    return lines


def _emit_forward(lines, inputs, used, unpack, formula):
    expression = formula
    loop = "    for i_ in range(cuda.grid(1), out.size, cuda.gridsize(1)):"
    lines.append(JIT)
    lines.append(f"def forward({', '.join(f'x{i}' for i in used)}, out, params):")
    lines.extend(unpack)
    lines.append(loop)
    lines += [f"        {inputs[i]} = x{i}[i_]" for i in used]
    lines += [f"        out[i_] = {expression}", ""]

    head = []
    for i in used:
        head += [f"x{i}", f"sx{i}"]
    lines.append(JIT)
    lines.append(f"def forward_strided({', '.join(head)}, out, shape, params):")
    lines.extend(unpack)
    lines.append(loop)
    lines += [f"        ox{i} = 0" for i in used]
    lines += _decompose("i_", "0", "len(shape)", [(f"ox{i}", f"sx{i}") for i in used], 8)
    lines += [f"        {inputs[i]} = x{i}[ox{i}]" for i in used]
    lines += [f"        out[i_] = {expression}", ""]


def _emit_vjp(lines, k, inputs, used, unpack, formula, reads_g, reads_y, complex_case=False):
    expression = cpu_kernels.rename_gy(formula)
    target = f"grad{k}"
    arrays = (["g"] if reads_g else []) + [f"x{i}" for i in used] + (["y"] if reads_y else [])

    # Flat: row b of g and of the target starts at b * n; saved values are shared by the rows.
    lines.append(JIT)
    lines.append(f"def vjp{k}({', '.join(arrays + [target])}, params, batch, n):")
    lines.extend(unpack)
    lines += [
        "    i0_, b0_ = cuda.grid(2)",
        "    si_, sb_ = cuda.gridsize(2)",
        "    for b_ in range(b0_, batch, sb_):",
        "        for i_ in range(i0_, n, si_):",
    ]
    if reads_g:
        lines.append("            g_ = g[b_ * n + i_]")
    if reads_y:
        lines.append("            y_ = y[i_]")
    lines += [f"            {inputs[i]} = x{i}[i_]" for i in used]
    lines += [f"            {target}[b_ * n + i_] += {expression}", ""]

    # Strided: ``shape`` lists the target's (kept) dimensions first, then the reduced ones.
    head = (["g"] if reads_g else []) + [a for i in used for a in (f"x{i}", f"sx{i}")]
    head += (["y"] if reads_y else []) + [target, "so", "shape", "n_kept", "chunk", "params"]
    head += ["batch", "g_step", "t_step"]
    kept = [("oo_", "so")] + [(f"ox{i}", f"sx{i}") for i in used]
    reduced = [("po_", "so")] + [(f"px{i}", f"sx{i}") for i in used]
    lines.append(JIT)
    lines.append(f"def vjp{k}_strided({', '.join(head)}):")
    lines.extend(unpack)
    lines += [
        "    i0_, b0_ = cuda.grid(2)",
        "    si_, sb_ = cuda.gridsize(2)",
        "    nd_ = len(shape)",
        "    n_t_ = 1",
        "    for d_ in range(n_kept):",
        "        n_t_ *= shape[d_]",
        "    n_r_ = 1",
        "    for d_ in range(n_kept, nd_):",
        "        n_r_ *= shape[d_]",
        "    n_c_ = (n_r_ + chunk - 1) // chunk",
        "    for b_ in range(b0_, batch, sb_):",
        "        for w_ in range(i0_, n_t_ * n_c_, si_):",
        "            t_ = w_ % n_t_",
        "            r0_ = (w_ // n_t_) * chunk",
    ]
    lines += [f"            {offset} = 0" for offset, _ in kept]
    lines += _decompose("t_", "0", "n_kept", kept, 12)
    lines += [
        f"            acc_ = {'0j' if complex_case else '0.0'}",
        "            for r_ in range(r0_, min(r0_ + chunk, n_r_)):",
    ]
    lines += [f"                {p} = {o}" for (p, _), (o, _) in zip(reduced, kept)]
    lines += _decompose("r_", "n_kept", "nd_", reduced, 16)
    if reads_g:
        lines.append("                g_ = g[b_ * g_step + po_]")
    if reads_y:
        lines.append("                y_ = y[po_]")
    lines += [f"                {inputs[i]} = x{i}[px{i}]" for i in used]
    lines.append(f"                acc_ += {expression}")
    if complex_case:  # (one chunk per target element: see elementwise_source)
        lines += [f"            {target}[b_ * t_step + t_] += acc_", ""]
        return
    lines += [
        "            if n_c_ == 1:",
        f"                {target}[b_ * t_step + t_] += acc_",
        "            else:",
        f"                cuda.atomic.add({target}, b_ * t_step + t_, acc_)",
        "",
    ]


_modules = {}


def elementwise_module(op, complex_case=False):
    """The generated kernel module of elementwise op ``op`` (written and imported once);
    with ``complex_case``, of its complex case (``op.complex_formulas()``)."""
    key = (op.name, "complex") if complex_case else op.name
    module = _modules.get(key)
    if module is None:
        if complex_case:
            inputs, forward, vjps, conjugated = op.complex_formulas()
            forward, vjps = complex_formulas(forward, vjps, conjugated)
            source = elementwise_source(inputs, op.params, forward, vjps, True)
            tag = f"cuda_{op.name}_complex"
        else:
            source = elementwise_source(op.input_names, op.params, op.formula, op.vjp_formulas)
            tag = "cuda_" + op.name
        module = _modules[key] = cpu_kernels.load_module(tag, source)
    return module


def formula_module(tag, inputs, formula):
    """The generated forward kernels of a derivative-free formula (``"a < b"``)."""
    module = _modules.get(("formula", formula))
    if module is None:
        module = cpu_kernels.load_module("cuda_" + tag, formula_source(inputs, formula))
        _modules[("formula", formula)] = module
    return module

