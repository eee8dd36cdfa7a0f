"""``gpurisk.validate``'s parts (the workflow is :mod:`gpurisk.workflows.validate`): every estimator
checked against its true value on replicate samples.

A real population file is encoded once (:func:`gpurisk.build_table` counted on the population gives
F_j and each record's cell). For each sampling fraction, R replicate samples are drawn by a design
(:mod:`gpurisk.validation.design`), counted in batches by one ``bincount``, and every replicate's
:class:`~gpurisk.FreqTable` is assembled from (f, F) without re-reading records. The measures run on
each table; each estimate is paired with its truth through the estimator class's ``estimates``
attribute (θ̂ ↔ θ, τ̂1 ↔ τ1). The summary is Skinner & Elliot's (2002) Table 1: mean and standard
deviation across replicates of the true value, the estimate, the error (estimate − truth) and the
estimated standard error; for τ̂1 also the normalised MSE, mean((τ̂1 − τ1)²/n²) (the MSE of τ̂1/n,
the normalisation of Orlitsky, Suresh & Wu 2016 under which the NMSE of Camerlenghi et al. vanishes).

Standard deviations are taken with ddof = 0 for the systematic design (all L samples enumerated:
the exact design standard deviation, as in Table 1) and ddof = 1 for random replicates.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from gpurisk.core.messages import bad_input
from gpurisk.errors import BadInput
from gpurisk.plugins import measure_registry

#: left out of the default set: the Monte Carlo form of theta_hat (same estimate; its s.e. is the
#: simulation's, not the estimator's, and it is slow)
DEFAULT_EXCLUDE = ("theta_hat_dis",)
#: quantities of the summary, in Table 1's order
QUANTITIES = ("true", "estimate", "error", "se")
#: replicates per saved chunk when resuming (``resume=``)
CHUNK = 5
#: the columns of :attr:`Validation.replicates`: one row per (fraction, replicate, measure). ``value``
#: is the estimator's own value, also where the measure withholds it from display (a Result whose
#: ``extra["raw_value"]`` keeps a value outside the quantity's range: validation judges the estimator,
#: not what is printed); ``shown`` is what the measure reports (NaN where withheld); ``upper`` its
#: upper bound; ``lower`` the lower end of its two-sided interval where it reports one (an extra
#: ``lower`` with its ``level``, as pop_uniqueness does; else NaN); n1, n2, n3 the replicate's numbers
#: of sample cells of size 1, 2, 3.
REPLICATE_COLUMNS = ["fraction", "replicate", "n", "n1", "n2", "n3", "measure", "value", "shown",
                     "se", "upper", "lower", "reliable", "reason"]


@dataclass(repr=False)
class Validation:
    """What :func:`validate` returns.

    ``summary``: one row per (fraction, measure); ``replicates``: one row per (fraction, replicate,
    measure) with the value, its s.e. and its truth; ``warnings``: distinct warnings with counts.
    """

    summary: pd.DataFrame
    replicates: pd.DataFrame
    info: dict[str, Any]
    warnings: list[str] = field(default_factory=list)

    def _headline(self) -> str:
        i = self.info
        reps = sorted(set((i.get("replicates") or {}).values()))
        return (f"{len(i.get('pairs', {}))} estimator(s) on {len(i.get('fractions', []))} "
                f"fraction(s), {'/'.join(map(str, reps)) or '?'} replicate(s) of N={i.get('N')} "
                f"({i.get('design')})")

    def __repr__(self) -> str:
        from gpurisk.core.display import fmt
        s = self.summary.dropna(subset=["nmse"]) if "nmse" in self.summary else self.summary.iloc[:0]
        worst = s.loc[s["nmse"].idxmax()] if len(s) else None
        text = f"<Validation {self._headline()}"
        if worst is not None:
            text += (f"; largest NMSE {fmt(worst['nmse'])} ({worst['measure']} at "
                     f"π={fmt(worst['fraction'])})")
        return text + (f"; {len(self.warnings)} warning(s)>" if self.warnings else ">")

    def _repr_html_(self) -> str:
        from gpurisk.core.display import html_table
        cols = [c for c in ("fraction", "measure", "truth_measure", "true_mean", "estimate_mean",
                            "rmse", "nmse") if c in self.summary]
        rows = [tuple(r) for r in self.summary[cols].head(30).itertuples(index=False)]
        return html_table(f"Validation: {self._headline()}", rows, cols,
                          [f"warning: {w}" for w in self.warnings[:5]])

    def write(self, path) -> Path:
        """The summary as Parquet (.parquet/.pq) or CSV (anything else)."""
        from gpurisk.io import write_frame_atomic
        return write_frame_atomic(self.summary, path)

    def table1(self, measure: str) -> pd.DataFrame:
        """Skinner & Elliot's Table 1 layout for one estimator: rows (quantity, mean|sd), columns π."""
        s = self.summary[self.summary["measure"] == measure]
        rows = {}
        for q in QUANTITIES:
            for stat in ("mean", "sd"):
                col = f"{q}_{stat}"
                if col in s and s[col].notna().any():
                    rows[(q, stat)] = s[col].to_numpy()
        for q in ("se_over_sd", "coverage"):
            if q in s and s[q].notna().any():
                rows[(q, "")] = s[q].to_numpy()
        if "nmse" in s and s["nmse"].notna().any():
            rows[("nmse", "")] = s["nmse"].to_numpy()
        out = pd.DataFrame(rows, index=s["fraction"].to_numpy()).T
        out.columns.name = "fraction"
        return out

    def plot(self, path) -> Path:
        from gpurisk.validation.plot import plot_validation
        return plot_validation(self, path)


