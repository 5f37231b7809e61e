"""Forward rules of the elementwise ops, generated from their formula rows.

Each row of :mod:`autograd_nb.ops.elementwise` holds, per input, the VJP contribution
``g * dy/dx`` of one element. Elementwise derivatives are diagonal, so the same formula with
the input's tangent in place of ``g`` is that input's share of the output's tangent: it is
broadcast to the output's shape (never summed back, as a VJP is), and the shares add up.

Complex operands follow torch's convention. A holomorphic op (its row says so) has the
tangent ``f'(z) t``: the real formula evaluated over complex Tensors. Any other complex case
(``abs``, complex ``power``'s own VJP formulas, the parts ``real``, ``imag``, ``conj``,
``angle``) is R-linear: from its VJP ``M`` (``M(g) = conj(A) g + B conj(g)``), evaluated at
``g = 1`` and ``g = i``, the tangent is ``A t + B conj(t)`` (the adjoint of ``M`` under the real
inner product ``Re <a, b>``), and its real part for a real output.

Batched tangents: each tangent is aligned to the output's rank behind its batch
(:func:`~autograd_nb.autograd.jvp.aligned`), so the formula broadcasts it against the primals
from the right and every share has the shape ``batch + output.shape``.
"""

import numpy as np

from ...ops import elementwise as _elementwise
from ...ops.registry import FUNCTIONS, REGISTRY, call
from . import add_tangents, aligned, batch_shape, jvp_rule, zero

_TENSOR_NAMES = _elementwise._tensor_namespace()


def _is_complex(value):
    dtype = getattr(value, "dtype", None)
    return dtype is not None and dtype.kind == "c" or isinstance(value, complex)


def _namespace(op, primals, output, attrs):
    names = dict(_TENSOR_NAMES)
    names.update(zip(op.input_names, primals))
    names["y"] = output
    for i, param in enumerate(op.params):
        names[param] = float(attrs["params"][i])
    return names


def _evaluate(code, names, g):
    names["g"] = g
    return eval(code, {"__builtins__": {"abs": abs}}, names)  # noqa: S307 (the op's own row)


def _complex_share(op, k, names, tangent, output):
    """Input ``k``'s share of the tangent of a complex op that is not holomorphic, from its
    VJP at ``g = 1`` and ``g = i`` (see the module's docstring)."""
    names.update(_elementwise._complex_tensor_namespace())
    code = op._complex_codes()[1][k]
    ones = call("reshape", np.ones(output.shape, dtype=output.dtype), shape=output.shape)
    conj = FUNCTIONS["conj"]
    at_one = _as_complex(_evaluate(code, names, ones))
    if output.dtype.kind != "c":  # (a real result: M takes real g only)
        return FUNCTIONS["real"](conj(at_one) * tangent)
    at_i = _as_complex(_evaluate(code, names, ones * 1j))
    a = conj((at_one - 1j * at_i) * 0.5)
    b = (at_one + 1j * at_i) * 0.5
    return a * tangent + b * conj(tangent)


def _as_complex(value):
    return value if _is_complex(value) else value * (1 + 0j)


def elementwise_rule(op):
    """The forward rule of the elementwise ``op`` (an :class:`ElementwiseOp`), from its formula
    row."""

    def rule(tangents, primals, output, attrs):
        shares = []
        names = None
        shape = batch_shape(tangents, primals) + tuple(output.shape)
        for k, tangent in enumerate(tangents):
            if tangent is None or k in op.non_differentiable:
                continue
            if k in op.not_implemented:
                raise op._not_implemented_error(k)
            if names is None:
                names = _namespace(op, primals, output, attrs)
            tangent = aligned(tangent, primals[k], output.ndim)
            complex_case = any(_is_complex(v) for v in (*primals, output, tangent))
            if complex_case and not op._complex_conjugated:
                share = _complex_share(op, k, names, tangent, output)
            else:
                code = op._complex_codes()[1][k] if complex_case else op._compiled_rules[k]
                if complex_case:
                    names.update(_elementwise._complex_tensor_namespace())
                share = _evaluate(code, names, tangent)
            if not hasattr(share, "shape"):
                share = call("reshape", np.ones(shape, dtype=output.dtype) * share, shape=shape)
            if share.shape != shape:
                share = call("broadcast_to", share, shape=shape)
            shares.append(share)
        return add_tangents(shares)

    return rule


for _op in list(REGISTRY.values()):
    if isinstance(_op, _elementwise.ElementwiseOp) and _op.family == "elementwise":
        if _op.name in ("floor", "rint", "sign"):
            jvp_rule(_op.name)(zero)  # (locally constant: the rows' ``0 * g``)
        else:
            jvp_rule(_op.name)(elementwise_rule(_op))


# -- the parts of a complex number: linear, but the angle -------------------------------------


def _part(name):
    def rule(tangents, primals, output, attrs):
        (tangent,) = tangents
        return None if tangent is None else call(name, _as_complex(tangent))

    return rule


for _name in ("_real", "_imag", "_conj"):
    jvp_rule(_name)(_part(_name))


@jvp_rule("_angle")
def _angle(tangents, primals, output, attrs):
    """``Im(t / z)`` (0 at ``z = 0``, as the VJP's convention)."""
    (tangent,), (z,) = tangents, primals
    if tangent is None:
        return None
    size = FUNCTIONS["abs"](z)
    safe = call("where", size == 0, 1.0, size * size)
    return call("_imag", _as_complex(tangent) * FUNCTIONS["conj"](z) / safe)
