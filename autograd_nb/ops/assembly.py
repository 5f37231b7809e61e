"""Assembly and rearrangement, with NumPy's names and arguments: stacking (``vstack``,
``hstack``, ``dstack``, ``column_stack``, ``append``, ``r_``, ``c_``), splitting, rolling,
repeating and tiling, flips and rotations, ``moveaxis``, ``pad``, ``sort``, ``take``,
``take_along_axis`` and ``diff``.

Every function here is a composite: its result is built by the shape and indexing ops
(``getitem`` with slices or index arrays, ``setitem``, ``concatenate``, ``reshape``,
``transpose``, ``broadcast_to``, ``subtract``), so it has no kernel and no VJP of its own,
runs on CUDA wherever those ops do, and differentiates to any order. Index arrays are worked
out with NumPy from the shapes, and for ``sort`` from the values: the permutation is constant
almost everywhere, so the gradient is scattered back through it.

Each public function returns a new buffer (never a view of its input), as the other shape
ops do. Internally, ``registry.call_view`` reshapes without a copy where that is safe: an input
that feeds an op which copies anyway, or a fresh intermediate that nothing else holds.
"""

import operator
import os
import sys
import warnings

import numpy as np

from . import _broadcast, registry
from .registry import call, call_view, host_values, public
from .shape import concatenate

# -- helpers -----------------------------------------------------------------------------------


def _shape(x):
    shape = getattr(x, "shape", None)
    return tuple(shape) if shape is not None else np.shape(x)


def _dtype(x):
    dtype = getattr(x, "dtype", None)
    return np.dtype(dtype) if dtype is not None else np.asarray(x).dtype


def _is_tensor(value):
    # Duck-typed: ops do not import the Tensor class (imports flow from tensor.py to ops/).
    return hasattr(value, "grad_fn") and hasattr(value, "requires_grad")


def _axis(axis, ndim):
    return _broadcast.normalize_axis((axis,), ndim)[0]


def _along(axis, item):
    """The index that selects ``item`` along ``axis`` and everything along the others."""
    return (slice(None),) * axis + (item,)


def _items(arrays):
    """A sequence argument of the stacking functions as a tuple (a Tensor or an array is the
    sequence of its sub-arrays along the first axis, as in NumPy)."""
    if type(arrays) is list or type(arrays) is tuple:
        return tuple(arrays)
    if hasattr(arrays, "shape"):
        return tuple(arrays[i] for i in range(len(arrays)))
    raise TypeError("arrays to stack must be passed as a sequence (a list or a tuple)")


def _index_array(indices):
    """Integer indices as an intp array, converted only where NumPy's ``take`` would."""
    return host_values(indices).astype(np.intp, casting="safe", copy=False)


# -- at least n dimensions, stacking -----------------------------------------------------------


def _at_least_shape(shape, ndim):
    """The shape NumPy's ``atleast_{ndim}d`` gives an array of ``shape``."""
    if len(shape) >= ndim:
        return shape
    if ndim == 3:
        return {0: (1, 1, 1), 1: (1,) + shape + (1,), 2: shape + (1,)}[len(shape)]
    return (1,) * (ndim - len(shape)) + shape


def _at_least(x, ndim):
    """``x`` with at least ``ndim`` dimensions, for a join that copies anyway: ``x`` itself
    when it has them."""
    shape = _shape(x)
    new_shape = _at_least_shape(shape, ndim)
    if new_shape == shape:
        return x
    return call_view("reshape", x, shape=new_shape)


def _atleast(ndim, arrays):
    results = tuple(call("reshape", a, shape=_at_least_shape(_shape(a), ndim)) for a in arrays)
    return results[0] if len(results) == 1 else results


@public(method=False, family="shape")
def atleast_1d(*arys):
    """Each input with at least one dimension (a 0-d input becomes shape ``(1,)``).

    Returns
    -------
    Tensor, or a tuple of Tensors for several inputs
        New tensors (NumPy returns an input that has enough dimensions as it is).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.atleast_1d(anb.tensor(2.0))
    tensor([2.])
    """
    return _atleast(1, arys)


@public(method=False, family="shape")
def atleast_2d(*arys):
    """Each input with at least two dimensions: ``()`` becomes ``(1, 1)``, ``(n,)`` becomes
    ``(1, n)``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.atleast_2d(anb.ones(3)).shape
    (1, 3)
    """
    return _atleast(2, arys)


