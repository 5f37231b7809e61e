"""Tensor: a buffer (a C-contiguous NumPy array, or a CUDA device array) plus autograd metadata.

This module is the surface over the layers below: it turns op calls on Tensors into forward
kernels (:mod:`autograd_nb.ops`, or :mod:`autograd_nb.cuda` for device arrays) and records them
(:mod:`autograd_nb.tape`).
"""

import numbers
import weakref

import numpy as np

from . import collector, dtypes, ops, tape
from .cuda import _device as _cuda_device
from .ops import registry
from .ops.registry import FUNCTIONS, REGISTRY

#: What Tensor's methods call in the layers above this module, which hand it in as they are
#: imported (:func:`provide`: this module imports none of them): ``"backward"``
#: (:func:`autograd_nb.autograd.backward`) and ``"numpy"`` (:mod:`autograd_nb.numpy`, which
#: NumPy's protocols reach).
_above = {}


def provide(name, value):
    """Hand ``value`` in as ``name`` of :data:`_above` (by the package's root, at import)."""
    _above[name] = value


_FLOAT_DTYPES = dtypes.DIFFERENTIABLE  # (float and complex: those that take a gradient)

REQUIRES_GRAD_DTYPE = "only Tensors of floating point dtype can require gradients"
LEAF_INPLACE = "a leaf Variable that requires grad is being used in an in-place operation."
LEAF_FLAG = (
    "you can only change requires_grad flags of leaf variables. If you want to use a computed "
    "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach()."
)


NOT_A_LEAF_DEEPCOPY = (
    "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol "
    "at the moment. Call .detach() first to copy the data without the graph."
)
NOT_A_LEAF_PICKLE = (
    "Only Tensors created explicitly by the user (graph leaves) can be pickled: the graph "
    "that computed this one is not pickled. Call .detach() first to pickle the data."
)


def _rebuild(data, requires_grad, grad, device):
    """A leaf from what ``Tensor.__reduce__`` kept (also ``__deepcopy__``'s copy)."""
    if device != _device_of(data):
        data = _to_device(data, _check_device(device))
    result = Tensor._make(data, requires_grad=requires_grad)
    if grad is not None:
        result._grad = grad
    return result


#: Set once a CUDA tensor exists: until then ``apply`` never looks for device arrays.
_cuda_used = False

#: The recording seam: None, or the recorder that :func:`set_recorder` installed (while
#: ``anb.compile`` records a program on some thread: ``autograd_nb.replay.tracer``). Its
#: ``trace`` attribute is per thread: that thread's recording, or None. A recording is told
#: what runs at the top level (not inside an op's own ``_run``; ``depth`` counts those):
#: ``ran`` (an op, by :func:`apply`), ``made`` (a Tensor), ``mark`` and ``wrote`` (an
#: in-place update, around it), ``copied`` (a buffer copied for an in-place op's VJP),
#: ``read_value`` (values handed to Python), ``compared`` (a comparison operator ran),
#: ``truth`` (``bool(t)``: a branch, recorded as a guard where it can be) and ``refuse``
#: (what it cannot follow). This is the only way in: nothing is patched.
recorder = None

#: The forward-mode seam: None, or what :func:`set_forward` installed while a dual level is
#: open (:mod:`autograd_nb.autograd.forward_ad`). After every op that :func:`apply` runs it is
#: told ``ran(op, args, arrays, attrs, result)``, and gives the result the tangents of its
#: dual inputs; ``wrote(target, result)`` after an in-place update; ``saved(tensors,
#: arrays)`` gives the Tensors a differentiable backward rebuilds from saved arrays their
#: tangents (forward over reverse). This is the only way in: nothing is patched.
forward_seam = None

#: Whether the eager fast paths step aside for the general one, which looks for device
#: arrays, the recorder and the forward seam: set once a CUDA tensor exists, and while a
#: recorder or a forward seam is installed. (One global read on the hot path.)
_detour = False

#: Tier 0's seam (:mod:`autograd_nb.tiering`): the ops whose CPU calls it serves now, and the
#: function that serves them, ``_tier0_run(op, run, values, attrs)`` (``run``: the op's own
#: ``_run`` or ``_run_with_constants``, which it calls once the call's kernels are cached).
#: Changed only through :func:`set_tier0`. The fast paths read ``_tiered`` (one global, as
#: ``_detour``) and ask for membership only while some op is in tier 0.
_tier0_ops = set()
_tier0_run = None
_tiered = False

CUDA_TO_NUMPY = (
    "can't convert cuda device type tensor to numpy. Use Tensor.cpu() to copy the tensor to "
    "host memory first."
)


def _check_device(device):
    """The canonical device name, ``"cpu"`` or ``"cuda"``; for ``"cuda"``, CUDA must be usable
    here (RuntimeError naming why not)."""
    global _cuda_used, _detour
    device = str(device)
    if device == "cpu":
        return device
    if device in ("cuda", "cuda:0"):
        _cuda_device.require()
        _cuda_used = _detour = True
        return "cuda"
    if device.startswith("cuda:"):
        raise RuntimeError(f"device={device!r} is not available: autograd_nb uses one GPU, 'cuda'")
    raise RuntimeError(f"unknown device {device!r}; expected 'cpu' or 'cuda'")


def set_recorder(new):
    """Install ``new`` in :data:`recorder` (None: remove it); the previous one is returned."""
    global recorder, _detour
    previous, recorder = recorder, new
    _detour = _cuda_used or new is not None or forward_seam is not None
    return previous


def set_forward(new):
    """Install ``new`` in :data:`forward_seam` (None: remove it); the previous one is returned."""
    global forward_seam, _detour
    previous, forward_seam = forward_seam, new
    _detour = _cuda_used or recorder is not None or new is not None
    return previous


def set_tier0(op, run):
    """Serve ``op``'s CPU calls through ``run(op, own_run, values, attrs)`` (tier 0:
    :mod:`autograd_nb.tiering`); ``run=None``: the op runs its own methods again."""
    global _tier0_run, _tiered
    if run is None:
        _tier0_ops.discard(op)
    else:
        _tier0_ops.add(op)
        _tier0_run = run
    _tiered = bool(_tier0_ops)


def dual_level_open():
    """Whether a dual level is open (forward mode: :data:`forward_seam` installed)."""
    return forward_seam is not None


def saved_tangents(tensors, arrays):
    """Give the Tensors that a differentiable backward rebuilt from the saved ``arrays`` their
    tangents, while a dual level is open (:data:`forward_seam`)."""
    if forward_seam is not None:
        forward_seam.saved(tensors, arrays)


def in_tier0(op):
    """Whether :func:`set_tier0` serves ``op``'s CPU calls now."""
    return op in _tier0_ops


def active_trace():
    """This thread's recording at the top level (see :data:`recorder`), or None."""
    slot = recorder
    if slot is None:
        return None
    trace = slot.trace
    if trace is None or trace.depth:
        return None
    return trace


def _read_value(tensor, what):
    """Tell this thread's recording, if any, that ``tensor``'s values reach Python."""
    trace = active_trace()
    if trace is not None:
        trace.read_value(tensor, what)


