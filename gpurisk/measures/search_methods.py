"""Record-level identification risk under intruder search methods. SPEC §5, Skinner (2007).

For a record whose key has match probability p in a population of N (n = sample size):

    r1   [1 − (1−p)^N] / (N p)                    search the population until a match   (eq. 5)
    r1u  [1 − (1−p)^(N−n+1)] / ((N−n+1) p)        r1 for a sample-unique record         (eq. 10)
    r2   1 / {1 + (N−1) p}                          a random individual happens to match  (eq. 7)
    r3   1 / {1 + (N−1−y) p}                        r1 with y recorded non-matches        (eq. 8)
    r4   1 / {1 + (N−1−y) p},  y + 1 = database size  unique match in a database         (eq. 8)
    b1   1 / {1 + (N−n) p̃}                         directed search of the microdata      (eq. 9)

with p̃ = p unless given. 1 − (1−p)^m is computed as −expm1(m · log1p(−p)), so that it keeps full
relative precision for p down to 1e−300 and m up to 1e15; at p = 0 the ratio is its limit 1.
Every function takes arrays of p (numpy or cupy) and scalar N, n, y.
"""
from __future__ import annotations

import math

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.xp import namespace


def one_minus_pow(p, m):
    """1 − (1−p)^m, accurately for tiny p and huge m."""
    xp = namespace(p)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -xp.expm1(m * xp.log1p(-p))


def r1_risk(p, N):
    """eq. 5: E(1/F) with F − 1 ~ Bin(N−1, p)."""
    xp = namespace(p)
    p = xp.asarray(p, dtype=xp.float64)
    N = float(N)
    with np.errstate(divide="ignore", invalid="ignore"):
        val = one_minus_pow(p, N) / (N * p)
    return xp.where(p > 0, val, 1.0)


def r1u_risk(p, N, n):
    """eq. 10: E(1/F | f = 1) under simple random sampling of n out of N — eq. 5 with N − n + 1."""
    return r1_risk(p, float(N) - float(n) + 1.0)


def r2_risk(p, N):
    """eq. 7: size-biased binomial, 1 / {1 + (N−1)p}."""
    xp = namespace(p)
    return 1.0 / (1.0 + (float(N) - 1.0) * xp.asarray(p, dtype=xp.float64))


def r3_risk(p, N, y):
    """eq. 8: y non-matches seen before the match, 1 / {1 + (N−1−y)p}."""
    xp = namespace(p)
    return 1.0 / (1.0 + (float(N) - 1.0 - float(y)) * xp.asarray(p, dtype=xp.float64))


def r4_risk(p, N, database_size):
    """eq. 8 with y + 1 = the size of the database searched."""
    return r3_risk(p, N, float(database_size) - 1.0)


def b1_risk(p_tilde, N, n):
    """eq. 9: directed search of the n microdata records, 1 / {1 + (N−n)p̃}."""
    xp = namespace(p_tilde)
    return 1.0 / (1.0 + (float(N) - float(n)) * xp.asarray(p_tilde, dtype=xp.float64))


#: method -> (description, equation)
METHODS = {
    "r1": ("search the population at random until a match is found", "eq. 5"),
    "r1u": ("r1 for a record chosen because it is sample unique", "eq. 10"),
    "r2": ("an individual drawn at random from the population matches", "eq. 7"),
    "r3": ("r1 with the number y of non-matches before the match recorded", "eq. 8"),
    "r4": ("a unique match found in a database of y + 1 individuals", "eq. 8"),
    "b1": ("directed search: a target individual matches one microdata record", "eq. 9"),
}
DEFAULT_METHODS = ("r1", "r1u", "r2", "b1")


def check_params(method: str, N: float, n: int, y=None, database_size=None) -> None:
    """BadInput when the parameters a method needs are missing or out of range."""
    if method not in METHODS:
        raise BadInput(f"unknown search method {method!r}; methods: {', '.join(METHODS)}")
    if method == "r3":
        if y is None:
            raise BadInput("method r3 needs y, the number of non-matches before the match (y=)",
                           cli="method r3 needs y, the number of non-matches before the match (--y)")
        if not 0 <= float(y) <= float(N) - 1:
            raise BadInput(f"method r3: y = {y} is outside [0, N − 1] with N = {N:g}")
    if method == "r4":
        if database_size is None:
            raise BadInput("method r4 needs the size of the database searched (database_size=)",
                           cli="method r4 needs the size of the database searched (--database-size)")
        if not 1 <= float(database_size) <= float(N):
            raise BadInput(f"method r4: database size {database_size} is outside [1, N] with N = {N:g}")


def risk(method: str, p, N, n, y=None, database_size=None, p_tilde=None):
    """The risk of ``method`` for match probabilities ``p`` (array); see the module docstring."""
    if method == "r1":
        return r1_risk(p, N)
    if method == "r1u":
        return r1u_risk(p, N, n)
    if method == "r2":
        return r2_risk(p, N)
    if method == "r3":
        return r3_risk(p, N, y)
    if method == "r4":
        return r4_risk(p, N, database_size)
    if method == "b1":
        xp = namespace(p)
        pt = p if p_tilde is None else xp.broadcast_to(xp.asarray(p_tilde, dtype=xp.float64), p.shape)
        return b1_risk(pt, N, n)
    raise BadInput(f"unknown search method {method!r}; methods: {', '.join(METHODS)}")


def database_size_for(p: float, target: float, N: float) -> float:
    """Smallest y + 1 for which eq. 8 reaches ``target`` (Skinner's 'database of at least ... ')."""
    if p <= 0 or target <= 0:
        return math.nan
    y = N - 1.0 - (1.0 / target - 1.0) / p
    return y + 1.0
