"""The op registry: every differentiable operator of autograd_nb, by name.

An op is defined once, in its family module (``elementwise.py``, ``reduction.py``, ...), as an
instance of a :class:`Op` subclass; constructing it registers it. Everything else (the public
functions, the ``Tensor`` methods, the engine, the tests and the benchmarks) reads the registry.

The calling convention that the engine relies on:

``forward(arrays, attrs) -> ndarray``
    Computes the result into a freshly allocated, C-contiguous array. ``arrays`` are
    C-contiguous NumPy arrays already cast to the op's computation dtype.
``vjp(k, grad_output, saved, attrs, grad_input)``
    *Accumulates* (``+=``) the vector-Jacobian product for input ``k`` into ``grad_input``,
    a preallocated array of input ``k``'s shape. ``saved`` holds the arrays the op asked to
    save (see :attr:`Op.saves`), by input position, and ``saved.output`` the result.
``rule(k, grad_output, inputs, output, attrs) -> Tensor``
    The same derivative written with autograd_nb ops on Tensors, so that it can be recorded
    and differentiated again (``create_graph=True``). Tests hold ``vjp`` and ``rule`` against
    each other and against finite differences.

An op that runs on the GPU names its CUDA twin with :func:`cuda_twin`: a class under
:mod:`autograd_nb.cuda` with the same methods over device arrays (see
:mod:`autograd_nb.cuda.dispatch`).
"""

from typing import NamedTuple

import numpy as np

from .. import config

REGISTRY = {}

#: Public functions by name: one per op with a plain signature, plus composites (functions
#: written with other ops, needing no kernel and no VJP of their own). The package exports them
#: all, and those marked ``method`` become Tensor methods.
FUNCTIONS = {}

_dispatch = None
_view_dispatch = None


def register(op):
    """Add ``op`` to the registry under ``op.name`` (names are unique)."""
    if op.name in REGISTRY:
        raise ValueError(f"an op named {op.name!r} is already registered")
    REGISTRY[op.name] = op
    made = op.make_function()
    if made is not None:
        publish(made, op.name, method=op.method, family=op.family)
    return op


def publish(fn, name=None, method=True, family=None):
    """Export ``fn`` as the public function ``name`` (and a Tensor method if ``method``)."""
    name = name or fn.__name__
    if name in FUNCTIONS:
        raise ValueError(f"a function named {name!r} is already public")
    fn.__name__ = name
    fn.__qualname__ = name
    fn.is_method = method
    fn.family = family
    FUNCTIONS[name] = fn
    return fn


def public(name=None, method=True, family=None):
    """Decorator form of :func:`publish`, for composites and ops with their own signature."""

    def decorate(fn):
        return publish(fn, name, method, family)

    return decorate


def set_dispatch(function, view_function):
    """Install the functions that run an op on Tensors, and one that may return a view (set
    once, by ``autograd_nb.tensor``)."""
    global _dispatch, _view_dispatch
    _dispatch = function
    _view_dispatch = view_function


def call(name, *args, **attrs):
    """Run the registered op ``name`` on Tensors, recording it when grad mode is on.

    Differentiable rules use this to build their results from other ops.
    """
    return _dispatch(REGISTRY[name], args, attrs)


def call_view(name, x, **attrs):
    """``call`` of a one-input op that can return a view of its input (``reshape``): for a CPU
    Tensor the result is a view of its buffer and shares its version counter (an in-place
    change of either is seen by every node that saved the other); otherwise a copy.

    For the internals of composite functions (``matmul``'s operands), whose views never reach
    the user: a public function returns a new buffer.
    """
    return _view_dispatch(REGISTRY[name], x, attrs)


def host_values(x):
    """The values of ``x`` (a Tensor on any device, an array, a list) as a NumPy array, cut
    from the graph: for composites that work out index arrays, masks or constants from the
    values. (``np.asarray`` refuses a CUDA Tensor, as torch's ``numpy()`` does.)"""
    if hasattr(x, "grad_fn") and hasattr(x, "detach"):  # a Tensor (ops do not import it)
        return x.detach().cpu().numpy()
    return np.asarray(x)


