"""What a pass over the sample uniques gathers more than once for one slice of them, gathered once.

The leave-one-out prior, the moved priors and the root gammas' Taylor sums each look a unique's
categories up: a key's codes at the slice's cells, a pair's index formed from two keys' codes.
In a tree of eight keys (seven arcs) the prior alone looks the eight keys' codes up 29 times a
slice: a root's once, each arc's pair twice, its parent and child once each.
Within ``with SliceMemo():`` (a thread's one slice of :func:`gpurisk.models.unique_sums.unique_pass`)
:func:`rows_at` gives one view of the cells per slice of rows, and :func:`take` and
:func:`pair_take` gather each key's codes and each pair's index at that view once: the same arrays
they would gather again, so every number is the same. Outside such a block, and in any other
thread, they are the plain gathers. Each entry keeps what it was made from and is used only for
those very objects, and the memo is dropped when the block ends."""
from __future__ import annotations

import threading

import numpy as np

_LOCAL = threading.local()


class SliceMemo:
    """The block within which this thread's gathers at a slice are kept (see the module doc)."""

    def __enter__(self):
        _LOCAL.memo = {}
        return self

    def __exit__(self, *exc):
        _LOCAL.memo = None


def _memo():
    return getattr(_LOCAL, "memo", None)


def rows_at(rows, part):
    """``rows[part]``: within a :class:`SliceMemo`, one view per slice ``part`` of ``rows``."""
    memo = _memo()
    if memo is None or not isinstance(part, slice):
        return rows[part]
    key = ("rows", id(rows), part.start, part.stop, part.step)
    hit = memo.get(key)
    if hit is None or hit[0] is not rows:
        hit = memo[key] = (rows, rows[part])
    return hit[1]


def take(codes, r):
    """``codes[r]``, gathered once per (codes, r) within a :class:`SliceMemo`."""
    memo = _memo()
    if memo is None:
        return codes[r]
    key = ("take", id(codes), id(r))
    hit = memo.get(key)
    if hit is None or hit[0] is not codes or hit[1] is not r:
        hit = memo[key] = (codes, r, codes[r])
    return hit[2]


def pair_take(codes, cards, a: int, b: int, r):
    """x_a·c_b + x_b of the cells ``r`` (:func:`gpurisk.models.forest.pair_ids`), formed once per
    (the two keys' codes, r) within a :class:`SliceMemo`."""
    memo = _memo()
    ca, cb = codes[a], codes[b]

    def make():
        return (take(ca, r).astype(np.int64) * int(cards[b])
                + take(cb, r).astype(np.int64, copy=False))
    if memo is None:
        return make()
    key = ("pair", id(ca), id(cb), int(cards[b]), id(r))
    hit = memo.get(key)
    if hit is None or hit[0] is not ca or hit[1] is not cb or hit[2] is not r:
        hit = memo[key] = (ca, cb, r, make())
    return hit[3]
