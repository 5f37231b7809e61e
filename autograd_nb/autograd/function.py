"""``Function``: a differentiable op written in Python, with torch.autograd.Function's protocol.

A subclass defines two static methods::

    forward(ctx, *args, **kwargs) -> Tensor or tuple
    backward(ctx, *grad_outputs) -> Tensor, None, or one of them per positional argument

and is called as ``MyFunction.apply(*args)``. ``forward`` runs under ``no_grad``; its result
joins the graph through one node whose op is an adapter (an :class:`Op` that is *not*
registered): its kernel-path ``vjp`` calls ``backward`` with grad mode off, and its
differentiable ``rule`` calls the same ``backward`` with grad mode on, so ``create_graph=True``
differentiates through it whenever ``backward`` is written with autograd_nb ops.

The engine asks an op for one input's VJP at a time; ``backward`` answers for all inputs at
once, so its result is kept on the context for the other inputs of the same backward pass.
"""

import weakref

import numpy as np

from .. import tape
from ..ops import _broadcast
from ..ops.registry import Op, call
from ..tensor import Tensor, dual_level_open
from . import forward_ad

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


class FunctionCtx:
    """The ``ctx`` a :class:`Function`'s ``forward`` and ``backward`` share.

    Besides the methods below it takes any attribute (``ctx.axis = 1``), for non-Tensor
    values ``backward`` needs.

    Attributes
    ----------
    needs_input_grad : tuple of bool
        Per positional argument of ``apply``: whether a gradient is wanted for it (a Tensor
        that requires grad, with grad mode on). ``backward`` may skip computing the others.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> class Scale(anb.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x, factor):
    ...         ctx.factor = factor
    ...         return x * factor
    ...     @staticmethod
    ...     def backward(ctx, grad_output):
    ...         return grad_output * ctx.factor, None
    >>> x = anb.tensor([1.0, 2.0], requires_grad=True)
    >>> Scale.apply(x, 3.0).sum().backward()
    >>> x.grad
    tensor([3., 3.])
    """

    def __init__(self):
        self.needs_input_grad = ()
        self._to_save = ()
        self._saved = None  # resolved after forward: ("tensor", t) / ("output", ...) / None
        self._versions = ()
        self._freed = False
        self._non_differentiable = set()
        self._materialize_grads = True
        self._nodes = None  # weak references to the node of each differentiable output
        self._function_node = None
        self._cache = None

    def save_for_backward(self, *tensors):
        """Keep ``tensors`` (inputs, outputs or intermediates; None allowed) for ``backward``.

        They come back from :attr:`saved_tensors`. Modifying one of them in place before
        ``backward`` makes the backward raise, as for the built-in ops.
        """
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_backward can only save Tensors or None, but argument {i} is "
                    f"{type(t).__name__}; keep other values as attributes of ctx"
                )
        self._to_save = tensors

    @property
    def saved_tensors(self):
        """The tensors given to :meth:`save_for_backward`, as a tuple.

        In ``backward`` with ``create_graph=True`` they are connected to the graph, so
        operations on them are differentiated again.
        """
        if self._freed:
            raise RuntimeError(tape.FREED_MESSAGE)
        if self._saved is None:  # still inside forward
            return tuple(self._to_save)
        self._check_versions()
        return tuple(self._unpack(entry) for entry in self._saved)

    def mark_non_differentiable(self, *outputs):
        """Declare outputs of ``forward`` that have no gradient (indices, masks).

        They are returned with ``requires_grad=False``; ``backward`` still receives a
        grad_output for each of them (zeros).
        """
        self._non_differentiable.update(id(t) for t in outputs)

    def set_materialize_grads(self, value):
        """Whether ``backward`` gets zeros (True, the default) or None for the grad_outputs
        of outputs that have no gradient (non-Tensor or non-differentiable outputs)."""
        self._materialize_grads = bool(value)

    # -- internals -------------------------------------------------------------------------

    def _check_versions(self):
        for i, (box, version) in enumerate(self._versions):
            if box[0] != version:
                raise RuntimeError(
                    tape.INPLACE_MESSAGE.format(
                        index=i, name=self._name + "Backward", now=box[0], then=version
                    )
                )

    def _unpack(self, entry):
        if entry is None:
            return None
        if entry[0] == "tensor":
            return entry[1]
        _, position, data, box = entry
        return Tensor._make(data, node=self._output_node(position), version=box)

    def _output_node(self, position):
        reference = self._nodes.get(position)
        node = reference() if reference is not None else None
        if node is None:
            # The output was dropped; its node holds no state, so an equal one stands in.
            function_node = self._function_node()
            if function_node is None:
                return None
            node = _OutputNode.make(function_node, self._layout[position])
            self._nodes[position] = weakref.ref(node)
        return node


