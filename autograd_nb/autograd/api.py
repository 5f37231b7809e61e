"""``grad`` and ``backward``: torch.autograd's two entry points, with its semantics.

Vocabulary: for outputs ``y`` of inputs ``x``, ``grad_outputs`` holds one vector ``v`` per
output, of that output's shape: the gradient dL/dy of whatever loss L comes after ``y``. The
result is the vector-Jacobian product ``vᵀ · ∂y/∂x`` (summed over the outputs): dL/dx.
"""

import importlib
import threading
import warnings

import numpy as np

from .. import collector, engine, tape, tiering
from ..ops.registry import FUNCTIONS
from ..tensor import Tensor

# (``autograd_nb.tensor`` the attribute is the function that makes tensors)
_tensor_module = importlib.import_module("autograd_nb.tensor")

_NOT_GIVEN = object()

VJP_HINT = (
    " grad_outputs[i] is the vector v of the vector-Jacobian product vᵀ·J, i.e. dL/d(output[i])"
    " for the loss L that comes after it, so it has the shape of output[i]."
)


def recorder_trace():
    """This thread's recording by ``anb.compile`` (``tensor.recorder``), or None."""
    recorder = _tensor_module.recorder
    return None if recorder is None else recorder.trace


def _as_tuple(value, what):
    if isinstance(value, (Tensor, np.ndarray)):
        return (value,)
    if isinstance(value, (tuple, list)):
        return tuple(value)
    raise TypeError(f"{what} must be a Tensor or a sequence of Tensors, not {type(value).__name__}")


def _edge_of(tensor):
    return tensor._node if tensor._node is not None else tensor


def _check_outputs(outputs):
    for i, output in enumerate(outputs):
        if not isinstance(output, Tensor):
            raise TypeError(f"output[{i}] must be a Tensor, not {type(output).__name__}")
        if not output.requires_grad:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn"
            )


