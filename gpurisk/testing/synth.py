"""Synthetic registers for tests and benchmarks: seeded, skewed, vectorised.

Cell sizes in real registers are very uneven: a few common combinations hold many people, most
combinations hold few. ``register`` draws a latent class per record (Zipf-weighted) and, per key, a
Zipf-distributed offset added to a class-specific shift, so keys are dependent and marginals skewed.
No per-row Python objects: everything is numpy, in chunks, so tens of millions of rows are cheap.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

DEFAULT_CARDS = (2, 100, 6, 17, 10, 50, 12, 5)


def _zipf_p(k: int, s: float) -> np.ndarray:
    p = 1.0 / np.arange(1, k + 1) ** s
    return p / p.sum()


def _draw(rng, p_cum, size):
    return np.searchsorted(p_cum, rng.random(size), side="right")


def register(n: int, cards=DEFAULT_CARDS, seed: int = 0, skew: float = 1.3, classes: int = 64,
             dtype=np.int64, names=None) -> pd.DataFrame:
    """A frame of ``n`` records with one integer key column per cardinality in ``cards``."""
    rng = np.random.default_rng(seed)
    names = list(names or [f"k{i}" for i in range(len(cards))])
    cls_cum = np.cumsum(_zipf_p(classes, 1.0))
    cols = {nm: np.empty(n, dtype=dtype) for nm in names}
    shift = {nm: rng.integers(0, c, size=classes) for nm, c in zip(names, cards)}
    cums = {nm: np.cumsum(_zipf_p(c, skew)) for nm, c in zip(names, cards)}
    chunk = 1 << 22
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        g = np.minimum(_draw(rng, cls_cum, m), classes - 1)
        for nm, c in zip(names, cards):
            v = (np.minimum(_draw(rng, cums[nm], m), c - 1) + shift[nm][g]) % c
            cols[nm][start:start + m] = v
    return pd.DataFrame(cols)
