"""``register_op``: a user's own ``@njit`` kernels as a first-class, registered op.

The kernels follow the library's calling convention (see :mod:`autograd_nb.ops.registry`):
they work on preallocated C-contiguous buffers, never allocate, and VJP kernels *accumulate*
into the gradient buffer. The op they make is an entry of the registry like the built-in ones
(registry-driven tools list it under ``family == "custom"``), and the engine calls its
kernels itself; they are also exposed as ``op.forward_kernel`` and ``op.vjp_kernels`` for
compiled executors.
"""

import hashlib
import inspect
import marshal
import numbers

import numpy as np
from numba.core.dispatcher import Dispatcher

from ..ops import _kernels
from ..ops.registry import FUNCTIONS, REGISTRY, ExecSpec, Op, call
from ..tensor import Tensor

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


class CustomOp(Op):
    """A registered op made of user kernels (built by :func:`register_op`).

    Attributes
    ----------
    forward_kernel : numba dispatcher
        ``forward_kernel(x0, ..., out)``.
    vjp_kernels : tuple
        Per input, ``vjp(grad_output, x0, ..., out, grad_input)`` or None.
    rules : tuple
        Per input, the differentiable rule ``rule(grad_output, x0, ..., out) -> Tensor`` or
        None.
    """

    family = "custom"
    method = False

    def __init__(self, name, forward, vjps, rules, output_shape, output_dtype, doc):
        self.name = name
        self.forward_kernel = forward
        self.vjp_kernels = tuple(vjps)
        self.rules = tuple(rules)
        self.n_inputs = len(self.vjp_kernels)
        self.differentiable = tuple(v is not None for v in self.vjp_kernels)
        # Every VJP kernel reads every input and the output.
        self.saves = tuple(range(self.n_inputs))
        self.saves_output = True
        self.output_shape = output_shape
        self.output_dtype = output_dtype
        self.__doc__ = doc
        super().__init__()

    def make_function(self):
        name, count, op = self.name, self.n_inputs, self

        def function(*inputs):
            if len(inputs) != count:
                raise TypeError(f"{name}() takes {count} inputs ({len(inputs)} given)")
            return call(name, *inputs)

        function.__doc__ = self.__doc__
        function.op = op
        return function

    def prepare(self, values, attrs):
        if attrs:
            raise TypeError(f"{self.name}() takes no keyword arguments, got {sorted(attrs)}")
        floating = [v for k, v in enumerate(values) if self.differentiable[k]]
        dtype = np.result_type(*floating) if floating else np.dtype(np.float64)
        if dtype not in _FLOATS:
            dtype = np.dtype(np.float64)
        arrays = [
            np.asarray(v, dtype=dtype if self.differentiable[k] else None, order="C")
            for k, v in enumerate(values)
        ]
        shapes = tuple(a.shape for a in arrays)
        shape = shapes[0] if self.output_shape is None else self.output_shape(*shapes)
        if isinstance(shape, numbers.Integral):
            shape = (shape,)
        shape = tuple(int(n) for n in shape)
        out_dtype = dtype
        if self.output_dtype is not None:
            out_dtype = np.dtype(self.output_dtype(*(a.dtype for a in arrays)))
        return arrays, {"shape": shape, "dtype": out_dtype, "shapes": shapes}

    def forward(self, arrays, attrs):
        out = np.zeros(attrs["shape"], dtype=attrs["dtype"])
        self.forward_kernel(*arrays, out)
        return out

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        inputs = saved.inputs
        target = grad_input
        if grad_input.dtype != inputs[k].dtype or not grad_input.flags.c_contiguous:
            # The input was cast for the op (float32 into a float64 op): compute in the op's
            # dtype, then add.
            target = np.zeros(inputs[k].shape, dtype=inputs[k].dtype)
        grad_output = np.asarray(grad_output, dtype=attrs["dtype"], order="C")
        self.vjp_kernels[k](grad_output, *inputs, saved.output, target)
        if target is not grad_input:
            grad_input += target.astype(grad_input.dtype, copy=False)

    def forward_spec(self, arrays, attrs, output):
        if output.dtype not in _FLOATS or any(a.dtype.kind not in "biuf" for a in arrays):
            return None
        layouts = [(a.ndim, a.dtype) for a in (*arrays, output)]
        driver = self._driver("forward", None, layouts)
        return driver, _dims(*arrays, output), ()

    def exec_spec(self, k, node):
        inputs, output = node.saved_inputs, node.saved_output
        if (inputs[k].dtype != node.dtype or output.dtype != node.dtype
                or any(a.dtype.kind not in "biuf" for a in inputs)):
            return None  # (eager's ``vjp`` casts there)
        layouts = [(a.ndim, a.dtype) for a in (output, *inputs, output, inputs[k])]
        driver = self._driver("vjp", k, layouts)
        return ExecSpec(driver, (*inputs, output), _dims(output, *inputs, output, inputs[k]),
                        ())

    def _driver(self, kind, k, layouts):
        """The driver (``_pointers``' convention) that calls the forward kernel, or VJP
        kernel ``k``, on arrays of ``layouts`` (``(ndim, dtype)`` each, the kernel's
        arguments in order), their dimensions in ``ints``: generated per layout, cached on
        disk keyed by the kernels' code (as numba's ``cache=True``: a change to a function
        a kernel calls, the kernel unchanged, is not seen)."""
        key = (kind, k, tuple(layouts))
        drivers = self.__dict__.setdefault("_drivers", {})
        driver = drivers.get(key)
        if driver is None:
            digest = self._kernels_digest()
            # (the generated module reads the kernels here: the op may be unregistered
            # while a graph it made still runs, and another op may take its name)
            _BY_DIGEST.setdefault(digest, self)
            source = _driver_source(kind, k, layouts, digest)
            module = _kernels.load_module(f"custom_{self.name}_{kind}", source)
            driver = drivers[key] = module.driver
        return driver

    def _kernels_digest(self):
        digest = hashlib.sha1(self.name.encode())
        for kernel in (self.forward_kernel, *self.vjp_kernels):
            if kernel is not None:
                digest.update(_code_of(kernel.py_func))
        return digest.hexdigest()

    def rule(self, k, grad_output, inputs, output, attrs):
        rule = self.rules[k]
        if rule is None:
            raise RuntimeError(
                f"create_graph=True needs a differentiable rule for input {k} of the custom op "
                f"{self.name!r}, and none was registered: pass rules=[...] to register_op "
                "(each written with autograd_nb ops), or differentiate with "
                "create_graph=False, which runs its @njit VJP kernel"
            )
        result = rule(grad_output, *inputs, output)
        if not isinstance(result, Tensor):
            raise TypeError(
                f"the rule for input {k} of custom op {self.name!r} returned a "
                f"{type(result).__name__}, not a Tensor"
            )
        if result.shape != attrs["shapes"][k]:
            raise RuntimeError(
                f"the rule for input {k} of custom op {self.name!r} returned shape "
                f"{result.shape}, expected the input's shape {attrs['shapes'][k]}"
            )
        return result