def complex_error(name, dtype):
    """The TypeError of an op with no complex case given complex operands (as torch's
    ``"... not implemented for 'ComplexDouble'"``, a TypeError as NumPy's ufuncs raise)."""
    return TypeError(
        f"{name} is not implemented for complex tensors ({np.dtype(dtype).name}): it has no "
        "complex case in NumPy or torch, or autograd_nb does not provide it yet "
        "(see docs/complex.rst)"
    )


def constant_like(x, array):
    """The NumPy ``array`` as a new Tensor without grad, on the device of the Tensor ``x``
    (for results that are constants, such as ``average``'s sum of constant weights)."""
    constant = call("reshape", array, shape=np.shape(array))
    device = getattr(x, "device", "cpu")
    return constant if device == "cpu" else constant.to(device)


def remember(cache, key, value):
    """``cache[key] = value``, emptying ``cache`` first when it holds ``config.OP_CACHE_LIMIT``
    entries."""
    if len(cache) > config.OP_CACHE_LIMIT:
        cache.clear()
    cache[key] = value


def run_key(attrs):
    """``attrs`` as part of a key of an op's ``_run`` cache, or None (no caching) when a value
    is not an int, a bool or None: values that compare equal may prepare differently
    (``axis=1.0`` is an error where ``axis=1`` is not). ``True`` keys as ``1``: the ops that
    use this read such attrs through ``int()`` and ``bool()``.
    """
    key = tuple(attrs.items())
    for _, value in key:
        kind = type(value)
        if kind is not int and kind is not bool and value is not None:
            return None
    return key


class CudaTwin(NamedTuple):
    """Where an op's CUDA implementation lives: the class ``name`` of the module
    ``autograd_nb.cuda.<module>``, imported on the op's first run on the device (so that a
    machine without CUDA never imports numba.cuda)."""

    module: str
    name: str


def cuda_twin(module, name):
    """Class decorator: the op's CUDA implementation is ``autograd_nb.cuda.<module>.<name>``.

    Subclasses inherit it (every :class:`~autograd_nb.ops.elementwise.ElementwiseOp` runs
    the one generated implementation); an op whose CUDA side differs names its own.

    Examples
    --------
    >>> import autograd_nb  # registers every op
    >>> from autograd_nb.ops.registry import REGISTRY
    >>> REGISTRY["sum"].cuda_twin
    CudaTwin(module='reduction', name='Sum')
    """

    def declare(op_class):
        op_class.cuda_twin = CudaTwin(module, name)
        return op_class

    return declare


class ExecSpec(NamedTuple):
    """How the compiled executor runs one VJP (:meth:`Op.exec_spec`): ``driver`` an ``@njit``
    function ``driver(operands, ints, floats, like)`` (:mod:`autograd_nb.ops._pointers`), the
    C-contiguous arrays it reads besides the gradient (``saved``, in order), and its int and
    float attributes."""

    driver: object
    saved: tuple
    ints: tuple
    floats: tuple


class Saved:
    """What a node keeps for its op's VJP: the saved inputs by position, and the output."""

    __slots__ = ("inputs", "output")

    def __init__(self, inputs, output):
        self.inputs = inputs
        self.output = output

    def __getitem__(self, k):
        return self.inputs[k]


class DerivativeNotImplemented(NotImplementedError):
    """A backward needs the gradient of an input whose derivative has no formula
    (``Op.not_implemented``). A NotImplementedError, and so a RuntimeError, as torch's."""


def defines(obj, hook):
    """Whether the class of ``obj`` (an :class:`Op` or a :class:`VJPStrategy`) overrides its
    base's optional method ``hook``: the derived flags that an op author never writes
    (worked out once per class, when it is defined).

    Examples
    --------
    >>> import autograd_nb  # registers every op
    >>> from autograd_nb.ops.registry import REGISTRY, defines
    >>> defines(REGISTRY["getitem"], "input_block"), defines(REGISTRY["sum"], "input_block")
    (True, False)
    >>> defines(REGISTRY["reshape"].vjp_strategy, "identity")
    True
    """
    return hook in obj._defines


def _defined(cls, base, hooks):
    """The names among ``hooks`` whose attribute on ``cls`` is not ``base``'s."""
    return frozenset(h for h in hooks if getattr(cls, h) is not getattr(base, h))


