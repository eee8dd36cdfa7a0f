"""Roll a :class:`FreqTable` up the lattice of key subsets, and regroup categories, by summing counts.

A table over keys (a, b, c, d) holds everything needed for the table over any subset, say (b, d):
each fine cell belongs to exactly one coarse cell, whose mixed-radix id is computed from the fine
cell's codes, and f, F and w are summed per coarse cell. The same pass can map categories through a
lookup table (a recode: 111 single years of age -> 20 five-year bands), so a recode never touches the
records either. The cost is proportional to the fine table's cells, never to the records.

Two ways to sum a table's cells, both vectorised and written against ``table.xp`` (numpy or cupy):

- dense: when the coarse id space is small, ``bincount`` over the coarse ids (one pass; f and F are
  packed into one float64 weight ``F * 2**b + f`` when the totals allow it exactly, so one
  ``bincount`` sums both);
- sorted: otherwise, sort the coarse ids, mark run starts, give each fine cell its run's index, and
  ``bincount`` over those indices.

When the coarse key space overflows int64 the ids are surrogate (dense ranks, densified left to right
exactly as :func:`gpurisk.freq.cellid.surrogate_ids` does, so the cells come out in the same order as a
recount) and the coarse table keeps each cell's codes.

:class:`Lattice` plans a whole family of subsets. A table whose id space is small enough is kept as a
**cube**: the dense array of its sums, one axis per key (Zhao, Deshpande & Naughton 1997, array-based
aggregation). Any subset of a cube is an axis sum over it (:func:`sum_axes`), at a cost per cube
element rather than per fine cell, with no decoding of cell ids; a handful of large cubes is summed
from the finest table's cells and everything else inside them from cubes. Tables too large to be
cubes are summed from sparse tables as above. Each table comes from the built table cheapest to read
that contains it, with intermediate tables added where that lowers the total (cubes' costs are exact;
sparse tables' sizes are estimated from a sample of the finest table's cells). The roll-ups can run
in a pool of threads ahead of the caller (:meth:`Lattice.tables`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.xp import namespace, to_host
from gpurisk.freq.cellid import INT64_LIMIT, decode_radix, mixed_radix_ids, smallest_id_dtype, surrogate_ids
from gpurisk.freq.table import FreqTable

#: coarse id spaces up to this many cells are summed into a dense accumulator ...
DENSE_LIMIT = 1 << 24
#: ... provided the space is at most this many times the fine table's cells (or below DENSE_MIN)
DENSE_FACTOR = 32
DENSE_MIN = 1 << 16
#: tables whose id space has at most this many cells are kept as dense arrays of sums ("cubes"):
#: every coarser table of a cube is an axis sum over it, at a cost per cell of the space, not per
#: cell of the parent (Zhao, Deshpande & Naughton 1997, array-based aggregation) ...
CUBE_LIMIT = 1 << 23
#: ... provided the space is at most this many times the root's cells (or below DENSE_MIN)
CUBE_FACTOR = 32
#: cells per chunk when forming mixed-radix ids of many keys (keeps the running ids in cache)
RADIX_CHUNK = 1 << 16
#: cells per chunk when decoding cell ids (keeps the working set in cache)
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
    """Mixed-radix ids of the code tuples in the smallest integer type that holds them
    (:func:`gpurisk.freq.cellid.mixed_radix_ids`, chunked on numpy)."""
    return mixed_radix_ids(codes, cards, xp, dtype=smallest_id_dtype(cards, xp), chunk=RADIX_CHUNK)


def _surrogate(xp, codes, cards):
    """Order-preserving ids of the code tuples, densified when the next key would overflow
    (:func:`gpurisk.freq.cellid.surrogate_ids`)."""
    return surrogate_ids([list(codes)], cards, xp, dense=False)[0]


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
        child = FreqTable(ch.keys, ch.cats, cell_id, f_sum, F_sum, w_sum, ch.radix, xp, stored,
                          _child_locator(table, ch), table.backend, known=_totals(table))
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
    # its own weights for pack_weights come for free
    known = dict(_totals(table), packed=(acc, acc2, bits))
    child = FreqTable(ch.keys, ch.cats, cell_id, f_sum, F_sum, w_sum, True, xp, None,
                      _child_locator(table, ch), table.backend, known=known)
    return child, present


def _cube_from_cells(table: FreqTable, keys, codes, packed) -> tuple:
    """The dense sums (packed weights, second weights, w) of ``table`` over ``keys``, shaped by cards."""
    xp = table.xp
    ch = _child(table, keys, None, codes)
    ids = _radix(xp, ch.sub_codes, ch.cards)
    space = int(ch.space)
    shape = tuple(int(k) for k in ch.cards)
    acc = xp.bincount(ids, weights=packed[0], minlength=space).reshape(shape)
    acc2 = (xp.bincount(ids, weights=packed[1], minlength=space).reshape(shape)
            if packed[1] is not None else None)
    w = (xp.bincount(ids, weights=table.w, minlength=space).reshape(shape)
         if table.w is not None else None)
    return acc, acc2, w


def sum_axes(x, axes: tuple):
    """``x.sum(axis=axes)`` for a C-contiguous cube, up to four times faster where it matters.

    Adjacent axes that are both summed (or both kept) are merged, then the summed blocks are
    removed one at a time, the largest first, each by one ``einsum`` (numpy's reduction over a
    short inner axis runs several times slower than einsum's summing loops). The sums are of
    integers below 2**53 in float64 (see :func:`pack_weights`), hence exact in any order; design
    weights' sums may differ from another order's in the last bits.
    """
    if not axes:
        return x
    xp = namespace(x)
    out_shape = tuple(int(n) for a, n in enumerate(x.shape) if a not in axes)
    blocks: list[list] = []                       # [size, summed]
    for a, n in enumerate(x.shape):
        red = a in axes
        if blocks and blocks[-1][1] == red:
            blocks[-1][0] *= int(n)
        else:
            blocks.append([int(n), red])
    y = x
    while any(b[1] for b in blocks):
        j = max((b[0], -i) for i, b in enumerate(blocks) if b[1])
        j = -j[1]
        y = y.reshape(tuple(b[0] for b in blocks))
        sub = _LETTERS[:len(blocks)]
        y = xp.einsum(f"{sub}->{sub[:j] + sub[j + 1:]}", y)
        del blocks[j]
        if 0 < j < len(blocks) and not blocks[j - 1][1] and not blocks[j][1]:
            blocks[j - 1][0] *= blocks[j][0]
            del blocks[j]
    return y.reshape(out_shape)


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _table_from_cube(root: FreqTable, keys, arrays, bits) -> FreqTable:
    """The FreqTable of a cube (its non-empty cells, in id order), its records located via ``root``."""
    idx = _key_index(root, keys)
    ch = _Child(tuple(keys), [], [root.cards[i] for i in idx], [root.categories[i] for i in idx], {})
    flat = [None if a is None else a.reshape(-1) for a in arrays]
    return _finish_dense(root, ch, flat[0], flat[1], flat[2], bits)[0]


def _totals(parent: FreqTable) -> dict:
    """A roll-up keeps n and N: the parent's (when known), for the child's cache, instead of summing
    again."""
    return {k: parent._memo[k] for k in ("n", "N") if k in parent._memo}


def _child_locator(table: FreqTable, ch):
    """The child's record locator (through the parent's), or None when the parent keeps none."""
    return None if table.record_locator is None else _locator(table, ch.keys, ch.maps)


def pack_weights(table: FreqTable):
    """(weights, second weights or None, bits) to sum f and F with one or two ``bincount`` calls.

    With a population, f and F share one float64 weight ``F * 2**bits + f`` whenever every sum stays
    an exact integer below 2**53; the accumulator is then non-zero exactly on the cells with F > 0.
    Without a population the weights are f as float64 (``bincount`` would convert them on every
    call). Kept on the table.
    """
    return table.cached("packed", lambda: _pack_weights(table))


def _pack_weights(table: FreqTable):
    xp = table.xp
    if table.F is None:
        packed = (table.f.astype(xp.float64), None, None)
    else:
        bits = pack_limit_ok(table.n, table.N)
        if bits is None:
            packed = (table.F.astype(xp.float64), table.f.astype(xp.float64), None)
        else:
            w = table.F.astype(xp.float64)
            w *= float(1 << bits)
            w += table.f
            packed = (w, None, bits)
    return packed


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
    estimate: dict[int, float] = field(default_factory=dict)   # estimated cells (sparse nodes)
    intermediates: list[int] = field(default_factory=list)
    cube: frozenset = frozenset()          # masks summed as dense arrays (see Lattice)

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
    #: reading one cell of a sparse table (ids + ``bincount``), in units of one cube element summed
    CELL_COST = 12.0
    #: a roll-up's fixed cost (Python and numpy call overhead), in the same units
    OVERHEAD = 100_000.0
    #: per id-space element of a table built (allocating, zeroing and scanning its sums)
    SPACE_COST = 2.0
    #: per cell and key of a sparse table decoded to serve as a parent
    DECODE_COST = 2.0
    #: a roll-up that must sort reads each fine cell this many times more slowly than a bincount
    SORT_PENALTY = 8.0
    #: at most this many candidate intermediates are weighed
    MAX_CANDIDATES = 400
    #: the root's children are built this many at a time (side by side in a pool), each group then
    #: followed by the tables below it: bounds the large tables kept at once
    ROOT_GROUP = 4
    #: families with more tables than this are planned without intermediates, parents found locally
    MAX_PLANNED = 3000

    def __init__(self, root: FreqTable, codes: list | None = None):
        self.root = root
        self.keys = tuple(root.keys)
        self.cards = tuple(root.cards)
        self.full = (1 << len(self.keys)) - 1
        self._root_codes = codes
        self._sample_codes = None
        self.built = 0        # roll-ups done by the last tables() call
        self._reads: list[int] = []   # the cells each of them read (from sparse tables)
        self._summed: list[int] = []  # the cube elements each of them summed (from cubes)

    # --- helpers -------------------------------------------------------------------------------
    def _codes_at(self, pick: np.ndarray) -> list[np.ndarray]:
        """The root's codes of the cells at ``pick`` (numpy int64), without decoding every cell."""
        root = self.root
        pick_x = root.xp.asarray(pick)
        if self._root_codes is not None:
            return [to_host(c[pick_x]).astype(np.int64) for c in self._root_codes]
        if root.stored_cell_codes is not None:
            return [to_host(c[pick_x]).astype(np.int64) for c in root.stored_cell_codes]
        ids = to_host(root.cell_id[pick_x]).astype(np.int64)
        return [c.astype(np.int64) for c in decode_radix(ids, self.cards)]

    def mask_of(self, keys: Sequence[str]) -> int:
        return _mask(_key_index(self.root, keys))

    @property
    def root_cells(self) -> int:
        return int(self.root.cell_id.shape[0])

    def _space(self, mask: int) -> int:
        return math.prod(self.cards[i] for i in _bits(mask))

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
            self._sample_codes = self._codes_at(pick)
        idx = _bits(mask)
        cards = [self.cards[i] for i in idx]
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
    def is_cube(self, mask: int) -> bool:
        """Whether the table over ``mask`` is kept as a dense array of sums (a cube).

        Its id space must be at most :data:`CUBE_LIMIT` and, unless tiny, at most
        :data:`CUBE_FACTOR` times the root's cells (else allocating and scanning it costs more than
        the cells it sums). Every subset of a cube is a cube.
        """
        if mask == self.full:
            return False
        s = self._space(mask)
        return s <= CUBE_LIMIT and (s <= DENSE_MIN or s <= CUBE_FACTOR * self.root_cells)

    def _cost(self, mask: int, est: dict[int, float], cost: dict[int, float], big: bool) -> float:
        """Cost of reading the table over ``mask`` once to build a child (units: one cube element).

        A cube's child is an axis sum over its elements (1 each); a sparse table's child is a
        ``bincount`` over its cells (:attr:`CELL_COST` each), their number estimated from a sample.
        """
        if mask not in cost:
            if self.is_cube(mask):
                cost[mask] = float(self._space(mask))
            else:
                if mask not in est:
                    est[mask] = (self.estimate(mask) if big
                                 else float(min(self.root_cells, self._space(mask))))
                cost[mask] = self.CELL_COST * est[mask]
        return cost[mask]

    def plan(self, targets: Sequence[Sequence[str]]) -> Plan:
        masks = [self.mask_of(t) for t in targets]
        uniq = list(dict.fromkeys(masks))
        big = self.root_cells >= self.PLAN_MIN_CELLS
        est: dict[int, float] = {self.full: float(self.root_cells)}
        cost: dict[int, float] = {self.full: self.CELL_COST * self.root_cells}
        for m in uniq:
            self._cost(m, est, cost, big)
        chosen: list[int] = []
        if len(uniq) <= self.MAX_PLANNED and (big or any(self.is_cube(m) for m in uniq)):
            chosen = self._choose_intermediates(uniq, est, cost, big)
        nodes = [m for m in dict.fromkeys(uniq + chosen) if m != self.full]
        parent = self._parents(nodes, cost)
        # the root's children in groups of ROOT_GROUP (larger first: the costliest roll-ups,
        # independent of each other, so a pool builds a group side by side), each group followed by
        # its subtrees depth first: a table is dropped once its subtree is built, so at most one group
        # and one chain of ancestors below it are kept at a time
        kids: dict[int, list[int]] = {}
        for m in nodes:
            kids.setdefault(parent[m], []).append(m)
        size_first = lambda m: (-bin(m).count("1"), m)   # noqa: E731
        top = sorted(kids.get(self.full, []), key=size_first)
        order: list[int] = []
        for g in range(0, len(top), self.ROOT_GROUP):
            group = top[g:g + self.ROOT_GROUP]
            order += group
            for t in group:
                stack = sorted(kids.get(t, []), key=size_first)[::-1]
                while stack:
                    node = stack.pop()
                    order.append(node)
                    stack.extend(sorted(kids.get(node, []), key=size_first)[::-1])
        return Plan(order, parent, masks, est, chosen, frozenset(m for m in nodes if self.is_cube(m)))

    def _parents(self, nodes: list[int], cost: dict[int, float]) -> dict[int, int]:
        """Each node's parent: the strict superset among the nodes (or the root) cheapest to read."""
        if not nodes:
            return {}
        root_cost = cost[self.full]
        if len(nodes) <= self.MAX_PLANNED:
            vm = np.array(nodes, dtype=np.uint64)
            ve = np.array([cost[m] for m in nodes])
            sup = ((vm[:, None] & ~vm[None, :]) == 0) & (vm[:, None] != vm[None, :])
            e = np.where(sup, ve[None, :], np.inf)
            j = np.argmin(e, axis=1)
            best = e[np.arange(len(nodes)), j]
            return {m: (nodes[int(jj)] if b < root_cost else self.full)
                    for m, jj, b in zip(nodes, j, best)}
        # many nodes: look only at supersets with one or two more keys
        have = set(nodes)
        n = len(self.keys)
        out = {}
        for m in nodes:
            best, be = self.full, root_cost
            free = [i for i in range(n) if not m >> i & 1]
            for a, i in enumerate(free):
                for c in [m | 1 << i] + [m | 1 << i | 1 << j for j in free[a + 1:]]:
                    if c in have and cost[c] < be:
                        best, be = c, cost[c]
            out[m] = best
        return out

    def _grow_cube(self, mask: int) -> int:
        """``mask`` with keys added, smallest cardinality first, while it stays a cube."""
        for i in sorted(range(len(self.keys)), key=lambda i: (self.cards[i], i)):
            if not mask >> i & 1 and self.is_cube(mask | 1 << i):
                mask |= 1 << i
        return mask

    def _choose_intermediates(self, targets: list[int], est: dict[int, float],
                              cost: dict[int, float], big: bool) -> list[int]:
        """Greedy choice of extra tables that lower the total cost of the roll-ups (HRU-style benefit).

        Candidates: each target with one or two more keys, and each cube target grown to the largest
        cube containing it (one pass over the root's cells then serves every target inside it).
        """
        tset = set(targets) | {self.full}
        cands: dict[int, int] = {}
        n = len(self.keys)
        pairs = len(targets) * n * n <= 200_000
        for t in targets:
            free = [i for i in range(n) if not t >> i & 1]
            for a, i in enumerate(free):
                c = t | 1 << i
                if c not in tset and (big or self.is_cube(c)):
                    cands[c] = cands.get(c, 0) + 1
                for j in (free[a + 1:] if pairs else ()):
                    c2 = c | 1 << j
                    if c2 not in tset and (big or self.is_cube(c2)):
                        cands[c2] = cands.get(c2, 0) + 1
        grown: dict[int, int] = {}
        for t in targets:
            if self.is_cube(t):
                g = self._grow_cube(t)
                if g not in tset:
                    grown[g] = grown.get(g, 0) + 1
        if not cands and not grown:
            return []
        cand = sorted(grown, key=lambda c: (-grown[c], c))[: self.MAX_CANDIDATES // 4]
        cand += [c for c in sorted(cands, key=lambda c: (-cands[c], c))
                 if c not in grown][: self.MAX_CANDIDATES - len(cand)]
        for c in cand:
            self._cost(c, est, cost, big)
        V = [v for v in targets if v != self.full]
        vm = np.array(V, dtype=np.uint64)
        cm = np.array(cand, dtype=np.uint64)
        ve = np.array([cost[v] for v in V])
        ce = np.array([cost[c] for c in cand])
        vpen = np.array([self._penalty(v) for v in V])
        cpen = np.array([self._penalty(c) for c in cand])
        root = cost[self.full]

        def smallest_superset(masks):
            sup = ((masks[:, None] & ~vm[None, :]) == 0) & (masks[:, None] != vm[None, :])
            return np.minimum(np.where(sup, ve[None, :], np.inf).min(axis=1, initial=np.inf), root)

        vcost = vpen * smallest_superset(vm)    # cost of building each target, as things stand
        # a candidate costs building it, a pass over its id space (a cube's, or a dense
        # accumulator's), and decoding its cells when a sparse table serves as a parent
        fixed = np.array([self.SPACE_COST * min(self._space(c), DENSE_LIMIT)
                          + (0.0 if self.is_cube(c) else
                             self.DECODE_COST * est[c] * bin(c).count("1")) for c in cand])
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
        """Relative cost per parent cell of building a table: a sparse table that must sort costs more."""
        if self.is_cube(mask):
            return 1.0
        return 1.0 if self._space(mask) <= DENSE_LIMIT else self.SORT_PENALTY

    # --- running -------------------------------------------------------------------------------
    def tables(self, targets: Sequence[Sequence[str]], skip: Iterable[int] = (),
               plan: Plan | None = None, threads: int = 0,
               prepare: Callable[[FreqTable], Any] | None = None) -> Iterator[tuple[int, FreqTable]]:
        """Yield ``(i, table)`` for every target ``i`` not in ``skip``; parents before children.

        The table of target i has the keys of ``targets[i]`` in the root's order (measures do not
        depend on the order of keys; use :func:`rollup` for another order). The chain of roll-ups
        behind a target never depends on ``skip`` (the plan is fixed by the targets), so every table
        comes out bit-identical whichever targets are skipped.

        With ``threads >= 1`` (numpy tables) the roll-ups run in a pool of that many threads, up to
        ``2 * threads`` targets ahead of the one being yielded, while the caller works on the tables
        already yielded (numpy releases the GIL in its loops); ``threads=0`` builds each table in
        the calling thread when it is asked for. Tables come out in the same order and bit-identical
        whichever thread builds them. ``prepare(table)``, when given, runs on each target table
        where it is built (in the worker), e.g. to compute the summaries its measures will read.
        """
        targets = [tuple(t) for t in targets]
        root = self.root
        pool = None
        if int(threads) >= 1 and root.xp is np:
            from concurrent.futures import ThreadPoolExecutor
            pool = ThreadPoolExecutor(int(threads), thread_name_prefix="gpurisk-rollup")
        try:
            root_codes = self._root_codes
            # the root's codes are decoded and its weights packed side by side, while the plan is
            # made (the plan needs a sample of the codes only)
            codes_fut = _submit(pool, lambda: root_codes if root_codes is not None else cell_codes(root))
            packed_fut = _submit(pool, pack_weights, root)
            futs: dict[int, Any] = {self.full: _Later(lambda: (root, codes_fut.result(),
                                                               packed_fut.result(), None))}
            plan = plan or self.plan(targets)
            skip = set(skip)
            by_mask: dict[int, list[int]] = {}
            for i, m in enumerate(plan.targets):
                if i not in skip:
                    by_mask.setdefault(m, []).append(i)
            need = plan.needed(by_mask)
            order = [m for m in plan.order if m in need]
            kids_left: dict[int, int] = {}      # kids not yet submitted (main thread only)
            for m in order:
                kids_left[plan.parent[m]] = kids_left.get(plan.parent[m], 0) + 1
            parents = frozenset(kids_left)      # fixed: what the workers read
            self.built = 0
            self._reads = []
            self._summed = []
            if self.full in by_mask and prepare is not None:
                prepare(root)
            for i in by_mask.get(self.full, []):
                yield i, root
            if not order:
                return
            keys_of = {m: tuple(self.keys[j] for j in _bits(m)) for m in order}

            cubes = plan.cube

            def build(m, parent_fut):
                # a node is (table or None, codes, packed weights, cube arrays or None)
                ptab, pcodes, ppacked, parrays = parent_fut.result()
                p = plan.parent[m]
                if m in cubes:
                    if parrays is not None:           # an axis sum over the parent's cube
                        axes = tuple(a for a, i in enumerate(_bits(p)) if not m >> i & 1)
                        arrays = tuple(None if x is None else sum_axes(x, axes) for x in parrays)
                        self._summed.append(int(parrays[0].size))
                    else:                             # one bincount over the parent's cells
                        arrays = _cube_from_cells(ptab, keys_of[m], pcodes, ppacked)
                        self._reads.append(int(ptab.cell_id.shape[0]))     # list.append is atomic
                    bits = ppacked[2]
                    tab = None
                    if m in by_mask:
                        tab = _table_from_cube(root, keys_of[m], arrays, bits)
                        if prepare is not None:
                            prepare(tab)
                    return tab, None, (None, None, bits), (arrays if m in parents else None)
                self._reads.append(int(ptab.cell_id.shape[0]))
                tab = regroup(ptab, keys_of[m], codes=pcodes, packed=ppacked)
                if prepare is not None and m in by_mask:
                    prepare(tab)
                if m in parents:          # a parent: decode its cells here, in the worker
                    return tab, cell_codes(tab), pack_weights(tab), None
                return tab, None, None, None

            window = 2 * int(threads) if pool is not None else 0
            queue: list = []             # (target, future) submitted, not yet yielded, in plan order
            pos = 0
            while True:
                # submit in plan order until `window` targets are ahead of the one to yield next
                while pos < len(order) and len(queue) <= window:
                    m = order[pos]
                    pos += 1
                    p = plan.parent[m]
                    futs[m] = _submit(pool, build, m, futs[p])
                    self.built += 1
                    kids_left[p] -= 1
                    if not kids_left[p] and p != self.full:
                        del futs[p]          # the tasks still to run hold it while they need it
                    if m in by_mask:
                        queue.append((m, futs[m]))
                if not queue:
                    break
                m, fut = queue.pop(0)
                tab = fut.result()[0]
                del fut
                if not kids_left.get(m):
                    futs.pop(m, None)
                for i in by_mask[m]:
                    yield i, tab
                del tab
            if self._root_codes is None:
                self._root_codes = futs[self.full].result()[1]
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)

    @property
    def cells_read(self) -> int:
        """Cells of sparse tables read by the last :meth:`tables` call (parent cells, once per child)."""
        return int(sum(self._reads))

    @property
    def cube_elements(self) -> int:
        """Cube elements summed by the last :meth:`tables` call (parent cube size, once per child)."""
        return int(sum(self._summed))


class _Done:
    """A finished computation with the ``Future`` interface (the serial path of :meth:`Lattice.tables`)."""

    __slots__ = ("_value",)

    def __init__(self, value):
        self._value = value

    def result(self):
        return self._value

    def done(self) -> bool:
        return True


class _Later:
    """A value computed on first ``result()`` (thread-safe), from futures that may still be running."""

    def __init__(self, fn):
        import threading
        self._fn, self._lock, self._value = fn, threading.Lock(), None

    def result(self):
        with self._lock:
            if self._fn is not None:
                self._value, self._fn = self._fn(), None
        return self._value

    def done(self) -> bool:
        return self._fn is None


def _submit(pool, fn, *args):
    return pool.submit(fn, *args) if pool is not None else _Done(fn(*args))

