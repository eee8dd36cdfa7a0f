"""Roll a :class:`FreqTable` up the lattice of key subsets, and regroup categories, by summing counts.

A table over keys (a, b, c, d) holds everything needed for the table over any subset, say (b, d):
each fine cell belongs to exactly one coarse cell, whose mixed-radix id is computed from the fine
cell's codes, and f, F and w are summed per coarse cell. The same pass can map categories through a
lookup table (a recode: 111 single years of age -> 20 five-year bands), so a recode never touches the
records either. The cost is proportional to the fine table's cells, never to the records.

Two ways to sum, both vectorised and written against ``table.xp`` (numpy or cupy):

- dense: when the coarse id space is small, ``bincount`` over the coarse ids (one pass; f and F are
  packed into one float64 weight ``F * 2**b + f`` when the totals allow it exactly, so one
  ``bincount`` sums both); :func:`regroup_many` builds several children of one table in a single
  chunked pass (``np.add.at`` per chunk, the chunk's codes and weights staying in cache);
- sorted: otherwise, sort the coarse ids, mark run starts, give each fine cell its run's index, and
  ``bincount`` over those indices.

When the coarse key space overflows int64 the ids are surrogate (dense ranks, densified left to right
exactly as :func:`gpurisk.freq.cellid.surrogate_ids` does, so the cells come out in the same order as a
recount) and the coarse table keeps each cell's codes.

:class:`Lattice` plans a whole family of subsets: every table is summed from the smallest table
already built that contains it, adding intermediate tables where that is cheaper overall (estimated
from a sample of the finest table's cells).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np

from ..errors import BadInput
from .cellid import INT64_LIMIT, decode_radix
from .table import FreqTable

#: coarse id spaces up to this many cells are summed into a dense accumulator ...
DENSE_LIMIT = 1 << 24
#: ... provided the space is at most this many times the fine table's cells (or below DENSE_MIN)
DENSE_FACTOR = 32
DENSE_MIN = 1 << 16
#: cells per chunk of a fused roll-up, and when decoding cell ids (keeps the working set in cache)
CHUNK = 1 << 16
DECODE_CHUNK = 1 << 14


@dataclass(frozen=True)
class CodeMap:
    """A regrouping of one key's categories: ``lut[old_code] = new_code``, and the new labels."""

    lut: np.ndarray
    categories: list

    def __post_init__(self):
        if len(self.lut) and (int(np.max(self.lut)) >= len(self.categories) or int(np.min(self.lut)) < 0):
            raise ValueError("CodeMap.lut points outside its categories")


def _smallest_int(card: int):
    for dt in (np.int8, np.int16, np.int32):
        if card <= np.iinfo(dt).max:
            return dt
    return np.int64


def cell_codes(table: FreqTable) -> list:
    """Per key, the code of each cell, in the smallest integer dtype (``table.xp`` arrays).

    Faster than :meth:`FreqTable.cell_codes` on numpy: the mixed-radix ids are divided in float64
    (exact for id spaces below 2**50, see below) chunk by chunk.
    """
    xp = table.xp
    cards = table.cards
    if table.stored_cell_codes is not None:
        return [xp.asarray(c).astype(_smallest_int(k), copy=False)
                for c, k in zip(table.stored_cell_codes, cards)]
    ids = table.cell_id
    space = math.prod(cards)
    if xp is not np or space >= 2**50:
        return [c.astype(_smallest_int(k)) for c, k in zip(decode_radix(ids, cards), cards)]
    # For an integer 0 <= a < 2**50 and k >= 2, floor((a + 0.5) * fl(1/k)) is exactly a // k: the
    # exact (a + 0.5) / k is at least 0.5 / k away from an integer, the float error is below
    # (a + 0.5) / k * 2**-51 < 0.5 / k. In float32 (relative error 2**-23) the same holds for
    # a < 2**22, so id spaces up to 2**21 are decoded in float32, twice as many per instruction.
    ft = np.float32 if space <= 2**21 else np.float64
    m = ids.shape[0]
    out = [np.empty(m, dtype=_smallest_int(k)) for k in cards]
    ch = DECODE_CHUNK
    qbuf, rbuf = np.empty(ch, dtype=ft), np.empty(ch, dtype=ft)
    for start in range(0, m, ch):
        stop = min(m, start + ch)
        rest = ids[start:stop].astype(ft)
        q, r = qbuf[: stop - start], rbuf[: stop - start]
        for v in range(len(cards) - 1, 0, -1):
            k = ft(cards[v])
            np.add(rest, ft(0.5), out=q)
            np.multiply(q, ft(1.0) / k, out=q)
            np.floor(q, out=q)               # q = rest // k
            np.multiply(q, -k, out=r)
            r += rest                        # r = rest % k
            out[v][start:stop] = r
            rest, q = q, rest
        out[0][start:stop] = rest
    return out