def _truth(tensor):
    """Tell this thread's recording, if any, that fn branches on ``tensor`` (``bool(t)``)."""
    trace = active_trace()
    if trace is not None:
        trace.truth(tensor)


def _device_of(data):
    return "cpu" if type(data) is np.ndarray else "cuda"


def _to_device(data, device):
    """``data`` (a host or device array) on ``device``: itself, or a copy."""
    if _device_of(data) == device:
        return data
    if device == "cuda":
        return _cuda_device.to_device(data)
    return _cuda_device.to_host(data)


def _host(data):
    """The data for display or conversion to Python values (a copy from the device)."""
    return _cuda_device.to_host(data) if _cuda_device.is_device_array(data) else data


class Tensor:
    """An n-dimensional array that can record the operations applied to it.

    Create tensors with :func:`tensor`, :func:`as_tensor` or the creation functions
    (:func:`zeros`, :func:`ones`, ...), not with this class directly.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([1.0, 2.0], requires_grad=True)
    >>> y = (x * x).sum()
    >>> y
    tensor(5., grad_fn=<SumBackward>)
    >>> y.backward()
    >>> x.grad
    tensor([2., 4.])
    """

    __slots__ = (
        "_data",
        "_node",
        "_requires_grad",
        "_grad",
        "_version",
        "_retains_grad",
        # Set only by collector.keep_tracked (the tensor is on a path through some .grad and
        # the garbage collector must keep scanning it); unset costs nothing at creation.
        "_kept",
        # Set only on dual tensors (forward mode, :data:`forward_seam`): ``{level: tangent}``;
        # unset costs nothing at creation.
        "_tangents",
        "__weakref__",
    )
    # -- construction ------------------------------------------------------------------------

    @classmethod
    def _make(cls, data, node=None, requires_grad=False, version=None):
        self = object.__new__(cls)
        self._data = data
        self._node = node
        self._requires_grad = requires_grad
        self._grad = None
        # A dict, not a list: it holds only ints, so the garbage collector does not track it.
        self._version = {0: 0} if version is None else version
        self._retains_grad = False
        if recorder is not None:
            trace = recorder.trace
            if trace is not None:
                trace.made(self)
        return self

    def __init__(self, *args, **kwargs):
        raise TypeError("create tensors with autograd_nb.tensor(...) or autograd_nb.as_tensor(...)")

    # -- attributes --------------------------------------------------------------------------

    @property
    def shape(self):
        """The dimensions, a tuple of ints (as NumPy's)."""
        return self._data.shape

    @property
    def ndim(self):
        """Number of dimensions."""
        return self._data.ndim

    @property
    def size(self):
        """Number of elements, as NumPy's ``ndarray.size``."""
        return self._data.size

    @property
    def dtype(self):
        """The element type, a NumPy dtype."""
        return self._data.dtype

    @property
    def device(self):
        """The device holding the data, ``"cpu"`` or ``"cuda"``."""
        return "cpu" if type(self._data) is np.ndarray else "cuda"

    @property
    def __cuda_array_interface__(self):
        """The CUDA Array Interface of a cuda tensor's data (no copy), for CuPy, PyTorch,
        numba; AttributeError on the CPU, so ``hasattr`` tells the devices apart."""
        if type(self._data) is np.ndarray:
            raise AttributeError(
                "__cuda_array_interface__ is only defined for cuda tensors (this one is on cpu)"
            )
        return _cuda_device.interface(self._data)

    @property
    def requires_grad(self):
        """Whether gradients flow to this tensor (settable on leaves only).

        Examples
        --------
        >>> import autograd_nb as anb
        >>> x = anb.ones(2)
        >>> x.requires_grad = True
        >>> (x * 2).requires_grad
        True
        """
        return self._node is not None or self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        if self._node is not None:
            raise RuntimeError(LEAF_FLAG)
        if flag and self._data.dtype not in _FLOAT_DTYPES:
            raise RuntimeError(REQUIRES_GRAD_DTYPE)
        self._requires_grad = bool(flag)

    @property
    def grad(self):
        """Gradient accumulated by ``backward()`` (a Tensor), or None.

        Settable to a Tensor of the same shape and dtype; ``t.grad = None`` clears it.

        Examples
        --------
        >>> import autograd_nb as anb
        >>> x = anb.tensor([1.0, 2.0], requires_grad=True)
        >>> (x * x).sum().backward()
        >>> x.grad
        tensor([2., 4.])
        >>> x.grad = None
        >>> x.grad is None
        True
        """
        if recorder is not None:
            trace = active_trace()
            if trace is not None:
                trace.refuse("a tensor's .grad read inside (pass it as an argument)")
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"assigned grad expected to be a Tensor or None but got grad of type "
                    f"{type(value).__name__}"
                )
            if value.dtype != self.dtype:
                raise RuntimeError(
                    f"assigned grad has data of a different type: {value.dtype} vs {self.dtype}"
                )
            if value.shape != self.shape:
                raise RuntimeError(
                    f"assigned grad has data of a different size: {value.shape} vs {self.shape}"
                )
            if value.device != self.device:
                raise RuntimeError(
                    f"assigned grad has data located on {value.device}, different from the "
                    f"tensor's device {self.device}"
                )
            collector.keep_tracked(self, value)
        self._grad = value

    @property
    def grad_fn(self):
        """The node that produced this tensor (its ``name`` names the op); None for leaves.

        Examples
        --------
        >>> import autograd_nb as anb
        >>> x = anb.ones(2, requires_grad=True)
        >>> (x * 3).grad_fn.name
        'multiply'
        >>> x.grad_fn is None
        True
        """
        return self._node

    @property
    def is_leaf(self):
        """True for tensors not produced by a recorded op (created by the user)."""
        return self._node is None

    @property
    def T(self):
        """The tensor with its dimensions reversed (``transpose(self)``)."""
        return FUNCTIONS["transpose"](self)

    @property
    def real(self):
        """The real part, recorded (NumPy's and torch's attribute; ``anb.real(self)``): a
        real tensor is its own real part.

        Examples
        --------
        >>> import autograd_nb as anb
        >>> anb.tensor([1 + 2j, 3 - 1j]).real
        tensor([1., 3.])
        """
        return FUNCTIONS["real"](self)

    @property
    def imag(self):
        """The imaginary part, recorded (``anb.imag(self)``): zeros for a real tensor, as
        NumPy's ``ndarray.imag`` (torch raises there).

        Examples
        --------
        >>> import autograd_nb as anb
        >>> anb.tensor([1 + 2j, 3 - 1j]).imag
        tensor([ 2., -1.])
        >>> anb.tensor([1.0, 2.0]).imag
        tensor([0., 0.])
        """
        return FUNCTIONS["imag"](self)

    @property
    def _version_number(self):
        return self._version[0]

    # -- conversion --------------------------------------------------------------------------

    def numpy(self):
        """The data as a NumPy array (shares memory with the tensor on the CPU).

        A cuda tensor raises TypeError: copy it to the host with :meth:`cpu` first.

        Examples
        --------
        >>> import autograd_nb as anb
        >>> anb.tensor([1.0, 2.0]).numpy()
        array([1., 2.])
        """
        if recorder is not None:
            _read_value(self, "tensor.numpy()")
        if type(self._data) is not np.ndarray:
            raise TypeError(CUDA_TO_NUMPY)
        return self._data

    def __array__(self, dtype=None, copy=None):
        if recorder is not None:
            _read_value(self, "np.asarray(tensor)")
        if type(self._data) is not np.ndarray:
            raise TypeError(CUDA_TO_NUMPY)
        if copy is False and dtype is not None and np.dtype(dtype) != self._data.dtype:
            raise ValueError("a copy is needed to convert the tensor to the requested dtype")
        if copy:
            return np.array(self._data, dtype=dtype, copy=True)
        if dtype is None:
            return self._data
        return self._data.astype(dtype, copy=False)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy's ufuncs on Tensors (NEP 13) run autograd_nb's ops and record:
        ``numpy.sin(t)``, ``array * t``. A ufunc autograd_nb lacks, a method other than a
        call (``numpy.add.reduce``) and ``out=`` raise TypeError naming it; see
        :mod:`autograd_nb.numpy`.

        Examples
        --------
        >>> import numpy as np, autograd_nb as anb
        >>> x = anb.tensor([0.0, 1.0], requires_grad=True)
        >>> np.exp(x)
        tensor([1.        , 2.71828183], grad_fn=<ExpBackward>)
        >>> np.ones(2) * x
        tensor([0., 1.], grad_fn=<MultiplyBackward>)
        """
        if len(inputs) == 2 and not kwargs and method == "__call__":
            op = _OPERATOR_UFUNCS.get(ufunc)
            if op is not None and type(inputs[0]) in _OPERANDS and type(inputs[1]) in _OPERANDS:
                return _binary(op, *inputs)  # ``array * t``, as fast as ``t * array``
        return _numpy_namespace().array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        """NumPy's functions on Tensors (NEP 18) run autograd_nb's and record:
        ``numpy.sum(t, axis=0)``, ``numpy.concatenate([t, t])``. One autograd_nb lacks raises
        TypeError naming it. ``numpy.asarray(t)`` is not one of them: it detaches.

        Examples
        --------
        >>> import numpy as np, autograd_nb as anb
        >>> x = anb.tensor([[1.0, 2.0]], requires_grad=True)
        >>> np.sum(x, axis=1)
        tensor([3.], grad_fn=<SumBackward>)
        >>> np.asarray(x)
        array([[1., 2.]])
        """
        return _numpy_namespace().array_function(func, types, args, kwargs)

    def item(self):
        """The value of a one-element tensor as a Python number.

        Examples
        --------
        >>> import autograd_nb as anb
        >>> anb.tensor([[2.5]]).item()
        2.5
        """
        if recorder is not None:
            _read_value(self, "tensor.item()")
        if self._data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self._data.size} elements cannot be converted to Scalar"
            )
        return _host(self._data).reshape(-1)[0].item()

    def tolist(self):
        """The data as nested Python lists (a Python number for a 0-d tensor).

        Examples
        --------
        >>> import autograd_nb as anb
        >>> anb.tensor([[1, 2], [3, 4]]).tolist()
        [[1, 2], [3, 4]]
        """
        if recorder is not None:
            _read_value(self, "tensor.tolist()")
        return _host(self._data).tolist()

    def __float__(self):
        if recorder is not None:
            _read_value(self, "float(tensor)")
        return float(self.item())

    def __int__(self):
        if recorder is not None:
            _read_value(self, "int(tensor)")
        return int(self.item())

    def __bool__(self):
        if recorder is not None:
            _truth(self)
        if self._data.size != 1:
            raise RuntimeError(
                f"Boolean value of Tensor with {self._data.size} elements is ambiguous"
            )
        return bool(_host(self._data).reshape(-1)[0])

    def __index__(self):
        if recorder is not None:
            _read_value(self, "a tensor used as an index")
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    __hash__ = object.__hash__

    def __repr__(self):
        data = _host(self._data)
        body = np.array2string(data, separator=", ", prefix="tensor(")
        extras = []
        if data.size == 0 and data.shape != (0,):
            extras.append(f"size={data.shape}")
        if data is not self._data:
            extras.append("device='cuda'")
        if data.dtype not in (np.dtype(np.float64), np.dtype(np.int64), np.dtype(bool)):
            extras.append(f"dtype={data.dtype.name}")
        if self._node is not None:
            extras.append(f"grad_fn={self._node!r}")
        elif self._requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + ", ".join([body] + extras) + ")"

    # -- pickling and copying ----------------------------------------------------------------

    def __reduce__(self):
        """A leaf pickles as its data, ``requires_grad`` and ``.grad`` (and its device); the
        graph is never pickled, so a tensor computed from others is refused, as torch refuses
        it, rather than pickled without it."""
        if self._node is not None:
            raise RuntimeError(NOT_A_LEAF_PICKLE)
        grad = None if self._grad is None else self._grad.detach()
        return _rebuild, (np.array(_host(self._data)), self._requires_grad, grad, self.device)

    def __deepcopy__(self, memo):
        if self._node is not None:
            raise RuntimeError(NOT_A_LEAF_DEEPCOPY)
        grad = None if self._grad is None else self._grad.detach().__deepcopy__(memo)
        copied = _rebuild(_copy_data(self._data), self._requires_grad, grad, self.device)
        memo[id(self)] = copied
        return copied

    # -- autograd ----------------------------------------------------------------------------

    def detach(self):
        """A tensor sharing this one's data (and version counter), cut from the graph.

        Examples
        --------
        >>> import autograd_nb as anb
        >>> x = anb.ones(2, requires_grad=True)
        >>> d = x.detach()
        >>> d[0] = 5.0
        >>> x
        tensor([5., 1.], requires_grad=True)
        """
        if recorder is not None:
            trace = active_trace()
            if trace is not None:
                trace.detached(self)
        return Tensor._make(self._data, version=self._version)

    def requires_grad_(self, flag=True):
        """Set ``requires_grad`` in place and return the tensor.

        Examples
        --------
        >>> import autograd_nb as anb
        >>> anb.zeros(2).requires_grad_()
        tensor([0., 0.], requires_grad=True)
        """
        if self._node is not None:
            if not flag:
                raise RuntimeError(LEAF_FLAG)
            return self  # a computed tensor already requires grad
        self.requires_grad = flag
        return self

    def retain_grad(self):
        """Ask backward to fill ``.grad`` of this non-leaf tensor too.

        Examples
        --------
        >>> import autograd_nb as anb
        >>> x = anb.tensor([1.0, 2.0], requires_grad=True)
        >>> y = x * 3
        >>> y.retain_grad()
        >>> y.sum().backward()
        >>> y.grad
        tensor([1., 1.])
        """
        if self._node is None:
            if not self._requires_grad:
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
            return
        if self._retains_grad:
            return
        node = self._node
        if node.retained is None:
            node.retained = []
        node.retained.append(weakref.ref(self))
        self._retains_grad = True
        tape.raise_mark(2, node.seq)  # never lowered by a thread that marked an older node

    @property
    def retains_grad(self):
        """Whether ``retain_grad()`` was called on this non-leaf tensor."""
        return self._retains_grad

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate the gradient of this tensor into ``.grad`` of the leaves.

        ``gradient`` is the vector ``v`` of the vector-Jacobian product: dL/d(self) for the
        loss L that comes after; it may be omitted for a single-element tensor. See
        :func:`autograd_nb.autograd.backward`.

        Examples
        --------
        >>> import autograd_nb as anb
        >>> x = anb.tensor([1.0, 2.0], requires_grad=True)
        >>> (x * x).backward(anb.tensor([1.0, 10.0]))
        >>> x.grad
        tensor([ 2., 40.])
        """
        _above["backward"](
            self, gradient, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs
        )

    # -- devices and dtypes ------------------------------------------------------------------

    def to(self, device=None, dtype=None):
        """Move to ``device`` and/or cast to ``dtype`` (``x.to(np.float32)`` also works).

        Returns ``self`` when nothing changes. A move copies the data to the other device;
        it is recorded like an op, so gradients flow back across it to ``self``.

        Examples
        --------
        >>> import numpy as np, autograd_nb as anb
        >>> x = anb.ones(2)
        >>> x.to("cpu") is x
        True
        >>> x.to(np.float32)
        tensor([1., 1.], dtype=float32)
        """
        if device is not None and not isinstance(device, str):
            device, dtype = None, device if dtype is None else dtype
        result = self
        if device is not None:
            device = _check_device(device)
            if device != self.device:
                result = _transfer(self, device)
        if dtype is not None and dtypes.for_request(dtype) != result._data.dtype:
            return result.astype(dtype)
        return result

    def cpu(self):
        """This tensor on the CPU: itself, or a copy from the GPU (see :meth:`to`)."""
        return self.to("cpu")

    def cuda(self):
        """This tensor on the GPU: itself, or a copy to it (see :meth:`to`)."""
        return self.to("cuda")

    def astype(self, dtype):
        """A copy cast to ``dtype``; gradients flow back cast to this tensor's dtype.

        A cast to an integer or bool dtype gives a tensor outside the graph.

        Examples
        --------
        >>> import numpy as np, autograd_nb as anb
        >>> x = anb.tensor([1.5, 2.5], requires_grad=True)
        >>> y = x.astype(np.float32)
        >>> y
        tensor([1.5, 2.5], dtype=float32, grad_fn=<AstypeBackward>)
        >>> y.sum().backward()
        >>> x.grad.dtype
        dtype('float64')
        """
        dtype = dtypes.for_request(dtype)
        source = self if dtype in _FLOAT_DTYPES else self.detach()
        return registry.call("astype", source, dtype=dtype)

    # -- indexing ----------------------------------------------------------------------------

    def __getitem__(self, index):
        """``t[index]`` with NumPy's indexing (ints, slices, ``None``, ``...``, integer arrays,
        bool masks); a new tensor, differentiable (repeated indices accumulate).

        Examples
        --------
        >>> import autograd_nb as anb
        >>> x = anb.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        >>> x[:, ::-1]
        tensor([[2., 1.],
                [4., 3.]], grad_fn=<GetitemBackward>)
        >>> x[[0, 0], 1].sum().backward()
        >>> x.grad
        tensor([[0., 2.],
                [0., 0.]])
        """
        kind = type(index)
        if kind is not int and kind is not slice:  # (neither holds a Tensor to unwrap)
            index = _unwrap_index(index)
        return apply(_GETITEM, (self,), {"index": index})

    def __setitem__(self, index, value):
        """``t[index] = value``: write ``value`` (broadcast, cast to ``t``'s dtype) in place,
        recorded: the overwritten positions get no gradient, ``value`` gets theirs.

        Examples
        --------
        >>> import autograd_nb as anb
        >>> w = anb.tensor(5.0, requires_grad=True)
        >>> t = anb.zeros(3)
        >>> t[1:] = w
        >>> t
        tensor([0., 5., 5.], grad_fn=<SetitemBackward>)
        """
        _inplace(self, "setitem", value, index=_unwrap_index(index))

    # -- shape methods with NumPy's varargs forms --------------------------------------------

    def reshape(self, *shape):
        """The same elements in a new shape: ``x.reshape(2, 3)`` or ``x.reshape((2, 3))``.

        Examples
        --------
        >>> import autograd_nb as anb
        >>> anb.arange(6.0).reshape(2, -1)
        tensor([[0., 1., 2.],
                [3., 4., 5.]])
        """
        if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
            shape = shape[0]
        return FUNCTIONS["reshape"](self, shape)

    def transpose(self, *axes):
        """Permute the dimensions: ``x.transpose(1, 0)``, ``x.transpose((1, 0))`` or, reversing
        them, ``x.transpose()`` (NumPy's forms).

        Examples
        --------
        >>> import autograd_nb as anb
        >>> anb.zeros((2, 3, 4)).transpose(2, 0, 1).shape
        (4, 2, 3)
        """
        if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], numbers.Integral)):
            axes = axes[0]
        elif not axes:
            axes = None
        return FUNCTIONS["transpose"](self, axes)

    # -- operators ---------------------------------------------------------------------------

    def __matmul__(self, other):
        return FUNCTIONS["matmul"](self, other)

    def __rmatmul__(self, other):
        return FUNCTIONS["matmul"](other, self)

    def __neg__(self):
        return registry.call("negative", self)

    def __pos__(self):
        return self

    def __abs__(self):
        return registry.call("abs", self)


    # Comparisons and logic give bool tensors, outside the graph.
    def __lt__(self, other):
        return _no_grad_result(np.less, self, other)

    def __le__(self, other):
        return _no_grad_result(np.less_equal, self, other)

    def __gt__(self, other):
        return _no_grad_result(np.greater, self, other)

    def __ge__(self, other):
        return _no_grad_result(np.greater_equal, self, other)

    def __eq__(self, other):
        return _no_grad_result(np.equal, self, other)

    def __ne__(self, other):
        return _no_grad_result(np.not_equal, self, other)

    def __and__(self, other):
        return _no_grad_result(np.bitwise_and, self, other)

    __rand__ = __and__

    def __or__(self, other):
        return _no_grad_result(np.bitwise_or, self, other)

    __ror__ = __or__

    def __xor__(self, other):
        return _no_grad_result(np.bitwise_xor, self, other)

    __rxor__ = __xor__

    def __invert__(self):
        return _no_grad_result(np.invert, self)


