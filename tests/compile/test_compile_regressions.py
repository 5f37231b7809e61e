"""``autograd_nb.compile``: bugs a differential fuzz of random programs found (replay against
eager runs of the same fn), each a small program compared bit for bit with eager."""

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb import config


def _bits(array):
    array = np.ascontiguousarray(array)
    return array.view(np.uint32 if array.dtype == np.float32 else np.uint64)


def _assert_same_bits(eager, replayed):
    for e, r in zip(eager, replayed, strict=True):
        assert e.shape == r.shape and e.dtype == r.dtype
        np.testing.assert_array_equal(_bits(e), _bits(r))


def _outputs_and_grads(fn, make_args, n_grad):
    """fn's output and the gradient of its sum in the first ``n_grad`` arguments."""
    args = make_args()
    out = fn(*args)
    grads = anb.grad(anb.sum(out), list(args[:n_grad]), allow_unused=True,
                     materialize_grads=True)
    return [out.detach().numpy()] + [g.numpy() for g in grads]


def _replay_equals_eager(fn, make_args, n_grad=1):
    compiled = anb.compile(fn)
    eager = _outputs_and_grads(fn, make_args, n_grad)
    for _ in range(3):  # the recording call, then replays
        _assert_same_bits(eager, _outputs_and_grads(compiled, make_args, n_grad))
    assert compiled.cache_info().hits == 2


@pytest.mark.parametrize("compiled_backward", [True, False])
def test_negative_zero_gradient_from_float64_working(monkeypatch, compiled_backward):
    # ``x ** b``'s gradient ``b * x ** (b - 1)`` is worked in float64 for float32 operands
    # and rounds to -0.0 where ``x ** (b - 1)`` underflows float32 and b < 0; eager adds it
    # into the input's zeroed gradient once (-0.0), the replay into its gradient buffer and
    # then the buffer into the input's (+0.0 + -0.0 gave +0.0).
    monkeypatch.setattr(config, "COMPILED_BACKWARD", compiled_backward)

    def fn(x, b):
        return x ** b

    def make_args():
        x = anb.tensor(np.array([1e30, -1e30, 3.0, 0.5], np.float32), requires_grad=True)
        return x, anb.tensor(np.float32(-1.0), requires_grad=True)

    _replay_equals_eager(fn, make_args, n_grad=2)


def test_a_comparison_of_a_closure_tensor_is_value_dependent():
    # ``p > 0`` on a closure's tensor that fn meets first there: the mask was recorded as a
    # constant, so a replay kept the first call's mask after p changed sign (a wrong forward
    # value, silently). Now the signature runs eagerly, with the value-dependent warning.
    from autograd_nb.replay import CompileWarning

    def make():
        params = [anb.tensor(np.array([0.05, -1.0, 2.0]))]
        x = anb.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)

        def fn(x):
            out = anb.where(params[0] > 0, x, -x)
            with anb.no_grad():
                params[0] -= 0.1  # (in place: the same tensor)
            return out

        return fn, x

    fn, x = make()
    eager = [fn(x).numpy().copy() for _ in range(3)]
    fn, x = make()
    compiled = anb.compile(fn)
    with pytest.warns(CompileWarning, match=r"comparison.*test_compile_regressions.py:\d+"):
        replayed = [compiled(x).numpy().copy() for _ in range(3)]
    assert not np.array_equal(eager[0], eager[1])  # (the mask did change)
    _assert_same_bits(eager, replayed)
