"""Local suppression of single key values in ``protect`` (``--suppress values``), as sdcMicro's
``localSuppression`` does.

At a node whose generalisation alone fails a criterion, key values of the records in the smallest
cells are set to missing: for r = 1, 2, ... (the cell sizes present), the value suppression of
:func:`suppress_to_k` makes every scenario (r+1)-anonymous, until every criterion holds on the
re-counted tables, or more than the limit (a share of the n·K key values) would be suppressed.

How a missing value is counted. sdcMicro's ``freqCalc``/``kAnon`` treat a missing key value as a
wildcard (it matches every value of that key, so cells overlap). gpurisk counts it as a category of
its own (``missing="category"``, what ``gpurisk assess`` does with the release), and the tables
here are re-counted that way, by the engine's code path (:func:`recount`). A record's count under
the wildcard rule is never below its count under the category rule, so a release that is k-anonymous
here is k-anonymous for sdcMicro too; it may need more suppressions than sdcMicro's would.

The heuristic (:func:`suppress_to_k`), on the node's cells (records of a cell share every key, so
they get the same suppressions; no loop over records), in rounds while some cell holds fewer than k
records in a scenario:

1. a cell already missing key v that is short of k by no more than it holds takes records, one
   value each, from safe cells equal to it but for v that can spare them (they keep k in every
   scenario);
2. otherwise every unsafe cell sets one more key to missing, a key of a scenario it fails in: the
   first key — in sdcMicro's default order of importance: keys with more categories are suppressed
   first, ties by key order — whose suppression by every such cell at once makes it safe, else the
   first whose suppression leaves it short by no more than step 1 can lend, else the first;
3. a cell with no key left to suppress joins the all-missing cell; when that holds fewer than k
   records, records of cells that can spare them (then of the smallest cells) join it.

Fails only when fewer than k records are present. It is a heuristic, like sdcMicro's: the tests
compare it with the fewest suppressions found by brute force on small tables, and with the lower
bound (a value per record of a cell under k) on ARX's adult data.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from gpurisk.freq import partial as P
from gpurisk.freq.cellid import combined_ids, fits_radix, radix_space
from gpurisk.freq.lattice import cell_codes, regroup
from gpurisk.freq.table import FreqTable
from gpurisk.protect.hierarchy import KeyLevels


def missing_codes(T: FreqTable) -> tuple[list[list], list[int]]:
    """The categories of each key with a missing category (appended when absent), and its code."""
    cats = [list(c) for c in T.categories]
    na = []
    for c in cats:
        if None not in c:
            c.append(None)
        na.append(c.index(None))
    return cats, na


def recount(T: FreqTable, codes: Sequence[np.ndarray], f: np.ndarray, cats: list[list]) -> FreqTable:
    """A table over ``T``'s keys of rows with key codes ``codes`` (categories ``cats``) and
    ``f`` records each: rows with equal codes merged, f added, empty rows dropped (no population,
    no weights)."""
    f = np.asarray(f).astype(np.int64)
    codes = [np.asarray(c).astype(np.int64)[f > 0] for c in codes]
    f = f[f > 0]
    cards = [len(c) for c in cats]
    ids = combined_ids(codes, cards) if f.size else np.zeros(0, np.int64)
    radix = fits_radix(cards)
    uniq, fsum, inv = _group_sums(ids, radix_space(cards) if radix else None, f)
    fsum = fsum.astype(np.int64)
    stored = None
    if not radix:
        first = np.zeros(uniq.size, np.int64)
        first[inv[::-1]] = np.arange(inv.size)[::-1]
        stored = [c[first] for c in codes]
        uniq = np.arange(uniq.size, dtype=np.int64)
    return FreqTable(T.keys, cats, uniq.astype(np.int64), fsum, None, None, radix, np, stored,
                     None, T.backend)


def importance_order(T: FreqTable) -> list[int]:
    """Keys in the order they are suppressed: more categories present first (sdcMicro's default
    importance), ties by key order."""
    f = np.asarray(T.f)
    present = [np.unique(np.asarray(c)[f > 0]).size for c in cell_codes(T)]
    return sorted(range(len(present)), key=lambda v: (-present[v], v))


def _counts(cur, f, cards, scen_idx):
    """Per scenario, each cell's scenario count."""
    out = []
    for s in scen_idx:
        sc = [cards[v] for v in s]
        ids = combined_ids([cur[v] for v in s], sc)
        _, sums, inv = _group_sums(ids, radix_space(sc) if fits_radix(sc) else None, f)
        out.append(sums[inv])
    return out


def _group_sums(ids, space, w=None):
    """(distinct ids, the sum of ``w`` over each (None without ``w``), each row's index among them),
    by the engine's :func:`gpurisk.freq.partial.group_ids` (a histogram where the id ``space`` is
    small, else one sort)."""
    cells, inv = P.group_ids(ids, np, space=space)
    sums = None if w is None else np.bincount(inv, weights=np.asarray(w, dtype=np.float64),
                                              minlength=cells.size)
    return cells, sums, inv