# The arithmetic operators: forward, reflected and in-place forms of each op.
ARITHMETIC_OPERATORS = {
    "add": "add",
    "sub": "subtract",
    "mul": "multiply",
    "truediv": "divide",
    "pow": "power",
    "mod": "remainder",
}


#: The ufuncs of the arithmetic operators, and their ops: ``array * t`` reaches
#: ``Tensor.__array_ufunc__`` with ``numpy.multiply``.
_OPERATOR_UFUNCS = {}
_OPERANDS = frozenset({Tensor, np.ndarray, float, int})


def _install_arithmetic_operators():
    for dunder, op_name in ARITHMETIC_OPERATORS.items():
        op = REGISTRY[op_name]  # built-in ops are never replaced
        if op.differentiable is not None and False in op.differentiable:
            raise AssertionError(f"{op_name}: _binary records every input as differentiable")

        _OPERATOR_UFUNCS[getattr(np, op_name)] = op

        def forward(self, other, _op=op):
            return _binary(_op, self, other)

        def reflected(self, other, _op=op):
            return _binary(_op, other, self)

        def in_place(self, other, _op=op_name):
            return _inplace(self, _op, other)

        for prefix, method in (("", forward), ("r", reflected), ("i", in_place)):
            name = f"__{prefix}{dunder}__"
            method.__name__ = method.__qualname__ = name
            setattr(Tensor, name, method)


