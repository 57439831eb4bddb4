"""The one batching loop (batchval/_internal/batching.py): a stream's items in runs of at
least a size, whatever the size is of (rows of a frame, bytes of a table)."""

from __future__ import annotations

import pytest

from batchval._internal.batching import gathered


@pytest.mark.parametrize(
    ("sizes", "enough", "runs"),
    [
        ([1, 2, 3, 4], 3, [[1, 2], [3], [4]]),
        ([5], 3, [[5]]),
        ([1, 1], 3, [[1, 1]]),  # the last run short
        ([0, 0, 3, 0], 3, [[0, 0, 3], [0]]),
        ([], 3, []),
    ],
)
def test_items_are_gathered_into_runs_of_at_least_enough(
    sizes: list[int], enough: int, runs: list[list[int]]
) -> None:
    assert list(gathered(sizes, lambda size: size, enough)) == runs