@dataclass
class Suppression:
    """Rows of the node's cells after suppression: row i holds ``f[i]`` records of cell ``cell[i]``
    with the keys in ``mask[i]`` missing (a cell is split into rows when some of its records lend
    themselves to another cell, or join the all-missing cell)."""

    cell: np.ndarray       # (rows,) index of the node's cell
    f: np.ndarray          # (rows,) records
    mask: np.ndarray       # (rows, keys) suppressed

    def per_key(self) -> np.ndarray:
        return (self.mask * self.f[:, None]).sum(axis=0).astype(np.int64)


def suppress_to_k(T: FreqTable, scen_idx: Sequence[Sequence[int]], k: int,
                  order: Sequence[int] | None = None) -> Suppression | None:
    """Which key values of the cells of ``T`` to set missing so that every scenario (key indices)
    has no cell of fewer than ``k`` records (see the module docstring); None when it cannot (fewer
    than ``k`` records present)."""
    K = len(T.keys)
    codes0 = [np.asarray(c).astype(np.int64) for c in cell_codes(T)]
    f = np.asarray(T.f).astype(np.float64)
    if f.sum() < k:
        return None
    cats, na = missing_codes(T)
    cards = [len(c) for c in cats]
    order = list(importance_order(T) if order is None else order)
    member = np.zeros((len(scen_idx), K), dtype=bool)
    for j, s in enumerate(scen_idx):
        member[j, list(s)] = True
    cell = np.arange(f.size)
    mask = np.zeros((f.size, K), dtype=bool)
    for _ in range(4 * K * f.size + 16):         # each round suppresses more; a guard, not a bound
        present = f > 0
        cur = [np.where(mask[:, v], na[v], codes0[v][cell]) for v in range(K)]
        counts = _counts(cur, f, cards, scen_idx)
        bad = np.stack([present & (c < k) for c in counts])                         # (S, rows)
        unsafe = bad.any(axis=0)
        if not unsafe.any():
            return Suppression(cell, f.astype(np.int64), mask)
        elig = ~mask & (bad.T.astype(np.int64) @ member.astype(np.int64) > 0)        # (rows, K)
        groups: dict = {}                            # per key, _groups of this round's codes
        filled = _fill(cur, f, cell, mask, counts, unsafe, k, na, cards, member, order, groups)
        if filled is not None:
            cell, f, mask = filled
            continue
        stuck = unsafe & ~elig.any(axis=1)
        if stuck.any():
            moved = _to_all_missing(cell, f, mask, stuck, counts, k)
            if moved is None:
                return None
            cell, f, mask = moved
            continue
        choice = np.full(f.size, -1, dtype=np.int64)
        lendable = np.full(f.size, -1, dtype=np.int64)
        lo_all = np.min(np.stack(counts), axis=0)
        for v in order:                               # one look-ahead per key
            movers = unsafe & elig[:, v]
            if not movers.any():
                continue
            trial = list(cur)
            trial[v] = np.where(movers, na[v], cur[v])
            tc = np.stack(_counts(trial, f, cards, scen_idx))
            ok = np.all(tc >= k, axis=0)
            choice = np.where((choice < 0) & movers & ok, v, choice)
            # or safe once the cells equal to it but for v lend it the records they can spare
            without = np.all(tc[~member[:, v]] >= k, axis=0)
            spare = np.where(present & ~movers & (cur[v] != na[v]) & ~unsafe,
                             np.minimum(lo_all - k, f), 0).clip(0, None)
            inv = groups[v] if v in groups else _groups(cur, cards, v)
            avail = np.bincount(inv, weights=spare)[inv]
            lo_v = tc[member[:, v]].min(axis=0)
            fills = movers & without & (lo_v + avail >= k) & (k - lo_v <= lo_v)
            lendable = np.where((lendable < 0) & fills, v, lendable)
        choice = np.where(choice < 0, lendable, choice)
        for v in order:                               # no key makes it safe: the first eligible
            choice = np.where((choice < 0) & unsafe & elig[:, v], v, choice)
        rows = np.flatnonzero(choice >= 0)
        mask[rows, choice[rows]] = True
    return None


def _groups(cur, cards, v):
    """Each row's group of rows equal to it on every key but v (dense ids)."""
    others = [u for u in range(len(cur)) if u != v]
    if not others:
        return np.zeros(cur[0].size, np.int64)
    oc = [cards[u] for u in others]
    g = combined_ids([cur[u] for u in others], oc)
    return _group_sums(g, radix_space(oc) if fits_radix(oc) else None)[2]