def _data_of(value):
    return value._data if isinstance(value, Tensor) else value


def _numpy_namespace():
    """:mod:`autograd_nb.numpy`, the surface over this module that NumPy's protocols reach."""
    return _above["numpy"]


#: The comparisons that order their operands: complex numbers have no order (torch refuses
#: them; NumPy's lexicographic order of complex numbers is no gradient's business).
_ORDERINGS = (np.less, np.less_equal, np.greater, np.greater_equal)


def _no_grad_result(ufunc, *args):
    trace = active_trace() if recorder is not None else None
    result = _no_grad_values(ufunc, args)
    if trace is not None and not trace.compared(ufunc, args, result):
        # (not recorded as an instruction: the values reached Python)
        for arg in args:
            if isinstance(arg, Tensor):
                trace.read_value(arg, f"a comparison or bitwise operator ({ufunc.__name__})")
    return result


def _no_grad_values(ufunc, args):
    values = [_data_of(a) for a in args]
    if ufunc in _ORDERINGS and any(np.iscomplexobj(v) for v in values):
        raise registry.complex_error(f"{ufunc.__name__} (an ordering comparison)",
                                     np.result_type(*values))
    if _cuda_used and _cuda_device.any_device_array(values):
        from .cuda import elementwise

        _check_one_device(args)
        return Tensor._make(elementwise.apply_ufunc(ufunc, values))
    return Tensor._make(np.asarray(ufunc(*values), order="C"))