@public(method=False, family="shape")
def atleast_3d(*arys):
    """Each input with at least three dimensions: ``()`` becomes ``(1, 1, 1)``, ``(n,)``
    becomes ``(1, n, 1)`` and ``(m, n)`` becomes ``(m, n, 1)``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> [t.shape for t in anb.atleast_3d(anb.ones(3), anb.ones((2, 3)))]
    [(1, 3, 1), (2, 3, 1)]
    """
    return _atleast(3, arys)


def _cast(result, dtype, casting, sources):
    """``vstack``/``hstack``'s ``dtype=`` and ``casting=``: NumPy's check, then a cast."""
    if dtype is None:
        return result
    dtype = np.dtype(dtype)
    for source in sources:
        if not np.can_cast(_dtype(source), dtype, casting=casting):
            raise TypeError(
                f"Cannot cast array data from {_dtype(source)!r} to {dtype!r} according to "
                f"the rule {casting!r}"
            )
    return result if result.dtype == dtype else result.astype(dtype)


@public(method=False, family="shape")
def vstack(tup, *, dtype=None, casting="same_kind"):
    """Stack tensors vertically (along the first axis); 1-D inputs become rows.

    Parameters
    ----------
    tup : sequence of Tensor or array_like
    dtype : dtype, optional
        The result's dtype, reached from the inputs under ``casting`` (as NumPy's).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.vstack([anb.tensor([1.0, 2.0]), anb.tensor([[3.0, 4.0]])])
    tensor([[1., 2.],
            [3., 4.]])
    """
    arrays = [_at_least(a, 2) for a in _items(tup)]
    return _cast(concatenate(arrays, axis=0), dtype, casting, arrays)


#: Whether the installed NumPy deprecates ``row_stack`` (it does from 2.0 on, with a warning).
ROW_STACK_DEPRECATED = np.lib.NumpyVersion(np.__version__) >= "2.0.0"


@public(method=False, family="shape")
def row_stack(tup, *, dtype=None, casting="same_kind"):
    """:func:`vstack` under NumPy 1's name. Where the installed NumPy deprecates the name
    (NumPy 2), it warns as NumPy does (``DeprecationWarning``).

    Examples
    --------
    >>> import warnings
    >>> import autograd_nb as anb
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", DeprecationWarning)
    ...     anb.row_stack([anb.tensor([1.0, 2.0]), anb.tensor([3.0, 4.0])])
    tensor([[1., 2.],
            [3., 4.]])
    """
    if ROW_STACK_DEPRECATED:
        warnings.warn(
            "`row_stack` alias is deprecated. Use `np.vstack` directly.",
            DeprecationWarning,
            stacklevel=_outside_the_package(),
        )
    return vstack(tup, dtype=dtype, casting=casting)


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _outside_the_package():
    """The ``stacklevel`` that points a warning of the caller at the first frame outside
    autograd_nb (``autograd_nb.numpy.row_stack`` calls ``row_stack`` from the package), so
    that Python's default filters show it where they would show NumPy's."""
    level, frame = 2, sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        level, frame = level + 1, frame.f_back
    return level


@public(method=False, family="shape")
def hstack(tup, *, dtype=None, casting="same_kind"):
    """Stack tensors horizontally: along the second axis, or the first for 1-D inputs.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.hstack([anb.tensor([1.0, 2.0]), anb.tensor([3.0])])
    tensor([1., 2., 3.])
    >>> anb.hstack([anb.ones((2, 1)), anb.zeros((2, 2))]).shape
    (2, 3)
    """
    arrays = [_at_least(a, 1) for a in _items(tup)]
    axis = 0 if arrays and len(_shape(arrays[0])) == 1 else 1
    return _cast(concatenate(arrays, axis=axis), dtype, casting, arrays)


@public(method=False, family="shape")
def dstack(tup):
    """Stack tensors along the third axis (after ``atleast_3d``).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.dstack([anb.ones((2, 3)), anb.zeros((2, 3))]).shape
    (2, 3, 2)
    """
    return concatenate([_at_least(a, 3) for a in _items(tup)], axis=2)


@public(method=False, family="shape")
def column_stack(tup):
    """Stack 1-D tensors as the columns of a 2-D one (2-D inputs are joined as they are).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.column_stack([anb.tensor([1.0, 2.0]), anb.tensor([3.0, 4.0])])
    tensor([[1., 3.],
            [2., 4.]])
    """
    columns = []
    for a in _items(tup):
        shape = _shape(a)
        if len(shape) < 2:
            a = call_view("reshape", a, shape=(-1, 1))  # () -> (1, 1), (n,) -> (n, 1)
        columns.append(a)
    return concatenate(columns, axis=1)


