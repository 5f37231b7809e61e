"""SciPy's ``scipy.integrate.odeint``, differentiable by the adjoint method.

The forward solve is SciPy's own LSODA (the values are ``scipy.integrate.odeint``'s). The
gradient with respect to the initial state, the time points and the Tensors in ``args``
comes from the adjoint system, integrated backward with SciPy's ``odeint`` between
consecutive time points (as HIPS autograd's ``odeint`` does): the state is re-integrated
backward beside the adjoint, so the forward keeps only the outputs at ``t``.
"""

import numbers
import warnings
import weakref

import numpy as np
import scipy.integrate

from .. import numpy as anp
from ..autograd.api import grad
from ..autograd.function import Function
from ..replay import CompileWarning
from ..replay import compile as compile_function
from ..tape import grad_mode, is_grad_enabled
from ..tensor import Tensor

__all__ = ["odeint"]

# The solver options the backward (adjoint) solve shares with the forward one.
_ADJOINT_OPTIONS = ("rtol", "atol", "mxstep", "hmax", "hmin", "mxordn", "mxords")
_DEFAULT_TOL = 1.49012e-8  # odeint's own default rtol and atol


def odeint(func, y0, t, args=(), Dfun=None, col_deriv=0, full_output=0, ml=None, mu=None,
           rtol=None, atol=None, tcrit=None, h0=0.0, hmax=0.0, hmin=0.0, ixpr=0, mxstep=0,
           mxhnil=0, mxordn=12, mxords=5, printmessg=0, tfirst=False):
    """Integrate ``dy/dt = func(y, t, *args)``, differentiable in ``y0``, ``t`` and ``args``.

    SciPy's :func:`scipy.integrate.odeint`, with its arguments, defaults and meaning (the
    forward solve *is* SciPy's LSODA, so the values equal SciPy's). Where ``y0``, ``t`` or an
    element of ``args`` is a Tensor the result is a Tensor whose gradient flows to them,
    computed by the adjoint method; where none is, the result is SciPy's own.

    Parameters
    ----------
    func : callable ``func(y, t, *args)`` (``func(t, y, *args)`` with ``tfirst=True``)
        The right-hand side, written with autograd_nb ops (``import autograd_nb.numpy as
        np``). It returns an array of ``y``'s shape: a Tensor, a NumPy array, or a list of
        scalars (Tensors or numbers). The forward solve calls it on NumPy arrays; the
        backward on Tensors, to take its vector-Jacobian products with ``autograd_nb.grad``.
    y0 : array_like or Tensor
        The initial state (1-D, or a scalar).
    t : array_like or Tensor
        The time points, a monotonic sequence whose first element is the initial time.
    args : tuple, optional
        Extra arguments of ``func``; the Tensors among them receive gradients.
    Dfun, col_deriv, full_output, ml, mu, rtol, atol, tcrit, h0, hmax, hmin, ixpr, mxstep, \
mxhnil, mxordn, mxords, printmessg, tfirst
        As :func:`scipy.integrate.odeint`; they configure the forward solve. ``Dfun`` is
        called on NumPy arrays.

    Returns
    -------
    y : Tensor or ndarray, shape (len(t), len(y0))
        The state at each time in ``t``, with ``y0`` in the first row.
    infodict : dict
        Only with ``full_output=True``: SciPy's dictionary of the forward solve.

    Raises
    ------
    TypeError
        When ``func`` returns something that is not an array of numbers.
    RuntimeError
        When a gradient computed with ``create_graph=True`` through ``odeint`` is
        differentiated again (the adjoint's result is not itself differentiable).

    Notes
    -----
    The gradient is the adjoint method's. The backward pass walks the intervals
    ``[t[i-1], t[i]]`` from the last: on each it re-solves ``y`` forward from the stored
    ``y(t[i-1])`` with dense output (``solve_ivp``'s LSODA), then integrates the adjoint
    ``a`` (with the running gradients of ``t[0]`` and of ``args``: ``len(y0) + 1 +
    size(args)`` equations) backward with SciPy's ``odeint``, reading ``y`` from that
    solution, and adds the incoming gradient of ``y(t[i-1])``. Integrating ``y`` backward
    beside the adjoint instead (HIPS autograd's way) fails on stiff problems, whose decaying
    modes grow backward. Both solves use the forward's ``rtol`` and ``atol`` (their smallest
    elements, when arrays); the adjoint's also its ``mxstep``, ``hmax``, ``hmin``, ``mxordn``
    and ``mxords``. A full ``Dfun`` (no ``ml``/``mu``) also serves the re-solve of ``y``; the
    adjoint's Jacobian is LSODA's finite differences; ``tcrit`` and ``h0`` apply to the
    forward solve only.

    Each evaluation of the adjoint's right-hand side is one vector-Jacobian product of
    ``func``, taken by ``autograd_nb.grad`` inside a function compiled once per ``func``
    (``anb.compile``; a ``func`` the replay cannot run runs eagerly, with the same values).
    The gradient costs tens to a hundred plain solves (docs/benchmarking.rst, "What
    ``odeint``'s gradient costs"). Memory: the forward keeps only its outputs at ``t``
    (``len(t) * len(y0)`` numbers), never the solver's steps; the backward holds one
    interval's dense solution at a time. ``dL/dt[i] = g[i] . func(y(t[i]), t[i])`` for
    ``i >= 1``; ``dL/dt[0]`` comes from the adjoint.

    With ``create_graph=True`` the first derivative is right but cannot be differentiated
    again: doing so raises a RuntimeError, as torch's ``once_differentiable``. Inside
    ``anb.compile`` a call to ``odeint`` makes that signature run eagerly, with one
    ``CompileWarning`` (the forward hands the values to SciPy).

    Examples
    --------
    Exponential decay ``dy/dt = -k y``; the gradient in ``k`` is ``-t y0 exp(-k t)``:

    >>> import autograd_nb as anb
    >>> from autograd_nb.scipy.integrate import odeint
    >>> k = anb.tensor(0.5, requires_grad=True)
    >>> y = odeint(lambda y, t, k: -k * y, anb.tensor([1.0]), [0.0, 2.0], args=(k,),
    ...            rtol=1e-10, atol=1e-10)
    >>> round(y[1, 0].item(), 6)
    0.367879
    >>> (dk,) = anb.grad(y[1, 0], k)
    >>> round(dk.item(), 6)
    -0.735759
    """
    options = dict(
        Dfun=Dfun, col_deriv=col_deriv, full_output=full_output, ml=ml, mu=mu, rtol=rtol,
        atol=atol, tcrit=tcrit, h0=h0, hmax=hmax, hmin=hmin, ixpr=ixpr, mxstep=mxstep,
        mxhnil=mxhnil, mxordn=mxordn, mxords=mxords, printmessg=printmessg, tfirst=tfirst,
    )
    if Dfun is not None:
        options["Dfun"] = _numpy_rhs(Dfun)
    y0, t = _stacked(y0), _stacked(t)
    if not isinstance(args, tuple) or not any(isinstance(a, Tensor) for a in (y0, t, *args)):
        # (SciPy's own, and its error for args that are not a tuple)
        return scipy.integrate.odeint(_numpy_rhs(func), y0, t, args=args, **options)
    info = {}
    y = _ODEInt.apply(func, options, info, y0, t, *args)
    return (y, info["infodict"]) if full_output else y


