"""``gradcheck`` and ``gradgradcheck``: the engine's derivatives against finite differences.

As torch's: the analytical Jacobian is assembled row by row from VJPs (one ``grad`` call per
output element, with a one-hot grad_output), the numerical one by central differences, one
input element at a time; they must agree to ``atol + rtol * |numerical|``.
Each Jacobian has one row per input element and one column per output element (torch's
layout).
"""

import warnings

import numpy as np

from ..tensor import Tensor
from .api import grad


class GradcheckError(RuntimeError):
    """Raised by :func:`gradcheck` and :func:`gradgradcheck` when the derivatives disagree.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> issubclass(anb.autograd.GradcheckError, RuntimeError)
    True
    """


def _as_tuple(value):
    if isinstance(value, tuple):
        return value
    if isinstance(value, list):
        return tuple(value)
    return (value,)


def _tensor_outputs(result):
    outputs = _as_tuple(result)
    for i, out in enumerate(outputs):
        if not isinstance(out, Tensor):
            raise TypeError(
                f"gradcheck: the function's output {i} is a {type(out).__name__}; it must "
                "return a Tensor or a tuple of Tensors"
            )
    return outputs


def _checked_inputs(inputs, who):
    positions = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not positions:
        raise ValueError(
            f"{who} expects at least one input tensor to require gradient, but none of them "
            "have requires_grad=True."
        )
    for i in positions:
        if inputs[i].dtype != np.float64:
            warnings.warn(
                f"Input #{i} requires gradient and is not a double precision floating point "
                f"({inputs[i].dtype}). This check will likely fail if all the inputs are not "
                "of double precision floating point.",
                UserWarning,
                stacklevel=3,
            )
    return positions


def _analytical_jacobians(outputs, inputs, positions):
    """``[o][j]``: Jacobian of output ``o`` w.r.t. input ``positions[j]``, from VJPs."""
    targets = [inputs[i] for i in positions]
    jacobians = []
    for out in outputs:
        per_input = [np.zeros((t.size, out.size)) for t in targets]
        if out.requires_grad:
            for m in range(out.size):
                one_hot = np.zeros(out.shape, dtype=out.dtype)
                one_hot.reshape(-1)[m] = 1
                grads = grad(
                    out,
                    targets,
                    grad_outputs=Tensor._make(one_hot),
                    retain_graph=True,
                    allow_unused=True,
                )
                for j, g in enumerate(grads):
                    if g is None:
                        continue
                    if g.shape != targets[j].shape:
                        raise GradcheckError(
                            f"Gradient has shape mismatch: the gradient of input "
                            f"{positions[j]} has shape {g.shape}, the input {targets[j].shape}"
                        )
                    per_input[j][:, m] = g.numpy().reshape(-1)
        jacobians.append(per_input)
    return jacobians


def _evaluate(func, inputs, count):
    outputs = _tensor_outputs(func(*inputs))
    if len(outputs) != count:
        raise GradcheckError(
            f"the function returned {len(outputs)} outputs after a perturbation, {count} before"
        )
    # Copy: an output may share its buffer with an input that is perturbed next.
    return [np.array(out.numpy(), dtype=np.float64).reshape(-1) for out in outputs]


def _numerical_jacobians(func, inputs, positions, outputs, eps):
    """``[o][j]``: central differences, perturbing each element of each checked input."""
    jacobians = [[None] * len(positions) for _ in outputs]
    for j, i in enumerate(positions):
        data = inputs[i].numpy()
        flat = data.reshape(-1)
        columns = [np.zeros((data.size, out.size)) for out in outputs]
        for e in range(data.size):
            original = flat[e].copy()
            flat[e] = original + eps
            plus = _evaluate(func, inputs, len(outputs))
            flat[e] = original - eps
            minus = _evaluate(func, inputs, len(outputs))
            flat[e] = original
            for o in range(len(outputs)):
                columns[o][e] = (plus[o] - minus[o]) / (2 * eps)
        for o in range(len(outputs)):
            jacobians[o][j] = columns[o]
    return jacobians


def _fail(message, raise_exception):
    if raise_exception:
        raise GradcheckError(message)
    return False


