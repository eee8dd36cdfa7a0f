"""Counting kernels on numpy: cell counts from ids, and each record's cell.

``count_ids`` sorts the ids (numpy's vectorised sort) and run-length encodes them. ``locate`` maps
each record's id to its position in the sorted cell list: through a dense lookup table when the id
space is small, a rank bitmap (one bit per possible cell plus a popcount prefix) when it is moderate,
and binary search otherwise.
"""
from __future__ import annotations

import numpy as np

DENSE_LOOKUP_LIMIT = 1 << 25     # ids below this: int32 lookup table (128 MiB at most)
BITMAP_LIMIT = 1 << 33           # ids below this: rank bitmap (1 GiB bits + 512 MiB prefix at most)


def count_ids(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct ids, their counts)."""
    if ids.size == 0:
        return ids[:0].astype(np.int64), np.zeros(0, np.int64)
    s = np.sort(ids)
    starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))
    counts = np.diff(np.append(starts, s.size))
    return s[starts], counts.astype(np.int64)


def merge_counts(uniq_a, cnt_a, uniq_b, cnt_b):
    """Union of two (sorted ids, counts) tables, counts summed (used for partial counts)."""
    ids = np.concatenate([uniq_a, uniq_b])
    cnt = np.concatenate([cnt_a, cnt_b])
    order = np.argsort(ids, kind="stable")
    ids, cnt = ids[order], cnt[order]
    starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
    return ids[starts], np.add.reduceat(cnt, starts) if ids.size else cnt


def locate(ids: np.ndarray, cells: np.ndarray, space: int | None) -> np.ndarray:
    """Position of each id in the sorted array ``cells`` (every id must be in ``cells``)."""
    if ids.size == 0:
        return np.zeros(0, np.int64)
    if space is not None and space <= DENSE_LOOKUP_LIMIT:
        lut = np.zeros(int(space), dtype=np.int32)
        lut[cells] = np.arange(cells.size, dtype=np.int32)
        return lut[ids].astype(np.int64)
    if space is not None and space <= BITMAP_LIMIT:
        nwords = (int(space) + 63) >> 6
        words = cells >> 6
        bits = np.left_shift(np.uint64(1), (cells & 63).astype(np.uint64))
        starts = np.flatnonzero(np.concatenate(([True], words[1:] != words[:-1])))
        bitmap = np.zeros(nwords, dtype=np.uint64)
        bitmap[words[starts]] = np.bitwise_or.reduceat(bits, starts)
        prefix = np.zeros(nwords, dtype=np.int64)
        np.cumsum(np.bitwise_count(bitmap[:-1]), out=prefix[1:])
        w = ids >> 6
        below = np.left_shift(np.uint64(1), (ids & 63).astype(np.uint64)) - np.uint64(1)
        return prefix[w] + np.bitwise_count(bitmap[w] & below)
    return np.searchsorted(cells, ids)