def _key_index(table: FreqTable, keys: Sequence[str]) -> list[int]:
    keys = list(keys)
    if not keys:
        raise BadInput("a roll-up needs at least one key")
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise BadInput(f"key(s) {', '.join(map(repr, dup))} named more than once")
    missing = [k for k in keys if k not in table.keys]
    if missing:
        raise BadInput(f"key(s) {', '.join(map(repr, missing))} are not in the table "
                       f"(its keys: {', '.join(table.keys)})")
    return [table.keys.index(k) for k in keys]


def _radix(xp, codes, cards):
    """Mixed-radix ids of the code tuples, in the smallest integer type that holds them."""
    space = math.prod(int(k) for k in cards)
    dt = xp.int16 if space <= 2**15 else xp.int32 if space <= 2**31 else xp.int64
    ids = codes[0].astype(dt)
    for c, k in zip(codes[1:], cards[1:]):
        ids *= dt(int(k))
        ids += c
    return ids


def _surrogate(xp, codes, cards):
    """Order-preserving dense ranks of the code tuples, densified when the next key would overflow."""
    acc = codes[0].astype(xp.int64)
    space = int(cards[0])
    for c, k in zip(codes[1:], cards[1:]):
        if space * int(k) > INT64_LIMIT:
            uniq, acc = xp.unique(acc, return_inverse=True)
            acc = acc.reshape(-1).astype(xp.int64)
            space = int(uniq.shape[0])
        acc = acc * int(k) + c
        space *= int(k)
    return acc


def pack_limit_ok(n: int, N: int) -> int | None:
    """Bits to shift F by when f and F can share one float64 weight exactly, else None."""
    b = max(1, int(n).bit_length())
    return b if N * (1 << b) + n < 2**53 else None


@dataclass
class _Child:
    """A coarse table being built: its keys, their (mapped) codes in the fine table, its space."""

    keys: tuple
    sub_codes: list
    cards: list
    cats: list
    maps: dict

    @property
    def space(self) -> int:
        return math.prod(self.cards)

    @property
    def radix(self) -> bool:
        return self.space <= INT64_LIMIT

    def dense(self, m_cells: int) -> bool:
        s = self.space
        return self.radix and s <= DENSE_LIMIT and (s <= DENSE_MIN or s <= DENSE_FACTOR * m_cells)


def _child(table: FreqTable, keys, maps, codes) -> _Child:
    xp = table.xp
    keys = tuple(keys)
    idx = _key_index(table, keys)
    maps = dict(maps or {})
    unknown = [k for k in maps if k not in keys]
    if unknown:
        raise BadInput(f"recode for key(s) {', '.join(map(repr, unknown))} that are not in the table")
    sub_codes, cards, cats = [], [], []
    for k, i in zip(keys, idx):
        c = codes[i]
        m = maps.get(k)
        if m is not None:
            if len(m.lut) != table.cards[i]:
                raise BadInput(f"recode of {k!r} maps {len(m.lut)} categories but the table has "
                               f"{table.cards[i]}")
            c = xp.asarray(m.lut)[c]
            cards.append(len(m.categories))
            cats.append(list(m.categories))
        else:
            cards.append(table.cards[i])
            cats.append(table.categories[i])
        sub_codes.append(c)
    return _Child(keys, sub_codes, cards, cats, maps)