class _FunctionNode(tape.Node):
    """The node of a Function application: its saved tensors live on the ctx."""

    __slots__ = ()

    @property
    def ctx(self):
        return self.attrs["ctx"]

    def needs_saved(self):
        return bool(self.ctx._saved)

    def check_saved(self):
        ctx = self.ctx
        if ctx._freed:
            raise RuntimeError(tape.FREED_MESSAGE)
        ctx._check_versions()

    def free(self):
        ctx = self.ctx
        ctx._cache = None
        if ctx._saved:
            ctx._saved = None
            ctx._versions = ()
            ctx._freed = True
            self.freed = True

    def __repr__(self):
        return f"<{self.op.name}Backward>"


class _OutputNode(tape.Node):
    """One output of a multi-output Function: routes its gradient into the packed slot.

    The Function's node sees the gradients of all its differentiable outputs as one flat
    buffer (the engine keeps one gradient slot per node); each output's node adds its part.
    """

    __slots__ = ()

    @classmethod
    def make(cls, function_node, segment):
        start, stop, shape, dtype = segment
        attrs = {
            "start": start,
            "stop": stop,
            "total": function_node.shape[0],
            "dtype": function_node.dtype,
        }
        return cls(_SELECT, (function_node,), attrs, (None,), None, (), shape, dtype)

    @property
    def name(self):
        return self.edges[0].name

    def __repr__(self):
        return f"<{self.edges[0].op.name}Backward>"


class _SelectOp(Op):
    """Adapter op of :class:`_OutputNode` (not registered)."""

    name = "function_output"
    family = "function"
    method = False

    def __init__(self):
        """An adapter: unlike Op.__init__, it adds no registry entry and no public function."""

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        grad_input[attrs["start"] : attrs["stop"]] += grad_output.reshape(-1)

    vjp_numpy = vjp  # (NumPy already: tier 0's backward runs it as it is)

    def rule(self, k, grad_output, inputs, output, attrs):
        flat = call("reshape", grad_output, shape=(-1,))
        if flat.dtype != attrs["dtype"]:
            flat = call("astype", flat, dtype=attrs["dtype"])
        zeros = Tensor._make(np.zeros(attrs["total"], dtype=attrs["dtype"]))
        return call("setitem", zeros, flat, index=slice(attrs["start"], attrs["stop"]))


_SELECT = _SelectOp()


class FunctionOp(Op):
    """The adapter op behind every node of one :class:`Function` subclass (not registered).

    ``vjp`` and ``rule`` follow the registry's calling convention (see
    :mod:`autograd_nb.ops.registry`) and call the subclass's ``backward``.
    """

    family = "function"
    method = False
    n_inputs = None

    def __init__(self, function):  # an adapter: no registry entry, no public function
        self.function = function
        self.name = function.__name__

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        ctx = attrs["ctx"]
        grad = _gradient(ctx, self.function, k, grad_output, recording=False)
        if grad is None:
            return
        data = grad._data if isinstance(grad, Tensor) else np.asarray(grad)
        data = _reduce_to_shape(data, grad_input.shape, self.name, k)
        grad_input += data.astype(grad_input.dtype, copy=False)

    vjp_numpy = vjp  # (the subclass's own backward, as the compiled walk runs it)

    def rule(self, k, grad_output, inputs, output, attrs):
        ctx = attrs["ctx"]
        grad = _gradient(ctx, self.function, k, grad_output, recording=True)
        shape, dtype = ctx._input_meta[k]
        if grad is None:
            return Tensor._make(np.zeros(shape, dtype=dtype))
        if not isinstance(grad, Tensor):
            grad = Tensor._make(np.array(grad, dtype=dtype))
        if grad.shape != shape:
            _check_expandable(grad.shape, shape, self.name, k)
            grad = _broadcast.sum_to_shape(grad, shape)
        return grad