def _fill(cur, f, cell, mask, counts, unsafe, k, na, cards, member, order, groups):
    """Safe rows lend records to an unsafe cell whose key v is missing: records of the rows equal
    to it but for v, with some to spare (at least k left in every scenario), set v missing and join
    it, first rows first; key by key in ``order``, a row lending or filled once per call. The new
    rows, or None when none can (then ``groups`` keeps the groups it computed, per key)."""
    lo_all = np.min(np.stack(counts), axis=0)
    present = f > 0
    used = np.zeros(f.size, dtype=bool)
    f = f.copy()
    new_cell, new_f, new_mask = [], [], []
    for v in order:
        sv = [j for j in range(member.shape[0]) if member[j, v]]
        if not sv:
            continue
        lo = np.min(np.stack([counts[j] for j in sv]), axis=0)
        # lending costs k - lo values, moving the cell on costs lo: lend when no dearer
        target = present & ~used & (cur[v] == na[v]) & (lo < k) & (k - lo <= lo)
        if not target.any():
            continue
        spare = np.where(present & ~used & (cur[v] != na[v]) & ~unsafe,
                         np.minimum(lo_all - k, f), 0).clip(0, None)
        inv = groups[v] = _groups(cur, cards, v)
        need = np.zeros(inv.max() + 1)
        np.maximum.at(need, inv[target], k - lo[target])
        avail = np.bincount(inv, weights=spare, minlength=need.size)
        filled = (need > 0) & (avail >= need)
        donors = np.flatnonzero((spare > 0) & filled[inv])
        if not donors.size:
            continue
        donors = donors[np.argsort(inv[donors], kind="stable")]
        sp = spare[donors]
        cs = np.cumsum(sp)
        first = np.searchsorted(inv[donors], inv[donors], side="left")
        before = cs - sp - (cs[first] - sp[first])              # spare of earlier donors in group
        take = np.clip(need[inv[donors]] - before, 0, sp)
        donors, take = donors[take > 0], take[take > 0]
        f[donors] -= take
        used[donors] = True
        used[target & filled[inv]] = True
        add = mask[donors].copy()
        add[:, v] = True
        new_cell.append(cell[donors])
        new_f.append(take)
        new_mask.append(add)
    if not new_cell:
        return None
    return (np.concatenate([cell, *new_cell]), np.concatenate([f, *new_f]),
            np.concatenate([mask, *new_mask]))


def _to_all_missing(cell, f, mask, stuck, counts, k):
    """Every key of the ``stuck`` rows missing; when the all-missing rows then hold fewer than
    ``k`` records, records of rows with some to spare (at least k left in every scenario) join
    them, cheapest first (fewest values still present), ties by row; when they are too few, whole
    rows join, cheapest then smallest first; None when fewer than k records are left."""
    mask = mask.copy()
    mask[stuck] = True
    allna = mask.all(axis=1)
    need = int(k - f[allna].sum())
    if need <= 0:
        return cell, f, mask
    spare = (np.min(np.stack(counts), axis=0) - k).clip(0, None)
    spare = np.where(allna | (f <= 0), 0, np.minimum(spare, f)).astype(np.int64)
    if int(spare.sum()) < need:      # too few to spare: whole rows join, smallest first
        spare = np.where(allna, 0, f).astype(np.int64)
        if int(spare.sum()) < need:
            return None
        cand = np.flatnonzero(spare > 0)
        cand = cand[np.lexsort((cand, spare[cand], (~mask[cand]).sum(axis=1)))]
    else:
        cand = np.flatnonzero(spare > 0)
        cand = cand[np.lexsort((cand, (~mask[cand]).sum(axis=1)))]
    take = np.minimum(spare[cand], np.maximum(need - (np.cumsum(spare[cand]) - spare[cand]), 0))
    cand, take = cand[take > 0], take[take > 0]
    f = f.copy()
    f[cand] -= take
    return (np.concatenate([cell, cell[cand]]), np.concatenate([f, take.astype(f.dtype)]),
            np.concatenate([mask, np.ones((cand.size, mask.shape[1]), dtype=bool)]))


def suppressed_cells(T: FreqTable, sup: Suppression) -> FreqTable:
    """``T`` re-counted with ``sup``'s values missing (missing is a category)."""
    cats, na = missing_codes(T)
    codes = [np.where(sup.mask[:, v], na[v], np.asarray(c).astype(np.int64)[sup.cell])
             for v, c in enumerate(cell_codes(T))]
    return recount(T, codes, sup.f, cats)


def kept_cells(T: FreqTable, sup: Suppression) -> FreqTable:
    """The rows without a suppressed value (the losses' equivalence classes)."""
    keep = ~sup.mask.any(axis=1)
    return recount(T, [np.asarray(c).astype(np.int64)[sup.cell[keep]] for c in cell_codes(T)],
                   sup.f[keep], [list(c) for c in T.categories])