class VJPStrategy:
    """The other ways an op's VJPs may run than one VJP kernel per input, grouped: an op
    names one in :attr:`Op.vjp_strategy`; this base (every op's default) says no to each.

    A strategy is stateless and shared (every elementwise op has the one
    ``ElementwiseVJPs``); each method receives the op first. A subclass overrides the
    questions it may answer yes to, with what the engine then runs:

    - **identity** (:meth:`identity`): VJP ``k`` is the node's gradient, reshaped; the
      schedule hands the gradient buffer on to the input (``reshape``, ``x + y``).
    - **joint** (:meth:`joint`, :meth:`vjp_joint`, :meth:`vjp_joint_numpy` with
      :meth:`has_vjp_joint_numpy`, :meth:`exec_joint_spec`): inputs that are one tensor
      (``x * x``, ``outer(x, x)``) receive the sum of their VJPs in one pass.
    - **split** (:meth:`split`, :meth:`vjp_split`, :meth:`vjp_split_numpy`,
      :meth:`exec_split_spec`): all inputs, distinct tensors, receive their VJPs in one pass
      (``outer(x, y)``), a target each.
    - **backward alone** (:meth:`backward_alone`): the op knows the whole graph behind its
      node and runs its backward without a plan (a replayed call's output).

    The engine asks a question only where the strategy's class overrides it
    (:func:`defines`), so a strategy declares nothing besides its methods.
    """

    _HOOKS = ("identity", "joint", "split", "backward_alone", "vjp_joint_numpy")
    _defines = frozenset()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._defines = _defined(cls, VJPStrategy, cls._HOOKS)

    def identity(self, op, k, node):
        """Whether VJP ``k`` of the recorded ``node`` is the identity: input ``k``'s gradient
        is the node's gradient, reshaped (no arithmetic, no broadcast). The backward then
        hands the node's gradient buffer on to that input instead of adding it into a new
        one."""
        return False

    def joint(self, op, ks, node):
        """Whether the VJPs of inputs ``ks`` (a tuple of two or more input indices) of the
        recorded ``node``, all one tensor, run as one joint VJP that adds their sum into that
        tensor's gradient: :meth:`vjp_joint` (its twin :meth:`vjp_joint_numpy`) and
        :meth:`exec_joint_spec`. Say yes where one pass over the gradient then does what
        one pass per input did (``outer(x, x)``)."""
        return False

    def vjp_joint(self, op, ks, grad_output, saved, attrs, grad_input):
        """Accumulate the sum of VJPs ``ks`` of ``grad_output`` into ``grad_input`` (the
        gradient of the one tensor they are), where :meth:`joint` said yes."""
        raise NotImplementedError

    def vjp_joint_numpy(self, op, ks, grad_output, saved, attrs, grad_input):
        """:meth:`vjp_joint` in NumPy alone, bit for bit (tier 0's twin), where
        :meth:`has_vjp_joint_numpy` says so."""
        raise NotImplementedError

    def has_vjp_joint_numpy(self, op, ks, saved, attrs):
        """Whether :meth:`vjp_joint_numpy` follows :meth:`vjp_joint`'s kernel here; by
        default, whether the strategy defines it."""
        return "vjp_joint_numpy" in self._defines

    def exec_joint_spec(self, op, ks, node, overwrite):
        """:meth:`Op.exec_spec` of the joint VJP of inputs ``ks``: a driver that adds their
        sum into the tensor's gradient buffer, or with ``overwrite`` writes it whole (the
        bits of adding into zeros, as :meth:`Op.exec_set_spec`'s)."""
        return None

    def split(self, op, node):
        """Whether the VJPs of all inputs of the recorded ``node``, distinct tensors that each
        receive a gradient, run as one joint VJP that adds each into its own tensor's
        gradient (a JOINT step with a target per input): :meth:`vjp_split` (its twin
        :meth:`vjp_split_numpy`) and :meth:`exec_split_spec`."""
        return False

    def vjp_split(self, op, grad_output, saved, attrs, grad_inputs):
        """Accumulate VJP ``k`` of ``grad_output`` into ``grad_inputs[k]``, for every input,
        where :meth:`split` said yes."""
        raise NotImplementedError

    def vjp_split_numpy(self, op, grad_output, saved, attrs, grad_inputs):
        """:meth:`vjp_split` in NumPy alone, bit for bit (tier 0's twin)."""
        raise NotImplementedError

    def exec_split_spec(self, op, node, overwrites):
        """:meth:`Op.exec_spec` of the split VJP: a driver whose operands are the gradient,
        the saved arrays and a target per input, adding into target ``k``, or writing it
        whole where ``overwrites[k]`` (the bits of adding into zeros)."""
        return None

    def backward_alone(self, op, node, grad, targets, all_leaves, retain_graph):
        """Run the whole backward of a graph whose only output is the recorded ``node``,
        seeded with ``grad`` (an array or a number), without planning it, where the op
        knows that graph (a replayed call's output knows its recorded backward table).
        Returns ``(results, leaves)`` as a cached plan's run, or None where the engine
        must plan it; it raises the engine's errors (a freed or changed saved buffer) before
        anything runs. Only for ``create_graph=False``, no batch."""
        return None