def _stacked(x):
    """A list of Tensors (``[x0, v0]``) as one Tensor; anything else unchanged."""
    if isinstance(x, (list, tuple)) and any(isinstance(v, Tensor) for v in x):
        return anp.array(x)
    return x


def _values(x):
    """A Tensor's NumPy array; anything else unchanged."""
    return x.numpy() if isinstance(x, Tensor) else x


def _as_array(result, numpy):
    """``func``'s result as a NumPy array (``numpy``) or as a Tensor, or a TypeError."""
    if isinstance(result, (list, tuple)) and any(isinstance(r, Tensor) for r in result):
        if numpy:
            result = [_values(r) for r in result]
        else:
            return anp.array(result)
    if isinstance(result, Tensor):
        return result.numpy() if numpy else result
    if isinstance(result, (np.ndarray, numbers.Number, list, tuple)):
        array = np.asarray(result)
        if array.dtype.kind in "biufc":
            return array if numpy else Tensor._make(array.astype(np.float64))
    raise TypeError(
        "odeint: func must return an array of numbers (a Tensor, a NumPy array or a list of "
        f"scalars), but it returned {type(result).__name__}"
    )


def _numpy_rhs(func):
    """``func`` as SciPy calls it (on NumPy arrays), returning a NumPy array."""

    def rhs(*arguments):
        return _as_array(func(*arguments), numpy=True)

    return rhs


