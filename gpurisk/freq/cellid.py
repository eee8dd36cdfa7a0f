"""Combine per-key codes into one int64 cell id (numpy).

Mixed radix ``id = ((c0 * k1 + c1) * k2 + c2) ...`` when the product of the cardinalities fits in
int64: ids then sort in the lexicographic order of the codes and decode back to codes. When it does
not fit, keys are combined left to right and the partial id is re-densified (``np.unique``) whenever
the next multiplication would overflow; the ids are then surrogate (not decodable), and the table keeps
each cell's codes from a representative record.
"""
from __future__ import annotations

import math

import numpy as np

from gpurisk.xp import namespace

INT64_LIMIT = 2**63 - 1
CHUNK = 1 << 18  # rows per chunk: the accumulator stays in cache


def radix_space(cards) -> int:
    return math.prod(int(c) for c in cards)


def fits_radix(cards) -> bool:
    return radix_space(cards) <= INT64_LIMIT


def id_dtype(cards, xp=np):
    """uint32 ids when the space fits (they sort twice as fast), else int64."""
    return xp.uint32 if radix_space(cards) <= 2**32 else xp.int64


def smallest_id_dtype(cards, xp=np):
    """The smallest signed integer type that holds every id of the space (roll-ups: the narrower the
    ids, the faster the sums and sorts over them)."""
    space = radix_space(cards)
    return xp.int16 if space <= 2**15 else xp.int32 if space <= 2**31 else xp.int64


def mixed_radix_ids(codes, cards, xp=np, dtype=None, chunk: int = CHUNK):
    """THE mixed-radix function: ``id = ((c0 * k1 + c1) * k2 + c2) ...`` for every row, in ``dtype``
    (default :func:`id_dtype`); requires ``fits_radix(cards)``. Every part of gpurisk that combines
    codes into ids (the engine, the roll-ups of the scan, the partitioned engine's words, DIS)
    calls it.

    ``codes`` is a sequence of per-key code arrays, or an iterator yielding them one at a time (then
    only one key's codes need be held at once). Partial ids are below the final space, so the
    arithmetic is exact in ``dtype``. On numpy, a sequence of long arrays is combined in chunks of
    ``chunk`` rows, so the running ids stay in cache between the multiply-adds (about twice as fast
    as whole-array passes for 6-8 keys).
    """
    cards = [int(k) for k in cards]
    dtype = id_dtype(cards, xp) if dtype is None else dtype
    if (xp is np and isinstance(codes, (list, tuple)) and len(codes) > 1
            and codes[0].ndim == 1 and codes[0].shape[0] > chunk):
        n = codes[0].shape[0]
        out = np.empty(n, dtype=dtype)
        # signed ids are summed in place; unsigned ones in an int64 buffer (uint32 + int8 codes would
        # be promoted to int64 and cast back at every step)
        signed = np.issubdtype(dtype, np.signedinteger)
        buf = None if signed else np.empty(min(n, chunk), dtype=np.int64)
        for start in range(0, n, chunk):
            stop = min(n, start + chunk)
            part = out[start:stop] if signed else buf[:stop - start]
            np.copyto(part, codes[0][start:stop], casting="unsafe")
            for c, k in zip(codes[1:], cards[1:]):
                part *= k
                part += c[start:stop]
            if not signed:
                out[start:stop] = part
        return out
    it = iter(codes)
    acc = xp.asarray(next(it)).astype(dtype, copy=True)
    for c, k in zip(it, cards[1:]):
        xp.multiply(acc, k, out=acc, casting="unsafe")
        xp.add(acc, c, out=acc, casting="unsafe")
    return acc


def decode_radix(ids: np.ndarray, cards) -> list[np.ndarray]:
    """Inverse of :func:`mixed_radix_ids`."""
    out = []
    rest = ids.copy()
    for k in reversed(list(cards)):
        out.append(rest % int(k))
        rest //= int(k)
    return out[::-1]


def surrogate_ids(codes_parts, cards, xp=np, dense: bool = True, limit: int = INT64_LIMIT) -> list:
    """Ids for key spaces that overflow ``limit``, consistent across several frames (sample,
    population): keys are combined left to right and the partial id re-densified (``unique``)
    whenever the next multiplication would overflow, so ids keep the lexicographic order of the codes.

    ``codes_parts[p][v]`` are the (1-d) codes of key v in frame p. Returns one int64 id array per
    frame; equal ids mean equal codes in every key. ``dense``: end with dense ranks 0..m-1 (one more
    ``unique``); otherwise the ids are only order-preserving.
    """
    sizes = [int(p[0].shape[0]) for p in codes_parts]
    cat = [xp.concatenate([p[v] for p in codes_parts]).astype(xp.int64) for v in range(len(cards))]
    acc = cat[0]
    space = int(cards[0])
    for c, k in zip(cat[1:], cards[1:]):
        if space * int(k) > limit:
            uniq, acc = xp.unique(acc, return_inverse=True)
            acc = acc.reshape(-1).astype(xp.int64)
            space = int(uniq.shape[0])
        acc = acc * int(k) + c
        space *= int(k)
    if dense:
        acc = xp.unique(acc, return_inverse=True)[1].reshape(-1).astype(xp.int64)
    out, start = [], 0
    for s in sizes:
        out.append(acc[start:start + s])
        start += s
    return out


def combined_ids(codes, cards, xp=np, limit: int = INT64_LIMIT):
    """Order-preserving int64 ids of code tuples (arrays of any one shape): the mixed radix
    (:func:`mixed_radix_ids`) when the space is at most ``limit``, else surrogate ids
    (:func:`surrogate_ids`, not re-densified at the end)."""
    codes = list(codes)
    if radix_space(cards) <= limit:
        return mixed_radix_ids(codes, cards, xp, dtype=xp.int64)
    shape = codes[0].shape
    flat = [c.reshape(-1) for c in codes]
    return surrogate_ids([flat], cards, xp, dense=False, limit=limit)[0].reshape(shape)


#: ids below this are located through a dense lookup table (int32: 128 MiB at most)
DENSE_LOOKUP_LIMIT = 1 << 25


def dense_count(space: int | None, n: int) -> bool:
    """Whether ``n`` ids in ``[0, space)`` are counted by a histogram (one pass over the ids, one over
    the ``space`` bins) rather than a sort (O(n log n)): when the space is no more than a few times
    the ids and its int64 bins fit DENSE_LOOKUP_LIMIT (a few keys of few categories, whatever n)."""
    return space is not None and n > 0 and space <= min(DENSE_LOOKUP_LIMIT, max(4 * n, 1 << 16))


def count_ids(ids, xp=None, space: int | None = None):
    """(sorted distinct ids as int64, their counts as int64): sort, then run lengths; or, where
    :func:`dense_count` says so for the ids' known range ``space``, a histogram and its nonzero
    bins (the same result)."""
    xp = namespace(ids) if xp is None else xp
    n = int(ids.shape[0])
    if n == 0:
        return xp.zeros(0, xp.int64), xp.zeros(0, xp.int64)
    if dense_count(space, n):
        hist = xp.bincount(ids.astype(xp.int64), minlength=int(space))
        cells = xp.flatnonzero(hist)
        return cells.astype(xp.int64), hist[cells].astype(xp.int64)
    s = xp.sort(ids)
    new = xp.ones(n, dtype=bool)
    new[1:] = s[1:] != s[:-1]
    starts = xp.flatnonzero(new)
    counts = xp.diff(xp.concatenate([starts, xp.asarray([n], dtype=starts.dtype)]))
    return s[starts].astype(xp.int64), counts.astype(xp.int64)