#: The strategy of an op whose VJPs run one kernel per input only (:attr:`Op.vjp_strategy`).
ONE_PER_INPUT = VJPStrategy()


class _Identity(VJPStrategy):
    def identity(self, op, k, node):
        return True


#: The strategy of an op whose every VJP is the identity (``reshape``: the same elements).
IDENTITY = _Identity()

#: Members of the protocol before :class:`VJPStrategy` grouped them (or the flags became
#: derived): an op class that still defines one is told where it went, or, for a flag that
#: agrees with what is now derived, the flag is dropped (a harmless leftover).
_MOVED_TO_STRATEGY = {
    "identity_vjp": "identity", "joint_vjp": "joint", "vjp_joint": "vjp_joint",
    "vjp_joint_numpy": "vjp_joint_numpy", "has_vjp_joint_numpy": "has_vjp_joint_numpy",
    "exec_joint_spec": "exec_joint_spec", "split_vjp": "split", "vjp_split": "vjp_split",
    "vjp_split_numpy": "vjp_split_numpy", "exec_split_spec": "exec_split_spec",
    "backward_alone": "backward_alone",
}
#: Engine entry points that became private (``Op``'s docstring).
_RENAMED = {"run": "_run", "run_and_remember": "_run_and_remember",
            "run_with_constants": "_run_with_constants",
            "not_implemented_error": "_not_implemented_error"}
_DERIVED_FLAGS = {
    # flag: (on the op or its strategy, the hook whose override it said)
    "has_identity_vjp": ("strategy", "identity"), "has_joint_vjp": ("strategy", "joint"),
    "has_split_vjp": ("strategy", "split"), "runs_backward_alone": ("strategy", "backward_alone"),
    "has_input_block": ("op", "input_block"), "sets_first_writes": ("op", "exec_set_spec"),
    "has_vjp_numpy": ("op", "vjp_numpy"),
}


def _check_leftovers(cls):
    """Refuse an op class written to the old protocol where the code would go unused, and
    drop its derived flags where they agree with its overrides (see ``_MOVED_TO_STRATEGY``)."""
    own = vars(cls)
    for name, hook in _MOVED_TO_STRATEGY.items():
        if name in own:
            raise TypeError(
                f"{cls.__name__}.{name}: an op's other ways to run its VJPs live on its "
                f"vjp_strategy now (a registry.VJPStrategy subclass's {hook!r}; see "
                "docs/adding-an-op.md)"
            )
    for name, new in _RENAMED.items():
        if name in own:
            raise TypeError(f"{cls.__name__}.{name}: the engine's entry point is {new!r} now")
    for name, (where, hook) in _DERIVED_FLAGS.items():
        flag = own.get(name)
        if type(flag) is not bool:
            continue  # (absent, or an op's own ``has_vjp_numpy`` method)
        owner = cls.vjp_strategy if where == "strategy" else cls
        if flag and hook not in owner._defines:
            raise TypeError(
                f"{cls.__name__}.{name} = True, but it does not define {hook!r} (the flag is "
                "derived from that now: drop it)"
            )
        delattr(cls, name)