def _gradient(ctx, function, k, grad_output, recording):
    """Input ``k``'s part of ``function.backward`` at ``grad_output``, run once per pass."""
    cache = ctx._cache
    if cache is None or cache[0] is not grad_output or cache[1] != recording:
        grads = _call_backward(ctx, function, grad_output, recording)
        pending = {i for i, edge in enumerate(ctx._edges) if edge is not None}
        cache = ctx._cache = [grad_output, recording, grads, pending]
    grads, pending = cache[2], cache[3]
    pending.discard(k)
    if not pending:  # every input served: drop the references
        ctx._cache = None
    return grads[k]


def _call_backward(ctx, function, grad_output, recording):
    grad_outputs = _split_grad_output(ctx, grad_output, recording)
    with tape.grad_mode(recording):
        result = function.backward(ctx, *grad_outputs)
    if not isinstance(result, tuple):
        result = (result,)
    expected = len(ctx._edges)
    if len(result) < expected or any(g is not None for g in result[expected:]):
        raise RuntimeError(
            f"function {function.__name__}Backward returned an incorrect number of gradients "
            f"(expected {expected}, got {len(result)}): return one gradient (or None) per "
            "positional argument of forward"
        )
    for k, grad in enumerate(result[:expected]):
        if grad is not None and not ctx._is_tensor_argument[k]:
            raise RuntimeError(
                f"function {function.__name__}Backward returned a gradient different than "
                f"None at position {k}, but the corresponding forward input was not a Tensor"
            )
    return result[:expected]


def _split_grad_output(ctx, grad_output, recording):
    """One grad_output per output of forward, from the node's gradient slot."""
    wrap = (lambda g: g) if recording else Tensor._make
    grads = []
    for position, segment in enumerate(ctx._layout):
        meta = ctx._output_meta[position]
        if segment is None:
            if meta is None or not ctx._materialize_grads:
                grads.append(None)
            else:
                grads.append(Tensor._make(np.zeros(meta[0], dtype=meta[1])))
        elif segment == "whole":
            grads.append(wrap(grad_output))
        else:
            start, stop, shape, dtype = segment
            if recording:
                part = call("getitem", grad_output, index=slice(start, stop))
                part = call("reshape", part, shape=shape)
                if part.dtype != dtype:
                    part = call("astype", part, dtype=dtype)
            else:
                part = Tensor._make(grad_output[start:stop].reshape(shape).astype(dtype))
            grads.append(part)
    return grads


def _check_expandable(grad_shape, shape, name, k):
    lead = len(grad_shape) - len(shape)
    fits = lead >= 0 and all(
        n == 1 or n == m for n, m in zip(shape, grad_shape[lead:], strict=True)
    )
    if not fits:
        raise RuntimeError(
            f"Function {name}Backward returned an invalid gradient at index {k} - got "
            f"{tuple(grad_shape)} but expected shape compatible with {tuple(shape)}"
        )


def _reduce_to_shape(data, shape, name, k):
    """Sum a NumPy gradient that was broadcast over ``shape`` back down to it."""
    shape = tuple(shape)
    if data.shape == shape:
        return data
    _check_expandable(data.shape, shape, name, k)
    lead = data.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and data.shape[lead + i] != 1
    )
    return data.sum(axis=axes, keepdims=True).reshape(shape)