def _measure_names(names: Iterable[str] | None) -> tuple[list[str], dict[str, str | None]]:
    """(names to run, estimator -> truth); truths of the named estimators are added."""
    reg = measure_registry()
    if names is None:
        chosen = [m for m, r in reg.items() if r.cls.estimates and r.cls.estimates in reg
                  and m not in DEFAULT_EXCLUDE
                  and r.cls.level == "file" and not ({"weights", "records"} & set(r.cls.needs))]
    else:
        chosen = list(dict.fromkeys(names))
        unknown = [m for m in chosen if m not in reg]
        if unknown:
            raise BadInput(f"unknown measure(s) {', '.join(map(repr, unknown))}; "
                           f"registered: {', '.join(reg)}")
        bad = [m for m in chosen if {"weights", "records"} & set(reg[m].cls.needs)
               or reg[m].cls.level != "file"]
        if bad:
            raise BadInput(f"measure(s) {', '.join(map(repr, bad))} need design weights or record "
                           "level data, which replicate samples of validate do not carry")
    pairs = {m: reg[m].cls.estimates for m in chosen if reg[m].cls.estimates}
    for m, t in pairs.items():
        if t not in reg:
            raise BadInput(f"measure {m!r} estimates {t!r}, which is not registered")
    run = list(dict.fromkeys(chosen + [t for t in pairs.values() if t]))
    return run, pairs


def _check_fractions(fractions) -> list[float]:
    from gpurisk.core.settings import FRACTIONS
    items = [fractions] if isinstance(fractions, (int, float, str)) else list(fractions)
    out = [FRACTIONS.check(f) for f in items]
    if not out:
        raise bad_input("no sampling fraction given ({arg:--fractions|fractions} 0.02,0.05,0.1)")
    return out


def replicate(pop: tuple, f, frac: float, r: int, alpha: float, seed: int, options,
              names) -> tuple[list, dict]:
    """One replicate sample's rows (:func:`_run_one`) and the warnings its measures raised
    (generic text -> [first text, count]), from the population's cells ``pop`` (keys, categories,
    cell ids, F, radix, stored codes) and the sample's counts ``f`` over them: what validate runs
    for each replicate, here or in a forked process (:func:`replicate_forked`)."""
    from gpurisk.freq.table import FreqTable
    from gpurisk.measure import Context
    keys, categories, cell_id, F, radix, codes = pop
    table = FreqTable(keys, categories, cell_id, f, F, None, radix, np, codes)
    ctx = Context(fraction=frac, fraction_source="design", alpha=float(alpha),
                  seed=int(seed) * 1_000_003 + r, options=dict(options or {}))
    caught: dict = {}
    return _run_one(table, ctx, names, frac, r, caught), caught


def replicate_forked(*args) -> tuple[list, dict]:
    """:func:`replicate` in a process forked by validate, the population's cells inherited
    (:data:`gpurisk.core.forked.INHERITED`), not copied."""
    from gpurisk.core.forked import INHERITED
    return replicate(INHERITED[0], *args)


def _run_one(table, ctx, names, frac, r, caught):
    from gpurisk.core.evaluate import run_measures
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        res = run_measures(table, ctx, names)
    for x in w:
        msg = str(x.message)
        first = caught.setdefault(_generic(msg), [msg, 0])
        first[1] += 1
    n = table.n
    fof = {r: table.n_r(r) for r in (1, 2, 3)}
    out = []
    for name, m in res.items():
        shown = _float(m.value)
        raw = m.extra.get("raw_value")
        v = shown if raw is None else _float(raw)
        rel = m.extra.get("reliable")
        out.append({"fraction": frac, "replicate": r, "n": n, "n1": fof[1], "n2": fof[2],
                    "n3": fof[3], "measure": name, "value": v, "shown": shown,
                    "se": _float(m.se if m.se is not None or raw is None else m.extra.get("raw_se")),
                    "upper": _float(m.upper),
                    "lower": (_float(m.extra.get("lower")) if m.extra.get("level") is not None
                              else math.nan),
                    "reliable": None if rel is None else bool(rel),
                    "reason": m.reason})
    return out