def regroup(table: FreqTable, keys: Sequence[str], maps: Mapping[str, CodeMap] | None = None,
            codes: list | None = None, return_inverse: bool = False, packed=None):
    """The table over ``keys`` (a subset of ``table.keys``, in this order), categories mapped by ``maps``.

    Sums f, F and w of the fine cells into the coarse cells. ``codes`` are the fine table's cell codes
    when already known (see :func:`cell_codes`). With ``return_inverse`` also returns, per fine cell,
    the index of its coarse cell.
    """
    xp = table.xp
    if codes is None:
        codes = cell_codes(table)
    ch = _child(table, keys, maps, codes)
    m_cells = int(table.cell_id.shape[0])
    sub = _radix(xp, ch.sub_codes, ch.cards) if ch.radix else _surrogate(xp, ch.sub_codes, ch.cards)
    dense = ch.dense(m_cells)
    if dense:
        target, length = sub, int(ch.space)
    else:
        order = xp.argsort(sub)
        s = sub[order]
        bound = s[1:] != s[:-1]
        starts = xp.concatenate([xp.zeros(1, dtype=bool), bound]) if m_cells else bound
        run = xp.cumsum(starts, dtype=xp.int64)
        inv = xp.empty(m_cells, dtype=xp.int64)
        inv[order] = run
        first = xp.flatnonzero(xp.concatenate([xp.ones(1, dtype=bool), bound])) if m_cells else run
        target, length = inv, int(first.shape[0])
    if packed is None:
        packed = pack_weights(table)
    acc = xp.bincount(target, weights=packed[0], minlength=length)
    acc2 = (xp.bincount(target, weights=packed[1], minlength=length)
            if packed[1] is not None else None)
    w_sum = (xp.bincount(target, weights=table.w, minlength=length)
             if table.w is not None else None)
    if dense:
        child, present = _finish_dense(table, ch, acc, acc2, w_sum, packed[2])
        if return_inverse:
            lut = xp.zeros(length, dtype=xp.int64)
            lut[present] = xp.arange(present.shape[0], dtype=xp.int64)
            inverse = lut[sub]
    else:
        stored = None
        cell_id = s[first].astype(xp.int64)
        if not ch.radix:
            rep = order[first]
            stored = [c[rep].astype(xp.int64) for c in ch.sub_codes]
        inverse = inv if return_inverse else None
        f_sum, F_sum = unpack_counts(xp, acc, acc2, packed[2], table.F is not None)
        child = FreqTable(ch.keys, ch.cats, cell_id, f_sum, F_sum, w_sum, ch.radix, xp, stored, None,
                          table.backend)
        if table.record_locator is not None:
            child.record_locator = _locator(table, ch.keys, ch.maps)
    return (child, inverse) if return_inverse else child


def _finish_dense(table, ch: _Child, acc, acc2, w_sum, bits):
    """The child table from dense accumulators (indexed by mixed-radix id); also the present ids."""
    xp = table.xp
    present = xp.flatnonzero(acc != 0)
    cell_id = present.astype(xp.int64, copy=False)
    acc = acc[present]
    acc2 = acc2[present] if acc2 is not None else None
    w_sum = w_sum[present] if w_sum is not None else None
    f_sum, F_sum = unpack_counts(xp, acc, acc2, bits, table.F is not None)
    child = FreqTable(ch.keys, ch.cats, cell_id, f_sum, F_sum, w_sum, True, xp, None, None,
                      table.backend)
    if bits is not None:
        child.__dict__["_gpurisk_packed"] = (acc, None, bits)   # its own packed weights, for free
    if table.record_locator is not None:
        child.record_locator = _locator(table, ch.keys, ch.maps)
    return child, present


