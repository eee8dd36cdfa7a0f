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

INT64_LIMIT = 2**63 - 1
CHUNK = 1 << 18  # rows per chunk: the accumulator stays in cache


def radix_space(cards) -> int:
    return math.prod(int(c) for c in cards)


def fits_radix(cards) -> bool:
    return radix_space(cards) <= INT64_LIMIT


def id_dtype(cards):
    """uint32 ids when the space fits (they sort twice as fast), else int64."""
    return np.uint32 if radix_space(cards) <= 2**32 else np.int64


def mixed_radix_ids(codes: list[np.ndarray], cards) -> np.ndarray:
    """id = mixed-radix number of the codes; requires ``fits_radix(cards)``."""
    n = codes[0].shape[0]
    out = np.empty(n, dtype=id_dtype(cards))
    acc = np.empty(min(n, CHUNK), dtype=np.int64)
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        a = acc[:stop - start]
        np.copyto(a, codes[0][start:stop], casting="unsafe")
        for c, k in zip(codes[1:], cards[1:]):
            a *= int(k)
            a += c[start:stop]
        out[start:stop] = a
    return out


def decode_radix(ids: np.ndarray, cards) -> list[np.ndarray]:
    """Inverse of :func:`mixed_radix_ids`."""
    out = []
    rest = ids.copy()
    for k in reversed(list(cards)):
        out.append(rest % int(k))
        rest //= int(k)
    return out[::-1]


def surrogate_ids(codes_parts: list[list[np.ndarray]], cards) -> list[np.ndarray]:
    """Ids for key spaces that overflow int64, consistent across several frames (sample, population).

    ``codes_parts[p][v]`` are the codes of key v in frame p. Returns one int64 id array per frame;
    equal ids mean equal codes in every key.
    """
    sizes = [p[0].shape[0] for p in codes_parts]
    cat = [np.concatenate([p[v] for p in codes_parts]).astype(np.int64) for v in range(len(cards))]
    acc = cat[0].copy()
    space = int(cards[0])
    for c, k in zip(cat[1:], cards[1:]):
        if space * int(k) > INT64_LIMIT:
            uniq, acc = np.unique(acc, return_inverse=True)
            acc = acc.astype(np.int64)
            space = len(uniq)
        acc = acc * int(k) + c
        space *= int(k)
    uniq, acc = np.unique(acc, return_inverse=True)
    out, start = [], 0
    for s in sizes:
        out.append(acc[start:start + s].astype(np.int64))
        start += s
    return out