def _make_seeds(outputs, grad_outputs, create_graph, is_grads_batched):
    """Pair each output with its grad_output (checked, cast); a list of (edge, grad)."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    else:
        grad_outputs = _as_tuple(grad_outputs, "grad_outputs")
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(
            f"Mismatch in number of grad_outputs: got {len(grad_outputs)} grad_outputs for "
            f"{len(outputs)} outputs; pass one grad_output (the vector v) per output."
        )
    seeds = []
    for i, (output, grad_output) in enumerate(zip(outputs, grad_outputs)):
        if grad_output is None:
            if output.size != 1:
                raise RuntimeError(
                    "grad can be implicitly created only for scalar outputs: output"
                    f"[{i}] has shape {output.shape}; pass grad_outputs (the vector v of "
                    "the vector-Jacobian product, dL/d output, of the output's shape)."
                )
            if output.dtype.kind == "c":
                raise RuntimeError(
                    "grad can be implicitly created only for real scalar outputs but got "
                    f"{output.dtype} (output[{i}]; for a complex output pass its grad_output, "
                    "or take a real loss of it, such as abs(z) ** 2)"
                )
            if is_grads_batched:
                raise RuntimeError(
                    "is_grads_batched=True needs an explicit batch of grad_outputs for "
                    f"output[{i}]"
                )
            grad = _filled(output.shape, 1, output.dtype, output.device)
            grad = Tensor._make(grad) if create_graph else grad
        else:
            grad = _check_grad_output(i, output, grad_output, create_graph, is_grads_batched)
        seeds.append((output, grad))
    return seeds


def _filled(shape, value, dtype, device):
    """A new array of ``value`` on ``device`` (seeds and materialized zeros)."""
    if device == "cpu":
        return np.full(shape, value, dtype=dtype)
    from ..cuda import _device

    return _device.full(shape, value, dtype)


def _check_grad_output(i, output, grad_output, create_graph, is_grads_batched):
    if isinstance(grad_output, Tensor):
        data = grad_output._data
        device = grad_output.device
    else:
        data = np.asarray(grad_output)
        device = "cpu"
    if device != output.device:
        raise RuntimeError(
            f"grad_output[{i}] is on device {device} but output[{i}] is on device "
            f"{output.device}; move one of them (Tensor.to)"
        )
    _check_grad_dtype(i, data.dtype, output.dtype)
    shape = tuple(data.shape)
    if is_grads_batched:
        if len(shape) == 0 or shape[1:] != output.shape:
            raise RuntimeError(
                "If `is_grads_batched=True`, we interpret the first dimension of each "
                "grad_output as the batch dimension. The sizes of the remaining dimensions "
                "are expected to match the shape of corresponding output, but a mismatch was "
                f"detected: grad_output[{i}] has a shape of {shape} and output[{i}] has a "
                f"shape of {output.shape}."
            )
    elif shape != output.shape:
        raise RuntimeError(
            f"Mismatch in shape: grad_output[{i}] has a shape of {shape} and output[{i}] has "
            f"a shape of {output.shape}." + VJP_HINT
        )
    if create_graph:
        if isinstance(grad_output, Tensor):
            return grad_output if grad_output.dtype == output.dtype else grad_output.astype(
                output.dtype)
        return Tensor._make(np.array(data, dtype=output.dtype))
    if device != "cpu":
        from ..cuda import _device

        return data if data.dtype == output.dtype else _device.copy(data, output.dtype)
    return np.asarray(data, dtype=output.dtype)


def _check_grad_dtype(i, dtype, output_dtype):
    """A grad_output's dtype: numeric, and complex exactly where its output is (torch's)."""
    if dtype.kind not in "fiubc":
        raise TypeError(f"grad_output[{i}] must be numeric, not {dtype}")
    if (dtype.kind == "c") != (output_dtype.kind == "c"):
        raise RuntimeError(
            "For complex Tensors, both grad_output and output are required to have the same "
            f"dtype. Mismatch in dtype: grad_output[{i}] has a dtype of {dtype} and "
            f"output[{i}] has a dtype of {output_dtype}."
        )


def _targets(inputs, what):
    for i, tensor in enumerate(inputs):
        if not isinstance(tensor, Tensor):
            raise TypeError(f"{what}[{i}] must be a Tensor, not {type(tensor).__name__}")
        if not tensor.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    return [_edge_of(t) for t in inputs]


def grad(
    outputs,
    inputs,
    grad_outputs=None,
    retain_graph=None,
    create_graph=False,
    only_inputs=_NOT_GIVEN,
    allow_unused=None,
    is_grads_batched=False,
    materialize_grads=False,
):
    """Gradients of ``outputs`` with respect to ``inputs``: vector-Jacobian products.

    Returns, for each input, ``sum_i grad_outputs[i]ᵀ · ∂outputs[i]/∂input``. Nothing is
    accumulated into ``.grad``.

    Parameters
    ----------
    outputs : Tensor or sequence of Tensor
        What is differentiated.
    inputs : Tensor or sequence of Tensor
        With respect to what (leaves or intermediate tensors that require grad).
    grad_outputs : Tensor, array or sequence of them, optional
        The vector ``v`` of the vector-Jacobian product ``vᵀJ``, one per output and of its
        shape: "dL/d output" for the loss L that comes after. ``None`` means ones, allowed
        only for single-element outputs.
    retain_graph : bool, optional
        Keep the saved buffers so the graph can be differentiated again; defaults to
        ``create_graph``.
    create_graph : bool
        Record the backward pass, so the results can be differentiated again.
    only_inputs : bool
        Deprecated and ignored (warns).
    allow_unused : bool, optional
        Return None (or zeros, with ``materialize_grads``) for inputs the outputs don't
        depend on instead of raising; defaults to ``materialize_grads``.
    is_grads_batched : bool
        The first dimension of every grad_output is a batch of independent vectors ``v``;
        each result gains that batch dimension in front.
    materialize_grads : bool
        Zeros instead of None for unused inputs.

    Returns
    -------
    tuple of Tensor or None

    Examples
    --------
    Each ``y[i, j] = x[i] * x[j]``; with ``v`` all ones, the result is ``dL/dx`` for
    ``L = y.sum()``, i.e. ``2 * x.sum()`` in every entry:

    >>> import autograd_nb as anb
    >>> x = anb.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    >>> y = anb.outer(x, x)
    >>> anb.grad(y, x, grad_outputs=anb.ones_like(y))
    (tensor([20., 20., 20., 20.]),)
    """
    if (
        type(outputs) is Tensor and type(inputs) is Tensor and not create_graph
        and not is_grads_batched and not materialize_grads and only_inputs is _NOT_GIVEN
    ):
        done = _one_grad(outputs, inputs, grad_outputs, retain_graph, allow_unused)
        if done is not None:
            return done
    if only_inputs is not _NOT_GIVEN:
        warnings.warn(
            "only_inputs argument is deprecated and is ignored now (defaults to True). To "
            "accumulate gradient for other parts of the graph, please use "
            "autograd_nb.backward.",
            UserWarning,
            stacklevel=2,
        )
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, "
            "but got: allow_unused=False."
        )
    if allow_unused is None:
        allow_unused = materialize_grads
    if retain_graph is None:
        retain_graph = create_graph
    outputs = _as_tuple(outputs, "outputs")
    inputs = _as_tuple(inputs, "inputs")
    _check_outputs(outputs)
    targets = _targets(inputs, "inputs")
    seeds = _make_seeds(outputs, grad_outputs, create_graph, is_grads_batched)
    if is_grads_batched:
        return _batched_grad(
            outputs, inputs, seeds, targets, retain_graph, create_graph, allow_unused,
            materialize_grads,
        )
    return _grad(seeds, inputs, targets, retain_graph, create_graph, allow_unused,
                 materialize_grads)


def _one_grad(output, tensor, grad_output, retain_graph, allow_unused):
    """``grad``'s common case: one output recorded on the CPU, one input that requires
    grad, its grad_output a CPU Tensor of the output's shape and dtype (or None for a real
    scalar output), no ``create_graph``. The same seed, the same backward and the same
    result as the general path, without its sequences and checks (~3 us of a small step);
    None where the general path must decide (it raises the errors)."""
    node = tensor._node
    if node is None:
        if not tensor._requires_grad:
            return None
        node = tensor  # a leaf: its .grad would receive the gradient
    root = output._node
    data = output._data
    if root is None or type(data) is not np.ndarray:
        return None
    if grad_output is None:
        if data.size != 1 or data.dtype.kind == "c":
            return None
        seed = np.full(data.shape, 1, dtype=data.dtype)
    elif type(grad_output) is Tensor:
        # (``_check_grad_output``'s ``np.asarray(data, dtype=output.dtype)`` is this very
        # array where the dtypes are the same)
        seed = grad_output._data
        if (type(seed) is not np.ndarray or seed.dtype != data.dtype
                or seed.shape != data.shape):
            return None
    else:
        return None
    if tiering.backward_pending:
        tiering.note_outputs([data])
    slots, _, _ = engine.plan_and_run(
        [root], [(root, seed)], [node], False, False if retain_graph is None else retain_graph,
        False, False if allow_unused is None else allow_unused,
    )
    value = slots.get(id(node))
    if value is None or isinstance(value, Tensor):
        return (value,)
    return (Tensor._make(value),)


def _grad(seeds, inputs, targets, retain_graph, create_graph, allow_unused, materialize_grads,
          batch=None):
    """Plan, check, run; results per input. With ``batch``, the seeds carry a leading batch
    dimension and so do the results."""
    root_edges = [_edge_of(output) for output, _ in seeds]
    if tiering.backward_pending:
        tiering.note_outputs([output._data for output, _ in seeds])
    slots, _, _ = engine.plan_and_run(
        root_edges, [(edge, g) for edge, (_, g) in zip(root_edges, seeds)], targets, False,
        retain_graph, create_graph, allow_unused, batch,
    )
    lead = () if batch is None else (batch,)
    results = []
    for tensor, edge in zip(inputs, targets):
        value = slots.get(id(edge))
        if value is None:
            if materialize_grads:
                value = _filled(lead + tensor.shape, 0, tensor.dtype, tensor.device)
            else:
                results.append(None)
                continue
        results.append(value if isinstance(value, Tensor) else Tensor._make(value))
    return tuple(results)


def _batched_grad(outputs, inputs, seeds, targets, retain_graph, create_graph, allow_unused,
                  materialize_grads):
    """``grad(..., is_grads_batched=True)``: a batch of independent VJPs in one call.

    Each row ``b`` of every grad_output is one vector ``v``; the result for each input is the
    stack over ``b`` of ``vᵀJ``. The engine runs the plan once with a leading batch dimension
    on every gradient slot, over forward values shared read-only: on the CPU in one call into
    the compiled executor, a ``prange`` over blocks of batch rows
    (``engine.machine.run_batched``: each block runs every VJP for its rows, matmul VJPs
    as one GEMM over the block's stacked rows); where the executor does not apply, as a walk
    handing each op's batched VJP the whole batch (elementwise VJPs as one ``prange`` over
    batch x elements, matmul VJPs as GEMMs over the batch). With ``create_graph=True`` the
    rows are differentiated one by one through the ops' differentiable rules and stacked, so
    the result can be differentiated again.

    Checks the batch sizes agree, then runs the batched plan (or the rows, when recording).
    """
    sizes = {grad.shape[0] for _, grad in seeds}
    if len(sizes) != 1:
        raise RuntimeError(
            "is_grads_batched=True needs the same batch size (first dimension) in every "
            f"grad_output, got {sorted(sizes)}"
        )
    (batch,) = sizes
    if not create_graph:
        return _grad(seeds, inputs, targets, retain_graph, False, allow_unused,
                     materialize_grads, batch=batch)
    rows = []
    for b in range(batch):
        row_seeds = [(output, grad[b]) for output, grad in seeds]
        keep = retain_graph or b < batch - 1
        rows.append(_grad(row_seeds, inputs, targets, keep, True, allow_unused,
                          materialize_grads))
    results = []
    for i in range(len(inputs)):
        column = [row[i] for row in rows]
        results.append(None if not column or column[0] is None else FUNCTIONS["stack"](column))
    return tuple(results)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate the gradients of ``tensors`` into ``.grad`` of the graph's leaves.

    Leaves (and tensors that called ``retain_grad()``) receive ``.grad += dL/dleaf``, where
    ``grad_tensors`` is the vector ``v`` (dL/d tensor) of the vector-Jacobian product, one per
    tensor and of its shape; it may be omitted for single-element tensors. ``inputs``
    restricts which tensors accumulate.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.ones((2, 3), requires_grad=True)
    >>> out = x @ anb.ones((3, 4))
    >>> out.backward(anb.tensor([[1.0, 2, 3, 4], [5, 6, 7, 8]]))
    >>> x.grad
    tensor([[10., 10., 10.],
            [26., 26., 26.]])
    """
    if retain_graph is None:
        retain_graph = create_graph
    recording = recorder_trace()
    if recording is not None:
        recording.refuse("backward() inside (its .grad accumulation)")
    tensors = _as_tuple(tensors, "tensors")
    if grad_tensors is not None and not isinstance(grad_tensors, (tuple, list)):
        grad_tensors = (grad_tensors,)
    _check_outputs(tensors)
    if inputs is not None:
        inputs = _as_tuple(inputs, "inputs")
        if not inputs:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
        targets = _targets(inputs, "inputs")
    else:
        targets = []
    seeds = _make_seeds(tensors, grad_tensors, create_graph, False)
    root_edges = [_edge_of(t) for t in tensors]
    if tiering.backward_pending:
        tiering.note_outputs([t._data for t in tensors])
    all_leaves = inputs is None
    slots, leaves, plan = engine.plan_and_run(
        root_edges, [(edge, g) for edge, (_, g) in zip(root_edges, seeds)], targets, all_leaves,
        retain_graph, create_graph,
    )
    destinations = list(leaves.values()) if all_leaves else list(inputs)
    _fill_grads(destinations, slots, create_graph)
    if all_leaves and plan is not None:  # (no plan: a cached one ran, with no retain_grad)
        _fill_retained(plan, slots, create_graph)


