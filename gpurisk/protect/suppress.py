"""Record suppression of ``protect`` (``--suppress-limit``), as ARX's suppression limit.

At a node whose generalisation alone fails a criterion, the records of the smallest cells are
suppressed: for r = 1, 2, ... (the sizes of cells present), every record whose cell has at most r
records in some scenario has all its key values set to missing, until every criterion holds, or
more than the limit (a share of the records) would be suppressed (then the node fails). The
suppressed records stay in the release with every key missing, which gpurisk counts as one more
cell (missing is a category: ``gpurisk assess`` on the release sees the same cells), so the
criteria are evaluated on the tables with that cell. Whole records are suppressed, so each key
loses the same number of values.

Everything is done on the node's table (a cell's records share their cell in every scenario), never
on the records, except for writing the release (:func:`record_mask`).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from gpurisk.freq.cellid import combined_ids, fits_radix
from gpurisk.freq.lattice import CodeMap, cell_codes, regroup
from gpurisk.freq.table import FreqTable
from gpurisk.protect.hierarchy import KeyLevels


def scenario_counts(T: FreqTable, scen: Sequence[tuple]) -> list[np.ndarray]:
    """Per scenario, each cell of ``T`` (the node's table over every key) its scenario cell's f."""
    out = []
    for s in scen:
        if len(s) == len(T.keys):
            out.append(np.asarray(T.f))
        else:
            ts, inv = regroup(T, s, return_inverse=True)
            out.append(np.asarray(ts.f)[inv])
    return out


def suppressed_table(T: FreqTable, small: np.ndarray, add_cell: bool = True) -> FreqTable:
    """``T`` without the cells in ``small``; with ``add_cell`` their records form one more cell with
    every key missing (merged with a cell already missing every key)."""
    keep = ~small
    m = int(np.asarray(T.f)[small].sum())
    codes = [np.asarray(c).astype(np.int64)[keep] for c in cell_codes(T)]
    f = np.asarray(T.f)[keep].astype(np.int64)
    cats = [list(c) for c in T.categories]
    if add_cell and m:
        for v, c in enumerate(cats):
            if None not in c:
                c.append(None)
            codes[v] = np.append(codes[v], c.index(None))
        f = np.append(f, m)
    cards = [len(c) for c in cats]
    ids = combined_ids(codes, cards) if codes and codes[0].size else np.zeros(0, np.int64)
    uniq, inv = np.unique(ids, return_inverse=True)
    fsum = np.bincount(inv.reshape(-1), weights=f, minlength=uniq.size).astype(np.int64)
    radix = fits_radix(cards)
    stored = None
    if not radix:
        first = np.zeros(uniq.size, np.int64)
        first[inv.reshape(-1)[::-1]] = np.arange(inv.size)[::-1]
        stored = [c[first] for c in codes]
        uniq = np.arange(uniq.size, dtype=np.int64)
    return FreqTable(T.keys, cats, uniq.astype(np.int64), fsum, None, None, radix, np, stored,
                     None, T.backend)


def search_suppression(T: FreqTable, scen: Sequence[tuple], limit: int,
                       evaluate: Callable[[list[FreqTable]], list[list]],
                       holds: Callable[[list[list]], bool]):
    """The least r whose suppression makes ``holds(values)`` true with at most ``limit`` records
    suppressed: (r, records suppressed, small-cell mask, values per scenario), or None."""
    counts = scenario_counts(T, scen)
    least = np.min(np.stack(counts), axis=0) if counts else np.asarray(T.f)
    f = np.asarray(T.f)
    present = f > 0
    for r in np.unique(least[present]):
        small = present & (least <= r)
        m = int(f[small].sum())
        if m > limit:
            return None
        if m == int(f.sum()):
            return None                      # nothing would be left to release
        Ts = suppressed_table(T, small)
        tabs = [Ts if len(s) == len(T.keys) else regroup(Ts, s) for s in scen]
        vals = evaluate(tabs)
        if holds(vals):
            return int(r), m, small, vals
    return None


def original_counts(root: FreqTable, keys: Sequence[KeyLevels], levels, small: np.ndarray):
    """Per key, the suppressed records' count in each original category (for the losses)."""
    maps = {kl.key: kl.between(0, lev) for kl, lev in zip(keys, levels) if lev}
    _, inv = regroup(root, root.keys, maps, return_inverse=True) if maps else \
        (root, np.arange(root.cell_id.shape[0]))
    sup = np.asarray(small)[np.asarray(inv)]
    f = np.asarray(root.f).astype(np.float64) * sup
    codes = cell_codes(root)
    return {kl.key: np.bincount(np.asarray(codes[v]).astype(np.int64), weights=f,
                                minlength=len(kl.cats[0]))
            for v, kl in enumerate(keys)}


def record_mask(root: FreqTable, keys: Sequence[KeyLevels], node: dict, scen: Sequence[tuple],
                r: int) -> np.ndarray:
    """Which records the release suppresses at ``node`` with threshold ``r`` (record order): those
    whose cell in some scenario holds at most r records."""
    cell = np.asarray(root.record_cell())
    codes = cell_codes(root)
    gen = {kl.key: kl.luts[node[kl.key]][np.asarray(codes[v]).astype(np.int64)[cell]]
           for v, kl in enumerate(keys)}
    mask = np.zeros(cell.shape[0], dtype=bool)
    for s in scen:
        ids = combined_ids([gen[k] for k in s], [len(keys[[kl.key for kl in keys].index(k)]
                                                     .cats[node[k]]) for k in s])
        _, inv, cnt = np.unique(ids, return_inverse=True, return_counts=True)
        mask |= cnt[inv.reshape(-1)] <= r
    return mask


__all__ = ["scenario_counts", "suppressed_table", "search_suppression", "original_counts",
           "record_mask", "CodeMap"]