def _tensor_args(args):
    """``args`` for the backward's evaluations: Tensors and floating NumPy arrays as fresh
    tensors (floating ones in float64), requiring grad where the original does, other values
    as they are; and the positions of those requiring grad."""
    leaves, wanted = [], []
    for i, a in enumerate(args):
        floating = isinstance(a, np.ndarray) and a.dtype.kind == "f"
        if isinstance(a, Tensor) or floating:
            data = np.array(_values(a))
            if data.dtype.kind in "fc":
                data = data.astype(np.result_type(data.dtype, np.float64))
            leaf = Tensor._make(data)
            if isinstance(a, Tensor) and a.requires_grad:
                leaf.requires_grad_(True)
                wanted.append(i)
            leaves.append(leaf)
        else:
            leaves.append(a)
    return leaves, wanted


def _hashable(values):
    try:
        hash(tuple(values))
    except TypeError:
        return False
    return True


#: func -> {tfirst: its compiled VJP}: a fit calls odeint with the same func at every step,
#: and a replayed VJP is ~3x faster than an eager one (docs/benchmarking.rst, odeint).
_COMPILED = weakref.WeakKeyDictionary()


def _compiled_vjp(func, tfirst):
    """``anb.compile`` of ``(y, t, cotangent, *args) -> (func(y, t), its VJPs)``."""
    try:
        per_func = _COMPILED.setdefault(func, {})
        reference = weakref.ref(func)  # the cache's values must not keep func alive
    except TypeError:  # not weakly referable: compile for this backward only
        per_func = {}
        reference = lambda: func  # noqa: E731
    if tfirst not in per_func:

        def vjp(y, t, cotangent, wanted, *args):
            rhs = reference()
            out = _as_array(rhs(t, y, *args) if tfirst else rhs(y, t, *args), numpy=False)
            inputs = [y, t] + [args[i] for i in wanted]
            if not out.requires_grad:
                return (out, *[anp.zeros_like(x) for x in inputs])
            grads = grad(out, inputs, grad_outputs=anp.reshape(cotangent, out.shape),
                         allow_unused=True, materialize_grads=True)
            return (out, *grads)

        per_func[tfirst] = compile_function(vjp)
    return per_func[tfirst]


