"""The fast paths that read memory by address: reported, and switched off as a whole
(``AUTOGRAD_NB_RAW_MEMORY=0``) with the same results."""

import json
import os
import subprocess
import sys
import warnings

import pytest

import autograd_nb as anb
from autograd_nb import _cpython

SCRIPT = r"""
import json, warnings
warnings.simplefilter("error", UserWarning)
import numpy as np
import autograd_nb as anb

x = anb.tensor(np.linspace(-1.0, 1.0, 5), requires_grad=True)
grads = [anb.grad(anb.sum(anb.tanh(x) * x), x)[0].numpy().tolist() for _ in range(3)]
compiled = anb.compile(lambda x: anb.sum(anb.sin(x) * x))
try:
    compiled(x)
    compile_warned = False
except anb.CompileWarning:
    compile_warned = True
print(json.dumps({"capabilities": anb.config.capabilities(), "grads": grads,
                  "compile_warned": compile_warned}))
"""


def _run(switch):
    env = dict(os.environ)
    env.pop(_cpython.SWITCH, None)
    if switch is not None:
        env[_cpython.SWITCH] = switch
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_capabilities_report_what_runs_here():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    anb.grad(anb.sum(x * x), x)
    report = anb.config.capabilities()
    assert report["allowed"] == (not report["reasons_off"])
    if report["allowed"]:  # (CPython with its GIL, a tested version: everything runs)
        assert report["array_pointers"] and report["object_layout"]
        assert report["graph_reader"] and report["gc_untracking"]


@pytest.mark.slow  # fresh processes
def test_the_switch_turns_every_path_off_with_the_same_results_and_no_warning():
    on, off = _run(None), _run("0")
    assert off["capabilities"] == {
        "allowed": False, "reasons_off": [f"{_cpython.SWITCH}=0"], "array_pointers": False,
        "object_layout": False, "graph_reader": False, "gc_untracking": False,
    }
    assert off["grads"] == on["grads"]
    assert off["compile_warned"] and not on["compile_warned"]  # compile runs eagerly when off


def test_an_unavailable_fast_path_warns_once(monkeypatch):
    monkeypatch.setattr(_cpython, "_warned", [])
    monkeypatch.delenv(_cpython.SWITCH, raising=False)
    with pytest.warns(_cpython.FastPathWarning, match="is off here"):
        _cpython.unavailable("a fast path", "a probe failed")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _cpython.unavailable("another", "again")  # (once per process)


def test_reasons_name_the_interpreter_facts(monkeypatch):
    monkeypatch.setattr(_cpython, "TESTED", ((3, 0), (3, 1)))
    assert any("outside the tested" in r for r in _cpython.reasons_off())
    monkeypatch.setattr(sys, "_is_gil_enabled", lambda: False, raising=False)
    assert any("GIL is disabled" in r for r in _cpython.reasons_off())
