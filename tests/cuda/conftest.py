"""The CUDA tests run on numba's simulator (set up in tests/conftest.py) or on a real GPU
(``make test-gpu``); where neither is available they are skipped, saying why."""

import pathlib

import pytest

import autograd_nb as anb

HERE = pathlib.Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    reason = anb.cuda.unavailable_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"CUDA is not available: {reason}")
    for item in items:
        if HERE in pathlib.Path(str(item.fspath)).resolve().parents:
            item.add_marker(skip)