class _Adjoint:
    """The augmented system's right-hand side for one backward pass.

    The state packs ``(y, a, a_t, a_args)``: the ODE state, its adjoint, the accumulating
    gradient of ``t[0]`` and that of the Tensors in ``args`` that require grad. ``func``'s
    VJPs are taken by a compiled function (``anb.compile``), eager where ``args`` holds
    values a compiled function cannot take as arguments.
    """

    def __init__(self, func, tfirst, args, size):
        self.func, self.tfirst, self.size = func, tfirst, size
        self.args, wanted = _tensor_args(args)
        self.wanted = tuple(wanted)
        self.numpy_args = [_values(a) for a in args]
        self.path = None  # y(t) on the interval being integrated (a dense solution)
        self.jacobian = None
        self.arg_shapes = [self.args[i].shape for i in self.wanted]
        self.arg_sizes = [int(np.prod(s, dtype=np.int64)) for s in self.arg_shapes]
        plain = [a for a in self.args if not isinstance(a, Tensor)]
        self.compiled = _compiled_vjp(func, tfirst) if _hashable(plain) else None

    def use_dfun(self, options):
        """The forward's full (not banded) ``Dfun``, as ``solve_ivp``'s ``jac(t, y)``."""
        dfun = options["Dfun"]
        if dfun is None or options["ml"] is not None or options["mu"] is not None:
            return
        args, transpose = self.numpy_args, bool(options["col_deriv"])

        def jacobian(t, y):
            matrix = dfun(t, y, *args) if self.tfirst else dfun(y, t, *args)
            return np.asarray(matrix).T if transpose else matrix

        self.jacobian = jacobian

    def call(self, y, t):
        """``func(y, t)`` on NumPy values, as a flat NumPy array."""
        args = self.numpy_args
        result = self.func(t, y, *args) if self.tfirst else self.func(y, t, *args)
        return _as_array(result, numpy=True).reshape(-1)

    def vjp(self, y, t, cotangent):
        """``func(y, t)`` and the VJPs of ``cotangent`` in y, t and the wanted args."""
        y_leaf = Tensor._make(np.array(y, dtype=np.float64)).requires_grad_(True)
        t_leaf = Tensor._make(np.array(t, dtype=np.float64)).requires_grad_(True)
        cotangent = Tensor._make(np.array(cotangent, dtype=np.float64))
        with grad_mode(True):
            vjp = self.compiled or self._eager_vjp
            out, *grads = vjp(y_leaf, t_leaf, cotangent, self.wanted, *self.args)
        return out.numpy().reshape(-1), [g.numpy() for g in grads]

    def _eager_vjp(self, y, t, cotangent, wanted, *args):
        out = self.func(t, y, *args) if self.tfirst else self.func(y, t, *args)
        out = _as_array(out, numpy=False)
        inputs = [y, t] + [args[i] for i in wanted]
        if not out.requires_grad:
            return (out, *[np.zeros(x.shape) for x in inputs])
        grads = grad(out, inputs, grad_outputs=cotangent.reshape(out.shape),
                     allow_unused=True, materialize_grads=True)
        return (out, *grads)

    def __call__(self, state, t):
        n = self.size
        _, (g_y, g_t, *g_args) = self.vjp(self.path(t), t, -state[:n])
        parts = [g_y, np.reshape(g_t, 1)] + [np.reshape(g, -1) for g in g_args]
        return np.concatenate(parts)

    def split_args(self, flat):
        grads, start = [], 0
        for shape, size in zip(self.arg_shapes, self.arg_sizes, strict=True):
            grads.append(flat[start : start + size].reshape(shape))
            start += size
        return grads


def _adjoint_options(options):
    """The backward solves' tolerances and limits: the forward's, ``atol`` as one number."""
    chosen = {name: options[name] for name in _ADJOINT_OPTIONS}
    for name, default in (("rtol", _DEFAULT_TOL), ("atol", _DEFAULT_TOL)):
        if chosen[name] is None:
            chosen[name] = default
        chosen[name] = float(np.min(chosen[name]))
    return chosen


def _dense_path(adjoint, y_start, t_start, t_stop, options):
    """y(t) between two time points, re-solved forward from the stored y(t_start) with
    dense output (LSODA): the backward solve reads y from it, never integrating y backward
    (unstable for a stiff, dissipative system)."""
    solution = scipy.integrate.solve_ivp(
        lambda t, y: adjoint.call(y, t), (t_start, t_stop), y_start, method="LSODA",
        dense_output=True, rtol=options["rtol"], atol=options["atol"], jac=adjoint.jacobian,
    )
    if not solution.success:
        raise RuntimeError(f"odeint's backward pass: re-solving y failed: {solution.message}")
    return solution.sol


