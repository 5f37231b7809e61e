"""A GEMM of our own, ``out += x @ y``, for CPUs with AVX-512 whose BLAS runs narrower kernels.

OpenBLAS picks its kernels by CPU at load time, and ``OPENBLAS_CORETYPE`` can pin an
older set: on the AMD EPYC (Zen 5) machines here it is pinned to ``Haswell``, whose AVX2
kernels leave half of each AVX-512 register unused. The kernel below is written in LLVM IR
with 512-bit vectors (``<8 x double>``, ``<16 x float>``), so it uses the full width wherever
LLVM targets such a CPU.

Its core is a register tile (``_tile``): ``ROWS`` rows by ``VECTORS`` vectors of ``out`` (6 x 32
float64, 6 x 64 float32) held in 24 vector registers while ``depth`` rank-one updates add into
them, each one a row of ``y`` (four vector loads), ``ROWS`` broadcast elements of ``x`` and 24
fused multiply-adds. ``_tiles`` walks ``out`` in such tiles, over ``DEPTH_BLOCK`` steps of
the inner dimension at a time; ``_product`` around it packs a transposed ``y`` and pads the last
columns through a scratch strip. That runs behind one C function per dtype (``tiles_address``),
which ``own_gemm_add`` (and ``tiles_add``) call with addresses and strides.

Every element of ``out`` gets, per ``DEPTH_BLOCK`` steps, one sum of its products in order of
the inner index (one fused multiply-add each, from zero), added to it once, as BLAS's ``beta
= 1`` adds ``out`` after the product. So the result depends on the shape alone (not on the
thread count, not on where a block of columns starts), differs from BLAS's in the last bits
only, and a row of ``x`` with one nonzero gives exactly ``out + x[r, j] * y[j]``, as
``linalg._product_add``'s row-by-row path does.

Its rate beside OpenBLAS's AVX2 and AVX-512 kernels, per product size, is in
docs/benchmarking.rst, "How the tunables were chosen".

It does not pack its operands into cache-sized panels, so a BLAS with AVX-512 kernels can win on
large products; ``_blas.own_kernel_preferred`` chooses it only where the BLAS lacks them.
"""

import numpy as np
from llvmlite import ir
from numba import carray, cfunc, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .. import config

#: Rows of ``out`` in one register tile.
ROWS = 6

#: Vectors of 512 bits across one register tile: 32 float64 or 64 float32 columns. Six rows by
#: four vectors (24 accumulators, four vectors of ``y`` and a broadcast: 29 of the 32 vector
#: registers) was the fastest shape tried (docs/benchmarking.rst, "How the tunables were
#: chosen").
VECTORS = 4

#: Steps of the inner dimension per pass over ``out`` (``config.GEMM_DEPTH_BLOCK``): a strip of
#: ``y`` (``DEPTH_BLOCK`` rows of one tile's columns, 64 KiB) stays near the core while every
#: row tile of the strip reads it. Compiled in, so read once, at import.
DEPTH_BLOCK = config.GEMM_DEPTH_BLOCK


@njit(cache=True, nogil=True)
def tile_columns(out):
    """Columns of ``out`` in one register tile: ``VECTORS`` 512-bit vectors of its dtype."""
    return VECTORS * 64 // out.itemsize


@njit(cache=True, nogil=True)
def own_fits(out):
    """Whether the own kernel takes a product into ``out``: at least half a tile of rows
    (``ROWS // 2``) and a tile's columns. A narrower one (a matrix-vector product) would
    compute mostly padding, and goes to BLAS."""
    return out.shape[0] >= ROWS // 2 and out.shape[1] >= tile_columns(out)


def own_fits_shape(rows, columns, itemsize):
    """:func:`own_fits` from Python, for a product into ``rows x columns`` of ``itemsize``
    bytes (tier 0 decides whether the own kernel would run without compiling anything)."""
    return rows >= ROWS // 2 and columns >= VECTORS * 64 // itemsize