def _dims(*arrays):
    """The dimensions of ``arrays``, one after another (a driver's ``ints``)."""
    return tuple(int(d) for a in arrays for d in a.shape)


def _code_of(function):
    """What identifies a kernel's code: its source, or its bytecode where the source is not
    at hand (a function typed in at a prompt)."""
    try:
        return inspect.getsource(function).encode()
    except (OSError, TypeError):
        return marshal.dumps(function.__code__)


_DRIVER_SOURCE = """# Generated by autograd_nb.autograd.custom_op; do not edit. Kernels {digest}.
import numpy as np
from numba import njit

from autograd_nb.autograd.custom_op import _BY_DIGEST
from autograd_nb.ops._pointers import array_at

kernel = _BY_DIGEST[{digest!r}].{kernel}
{likes}


@njit(cache=True, nogil=True)
def driver(operands, ints, floats, like):
{body}
"""


#: The custom ops whose drivers were generated, by their kernels' digest (read by the
#: generated modules).
_BY_DIGEST = {}


def _driver_source(kind, k, layouts, digest):
    """The source of :meth:`CustomOp._driver`'s module: each argument rebuilt from its
    operand and its dimensions in ``ints``; the forward's result cleared first (eager's
    ``forward`` hands the kernel zeros)."""
    lines, likes, at = [], [], 0
    for j, (ndim, dtype) in enumerate(layouts):
        dims = [f"ints[{at + d}]" for d in range(ndim)]
        at += ndim
        size = " * ".join(dims) or "1"
        shape = "(" + "".join(f"{d}, " for d in dims) + ")"
        likes.append(f"_LIKE{j} = np.empty(0, dtype=np.{np.dtype(dtype).name})")
        lines.append(f"    flat{j} = array_at(operands[{j}], {size}, _LIKE{j})")
        lines.append(f"    a{j} = flat{j}.reshape({shape})")
    if kind == "forward":
        lines.append(f"    flat{len(layouts) - 1}[:] = 0")
    lines.append(f"    kernel({', '.join(f'a{j}' for j in range(len(layouts)))})")
    return _DRIVER_SOURCE.format(
        digest=digest,
        kernel="forward_kernel" if kind == "forward" else f"vjp_kernels[{k}]",
        likes="\n".join(likes), body="\n".join(lines))