def _backward_solve(adjoint, ys, times, g, options):
    """The adjoint sweep: the gradients of y0, t and the wanted args.

    From the last time point to the first, the adjoint ``a`` (with the running gradients of
    ``t[0]`` and of the args) is integrated backward over each interval, and the interval's
    start adds its incoming gradient ``g[i - 1]``.
    """
    n_times, n = ys.shape
    solve = {k: v for k, v in options.items() if k not in ("rtol", "atol")}
    a, a_t0 = g[-1].copy(), 0.0
    a_args = np.zeros(sum(adjoint.arg_sizes))
    grad_times = np.zeros(n_times)
    for i in range(n_times - 1, 0, -1):
        grad_times[i] = np.dot(adjoint.call(ys[i], times[i]), g[i])
        a_t0 -= grad_times[i]
        if times[i] != times[i - 1]:
            adjoint.path = _dense_path(adjoint, ys[i - 1], times[i - 1], times[i], options)
            state = np.concatenate([a, [a_t0], a_args])
            state = scipy.integrate.odeint(
                adjoint, state, np.array([times[i], times[i - 1]]), tcrit=[times[i - 1]],
                rtol=options["rtol"], atol=options["atol"], **solve,
            )[1]
            a, a_t0, a_args = state[:n], state[n], state[n + 1 :]
        a = a + g[i - 1]
    grad_times[0] = a_t0
    return a, grad_times, adjoint.split_args(a_args)


class _ODEInt(Function):
    """The differentiable solve: SciPy forward, adjoint backward."""

    @staticmethod
    def forward(ctx, func, options, info, y0, t, *args):
        arrays = [_values(a) for a in args]
        result = scipy.integrate.odeint(
            _numpy_rhs(func), _values(y0), _values(t), args=tuple(arrays), **options
        )
        if options["full_output"]:
            result, info["infodict"] = result
        ctx.func, ctx.options, ctx.args = func, options, args
        ctx.inputs = tuple(a for a in (y0, t, *args) if isinstance(a, Tensor))
        ctx.y0_shape = np.shape(_values(y0))
        ctx.times = np.array(_values(t), dtype=np.float64)
        ctx.ys = result
        return Tensor._make(result)

    @staticmethod
    def backward(ctx, grad_output):
        recording = is_grad_enabled()  # create_graph=True: Function runs backward recording
        with grad_mode(False), warnings.catch_warnings():
            # A func the compiled VJP cannot replay runs eagerly, with the same values.
            warnings.simplefilter("ignore", CompileWarning)
            adjoint = _Adjoint(ctx.func, ctx.options["tfirst"], ctx.args, ctx.ys.shape[1])
            adjoint.use_dfun(ctx.options)
            g = np.array(grad_output.numpy(), dtype=np.float64).reshape(ctx.ys.shape)
            g_y0, g_t, g_args = _backward_solve(
                adjoint, ctx.ys, ctx.times, g, _adjoint_options(ctx.options)
            )
        grads = [None, None, None, g_y0.reshape(ctx.y0_shape), g_t]
        grads += [None] * len(ctx.args)
        for i, g_arg in zip(adjoint.wanted, g_args, strict=True):
            grads[5 + i] = g_arg
        grads = [_wrap(x, ctx.needs_input_grad[k]) for k, x in enumerate(grads)]
        if recording:
            sources = (grad_output, *ctx.inputs)
            grads = [_once(x, sources) if x is not None else None for x in grads]
        return tuple(grads)


def _wrap(x, needed):
    return Tensor._make(np.asarray(x, dtype=np.float64)) if needed and x is not None else None


class _OnceDifferentiable(Function):
    """Passes a first derivative through; differentiating it again raises."""

    @staticmethod
    def forward(ctx, value, *sources):
        return value

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError(
            "odeint's gradient cannot be differentiated again: the adjoint method gives first "
            "derivatives only (a gradient taken with create_graph=True through "
            "autograd_nb.scipy.integrate.odeint is correct, but has no derivative of its own)"
        )


def _once(value, sources):
    return _OnceDifferentiable.apply(value, *sources)