def _check_one_device(args):
    """With cuda tensors among ``args``: RuntimeError naming both devices if a CPU tensor is
    there too (0-d ones excepted, as PyTorch's; plain NumPy arrays are constants)."""
    for arg in args:
        if isinstance(arg, Tensor) and type(arg._data) is np.ndarray and arg._data.ndim:
            from .cuda.dispatch import MIXED_DEVICES

            raise RuntimeError(MIXED_DEVICES)


def _transfer(tensor, device):
    """``tensor`` copied to ``device``, recorded when it requires grad (the copy's VJP is the
    copy back)."""
    from .cuda import transfer

    return registry._dispatch(transfer.TO[device], (tensor,), {})


def _unwrap_index_item(item):
    if isinstance(item, Tensor):
        if recorder is not None:  # (an index is an attribute: its values are frozen there)
            _read_value(item, "a tensor used as an index")
        return item._data
    if isinstance(item, list) and any(isinstance(i, Tensor) for i in item):
        return np.asarray([_data_of(i) for i in item])
    return item


def _unwrap_index(index):
    if isinstance(index, tuple):
        return tuple(_unwrap_index_item(i) for i in index)
    return _unwrap_index_item(index)


# -- running ops -------------------------------------------------------------------------------


def apply(op, args, attrs):
    """Run ``op`` on ``args`` (Tensors, arrays or Python scalars) and record it if needed.

    This is the eager forward's hot path. One CPU Tensor (a unary op, a reduction, an index)
    takes a short path; otherwise one pass over the arguments unwraps them and collects the
    graph edges and version boxes. Then the op's ``_run`` (``prepare`` and ``forward``, cached
    per layout), and only when an input requires grad (checked first: it is cheaper than
    asking the grad mode) and grad mode is on, a tape record.

    While a :data:`recorder` is installed every call takes the general path, which tells this
    thread's recording what ran (``ran``), if it records: the one recording hook.
    """
    if len(args) == 1 and not _detour:
        a = args[0]
        if type(a) is Tensor:
            if _tiered and op in _tier0_ops:
                arrays, attrs, output = _tier0_run(op, op._run, [a._data], attrs)
            else:
                arrays, attrs, output = op._run([a._data], attrs)
            # Tensor._make, inlined: this runs once per op.
            result = _new_object(Tensor)
            result._data = output
            result._node = None
            result._requires_grad = False
            result._grad = None
            result._version = version = {0: 0}
            result._retains_grad = False
            edge = a._node
            if edge is None and a._requires_grad:
                edge = a  # a leaf: its .grad receives the gradient
            if edge is not None and tape._state.enabled:
                differentiable = op.differentiable
                if differentiable is None or differentiable[0]:
                    result._node = tape.record_one(
                        op, edge, arrays[0], a._version, output, version, attrs
                    )
            return result
    return _apply_operands(op, args, attrs)


def _apply_operands(op, args, attrs):  # noqa: C901 (the general hot path, kept inline)
    """``apply`` of anything but one CPU Tensor: one pass over the arguments unwraps them and
    collects the graph edges and version boxes; the op runs, and is recorded as ``apply``
    says."""
    trace = None if recorder is None else active_trace()
    values = []
    edges = []
    boxes = []
    requires_grad = False
    only_tensors = True
    for arg in args:
        if type(arg) is Tensor or isinstance(arg, Tensor):
            values.append(arg._data)
            boxes.append(arg._version)
            edge = arg._node
            if edge is None and arg._requires_grad:
                edge = arg  # a leaf: its .grad receives the gradient
            if edge is not None:
                requires_grad = True
            edges.append(edge)
            continue
        only_tensors = False
        kind = type(arg)
        sequence = kind is list or kind is tuple
        if sequence and _holds_tensor(arg):
            return apply(op, _stack_sequences(args), attrs)
        values.append(np.asarray(arg) if sequence else arg)
        boxes.append(None)
        edges.append(None)
    if _cuda_used and _cuda_device.any_device_array(values):
        arrays, attrs, output = _run_on_device(op, args, values, attrs, requires_grad, boxes)
    elif trace is not None:
        arrays, attrs, output = _run_recorded(trace, op, values, attrs, only_tensors,
                                              requires_grad, boxes)
    elif only_tensors:
        if _tiered and op in _tier0_ops:
            arrays, attrs, output = _tier0_run(op, op._run, values, attrs)
        else:
            arrays, attrs, output = op._run(values, attrs)
    else:
        _constants(values, requires_grad, boxes)
        if _tiered and op in _tier0_ops:
            arrays, attrs, output = _tier0_run(op, op._run_with_constants, values, attrs)
        else:
            arrays, attrs, output = op._run_with_constants(values, attrs)
    result = _new_object(Tensor)
    result._data = output
    result._node = None
    result._requires_grad = False
    result._grad = None
    result._version = version = {0: 0}
    result._retains_grad = False
    if requires_grad and tape._state.enabled:
        differentiable = op.differentiable
        if differentiable is None or False not in differentiable:
            result._node = tape.record(op, edges, arrays, boxes, output, version, attrs)
        else:
            edges = [e if d else None for e, d in zip(edges, differentiable)]
            result._node = _record_live(op, edges, arrays, boxes, output, version, attrs)
    if trace is not None:
        trace.ran(op, args, arrays, attrs, output, result)
    if forward_seam is not None:
        forward_seam.ran(op, args, arrays, attrs, result)
    return result


