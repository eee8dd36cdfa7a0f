"""Which key variables drive the risk, measured where the risk is.

For a scanned combination C holding key k whose subset C \\ {k} was scanned too, the drop is
``value(C) − value(C \\ {k})``: what the ranking measure (by default ``matches_ll``, Ê, the expected
number of correct matches E; ``matches_hat`` = θ̂·n1, a lower estimate of E, in a scan without it:
:func:`gpurisk.scan.runner.rank_column`) loses when the intruder does not know k. The drops are taken in
the riskiest combinations only: the ``top`` combinations ranked by the measure (every size, ties by
size then scan order, :func:`gpurisk.scan.runner.top_combinations`), so a key that matters only in
small or harmless combinations does not outrank one that makes the riskiest combination risky.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gpurisk.scan.runner import top_combinations

COLUMNS = ["key", "drop", "combination", "rank", "n1_drop", "mean_drop", "combinations"]


def key_contributions(df: pd.DataFrame, col: str, top: int = 10) -> pd.DataFrame:
    """One row per key found in the ``top`` riskiest combinations by ``col`` (whose subset without
    the key was scanned): ``drop``, the drop of ``col`` when the key is left out of the riskiest
    such combination (``combination`` names it, ``rank`` is its place in the ranking), ``n1_drop``
    the sample uniques that this removes (when the scan has n1), ``mean_drop`` the mean drop over
    the top combinations that hold the key, ``combinations`` how many those are. Sorted by ``drop``,
    then ``mean_drop`` (largest first), then key name. Undefined values are never compared."""
    def values(c):
        v = df[c].astype(float).to_numpy()
        return {frozenset(k): float(x) for k, x in zip(df["keys"], v) if math.isfinite(x)}
    value = values(col)
    n1 = values("n1") if "n1" in df.columns else {}
    ranked = top_combinations(df[df[col].notna()], max(1, int(top)), col)
    found: dict[str, list] = {}
    for rank, keys in enumerate(ranked["keys"], 1):
        combo = frozenset(keys)
        if len(combo) < 2 or combo not in value:
            continue
        for key in sorted(combo):
            rest = combo - {key}
            if rest in value:
                found.setdefault(key, []).append((rank, combo, value[combo] - value[rest], rest))
    out = []
    for key, drops in found.items():
        rank, combo, drop, rest = drops[0]              # the riskiest combination holding the key
        out.append({"key": key, "drop": drop, "combination": ", ".join(sorted(combo)),
                    "rank": rank,
                    "n1_drop": (n1[combo] - n1[rest]) if combo in n1 and rest in n1 else math.nan,
                    "mean_drop": float(np.mean([d[2] for d in drops])), "combinations": len(drops)})
    if not out:
        return pd.DataFrame(columns=COLUMNS)
    return (pd.DataFrame(out, columns=COLUMNS)
            .sort_values(["drop", "mean_drop", "key"], ascending=[False, False, True], kind="stable")
            .reset_index(drop=True))