def _fill_grads(destinations, slots, create_graph):
    """``.grad += `` the gradient in ``slots`` of each tensor of ``destinations`` that has
    one."""
    make = Tensor._make
    for tensor in destinations:
        value = slots.get(id(_edge_of(tensor)))
        if value is None:
            continue
        with _grad_lock(tensor):
            if tensor._grad is None and type(value) is np.ndarray:
                tensor._grad = make(value)  # the first gradient: a fresh array of this run
            else:
                _accumulate(tensor, value, create_graph)


def _fill_retained(plan, slots, create_graph):
    for node in plan.nodes:
        if not node.retained:
            continue
        value = slots.get(id(node))
        if value is None:
            continue
        for reference in node.retained:
            tensor = reference()
            if tensor is not None and tensor._node is node:
                with _grad_lock(tensor):
                    _accumulate(tensor, value, create_graph)


#: Held while a ``.grad`` is read and written: threads back-propagating into shared leaves
#: must not both find no gradient, nor interleave their ``+=`` (torch locks per tensor too).
#: A lock per tensor would cost every leaf one: a few, picked by the tensor's ``id``.
_GRAD_LOCKS = tuple(threading.Lock() for _ in range(64))


def _grad_lock(tensor):
    return _GRAD_LOCKS[(id(tensor) >> 4) % len(_GRAD_LOCKS)]


def _store_grad(tensor, grad):
    """``tensor._grad = grad``, where ``grad`` may be a tensor the caller holds or carry a
    graph (``create_graph=True``) that reaches ``tensor``: a cycle that must stay visible to
    the garbage collector (:func:`autograd_nb.collector.keep_tracked`)."""
    collector.keep_tracked(tensor, grad)
    tensor._grad = grad


def _accumulate(tensor, value, create_graph):
    """``tensor.grad += value`` with torch's rules: in place unless recording the graph."""
    # Slots are fresh arrays of this run, owned by no other tensor: wrap, don't copy.
    new = value if isinstance(value, Tensor) else Tensor._make(value)
    current = tensor._grad
    if current is None:
        _store_grad(tensor, new)
    elif create_graph or current.requires_grad:
        _store_grad(tensor, current + new)
    elif current.device != "cpu":
        from ..cuda import _device

        _device.add_into(current._data, new._data)
        current._version[0] += 1
        tape.mutated()
    else:
        current._data += new._data
        current._version[0] += 1
        tape.mutated()
