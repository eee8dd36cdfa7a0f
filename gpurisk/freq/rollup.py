"""Roll-up primitives: the table over a subset of a :class:`FreqTable`'s keys (or over regrouped
categories) summed from its cells, densely or by sorting, and cubes' axis sums. See
:mod:`gpurisk.freq.lattice` for the method; :mod:`gpurisk.freq.planner` plans a family of roll-ups."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.xp import namespace, readonly, to_host
from gpurisk.freq.cellid import INT64_LIMIT, decode_radix, mixed_radix_ids, smallest_id_dtype, surrogate_ids
from gpurisk.freq.table import FreqTable

#: coarse id spaces up to this many cells are summed into a dense accumulator ...
DENSE_LIMIT = 1 << 24
#: ... provided the space is at most this many times the fine table's cells (or below DENSE_MIN)
DENSE_FACTOR = 32
DENSE_MIN = 1 << 16
#: cells per chunk when forming mixed-radix ids of many keys (keeps the running ids in cache)
RADIX_CHUNK = 1 << 16
#: cells per chunk when decoding cell ids (keeps the working set in cache)
DECODE_CHUNK = 1 << 14
#: :func:`_decode` shares runs of ids among at most this many threads where there are at least
#: DECODE_PARALLEL ids
DECODE_THREADS = 4
DECODE_PARALLEL = 1 << 21


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
    return _decode(table.cell_id, cards, xp)


def _decode(ids, cards, xp) -> list:
    """Per key, the code in the mixed-radix ``ids`` (of ``cards``), as :func:`cell_codes` gives."""
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
    # runs of DECODE_CHUNK ids side by side on the CPUs (each run written by one thread, its own
    # buffers: the same codes)
    from gpurisk.freq.schedule import in_runs, usable_cpus
    runs = min(DECODE_THREADS, usable_cpus()) if m >= DECODE_PARALLEL else 1
    in_runs(lambda a, b: _decode_rows(ids, cards, ft, out, a, b), m, DECODE_CHUNK, runs,
            "gpurisk-decode")
    return out


def _decode_rows(ids, cards, ft, out, begin: int, end: int) -> None:
    """:func:`_decode` of the ids begin..end into ``out``, DECODE_CHUNK at a time."""
    ch = DECODE_CHUNK
    qbuf, rbuf = np.empty(ch, dtype=ft), np.empty(ch, dtype=ft)
    for start in range(begin, end, ch):
        stop = min(end, start + ch)
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


#: cache names (:meth:`FreqTable.cached`) of a table's cell codes and of each key's margin of f
CODES = "cell_codes"
MARGIN = "f_margin:"


def kept_codes(table: FreqTable, codes: list | None = None) -> tuple:
    """:func:`cell_codes` of ``table`` (or ``codes``, already decoded), kept in its cache: the
    lattice decodes a parent's cells to roll it up, and its measures read the same codes."""
    return table.cached(CODES, lambda: tuple(readonly(c) for c in
                                             (cell_codes(table) if codes is None else codes)))


def codes_at(table: FreqTable, rows) -> list:
    """Per key, the codes of the cells ``rows`` (an index in ``table.xp``) as host arrays: taken from
    the table's cached codes (:func:`kept_codes`: a lattice's parent) or stored codes, else decoded
    from those cells' ids alone (a table holding a population's cells may have many more)."""
    got = table._memo.get(CODES)
    if got is None:
        got = table.stored_cell_codes
    if got is not None:
        return [to_host(c[rows]) for c in got]
    return [to_host(c) for c in _decode(table.cell_id[rows], table.cards, table.xp)]


def known_margins(table: FreqTable) -> list | None:
    """:func:`f_margins` of ``table`` when its cache already holds every key's (a scan's roll-ups
    are handed them), else None: nothing is summed."""
    got = [table._memo.get(MARGIN + key) for key in table.keys]
    return None if any(g is None for g in got) else got


def f_margins(table: FreqTable, codes: Sequence | None = None) -> list:
    """Per key, Σ f_j over the cells of each category (float64 in ``table.xp``; sums of integers,
    exact below 2**53 records, so the same whatever cells they are summed from), kept in the
    table's cache under MARGIN + key. A roll-up hands its parent's margins to the child for the
    keys it keeps without a recode (see :func:`_totals`), so a scan sums them once, on the root."""
    xp, out, w, at = table.xp, [], None, None
    for v, key in enumerate(table.keys):
        got = table._memo.get(MARGIN + key)
        if got is None:
            if w is None:
                codes = kept_codes(table) if codes is None else codes
                # only the cells with f > 0 add to the sums: a register's sample cells (the
                # same integer sums, exact in any order)
                at = xp.flatnonzero(table.f)
                if 2 * int(at.shape[0]) > int(table.f.shape[0]):
                    at = None
                w = table.f.astype(xp.float64) if at is None else table.f[at].astype(xp.float64)
            got = table.cached(MARGIN + key, lambda: xp.bincount(
                codes[v] if at is None else codes[v][at], weights=w, minlength=int(table.cards[v])))
        out.append(got)
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
                          _child_locator(table, ch), table.backend, known=_totals(table, ch))
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
    known = dict(_totals(table, ch), packed=(acc, acc2, bits))
    child = FreqTable(ch.keys, ch.cats, cell_id, f_sum, F_sum, w_sum, True, xp, None,
                      _child_locator(table, ch), table.backend, known=known)
    return child, present