def _float(v) -> float:
    return math.nan if v is None else float(v)


def _generic(msg: str) -> str:
    """A warning without its replicate-specific numbers, so that repeats are counted once."""
    import re
    return re.sub(r"(?<![A-Za-z_])[-+]?\d[\d.eE+-]*", "#", msg)


def _attach_truth(reps: pd.DataFrame, pairs: dict[str, str | None]) -> pd.DataFrame:
    reps = reps.copy()
    reps["truth_measure"] = reps["measure"].map(lambda m: pairs.get(m))
    key = ["fraction", "replicate"]
    truth = reps[["fraction", "replicate", "measure", "value"]].rename(
        columns={"measure": "truth_measure", "value": "truth"})
    return reps.merge(truth, on=key + ["truth_measure"], how="left")


def _stats(x: np.ndarray, ddof: int) -> tuple[float, float]:
    x = x[np.isfinite(x)]
    if x.size == 0:
        return math.nan, math.nan
    sd = float(np.std(x, ddof=ddof)) if x.size > ddof else math.nan
    return float(np.mean(x)), sd


def summarise(reps: pd.DataFrame, names, pairs, ddof: int) -> pd.DataFrame:
    """One row per (fraction, measure): mean and sd of true, estimate, error, se; s.e./sd (the mean
    s.e. over the error's sd); coverage (the share of replicates whose upper bound holds the
    truth); NMSE for τ̂1."""
    out = []
    for (frac, name), g in reps.groupby(["fraction", "measure"], sort=False):
        est = g["value"].to_numpy(float)
        truth = g["truth"].to_numpy(float)
        is_truth_only = name not in pairs
        row: dict[str, Any] = {"fraction": frac, "measure": name,
                               "truth_measure": pairs.get(name) if not is_truth_only else name,
                               "replicates": len(g), "n_mean": float(g["n"].mean())}
        if is_truth_only:
            row["true_mean"], row["true_sd"] = _stats(est, ddof)
            row["defined"] = int(np.isfinite(est).sum())
        else:
            ok = np.isfinite(est) & np.isfinite(truth)
            row["defined"] = int(ok.sum())
            row["true_mean"], row["true_sd"] = _stats(truth[ok], ddof)
            row["estimate_mean"], row["estimate_sd"] = _stats(est[ok], ddof)
            err = est[ok] - truth[ok]
            row["error_mean"], row["error_sd"] = _stats(err, ddof)
            row["se_mean"], row["se_sd"] = _stats(g["se"].to_numpy(float)[ok], ddof)
            row["rmse"] = float(np.sqrt(np.mean(err ** 2))) if err.size else math.nan
            # the s.e.'s honesty: its mean over the sd of the error, and the share of replicates
            # whose upper bound holds the truth (issue 43)
            sd = row["error_sd"]
            row["se_over_sd"] = (row["se_mean"] / sd if sd == sd and sd > 0
                                 and row["se_mean"] == row["se_mean"] else math.nan)
            up = g["upper"].to_numpy(float)[ok] if "upper" in g else np.full(int(ok.sum()), np.nan)
            has = np.isfinite(up)
            row["coverage"] = (float(np.mean(truth[ok][has] <= up[has] + 1e-9 * np.maximum(
                1.0, np.abs(up[has])))) if has.any() else math.nan)
            if pairs.get(name) == "tau1":
                n = g["n"].to_numpy(float)[ok]
                row["nmse"] = float(np.mean((err / n) ** 2)) if err.size else math.nan
            rel = g["reliable"]
            if rel.notna().any():
                row["reliable_share"] = float(rel.dropna().astype(bool).mean())
        out.append(row)
    cols = ["fraction", "measure", "truth_measure", "replicates", "defined", "n_mean",
            "true_mean", "true_sd", "estimate_mean", "estimate_sd", "error_mean", "error_sd",
            "se_mean", "se_sd", "se_over_sd", "coverage", "rmse", "nmse", "reliable_share"]
    df = pd.DataFrame(out)
    for c in cols:
        if c not in df:
            df[c] = math.nan
    order = {m: i for i, m in enumerate(names)}
    df["_o"] = df["measure"].map(order)
    df = df.sort_values(["fraction", "_o"], kind="stable").drop(columns="_o")
    return df[cols].reset_index(drop=True)