def regroup_many(table: FreqTable, keys_list: Sequence[Sequence[str]], codes: list | None = None,
                 packed=None) -> list[FreqTable]:
    """Several coarser tables of one table in a single pass over its cells.

    The fine table is read chunk by chunk; each chunk's codes and weights stay in cache while every
    child's ids are formed and added into its accumulator (``np.add.at``, in cell order, so the sums
    are bit-identical to :func:`regroup`'s). Children that need sorting, and non-numpy tables, fall
    back to :func:`regroup`.
    """
    xp = table.xp
    if codes is None:
        codes = cell_codes(table)
    if packed is None:
        packed = pack_weights(table)
    m_cells = int(table.cell_id.shape[0])
    children = [_child(table, k, None, codes) for k in keys_list]
    fused = [i for i, ch in enumerate(children) if xp is np and ch.dense(m_cells)]
    out: list = [None] * len(children)
    if len(fused) > 1:
        accs = {i: [np.zeros(children[i].space), None, None] for i in fused}
        for i in fused:
            if packed[1] is not None:
                accs[i][1] = np.zeros(children[i].space)
            if table.w is not None:
                accs[i][2] = np.zeros(children[i].space)
        # children in key order, so that ids of a shared leading-key prefix are formed once per chunk
        fused.sort(key=lambda i: children[i].keys)
        dt = np.int32 if max(children[i].space for i in fused) <= 2**31 else np.int64
        for start in range(0, m_cells, CHUNK):
            sl = slice(start, start + CHUNK)
            w0 = packed[0][sl]
            w1 = packed[1][sl] if packed[1] is not None else None
            ww = table.w[sl] if table.w is not None else None
            prefix: dict[tuple, np.ndarray] = {}
            for i in fused:
                ch = children[i]
                j = len(ch.keys)
                while j and ch.keys[:j] not in prefix:
                    j -= 1
                ids = prefix[ch.keys[:j]] if j else None
                for t in range(j, len(ch.keys)):
                    c = ch.sub_codes[t][sl]
                    ids = c.astype(dt) if ids is None else ids * dt(ch.cards[t]) + c
                    prefix[ch.keys[:t + 1]] = ids
                a = accs[i]
                np.add.at(a[0], ids, w0)
                if w1 is not None:
                    np.add.at(a[1], ids, w1)
                if ww is not None:
                    np.add.at(a[2], ids, ww)
        for i in fused:
            a = accs.pop(i)
            out[i] = _finish_dense(table, children[i], a[0], a[1], a[2], packed[2])[0]
    for i, ch in enumerate(children):
        if out[i] is None:
            out[i] = regroup(table, ch.keys, codes=codes, packed=packed)
    return out


def pack_weights(table: FreqTable):
    """(weights, second weights or None, bits) to sum f and F with one or two ``bincount`` calls.

    With a population, f and F share one float64 weight ``F * 2**bits + f`` whenever every sum stays
    an exact integer below 2**53; the accumulator is then non-zero exactly on the cells with F > 0.
    """
    xp = table.xp
    if table.F is None:
        return table.f, None, None
    if "_gpurisk_packed" in table.__dict__:
        return table.__dict__["_gpurisk_packed"]
    bits = pack_limit_ok(int(table.f.sum()), int(table.F.sum()))
    if bits is None:
        return table.F, table.f, None
    return table.F.astype(xp.float64) * float(1 << bits) + table.f, None, bits


def unpack_counts(xp, acc, acc2, bits, has_F):
    """Inverse of :func:`pack_weights` on the summed accumulators: (f, F) as int64."""
    tot = acc.astype(xp.int64)      # exact: the sums are integers below 2**53
    if not has_F:
        return tot, None
    if bits is None:
        return acc2.astype(xp.int64), tot
    return tot & ((1 << bits) - 1), tot >> bits


def _locator(parent: FreqTable, keys, maps):
    def locate():
        _, inv = regroup(parent, keys, maps, return_inverse=True)
        return inv[parent.record_cell()]
    return locate


def rollup(table: FreqTable, keys: Sequence[str]) -> FreqTable:
    """The table over a subset of ``table.keys`` (in the given order), summed from ``table``."""
    return regroup(table, keys)


# --------------------------------------------------------------------------------------------
# planning a family of subsets


def _mask(idx: Iterable[int]) -> int:
    m = 0
    for i in idx:
        m |= 1 << i
    return m


def _bits(mask: int) -> list[int]:
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


@dataclass
class Plan:
    """Which tables to build, in which order, each from which parent (all by root-key bitmasks)."""

    order: list[int]                      # masks, parents before children
    parent: dict[int, int]                # mask -> parent mask (root: absent)
    targets: list[int]                    # the wanted masks, in the caller's order
    estimate: dict[int, float] = field(default_factory=dict)
    intermediates: list[int] = field(default_factory=list)

    def needed(self, wanted: Iterable[int]) -> set[int]:
        """The masks to build to obtain ``wanted``: themselves and their chains of parents."""
        need: set[int] = set()
        for m in wanted:
            while m in self.parent and m not in need:
                need.add(m)
                m = self.parent[m]
        return need