class Function:
    """Base class of user-defined differentiable functions, as ``torch.autograd.Function``.

    Subclass it with two static methods:

    ``forward(ctx, *args, **kwargs)``
        Computes the result (a Tensor, or a tuple whose Tensors are the outputs) from Tensors
        and any other arguments. It runs under ``no_grad``: nothing inside is recorded.
        Use ``ctx.save_for_backward(*tensors)`` for tensors and plain attributes
        (``ctx.axis = axis``) for other values that ``backward`` needs.
    ``backward(ctx, *grad_outputs)``
        Receives one grad_output per output of ``forward`` (zeros for outputs that have no
        gradient, None for non-Tensor outputs) and returns one gradient per positional
        argument of ``forward``: a Tensor (or array) of that argument's shape, or None for
        no gradient. A gradient of a broadcast shape is summed down to the argument's shape.
        With ``create_graph=True`` it runs with grad mode on, so if it is written with
        autograd_nb ops its result can be differentiated again.

    Call it with ``MyFunction.apply(*args, **kwargs)``. Keyword arguments reach ``forward``
    but take no gradient. The result's ``grad_fn`` prints as ``<MyFunctionBackward>``.

    torch 2's split form also works: a ``forward(*args)`` without ``ctx`` and a
    ``setup_context(ctx, inputs, output)`` static method that fills ``ctx``.

    The Tensors ``apply`` returns are new Tensor objects that share data (and version
    counter) with those ``forward`` returned, so a tensor the caller already holds (an
    input returned unchanged) is never rewired into the graph. In-place forwards (torch's
    ``ctx.mark_dirty``) are not supported.

    Examples
    --------
    ``exp`` with a hand-written backward that reuses the forward's result:

    >>> import autograd_nb as anb
    >>> class Exp(anb.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         y = anb.exp(x)
    ...         ctx.save_for_backward(y)
    ...         return y
    ...     @staticmethod
    ...     def backward(ctx, grad_output):
    ...         (y,) = ctx.saved_tensors
    ...         return grad_output * y
    >>> x = anb.tensor([0.0, 1.0], requires_grad=True)
    >>> y = Exp.apply(x)
    >>> y.grad_fn
    <ExpBackward>
    >>> y.sum().backward()
    >>> x.grad
    tensor([1.        , 2.71828183])

    Several outputs: ``backward`` receives one grad_output per output.

    >>> class SinCos(anb.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return anb.sin(x), anb.cos(x)
    ...     @staticmethod
    ...     def backward(ctx, grad_sin, grad_cos):
    ...         (x,) = ctx.saved_tensors
    ...         return grad_sin * anb.cos(x) - grad_cos * anb.sin(x)
    >>> x = anb.tensor([0.0], requires_grad=True)
    >>> s, c = SinCos.apply(x)
    >>> anb.grad(s + c, x, grad_outputs=anb.ones(1))
    (tensor([1.]),)
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        """Compute the outputs; override it (as a ``@staticmethod``)."""
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function."
        )

    @staticmethod
    def backward(ctx, *grad_outputs):
        """Return one gradient per positional argument; override it (``@staticmethod``)."""
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD."
        )

    @staticmethod
    def setup_context(ctx, inputs, output):
        """Optional (torch 2's form): fill ``ctx`` after a ``forward(*args)`` without ctx.

        When a subclass defines it, ``forward`` takes no ``ctx`` and this receives the
        positional arguments as ``inputs`` and what ``forward`` returned as ``output``.
        """

    def __init__(self, *args, **kwargs):
        raise RuntimeError(
            f"{type(self).__name__} is used through its class: call "
            f"{type(self).__name__}.apply(...) instead of instantiating it"
        )

    @classmethod
    def _adapter(cls):
        op = cls.__dict__.get("_adapter_op")
        if op is None:
            op = FunctionOp(cls)
            cls._adapter_op = op
        return op

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run ``forward`` on ``args`` and connect its outputs to the graph.

        Parameters
        ----------
        *args
            Positional arguments of ``forward``: Tensors (those that require grad receive
            gradients) and any other values.
        **kwargs
            Keyword arguments of ``forward`` (never differentiated).

        Returns
        -------
        Tensor or tuple
            What ``forward`` returned; its floating Tensors require grad when an input does
            (and grad mode is on).

        Examples
        --------
        >>> import autograd_nb as anb
        >>> class Square(anb.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return x * x
        ...     @staticmethod
        ...     def backward(ctx, grad_output):
        ...         (x,) = ctx.saved_tensors
        ...         return 2 * grad_output * x
        >>> x = anb.tensor(3.0, requires_grad=True)
        >>> anb.grad(Square.apply(x), x)
        (tensor(6.),)
        """
        ctx = FunctionCtx()
        recording = tape.is_grad_enabled()
        ctx.needs_input_grad = tuple(
            recording and isinstance(a, Tensor) and a.requires_grad for a in args
        )
        with tape.grad_mode(False):
            if cls.setup_context is Function.setup_context:
                result = cls.forward(ctx, *args, **kwargs)
            else:  # torch 2's split form: forward without ctx, then setup_context
                result = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, result)
        single = not isinstance(result, tuple)
        outputs = [result] if single else list(result)
        differentiable, originals = _claim_outputs(ctx, args, outputs)
        if any(ctx.needs_input_grad) and differentiable:
            _connect(cls, ctx, args, outputs, differentiable, originals)
        if dual_level_open():
            forward_ad.function_tangents(cls, ctx, args, outputs)
        return outputs[0] if single else tuple(outputs)


