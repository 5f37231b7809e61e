"""``ops._gemm``'s own GEMM kernel and how ``ops._blas`` chooses between it and SciPy's BLAS.

The kernel is compiled for this machine's CPU whatever it has (with AVX-512 or without, LLVM
lowers its 512-bit vectors), so every test here runs everywhere."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autograd_nb as anb
from autograd_nb import config
from autograd_nb.ops import _blas, _gemm, _numpy_vjp

# They call the kernels and twins themselves, the same in either tier: the compiled pass runs
# them once.
pytestmark = pytest.mark.compiled_only


def _reference(out, x, y):
    return out.astype(np.float64) + x.astype(np.float64) @ y.astype(np.float64)


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 20),
    depth=st.integers(1, 2 * _gemm.DEPTH_BLOCK + 3),
    columns=st.integers(1, 70),
    dtype=st.sampled_from([np.float64, np.float32]),
    transpose_x=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_tiles_add_matches_numpy_over_shapes(rows, depth, columns, dtype, transpose_x, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((depth, rows) if transpose_x else (rows, depth)).astype(dtype)
    left = x.T if transpose_x else x  # a transposed x is read through its strides
    y = rng.standard_normal((depth, columns)).astype(dtype)
    out = rng.standard_normal((rows, columns)).astype(dtype)
    want = _reference(out, left, y)
    _gemm.tiles_add(left, y, out, _gemm.tiles_address(dtype))
    scale = np.abs(left).astype(np.float64) @ np.abs(y).astype(np.float64) + 1.0
    tolerance = 1e-5 if dtype == np.float32 else 1e-13
    assert np.all(np.abs(out - want) <= tolerance * scale)


def test_tiles_add_writes_only_its_rows_and_columns():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((11, 40)), rng.standard_normal((40, 37))
    buffer = rng.standard_normal((13, 3, 50))
    before = buffer.copy()
    out = buffer[1:12, 1, 5:42]  # rows with a stride, inside a wider buffer
    want = _reference(out, x, y)
    _gemm.tiles_add(x, y, out, _gemm.tiles_address(np.float64))
    np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-13)
    outside = np.ones(buffer.shape, dtype=bool)
    outside[1:12, 1, 5:42] = False
    np.testing.assert_array_equal(buffer[outside], before[outside])


def test_each_element_is_the_same_whatever_the_block_of_columns():
    # The split GEMM hands the kernel blocks of columns: an element's bits must not depend
    # on where its block starts (a padded tail, a tile boundary or none).
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((24, 300)), rng.standard_normal((300, 77))
    start = rng.standard_normal((24, 77))
    whole = start.copy()
    _gemm.tiles_add(x, y, whole, _gemm.tiles_address(np.float64))
    for first, last in ((0, 77), (0, 16), (16, 77), (3, 40), (61, 77)):
        part = start[:, first:last].copy()
        _gemm.tiles_add(x, y[:, first:last], part, _gemm.tiles_address(np.float64))
        np.testing.assert_array_equal(part, whole[:, first:last])


@pytest.mark.parametrize("transpose_y", [False, True])
def test_own_gemm_add_reads_reversed_and_broadcast_operands(transpose_y):
    # Negative strides (copied first) and zero strides (a broadcast gradient, read in place
    # or packed), into rows of a wider buffer.
    rng = np.random.default_rng(8)
    x = rng.standard_normal((300, 9))[::-1].T  # (9, 300), both strides unusual
    y_base = rng.standard_normal((40, 300) if transpose_y else (300, 40))
    y = y_base[::-1] if not transpose_y else y_base[:, ::-1]
    y_used = y.T if transpose_y else y
    broadcast = np.broadcast_to(rng.standard_normal(40), (300, 40))
    for right, right_used, flag in ((y, y_used, transpose_y), (broadcast, broadcast, False)):
        buffer = rng.standard_normal((9, 50))
        out = buffer[:, 3:43]
        want = _reference(out, x, right_used)
        _gemm.own_gemm_add(x, False, right, flag, out, _gemm.tiles_address(np.float64))
        np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-12)


def test_zero_sized_products_leave_out_alone():
    out = np.ones((4, 20))
    _gemm.tiles_add(np.ones((4, 0)), np.ones((0, 20)), out, _gemm.tiles_address(np.float64))
    np.testing.assert_array_equal(out, 1.0)


@settings(max_examples=30, deadline=None)
@given(
    rows=st.integers(1, 40),
    depth=st.integers(1, 40),
    columns=st.integers(1, 40),
    dtype=st.sampled_from([np.float32, np.float64]),
    transpose_x=st.booleans(),
    transpose_y=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_gemm_add_and_set_give_the_bits_of_their_ctypes_twins(rows, depth, columns, dtype,
                                                             transpose_x, transpose_y, seed):
    # The compiled GEMM calls (by address, int64 integer arguments) against tier 0's ctypes
    # calls of the same routine: ``out += x' @ y'`` into an ``out`` that already holds values,
    # and ``out = x' @ y'`` (beta 0) into garbage; the products' BLAS and SciPy's (32-bit
    # integers, which read the low half of each int64).
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((depth, rows) if transpose_x else (rows, depth)).astype(dtype)
    y = rng.standard_normal((columns, depth) if transpose_y else (depth, columns)).astype(dtype)
    start = rng.standard_normal((rows, columns)).astype(dtype)
    product = (x.T if transpose_x else x) @ (y.T if transpose_y else y)
    tolerance = 1e-4 if dtype == np.float32 else 1e-12
    for blas in (_blas.PRODUCTS, _blas.scipy_blas()):
        gemm = blas.gemm[np.dtype(dtype)]
        compiled, twin = start.copy(), start.copy()
        _blas.gemm_add(gemm, 0, x, transpose_x, y, transpose_y, compiled)
        _numpy_vjp.gemm_add(x, transpose_x, y, transpose_y, twin, blas=blas)
        np.testing.assert_array_equal(compiled, twin)
        np.testing.assert_allclose(compiled, start + product, rtol=tolerance, atol=tolerance)
        compiled, twin = np.full_like(start, np.nan), np.full_like(start, np.nan)
        _blas.gemm_set(gemm, 0, x, transpose_x, y, transpose_y, compiled)
        _numpy_vjp.gemm_add(x, transpose_x, y, transpose_y, twin, beta=0.0, blas=blas)
        np.testing.assert_array_equal(compiled, twin)
        np.testing.assert_allclose(compiled, product, rtol=tolerance, atol=tolerance)


def test_small_products_go_to_blas_even_when_the_own_kernel_is_chosen():
    # Fewer than ROWS // 2 rows (a vector times a matrix) or columns than a tile: BLAS.
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((1, 64)), rng.standard_normal((64, 48))
    by_own_choice, by_blas = np.zeros((1, 48)), np.zeros((1, 48))
    _blas.gemm_add(*_blas.product_kernel(np.float64, True), x, False, y, False, by_own_choice)
    _blas.gemm_add(*_blas.product_kernel(np.float64, False), x, False, y, False, by_blas)
    np.testing.assert_array_equal(by_own_choice, by_blas)


# -- the choice ---------------------------------------------------------------------------------


@pytest.fixture
def fresh_choice(monkeypatch):
    monkeypatch.setattr(_blas, "_AUTO", None)
    return monkeypatch


@pytest.mark.parametrize(
    "core, avx512, expected",
    [
        ("Haswell", True, True),  # AVX-512 CPU, BLAS pinned to AVX2 kernels
        ("Zen", True, True),
        ("SkylakeX", True, False),  # BLAS uses AVX-512 itself
        ("Haswell", False, False),  # no AVX-512 to gain
        (None, True, False),  # not OpenBLAS: keep that BLAS
    ],
)
def test_auto_takes_the_own_kernel_only_where_blas_leaves_avx512_unused(
    fresh_choice, core, avx512, expected
):
    fresh_choice.setattr(config, "GEMM_KERNEL", "auto")
    fresh_choice.setattr(_blas, "_blas_core", lambda: core)
    fresh_choice.setattr(_blas, "_compiles_for_avx512", lambda: avx512)
    assert _blas.own_kernel_preferred() is expected
    tiles = _gemm.tiles_address(np.float32) if expected else 0
    assert _blas.product_kernel(np.float32) == (_blas.gemm_address(np.float32), tiles)


def test_own_and_blas_settings_win_over_auto(fresh_choice):
    fresh_choice.setattr(config, "GEMM_KERNEL", "own")
    assert _blas.own_kernel_preferred() is True
    fresh_choice.setattr(config, "GEMM_KERNEL", "blas")
    assert _blas.own_kernel_preferred() is False


def test_an_unknown_setting_is_a_clear_error(fresh_choice):
    fresh_choice.setattr(config, "GEMM_KERNEL", "mkl")
    with pytest.raises(ValueError, match="'auto', 'own' or 'blas', got 'mkl'"):
        _blas.own_kernel_preferred()


def test_this_machines_blas_core_is_read():
    core = _blas._blas_core()
    assert core is None or (isinstance(core, str) and core)


# -- through the engine -------------------------------------------------------------------------


# (The batched MLP Jacobian by either kernel: test_batched_speedups.)


@pytest.mark.parametrize("choice, rows", [("own", 20), ("blas", 21)])  # no shared cached plan
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_matmul_forward_and_gradients_by_either_kernel(monkeypatch, choice, rows, dtype):
    # The forward product and both VJPs (the compiled executor's driver) of a product wide
    # enough for the own kernel's tiles, against NumPy in float64.
    monkeypatch.setattr(config, "GEMM_KERNEL", choice)
    rng = np.random.default_rng(7)
    a_np = rng.standard_normal((rows, 45)).astype(dtype)
    b_np = rng.standard_normal((45, 70)).astype(dtype)  # a tile and a padded tail, either dtype
    v_np = rng.standard_normal((rows, 70)).astype(dtype)
    a = anb.tensor(a_np, requires_grad=True)
    b = anb.tensor(b_np, requires_grad=True)
    y = a @ b
    grad_a, grad_b = anb.grad(y, [a, b], grad_outputs=anb.tensor(v_np))
    a64, b64, v64 = (t.astype(np.float64) for t in (a_np, b_np, v_np))
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(y.numpy(), a64 @ b64, rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(grad_a.numpy(), v64 @ b64.T, rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(grad_b.numpy(), a64.T @ v64, rtol=tolerance, atol=tolerance)


# -- numba's on-disk cache -------------------------------------------------------------------

RELOAD_SCRIPT = """
import numpy as np
import autograd_nb as anb
from autograd_nb import config
from autograd_nb.ops import _blas, _gemm