def _run_recorded(trace, op, values, attrs, only_tensors, recording, boxes):
    """``(arrays, attrs, output)`` of ``op`` on ``values`` for a recording ``trace``, as
    ``_apply_operands`` runs it, one level down (what the op's ``_run`` applies is not
    recorded)."""
    trace.depth += 1
    try:
        if not only_tensors:
            _constants(values, recording, boxes)
            return _run_with_constants(op, values, attrs)
        if _tiered and op in _tier0_ops:
            return _tier0_run(op, op._run, values, attrs)
        return op._run(values, attrs)
    finally:
        trace.depth -= 1


def _run_with_constants(op, values, attrs):
    """``op._run_with_constants``, or tier 0's run of it (see :func:`set_tier0`)."""
    if _tiered and op in _tier0_ops:
        return _tier0_run(op, op._run_with_constants, values, attrs)
    return op._run_with_constants(values, attrs)


def _run_on_device(op, args, values, attrs, recording, boxes):
    """``(arrays, attrs, output)`` of ``op`` on ``values``, one of them on the GPU: constants
    checked first, as on the CPU."""
    from .cuda import dispatch

    trace = None if recorder is None else active_trace()
    if trace is not None:
        trace.refuse("CUDA tensors")  # (and it stops recording: ``ran`` notes nothing more)
    _constants(values, recording, boxes)
    _check_one_device(args)
    return dispatch.run(op, values, attrs)


def _record_live(op, edges, arrays, boxes, output, version, attrs):
    """``tape.record``, or None when no edge is left (those of an op's non-differentiable
    inputs are cut)."""
    # (not ``edges.count(None)``: that would compare leaf Tensors with ``==``)
    if any([e is not None for e in edges]):
        return tape.record(op, edges, arrays, boxes, output, version, attrs)
    return None


_new_object = object.__new__


def _holds_tensor(sequence):
    """Whether a list or tuple (nested ones too) holds a Tensor."""
    for item in sequence:
        kind = type(item)
        if isinstance(item, Tensor) or ((kind is list or kind is tuple) and _holds_tensor(item)):
            return True
    return False


def _stack_sequences(args):
    """``args`` with each list or tuple that holds a Tensor stacked into one Tensor, recorded:
    NumPy makes an array of a sequence operand (``np.mean([a, b])``), and ``np.asarray``
    would cut the graph there."""
    return tuple(
        _stacked(arg) if type(arg) in (list, tuple) and _holds_tensor(arg) else arg
        for arg in args
    )


def _stacked(sequence):
    items = tuple(
        _stacked(i) if type(i) in (list, tuple) and _holds_tensor(i) else i for i in sequence
    )
    return apply(REGISTRY["stack"], items, {"axis": 0})


def _constants(values, recording, boxes):
    """Check the operands of an op that are not Tensors, in place in ``values``: NumPy arrays
    of a dtype tensors cannot hold are converted (:mod:`autograd_nb.dtypes`: big-endian to
    native, ...) or refused, as are complex scalars; and when the op may be ``recording``,
    arrays become copies: its node may save them for the VJP, and the caller may refill an
    array after the forward (the gradient is that of the forward that ran, as torch's, which
    copies NumPy operands). A Tensor's buffer (``boxes[i]`` set: its version box) is left as
    it is: its version counter guards it."""
    for i, value in enumerate(values):
        if boxes[i] is not None:
            continue
        if isinstance(value, np.ndarray):
            if value.dtype not in dtypes.SUPPORTED:
                values[i] = dtypes.convert(value)
            elif recording:
                values[i] = value.copy()
        elif type(value) is not float and type(value) is not int:
            dtypes.check_scalar(value)


def _binary(op, a, b):
    """``apply(op, (a, b), {})`` for the arithmetic operators, shortened for their common
    case: two CPU Tensors, or a Tensor and a Python float or int, of a layout the op has run
    before (``ElementwiseOp.run_pair``). Anything else takes ``apply``.
    """
    kind_a, kind_b = type(a), type(b)
    # The edges and version boxes, as ``apply`` collects them (both inputs are
    # differentiable: ``_install_arithmetic_operators`` checks); each operand's read inline,
    # not through a helper: this is every arithmetic operator's hot path.
    edge_a = box_a = edge_b = box_b = None
    if kind_a is Tensor:
        x = a._data
        box_a = a._version
        edge_a = a._node
        if edge_a is None and a._requires_grad:
            edge_a = a
    else:
        x = a
    if kind_b is Tensor:
        y = b._data
        box_b = b._version
        edge_b = b._node
        if edge_b is None and b._requires_grad:
            edge_b = b
    elif kind_a is Tensor:
        # (a NumPy operand of an op that may be recorded is copied, as ``_constants`` does)
        y = b.copy() if kind_b is np.ndarray and edge_a is not None else b
    else:
        return apply(op, (a, b), {})
    if kind_a is np.ndarray and edge_b is not None:
        x = a.copy()  # as ``_constants``
    # (an op in tier 0 takes ``apply``, where tier 0 serves it)
    done = None if _detour or (_tiered and op in _tier0_ops) else op.run_pair(x, y)
    if done is None:
        return apply(op, (a, b), {})
    arrays, attrs, output = done
    # Tensor._make, inlined, as in ``apply``.
    result = _new_object(Tensor)
    result._data = output
    result._node = None
    result._requires_grad = False
    result._grad = None
    result._version = version = {0: 0}
    result._retains_grad = False
    if (edge_a is not None or edge_b is not None) and tape._state.enabled:
        result._node = tape.record_pair(
            op, edge_a, edge_b, arrays, box_a, box_b, output, version, attrs
        )
    return result


def _apply_view(op, x, attrs):
    """``registry.call_view``: ``op`` with ``view=True`` on a CPU Tensor, its result sharing the
    input's version counter (it is a view of the input's buffer); a plain ``apply`` otherwise."""
    if isinstance(x, Tensor) and type(x._data) is np.ndarray:
        result = apply(op, (x,), {**attrs, "view": True})
        result._version = x._version
        return result
    return apply(op, (x,), attrs)


registry.set_dispatch(apply, _apply_view)


