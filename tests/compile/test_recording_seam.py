"""``anb.compile`` records through one seam, ``tensor.recorder``: while a program is recorded no
module global, class attribute or op instance of the package is replaced (they were once
swapped for wrappers: 11 names of tensor.py and numpy/_wrap.py, Tensor's methods, the
registry's dispatch). A gradient taken inside reaches the recording through the hook the
engine owns, ``engine.set_backward_hook``: the engine never calls up into replay."""

import importlib
import threading
import types

import numpy as np

import autograd_nb as anb
from autograd_nb.ops.registry import REGISTRY

tensor_module = importlib.import_module("autograd_nb.tensor")
wrap_module = importlib.import_module("autograd_nb.numpy._wrap")
registry_module = importlib.import_module("autograd_nb.ops.registry")
tape_module = importlib.import_module("autograd_nb.tape")
engine_module = importlib.import_module("autograd_nb.engine")

#: The slots the seam is: set while a program records, by ``tensor.set_recorder``.
SEAM = {"recorder", "_detour"}


def _functions(module):
    """``{name: object}`` of the functions, classes and other callables of ``module``."""
    return {name: value for name, value in vars(module).items()
            if callable(value) and name not in SEAM}


def snapshot():
    """What a recorder that patched would change: the callables of the modules the eager
    path runs through, Tensor's class dictionary, and each op's instance dictionary."""
    return {
        "tensor": _functions(tensor_module),
        "_wrap": _functions(wrap_module),
        "tape": _functions(tape_module),
        "registry": _functions(registry_module) | {
            "_dispatch": registry_module._dispatch,
            "_view_dispatch": registry_module._view_dispatch,
        },
        "Tensor": dict(vars(anb.Tensor)),
        # (an op's own entries that shadow a method of its class: ``_run`` put on the
        # instance; what an op caches of its own, lazily, is not one)
        "ops": {name: {k: v for k, v in vars(op).items()
                       if callable(getattr(type(op), k, None))}
                for name, op in REGISTRY.items()},
    }


def assert_same(before, now):
    for part in before:
        changed = {
            name for name in before[part].keys() | now[part].keys()
            if before[part].get(name) is not now[part].get(name)
        }
        if part == "ops":  # (each op's own dict of callables, compared by identity)
            changed = {
                name for name in changed
                if before[part][name].keys() != now[part][name].keys()
                or any(before[part][name][k] is not now[part][name][k] for k in now[part][name])
            }
        assert not changed, f"{part}: replaced while recording: {sorted(changed)}"


def test_recording_patches_nothing():
    before = snapshot()
    seen = []

    def fn(x, w):
        seen.append((snapshot(), tensor_module.recorder, engine_module._hooks.backward))
        h = anb.tanh(x @ w + 1.0)  # the operators, apply, a constant
        h = h.reshape(-1)  # a view (``_apply_view``)
        h = h * h - 0.5 * h
        y = anb.sum(h)
        (g,) = anb.grad(y, w, create_graph=False, retain_graph=True)  # a gradient inside
        with anb.no_grad():
            z = h * 2.0
            z += 1.0  # an in-place update
        return y + anb.sum(g) + anb.sum(z)

    rng = np.random.default_rng(0)
    x = anb.tensor(rng.standard_normal((3, 4)))
    w = anb.tensor(rng.standard_normal((4, 2)), requires_grad=True)
    compiled = anb.compile(fn)
    for _ in range(3):
        y = compiled(x, w)
    assert compiled.cache_info().programs == 1 and compiled.cache_info().eager == 0
    np.testing.assert_array_equal(y.numpy(), fn(x, w).numpy())
    (recorded, recorder, backward_hook), *_ = seen
    assert recorder is not None and backward_hook is not None  # the seams are in use ...
    assert_same(before, recorded)  # ... and nothing else changed
    # (gone after; the detour stays on where this process has used CUDA before)
    assert tensor_module.recorder is None and engine_module._hooks.backward is None
    assert tensor_module._detour == tensor_module._cuda_used
    assert_same(before, snapshot())


def test_other_threads_run_eagerly_while_one_records():
    # The recorder's trace is per thread: ops another thread applies meanwhile are not in the
    # program, and give eager's values.
    started, release = threading.Event(), threading.Event()
    results = {}

    def fn(x):
        started.set()
        release.wait(10)
        return anb.sum(anb.exp(x) * 2.0)

    def other():
        started.wait(10)
        try:
            a = anb.tensor(np.linspace(0.0, 1.0, 5), requires_grad=True)
            results["y"] = anb.sum(anb.sin(a) * a)
            results["y"].backward()
            results["grad"] = a.grad.numpy()
        finally:
            release.set()

    thread = threading.Thread(target=other)
    thread.start()
    compiled = anb.compile(fn)
    x = anb.tensor(np.ones(3), requires_grad=True)
    y = compiled(x)
    thread.join(10)
    a = np.linspace(0.0, 1.0, 5)
    np.testing.assert_allclose(results["y"].item(), np.sum(np.sin(a) * a), rtol=1e-12)
    np.testing.assert_allclose(results["grad"], np.sin(a) + a * np.cos(a), rtol=1e-12)
    np.testing.assert_allclose(y.item(), np.sum(np.exp(np.ones(3)) * 2.0), rtol=1e-12)
    compiled(x)
    assert compiled.cache_info().programs == 1


def test_snapshot_sees_a_patch(monkeypatch):
    # (the check itself: a recorder that swapped a name, a method or an op's ``_run`` is seen)
    before = snapshot()
    monkeypatch.setattr(tensor_module, "apply", lambda *a: None)
    monkeypatch.setattr(REGISTRY["tanh"], "_run", types.MethodType(lambda self, a, b: None,
                                                                    REGISTRY["tanh"]))
    now = snapshot()
    for part in ("tensor", "ops"):
        try:
            assert_same({part: before[part]}, {part: now[part]})
        except AssertionError:
            continue
        raise AssertionError(f"{part}: a patch went unseen")
