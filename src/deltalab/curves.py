"""Space-filling curves, small enough to read: Z-values (bit interleaving) and the Hilbert index.

``OPTIMIZE ... ZORDER BY`` sorts rows by a Z-value: each clustering column is first mapped to a
rank bucket (``range_partition_id(col, 1000)``), then the buckets' bits are interleaved
(``interleave_bits``), most significant bits first. Liquid clustering (``CLUSTER BY``) uses a
Hilbert index over the same buckets instead. Both map k coordinates to one integer so that
points close on the curve are close in space; the Hilbert curve never jumps, the Z curve does.

These are the educational versions for small grids (pure Python/NumPy, no Spark), used to draw
the curves and to compare with the order Delta's OPTIMIZE gives the same data.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from deltalab.errors import DeltaLabError

__all__ = ["z_value", "hilbert_index", "curve_order"]

_MAX_TOTAL_BITS = 62  # results fit an int64


def _as_coordinates(coords: Sequence[Sequence[int]] | np.ndarray, bits: int) -> np.ndarray:
    """Validate and return coordinates as an int64 array of shape (k, n)."""
    if not isinstance(bits, (int, np.integer)) or bits < 1:
        raise DeltaLabError(f"bits must be a positive integer, got {bits!r}.", fix="Pass e.g. bits=3 for an 8 x 8 grid.")
    array = np.asarray(coords)
    if array.ndim == 1:
        array = array.reshape(-1, 1)
    if array.ndim != 2 or array.shape[0] < 1:
        raise DeltaLabError(
            f"coords must be k sequences of n integers (shape (k, n)), got shape {array.shape}.",
            fix="Pass one array per dimension, e.g. z_value([xs, ys], bits=3).",
        )
    if not np.issubdtype(array.dtype, np.integer):
        raise DeltaLabError(
            f"coords must be integers, got dtype {array.dtype}.",
            fix="Map values to grid cells first, e.g. np.floor(x * 2**bits).astype(int).",
        )
    k = array.shape[0]
    if k * bits > _MAX_TOTAL_BITS:
        raise DeltaLabError(
            f"{k} dimensions x {bits} bits = {k * bits} bits do not fit a 64-bit integer.",
            fix=f"Use at most {_MAX_TOTAL_BITS // k} bits for {k} dimensions (these helpers are for small grids).",
        )
    if array.size and (array.min() < 0 or array.max() >= (1 << bits)):
        raise DeltaLabError(
            f"coords must lie in [0, {1 << bits}) for bits={bits}; got values from {array.min()} to {array.max()}.",
            fix="Raise bits, or rank the values into 2**bits buckets first.",
        )
    return array.astype(np.int64)


def z_value(coords: Sequence[Sequence[int]] | np.ndarray, bits: int) -> np.ndarray:
    """Z-value (Morton code) of each point: the coordinates' bits interleaved, high bits first.

    ``coords`` holds k arrays of n integers in ``[0, 2**bits)``; the result has n integers of
    ``k * bits`` bits. At every bit level the first coordinate contributes the more significant
    bit, as in Delta's ``interleave_bits`` (``z_value([[1], [0]], 1)`` is ``[2]``).
    """
    array = _as_coordinates(coords, bits)
    k = array.shape[0]
    result = np.zeros(array.shape[1], dtype=np.int64)
    for level in range(bits - 1, -1, -1):
        for dim in range(k):
            result = (result << 1) | ((array[dim] >> level) & 1)
    return result


def hilbert_index(coords: Sequence[Sequence[int]] | np.ndarray, bits: int) -> np.ndarray:
    """Hilbert index of each point on a k-dimensional grid of side ``2**bits``.

    John Skilling's algorithm ("Programming the Hilbert curve", AIP Conf. Proc. 707, 2004):
    undo the excess work of the Gray code in the coordinates ("axes to transpose"), then
    interleave their bits like a Z-value. Consecutive indices are always neighbouring cells
    (distance 1 along one axis), which is what a Z-value lacks.
    """
    x = _as_coordinates(coords, bits).copy()
    k = x.shape[0]
    q = 1 << (bits - 1)
    while q > 1:  # inverse undo
        p = q - 1
        for i in range(k):
            has_bit = (x[i] & q) != 0
            x[0] = np.where(has_bit, x[0] ^ p, x[0])
            t = np.where(has_bit, 0, (x[0] ^ x[i]) & p)
            x[0] ^= t
            x[i] ^= t
        q >>= 1
    for i in range(1, k):  # Gray encode
        x[i] ^= x[i - 1]
    t = np.zeros(x.shape[1], dtype=np.int64)
    q = 1 << (bits - 1)
    while q > 1:
        t = np.where((x[k - 1] & q) != 0, t ^ (q - 1), t)
        q >>= 1
    x ^= t
    return z_value(x, bits)


def curve_order(kind: str, bits: int, dims: int = 2) -> np.ndarray:
    """All cells of a ``2**bits``-sided grid in ``dims`` dimensions, in curve order.

    Returns an array of shape (``2**(bits*dims)``, dims): row i is the cell with index i on the
    ``"zorder"`` or ``"hilbert"`` curve. Plot its columns to draw the curve.
    """
    functions = {"zorder": z_value, "hilbert": hilbert_index}
    if kind not in functions:
        raise DeltaLabError(f"Unknown curve {kind!r}.", fix="Use 'zorder' or 'hilbert'.")
    if dims < 1 or bits * dims > 20:
        raise DeltaLabError(
            f"A grid of {dims} dimensions x {bits} bits has 2**{bits * dims} cells, too many to list.",
            fix="Use bits * dims <= 20 (e.g. bits=3, dims=2 for an 8 x 8 grid).",
        )
    side = 1 << bits
    cells = np.array(np.meshgrid(*[np.arange(side)] * dims, indexing="ij")).reshape(dims, -1)
    order = np.argsort(functions[kind](cells, bits), kind="stable")
    return cells[:, order].T