def _inplace(target, op_name, other, **attrs):
    """``target op= other``: compute out of place, write into target's buffer, rebase it.

    Every check runs before the write, so an error leaves the target as it was. The target's
    old value, if the op's VJP needs it, is kept in a copy so that the recorded node does not
    see it overwritten; a result of a wider dtype is cast back by a recorded ``astype``. Nodes
    that saved the target's buffer earlier see its version change and make backward raise.
    """
    op = REGISTRY[op_name]
    trace = None if recorder is None else active_trace()
    recording = tape.is_grad_enabled()
    if recording and target._node is None and target._requires_grad:
        raise RuntimeError(LEAF_INPLACE)
    if type(other) in (list, tuple) and _holds_tensor(other):
        other = _stacked(other)  # as ``apply`` would, but before ``other_requires`` is read
    other_requires = isinstance(other, Tensor) and other.requires_grad
    records = recording and (target._node is not None or other_requires)
    if not (records or attrs) and _write_into(target, op, other, trace):
        return target
    mark = None if trace is None else trace.mark()
    source = target
    if records and 0 in op.saves:
        source = Tensor._make(_copy_data(target._data), target._node, target._requires_grad)
    result = registry.call(op_name, source, other, **attrs)
    if result.shape != target.shape:
        raise RuntimeError(
            f"output with shape {list(target.shape)} doesn't match the broadcast shape "
            f"{list(result.shape)}"
        )
    if result.dtype != target.dtype:
        result = _cast_back(result, target.dtype)
    if type(target._data) is np.ndarray:
        target._data[...] = result._data
    else:
        _cuda_device.assign(target._data, result._data)
    target._version[0] += 1
    tape.mutated()  # a cached backward's version check relies on this
    _rebase(target, result._node)
    if forward_seam is not None:
        forward_seam.wrote(target, result)
    if trace is not None:
        trace.wrote(mark, target._data)
    return target


def _rebase(target, node):
    """After an in-place update: ``target`` is the result of ``node``, if any."""
    # The node keeps its own copy of the result if it saved it, rather than the target's
    # buffer: ops save their output whether or not the edge that reads it is live (``y /= 4``
    # saves y for the divisor's gradient), and a later in-place op on the target must not
    # invalidate what was never needed.
    if node is not None:
        target._node = node
        if target._retains_grad:
            target._retains_grad = False
            target.retain_grad()  # .grad now means the gradient of the new value


def _write_into(target, op, other, trace=None):
    """``target op= other`` with nothing to record, by the op's kernel writing straight into
    the target's buffer (``p -= lr * g`` under ``no_grad``: no result buffer and no copy
    back), where the op's run cache knows the layout and the result has the target's shape
    and dtype (``ElementwiseOp.run_pair`` with ``out``); else False, with nothing changed.
    Not while this thread's ``trace`` records: it follows the update through the out-of-place
    op it records."""
    if trace is not None or forward_seam is not None:
        return False
    data = target._data
    run_pair = getattr(op, "run_pair", None)
    if run_pair is None or type(data) is not np.ndarray or not data.flags.c_contiguous:
        return False
    if _tiered and op in _tier0_ops:
        return False  # (tier 0 serves it out of place, through ``apply``)
    value = other._data if isinstance(other, Tensor) else other
    if run_pair(data, value, data) is None:
        return False
    target._version[0] += 1
    tape.mutated()
    return True


def _cast_back(result, dtype):
    """An in-place op's ``result`` of a wider dtype, for a target of ``dtype``: refused unless
    a same-kind cast; a recorded ``astype`` when it is in the graph (the write casts
    otherwise)."""
    if not np.can_cast(result.dtype, dtype, casting="same_kind"):
        raise RuntimeError(
            f"result type {result.dtype} can't be cast to the desired output type {dtype}"
        )
    if result._node is not None:
        return registry.call("astype", result, dtype=dtype)
    return result


def _copy_data(data):
    if type(data) is not np.ndarray:
        return _cuda_device.copy(data)
    copy = data.copy()
    if recorder is not None:
        trace = active_trace()
        if trace is not None:
            trace.copied(data, copy)
    return copy


# -- creation ----------------------------------------------------------------------------------


def _result_dtype(data, dtype):
    """The tensor dtype of ``data`` (an array), or the one ``dtype`` requests."""
    return dtypes.for_data(data.dtype) if dtype is None else dtypes.for_request(dtype)


def _leaf(array, requires_grad, device="cpu"):
    """A leaf tensor on ``device`` from a host array (copied to the GPU for ``"cuda"``)."""
    if requires_grad and array.dtype not in _FLOAT_DTYPES:
        raise RuntimeError(REQUIRES_GRAD_DTYPE)
    return Tensor._make(_to_device(array, device), requires_grad=bool(requires_grad))


def tensor(data, dtype=None, requires_grad=False, device="cpu"):
    """A new tensor holding a copy of ``data``.

    Parameters
    ----------
    data : scalar, nested list, ndarray or Tensor
        Python floats give float64; float32/float64 arrays keep their dtype; integer and bool
        data give int64 and bool tensors (which cannot require grad).
    dtype : dtype, optional
        Cast the data to this dtype instead.
    requires_grad : bool
        Record operations on this tensor so gradients can flow to it.
    device : {"cpu", "cuda"}
        Where the tensor lives (``"cuda"``: on the GPU, see :doc:`/cuda`).

    Returns
    -------
    Tensor
        A leaf tensor that owns its (C-contiguous) data.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.tensor([1, 2]).dtype
    dtype('int64')
    >>> anb.tensor([[1.0, 2.0]], requires_grad=True)
    tensor([[1., 2.]], requires_grad=True)
    """
    device = _check_device(device)
    data = _data_of(data)
    if _cuda_device.is_device_array(data):
        dtype = _result_dtype(data, dtype)
        if device == "cuda":
            return _leaf(_cuda_device.copy(data, dtype), requires_grad, device)
        data = _cuda_device.to_host(data)
    source = np.asarray(data)
    array = dtypes.convert(source, dtype)
    if array is source:
        array = array.copy()
    return _leaf(array, requires_grad, device)


def as_tensor(data, dtype=None, device=None):
    """Wrap ``data`` as a tensor, without copying where it can.

    A C-contiguous float32/float64 (or int64, bool) NumPy array is shared, not copied: writes
    to one show in the other. So is GPU memory: any object with a ``__cuda_array_interface__``
    (numba device arrays, CuPy arrays, PyTorch CUDA tensors) gives a cuda tensor on the same
    memory. Other data is converted as by :func:`tensor`. A Tensor of the requested dtype and
    device is returned as it is.

    Parameters
    ----------
    data : array_like, GPU array or Tensor
    dtype : dtype, optional
    device : {"cpu", "cuda"}, optional
        Where ``data`` is unless given (copied there otherwise).

    Returns
    -------
    Tensor

    Examples
    --------
    >>> import numpy as np, autograd_nb as anb
    >>> a = np.zeros(3)
    >>> t = anb.as_tensor(a)
    >>> a[0] = 5.0
    >>> t
    tensor([5., 0., 0.])
    """
    if device is not None:
        device = _check_device(device)
    if isinstance(data, Tensor):
        data = data if device is None else data.to(device)
        if dtype is None or dtypes.for_request(dtype) == data.dtype:
            return data
        return data.astype(dtype)
    if type(data) is not np.ndarray and _cuda_device.has_interface(data):
        _check_device("cuda")
        array = _cuda_device.from_interface(data)
        wanted = _result_dtype(array, dtype)
        if wanted != array.dtype:
            array = _cuda_device.copy(array, wanted)
        return _leaf(array, False, device or "cuda")
    array = dtypes.convert(np.asarray(data), dtype)
    return _leaf(array, False, device or "cpu")


def _shape_of(shape):
    if isinstance(shape, numbers.Integral):
        return (int(shape),)
    return tuple(int(n) for n in shape)


