"""Tensor: a buffer (a C-contiguous NumPy array) plus autograd metadata.

This module is the surface over the layers below: it turns op calls on Tensors into forward
kernels (:mod:`autograd_nb.ops`) and records them (:mod:`autograd_nb.tape`).
"""

import numbers

import numpy as np

from . import ops, tape
from .ops import registry
from .ops.registry import FUNCTIONS, REGISTRY

_FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

REQUIRES_GRAD_DTYPE = "only Tensors of floating point dtype can require gradients"
LEAF_INPLACE = (
    "a leaf Variable that requires grad is being used in an in-place operation."
)


def _check_device(device):
    device = str(device)
    if device == "cpu":
        return device
    if device.startswith("cuda"):
        raise RuntimeError(
            "device='cuda' is not available: the CUDA backend of autograd_nb is not built in "
            "this version (tensors live on device='cpu')"
        )
    raise ValueError(f"unknown device {device!r}; expected 'cpu' or 'cuda'")


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

    __slots__ = ("_data", "_node", "_requires_grad", "_grad", "_version", "_retains_grad",
                 "__weakref__")
    # NumPy defers to our reflected operators (``array + tensor`` -> ``Tensor.__radd__``).
    __array_ufunc__ = None

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def _make(cls, data, node=None, requires_grad=False, version=None):
        self = object.__new__(cls)
        self._data = data
        self._node = node
        self._requires_grad = requires_grad
        self._grad = None
        self._version = [0] if version is None else version
        self._retains_grad = False
        return self

    def __init__(self, *args, **kwargs):
        raise TypeError("create tensors with autograd_nb.tensor(...) or autograd_nb.as_tensor(...)")

    # -- attributes --------------------------------------------------------------------------

    @property
    def shape(self):
        return self._data.shape

    @property
    def ndim(self):
        return self._data.ndim

    @property
    def size(self):
        """Number of elements, as NumPy's ``ndarray.size``."""
        return self._data.size

    @property
    def dtype(self):
        return self._data.dtype

    @property
    def device(self):
        return "cpu"

    @property
    def requires_grad(self):
        return self._node is not None or self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        if self._node is not None:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use "
                "a computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach()."
            )
        if flag and self._data.dtype not in _FLOAT_DTYPES:
            raise RuntimeError(REQUIRES_GRAD_DTYPE)
        self._requires_grad = bool(flag)

    @property
    def grad(self):
        """Gradient accumulated by ``backward()`` (a Tensor), or None."""
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad must be a Tensor or None, not {type(value).__name__}")
            if value.shape != self.shape:
                raise RuntimeError(
                    f"assigned grad has data of a different size: {value.shape} vs {self.shape}"
                )
        self._grad = value

    @property
    def grad_fn(self):
        """The node that produced this tensor (its ``name`` names the op); None for leaves."""
        return self._node

    @property
    def is_leaf(self):
        return self._node is None

    @property
    def T(self):
        return FUNCTIONS["transpose"](self)

    @property
    def _version_number(self):
        return self._version[0]

    # -- conversion --------------------------------------------------------------------------

    def numpy(self):
        """The data as a NumPy array (shares memory with the tensor on the CPU)."""
        return self._data

    def __array__(self, dtype=None, copy=None):
        if dtype is None and not copy:
            return self._data
        return np.array(self._data, dtype=dtype, copy=True if copy else None)

    def item(self):
        if self._data.size != 1:
            raise ValueError(
                f"a Tensor with {self._data.size} elements cannot be converted to Scalar"
            )
        return self._data.reshape(-1)[0].item()

    def tolist(self):
        return self._data.tolist()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError(
                f"Boolean value of Tensor with {self._data.size} elements is ambiguous"
            )
        return bool(self._data.reshape(-1)[0])

    def __index__(self):
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    __hash__ = object.__hash__

    def __repr__(self):
        body = np.array2string(self._data, separator=", ", prefix="tensor(")
        extras = []
        if self._data.dtype not in (np.dtype(np.float64), np.dtype(np.int64), np.dtype(bool)):
            extras.append(f"dtype={self._data.dtype.name}")
        if self._node is not None:
            extras.append(f"grad_fn={self._node!r}")
        elif self._requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + ", ".join([body] + extras) + ")"

    # -- autograd ----------------------------------------------------------------------------

    def detach(self):
        """A tensor sharing this one's data (and version counter), cut from the graph."""
        return Tensor._make(self._data, version=self._version)

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = requires_grad
        return self

    def retain_grad(self):
        """Ask backward to fill ``.grad`` of this non-leaf tensor too."""
        if self._node is None:
            if not self._requires_grad:
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
            return
        if self._retains_grad:
            return
        import weakref

        if self._node.retained is None:
            self._node.retained = []
        self._node.retained.append(weakref.ref(self))
        self._retains_grad = True

    @property
    def retains_grad(self):
        return self._retains_grad

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate the gradient of this tensor into ``.grad`` of the leaves.

        ``gradient`` is the vector ``v`` of the vector-Jacobian product: dL/d(self) for the
        loss L that comes after; it may be omitted for a single-element tensor. See
        :func:`autograd_nb.autograd.backward`.
        """
        from .autograd import backward  # the layer above, reached only on demand

        backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph,
                 inputs=inputs)

    # -- devices and dtypes ------------------------------------------------------------------

    def to(self, device=None, dtype=None):
        result = self
        if device is not None:
            _check_device(device)
        if dtype is not None:
            result = result.astype(dtype)
        return result

    def cpu(self):
        return self

    def cuda(self):
        return self.to("cuda")

    # -- indexing ----------------------------------------------------------------------------

    def __getitem__(self, index):
        return registry.call("getitem", self, index=_unwrap_index(index))

    def __setitem__(self, index, value):
        _inplace(self, "setitem", value, index=_unwrap_index(index))

    # -- shape methods with NumPy's varargs forms --------------------------------------------

    def reshape(self, *shape):
        if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
            shape = shape[0]
        return FUNCTIONS["reshape"](self, shape)

    def transpose(self, *axes):
        if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], numbers.Integral)):
            axes = axes[0]
        return FUNCTIONS["transpose"](self, axes or None)

    def astype(self, dtype):
        return registry.call("astype", self, dtype=np.dtype(dtype))

    # -- operators ---------------------------------------------------------------------------

    def __add__(self, other):
        return registry.call("add", self, other)

    def __radd__(self, other):
        return registry.call("add", other, self)

    def __sub__(self, other):
        return registry.call("subtract", self, other)

    def __rsub__(self, other):
        return registry.call("subtract", other, self)

    def __mul__(self, other):
        return registry.call("multiply", self, other)

    def __rmul__(self, other):
        return registry.call("multiply", other, self)

    def __truediv__(self, other):
        return registry.call("divide", self, other)

    def __rtruediv__(self, other):
        return registry.call("divide", other, self)

    def __pow__(self, other):
        return registry.call("power", self, other)

    def __rpow__(self, other):
        return registry.call("power", other, self)

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

    def __iadd__(self, other):
        return _inplace(self, "add", other)

    def __isub__(self, other):
        return _inplace(self, "subtract", other)

    def __imul__(self, other):
        return _inplace(self, "multiply", other)

    def __itruediv__(self, other):
        return _inplace(self, "divide", other)

    def __ipow__(self, other):
        return _inplace(self, "power", other)

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


def _data_of(value):
    return value._data if isinstance(value, Tensor) else value


def _no_grad_result(ufunc, *args):
    return Tensor._make(np.asarray(ufunc(*(_data_of(a) for a in args)), order="C"))


def _unwrap_index(index):
    if isinstance(index, tuple):
        return tuple(_data_of(i) for i in index)
    return _data_of(index)


# -- running ops -------------------------------------------------------------------------------


def apply(op, args, attrs):
    """Run ``op`` on ``args`` (Tensors, arrays or Python scalars) and record it if needed."""
    values = []
    needs_grad = False
    for k, arg in enumerate(args):
        if isinstance(arg, Tensor):
            values.append(arg._data)
            if (arg._node is not None or arg._requires_grad) and op.is_differentiable(k):
                needs_grad = True
        elif isinstance(arg, (list, tuple)):
            values.append(np.asarray(arg))
        else:
            values.append(arg)
    arrays, attrs = op.prepare(values, attrs)
    output = op.forward(arrays, attrs)
    result = Tensor._make(output)
    if needs_grad and tape.is_grad_enabled():
        edges = []
        boxes = []
        for k, arg in enumerate(args):
            if isinstance(arg, Tensor):
                boxes.append(arg._version)
                if not op.is_differentiable(k):
                    edges.append(None)
                elif arg._node is not None:
                    edges.append(arg._node)
                else:
                    edges.append(arg if arg._requires_grad else None)
            else:
                boxes.append(None)
                edges.append(None)
        result._node = tape.record(op, edges, arrays, boxes, output, result._version, attrs)
    return result


registry.set_dispatch(apply)


def _inplace(target, op_name, other, **attrs):
    """``target op= other``: compute out of place, write into target's buffer, rebase it.

    The target's old value, if the op's VJP needs it, is kept in a copy so that the recorded
    node does not see it overwritten.
    """
    op = REGISTRY[op_name]
    other_requires = isinstance(other, Tensor) and other.requires_grad
    if tape.is_grad_enabled() and target._node is None and target._requires_grad:
        raise RuntimeError(LEAF_INPLACE)
    source = target
    if 0 in op.saves and (target.requires_grad or other_requires):
        source = Tensor._make(target._data.copy(), target._node, target._requires_grad)
    result = registry.call(op_name, source, other, **attrs)
    if result.shape != target.shape:
        raise ValueError(
            f"output with shape {target.shape} doesn't match the broadcast shape {result.shape}"
        )
    if not np.can_cast(result.dtype, target.dtype, casting="same_kind"):
        raise TypeError(
            f"result type {result.dtype} can't be cast to the desired output type {target.dtype}"
        )
    target._data[...] = result._data
    target._version[0] += 1
    node = result._node
    if node is not None:
        # The node's output now lives in the target's buffer, at its new version.
        if op.saves_output:
            node.saved_output = target._data
            node.versions = node.versions[:-1] + ((target._version, target._version[0]),)
        target._node = node
    return target


# -- creation ----------------------------------------------------------------------------------


def _result_dtype(data, dtype):
    if dtype is not None:
        return np.dtype(dtype)
    kind = data.dtype.kind
    if kind == "f":
        return data.dtype if data.dtype in _FLOAT_DTYPES else np.dtype(np.float32)
    if kind in "iu":
        return np.dtype(np.int64)
    if kind == "b":
        return np.dtype(bool)
    raise TypeError(f"unsupported data type {data.dtype} for a tensor")


def _leaf(array, requires_grad):
    if requires_grad and array.dtype not in _FLOAT_DTYPES:
        raise RuntimeError(REQUIRES_GRAD_DTYPE)
    return Tensor._make(array, requires_grad=bool(requires_grad))


def tensor(data, dtype=None, requires_grad=False, device="cpu"):
    """A new tensor holding a copy of ``data``.

    Parameters
    ----------
    data : scalar, nested list, ndarray or Tensor
        Python floats give float64; float32/float64 arrays keep their dtype; integer and bool
        data give int64 and bool tensors (which cannot require grad).
    dtype : dtype, optional
    requires_grad : bool
        Record operations on this tensor so gradients can flow to it.
    device : {"cpu", "cuda"}

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.tensor([1, 2]).dtype
    dtype('int64')
    >>> anb.tensor([[1.0, 2.0]], requires_grad=True)
    tensor([[1., 2.]], requires_grad=True)
    """
    _check_device(device)
    array = np.array(_data_of(data), copy=True)
    array = np.asarray(array, dtype=_result_dtype(array, dtype), order="C")
    return _leaf(array, requires_grad)


def as_tensor(data, dtype=None, device="cpu"):
    """Wrap ``data`` as a tensor without copying where it can (C-contiguous, supported dtype).

    Examples
    --------
    >>> import numpy as np, autograd_nb as anb
    >>> a = np.zeros(3)
    >>> t = anb.as_tensor(a)
    >>> a[0] = 5.0
    >>> t
    tensor([5., 0., 0.])
    """
    _check_device(device)
    if isinstance(data, Tensor) and (dtype is None or np.dtype(dtype) == data.dtype):
        return data
    array = np.asarray(_data_of(data))
    array = np.asarray(array, dtype=_result_dtype(array, dtype), order="C")
    return _leaf(array, False)


def _shape_of(shape):
    if isinstance(shape, numbers.Integral):
        return (int(shape),)
    return tuple(int(n) for n in shape)


def _creation(name, make, doc):
    def create(shape, dtype=None, requires_grad=False, device="cpu"):
        _check_device(device)
        array = make(_shape_of(shape), np.float64 if dtype is None else dtype)
        return _leaf(array, requires_grad)

    create.__name__ = create.__qualname__ = name
    create.__doc__ = doc
    return create


zeros = _creation("zeros", np.zeros, "A tensor of zeros of ``shape`` (an int or a tuple).")
ones = _creation("ones", np.ones, "A tensor of ones of ``shape`` (an int or a tuple).")
empty = _creation("empty", np.empty, "An uninitialised tensor of ``shape``.")


def full(shape, fill_value, dtype=None, requires_grad=False, device="cpu"):
    """A tensor of ``shape`` filled with ``fill_value`` (float64 unless ``dtype``)."""
    _check_device(device)
    fill_value = _data_of(fill_value)
    if dtype is None:
        dtype = _result_dtype(np.asarray(fill_value), None)
        if dtype.kind != "f":
            dtype = np.dtype(np.float64) if isinstance(fill_value, float) else dtype
    return _leaf(np.full(_shape_of(shape), fill_value, dtype=dtype), requires_grad)


def _like(name, make):
    def create(other, dtype=None, requires_grad=False, device=None):
        if device is not None:
            _check_device(device)
        data = _data_of(other)
        array = make(np.shape(data), dtype=dtype or np.asarray(data).dtype)
        return _leaf(array, requires_grad)

    create.__name__ = create.__qualname__ = name
    create.__doc__ = f"``{name[:-5]}`` with the shape and dtype of ``other``."
    return create


zeros_like = _like("zeros_like", np.zeros)
ones_like = _like("ones_like", np.ones)
empty_like = _like("empty_like", np.empty)


def full_like(other, fill_value, dtype=None, requires_grad=False, device=None):
    """A tensor shaped like ``other`` filled with ``fill_value`` (``other``'s dtype)."""
    if device is not None:
        _check_device(device)
    data = np.asarray(_data_of(other))
    array = np.full(data.shape, _data_of(fill_value), dtype=dtype or data.dtype)
    return _leaf(array, requires_grad)


def arange(start, stop=None, step=1, dtype=None, requires_grad=False, device="cpu"):
    """Evenly spaced values in ``[start, stop)``, as ``numpy.arange`` (ints give int64)."""
    _check_device(device)
    array = np.arange(start, stop, step) if stop is not None else np.arange(start)
    return _leaf(np.asarray(array, dtype=_result_dtype(array, dtype), order="C"), requires_grad)


def linspace(start, stop, num=50, endpoint=True, dtype=None, requires_grad=False, device="cpu"):
    """``num`` evenly spaced values from ``start`` to ``stop``, as ``numpy.linspace``."""
    _check_device(device)
    array = np.linspace(start, stop, num, endpoint=endpoint, dtype=dtype)
    return _leaf(array, requires_grad)


def eye(N, M=None, k=0, dtype=None, requires_grad=False, device="cpu"):
    """The identity matrix (ones on the ``k``-th diagonal), as ``numpy.eye``."""
    _check_device(device)
    return _leaf(np.eye(N, M, k, dtype=dtype or np.float64), requires_grad)


CREATION = (
    "tensor as_tensor zeros ones empty full zeros_like ones_like empty_like full_like "
    "arange linspace eye"
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
_install_methods()