@public(method=False, family="shape")
def append(arr, values, axis=None):
    """``values`` appended to the end of ``arr``: both flattened when ``axis`` is None, else
    joined along ``axis`` (they must then match elsewhere).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.append(anb.tensor([[1.0, 2.0]]), anb.tensor([3.0]))
    tensor([1., 2., 3.])
    """
    return concatenate([arr, values], axis=axis)


# -- np.r_ and np.c_ ---------------------------------------------------------------------------


class AxisConcatenator:
    """``np.r_`` and ``np.c_``: index with slices, scalars and tensors to join them.

    NumPy's rules (``numpy.lib.index_tricks.AxisConcatenator``): a slice ``a:b:s`` is
    ``arange(a, b, s)`` (``linspace(a, b, n)`` for an imaginary step ``nj``), scalars and
    tensors are given at least ``ndmin`` dimensions (1-D ones placed by ``trans1d``), and all
    are joined along ``axis``; a first string such as ``"0,2,1"`` sets axis, ndmin and
    trans1d. Given a Tensor, the result is recorded; without one it is NumPy's own result.
    The matrix directives ``"r"`` and ``"c"`` are not provided.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([1.0, 2.0], requires_grad=True)
    >>> anb.r_[x, 0.0, 5:7]
    tensor([1., 2., 0., 5., 6.], grad_fn=<ConcatenateBackward>)
    >>> anb.c_[x, x * 2].shape
    (2, 2)
    """

    def __init__(self, theirs, axis, ndmin, trans1d):
        self._theirs = theirs
        self.axis = axis
        self.ndmin = ndmin
        self.trans1d = trans1d

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        if not any(_is_tensor(item) for item in key):
            return self._theirs[key]
        axis, ndmin, trans1d = self.axis, self.ndmin, self.trans1d
        pieces, kinds = [], []
        for position, item in enumerate(key):
            if isinstance(item, str):
                if position != 0:
                    raise ValueError("special directives must be the first entry.")
                axis, ndmin, trans1d = _directive(item, axis, ndmin, trans1d)
                continue
            if isinstance(item, slice):
                piece = _slice_range(item)
                if ndmin > 1:
                    piece = np.array(piece, ndmin=ndmin)
                    if trans1d != -1:
                        piece = piece.swapaxes(-1, trans1d)
                kinds.append(piece.dtype)
            elif type(item) in np.ScalarType:
                piece = item
                kinds.append(item)  # weak, as NumPy's: 1.0 does not widen float32
            else:
                piece = _upgraded(item, ndmin, trans1d)
                kinds.append(_dtype(item))
            pieces.append(piece)
        dtype = np.result_type(*kinds)
        return concatenate([_with_dtype(p, dtype, ndmin) for p in pieces], axis=axis)


def _directive(text, axis, ndmin, trans1d):
    if text in ("r", "c"):
        raise NotImplementedError(
            f"np.r_['{text}', ...] builds a numpy.matrix, which autograd_nb does not provide"
        )
    try:
        numbers = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"unknown special directive {text!r}") from None
    if len(numbers) > 3:
        raise ValueError(f"unknown special directive {text!r}")
    axis = numbers[0]
    ndmin = numbers[1] if len(numbers) > 1 else ndmin
    trans1d = numbers[2] if len(numbers) > 2 else trans1d
    return axis, ndmin, trans1d


def _slice_range(item):
    start = 0 if item.start is None else item.start
    step = 1 if item.step is None else item.step
    if isinstance(step, (complex, np.complexfloating)):
        return np.linspace(start, item.stop, num=int(abs(step)))
    return np.arange(start, item.stop, step)


def _upgraded(item, ndmin, trans1d):
    """``item`` with at least ``ndmin`` dimensions, where NumPy's concatenators put them."""
    shape = _shape(item)
    if len(shape) >= ndmin:
        return item
    piece = call_view("reshape", item, shape=(1,) * (ndmin - len(shape)) + shape)
    if trans1d != -1:
        k2 = ndmin - len(shape)
        k1 = trans1d + k2 + 1 if trans1d < 0 else trans1d
        axes = list(range(ndmin))
        piece = call("transpose", piece, axes=tuple(axes[:k1] + axes[k2:] + axes[k1:k2]))
    return piece