def _float_or(dtype):
    return dtypes.FLOAT64 if dtype is None else dtypes.for_request(dtype)


_CREATION_DOC = """A tensor of ``shape`` {what}.

    Parameters
    ----------
    shape : int or tuple of int
    dtype : dtype, optional
        float64 unless given.
    requires_grad : bool
    device : {{"cpu", "cuda"}}

    Returns
    -------
    Tensor

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.{name}((2, 3)).shape
    (2, 3)
    >>> anb.{name}(2, dtype="int64").dtype
    dtype('int64')
    """


def _filled(shape, fill_value, dtype, requires_grad, device):
    """A leaf of ``shape`` holding ``fill_value`` (None: uninitialised), made on ``device``."""
    if requires_grad and dtype not in _FLOAT_DTYPES:
        raise RuntimeError(REQUIRES_GRAD_DTYPE)
    if device == "cuda":
        if fill_value is None:
            array = _cuda_device.empty(shape, dtype)
        else:
            array = _cuda_device.full(shape, fill_value, dtype)
    elif fill_value is None:
        array = np.empty(shape, dtype)
    else:
        array = np.full(shape, fill_value, dtype)
    return Tensor._make(array, requires_grad=bool(requires_grad))


def _creation(name, fill_value, what):
    def create(shape, dtype=None, requires_grad=False, device="cpu"):
        device = _check_device(device)
        return _filled(_shape_of(shape), fill_value, _float_or(dtype), requires_grad, device)

    create.__name__ = create.__qualname__ = name
    create.__doc__ = _CREATION_DOC.format(what=what, name=name)
    return create


zeros = _creation("zeros", 0, "filled with zeros")
ones = _creation("ones", 1, "filled with ones")
empty = _creation("empty", None, "with uninitialised values")


def full(shape, fill_value, dtype=None, requires_grad=False, device="cpu"):
    """A tensor of ``shape`` filled with ``fill_value``.

    Parameters
    ----------
    shape : int or tuple of int
    fill_value : scalar
    dtype : dtype, optional
        Unless given, the dtype of ``fill_value`` by :func:`tensor`'s rules: a Python float
        gives float64, an int int64, a bool bool.
    requires_grad : bool
    device : {"cpu", "cuda"}

    Returns
    -------
    Tensor

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.full((2, 2), 0.5)
    tensor([[0.5, 0.5],
            [0.5, 0.5]])
    >>> anb.full(3, 7).dtype
    dtype('int64')
    """
    device = _check_device(device)
    fill_value = _host(_data_of(fill_value))
    dtype = _result_dtype(np.asarray(fill_value), dtype)
    return _filled(_shape_of(shape), fill_value, dtype, requires_grad, device)


_LIKE_DOC = """A tensor with the shape and dtype of ``other``, {what}.

    Parameters
    ----------
    other : Tensor or array_like
    dtype : dtype, optional
        Overrides ``other``'s dtype.
    requires_grad : bool
    device : {{"cpu", "cuda"}}, optional
        ``other``'s device unless given.

    Returns
    -------
    Tensor

    Examples
    --------
    >>> import numpy as np, autograd_nb as anb
    >>> x = anb.tensor(np.ones((2, 3), np.float32))
    >>> y = anb.{name}(x)
    >>> y.shape, y.dtype
    ((2, 3), dtype('float32'))
    """


def _like_array(other):
    return other._data if isinstance(other, Tensor) else np.asarray(other)


def _like(name, fill_value, what):
    def create(other, dtype=None, requires_grad=False, device=None):
        data = _like_array(other)
        device = _device_of(data) if device is None else _check_device(device)
        dtype = _result_dtype(data, dtype)
        return _filled(data.shape, fill_value, dtype, requires_grad, device)

    create.__name__ = create.__qualname__ = name
    create.__doc__ = _LIKE_DOC.format(what=what, name=name)
    return create


zeros_like = _like("zeros_like", 0, "filled with zeros")
ones_like = _like("ones_like", 1, "filled with ones")
empty_like = _like("empty_like", None, "with uninitialised values")


def full_like(other, fill_value, dtype=None, requires_grad=False, device=None):
    """A tensor with the shape and dtype of ``other``, filled with ``fill_value``.

    Parameters
    ----------
    other : Tensor or array_like
    fill_value : scalar
    dtype : dtype, optional
        Overrides ``other``'s dtype.
    requires_grad : bool
    device : {"cpu", "cuda"}, optional

    Returns
    -------
    Tensor

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.full_like(anb.zeros(3), 2.0)
    tensor([2., 2., 2.])
    """
    data = _like_array(other)
    device = _device_of(data) if device is None else _check_device(device)
    dtype = _result_dtype(data, dtype)
    return _filled(data.shape, _host(_data_of(fill_value)), dtype, requires_grad, device)


def arange(start, stop=None, step=1, dtype=None, requires_grad=False, device="cpu"):
    """Evenly spaced values in ``[start, stop)``, as ``numpy.arange``.

    With one argument it is the stop (``arange(3)`` is ``0, 1, 2``). Integer arguments give
    int64, float ones float64.

    Parameters
    ----------
    start, stop, step : int or float
    dtype : dtype, optional
    requires_grad : bool
    device : {"cpu", "cuda"}

    Returns
    -------
    Tensor

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.arange(4)
    tensor([0, 1, 2, 3])
    >>> anb.arange(1.0, 2.0, 0.25)
    tensor([1.  , 1.25, 1.5 , 1.75])
    """
    device = _check_device(device)
    array = np.arange(start, stop, step, dtype=None if dtype is None else _float_or(dtype))
    array = dtypes.convert(array, dtype)
    return _leaf(array, requires_grad, device)


def eye(N, M=None, k=0, dtype=None, requires_grad=False, device="cpu"):
    """The identity matrix (ones on the ``k``-th diagonal), as ``numpy.eye``.

    Parameters
    ----------
    N : int
        Number of rows.
    M : int, optional
        Number of columns (``N`` unless given).
    k : int
        The diagonal: 0 the main one, positive above it, negative below.
    dtype : dtype, optional
        float64 unless given.
    requires_grad : bool
    device : {"cpu", "cuda"}

    Returns
    -------
    Tensor

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.eye(2, 3, k=1)
    tensor([[0., 1., 0.],
            [0., 0., 1.]])
    """
    device = _check_device(device)
    return _leaf(np.eye(N, M, k, dtype=_float_or(dtype)), requires_grad, device)


CREATION = (
    "tensor as_tensor zeros ones empty full zeros_like ones_like empty_like full_like "
    "arange eye"
).split()


def _install_methods():
    """Give Tensor a method for every public function marked as one (``x.sum(axis=0)``)."""
    for name, function in FUNCTIONS.items():
        if not function.is_method or name in Tensor.__dict__:
            continue

        def method(self, *args, _function=function, **kwargs):
            return _function(self, *args, **kwargs)

        method.__name__ = method.__qualname__ = name
        method.__doc__ = f"Same as ``autograd_nb.{name}(self, ...)``."
        setattr(Tensor, name, method)


ops.load_all()
_GETITEM = REGISTRY["getitem"]
_install_methods()
_install_arithmetic_operators()
collector.watch_tensors(Tensor)
