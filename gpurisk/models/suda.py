"""SUDA's search for minimal sample uniques (MSUs): a walk up the lattice of key subsets. SPEC §9.

For record i and a non-empty subset S of the M keys, c_S(i) is the number of records that agree with i
on every key of S. S is a **minimal sample unique** of i when c_S(i) = 1 and c_{S∖{k}}(i) > 1 for every
k in S (the empty set matches all n records). Uniqueness is monotone (a superset of a unique subset is
unique), so S is minimal exactly when none of its |S| subsets with one key fewer is unique.

A record with an MSU is unique on the full key set (c ≥ c_full), so the search runs over the **cells**
of the full table with f_j = 1 (the candidates), never over records: a record's results are its cell's.
Level by level (|S| = 1, 2, ..., ``max_msu``):

1. the tables of every subset S of the level come from the one counting engine, rolled up the lattice
   (:class:`gpurisk.freq.lattice.Lattice`: cubes and sparse roll-ups from the finest table);
2. u_S = [c_S = 1] at every candidate: the candidate's mixed-radix id over S looked up in the
   subset's table (a dense bool map of the unique cells, or a binary search);
3. MSU_S = u_S ∧ ¬(∨_{k∈S} u_{S∖{k}}), from the previous level's u (the empty set's u is [n = 1]);
4. the (candidate, subset) pairs of the MSUs are kept (:class:`MsuSet`); scores of either scoring are
   weighted counts of them (``bincount``), see :mod:`gpurisk.models.suda_scores`.

Only two levels of u are held at once: (C(M, k−1) + C(M, k)) × (candidates) bytes. Everything is
written against the table's array namespace ``xp`` (numpy, CuPy, the strict namespace of the tests);
the loops are over subsets, never over records or cells.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input
from gpurisk.freq.cellid import INT64_LIMIT, mixed_radix_ids, radix_space, smallest_id_dtype
from gpurisk.freq.lattice import Lattice, cell_codes, regroup
from gpurisk.xp import to_host

#: working memory the search may use by default (bytes): the two levels of u, the pairs, the scores
MEMORY_LIMIT = 4 * 2**30
#: at most this many key subsets are searched (Σ_{k ≤ max_msu} C(M, k))
MAX_SUBSETS = 1 << 16
#: a subset's unique cells are looked up in a dense bool map when its id space is at most this ...
DENSE_LOOKUP = 1 << 26
#: ... and at most this many times the number of cells of the full table (else a binary search)
DENSE_FACTOR = 16


@dataclass(frozen=True)
class MsuSet:
    """The MSUs of every sample-unique cell of a table, as (candidate, subset) pairs.

    ``cells``: index (into the table's cells) of each candidate, the cells with f_j = 1 (in the
    order of the records when ``records`` is not None: ``records`` are then the positions of the
    candidates' records, ascending, so per-record columns are written by one sequential scatter);
    ``pair_cand`` / ``pair_subset``: one entry per MSU, the candidate's position in ``cells`` and the
    subset's position in ``subsets``; ``subsets``: key-index tuples searched, smallest first
    (host); ``sizes``: |S| of each subset (host numpy). Arrays other than the host ones are in ``xp``.
    """

    keys: tuple
    n: int
    max_msu: int
    cells: Any
    pair_cand: Any
    pair_subset: Any
    subsets: tuple
    sizes: np.ndarray
    xp: Any
    records: Any = None

    @property
    def M(self) -> int:
        return len(self.keys)

    @property
    def candidates(self) -> int:
        return int(self.cells.shape[0])

    @property
    def msus(self) -> int:
        return int(self.pair_cand.shape[0])


def subsets_upto(M: int, max_msu: int) -> list[tuple]:
    """Every non-empty subset of range(M) with at most ``max_msu`` keys, by size, then lexicographic."""
    return [c for k in range(1, max_msu + 1) for c in combinations(range(M), k)]


def check_max_msu(M: int, max_msu) -> int:
    """``max_msu`` as an int in 1..M (default M); bad input otherwise."""
    if max_msu is None:
        return M
    try:
        m = int(max_msu)
    except (TypeError, ValueError):
        raise BadInput(f"max_msu {max_msu!r} is not a whole number") from None
    if m != max_msu or m < 1:
        raise BadInput(f"max_msu={max_msu!r} must be a whole number of keys, at least 1")
    return min(m, M)


def lattice_size(M: int, max_msu: int) -> int:
    return sum(math.comb(M, k) for k in range(1, max_msu + 1))


def working_bytes(M: int, max_msu: int, candidates: int) -> int:
    """Estimated peak working memory of the search (bytes): two levels of u (bool), the candidates'
    codes and ids, the MSU pairs (about one per subset level and candidate) and the scores."""
    two_levels = max(math.comb(M, k - 1) + math.comb(M, k) for k in range(1, max_msu + 1))
    per_cand = two_levels + 8 * M + 16 * max_msu + 8 * (M + 4)
    return int(per_cand * candidates)


def check_lattice(keys, max_msu: int, candidates: int | None = None,
                  memory_limit: float | None = None) -> None:
    """Refuse a key set or ``max_msu`` whose lattice is too large, saying which limit and what to lower."""
    M = len(keys)
    count = lattice_size(M, max_msu)
    if count > MAX_SUBSETS:
        raise bad_input(f"suda: {M} keys up to max_msu {max_msu} make {count:,} key subsets to search, "
                       f"over the limit of {MAX_SUBSETS:,}: lower {{arg:--max-msu|max_msu}} or use fewer keys")
    if candidates is None:
        return
    limit = MEMORY_LIMIT if memory_limit is None else float(memory_limit)
    need = working_bytes(M, max_msu, candidates)
    if need > limit:
        raise bad_input(f"suda: the MSU search over {M} keys up to max_msu {max_msu} for "
                       f"{candidates:,} sample-unique records needs about {need / 2**30:.2f} GiB, over "
                       f"the memory limit of {limit / 2**30:.2f} GiB ({{arg:--search-memory|memory_limit}}): lower "
                       "{arg:--max-msu|max_msu} or use fewer keys")


def find_msus(table, max_msu: int | None = None, memory_limit: float | None = None,
              threads: int = 0, record_order: bool = False) -> MsuSet:
    """The MSUs of every sample-unique cell of ``table`` (a FreqTable over the M keys), subsets of at
    most ``max_msu`` keys (default M). See the module docstring. ``record_order``: candidates in the
    order of their records (the table must keep its records' cells)."""
    xp = table.xp
    M = len(table.keys)
    m = check_max_msu(M, max_msu)
    check_lattice(table.keys, m)
    n = int(table.n)
    records = None
    if record_order:
        rc = table.record_cell()
        records = xp.flatnonzero(table.f[rc] == 1)
        cand = rc[records]
    else:
        cand = xp.flatnonzero(table.f == 1)
    n_cand = int(cand.shape[0])
    check_lattice(table.keys, m, n_cand, memory_limit)
    subsets = subsets_upto(M, m)
    sizes = np.array([len(s) for s in subsets], dtype=np.int64)
    empty = xp.zeros(0, dtype=xp.int64)
    if n_cand == 0:
        return MsuSet(tuple(table.keys), n, m, cand, empty, empty, tuple(subsets), sizes, xp, records)
    codes = cell_codes(table)
    cand_codes = [c[cand] for c in codes]
    lat = Lattice(table, codes)
    cards = table.cards
    m_cells = int(table.cell_id.shape[0])

    prev = {(): xp.full(n_cand, n == 1, dtype=xp.bool_)}
    pairs_c, pairs_s = [], []
    offset = 0
    for k in range(1, m + 1):
        level = subsets[offset:offset + math.comb(M, k)]
        u = _uniques(table, lat, level, cand, cand_codes, codes, cards, m_cells, threads)
        for j, s in enumerate(level):
            below = None
            for drop in range(k):
                sub = s[:drop] + s[drop + 1:]
                below = prev[sub] if below is None else below | prev[sub]
            msu = u[s] & ~below
            idx = xp.flatnonzero(msu)
            if idx.shape[0]:
                pairs_c.append(idx)
                pairs_s.append(xp.full(idx.shape[0], offset + j, dtype=xp.int64))
        prev = u
        offset += len(level)
    del prev
    if pairs_c:
        pc = xp.concatenate(pairs_c).astype(xp.int64)
        ps = xp.concatenate(pairs_s)
    else:
        pc, ps = empty, empty
    return MsuSet(tuple(table.keys), n, m, cand, pc, ps, tuple(subsets), sizes, xp, records)


def _uniques(table, lat, level, cand, cand_codes, codes, cards, m_cells, threads) -> dict:
    """{subset: u_S}, u_S[c] = [c_S = 1] at every candidate c, for the subsets of one level."""
    xp = table.xp
    M = len(cards)
    out: dict = {}
    full = tuple(range(M))
    radix, other = [], []
    for s in level:
        if s == full:       # candidates are the cells with f = 1
            out[s] = xp.ones(int(cand.shape[0]), dtype=xp.bool_)
        elif radix_space([cards[i] for i in s]) <= INT64_LIMIT:
            radix.append(s)
        else:
            other.append(s)
    if radix:
        targets = [tuple(table.keys[i] for i in s) for s in radix]
        for i, t in lat.tables(targets, threads=threads):
            out[radix[i]] = _lookup(xp, t, radix[i], cand_codes, cards, m_cells)
    for s in other:         # key spaces past int64: surrogate ids, each candidate's cell by inverse
        child, inv = regroup(table, [table.keys[i] for i in s], codes=codes, return_inverse=True)
        out[s] = child.f[inv[cand]] == 1
    return out


def _lookup(xp, t, s, cand_codes, cards, m_cells):
    """u_S at the candidates from the table ``t`` over subset ``s`` (mixed-radix ids)."""
    sub_cards = [cards[i] for i in s]
    ids = mixed_radix_ids([cand_codes[i] for i in s], sub_cards, xp,
                          dtype=smallest_id_dtype(sub_cards, xp))
    space = radix_space(sub_cards)
    uniq = t.cell_id[t.f == 1]
    if space <= DENSE_LOOKUP and space <= DENSE_FACTOR * m_cells + (1 << 16):
        mark = xp.zeros(space, dtype=xp.bool_)
        mark[uniq] = True
        return mark[ids]
    if int(uniq.shape[0]) == 0:
        return xp.zeros(int(ids.shape[0]), dtype=xp.bool_)
    ids = ids.astype(uniq.dtype, copy=False)       # one dtype for the binary search (CuPy)
    pos = xp.searchsorted(uniq, ids)
    pos = xp.minimum(pos, int(uniq.shape[0]) - 1)
    return uniq[pos] == ids


def msu_by_size(ms: MsuSet) -> dict[int, int]:
    """{k: number of MSUs with k keys} for k = 1..max_msu (host ints)."""
    xp = ms.xp
    if ms.msus == 0:
        return {k: 0 for k in range(1, ms.max_msu + 1)}
    size_of = xp.asarray(ms.sizes)[ms.pair_subset]
    cnt = to_host(xp.bincount(size_of, minlength=ms.max_msu + 1))
    return {k: int(cnt[k]) for k in range(1, ms.max_msu + 1)}


__all__ = ["MsuSet", "find_msus", "check_lattice", "check_max_msu", "lattice_size", "msu_by_size",
           "subsets_upto", "working_bytes", "MEMORY_LIMIT", "MAX_SUBSETS"]