def _with_dtype(piece, dtype, ndmin):
    if _is_tensor(piece):
        return piece if piece.dtype == dtype else piece.astype(dtype)
    return np.array(piece, dtype=dtype, ndmin=ndmin)


registry.publish(AxisConcatenator(np.r_, 0, 1, -1), "r_", method=False, family="shape")
registry.publish(AxisConcatenator(np.c_, -1, 2, 0), "c_", method=False, family="shape")


# -- splitting ---------------------------------------------------------------------------------


def _split_bounds(n, indices_or_sections, equal):
    try:
        sections = operator.index(indices_or_sections)
    except TypeError:
        return [0] + [operator.index(i) for i in indices_or_sections] + [n]
    if sections <= 0:
        raise ValueError("number sections must be larger than 0.")
    if equal and n % sections:
        raise ValueError("array split does not result in an equal division")
    each, extras = divmod(n, sections)
    sizes = [0] + extras * [each + 1] + (sections - extras) * [each]
    return [int(b) for b in np.cumsum(sizes)]


def _split(ary, indices_or_sections, axis, equal):
    shape = _shape(ary)
    axis = _axis(axis, len(shape))
    bounds = _split_bounds(shape[axis], indices_or_sections, equal)
    return [
        call("getitem", ary, index=_along(axis, slice(start, stop)))
        for start, stop in zip(bounds[:-1], bounds[1:])
    ]


@public(method=False, family="shape")
def split(ary, indices_or_sections, axis=0):
    """Split a tensor into pieces along ``axis``.

    Parameters
    ----------
    ary : Tensor or array_like
    indices_or_sections : int or sequence of int
        A number of equal pieces (it must divide the axis), or the indices where the pieces
        start.
    axis : int, optional

    Returns
    -------
    list of Tensor

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.split(anb.arange(6.0), [2, 3])
    [tensor([0., 1.]), tensor([2.]), tensor([3., 4., 5.])]
    """
    return _split(ary, indices_or_sections, axis, equal=True)


@public(method=False, family="shape")
def array_split(ary, indices_or_sections, axis=0):
    """``split``, also into a number of pieces that does not divide the axis: the first
    ``n % sections`` pieces get one element more.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> [t.shape for t in anb.array_split(anb.ones(5), 3)]
    [(2,), (2,), (1,)]
    """
    return _split(ary, indices_or_sections, axis, equal=False)


@public(method=False, family="shape")
def hsplit(ary, indices_or_sections):
    """``split`` along the second axis (the first for 1-D tensors).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> [t.shape for t in anb.hsplit(anb.ones((2, 4)), 2)]
    [(2, 2), (2, 2)]
    """
    ndim = len(_shape(ary))
    if ndim == 0:
        raise ValueError("hsplit only works on arrays of 1 or more dimensions")
    return _split(ary, indices_or_sections, 1 if ndim > 1 else 0, equal=True)


@public(method=False, family="shape")
def vsplit(ary, indices_or_sections):
    """``split`` along the first axis of a tensor of two or more dimensions.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> [t.shape for t in anb.vsplit(anb.ones((4, 2)), [1])]
    [(1, 2), (3, 2)]
    """
    if len(_shape(ary)) < 2:
        raise ValueError("vsplit only works on arrays of 2 or more dimensions")
    return _split(ary, indices_or_sections, 0, equal=True)


@public(method=False, family="shape")
def dsplit(ary, indices_or_sections):
    """``split`` along the third axis of a tensor of three or more dimensions.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> [t.shape for t in anb.dsplit(anb.ones((1, 2, 4)), 2)]
    [(1, 2, 2), (1, 2, 2)]
    """
    if len(_shape(ary)) < 3:
        raise ValueError("dsplit only works on arrays of 3 or more dimensions")
    return _split(ary, indices_or_sections, 2, equal=True)


# -- roll, repeat, tile ------------------------------------------------------------------------


