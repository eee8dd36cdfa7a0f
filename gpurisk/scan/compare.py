"""Recodes side by side: unique counts and measures before -> after (Kim & Jeong Tables 3-5).

The records are counted once; each alternative regroups that finest table's categories and rolls it up
to every combination, so an alternative costs no pass over the records.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from gpurisk.errors import BadInput
from gpurisk.freq.lattice import Lattice, regroup
from gpurisk.measure import Context
from gpurisk.freq.recode import Recode, code_maps, parse_recodes
from gpurisk.scan.plan import build_plan, combo_seed, root_keys
from gpurisk.scan.runner import RANK_PREFERENCE, _measure_names, _scan_options, combination_row


#: what compare computes unless --measures says otherwise: the unique counts (shown as one column,
#: population uniques N1 with a population, else sample uniques n1), then these
DEFAULT_MEASURES = ("pop_uniques", "sample_uniques", "pr_pu", "matches_hat", "theta_hat")


def default_measures_text() -> str:
    """The default measures as ``compare --help`` lists them."""
    return ("N1 (pop_uniques) with a population, else n1 (sample_uniques); "
            + ", ".join(m for m in DEFAULT_MEASURES if not m.endswith("_uniques")))


@dataclass
class Alternative:
    name: str
    recodes: list[Recode]


@dataclass
class Comparison:
    """Rows: combinations. ``table`` holds, per alternative name, each counted column and measure."""

    table: pd.DataFrame
    alternatives: list[Alternative]
    columns: list[str]
    uniques: str                    # "N1" (population uniques) or "n1" (sample uniques)
    settings: dict = field(default_factory=dict)
    #: why a value is missing: same rows as ``table``, columns ``"{col} [{label}]"``, None where
    #: the value is defined (the CLI prints these as footnotes to its "—" cells)
    reasons: pd.DataFrame | None = None
    #: measures left out because they apply to no row under any coding: name -> why
    left_out: dict = field(default_factory=dict)

    @property
    def rank_by(self) -> str | None:
        """The measure the rows are ranked by (as scan's default), or None (plan order)."""
        return next((c for c in RANK_PREFERENCE if c in self.columns and c != self.uniques), None)

    def ranked(self, table: pd.DataFrame, reasons: pd.DataFrame | None = None):
        """``table`` (:attr:`table` or :meth:`affected`) and its reasons, riskiest first by
        :attr:`rank_by` under the original coding."""
        by = self.rank_by
        if by is None or f"{by} [original]" not in table:
            return table, reasons
        key = table[f"{by} [original]"].astype(float)
        order = (table.assign(_r=key.fillna(-np.inf))
                 .sort_values(["_r", "size", "order"], ascending=[False, True, True], kind="stable")
                 .index)
        t = table.loc[order].reset_index(drop=True)
        return t, (reasons.loc[order].reset_index(drop=True) if reasons is not None else None)

    def affected(self) -> pd.DataFrame:
        """Rows whose combination contains a key some alternative recodes (as in the paper's tables)."""
        return self.table[self._affected_mask()].reset_index(drop=True)

    def affected_reasons(self) -> pd.DataFrame | None:
        """:attr:`reasons` of the rows of :meth:`affected`."""
        if self.reasons is None:
            return None
        return self.reasons[self._affected_mask().to_numpy()].reset_index(drop=True)

    def _affected_mask(self) -> pd.Series:
        keys = {r.key for a in self.alternatives for r in a.recodes}
        return self.table["keys"].map(lambda ks: bool(keys & set(ks)))


def parse_alternative(text: str | Sequence, index: int) -> Alternative:
    """``"age=bands:5;relationship=map:rel.csv"`` (recodes separated by ';') -> Alternative."""
    if isinstance(text, Alternative):
        return text
    items = [s.strip() for s in text.split(";") if s.strip()] if isinstance(text, str) else list(text)
    if not items:
        raise BadInput(f"alternative {index}: no recode given (e.g. --alt age=bands:5)")
    recodes = parse_recodes(items)
    return Alternative("; ".join(str(r) for r in recodes), recodes)


def compare(data, keys: Sequence[str], alternatives: Iterable, cumulative: bool = False,
            max_size: int | None = None, min_size: int = 1, fraction: float | None = None,
            population=None, sample_flag: str | None = None, weights: str | None = None,
            measures: Iterable[str] | None = None, options: Mapping | None = None,
            alpha: float = 0.01, seed: int = 0, missing: str = "category",
            backend: str | None = None, sep: str | None = None, encoding: str = "utf-8",
            recode=None, allow_high_cardinality: bool = False) -> Comparison:
    """Every subset of ``keys`` (up to ``max_size``) under the original coding and each alternative.

    With ``cumulative`` each alternative adds its recodes to the previous ones (Table 3 -> 4 -> 5).
    ``measures`` defaults to the unique counts plus pr_pu, matches_hat (the estimated number of
    correct unique matches, θ̂·n1) and theta_hat (:data:`DEFAULT_MEASURES`). A measure that applies
    to no row under any coding (pr_pu without a population, θ̂ without π) is left out of the table
    and named in :attr:`Comparison.left_out` with the reason. :meth:`Comparison.ranked` orders the rows by
    matches_hat under the original coding, as scan ranks. ``recode`` (as in
    :func:`gpurisk.assess`) is the original coding: the alternatives regroup it further. The data
    are read, checked and counted by :class:`gpurisk.inputs.Inputs`, as every command.
    """
    from gpurisk.inputs import Inputs, key_list
    from gpurisk.core.settings import Design, Run
    design = Design(fraction=fraction, population=population, sample_flag=sample_flag,
                    weights=weights)
    run = Run(measures=measures, options=options, alpha=alpha, seed=seed)   # checked once
    measures = None if run.measures is None else list(run.measures)
    options, alpha, seed = run.options, run.alpha, run.seed
    keys = key_list(keys)
    alts = [parse_alternative(a, i + 1) for i, a in enumerate(alternatives)]
    if not alts:
        raise BadInput("compare needs at least one alternative recode (--alt KEY=SPEC)")
    if cumulative:
        merged: dict[str, Recode] = {}
        stacked = []
        for a in alts:
            merged.update({r.key: r for r in a.recodes})
            stacked.append(Alternative(a.name if not stacked else f"+ {a.name}", list(merged.values())))
        alts = stacked
    combos = build_plan(keys, max_size, min_size, hint=None)
    rkeys = root_keys(keys, combos)
    for a in alts:
        for r in a.recodes:
            if r.key not in rkeys:
                raise BadInput(f"--alt {r}: {r.key!r} is not one of --keys ({', '.join(rkeys)})")
    names = _measure_names(measures if measures is not None else list(DEFAULT_MEASURES))
    opts = _scan_options(names, options)
    rkeys = sorted(rkeys)            # as in scan: one cell order per key set
    inp = Inputs(data, rkeys, **design.kwargs(), missing=missing, recode=recode, backend=backend, sep=sep,
                 encoding=encoding, allow_high_cardinality=allow_high_cardinality)
    t0 = time.perf_counter()
    counted = inp.count()
    root, pi, source = counted.table, counted.fraction, counted.fraction_source
    uniques = "N1" if root.F is not None else "n1"
    frames = {}
    for label, recodes in [("original", [])] + [(a.name, a.recodes) for a in alts]:
        table = regroup(root, root.keys, code_maps(root, recodes)) if recodes else root
        rows = {}
        for i, tab in Lattice(table).tables([c.keys for c in combos]):
            c = combos[i]
            ctx = Context(fraction=pi, fraction_source=source, alpha=float(alpha),
                          seed=combo_seed(seed, c.keys), options=opts)
            rows[i] = combination_row(i, c, tab, ctx, names)
        frames[label] = pd.DataFrame([rows[i] for i in range(len(combos))])
    base = frames["original"]
    out = base[["order", "combo", "keys", "size"]].copy()
    columns = [uniques] + [m for m in names if m not in ("pop_uniques", "sample_uniques")]
    why = pd.DataFrame(index=out.index)
    for label, fr in frames.items():
        for col in columns:
            out[f"{col} [{label}]"] = fr[col].to_numpy()
            why[f"{col} [{label}]"] = (fr[f"{col}_reason"].to_numpy() if f"{col}_reason" in fr
                                       else None)
        out[f"cells [{label}]"] = fr["cells"].to_numpy()
    left_out = _not_applicable(out, why, columns[1:], list(frames))
    dropped = [f"{c} [{lab}]" for c in left_out for lab in frames]
    out, why = out.drop(columns=dropped), why.drop(columns=dropped)
    columns = [c for c in columns if c not in left_out]
    settings = {"n": root.n, "N": root.N, "fraction": pi, "keys": rkeys,
                "alternatives": [a.name for a in alts], "cumulative": cumulative,
                "seconds": time.perf_counter() - t0}
    return Comparison(out, alts, columns, uniques, settings, why, left_out)


def _not_applicable(out: pd.DataFrame, why: pd.DataFrame, columns: Sequence[str],
                    labels: Sequence[str]) -> dict[str, str]:
    """column -> the reason, for each column with no value in any row under any coding."""
    left: dict[str, str] = {}
    for col in columns:
        cols = [f"{col} [{lab}]" for lab in labels]
        if out[cols].notna().to_numpy().any():
            continue
        reasons = why[cols].stack() if why[cols].notna().to_numpy().any() else pd.Series([], dtype=object)
        left[col] = str(reasons.mode().iloc[0]) if len(reasons) else "no value in any row"
    return left
