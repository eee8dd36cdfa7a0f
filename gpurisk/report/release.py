"""The office's policy applied to the release after protection, for the decision page.

Two sources, and the page says which one each verdict rests on:

- **the released file** (``gpurisk report --release FILE``, ``write_report(release=...)``): the
  release is scanned here with the scan's own settings (its key variables, the same sizes of
  combination, π) and the policy is judged on it exactly as on the file as it is. Suppressed values
  are missing in the release and count as a category of their own, as ``scan`` counts missing
  values by default. The per-record risk (DIS-SUDA) needs a SUDA run on the release: not checked.
- **protect's plan alone**: the plan records the worst value of each of protect's criteria on the
  release (``released_worst``), on protect's scenarios of key variables only. A policy threshold is
  judged from it where protect had a criterion on the same figure (``min_k`` from ``k_anonymity``,
  ``max_theta_upper`` from ``theta`` (exact, with population counts), else ``theta_hat.upper``,
  ``max_expected_matches`` from ``matches`` (exact), else ``matches_ll``, else ``matches_hat``);
  the others are "not checked", with the way to check them.
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input, phrase
from gpurisk.report.policy import Policy, Verdict, _num, evaluate, overall

_CRIT = re.compile(r"^\s*([A-Za-z_]\w*)(?:\.(\w+))?\s*(<=|<|>=|>)\s*(\S+)\s*$")


def _protect_figure(plan: dict, measure: str, fields: tuple) -> tuple[str, float] | None:
    """(criterion text, worst value on the release) of the protect criterion on ``measure``."""
    worst = plan.get("released_worst") or plan.get("worst") or {}
    for text, value in worst.items():
        m = _CRIT.match(str(text))
        if m and m.group(1) == measure and (m.group(2) or "value") in fields and value is not None:
            return text, float(value)
    return None


def from_plan(policy: Policy, plan: dict, combos=None) -> list[Verdict]:
    """The policy judged on protect's own figures for the release (its scenarios only).

    A criterion the plan meets holds for the policy's "every combination" only where protect's
    scenarios cover the scan's ``combos`` (key sets): k-anonymity holds in every subset of a
    scenario; θ̂ and the expected matches need the very combination. Where they do not cover them
    a "met" becomes "not checked" (a "fails" stays: it fails on protect's own scenario)."""
    scen = plan.get("scenarios") or [plan.get("keys", [])]
    sets = [set(s) for s in scen]
    combos = [tuple(c) for c in (combos or [])]
    outside_k = [c for c in combos if not any(set(c) <= s for s in sets)]
    outside = [c for c in combos if set(c) not in sets]
    where = (f"on protect's {len(scen)} scenario{'s' if len(scen) != 1 else ''} of key variables "
             f"({'; '.join(', '.join(s) for s in scen)}), from the plan")
    how = phrase("give the released file to the page ({arg:--release FILE|release=FILE}) to assess it")
    out = []
    x = policy.max_expected_matches
    if x is not None:
        crit = f"expected correct matches at most {_num(x)} in every combination"
        got, what = _protect_figure(plan, "matches", ("value",)), "E (expected correct matches, exact)"
        if got is None:
            got = _protect_figure(plan, "matches_ll", ("value",))
            what = "Ê (expected correct matches)"
        if got is None:       # θ̂·n1 is a lower estimate of E: a pass on it is said to be one
            got = _protect_figure(plan, "matches_hat", ("value",))
            what = "θ̂·n1 (a LOWER estimate of the expected correct matches)"
        out.append(_judge(crit, got, lambda v: v <= x, what, where, how, outside, len(combos)))
    k = policy.min_k
    if k is not None:
        crit = f"k-anonymity: k ≥ {k} in every combination"
        got = _protect_figure(plan, "k_anonymity", ("value", "k_achieved"))
        out.append(_judge(crit, got, lambda v: v >= k, "k achieved", where, how, outside_k,
                          len(combos)))
    r = policy.max_record_risk
    if r is not None:
        out.append(Verdict(f"no record's risk above {r:g}", "not checked",
                           "Not checked: the plan holds no per-record risk of the release; run "
                           "gpurisk suda on the released file."))
    t = policy.max_theta_upper
    if t is not None:
        crit = f"θ̂'s upper bound at most {t:g} in every combination"
        got, what = _protect_figure(plan, "theta", ("value",)), "θ (exact)"
        if got is None:
            got, what = _protect_figure(plan, "theta_hat", ("upper",)), "θ̂'s upper bound"
        out.append(_judge(crit, got, lambda v: v <= t, what, where, how, outside, len(combos)))
    return out


def _judge(crit, got, ok, what, where, how, outside=(), total=0) -> Verdict:
    if got is None:
        return Verdict(crit, "not checked", f"Not checked: protect had no criterion on it; {how}.")
    text, v = got
    shown = _num(v) if v == round(v) else f"{v:.3g}"
    if not ok(v):
        return Verdict(crit, "fails", f"Fails: {what} {shown} {where} (protect's criterion "
                       f"{text}).", v)
    if outside:
        return Verdict(crit, "not checked", f"Met on protect's scenarios only ({what} {shown}, "
                       f"protect's criterion {text}); {len(outside)} of the scan's {total} "
                       f"combinations lie outside them, e.g. ({', '.join(outside[0])}): {how}.", v)
    return Verdict(crit, "met", f"Met: {what} {shown} {where} (protect's criterion {text}), "
                   "which covers every scanned combination.", v)


def release_rows(release, settings: dict, df: pd.DataFrame, backend: str | None = None):
    """The released file scanned with the scan's settings: its rows (the scan's combinations)."""
    import gpurisk
    from gpurisk.scan.plan import Combination
    frame = isinstance(release, pd.DataFrame)
    p = Path("released frame" if frame else str(release))
    if not frame and not str(release).startswith("example:") and not p.exists():
        raise bad_input(f"{{arg:--release|release}} {str(release)!r}: no such file")
    combos = list(dict.fromkeys(tuple(k) for k in df["keys"]))       # the scan's, in its order
    scenarios = [Combination(k, ",".join(k)) for k in combos]
    fraction = settings.get("fraction")
    try:
        res = gpurisk.scan(release if frame else str(release), scenarios=scenarios, fraction=fraction,
                           measures=["theta_hat", "matches_ll", "matches_hat"],
                           options=settings.get("options") or None,   # Ê's model, as the scan's
                           backend=backend)
    except BadInput as exc:
        raise bad_input(f"{{arg:--release|release}} {p.name!r}: {exc}") from None
    return res.results


def release_verdicts(policy: Policy, plan: dict | None, release=None, settings: dict | None = None,
                     df: pd.DataFrame | None = None) -> dict | None:
    """What the page shows of the policy on the release: its verdicts, the overall sentence, and
    where they come from (the released file, or protect's plan)."""
    if policy.empty or (plan is None and release is None):
        return None
    if release is not None:
        from gpurisk.io.provenance import file_identity
        rows = release_rows(release, settings or {}, df)
        verdicts = evaluate(policy, rows, None)
        for v in verdicts:
            if v.criterion.startswith("θ̂'s upper bound") and df is not None:
                v.words += worse_theta_explained(df, rows)
        for v in verdicts:
            if v.status == "not checked" and v.criterion.startswith("no record's risk"):
                v.words = phrase("Not checked: the per-record risk needs a SUDA run on the released file "
                                 "({arg:gpurisk suda RELEASE --json|gpurisk.suda(RELEASE)}), which the "
                                 "page was not given.")
        ident = {} if isinstance(release, pd.DataFrame) else (file_identity(str(release)) or {})
        other = bool(plan and plan.get("release_sha256") and ident.get("sha256")
                     and ident["sha256"] != plan["release_sha256"])
        what = (f"the released file {ident.get('name', Path(str(release)).name)} (sha256 "
                f"{ident.get('sha256', '?')})" if ident else "the released records in memory "
                "(a data frame, no checksum)")
        source = f"{what}, scanned here on the scan's {len(rows)} combinations of key variables"
    else:
        combos = list(dict.fromkeys(tuple(k) for k in df["keys"])) if df is not None else []
        verdicts = from_plan(policy, plan, combos)
        other = False
        source = "protect's plan (its figures for the release, on protect's scenarios only)"
    status, sentence = overall(verdicts)
    sentence = sentence.replace("The release", "The release after protection", 1)
    if verdicts and all(v.status == "not checked" for v in verdicts):
        sentence = (f"The release after protection: none of the {len(verdicts)} criteria could be "
                    "checked from these inputs" + (phrase("; give the released file ({arg:--release FILE|release=FILE}).")
                                                   if release is None else "."))
    return {"verdicts": verdicts, "status": status, "sentence": sentence, "source": source,
            "other_release": other}


#: how the release scan counts a suppressed value, against sdcMicro's and ARX's conventions
SUPPRESSED_COUNTING = (
    "Suppressed values are missing in the release and counted as a category of their own (gpurisk's "
    "convention, as scan and assess count missing values; sdcMicro counts a missing value as a "
    "wildcard matching every value of its key, which gives a record at least as large a count; ARX "
    "sets every key of a suppressed record to * and keeps them as one class, as gpurisk's "
    "--suppress records does).")


def worse_theta_explained(before: pd.DataFrame, after: pd.DataFrame) -> str:
    """"" unless θ̂'s largest one-sided upper bound is higher on the release than on the file as it
    is; then why, in the combination where it is largest: θ̂ is a share among unique matches, and
    protection left few sample uniques and pairs there, so its bound (eq. 9's, raised to the
    exact-Poisson bound where pairs are few) is wide while the expected correct matches fell."""
    def worst(df):
        if "theta_hat" not in df.columns:
            return None
        up = (df["theta_hat_upper"].fillna(df["theta_hat"]) if "theta_hat_upper" in df.columns
              else df["theta_hat"]).astype(float)
        return None if up.notna().sum() == 0 else (up.idxmax(), float(up.max()))
    a, b = worst(after), worst(before)
    if a is None or b is None or a[1] <= b[1]:
        return ""
    row = after.loc[a[0]]
    keys = tuple(row["keys"])
    same = before[before["keys"].map(tuple) == keys]
    if not len(same):
        return ""
    old = same.iloc[0]

    def num(v):
        return "—" if v is None or v != v else (f"{int(v)}" if float(v).is_integer() else f"{v:.3g}")

    def up(r):
        u = r.get("theta_hat_upper")
        return u if u is not None and u == u else r.get("theta_hat")
    text = (f" Higher than on the file as it is ({num(b[1])}; {num(up(old))} in ({', '.join(keys)})): "
            "θ̂ is the share of correct matches among an intruder's unique matches, not their "
            f"number; protection left n1 = {num(row.get('n1'))} sample uniques (was "
            f"{num(old.get('n1'))}) and n2 = {num(row.get('n2'))} sample pairs (was "
            f"{num(old.get('n2'))}) in ({', '.join(keys)}), so θ̂'s one-sided bound is wide "
            "(exact-Poisson where pairs are few)")
    for col, what in (("matches_ll", "Ê"), ("matches_hat", "θ̂·n1")):
        if col in after.columns and col in before.columns:
            text += (f", while the expected correct matches there fell from {num(old.get(col))} to "
                     f"{num(row.get(col))} ({what})" if (row.get(col) or 0) <= (old.get(col) or 0)
                     else f"; the expected correct matches there are {num(row.get(col))} ({what}, "
                     f"was {num(old.get(col))})")
            break
    return text + ". " + SUPPRESSED_COUNTING

