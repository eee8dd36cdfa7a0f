"""Complex sampling designs: unequal probabilities, stratification with a π per stratum, clusters.
SPEC §2 (Skinner & Elliot 2002, §§5.2-5.4).

These need per-record columns besides the keys, so they take the frame:

- :func:`stratum_weights` turns a stratum column and one π_h per stratum into design weights
  w_i = 1/π_h, the input of ``theta_hat_weighted``.
- :func:`stratified` reports θ̂_w over the whole file (removal ∝ w_i, copy-back with π_h) and θ̂
  (eq. 7 with π_h) within each stratum, from one table over keys + stratum (its cells nest in the
  strata). The paper: "our approach may be applied within strata when stratum sampling fractions
  are unequal" (§7).
- :func:`cluster_pairs`: the share of sample pairs (cells with f_j = 2) whose two records lie in
  the same cluster (household, PSU). Under the paper's §5.4 example (keys shared within clusters)
  it is 1 and θ̂ can be arbitrarily wrong; under sampling of individuals it is near 0. A share above
  ``threshold`` (default 0.1) gives a warning.
- :func:`design_report` runs whichever of these the arguments ask for (``gpurisk design``).
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input
from gpurisk.freq.encode import encode_keys
from gpurisk.xp import scalar, to_host

CLUSTER_WARN = 0.1


def _col(frame: pd.DataFrame, col: str, what: str) -> pd.Series:
    if col not in frame.columns:
        raise BadInput(f"{what} column {col!r} not in the file "
                       f"(its columns: {', '.join(map(str, list(frame.columns)[:20]))})")
    s = frame[col]
    if s.isna().any():
        raise BadInput(f"{what} column {col!r} has {int(s.isna().sum())} missing value(s)")
    return s


def parse_fractions(spec: str | Mapping | float) -> Mapping | float:
    """``"1=0.1,2=0.02"`` -> {"1": 0.1, "2": 0.02}; a single number stays a number."""
    if isinstance(spec, Mapping) or isinstance(spec, (int, float)):
        return spec
    s = str(spec).strip()
    try:
        return float(s)
    except ValueError:
        pass
    out = {}
    for part in filter(None, (p.strip() for p in s.split(","))):
        if "=" not in part:
            raise BadInput(f"stratum fractions {spec!r}: {part!r} is not STRATUM=PI")
        k, v = part.split("=", 1)
        try:
            out[k.strip()] = float(v)
        except ValueError:
            raise BadInput(f"stratum fractions: pi {v!r} of stratum {k.strip()!r} is not a number") from None
    return out


def stratum_weights(frame: pd.DataFrame, stratum: str, fractions) -> np.ndarray:
    """w_i = 1/π_h for each record from its stratum h; ``fractions`` maps stratum -> π_h."""
    s = _col(frame, stratum, "stratum")
    fractions = parse_fractions(fractions)
    if isinstance(fractions, (int, float)):
        fractions = {v: float(fractions) for v in pd.unique(s)}
    lookup = {str(k): float(v) for k, v in fractions.items()}
    bad = {k: v for k, v in lookup.items() if not (0.0 < v <= 1.0) or math.isnan(v)}
    if bad:
        k, v = next(iter(bad.items()))
        raise BadInput(f"sampling fraction pi={v!r} of stratum {k!r} is outside (0, 1]")
    labels = s.astype(str)
    counts = labels.value_counts()
    miss = [u for u in counts.index if u not in lookup]
    if miss:
        # a stratum value held by one record is never named (issue 20)
        shown = ["<withheld: a value of 1 record>" if counts[u] == 1 else u for u in miss[:5]]
        raise BadInput(f"no sampling fraction for {len(miss)} stratum value(s) of {stratum!r}, "
                       f"e.g. {shown}")
    pi = labels.map(lookup).to_numpy(dtype=np.float64)
    return 1.0 / pi


def stratified(frame: pd.DataFrame, keys: Sequence[str], stratum: str, fractions,
               missing: str = "category", recode=None) -> dict[str, Any]:
    """θ̂_w over the file and θ̂ within each stratum (see the module docstring)."""
    from gpurisk.inputs import Inputs, key_list
    from gpurisk.measures.theta_hat_weighted import theta_hat_weighted
    keys = key_list(keys)
    if stratum in keys:
        raise BadInput(f"the stratum column {stratum!r} is also a key variable")
    w = stratum_weights(frame, stratum, fractions)
    work = frame[keys + [stratum]].copy()
    work["__w"] = w
    inp = Inputs(work, keys + [stratum], weights="__w", missing=missing, recode=recode)
    frames = inp.read()
    whole = inp.count(frames, keys, guard=False).table
    th_w, n1, d = theta_hat_weighted(whole.f, whole.w)
    nested = inp.count(frames, guard=False).table
    f = to_host(nested.f)
    h = to_host(nested.cell_codes()[-1])[f > 0]
    wsum = to_host(nested.w)[f > 0]
    fpos = f[f > 0]
    H = len(nested.categories[-1])
    nr = {r: np.bincount(h, weights=(fpos == r), minlength=H).astype(int) for r in (1, 2, 3)}
    nh = np.bincount(h, weights=fpos, minlength=H).astype(int)
    pih = np.bincount(h, weights=fpos, minlength=H) / np.bincount(h, weights=wsum, minlength=H)
    strata = {}
    for i, label in enumerate(nested.categories[-1]):
        th, v, why = _estimable_theta_hat(int(nr[1][i]), int(nr[2][i]), int(nr[3][i]),
                                          float(pih[i]))
        strata[str(label)] = {"pi": float(pih[i]), "n": int(nh[i]), "n1": int(nr[1][i]),
                              "n2": int(nr[2][i]), "theta_hat": th,
                              "se": math.sqrt(v) if v == v else math.nan,
                              **({"reason": why} if why else {})}
    return {"theta_hat_weighted": th_w, "experimental": True, "n1": n1,
            "sum_pairs_w_minus_1": d, "strata": strata}


def _estimable_theta_hat(n1: int, n2: int, n3: int, pi: float) -> tuple[float, float, str | None]:
    """(θ̂, v̂, None), or (NaN, NaN, why) where θ̂ is not estimable (no sample pair, π < 1)."""
    from gpurisk.measures.theta_hat import not_estimable, theta_hat
    why = not_estimable(n1, n2, n3) if pi < 1.0 else None
    if why:
        return math.nan, math.nan, why
    th, v = theta_hat(n1, n2, n3, pi)
    return th, v, None


def cluster_pair_share(table, cluster_codes: np.ndarray) -> tuple[int, int]:
    """(pairs whose two records share a cluster, all pairs) for cells with f_j = 2.

    ``cluster_codes`` holds one integer per sample record, in the records' order.
    """
    rc = to_host(table.record_cell())
    f = to_host(table.f)
    idx = np.flatnonzero(f[rc] == 2)
    idx = idx[np.argsort(rc[idx], kind="stable")]  # the two records of a pair are adjacent
    a, b = idx[0::2], idx[1::2]
    cl = np.asarray(cluster_codes)
    return int(np.count_nonzero(cl[a] == cl[b])), int(a.size)


def cluster_pairs(frame: pd.DataFrame, keys: Sequence[str], cluster: str,
                  threshold: float = CLUSTER_WARN, missing: str = "category", table=None
                  ) -> dict[str, Any]:
    """Share of sample pairs within one cluster, and a warning when it exceeds ``threshold``."""
    keys = list(keys)
    _col(frame, cluster, "cluster")
    if not 0.0 <= float(threshold) <= 1.0:
        raise BadInput(f"cluster threshold {threshold!r} is outside [0, 1]")
    if table is None:
        from gpurisk.inputs import Inputs
        table = Inputs(frame, keys, missing=missing).count(guard=False).table
    (enc,) = encode_keys(frame, [cluster])
    same, pairs = cluster_pair_share(table, enc.sample)
    share = same / pairs if pairs else math.nan
    out = {"pairs": pairs, "same_cluster": same, "share": share, "threshold": float(threshold),
           "warning": None}
    if pairs and share > threshold:
        out["warning"] = (f"{same} of {pairs} sample pairs (f_j = 2) lie within one {cluster!r} "
                          f"cluster ({share:.1%} > {threshold:.0%}): theta_hat assumes sampling of "
                          "individuals and can be badly wrong under this cluster sampling "
                          "(Skinner & Elliot 2002, §5.4)")
        warnings.warn(out["warning"], stacklevel=2)
    return out


def design_report(frame, keys: Sequence[str], *, fraction: float | None = None,
                  weights: str | None = None, stratum: str | None = None, fractions=None,
                  cluster: str | None = None, threshold: float = CLUSTER_WARN,
                  missing: str = "category", recode=None, backend: str | None = None,
                  allow_high_cardinality: bool = False, sep: str | None = None,
                  encoding: str = "utf-8") -> dict[str, Any]:
    """What ``gpurisk design`` prints: θ̂ (given π), θ̂_w, per-stratum θ̂, the cluster diagnostic.

    ``frame`` is a frame or a path, read, checked and counted by :class:`gpurisk.inputs.Inputs`."""
    from gpurisk.inputs import Inputs
    from gpurisk.measures.theta_hat_weighted import theta_hat_weighted
    if weights and stratum:
        raise bad_input("give either {arg:--weights|weights} or {arg:--strata|stratum} with "
                        "{arg:--fractions|fractions}, not both")
    if stratum and fractions is None:
        raise bad_input(f"{{arg:--strata|stratum}} {stratum} needs {{arg:--fractions|fractions}} "
                        "(STRATUM=PI,... or one PI)")
    if not (fraction or weights or stratum or cluster):
        raise bad_input("nothing to report: give {arg:--fraction|fraction}, {arg:--weights|weights}, "
                        "{arg:--strata|stratum} or {arg:--cluster|cluster}")
    inp = Inputs(frame, keys, weights=weights, fraction=fraction, missing=missing, recode=recode,
                 backend=backend, sep=sep, encoding=encoding,
                 allow_high_cardinality=allow_high_cardinality,
                 columns=[c for c in (stratum, cluster) if c])
    keys = list(inp.keys)
    frames = inp.read()
    frame = frames.sample
    table = inp.count(frames, records="design --cluster" if cluster else None).table
    doc: dict[str, Any] = {"n": table.n, "keys": keys, "n1": table.n_r(1), "n2": table.n_r(2),
                           "warnings": []}
    if inp.fraction is not None:
        f = inp.fraction
        th, v, why = _estimable_theta_hat(table.n_r(1), table.n_r(2), table.n_r(3), f)
        doc["theta_hat"] = {"value": th, "se": math.sqrt(v) if v == v else math.nan, "pi": f,
                            **({"reason": why} if why else {})}
    if weights:
        f, w = table.f, table.w
        if scalar(((f > 0) & (w < f * (1 - 1e-12))).sum()):
            raise BadInput(f"weight column {weights!r} has weights below 1 (pi_i > 1): give design "
                           "weights 1/pi_i, not normalised weights")
        th, n1, d = theta_hat_weighted(f, w)
        doc["theta_hat_weighted"] = {"value": th, "experimental": True, "n1": n1,
                                     "sum_pairs_w_minus_1": d}
    if stratum:
        doc["stratified"] = stratified(frame, keys, stratum, fractions, missing, inp.recode)
    if cluster:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            doc["cluster"] = cluster_pairs(frame, keys, cluster, threshold, missing, table=table)
        doc["warnings"] += [str(c.message) for c in caught]
    return doc
