"""Counting kernels on numpy: cell counts from ids, and each record's cell.

``count_ids`` sorts the ids (numpy's vectorised sort) and run-length encodes them. ``locate`` maps
each record's id to its position in the sorted cell list: through a dense lookup table when the id
space is small, a rank bitmap (one bit per possible cell plus a popcount prefix) when it is moderate,
and binary search otherwise.
"""
from __future__ import annotations

import numpy as np

DENSE_LOOKUP_LIMIT = 1 << 25     # ids below this: int32 lookup table (128 MiB at most)


def count_ids(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct ids as int64, their counts)."""
    if ids.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    s = np.sort(ids)
    starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))
    counts = np.diff(np.append(starts, s.size))
    return s[starts].astype(np.int64), counts.astype(np.int64)


def locate(ids: np.ndarray, cells: np.ndarray, space: int | None,
           counts: np.ndarray | None = None) -> np.ndarray:
    """Position of each id in the sorted array ``cells`` (every id must be in ``cells``).

    Small id spaces use a dense lookup table. Otherwise, when id and row number fit in 63 bits
    together, one sort of ``id << b | row`` orders the rows by cell; with ``counts`` (how many of the
    ids fall in each cell) the cell number of each sorted position is ``repeat(arange(C), counts)``,
    scattered back to the rows. Failing that, binary search.
    """
    n = ids.size
    if n == 0:
        return np.zeros(0, np.int64)
    idx_t = np.int32 if cells.size < 2**31 else np.int64
    if space is not None and space <= DENSE_LOOKUP_LIMIT:
        lut = np.zeros(int(space), dtype=idx_t)
        lut[cells] = np.arange(cells.size, dtype=idx_t)
        return lut[ids]
    top = int(space if space is not None else int(cells[-1]) + 1)
    nb = int(n - 1).bit_length() or 1
    if (top - 1).bit_length() + nb <= 63:
        packed = ids.astype(np.int64)
        packed <<= nb
        packed |= np.arange(n, dtype=np.int64)
        packed.sort()
        if counts is None:
            counts = np.diff(np.searchsorted(packed >> nb, cells, side="left"), append=n)
        packed &= (1 << nb) - 1          # now the row numbers, in cell order
        out = np.empty(n, dtype=idx_t)
        out[packed] = np.repeat(np.arange(cells.size, dtype=idx_t), counts)
        return out
    return np.searchsorted(cells, ids)