def search_value_suppression(T: FreqTable, scen: Sequence[tuple], limit: int,
                             evaluate: Callable[[list[FreqTable]], list[list]],
                             holds: Callable[[list[list]], bool]):
    """The least r (r = 1, 2, ...) whose value suppression to (r+1)-anonymity makes
    ``holds(values)`` true with at most ``limit`` key values suppressed: (r, values suppressed per
    key, the :class:`Suppression`, values per scenario), or None."""
    names = list(T.keys)
    scen_idx = [[names.index(k) for k in s] for s in scen]
    order = importance_order(T)
    f = np.asarray(T.f).astype(np.int64)
    if not f.sum():
        return None
    # a lower bound: every record of a cell under r+1 in a scenario with no key missing must lose
    # a value (suppression only takes records out of such a cell); above the limit, stop
    codes = [np.asarray(c).astype(np.int64) for c in cell_codes(T)]
    least = np.min(np.stack(_counts(codes, f.astype(np.float64), [len(c) for c in T.categories],
                                    scen_idx)), axis=0)
    whole = (f > 0) & np.all(np.stack([c != (cats.index(None) if None in cats else -1)
                                       for c, cats in zip(codes, T.categories)]), axis=0)
    for r in range(1, int(f.sum())):
        if int(f[whole & (least <= r)].sum()) > limit:
            return None
        sup = suppress_to_k(T, scen_idx, int(r) + 1, order)
        if sup is None:
            return None
        per_key = sup.per_key()
        if int(per_key.sum()) > limit:
            return None
        Ts = suppressed_cells(T, sup)
        tabs = [Ts if len(s) == len(names) else regroup(Ts, s) for s in scen]
        vals = evaluate(tabs)
        if holds(vals):
            return int(r), {k: int(m) for k, m in zip(names, per_key)}, sup, vals
    return None


def node_table(root: FreqTable, keys: Sequence[KeyLevels], node) -> tuple[FreqTable, np.ndarray]:
    """The node's table over every key, and each root cell's index in it."""
    maps = {kl.key: kl.between(0, node[kl.key]) for kl in keys if node[kl.key]}
    if not maps:
        return root, np.arange(np.asarray(root.f).size)
    T, inv = regroup(root, root.keys, maps, return_inverse=True)
    return T, np.asarray(inv).reshape(-1)


def original_counts(root: FreqTable, keys: Sequence[KeyLevels], node, sup: Suppression):
    """Per key, the suppressed values' count in each original category (for the losses): a node
    cell's suppressed records are shared out over its root cells in record order, as the release
    does (:func:`value_mask`)."""
    m = value_mask(root, keys, node, sup)
    cell = np.asarray(root.record_cell())
    codes = cell_codes(root)
    return {kl.key: np.bincount(np.asarray(codes[v]).astype(np.int64)[cell], weights=m[:, v],
                                minlength=len(kl.cats[0]))
            for v, kl in enumerate(keys)}


def value_mask(root: FreqTable, keys: Sequence[KeyLevels], node, sup: Suppression) -> np.ndarray:
    """Which key values the release suppresses: a records × keys bool array in record order. The
    records of a node cell split into rows go to its rows in record order (first rows first)."""
    _, inv = node_table(root, keys, node)
    rec = inv[np.asarray(root.record_cell())]                   # each record's node cell
    n = rec.size
    rank = np.empty(n, dtype=np.int64)                          # rank within its cell
    by = np.argsort(rec, kind="stable")
    starts = np.searchsorted(rec[by], rec[by], side="left")
    rank[by] = np.arange(n) - starts
    rows = np.lexsort((np.arange(sup.cell.size), sup.cell))     # by cell, then row
    fr = sup.f[rows]
    first = np.concatenate([[0], np.cumsum(fr)[:-1]])
    cell_first = np.searchsorted(sup.cell[rows], sup.cell[rows], side="left")
    offset = first - first[cell_first]                          # start of the row in its cell
    keyed = sup.cell[rows] * (n + 1) + offset
    pick = np.searchsorted(keyed, rec * (n + 1) + rank, side="right") - 1
    return sup.mask[rows[pick]]


def reproduce(root: FreqTable, keys: Sequence[KeyLevels], node, scen: Sequence[tuple],
              r: int) -> np.ndarray:
    """The release's records × keys suppression mask at ``node`` with threshold ``r`` (what
    :func:`search_value_suppression` chose, recomputed from the counts)."""
    T, _ = node_table(root, keys, node)
    names = list(T.keys)
    sup = suppress_to_k(T, [[names.index(k) for k in s] for s in scen], int(r) + 1)
    if sup is None:              # the search found it; the same table gives the same answer
        raise RuntimeError("value suppression could not be reproduced")
    return value_mask(root, keys, node, sup)