def _claim_outputs(ctx, args, outputs):
    """Give every Tensor output a Tensor object of its own, sharing data and version counter.

    So the graph never rewires a tensor the caller already holds (an input, a global, one
    kept on ``ctx``). Returns the positions that take gradients, and the ``id`` of the tensor
    that ``forward`` returned at each of them (to recognise saved outputs).
    """
    arguments = {id(a) for a in args if isinstance(a, Tensor)}
    differentiable = []
    originals = {}
    for position, out in enumerate(outputs):
        if not isinstance(out, Tensor):
            continue
        outputs[position] = Tensor._make(out._data, version=out._version)
        if id(out) in ctx._non_differentiable or out.dtype not in _FLOATS:
            continue
        differentiable.append(position)
        if id(out) not in arguments:
            originals.setdefault(id(out), position)
    return differentiable, originals


def _connect(cls, ctx, args, outputs, differentiable, originals):
    """Record the node (and, for several outputs, one node per output) and resolve saves."""
    ctx._name = cls.__name__
    ctx._edges = tuple(
        (a._node if a._node is not None else a) if needs else None
        for a, needs in zip(args, ctx.needs_input_grad, strict=True)
    )
    ctx._is_tensor_argument = tuple(isinstance(a, Tensor) for a in args)
    ctx._input_meta = tuple((a.shape, a.dtype) if isinstance(a, Tensor) else None for a in args)
    ctx._output_meta = tuple((o.shape, o.dtype) if isinstance(o, Tensor) else None for o in outputs)
    layout = [None] * len(outputs)
    if len(differentiable) == 1:
        (position,) = differentiable
        layout[position] = "whole"
        shape, dtype = outputs[position].shape, outputs[position].dtype
    else:
        start = 0
        for position in differentiable:
            out = outputs[position]
            layout[position] = (start, start + out.size, out.shape, out.dtype)
            start += out.size
        shape = (start,)
        dtype = np.result_type(*(outputs[p].dtype for p in differentiable))
    ctx._layout = layout
    saved = []
    versions = []
    for t in ctx._to_save:
        if t is None:
            saved.append(None)
            continue
        versions.append((t._version, t._version[0]))
        position = originals.get(id(t))
        if position is None:
            saved.append(("tensor", t))
        else:  # no strong reference from the node to its own output: no cycle
            out = outputs[position]
            saved.append(("output", position, out._data, out._version))
    ctx._saved = tuple(saved)
    ctx._versions = tuple(versions)
    ctx._to_save = ()
    node = _FunctionNode(
        cls._adapter(), ctx._edges, {"ctx": ctx}, (None,) * len(args), None, (), shape, dtype
    )
    ctx._function_node = weakref.ref(node)
    ctx._nodes = {}
    for position in differentiable:
        if layout[position] == "whole":
            out_node = node
        else:
            out_node = _OutputNode.make(node, layout[position])
        outputs[position]._node = out_node
        ctx._nodes[position] = weakref.ref(out_node)