@intrinsic
def _tile(typingctx, x, x_row, x_step, y, y_row, out, out_row, depth, rows, like):
    """``out[r, :c] += sum over p < depth of x[r, p] * y[p, :c]`` for ``r < rows`` (at most
    ``ROWS``), ``c`` the tile's columns: the sum in registers from zero, one fused multiply-add
    per ``p`` in order, then added to ``out`` once. Addresses are ints, strides counted in
    elements of the dtype of ``like`` (a float64 or float32 scalar; ``x_row``, ``x_step``:
    ``x``'s row and column strides). Rows past ``rows`` repeat the last valid one and are not
    stored."""
    dtype = like
    if dtype not in (types.float64, types.float32):
        return None
    bits = dtype.bitwidth
    width = 512 // bits
    sig = types.void(*([types.intp] * 9), like)

    def codegen(context, builder, signature, args):
        x, x_row, x_step, y, y_row, out, out_row, depth, rows = args[:9]
        scalar = ir.DoubleType() if bits == 64 else ir.FloatType()
        vector = ir.VectorType(scalar, width)
        intp = ir.IntType(64)
        align = bits // 8
        fma = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(vector, [vector] * 3),
            f"llvm.fma.v{width}f{bits}",
        )
        x_base = builder.inttoptr(x, scalar.as_pointer())
        y_base = builder.inttoptr(y, scalar.as_pointer())
        out_base = builder.inttoptr(out, scalar.as_pointer())

        def at(base, offset):
            return builder.bitcast(builder.gep(base, [offset]), vector.as_pointer())

        def const(value):
            return ir.Constant(intp, value)

        last = builder.sub(rows, const(1))
        row_of = []  # the row each tile row reads: past ``rows``, the last valid row
        for r in range(ROWS):
            valid = builder.icmp_signed("<", const(r), rows)
            row_of.append(builder.select(valid, const(r), last))
        zero = ir.Constant(vector, [0.0] * width)
        accumulators = [
            [cgutils.alloca_once_value(builder, zero) for _ in range(VECTORS)] for _ in range(ROWS)
        ]
        x_rows = [builder.mul(row_of[r], x_row) for r in range(ROWS)]
        splat = ir.Constant(ir.VectorType(ir.IntType(32), width), [0] * width)
        with cgutils.for_range(builder, depth) as loop:
            p = loop.index
            y_at = builder.mul(p, y_row)
            y_vectors = [
                builder.load(at(y_base, builder.add(y_at, const(v * width))), align=align)
                for v in range(VECTORS)
            ]
            x_at = builder.mul(p, x_step)
            for r in range(ROWS):
                element = builder.load(builder.gep(x_base, [builder.add(x_rows[r], x_at)]))
                lane = builder.insert_element(
                    ir.Constant(vector, ir.Undefined), element, ir.Constant(ir.IntType(32), 0)
                )
                broadcast = builder.shuffle_vector(lane, lane, splat)
                for v in range(VECTORS):
                    slot = accumulators[r][v]
                    total = builder.call(fma, [broadcast, y_vectors[v], builder.load(slot)])
                    builder.store(total, slot)
        for r in range(ROWS):
            with cgutils.if_likely(builder, builder.icmp_signed("<", const(r), rows)):
                for v in range(VECTORS):
                    target = at(out_base, builder.add(builder.mul(const(r), out_row),
                                                      const(v * width)))
                    total = builder.fadd(builder.load(target, align=align),
                                         builder.load(accumulators[r][v]))
                    builder.store(total, target, align=align)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _is_double(typingctx, like):
    """Whether ``like`` is a float64 (else float32), decided when compiling."""
    value = like == types.float64

    def codegen(context, builder, signature, args):
        return context.get_constant(types.boolean, value)

    return types.boolean(like), codegen


@njit(cache=True, nogil=True)
def _tiles(x, x_row, x_step, y, y_row, out, out_row, rows, columns, depth, like):
    """``out += x @ y`` over ``columns`` (a multiple of the tile's width) in register tiles:
    per ``DEPTH_BLOCK`` steps of the inner dimension, each strip of tile columns, each tile of
    ``ROWS`` rows (fewer at the end). ``x`` is an address, ``y`` and ``out`` 1-D arrays over
    their operands' memory (arguments, so a scratch copy lives until this returns); strides
    as ``_tile``'s."""
    item = 8 if _is_double(like) else 4
    width = VECTORS * 64 // item
    y_at, out_at = y.ctypes.data, out.ctypes.data
    for p0 in range(0, depth, DEPTH_BLOCK):
        steps = min(DEPTH_BLOCK, depth - p0)
        for j0 in range(0, columns, width):
            strip = y_at + (p0 * y_row + j0) * item
            for r0 in range(0, rows, ROWS):
                _tile(
                    x + (r0 * x_row + p0 * x_step) * item, x_row, x_step, strip, y_row,
                    out_at + (r0 * out_row + j0) * item, out_row, steps, min(ROWS, rows - r0),
                    like,
                )


@intrinsic
def _elements(typingctx, address, like):
    """The memory at ``address`` as a pointer to ``like``'s type (a float scalar)."""

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_data_type(like).as_pointer())

    return types.CPointer(like)(types.int64, like), codegen


@njit(cache=True, nogil=True)
def _product(  # noqa: C901 (njit kernel: tiles, a transposed y's copy, the padded rest)
    x, x_row, x_step, y, y_row, y_step, out, out_row, rows, columns, depth, like
):
    """``out += x @ y`` on raw memory (addresses, element strides; ``out`` with contiguous
    rows): the columns that fill whole tiles in place, the rest through a strip padded with
    zeros to the tile's width. A ``y`` whose rows are not contiguous (a transposed operand) is
    first copied to contiguous rows."""
    item = 8 if _is_double(like) else 4
    width = VECTORS * 64 // item
    full = columns // width * width
    out_memory = carray(_elements(out, like), ((rows - 1) * out_row + columns,))
    if y_step == 1:
        y_memory = carray(_elements(y, like), ((depth - 1) * y_row + columns,))
    else:
        strided = carray(_elements(y, like), ((depth - 1) * y_row + (columns - 1) * y_step + 1,))
        y_memory = np.empty(depth * columns, dtype=out_memory.dtype)
        for p in range(depth):
            for j in range(columns):
                y_memory[p * columns + j] = strided[p * y_row + j * y_step]
        y_row = columns
    if full:
        _tiles(x, x_row, x_step, y_memory, y_row, out_memory, out_row, rows, full, depth, like)
    if full < columns:
        rest = columns - full
        y_pad = np.zeros(depth * width, dtype=out_memory.dtype)
        for p in range(depth):
            for j in range(rest):
                y_pad[p * width + j] = y_memory[p * y_row + full + j]
        out_pad = np.zeros(rows * width, dtype=out_memory.dtype)
        for r in range(rows):
            for j in range(rest):
                out_pad[r * width + j] = out_memory[r * out_row + full + j]
        _tiles(x, x_row, x_step, y_pad, width, out_pad, width, rows, width, depth, like)
        for r in range(rows):
            for j in range(rest):
                out_memory[r * out_row + full + j] = out_pad[r * width + j]


