"""The educational space-filling curves: exact values on tiny grids, and the curves' defining properties."""

from __future__ import annotations

import numpy as np
import pytest

from deltalab.curves import curve_order, hilbert_index, z_value
from deltalab.errors import DeltaLabError


def test_z_value_interleaves_bits_first_coordinate_most_significant():
    # x = 0b10, y = 0b01 -> bits x1 y1 x0 y0 = 1 0 0 1 = 9
    assert z_value([[2], [1]], bits=2).tolist() == [9]
    assert z_value([[1], [0]], bits=1).tolist() == [2]
    assert z_value([[0], [1]], bits=1).tolist() == [1]


def test_z_value_is_a_bijection_and_keeps_quadrants_together():
    cells = np.array(np.meshgrid(np.arange(8), np.arange(8), indexing="ij")).reshape(2, -1)
    z = z_value(cells, bits=3)
    assert sorted(z.tolist()) == list(range(64))
    # The first quarter of the curve is exactly the lower-left 4 x 4 quadrant.
    first = cells[:, z < 16]
    assert first.max() == 3


@pytest.mark.parametrize("dims,bits", [(2, 1), (2, 3), (2, 5), (3, 2), (4, 2)])
def test_hilbert_index_visits_every_cell_once_and_never_jumps(dims, bits):
    points = curve_order("hilbert", bits, dims)
    assert len(np.unique(points, axis=0)) == 2 ** (dims * bits)
    steps = np.abs(np.diff(points, axis=0)).sum(axis=1)
    assert (steps == 1).all(), "consecutive Hilbert cells must be neighbours"
    assert (hilbert_index(points.T, bits) == np.arange(len(points))).all()


def test_z_curve_jumps_where_hilbert_does_not():
    z_steps = np.abs(np.diff(curve_order("zorder", 3), axis=0)).sum(axis=1)
    assert z_steps.max() > 1
    assert curve_order("zorder", 1).tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert curve_order("hilbert", 1).tolist() == [[0, 0], [0, 1], [1, 1], [1, 0]]


@pytest.mark.parametrize(
    "call,words",
    [
        (lambda: z_value([[8]], bits=3), "[0, 8)"),
        (lambda: z_value([[1.5]], bits=3), "integers"),
        (lambda: z_value([[1]], bits=0), "positive integer"),
        (lambda: hilbert_index(np.zeros((8, 1), dtype=int), bits=10), "64-bit"),
        (lambda: curve_order("peano", 2), "Unknown curve"),
        (lambda: curve_order("zorder", 11, 2), "too many"),
    ],
)
def test_bad_input_gets_one_clear_message(call, words):
    with pytest.raises(DeltaLabError, match="Fix:") as info:
        call()
    assert words in str(info.value)
