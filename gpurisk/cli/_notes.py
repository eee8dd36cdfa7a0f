"""The note column of ``gpurisk assess``: what a threshold-based measure's value was computed with.

A count such as 674 records violating k-anonymity means nothing without its k; indiv_risk = 0.0054
is easier to act on as "24.8 expected re-identifications"; an estimate with a two-sided interval
(``lower``, ``upper`` at ``level``) says so, and a log-linear model names the interactions it kept.
The measures put these in their ``extra`` fields (the JSON shows them all); :func:`measure_note`
turns the ones a statistician acts on into one short text.
Fields are read by name, so a third-party measure that uses the same names gets the same note.
"""
from __future__ import annotations

import re


def _num(v) -> str:
    if isinstance(v, float):
        if v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"
    return str(v)


def _pct(share) -> str:
    return f"{100 * share:.3g} %"


def measure_note(m: dict) -> str:
    """One line for the note column of a measure's JSON entry ``m`` ("" when there is nothing)."""
    parts: list[str] = []
    if m.get("k") is not None and m.get("cells_violating") is not None:
        share = m.get("share_violating")
        records = m.get("records_violating", m.get("value"))
        parts.append((f"k achieved {_num(m['k_achieved'])}; at " if m.get("k_achieved") is not None else "")
                     + f"k = {_num(m['k'])}: {_num(records)} records"
                     + (f" ({_pct(share)})" if share is not None else "")
                     + f" in {_num(m['cells_violating'])} cells with fewer than k")
    if m.get("l") is not None and m.get("cells_below_l") is not None:
        parts.append(f"l = {_num(m['l'])}: {_num(m.get('records_below_l'))} records in "
                     f"{_num(m['cells_below_l'])} cells below l")
    if m.get("threshold") is not None:
        if m.get("records_above_threshold") is not None:
            parts.append(f"threshold {_num(m['threshold'])}: {_num(m['records_above_threshold'])} "
                         "records above")
        elif m.get("pr_pu") is not None:
            parts.append(f"threshold {_num(m['threshold'])} on Pr(PU) = {_num(m['pr_pu'])}")
        else:
            parts.append(f"threshold {_num(m['threshold'])}")
    above = sorted(((float(k[6:]), v) for k, v in m.items()
                    if re.fullmatch(r"above_[0-9.eE+-]+", k) and v is not None), key=lambda t: t[0])
    if above:
        parts.append("records with risk " + ", ".join(f"> {_num(t)}: {_num(v)}" for t, v in above))
    if m.get("interval_lower") is not None and m.get("interval_upper") is not None \
            and m.get("interval_level") is not None:         # the one convention: gpurisk.core.levels
        from gpurisk.core.levels import interval_words
        parts.append(f"{interval_words(float(m['interval_level']))} "
                     f"{_num(float(m['interval_lower']))} to {_num(float(m['interval_upper']))}")
    elif m.get("lower") is not None and m.get("level") is not None and m.get("upper") is not None:
        from gpurisk.core.levels import interval_words     # a plugin's own (lower, upper) at level
        parts.append(f"{interval_words(float(m['level']))} {_num(float(m['lower']))} to "
                     f"{_num(float(m['upper']))}")
    if isinstance(m.get("interactions"), str) and m["interactions"]:
        parts.append("main effects + " + m["interactions"].replace(" x ", " × "))
    if m.get("expected_reidentifications") is not None:
        parts.append(f"expected re-identifications {_num(float(m['expected_reidentifications']))}")
    if m.get("experimental") is True:
        parts.append("experimental")
    if m.get("se") is None and m.get("value") is not None and m.get("se_reason"):
        parts.append(m["se_reason"])
    if m.get("cells_raised_to_count"):
        parts.append(f"{_num(m['cells_raised_to_count'])} cell(s) with weights summing below their "
                     "count raised to it (calibrated weights below 1)")
    if m.get("reason"):
        parts.append(m["reason"])
    if isinstance(m.get("note"), str) and m["note"]:
        parts.append(m["note"])
    if m.get("reliable") is False:
        parts.append("reliable: false")
    return "; ".join(parts)