def _check_kernel(kernel, what, n_arguments):
    if not isinstance(kernel, Dispatcher):
        raise TypeError(
            f"{what} must be an @njit function (a numba dispatcher), got "
            f"{type(kernel).__name__}: the engine calls it on raw buffers"
        )
    try:
        parameters = inspect.signature(kernel.py_func).parameters.values()
    except (TypeError, ValueError):
        return
    kinds = [p.kind for p in parameters]
    if inspect.Parameter.VAR_POSITIONAL in kinds:
        return
    if len(kinds) != n_arguments:
        raise TypeError(f"{what} must take {n_arguments} arguments, it takes {len(kinds)}")


def _per_input(value, count, what):
    if value is None:
        return (None,) * count
    if callable(value):
        value = (value,)
    value = tuple(value)
    if len(value) != count:
        raise ValueError(f"{what} needs one entry per input ({count}), got {len(value)}")
    return value


def register_op(
    name, forward, vjps, rules=None, output_shape=None, output_dtype=None, doc=None, replace=False
):
    """Register ``@njit`` kernels as a differentiable op; return its public function.

    Parameters
    ----------
    name : str
        The op's name in the registry (``REGISTRY[name]``, ``FUNCTIONS[name]``) and in
        ``grad_fn`` (``<NameBackward>``). It must not be taken by another op.
    forward : numba dispatcher
        ``forward(x0, ..., x{n-1}, out)`` writes the result into ``out`` (preallocated,
        C-contiguous, zero-filled, of the output shape and dtype). ``n`` is ``len(vjps)``.
    vjps : sequence or numba dispatcher
        One entry per input: ``vjp_k(grad_output, x0, ..., x{n-1}, out, grad_input_k)``
        *adds* (``+=``) ``grad_output``'s vector-Jacobian product for input ``k`` into
        ``grad_input_k``, of input ``k``'s shape; ``out`` is the forward result. None marks
        an input without gradient (an index array, a constant). A single kernel is taken for
        a one-input op.
    rules : sequence or callable, optional
        Per input, the same derivative written with autograd_nb ops on Tensors:
        ``rule_k(grad_output, x0, ..., x{n-1}, out) -> Tensor`` (of input ``k``'s shape),
        used with ``create_graph=True`` so the gradient can be differentiated again. Without
        one, ``create_graph=True`` through the op raises a RuntimeError at backward.
    output_shape : callable, optional
        ``output_shape(*input_shapes) -> tuple``; by default the first input's shape.
    output_dtype : callable, optional
        ``output_dtype(*input_dtypes) -> dtype``; by default the inputs' dtype. Inputs with a
        VJP are cast to their common floating dtype (float32 or float64; float64 for
        integers); the others are passed as they are.
    doc : str, optional
        Docstring of the returned function.
    replace : bool
        Replace an earlier custom op of the same name (re-running a notebook cell).

    Returns
    -------
    callable
        ``function(*inputs)``: takes Tensors, arrays or scalars, returns a Tensor recorded on
        the tape when an input requires grad. ``function.op`` is the registered op.

    See Also
    --------
    unregister_op : remove it again.
    Function : a differentiable op written in Python rather than as kernels.

    Examples
    --------
    ``cube(x) = x ** 3``, with its VJP ``3 x² g`` as a kernel and as a rule:

    >>> import autograd_nb as anb
    >>> from numba import njit
    >>> @njit
    ... def cube_forward(x, out):
    ...     flat, result = x.reshape(-1), out.reshape(-1)
    ...     for i in range(flat.size):
    ...         result[i] = flat[i] ** 3
    >>> @njit
    ... def cube_vjp(grad_output, x, out, grad_x):
    ...     g, flat, gx = grad_output.reshape(-1), x.reshape(-1), grad_x.reshape(-1)
    ...     for i in range(flat.size):
    ...         gx[i] += 3.0 * flat[i] ** 2 * g[i]
    >>> cube = anb.autograd.register_op(
    ...     "cube", cube_forward, [cube_vjp],
    ...     rules=[lambda grad_output, x, out: 3.0 * grad_output * x * x])
    >>> x = anb.tensor([1.0, 2.0], requires_grad=True)
    >>> y = cube(x)
    >>> y
    tensor([1., 8.], grad_fn=<CubeBackward>)
    >>> anb.grad(y.sum(), x)
    (tensor([ 3., 12.]),)
    >>> (g,) = anb.grad(cube(x).sum(), x, create_graph=True)
    >>> anb.grad(g.sum(), x)  # 6 x
    (tensor([ 6., 12.]),)
    >>> anb.autograd.unregister_op("cube")
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"an op name must be an identifier, got {name!r}")
    count = len(vjps) if not callable(vjps) else 1
    vjps = _per_input(vjps, count, "vjps")
    rules = _per_input(rules, count, "rules")
    if all(v is None for v in vjps):
        raise ValueError("vjps: at least one input needs a VJP kernel")
    _check_kernel(forward, "forward", count + 1)
    for k, kernel in enumerate(vjps):
        if kernel is not None:
            _check_kernel(kernel, f"vjps[{k}]", count + 3)
    for k, rule in enumerate(rules):
        if rule is not None and not callable(rule):
            raise TypeError(f"rules[{k}] must be callable, got {type(rule).__name__}")
        if rule is not None and vjps[k] is None:
            raise ValueError(f"rules[{k}] is given but input {k} has no VJP kernel")
    existing = REGISTRY.get(name)
    if existing is not None or name in FUNCTIONS:
        if not (replace and isinstance(existing, CustomOp)):
            raise ValueError(
                f"an op named {name!r} is already registered"
                + ("" if isinstance(existing, CustomOp) else " (built in)")
                + "; pick another name"
                + (" or pass replace=True" if isinstance(existing, CustomOp) else "")
            )
        unregister_op(name)
    CustomOp(
        name,
        forward,
        vjps,
        rules,
        output_shape,
        output_dtype,
        doc or f"The custom op ``{name}`` (registered with register_op).",
    )
    return FUNCTIONS[name]


def unregister_op(name):
    """Remove a custom op made by :func:`register_op` from the registry.

    Tensors already computed with it keep working (their nodes hold the op).

    Parameters
    ----------
    name : str

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.autograd.unregister_op("exp")
    Traceback (most recent call last):
    ValueError: 'exp' is not a custom op: only ops made by register_op can be unregistered
    """
    op = REGISTRY.get(name)
    if not isinstance(op, CustomOp):
        raise ValueError(
            f"{name!r} is not a custom op: only ops made by register_op can be unregistered"
        )
    del REGISTRY[name]
    FUNCTIONS.pop(name, None)