class Lattice:
    """Tables for many key subsets of one finest ``root`` table, each summed from a small parent.

    ``tables(targets)`` yields ``(i, table)`` for every target key tuple (in an order where parents
    come first), keeping a table only while a later one will be summed from it.
    """

    #: roots with fewer cells than this are planned without intermediates (everything is cheap)
    PLAN_MIN_CELLS = 1 << 17
    #: cells sampled from the root to estimate the size of a subset's table
    SAMPLE = 1 << 12
    #: a roll-up's fixed cost, in cells, charged when weighing an intermediate table
    OVERHEAD = 1 << 14
    #: per id-space element (allocating and scanning a dense accumulator), relative to a fine cell
    SPACE_COST = 0.5
    #: per cell and key of a table decoded to serve as a parent, relative to a fine cell
    DECODE_COST = 0.2
    #: a roll-up that must sort reads each fine cell this many times more slowly than a bincount
    SORT_PENALTY = 8.0
    #: at most this many candidate intermediates are weighed
    MAX_CANDIDATES = 400
    #: families with more tables than this are planned without intermediates, parents found locally
    MAX_PLANNED = 3000

    def __init__(self, root: FreqTable, codes: list | None = None):
        self.root = root
        self.keys = tuple(root.keys)
        self.full = (1 << len(self.keys)) - 1
        self._root_codes = codes
        self._sample_codes = None
        self.built = 0        # roll-ups done by the last tables() call
        self.cells_read = 0   # fine cells read by them

    # --- helpers -------------------------------------------------------------------------------
    @property
    def root_codes(self) -> list:
        if self._root_codes is None:
            self._root_codes = cell_codes(self.root)
        return self._root_codes

    def mask_of(self, keys: Sequence[str]) -> int:
        return _mask(_key_index(self.root, keys))

    @property
    def root_cells(self) -> int:
        return int(self.root.cell_id.shape[0])

    def _space(self, mask: int) -> int:
        return math.prod(self.root.cards[i] for i in _bits(mask))

    def estimate(self, mask: int) -> float:
        """Estimated number of cells of the table over ``mask``, from a sample of the root's cells.

        With q the sampled fraction, d the distinct sub-ids seen and f_i how many were seen i times:
        Shlosser's estimator d + f1 Σ(1-q)^i f_i / Σ i q (1-q)^(i-1) f_i errs high and the GEE
        estimator sqrt(1/q) f1 + (d - f1) errs low when most sampled sub-ids are distinct; their
        geometric mean, bounded by the root's cells and the subset's id space, came within a factor
        of 2.7 of the truth for 90 % of the subsets with over 10^5 possible cells of the skewed 8-key
        register of bench/bench_scan.py (GEE alone: a factor of 16).
        """
        m = self.root_cells
        if mask == self.full:
            return float(m)
        bound = float(min(m, self._space(mask)))
        if self._sample_codes is None:
            rng = np.random.default_rng(0)
            take = min(m, self.SAMPLE)
            pick = np.sort(rng.choice(m, size=take, replace=False)) if take < m else np.arange(m)
            xp = self.root.xp
            pick_x = xp.asarray(pick)
            self._sample_codes = [np.asarray(_np(c[pick_x])).astype(np.int64) for c in self.root_codes]
        idx = _bits(mask)
        cards = [self.root.cards[i] for i in idx]
        codes = [self._sample_codes[i] for i in idx]
        sub = _radix(np, codes, cards) if self._space(mask) <= INT64_LIMIT else _surrogate(np, codes, cards)
        _, cnt = np.unique(sub, return_counts=True)
        d = cnt.size
        s = codes[0].size
        if s >= m:
            return float(d)
        q = s / m
        fr = np.bincount(cnt).astype(np.float64)
        f1 = fr[1] if fr.size > 1 else 0.0
        i = np.arange(fr.size)
        num = float(np.sum((1.0 - q) ** i * fr))
        den = float(np.sum(i * q * (1.0 - q) ** np.maximum(i - 1, 0) * fr))
        shlosser = min(bound, d + f1 * num / den) if den > 0 else d
        gee = min(bound, math.sqrt(1.0 / q) * f1 + (d - f1))
        return float(min(bound, max(d, math.sqrt(max(d, shlosser) * max(d, gee)))))

    # --- planning ------------------------------------------------------------------------------
    def plan(self, targets: Sequence[Sequence[str]]) -> Plan:
        masks = [self.mask_of(t) for t in targets]
        uniq = list(dict.fromkeys(masks))
        big = self.root_cells >= self.PLAN_MIN_CELLS
        est: dict[int, float] = {self.full: float(self.root_cells)}
        for m in uniq:
            if m not in est:
                est[m] = self.estimate(m) if big else float(min(self.root_cells, self._space(m)))
        chosen: list[int] = []
        if big and len(uniq) <= self.MAX_PLANNED:
            chosen = self._choose_intermediates(uniq, est)
        nodes = [m for m in dict.fromkeys(uniq + chosen) if m != self.full]
        parent = self._parents(nodes, est)
        order = sorted(nodes, key=lambda m: (-bin(m).count("1"), m))
        return Plan(order, parent, masks, est, chosen)

    def _parents(self, nodes: list[int], est: dict[int, float]) -> dict[int, int]:
        """Each node's parent: the strict superset among the nodes (or the root) with fewest cells."""
        if not nodes:
            return {}
        if len(nodes) <= self.MAX_PLANNED:
            vm = np.array(nodes, dtype=np.uint64)
            ve = np.array([est[m] for m in nodes])
            sup = ((vm[:, None] & ~vm[None, :]) == 0) & (vm[:, None] != vm[None, :])
            e = np.where(sup, ve[None, :], np.inf)
            j = np.argmin(e, axis=1)
            best = e[np.arange(len(nodes)), j]
            return {m: (nodes[int(jj)] if b < est[self.full] else self.full)
                    for m, jj, b in zip(nodes, j, best)}
        # many nodes: look only at supersets with one or two more keys
        have = set(nodes)
        n = len(self.keys)
        out = {}
        for m in nodes:
            best, be = self.full, est[self.full]
            free = [i for i in range(n) if not m >> i & 1]
            for a, i in enumerate(free):
                for c in [m | 1 << i] + [m | 1 << i | 1 << j for j in free[a + 1:]]:
                    if c in have and est[c] < be:
                        best, be = c, est[c]
            out[m] = best
        return out

    def _choose_intermediates(self, targets: list[int], est: dict[int, float]) -> list[int]:
        """Greedy choice of extra tables that lower the total cells read (HRU-style benefit)."""
        tset = set(targets) | {self.full}
        cands: dict[int, int] = {}
        n = len(self.keys)
        pairs = len(targets) * n * n <= 200_000
        for t in targets:
            free = [i for i in range(n) if not t >> i & 1]
            for a, i in enumerate(free):
                c = t | 1 << i
                if c not in tset:
                    cands[c] = cands.get(c, 0) + 1
                for j in (free[a + 1:] if pairs else ()):
                    c2 = c | 1 << j
                    if c2 not in tset:
                        cands[c2] = cands.get(c2, 0) + 1
        if not cands:
            return []
        cand = sorted(cands, key=lambda c: (-cands[c], c))[: self.MAX_CANDIDATES]
        for c in cand:
            if c not in est:
                est[c] = self.estimate(c)
        V = [v for v in targets if v != self.full]
        vm = np.array(V, dtype=np.uint64)
        cm = np.array(cand, dtype=np.uint64)
        ve = np.array([est[v] for v in V])
        ce = np.array([est[c] for c in cand])
        vpen = np.array([self._penalty(v) for v in V])
        cpen = np.array([self._penalty(c) for c in cand])
        root = float(self.root_cells)

        def smallest_superset(masks):
            sup = ((masks[:, None] & ~vm[None, :]) == 0) & (masks[:, None] != vm[None, :])
            return np.minimum(np.where(sup, ve[None, :], np.inf).min(axis=1, initial=np.inf), root)

        vcost = vpen * smallest_superset(vm)    # cells read to build each target, as things stand
        # a candidate costs the cells read to build it, a pass over its id space, and decoding its
        # cells when it serves as a parent
        fixed = np.array([self.SPACE_COST * min(self._space(c), DENSE_LIMIT)
                          + self.DECODE_COST * est[c] * bin(c).count("1") for c in cand])
        ccost = cpen * smallest_superset(cm)
        # sub[i, j]: node j is a strict subset of candidate i (nodes: targets, then chosen ones)
        sub = ((vm[None, :] & ~cm[:, None]) == 0) & (vm[None, :] != cm[:, None])
        npen = vpen.copy()
        alive = np.ones(len(cand), dtype=bool)
        chosen = []
        while alive.any():
            gain = (sub * np.maximum(0.0, vcost[None, :] - npen[None, :] * ce[:, None])).sum(axis=1)
            benefit = np.where(alive, gain - ccost - fixed - self.OVERHEAD, -np.inf)
            i = int(np.argmax(benefit))
            if benefit[i] <= 0:
                break
            chosen.append(int(cand[i]))
            alive[i] = False
            vcost = np.where(sub[i], np.minimum(vcost, npen * ce[i]), vcost)
            below = ((cm & ~cm[i]) == 0) & (cm != cm[i])
            ccost = np.where(below, np.minimum(ccost, cpen * ce[i]), ccost)
            sub = np.concatenate([sub, ((cm[i] & ~cm) == 0)[:, None] & (cm != cm[i])[:, None]], axis=1)
            vcost = np.append(vcost, ccost[i])
            npen = np.append(npen, cpen[i])
        return chosen

    def _penalty(self, mask: int) -> float:
        """Relative cost per fine cell of building a table: sorting costs more than a bincount."""
        space = self._space(mask)
        return 1.0 if space <= DENSE_LIMIT else self.SORT_PENALTY

    # --- running -------------------------------------------------------------------------------
    def tables(self, targets: Sequence[Sequence[str]], skip: Iterable[int] = (),
               plan: Plan | None = None) -> Iterator[tuple[int, FreqTable]]:
        """Yield ``(i, table)`` for every target ``i`` not in ``skip``; parents before children.

        The table of target i has the keys of ``targets[i]`` in the root's order (measures do not
        depend on the order of keys; use :func:`rollup` for another order). The chain of roll-ups
        behind a target never depends on ``skip`` (the plan is fixed by the targets), so every table
        comes out bit-identical whichever targets are skipped.
        """
        targets = [tuple(t) for t in targets]
        plan = plan or self.plan(targets)
        skip = set(skip)
        by_mask: dict[int, list[int]] = {}
        for i, m in enumerate(plan.targets):
            if i not in skip:
                by_mask.setdefault(m, []).append(i)
        need = plan.needed(by_mask)
        cache: dict[int, list] = {self.full: [self.root, self._root_codes, None]}
        self.built = 0
        self.cells_read = 0
        for i in by_mask.get(self.full, []):
            yield i, self.root
        kids: dict[int, list[int]] = {}
        for m in plan.order:
            if m in need:
                kids.setdefault(plan.parent[m], []).append(m)
        ready: dict[int, FreqTable] = {}
        for m in plan.order:
            if m not in need:
                continue
            p = plan.parent[m]
            if m not in ready:
                # build every remaining child of this parent in one pass over its cells
                node = cache[p]
                ptab = node[0]
                if node[1] is None:
                    node[1] = cell_codes(ptab)
                    if p == self.full:
                        self._root_codes = node[1]
                if node[2] is None:
                    node[2] = pack_weights(ptab)
                todo = [c for c in kids[p] if c not in ready]
                tabs = regroup_many(ptab, [tuple(self.keys[j] for j in _bits(c)) for c in todo],
                                    codes=node[1], packed=node[2])
                ready.update(zip(todo, tabs))
                self.built += len(todo)
                self.cells_read += int(ptab.cell_id.shape[0])
                kids[p] = []
                if p != self.full:
                    del cache[p]
            tab = ready.pop(m)
            if kids.get(m):
                cache[m] = [tab, None, None]
            for i in by_mask.get(m, []):
                yield i, tab


def _np(a):
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else a