def gradcheck(func, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """Check the gradients of ``func`` at ``inputs`` against central finite differences.

    Parameters
    ----------
    func : callable
        Takes ``*inputs`` and returns a Tensor or a tuple of Tensors.
    inputs : Tensor or tuple
        Arguments of ``func``. The Tensors with ``requires_grad=True`` are checked; they
        should be float64 (a warning says so otherwise).
    eps : float
        Perturbation of the finite differences.
    atol, rtol : float
        Each analytical entry ``a`` must match its numerical ``n``:
        ``|a - n| <= atol + rtol * |n|``.
    raise_exception : bool
        Raise :class:`GradcheckError` on a mismatch (True) or return False.

    Returns
    -------
    bool
        True when every Jacobian matches.

    Raises
    ------
    GradcheckError
        On a mismatch, with both Jacobians (rows: input elements, columns: output elements)
        in the message.

    Notes
    -----
    The analytical Jacobian takes one ``grad`` call per output element; the numerical one
    two calls of ``func`` per input element, perturbing the inputs' buffers in place (they
    are restored exactly). An output that does not require grad must have a zero numerical
    Jacobian. Inputs are named by their position in ``inputs``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([0.5, -1.0, 2.0], requires_grad=True)
    >>> anb.autograd.gradcheck(lambda t: anb.sin(t) * t, x)
    True
    >>> class WrongExp(anb.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         return anb.exp(x)
    ...     @staticmethod
    ...     def backward(ctx, grad_output):
    ...         return 2 * grad_output  # should be grad_output * exp(x)
    >>> anb.autograd.gradcheck(WrongExp.apply, x, raise_exception=False)
    False
    """
    inputs = _as_tuple(inputs)
    positions = _checked_inputs(inputs, "gradcheck")
    outputs = _tensor_outputs(func(*inputs))
    analytical = _analytical_jacobians(outputs, inputs, positions)
    numerical = _numerical_jacobians(func, inputs, positions, outputs, eps)
    for o, out in enumerate(outputs):
        for j, i in enumerate(positions):
            a, n = analytical[o][j], numerical[o][j]
            if np.allclose(a, n, rtol=rtol, atol=atol):
                continue
            if not out.requires_grad:
                return _fail(
                    f"Numerical gradient for function expected to be zero: output {o} does "
                    f"not require grad, but its numerical Jacobian with respect to input {i} "
                    f"is\n{_show(n)}",
                    raise_exception,
                )
            return _fail(
                f"Jacobian mismatch for output {o} with respect to input {i},\n"
                f"numerical:{_show(n)}\nanalytical:{_show(a)}\n"
                f"(rows: elements of input {i}, columns: elements of output {o}; "
                f"largest difference {np.max(np.abs(a - n)):.6g}, atol={atol}, rtol={rtol})",
                raise_exception,
            )
    return True


def _show(matrix):
    return "tensor(" + np.array2string(matrix, separator=", ", prefix="tensor(") + ")"


def gradgradcheck(
    func, inputs, grad_outputs=None, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, seed=0
):
    """Check second derivatives of ``func``: :func:`gradcheck` of its first-order VJP.

    The checked function maps ``(*inputs, *grad_outputs)`` to the gradients of ``func``'s
    outputs (those that require grad) with respect to its inputs (those that require grad),
    computed with ``grad(..., create_graph=True)``. So both the double-backward (second
    derivatives with respect to the inputs) and the VJP's linearity in the grad_outputs are
    checked against finite differences. Because ``create_graph=True`` runs the ops'
    differentiable rules while ``create_graph=False`` runs their VJP kernels, it first checks
    that the two give the same first-order gradients at ``inputs``.

    Parameters
    ----------
    func : callable
        Takes ``*inputs`` and returns a Tensor or a tuple of Tensors.
    inputs : Tensor or tuple
        As for :func:`gradcheck`.
    grad_outputs : Tensor or tuple, optional
        One per output of ``func`` that requires grad. Those with ``requires_grad=True`` are
        checked too. By default random ones (uniform in [-1, 1), drawn with ``seed``) that
        require grad.
    eps, atol, rtol, raise_exception :
        As for :func:`gradcheck`.
    seed : int
        Seed of the random grad_outputs.

    Returns
    -------
    bool

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([0.5, -1.0, 2.0], requires_grad=True)
    >>> anb.autograd.gradgradcheck(lambda t: anb.sin(t) * t, x)
    True
    """
    inputs = _as_tuple(inputs)
    _checked_inputs(inputs, "gradgradcheck")
    if grad_outputs is None:
        outputs = [o for o in _tensor_outputs(func(*inputs)) if o.requires_grad]
        rng = np.random.default_rng(seed)
        grad_outputs = tuple(
            Tensor._make(rng.uniform(-1, 1, size=o.shape).astype(o.dtype), requires_grad=True)
            for o in outputs
        )
    else:
        grad_outputs = tuple(
            v if isinstance(v, Tensor) else Tensor._make(np.array(v, dtype=np.float64))
            for v in _as_tuple(grad_outputs)
        )
    count = len(grad_outputs)

    def vjps(function_inputs, vectors, create_graph):
        outputs = [o for o in _tensor_outputs(func(*function_inputs)) if o.requires_grad]
        if len(outputs) != len(vectors):
            raise RuntimeError(
                f"gradgradcheck: {len(vectors)} grad_outputs for {len(outputs)} outputs that "
                "require grad"
            )
        differentiated = [x for x in function_inputs if isinstance(x, Tensor) and x.requires_grad]
        return grad(
            outputs,
            differentiated,
            grad_outputs=list(vectors),
            create_graph=create_graph,
            allow_unused=True,
        )

    def first_order(*args):
        split = len(args) - count
        grads = vjps(args[:split], args[split:], create_graph=True)
        return tuple(g for g in grads if g is not None)

    # The differentiable rules (create_graph=True) and the VJP kernels are separate code:
    # the finite differences below only see the rules, so hold them against the kernels first.
    by_rules = vjps(inputs, grad_outputs, create_graph=True)
    by_kernels = vjps(inputs, tuple(v.detach() for v in grad_outputs), create_graph=False)
    differentiated = [x for x in inputs if isinstance(x, Tensor) and x.requires_grad]
    for x, r, k in zip(differentiated, by_rules, by_kernels, strict=True):
        r = np.zeros(x.shape) if r is None else r.numpy()
        k = np.zeros(x.shape) if k is None else k.numpy()
        if not np.allclose(r, k, rtol=rtol, atol=atol):
            position = next(i for i, y in enumerate(inputs) if y is x)
            return _fail(
                f"First-order gradient mismatch with respect to input {position}: "
                "grad(..., create_graph=True) (the differentiable rules) gave\n"
                f"{_show(r)}\nbut grad(..., create_graph=False) (the VJP kernels) gave\n"
                f"{_show(k)}",
                raise_exception,
            )
    return gradcheck(
        first_order,
        inputs + grad_outputs,
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
    )