def _cube_from_cells(table: FreqTable, keys, codes, packed) -> tuple:
    """The dense sums (packed weights, second weights, w) of ``table`` over ``keys``, shaped by cards.

    On numpy (without design weights) the pass is :func:`_cube_pass`: int64 ids of cache-sized
    chunks of cells, each chunk counted into the cube as soon as it is formed."""
    xp = table.xp
    ch = _child(table, keys, None, codes)
    space = int(ch.space)
    shape = tuple(int(k) for k in ch.cards)
    if xp is np and table.w is None and packed[1] is None:
        return _cube_pass(table, ch, packed).reshape(shape), None, None
    ids = _radix(xp, ch.sub_codes, ch.cards)
    acc = xp.bincount(ids, weights=packed[0], minlength=space).reshape(shape)
    acc2 = (xp.bincount(ids, weights=packed[1], minlength=space).reshape(shape)
            if packed[1] is not None else None)
    w = (xp.bincount(ids, weights=table.w, minlength=space).reshape(shape)
         if table.w is not None else None)
    return acc, acc2, w


#: cells per chunk of :func:`_cube_pass` (at least; four times the cube's space when larger, so the
#: per-chunk sums cost little beside the chunk's cells)
CUBE_CHUNK = 1 << 16


def _common_weight(table: FreqTable, packed):
    """(c, exceptions, their weights - c) when most cells' packed weight is one value ``c`` (a
    register's finest cells: F = 1, f = 0; a sample's: f = 1), else None. Kept on the table.

    A cube is then ``c`` times a count of cells (``bincount`` without weights: no weights read, no
    float sums) plus a weighted sum over the few exceptions, the same integers as the weighted sum."""
    def make():
        w = packed[0]
        m = int(w.shape[0])
        if m == 0:
            return None
        bits = packed[2]
        c = float(1 << bits) if table.F is not None and bits is not None else 1.0
        exc = np.flatnonzero(w != c)
        if 4 * exc.shape[0] > m:
            return None
        return c, exc, w[exc] - c
    return table.cached("common_weight", make)


def _cube_pass(table: FreqTable, ch: "_Child", packed) -> np.ndarray:
    """The flat cube of packed weights over ``ch``'s keys (numpy): per chunk of cells, their
    mixed-radix ids (the narrowest type) are formed in a buffer that stays in cache and counted into
    the cube at once (ids of the whole table would be written to memory, read back and converted
    to int64 by ``bincount``). Integer sums below 2**53: exact, so equal to one weighted
    ``bincount`` over every cell."""
    space = int(ch.space)
    codes, cards = ch.sub_codes, [int(k) for k in ch.cards]
    m = int(codes[0].shape[0])
    step = min(m, max(CUBE_CHUNK, 4 * space)) or 1
    common = _common_weight(table, packed)
    buf = np.empty(step, dtype=smallest_id_dtype(cards, np))
    if common is not None:
        c, exc, exc_w = common
        exc_ids = np.empty(exc.shape[0], dtype=np.int64)
        bounds = np.searchsorted(exc, np.arange(0, m + step, step))
    count = None
    acc = None
    for j, start in enumerate(range(0, m, step)):
        stop = min(m, start + step)
        ids = buf[: stop - start]
        np.copyto(ids, codes[0][start:stop], casting="unsafe")
        for x, k in zip(codes[1:], cards[1:]):
            ids *= k
            ids += x[start:stop]
        if common is not None:
            lo, hi = int(bounds[j]), int(bounds[j + 1])
            exc_ids[lo:hi] = ids[exc[lo:hi] - start]
            h = np.bincount(ids, minlength=space)
            count = h if count is None else np.add(count, h, out=count)
        else:
            h = np.bincount(ids, weights=packed[0][start:stop], minlength=space)
            acc = h if acc is None else np.add(acc, h, out=acc)
    if common is None:
        return acc if acc is not None else np.zeros(space)
    if count is None:
        count = np.zeros(space, dtype=np.int64)
    out = count.astype(np.float64)
    out *= c
    out += np.bincount(exc_ids, weights=exc_w, minlength=space)
    return out


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


def _totals(parent: FreqTable, ch: "_Child | None" = None) -> dict:
    """A roll-up keeps n and N: the parent's (when known), for the child's cache, instead of summing
    again; and the margins of f (:func:`f_margins`) of the keys of ``ch`` that are not recoded."""
    memo = parent._memo
    out = {k: memo[k] for k in ("n", "N") if k in memo}
    if ch is not None:
        for k in ch.keys:
            got = None if k in ch.maps else memo.get(MARGIN + k)
            if got is not None:
                out[MARGIN + k] = got
    return out


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

