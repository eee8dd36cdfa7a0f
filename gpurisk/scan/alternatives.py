"""Recodes side by side: unique counts and measures before -> after (Kim & Jeong Tables 3-5): the
alternatives, the comparison table, and the columns no coding gives (the workflow that puts them
together is :mod:`gpurisk.workflows.compare`).

The records are counted once; each alternative regroups that finest table's categories and rolls it up
to every combination, so an alternative costs no pass over the records.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from gpurisk.core.messages import bad_input
from gpurisk.freq.recode import Recode, parse_recodes

#: how messages name the option an alternative came from
ALT = "{arg:--alt|alternatives}"
from gpurisk.scan.runner import RANK_PREFERENCE


#: what compare computes unless --measures says otherwise: the unique counts (shown as one column,
#: population uniques N1 with a population, else sample uniques n1), then these: matches_ll (Ê, the
#: expected correct matches, which ranks the rows as it ranks a scan), matches_hat (θ̂·n1, a lower
#: estimate of E), θ̂
DEFAULT_MEASURES = ("pop_uniques", "sample_uniques", "pr_pu", "matches_ll", "matches_hat",
                    "theta_hat")
#: the same where the population counts are known (a register, a population, π = 1): the exact E
#: (``matches``, which ranks the rows) and θ instead of their estimates (issue 40: exact first)
EXACT_MEASURES = ("pop_uniques", "sample_uniques", "pr_pu", "matches", "theta")


def default_measures_text() -> str:
    """The default measures as ``compare --help`` lists them."""
    return ("N1 (pop_uniques) with a population, else n1 (sample_uniques); "
            + ", ".join(m for m in DEFAULT_MEASURES if not m.endswith("_uniques"))
            + "; with population counts the exact "
            + ", ".join(m for m in EXACT_MEASURES if not m.endswith("_uniques") and m != "pr_pu")
            + " instead of the estimates")


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
        raise bad_input(f"alternative {index}: no recode given (e.g. {{arg:--alt age=bands:5|'age=bands:5'}})")
    recodes = parse_recodes(items, ALT)
    return Alternative("; ".join(str(r) for r in recodes), recodes)


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
