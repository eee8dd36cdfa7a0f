"""The office's release policy and the verdict per criterion, from a scan's rows (and a SUDA
summary for the per-record risk).

A policy is a small TOML or JSON file (a ``[policy]`` table or top-level keys) or the same
thresholds given as flags; every threshold is optional:

``max_expected_matches``  expected correct matches E at most X in every scanned combination:
                          judged on Ê (``matches_ll``, the log-linear estimate), with its
                          one-sided upper bound (``matches_ll_upper``, level 1 − α of the scan)
                          named beside; a scan without Ê is judged on θ̂·n1 (``matches_hat``), a
                          lower estimate of E, and the verdict says so; a scan with population
                          counts on the exact E (``matches``)
``min_k``                 k-anonymity: every record shares its key values with at least k − 1
                          others in every scanned combination (from the scan's n1, n2, n3: k ≤ 4)
``max_record_risk``       no record's probability of a correct match above r (the DIS-SUDA
                          probability of a SUDA summary; not checked without one)
``max_theta_upper``       θ̂'s one-sided upper bound at most X in every combination

With population counts (a scan of a register, or with a population) E and θ are counted: the
verdicts read the exact ``matches`` and ``theta`` and say so.
``name``                  the policy's name, shown on the page
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from pathlib import Path

import pandas as pd

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input, phrase

#: records in cells of r records are counted by the scan's n_r columns for these r
_NR = {1: "n1", 2: "n2", 3: "n3"}


@dataclass(frozen=True)
class Policy:
    max_expected_matches: float | None = None
    min_k: int | None = None
    max_record_risk: float | None = None
    max_theta_upper: float | None = None
    name: str | None = None
    source: str = "flags"

    @property
    def empty(self) -> bool:
        return all(getattr(self, f) is None for f in
                   ("max_expected_matches", "min_k", "max_record_risk", "max_theta_upper"))


_KNOWN = [f.name for f in fields(Policy) if f.name != "source"]


def _number(name: str, v, integer: bool = False):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
        raise BadInput(f"policy {name}: a number is needed")
    if integer:
        if float(v) != int(v) or int(v) < 2:
            raise BadInput(f"policy {name}: a whole number of at least 2 is needed")
        return int(v)
    if float(v) < 0:
        raise BadInput(f"policy {name}: must not be negative")
    return float(v)


def load_policy(path=None, **flags) -> Policy:
    """The policy of ``path`` (TOML or JSON), with each threshold given in ``flags`` (not None)
    taking the place of the file's."""
    doc: dict = {}
    source = "flags"
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise bad_input(f"{{arg:--policy|policy}} {str(path)!r}: no such file")
        text = p.read_text(encoding="utf-8")
        try:
            if p.suffix.lower() == ".json":
                doc = json.loads(text)
            else:
                try:
                    import tomllib
                except ModuleNotFoundError:      # Python 3.10
                    raise bad_input("{arg:--policy|policy}: TOML needs Python 3.11 or later; write the policy "
                                   "as JSON") from None
                doc = tomllib.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise bad_input(f"{{arg:--policy|policy}} {p.name!r} is not valid {'JSON' if p.suffix.lower() == '.json' else 'TOML'} "
                           f"({type(exc).__name__})") from None
        if not isinstance(doc, dict):
            raise bad_input(f"{{arg:--policy|policy}} {p.name!r}: expected a table of thresholds")
        doc = doc.get("policy", doc)
        if not isinstance(doc, dict):
            raise bad_input(f"{{arg:--policy|policy}} {p.name!r}: [policy] must be a table of thresholds")
        unknown = sorted(set(doc) - set(_KNOWN))
        if unknown:
            raise bad_input(f"{{arg:--policy|policy}} {p.name!r}: unknown entry {unknown[0]!r} (known: "
                           f"{', '.join(_KNOWN)})")
        source = p.name
    given = {k: v for k, v in flags.items() if v is not None}
    if given and path is not None:
        source = f"{source}, with flags for {', '.join(sorted(given))}"
    doc = {**doc, **given}
    unknown = sorted(set(doc) - set(_KNOWN))
    if unknown:
        raise BadInput(f"unknown policy threshold {unknown[0]!r} (known: {', '.join(_KNOWN)})")
    name = doc.get("name")
    return Policy(max_expected_matches=_number("max_expected_matches", doc.get("max_expected_matches")),
                  min_k=_number("min_k", doc.get("min_k"), integer=True),
                  max_record_risk=_number("max_record_risk", doc.get("max_record_risk")),
                  max_theta_upper=_number("max_theta_upper", doc.get("max_theta_upper")),
                  name=None if name is None else str(name), source=source)


@dataclass
class Verdict:
    criterion: str          # the policy's criterion in words
    status: str             # "met", "fails" or "not checked"
    words: str              # the verdict in words, with the numbers behind it
    value: float | None = None


