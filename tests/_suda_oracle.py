"""Two references for SUDA (SPEC §9) written from the definition, sharing no code with gpurisk:

- :func:`brute_force`: plain Python, every subset of keys for every record, c_S(i) counted by
  comparing i with every record (O(n² 2^M): small data only);
- :func:`pandas_suda`: pandas only, one ``DataFrame.duplicated`` per subset (the obvious
  implementation a user would write; bench/bench_suda.py times it against gpurisk).
"""
from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pandas as pd


def weight(M: int, k: int, scoring: str) -> float:
    if scoring == "elliot":
        return float(math.factorial(M - k))
    return (2.0 ** (M - k) - 1.0) / math.comb(M, k)


def brute_force(records: list[tuple], max_msu: int | None = None, scoring: str = "elliot",
                dis_fraction: float = 0.01) -> dict:
    """Per record: its MSUs (set of key-index tuples), suda, contributions, msu_min, msu_count, dis."""
    n = len(records)
    M = len(records[0])
    m = M if max_msu is None else max_msu

    def count(i, S):
        return sum(1 for r in records if all(r[j] == records[i][j] for j in S))

    msus = []
    for i in range(n):
        unique = {(): n == 1}
        mine = set()
        for k in range(1, m + 1):
            for S in combinations(range(M), k):
                unique[S] = count(i, S) == 1
                if unique[S] and not any(unique[S[:d] + S[d + 1:]] for d in range(k)):
                    mine.add(S)
        msus.append(mine)
    suda = [sum(weight(M, len(S), scoring) for S in ms) for ms in msus]
    contrib = [[(sum(weight(M, len(S), scoring) for S in ms if j in S) / s) if s > 0 else 0.0
                for j in range(M)] for ms, s in zip(msus, suda)]
    full = [count(i, tuple(range(M))) for i in range(n)]
    P = sum(1 for c in full if c == 2)
    Q = 1 + (8 - M) / 20
    tot = sum(s ** -Q for s in suda if s > 0)
    f = dis_fraction
    dis = [1.0 / (1.0 + P * (1 - f) / (f * s ** Q * tot)) if s > 0 else 0.0 for s in suda]
    return {"msus": msus, "suda": suda, "contrib": contrib, "dis": dis,
            "msu_min": [min((len(S) for S in ms), default=0) for ms in msus],
            "msu_count": [len(ms) for ms in msus]}


def pandas_suda(df: pd.DataFrame, keys: list[str], max_msu: int | None = None,
                scoring: str = "elliot", dis_fraction: float = 0.01) -> pd.DataFrame:
    """Per record (the frame's order): suda, dis_suda, msu_min, msu_count, contrib_<key>."""
    M = len(keys)
    m = M if max_msu is None else max_msu
    n = len(df)
    data = df[keys]
    unique = {(): pd.Series(n == 1, index=df.index)}
    suda = pd.Series(0.0, index=df.index)
    kw = {k: pd.Series(0.0, index=df.index) for k in keys}
    count = pd.Series(0, index=df.index)
    msu_min = pd.Series(0, index=df.index)
    for k in range(1, m + 1):
        level = {}
        for S in combinations(range(M), k):
            u = ~data.duplicated(subset=[keys[j] for j in S], keep=False)
            level[S] = u
            below = unique[S[1:]]
            for d in range(1, k):
                below = below | unique[S[:d] + S[d + 1:]]
            msu = u & ~below
            w = weight(M, k, scoring)
            suda += msu * w
            count += msu
            msu_min = msu_min.where(~(msu & (msu_min == 0)), k)
            for j in S:
                kw[keys[j]] += msu * w
        unique = level
    full = data.groupby(keys, dropna=False, sort=False)[keys[0]].transform("size")
    P = int((full == 2).sum())
    Q = 1 + (8 - M) / 20
    pos = suda > 0
    tot = float((suda[pos] ** -Q).sum())
    f = dis_fraction
    dis = pd.Series(0.0, index=df.index)
    if tot > 0:
        dis[pos] = 1.0 / (1.0 + P * (1 - f) / (f * suda[pos] ** Q * tot))
    out = pd.DataFrame({"suda": suda, "dis_suda": dis, "msu_min": msu_min, "msu_count": count})
    safe = suda.where(pos, 1.0)
    for key in keys:
        out[f"contrib_{key}"] = np.where(pos, kw[key] / safe, 0.0)
    return out.reset_index(drop=True)