@public(method=False, family="shape")
def roll(a, shift, axis=None):
    """Roll elements along axes: those shifted past the end come back at the start.

    Parameters
    ----------
    a : Tensor or array_like
    shift : int or sequence of int
    axis : int or sequence of int, optional
        Broadcast against ``shift``; None rolls the flattened tensor (the shape is kept).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.roll(anb.arange(5.0), 2)
    tensor([3., 4., 0., 1., 2.])
    >>> anb.roll(anb.tensor([[1.0, 2.0], [3.0, 4.0]]), 1, axis=1)
    tensor([[2., 1.],
            [4., 3.]])
    """
    shape = _shape(a)
    if axis is None:
        rolled = roll(call_view("reshape", a, shape=(-1,)), shift, 0)
        return call_view("reshape", rolled, shape=shape)  # ``rolled`` is new, held by no one
    shifts, axes = np.broadcast_arrays(np.asarray(shift), np.asarray(axis))
    if shifts.ndim > 1:
        raise ValueError("'shift' and 'axis' should be scalars or 1D sequences")
    totals = [0] * len(shape)
    for s, ax in zip(shifts.reshape(-1), axes.reshape(-1)):
        totals[_axis(operator.index(ax), len(shape))] += operator.index(s)
    result = a
    for ax, total in enumerate(totals):
        n = shape[ax]
        cut = n - total % n if n else n
        if cut in (0, n):
            continue
        # Two slices, joined the other way round (as NumPy's roll): the gradient is two
        # strided copies back, where an index array would scatter element by element.
        tail = call("getitem", result, index=_along(ax, slice(cut, None)))
        head = call("getitem", result, index=_along(ax, slice(None, cut)))
        result = concatenate([tail, head], axis=ax)
    if result is a:
        result = call("reshape", a, shape=shape)  # a new tensor, as always
    return result


@public(family="shape")
def repeat(a, repeats, axis=None):
    """Repeat each element (each slice along ``axis``) ``repeats`` times.

    Parameters
    ----------
    a : Tensor or array_like
    repeats : int or sequence of int
        One count for all, or one per element along ``axis``.
    axis : int, optional
        None repeats the elements of the flattened tensor.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> anb.repeat(x, [1, 2], axis=0)
    tensor([[1., 2.],
            [3., 4.],
            [3., 4.]], grad_fn=<GetitemBackward>)
    >>> anb.grad(anb.repeat(x, 3).sum(), x)
    (tensor([[3., 3.],
           [3., 3.]]),)
    """
    if axis is None:
        a = call_view("reshape", a, shape=(-1,))
        axis = 0
    shape = _shape(a)
    axis = _axis(axis, len(shape))
    counts = _index_array(repeats)
    # One gather through an index array: the gradient then sums the repeats (repeated
    # indices accumulate in getitem's VJP).
    index = np.repeat(np.arange(shape[axis]), counts)
    return call("getitem", a, index=_along(axis, index))


@public(method=False, family="shape")
def tile(A, reps):
    """``A`` repeated ``reps`` times along each axis (NumPy's rules when ``reps`` and ``A``
    have different lengths: the shorter gets leading ones).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.tile(anb.tensor([1.0, 2.0]), (2, 2))
    tensor([[1., 2., 1., 2.],
            [1., 2., 1., 2.]])
    """
    try:
        reps = tuple(operator.index(r) for r in reps)
    except TypeError:
        reps = (operator.index(reps),)
    shape = _shape(A)
    ndim = max(len(shape), len(reps))
    shape = (1,) * (ndim - len(shape)) + shape
    reps = (1,) * (ndim - len(reps)) + reps
    if any(r < 0 for r in reps):
        raise ValueError("negative dimensions are not allowed")
    if all(r == 1 for r in reps):
        return call("reshape", A, shape=shape)
    spread, target = [], []
    for n, r in zip(shape, reps):
        spread += [1, n]
        target += [r, n]
    # (1, n0, 1, n1, ...) broadcast to (r0, n0, r1, n1, ...): the gradient sums the copies.
    x = call_view("reshape", A, shape=tuple(spread))
    x = call("broadcast_to", x, shape=tuple(target))
    # ``x`` is new and held by no one else: the result may be a view of it.
    return call_view("reshape", x, shape=tuple(n * r for n, r in zip(shape, reps)))


# -- flips, rotations, moving axes -------------------------------------------------------------


@public(method=False, family="shape")
def flip(m, axis=None):
    """Reverse the order of elements along ``axis`` (None: every axis; an int or a tuple).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.flip(anb.tensor([[1.0, 2.0], [3.0, 4.0]]), axis=1)
    tensor([[2., 1.],
            [4., 3.]])
    """
    ndim = len(_shape(m))
    axes = _broadcast.normalize_axis(axis, ndim)
    index = tuple(slice(None, None, -1) if d in axes else slice(None) for d in range(ndim))
    return call("getitem", m, index=index)


@public(method=False, family="shape")
def flipud(m):
    """Reverse the order of rows (the first axis).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.flipud(anb.tensor([1.0, 2.0, 3.0]))
    tensor([3., 2., 1.])
    """
    if len(_shape(m)) < 1:
        raise ValueError("Input must be >= 1-d.")
    return flip(m, 0)