def _combo(row) -> str:
    name = ", ".join(row["keys"])
    sc = row.get("scenario")
    return f"{sc}: ({name})" if isinstance(sc, str) and sc and sc != name else f"({name})"


def _num(v: float) -> str:
    v = float(v)
    return f"{int(round(v)):,}".replace(",", " ") if v == round(v) and abs(v) < 1e15 else f"{v:.3g}"


def _worst(df: pd.DataFrame, col: str):
    vals = df[col].astype(float)
    i = vals.idxmax()
    return float(vals[i]), df.loc[i]


def _amount(v: float) -> str:
    """An estimated count for a sentence: 3 significant digits below 1 000, whole above (no e+03)."""
    v = float(v)
    return f"{v:.3g}" if abs(v) < 1000 else _num(round(v))


def _has(df: pd.DataFrame, col: str) -> bool:
    return col in df.columns and df[col].notna().sum() > 0


def _matches_verdict(x: float, df: pd.DataFrame) -> Verdict:
    """The verdict on ``max_expected_matches``: Ê (matches_ll) against X in every combination, its
    one-sided upper bound named beside (how many combinations it puts above X, so a pass close to
    the line reads as one); without Ê, θ̂·n1, which is a lower estimate of E, so a pass is no proof."""
    crit = f"expected correct matches at most {_num(x)} in every combination"
    total = len(df)
    if _has(df, "matches"):       # a register: E is counted, not estimated (issue 40)
        vals = df["matches"].astype(float)
        worst, row = _worst(df, "matches")
        over = int((vals > x).sum())
        judged = " Judged on the exact E (matches), counted from the population counts."
        if over:
            return Verdict(crit, "fails", f"Fails: {over} of {total} combinations have E above "
                           f"{_num(x)}; the riskiest, {_combo(row)}, has E = {_amount(worst)} "
                           f"expected correct matches.{judged}", worst)
        return Verdict(crit, "met", f"Met: the largest E is {_amount(worst)} expected correct "
                       f"matches, in {_combo(row)}.{judged}", worst)
    if _has(df, "matches_ll"):
        vals = df["matches_ll"].astype(float)
        up = (df["matches_ll_upper"].astype(float) if "matches_ll_upper" in df.columns
              else pd.Series(float("nan"), index=df.index))
        worst, row = _worst(df, "matches_ll")
        i = vals.idxmax()
        over = int((vals > x).sum())
        up_over = int((up > x).sum())
        none = int(vals.isna().sum())
        bound = up[i]
        judged = ("Judged on Ê (matches_ll), the log-linear estimate of E"
                  + (f"; its one-sided upper bound is above {_num(x)} in {up_over} combination(s)"
                     if up_over else f"; every one-sided upper bound is at most {_num(x)}")
                  + (f"; {none} combination(s) have no Ê" if none else "") + ".")
        interval = f" (upper bound {_amount(bound)})" if math.isfinite(bound) else ""
        if over:
            return Verdict(crit, "fails", f"Fails: {over} of {total} combinations have Ê above "
                           f"{_num(x)}; the riskiest, {_combo(row)}, has Ê = {_amount(worst)} expected "
                           f"correct matches{interval}. {judged}", worst)
        return Verdict(crit, "met", f"Met: the largest Ê is {_amount(worst)} expected correct matches"
                       f"{interval}, in {_combo(row)}. {judged}", worst)
    if _has(df, "matches_hat"):
        worst, row = _worst(df, "matches_hat")
        over = int((df["matches_hat"].astype(float) > x).sum())
        low = (" Judged on θ̂·n1 (matches_hat): the scan has no Ê (matches_ll), and θ̂·n1 is a "
               "LOWER estimate of E, so the true E may be higher; rescan with the default "
               "measures to judge on Ê.")
        if over:
            return Verdict(crit, "fails", f"Fails: {over} of {total} combinations exceed {_num(x)}; "
                           f"the riskiest, {_combo(row)}, has θ̂·n1 = {_amount(worst)}.{low}", worst)
        return Verdict(crit, "met", f"Met on a lower estimate: the largest θ̂·n1 is {_amount(worst)}, in "
                       f"{_combo(row)}.{low}", worst)
    return Verdict(crit, "not checked", "The scan has no estimate of the expected correct matches "
                   "(matches_ll or matches_hat): scan with the default measures and a sampling "
                   "fraction.")