config.GEMM_KERNEL = "own"
rng = np.random.default_rng(0)
w1 = anb.tensor(rng.standard_normal((48, 20)))
w2 = anb.tensor(rng.standard_normal((40, 48)))
x = anb.tensor(rng.standard_normal(20), requires_grad=True)
y = anb.tanh(w2 @ anb.tanh(w1 @ x))
(jac,) = anb.grad(y, x, grad_outputs=anb.eye(40, dtype="float64"), is_grads_batched=True)
a = anb.tensor(rng.standard_normal((9, 33)), requires_grad=True)
b = anb.tensor(rng.standard_normal((33, 40)), requires_grad=True)
grads = anb.grad((a @ b).sum(), [a, b])
out = np.zeros((9, 40))
_gemm.own_gemm_add(a.numpy()[::-1], False, b.numpy(), False, out, _gemm.tiles_address("float64"))
print(repr(float(jac.numpy().sum() + sum(g.numpy().sum() for g in grads) + out.sum())))
"""


@pytest.mark.slow
def test_compiled_products_load_from_numbas_cache_in_a_new_process(tmp_path):
    # The second process loads what the first compiled. (A recursive own_gemm_add compiled,
    # cached and ran in one process, and crashed when loaded in the next.)
    root = Path(_gemm.__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba")
    env["AUTOGRAD_NB_CACHE_DIR"] = str(tmp_path / "kernels")
    runs = [
        subprocess.run([sys.executable, "-c", RELOAD_SCRIPT], env=env, capture_output=True,
                       text=True, timeout=600)
        for _ in range(2)
    ]
    for run in runs:
        assert run.returncode == 0, run.stderr[-2000:]
    assert runs[0].stdout == runs[1].stdout


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_own_fits_shape_is_own_fits_from_python(dtype):
    # (tier 0's forward of ``_bmm`` decides with it, compiling nothing)
    columns = _gemm.VECTORS * 64 // np.dtype(dtype).itemsize
    for rows in (1, _gemm.ROWS // 2 - 1, _gemm.ROWS // 2, _gemm.ROWS + 1):
        for width in (1, columns - 1, columns, 3 * columns):
            out = np.empty((rows, width), dtype=dtype)
            assert _gemm.own_fits_shape(rows, width, out.itemsize) == _gemm.own_fits(out)