@public(method=False, family="shape")
def fliplr(m):
    """Reverse the order of columns (the second axis).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.fliplr(anb.tensor([[1.0, 2.0, 3.0]]))
    tensor([[3., 2., 1.]])
    """
    if len(_shape(m)) < 2:
        raise ValueError("Input must be >= 2-d.")
    return flip(m, 1)


@public(method=False, family="shape")
def rot90(m, k=1, axes=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane of ``axes``, from the first axis
    towards the second.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.rot90(anb.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor([[2., 4.],
            [1., 3.]])
    """
    axes = tuple(axes)
    if len(axes) != 2:
        raise ValueError("len(axes) must be 2.")
    shape = _shape(m)
    ndim = len(shape)
    first, second = axes
    if first == second or abs(first - second) == ndim:
        raise ValueError("Axes must be different.")
    if not (-ndim <= first < ndim and -ndim <= second < ndim):
        raise ValueError(f"Axes={axes} out of range for array of ndim={ndim}.")
    k = operator.index(k) % 4
    if k == 0:
        return call("reshape", m, shape=shape)
    if k == 2:
        return flip(m, axes)
    order = list(range(ndim))
    order[first % ndim], order[second % ndim] = order[second % ndim], order[first % ndim]
    if k == 1:
        return call("transpose", flip(m, second), axes=tuple(order))
    return flip(call("transpose", m, axes=tuple(order)), second)


def _axis_list(axes, ndim, name):
    axes = [axes] if np.ndim(axes) == 0 else list(axes)
    result = []
    for a in axes:
        a = operator.index(a)
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(a, ndim, msg_prefix=name)
        result.append(a % ndim)
    if len(set(result)) != len(result):
        raise ValueError(f"repeated axis in `{name}` argument")
    return result


@public(method=False, family="shape")
def moveaxis(a, source, destination):
    """Move axes to new positions; the others keep their order.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.moveaxis(anb.ones((2, 3, 4)), 0, -1).shape
    (3, 4, 2)
    """
    ndim = len(_shape(a))
    source = _axis_list(source, ndim, "source")
    destination = _axis_list(destination, ndim, "destination")
    if len(source) != len(destination):
        raise ValueError(
            "`source` and `destination` arguments must have the same number of elements"
        )
    order = [d for d in range(ndim) if d not in source]
    for dest, src in sorted(zip(destination, source)):
        order.insert(dest, src)
    return call("transpose", a, axes=tuple(order))


# -- pad ---------------------------------------------------------------------------------------

#: Modes whose padding repeats elements of the input: one gather through index arrays.
_GATHER_MODES = ("edge", "reflect", "symmetric", "wrap")
_PAD_OPTIONS = {
    "constant": {"constant_values"},
    "edge": set(),
    "reflect": {"reflect_type"},
    "symmetric": {"reflect_type"},
    "wrap": set(),
}


def _pad_pairs(pad_width, ndim):
    """NumPy's reading of ``pad_width``: ``((before, after),) * ndim`` from an int, a pair or
    a sequence of pairs."""
    widths = np.asarray(pad_width)
    if widths.dtype.kind not in "iu":
        raise TypeError("`pad_width` must be of integral type.")
    if widths.ndim < 3 and widths.size == 1:
        widths = np.repeat(widths.reshape(1), 2)
    elif widths.ndim < 3 and widths.size == 2 and widths.shape != (2, 1):
        widths = widths.reshape(2)
    if widths.size and widths.min() < 0:
        raise ValueError("index can't contain negative values")
    pairs = np.broadcast_to(widths, (ndim, 2))
    return tuple((int(before), int(after)) for before, after in pairs)


@public(method=False, family="shape")
def pad(array, pad_width, mode="constant", **kwargs):
    """Pad a tensor, as ``numpy.pad``.

    Parameters
    ----------
    array : Tensor or array_like
    pad_width : int or sequence
        ``(before, after)`` widths per axis, or one pair or one int for all.
    mode : {'constant', 'edge', 'reflect', 'symmetric', 'wrap'}
        The other NumPy modes raise NotImplementedError.
    constant_values : scalar, sequence or 0-d Tensor, optional
        For ``'constant'`` (default 0); a 0-d Tensor gets the gradient of the padding.
    reflect_type : {'even'}, optional
        For ``'reflect'`` and ``'symmetric'``; ``'odd'`` is not provided.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> anb.pad(x, (1, 2), constant_values=9.0)
    tensor([9., 1., 2., 3., 9., 9.], grad_fn=<SetitemBackward>)
    >>> anb.pad(x, 2, mode="reflect")
    tensor([3., 2., 1., 2., 3., 2., 1.], grad_fn=<GetitemBackward>)
    """
    if not isinstance(mode, str) or mode not in _PAD_OPTIONS:
        raise NotImplementedError(
            f"pad: mode {mode!r} is not provided by autograd_nb (yet); the modes are "
            f"{', '.join(_PAD_OPTIONS)}"
        )
    unsupported = set(kwargs) - _PAD_OPTIONS[mode]
    if unsupported:
        raise ValueError(f"unsupported keyword arguments for mode '{mode}': {unsupported}")
    if kwargs.get("reflect_type", "even") != "even":
        raise NotImplementedError("pad: reflect_type='odd' is not provided by autograd_nb (yet)")
    shape = _shape(array)
    pairs = _pad_pairs(pad_width, len(shape))
    if not shape:
        return call("reshape", array, shape=())  # nothing to pad: a copy
    if mode in _GATHER_MODES:
        # Where each result element comes from, per axis: NumPy's pad of the positions.
        positions = [
            np.pad(np.arange(n), pair, mode=mode, **kwargs) for n, pair in zip(shape, pairs)
        ]
        return call("getitem", array, index=np.ix_(*positions))
    return _pad_constant(array, shape, pairs, kwargs.get("constant_values", 0))


def _pad_constant(array, shape, pairs, values):
    out_shape = tuple(n + before + after for n, (before, after) in zip(shape, pairs))
    inside = tuple(slice(before, before + n) for n, (before, _) in zip(shape, pairs))
    dtype = _dtype(array)
    if _is_tensor(values):
        if values.ndim != 0:
            raise NotImplementedError(
                "pad: constant_values given as a Tensor must be 0-d (one differentiable "
                "value for all the padding)"
            )
        if values.dtype != dtype:
            values = values.astype(dtype)
        base = call("broadcast_to", values, shape=out_shape)
    else:
        # NumPy's own constant padding of zeros: its per-axis values and corners.
        base = np.pad(np.zeros(shape, dtype), pairs, constant_values=values)
    return call("setitem", base, array, index=inside)


# -- sort, take, take_along_axis ---------------------------------------------------------------


@public(method=False, family="shape")
def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    """Sorted values along ``axis`` (None: of the flattened tensor), NaNs last.

    The gradient goes back through the sorting permutation (``argsort``), which is constant
    almost everywhere; of tied values, the one ``argsort`` put first gets the first
    position's gradient. Unlike ``ndarray.sort``, this returns a new tensor (no method).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([3.0, 1.0, 2.0], requires_grad=True)
    >>> y = anb.sort(x)
    >>> y
    tensor([1., 2., 3.], grad_fn=<GetitemBackward>)
    >>> anb.grad(y, x, grad_outputs=anb.tensor([1.0, 10.0, 100.0]))
    (tensor([100.,   1.,  10.]),)
    """
    if order is not None:
        raise ValueError("Cannot specify order when the array has no fields.")
    if axis is None:
        a = call_view("reshape", a, shape=(-1,))
        axis = -1
    permutation = np.argsort(host_values(a), axis=axis, kind=kind, stable=stable)
    return take_along_axis(a, permutation, axis)


@public(family="shape")
def take(a, indices, axis=None, out=None, mode="raise"):
    """Elements at ``indices`` along ``axis`` (None: of the flattened tensor).

    Parameters
    ----------
    a : Tensor or array_like
    indices : int or array_like of int
    axis : int, optional
    mode : {'raise', 'wrap', 'clip'}
        Out-of-range indices raise IndexError, wrap around, or clip to the ends.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> anb.take(x, [3, 0, 3])
    tensor([4., 1., 4.], grad_fn=<GetitemBackward>)
    >>> anb.take(x, [1], axis=1)
    tensor([[2.],
            [4.]], grad_fn=<GetitemBackward>)
    """
    if out is not None:
        raise TypeError("take: out= is not supported (the result is a new Tensor)")
    indices = _index_array(indices)
    if axis is None:
        a = call_view("reshape", a, shape=(-1,))
        axis = 0
    shape = _shape(a)
    axis = _axis(axis, len(shape))
    n = shape[axis]
    if mode in ("wrap", "clip"):
        if n == 0 and indices.size:
            raise IndexError("cannot do a non-empty take from an empty axes.")
        indices = indices % max(n, 1) if mode == "wrap" else np.clip(indices, 0, max(n - 1, 0))
    elif mode != "raise":
        raise ValueError(f"clipmode must be one of 'clip', 'raise', or 'wrap' (got {mode!r})")
    item = int(indices) if indices.ndim == 0 else indices
    return call("getitem", a, index=_along(axis, item))


@public(method=False, family="shape")
def take_along_axis(arr, indices, axis=-1):
    """Pick values along ``axis`` by matching 1-D slices of ``indices``, as
    ``numpy.take_along_axis`` (``argsort``'s and ``argmax(keepdims=True)``'s results index
    it directly).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> import numpy as np
    >>> x = anb.tensor([[10.0, 30.0, 20.0], [60.0, 40.0, 50.0]])
    >>> anb.take_along_axis(x, np.argmax(x.numpy(), axis=1, keepdims=True), axis=1)
    tensor([[30.],
            [60.]])
    """
    indices = host_values(indices)
    if indices.dtype.kind not in "iu":
        raise IndexError("`indices` must be an integer array")
    if axis is None:
        if indices.ndim != 1:
            raise ValueError("when axis=None, `indices` must have a single dimension.")
        arr = call_view("reshape", arr, shape=(-1,))
        axis = 0
    shape = _shape(arr)
    ndim = len(shape)
    axis = _axis(axis, ndim)
    if indices.ndim != ndim:
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    index = tuple(
        indices if d == axis else np.arange(n).reshape((1,) * d + (n,) + (1,) * (ndim - d - 1))
        for d, n in enumerate(shape)
    )
    return call("getitem", arr, index=index)


# -- diff, flatten -----------------------------------------------------------------------------


def _edge_values(value, shape, axis):
    """A ``prepend``/``append`` value of ``diff``: a scalar broadcast to one slice (a constant
    one stays a NumPy array, which joins a Tensor on any device)."""
    if np.ndim(value) != 0:
        return value
    edge = shape[:axis] + (1,) + shape[axis + 1 :]
    if _is_tensor(value):
        return call("broadcast_to", value, shape=edge)
    return np.broadcast_to(value, edge)


@public(method=False, family="shape")
def diff(a, n=1, axis=-1, prepend=None, append=None):
    """The ``n``-th discrete difference along ``axis``: ``a[1:] - a[:-1]``, ``n`` times.

    Parameters
    ----------
    a : Tensor or array_like
    n : int, optional
    axis : int, optional
    prepend, append : scalar, Tensor or array_like, optional
        Joined to ``a`` along ``axis`` first (scalars broadcast to one slice); None: nothing.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.diff(anb.tensor([1.0, 4.0, 9.0, 16.0]))
    tensor([3., 5., 7.])
    >>> anb.diff(anb.tensor([1.0, 4.0, 9.0, 16.0]), n=2, prepend=0.0)
    tensor([2., 2., 2.])
    """
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n!r}")
    shape = _shape(a)
    if n == 0:
        return call("reshape", a, shape=shape)
    if not shape:
        raise ValueError("diff requires input that is at least one dimensional")
    axis = _axis(axis, len(shape))
    if prepend is not None or append is not None:
        parts = [a]
        if prepend is not None:
            parts.insert(0, _edge_values(prepend, shape, axis))
        if append is not None:
            parts.append(_edge_values(append, shape, axis))
        a = concatenate(parts, axis=axis)
    upper, lower = _along(axis, slice(1, None)), _along(axis, slice(None, -1))
    for _ in range(n):
        later = call("getitem", a, index=upper)
        earlier = call("getitem", a, index=lower)
        # NumPy's difference of booleans is ``!=``.
        a = later != earlier if later.dtype == np.bool_ else call("subtract", later, earlier)
    return a


@public(family="shape")
def flatten(a, order="C"):
    """The elements of ``a`` as a new one-dimensional tensor, as ``ndarray.flatten``:
    ``order='C'`` row by row, ``'F'`` column by column (``'A'`` and ``'K'`` are ``'C'``:
    tensors are C-contiguous).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> x.flatten()
    tensor([1., 2., 3., 4.])
    >>> x.flatten("F")
    tensor([1., 3., 2., 4.])
    """
    if order in ("C", "A", "K"):
        return call("reshape", a, shape=(-1,))
    if order == "F":
        columns = call("transpose", a)
        return call_view("reshape", columns, shape=(-1,))  # ``columns`` is held by no one
    raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})")