def evaluate(policy: Policy, df: pd.DataFrame, suda: dict | None = None) -> list[Verdict]:
    """One :class:`Verdict` per threshold the policy sets, in the policy's order."""
    out = []
    total = len(df)
    x = policy.max_expected_matches
    if x is not None:
        out.append(_matches_verdict(x, df))
    k = policy.min_k
    if k is not None:
        crit = f"k-anonymity: k ≥ {k} in every combination"
        need = [_NR[r] for r in range(1, k)] if k <= 4 else None
        if need is None or any(c not in df.columns for c in need):
            out.append(Verdict(crit, "not checked", "The scan counts cells of 1, 2 and 3 records "
                               "only, so k above 4 is not checked here; run gpurisk assess with "
                               "k_anonymity on the riskiest combination."))
        else:
            bad = sum(df[_NR[r]].astype("int64") * r for r in range(1, k))
            achieved = pd.Series(4, index=df.index)
            for r in (3, 2, 1):
                achieved = achieved.where(df[_NR[r]].astype("int64") == 0, r)
            failing = int((bad > 0).sum())
            if failing:
                i = bad.idxmax()
                small = "a cell of one record" if k == 2 else f"cells of fewer than {k} records"
                out.append(Verdict(crit, "fails", f"Fails: {failing} of {total} combinations have "
                                   f"records in {small}; in {_combo(df.loc[i])} "
                                   f"{_num(bad[i])} records (k achieved: {int(achieved[i])}).",
                                   float(achieved.min())))
            else:
                out.append(Verdict(crit, "met", f"Met: every cell of every scanned combination "
                                   f"holds at least {k} records (k achieved: "
                                   f"{'≥ 4' if achieved.min() >= 4 else int(achieved.min())}).",
                                   float(achieved.min())))
    r = policy.max_record_risk
    if r is not None:
        crit = f"no record's risk above {r:g}"
        if suda and suda.get("dis_max") is not None:
            m = float(suda["dis_max"])
            status = "fails" if m > r else "met"
            out.append(Verdict(crit, status, f"{'Fails' if m > r else 'Met'}: the largest DIS-SUDA "
                               f"probability of a correct match of a record is {m:.3g} (SUDA on "
                               f"{', '.join(suda.get('keys', []))}).", m))
        else:
            out.append(Verdict(crit, "not checked", phrase(
                "The scan holds no per-record risk; give a SUDA summary ({arg:gpurisk suda … --json|"
                "suda=SUMMARY.json}) to check it.")))
    t = policy.max_theta_upper
    if t is not None:
        crit = f"θ̂'s upper bound at most {t:g} in every combination"
        if _has(df, "theta"):     # a register: θ is counted; no bound is needed (issue 40)
            crit = f"θ at most {t:g} in every combination"
            vals = df["theta"].astype(float)
            over = int((vals > t).sum())
            i = vals.idxmax()
            judged = " Judged on the exact θ (theta), counted from the population counts."
            out.append(Verdict(crit, "fails" if over else "met",
                               (f"Fails: {over} of {total} combinations have θ above {t:g}; the "
                                f"largest is {vals[i]:.3g}, in {_combo(df.loc[i])}." if over else
                                f"Met: the largest θ is {vals[i]:.3g}, in {_combo(df.loc[i])}.")
                               + judged, float(vals[i])))
        elif "theta_hat" not in df.columns or df["theta_hat"].notna().sum() == 0:
            out.append(Verdict(crit, "not checked", "The scan has no θ̂ (theta_hat) value."))
        else:
            up = df["theta_hat_upper"].fillna(df["theta_hat"]).astype(float) \
                if "theta_hat_upper" in df.columns else df["theta_hat"].astype(float)
            over = int((up > t).sum())
            none = int(up.isna().sum())
            i = up.idxmax()
            tail = f" ({none} combinations have no θ̂: not estimable)" if none else ""
            if over:
                out.append(Verdict(crit, "fails", f"Fails: {over} of {total} combinations have an "
                                   f"upper bound above {t:g}; the largest is {up[i]:.3g}, in "
                                   f"{_combo(df.loc[i])}{tail}.", float(up[i])))
            else:
                out.append(Verdict(crit, "met", f"Met: the largest upper bound is {up[i]:.3g}, in "
                                   f"{_combo(df.loc[i])}{tail}.", float(up[i])))
    return out


def overall(verdicts: list[Verdict]) -> tuple[str, str]:
    """(status, sentence) of the whole policy: "fails" when any criterion fails."""
    if not verdicts:
        return "none", phrase("No policy was given ({arg:--policy FILE|policy=FILE} or thresholds): "
                               "the page shows the numbers but no verdict.")
    bad = [v for v in verdicts if v.status == "fails"]
    unchecked = [v for v in verdicts if v.status == "not checked"]
    if bad:
        return "fails", (f"The release does NOT meet the policy: {len(bad)} of {len(verdicts)} "
                         "criteria fail.")
    if unchecked:
        return "unchecked", (f"The release meets the {len(verdicts) - len(unchecked)} criteria "
                             f"checked; {len(unchecked)} could not be checked from these inputs.")
    return "met", f"The release meets every criterion of the policy ({len(verdicts)})."