# The products run behind one C function per dtype (``tiles_address``), called through its
# address: a caller's module then holds one call, not another copy of the tiles, packing and
# padding for LLVM to optimise again with the caller (measured cold: a parallel caller of a
# caller of these took 9.3 s to compile that way, against 1.2 s before the own kernel).
_SIGNATURE = types.void(*([types.int64] * 11))


def _product_float64(x, x_row, x_step, y, y_row, y_step, out, out_row, rows, columns, depth):
    _product(x, x_row, x_step, y, y_row, y_step, out, out_row, rows, columns, depth,
             np.float64(0.0))


def _product_float32(x, x_row, x_step, y, y_row, y_step, out, out_row, rows, columns, depth):
    _product(x, x_row, x_step, y, y_row, y_step, out, out_row, rows, columns, depth,
             np.float32(0.0))


_PRODUCTS = {np.dtype(np.float64): _product_float64, np.dtype(np.float32): _product_float32}
_compiled = {}
_addresses = {}  # by dtype, as given: the lookup of a planned product


def tiles_address(dtype):
    """The address of the C function doing ``_product`` for ``dtype`` (float32 or float64),
    compiled (or loaded from numba's cache) on first use: the ``tiles`` argument below."""
    address = _addresses.get(dtype)
    if address is None:
        key = np.dtype(dtype)
        compiled = _compiled.get(key)
        if compiled is None:
            compiled = cfunc(_SIGNATURE, cache=True, nogil=True)(_PRODUCTS[key])
            _compiled[key] = compiled  # (kept: the address lives as long as this object)
        address = _addresses[dtype] = compiled.address
    return address


@intrinsic
def _call(typingctx, tiles, x, x_row, x_step, y, y_row, y_step, out, out_row, rows, columns,
          depth):
    """Call the C function at address ``tiles`` (``tiles_address``) with the eleven int64s."""
    signature = types.void(*([types.int64] * 12))

    def codegen(context, builder, signature, args):
        int64 = ir.IntType(64)
        function_type = ir.FunctionType(ir.VoidType(), [int64] * 11)
        builder.call(builder.inttoptr(args[0], function_type.as_pointer()), args[1:])
        return context.get_dummy_value()

    return signature, codegen


@njit(cache=True, nogil=True)
def own_gemm_add(x, transpose_x, y, transpose_y, out, tiles):
    """``out += x' @ y'`` as ``_blas.gemm_add`` (``x'``: ``x`` or ``x.T``, ``y'`` likewise),
    by the products at ``tiles`` (``tiles_address(out.dtype)``); every operand a 2-D array of
    ``out``'s dtype, ``out``'s rows contiguous (any row stride). Only strides change for a
    transpose; an operand with a negative stride is copied first."""
    if min(x.strides[0], x.strides[1], y.strides[0], y.strides[1]) < 0:
        # (The C side reads forward from each operand's first element.) Not a recursive call:
        # numba's on-disk cache of a recursive function crashed when loaded in another process.
        _product_of(np.ascontiguousarray(x), transpose_x, np.ascontiguousarray(y), transpose_y,
                    out, tiles)
    else:
        _product_of(x, transpose_x, y, transpose_y, out, tiles)


@njit(cache=True, nogil=True)
def _product_of(x, transpose_x, y, transpose_y, out, tiles):
    """``own_gemm_add`` of operands with non-negative strides."""
    rows, columns = out.shape
    depth = x.shape[0] if transpose_x else x.shape[1]
    if rows == 0 or columns == 0 or depth == 0:
        return
    item = out.itemsize
    x_row, x_step = x.strides[0] // item, x.strides[1] // item
    if transpose_x:
        x_row, x_step = x_step, x_row
    y_row, y_step = y.strides[0] // item, y.strides[1] // item
    if transpose_y:
        y_row, y_step = y_step, y_row
    _call(tiles, x.ctypes.data, x_row, x_step, y.ctypes.data, y_row, y_step, out.ctypes.data,
          out.strides[0] // item, rows, columns, depth)


@njit(cache=True, nogil=True)
def tiles_add(x, y, out, tiles):
    """``out += x @ y`` by ``own_gemm_add`` (``x``, ``y`` with any strides)."""
    own_gemm_add(x, False, y, False, out, tiles)