class Op:
    """Base class of every registered operator: what an op declares, and the hooks it fills.

    An op declares its arguments (the attributes below), gives ``prepare``, ``forward``,
    ``vjp`` and ``rule`` (required), and optionally a faster or second implementation of each:
    ``forward_numpy`` and ``vjp_numpy`` (tier 0's NumPy twins), ``vjp_batched``, the compiled
    executor's drivers (``exec_spec``, ``exec_set_spec``, ``exec_rows_spec``), a compiled
    program's (``forward_spec``, ``input_block``), and a :class:`VJPStrategy` for VJPs that
    run other than one kernel per input. Every optional hook has a default that falls back
    to a required one; whether an op gives a hook is derived from its class
    (:func:`defines`), never declared. ``docs/adding-an-op.md`` counts the pieces.

    Attributes
    ----------
    name : str
        The public (NumPy) name, also the Tensor method's name where ``method`` is true.
    family : str
        The op family (its module under ``autograd_nb/ops/``), for docs, tests, benchmarks.
    n_inputs : int or None
        Number of tensor inputs; None for ops taking a sequence (``concatenate``).
    differentiable : tuple of bool
        Per input position, whether its graph edge is kept when recorded (None: all of them):
        a gradient flows to it, or it is one of ``not_implemented``.
    not_implemented : tuple of int
        Input positions whose derivative has no formula: they keep their graph edge, and a
        backward that needs their gradient raises :class:`DerivativeNotImplemented`, as
        torch's ``not_implemented``, never a silent zero.
    saves : tuple of int
        Input positions whose arrays the VJP needs.
    saves_output : bool
        Whether the VJP needs the op's result.
    method : bool
        Whether ``Tensor`` gets a method of the same name.
    cuda_twin : CudaTwin or None
        Where its CUDA implementation lives (set by :func:`cuda_twin`); None: the op runs
        on the CPU only.
    real_input_vjp : bool
        The VJP kernels add just the real part of a complex contribution into a real input's
        buffer (the FFTs): the engine need not give such an input a complex buffer to keep
        the real part of.
    quick_vjp_kernels : bool
        Each VJP kernel is one small generated loop, quick to compile (elementwise ops):
        tier 0's backward compiles one without a NumPy twin rather than walk the rules.
    vjp_strategy : VJPStrategy
        The other ways its VJPs may run (identity, joint, split, a backward alone); by
        default none (``ONE_PER_INPUT``).

    Entry points of the engine, not written by an op author: ``_run`` (``prepare`` then
    ``forward``, which an op that runs often on small tensors overrides with a cache:
    ``_run_and_remember``), ``_run_with_constants`` and ``_not_implemented_error``.
    """

    name = None
    family = None
    n_inputs = 1
    differentiable = None
    not_implemented = ()
    saves = ()
    saves_output = False
    method = True
    cuda_twin = None
    real_input_vjp = False
    quick_vjp_kernels = False
    vjp_strategy = ONE_PER_INPUT

    #: The optional hooks whose override :func:`defines` reports.
    _HOOKS = ("input_block", "exec_set_spec", "vjp_numpy")
    _defines = frozenset()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._defines = _defined(cls, Op, cls._HOOKS)
        _check_leftovers(cls)

    def __init__(self):
        register(self)

    def make_function(self):
        """The public function for this op; None when the family file writes its own."""
        name = self.name

        def function(*tensors, **attrs):
            return call(name, *tensors, **attrs)

        function.__doc__ = self.__doc__
        return function

    def is_differentiable(self, k):
        """Whether input ``k`` has a VJP."""
        return (self.differentiable is None or self.differentiable[k]) and (
            k not in self.not_implemented
        )

    def _not_implemented_error(self, k):
        """The error of a backward that needs the gradient of input ``k``, one of
        ``not_implemented`` (ops override it for a message naming the input)."""
        return DerivativeNotImplemented(
            f"the derivative for '{self.name}' input {k} is not implemented"
        )

    def prepare(self, values, attrs):
        """Check the arguments and put them in the form ``forward`` takes.

        ``values`` are NumPy arrays or Python scalars. Returns ``(arrays, attrs)``: C-contiguous
        arrays in the computation dtype, and canonical attributes (axes, shapes) that
        ``forward``, ``vjp`` and ``rule`` read. Raises ValueError / TypeError for bad arguments,
        before anything runs.
        """
        raise NotImplementedError

    def forward(self, arrays, attrs):
        """The result, in a freshly allocated C-contiguous array (see the module docstring)."""
        raise NotImplementedError

    def forward_numpy(self, arrays, attrs):
        """``forward`` in NumPy alone, for the first calls of a process whose kernel cache
        lacks this op's kernels (:mod:`autograd_nb.tiering`), or None where it has none for
        these arrays (then ``forward`` runs). The same values as ``forward``, bit for bit:
        the same operations in the same order (``ops/_fastmath_numpy.py`` for the kernels'
        fast-math functions), so that nothing changes when the kernels take over; None where
        NumPy cannot follow the kernel. Ops that define it enter tier 0 at import."""
        return None

    def _run(self, arrays, attrs):
        """``prepare`` then ``forward``, for arguments that are all NumPy arrays (the eager
        forward's common case: every argument a CPU Tensor). Returns ``(arrays, attrs,
        output)``, exactly what the two give.

        Ops that run often on small tensors override it with a cache keyed by the arrays'
        shapes, strides and dtypes, so that a repeated call skips ``prepare``: the key
        determines everything ``prepare`` works out (which must then not convert the arrays).
        """
        arrays, attrs = self.prepare(arrays, attrs)
        return arrays, attrs, self.forward(arrays, attrs)

    def _run_and_remember(self, key, arrays, attrs):
        """``_run`` on a miss of the op's ``_run_cache``: ``prepare`` and ``forward``, and the
        attrs kept under ``key`` (unless None) when ``prepare`` took the arrays as they are
        (then the key, their layouts, determines them)."""
        prepared, attrs = self.prepare(arrays, attrs)
        output = self.forward(prepared, attrs)
        if key is not None and all(p is a for p, a in zip(prepared, arrays)):
            remember(self._run_cache, key, attrs)
        return prepared, attrs, output

    def _run_with_constants(self, values, attrs):
        """``_run`` for arguments not all NumPy arrays: some are Python scalars, or arrays
        made from lists. ``prepare`` then ``forward``, unless the op caches this case too."""
        arrays, attrs = self.prepare(values, attrs)
        return arrays, attrs, self.forward(arrays, attrs)

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        """*Add* input ``k``'s VJP of ``grad_output`` into ``grad_input`` (see the module
        docstring)."""
        raise NotImplementedError

    def vjp_numpy(self, k, grad_output, saved, attrs, grad_input):
        """``vjp`` in NumPy alone, for tier 0's backward (:mod:`autograd_nb.tiering`): the
        same accumulation into ``grad_input``, bit for bit (the kernel's typing, the order in
        which each element receives its values: ``ops/_numpy_vjp.py``), compiling nothing.
        Called only where :meth:`has_vjp_numpy` says so."""
        raise NotImplementedError

    def has_vjp_numpy(self, k, saved, attrs):
        """Whether :meth:`vjp_numpy` follows VJP ``k``'s kernel for a node of these saved
        arrays and attrs. By default, whether the op defines it; ops whose twin covers some
        layouts or dtypes only say which. Where one VJP of a backward has none, tier 0's
        backward compiles that VJP's kernel if it is quick (:attr:`quick_vjp_kernels`), and
        otherwise walks the differentiable rules instead."""
        return "vjp_numpy" in self._defines

    def vjp_numpy_rows(self, k, grad_outputs, saved, attrs, grad_inputs):
        """:meth:`vjp_numpy` for a block of batch rows (tier 0's batched backward): the bits
        the compiled executor gives that block, by :meth:`exec_rows_spec`'s driver where the
        op has one. This default runs the rows one by one, as the executor runs an op
        without one. Called only where :meth:`has_vjp_numpy_rows` says so."""
        for b in range(grad_outputs.shape[0]):
            self.vjp_numpy(k, grad_outputs[b, ...], saved, attrs, grad_inputs[b, ...])

    def has_vjp_numpy_rows(self, k, saved, attrs):
        """Whether :meth:`vjp_numpy_rows` gives the executor's bits for every block of rows;
        by default :meth:`has_vjp_numpy`."""
        return self.has_vjp_numpy(k, saved, attrs)

    def rule(self, k, grad_output, inputs, output, attrs):
        """Input ``k``'s VJP written with autograd_nb ops on Tensors, for
        ``create_graph=True`` (see the module docstring)."""
        raise NotImplementedError

    def vjp_batched(self, k, grad_outputs, saved, attrs, grad_inputs):
        """``vjp`` for a batch: ``grad_outputs`` and ``grad_inputs`` carry a leading batch
        dimension over the same saved values. This default runs the rows one by one; ops
        override it to let the batch reach their kernels (one prange, one GEMM)."""
        for b in range(grad_outputs.shape[0]):
            # ``[b, ...]``: a view even for 0-d rows (``[b]`` would give a scalar copy).
            self.vjp(k, grad_outputs[b, ...], saved, attrs, grad_inputs[b, ...])

    def exec_spec(self, k, node):
        """How the compiled executor runs VJP ``k`` of the recorded ``node``, or None.

        Returns an :class:`ExecSpec` ``(driver, saved, ints, floats)``: ``driver`` an
        ``@njit`` function ``driver(operands, ints, floats, like)`` (see
        :mod:`autograd_nb.ops._pointers`), whose ``operands`` are the data pointers of the
        node's gradient, of the C-contiguous arrays in ``saved`` (in order) and of input
        ``k``'s gradient buffer, which it accumulates into; ``ints``/``floats`` are its
        attributes. None (the default) makes the engine run this backward as a Python walk.
        """
        return None

    def exec_set_spec(self, k, node):
        """``exec_spec`` for the first write into input ``k``'s gradient buffer, or None (the
        default): then the executor clears the buffer and runs ``exec_spec``'s driver.

        The driver *writes* the whole buffer instead of accumulating into it, reading nothing
        of it, and gives the bits ``exec_spec``'s driver gives when it adds into zeros
        (``-0.0`` included: it adds ``+0.0`` as that sum does). It saves the executor a pass
        that clears the buffer and the driver one that reads it. The executor asks only an
        op that defines it.
        """
        return None

    def input_block(self, attrs):
        """The element offset at which this op's result lies in its input, or None (the
        default): where the result is the input's elements from that offset on, in C order,
        as one block (a basic index: ``x[k]``, ``x[2:5]``, ``x[1, :]`` of a C-contiguous
        ``x``). A compiled program (:func:`autograd_nb.compile`) then reads the result there
        instead of copying it, while the input's buffer is not written. The recorder asks
        only an op that defines it."""
        return None

    def forward_spec(self, arrays, attrs, output):
        """How a compiled program (:func:`autograd_nb.compile`) replays this op's forward, or
        None (the default): then a program that uses the op runs eagerly.

        Called once, when the program is recorded, with what the eager forward had: the
        prepared ``arrays`` (C-contiguous, in the computation dtype), the canonical
        ``attrs`` and the ``output`` that ``forward`` returned. Returns ``(driver, ints,
        floats)``: ``driver`` an ``@njit`` function ``driver(operands, ints, floats, like)``
        (see :mod:`autograd_nb.ops._pointers`) whose ``operands`` are the data pointers of
        the input arrays, in order, then of a C-contiguous output buffer of ``output``'s
        shape and dtype, which it writes in full; ``like`` is an empty array of the output's
        dtype. ``ints`` (ints, or an int64 array) and ``floats`` (floats, or a float64 array)
        are its attributes. Replayed on other arrays of the same shapes and dtypes, the
        driver must give the bits ``forward`` gives.

        A forward that can fail where eager raises (a singular matrix, LAPACK not
        converging) returns ``(driver, ints, floats, True)``: its driver's operands then
        have a one-byte flag between the inputs and the output, which it sets to 1 where it
        failed and to 0 otherwise. A replay whose flag is 1 keeps nothing of the call and
        records fn again, eagerly, which raises eager's error.
        """
        return None

    def exec_rows_spec(self, k, node):
        """``exec_spec`` for a block of batch rows at once (``grad(..., is_grads_batched=True)``
        in the compiled executor), or None (the default): then the executor calls the
        ``exec_spec`` driver once per row.

        The driver's ``operands`` are those of ``exec_spec`` followed by the number of rows:
        the gradient and the target then point at that many consecutive rows of the node's
        and of input ``k``'s size. Ops give one where the rows make one larger kernel call
        (``_bmm``: one GEMM over the stacked rows instead of a matrix-vector product each).
        """
        return None

    def __repr__(self):
        return f"<op {self.name}>"
