"""The report's words: what each column means, which combinations the plots leave out, what to do
next (commands built from the scan's own settings: its file, keys, π, recodes; no placeholder)."""
from __future__ import annotations

import math
import shlex
from pathlib import Path

import numpy as np
import pandas as pd

from gpurisk.core.messages import phrase
from gpurisk.scan.runner import top_combinations

#: one sentence per column a scan can hold, in words a statistician reads to a manager; measures
#: not listed here use the description they register (``gpurisk measures``)
MEANINGS = {
    "size": "the number of key variables an intruder is assumed to know and match on",
    "cells": "the number of distinct combinations of key values that occur in the release",
    "n1": "sample uniques: records that are the only one in the release with their key values",
    "n2": "cells of the release that hold exactly two records",
    "N1": "population uniques: people who are the only one in the population with their key values",
    "matches": "E, the expected number of records an intruder would correctly re-identify by "
               "matching each sample unique to a random person of the population with the same key "
               "values (E = Σ 1/F over the sample uniques), counted exactly from the population "
               "counts (the ranking of a scan with a population or register)",
    "matches_ll": "Ê, the expected number of records an intruder would correctly re-identify by "
                  "matching each sample unique to a random person of the population with the same "
                  "key values (E = Σ 1/F over the sample uniques), estimated by the log-linear model "
                  "of Skinner & Shlomo (2008) (the default ranking); the upper bound is one-sided",
    "matches_hat": "θ̂·n1, a lower estimate of the expected correct matches E (it estimates "
                   "n1²/ΣF, never above E); it orders combinations much as Ê does, and ranks a scan "
                   "that has no Ê; where the sample has no pair it is estimated with half a pair "
                   "and flagged",
    "theta_hat": "the estimated probability that a match an intruder finds on a unique key value is "
                 "correct (Skinner & Elliot 2002, eq. 7); the upper bound is one-sided, on the log "
                 "scale, at most 1; not estimable where the sample has no pair (n2 = 0)",
    "theta": "the true probability that a unique match is correct, computed from the population "
             "(Skinner & Elliot 2002, eq. 2)",
    "pr_pu": "the share of the population that is unique on the keys (Skinner & Elliot 2002, §2.2)",
    "pr_pu_su": "the share of sample uniques that are also unique in the population",
    "sample_uniques": "the number of records alone in their cell of the release (n1)",
    "pop_uniques": "the number of people alone in their cell of the population (N1)",
    "tau1_hat": "the estimated number of sample uniques that are population uniques "
                "(Camerlenghi et al. 2021)",
    "k_anonymity": "the k the file achieves (its smallest cell of records)",
}


def meaning(col: str) -> str:
    if col in MEANINGS:
        return MEANINGS[col]
    try:
        from gpurisk.plugins import measure_registry
        reg = measure_registry()
        if col in reg:
            return reg[col].cls.description
    except Exception:  # noqa: BLE001 - a report must not fail on a plugin that does not load
        pass
    return "a column of the scan"


def not_plotted(df: pd.DataFrame, col: str, top: int) -> list[str]:
    """Sentences saying which combinations the plots leave out, and why."""
    lines = []
    missing = df[df[col].isna()]
    if len(missing):
        why = (missing[f"{col}_reason"].fillna("no value, no reason given")
               if f"{col}_reason" in missing else pd.Series(["no value"] * len(missing)))
        # one line per kind of reason, not per combination's counts
        why = why.str.replace(r" ?\(n1 = \d+, n2 = \d+, n3 = \d+\)", "", regex=True)
        for reason, count in why.value_counts().items():
            lines.append(f"{count} combination(s) have no {col}: {reason}.")
    shown = int(df[col].notna().sum())
    if shown > top:
        lines.append(phrase(f"The top plot and table show the {top} highest of {shown} combinations "
                            f"with a value ({{arg:--top {top}|top={top}}}); the plot by size shows all "
                            f"{shown}."))
    if col != "theta_hat" and "theta_hat" in df.columns:
        none = int(df["theta_hat"].isna().sum())
        if none:
            lines.append(f"The θ̂ plot leaves out {none} combination(s) without θ̂ (no sample pair, "
                         "so θ̂ is not estimable, or no sample cell with one or two records).")
    return lines


def _nice_width(lo: float, hi: float) -> float:
    """The round band width (1, 2 or 5 times a power of ten) nearest, on the log scale, to the
    width of eight bands on [lo, hi]."""
    span = (hi - lo) / 8
    if not span > 0:
        return 1.0
    p = 10 ** math.floor(math.log10(span))
    return min((m * p for m in (1, 2, 5, 10)), key=lambda w: abs(math.log(w / span)))


def key_kind(settings: dict, key: str) -> tuple[str, float | None]:
    """("number", band width) or ("text", None) from the scanned file's column; ("unknown", None)
    when the file cannot be read (a frame scanned in memory, a file moved away)."""
    data = settings.get("data")
    if not isinstance(data, str) or data.startswith("<"):
        return "unknown", None
    try:
        from gpurisk.io import read_table
        col = read_table(data, columns=[key])[key]
    except Exception:  # noqa: BLE001 - the advice falls back to words
        return "unknown", None
    if pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
        v = col.dropna().to_numpy(dtype=float)
        if v.size:
            w = _nice_width(float(v.min()), float(v.max()))
            return "number", (int(w) if w == int(w) else w)
    return "text", None


def _common(settings: dict) -> list[str]:
    """The options that read the scanned records the way the scan read them."""
    words = []
    pi = settings.get("fraction")
    if settings.get("population"):
        words += ["--population", str(settings["population"])]
    elif settings.get("sample_flag"):
        words += ["--sample-flag", str(settings["sample_flag"])]
    elif isinstance(pi, (int, float)) and pi:
        words += ["--fraction", f"{pi:.4g}"]
    if settings.get("weights"):
        words += ["--weights", str(settings["weights"])]
    for r in settings.get("recode") or []:
        words += ["--recode", str(r)]
    return words


def next_steps(df: pd.DataFrame, col: str, contrib: pd.DataFrame, settings: dict,
               policy_status: str, plan=None, release=None, release_status: str | None = None
               ) -> list[dict]:
    """What to do next: ``{"text": sentence, "code": command or None, "after": sentence}``, from
    what the page was given: a protect ``plan`` (its path), the ``release`` it judged and the
    policy's status on it (``release_status``)."""
    steps = []
    data = settings.get("data")
    has_file = isinstance(data, str) and not data.startswith("<")
    common = _common(settings)
    if len(contrib) and contrib["drop"].iloc[0] > 0:
        r = contrib.iloc[0]
        k = r["key"]
        gone = (f" and makes {int(r['n1_drop'])} fewer records unique"
                if math.isfinite(r["n1_drop"]) and r["n1_drop"] > 0 else "")
        text = (f"Start with {k}: leaving it out of ({r['combination']}), the riskiest combination "
                f"that holds it (rank {int(r['rank'])}), lowers {col} by {r['drop']:.4g}{gone}, "
                "more than any other key.")
        kind, width = key_kind(settings, k)
        keys = list(settings.get("keys") or sorted({x for ks in df["keys"] for x in ks}))
        if kind == "number" and has_file:
            steps.append({"text": text + f" Coarsen it into bands of {width:g} and compare before "
                          "and after:",
                          "code": shlex.join(["gpurisk", "compare", data, "--keys", ",".join(keys),
                                              *common, "--alt", f"{k}=bands:{width:g}"]),
                          "after": "or drop it from the release."})
        elif has_file:
            others = [x for x in keys if x != k]
            steps.append({"text": text + f" {k} holds categories, not numbers: group them into "
                          "fewer (a map file of two columns, value and group, given to compare "
                          "as --alt with map:), or leave it out of the release; the risk without "
                          "it:",
                          "code": shlex.join(["gpurisk", "assess", data, "--keys", ",".join(others),
                                              *common]) if others else None,
                          "after": ""})
        else:
            steps.append({"text": text + " Coarsen or group it, or leave it out of the release.",
                          "code": None, "after": ""})
    ranked = top_combinations(df, 1, col)
    if len(ranked) and has_file:
        steps.append({"text": "Look at the riskiest combination with every measure (k-anonymity, "
                      "individual risk and the expected number of re-identifications):",
                      "code": shlex.join(["gpurisk", "assess", data, "--keys",
                                          ",".join(ranked["keys"].iloc[0]), *common]),
                      "after": ""})
    plan_file = str(plan) if isinstance(plan, (str, Path)) else None
    judged_file = release is not None
    if judged_file and release_status == "met":
        steps.append({"text": "The release after protection meets the policy: release the file "
                      "this page judged (its identity is in the release verdict above), and keep "
                      "this page with it.", "code": None, "after": ""})
    elif judged_file and release_status == "fails":
        steps.append({"text": "The release after protection still fails the policy: protect again "
                      "with stricter criteria (the failing figure's threshold), coarser hierarchy "
                      "levels or a larger suppression limit, then write this page again with the "
                      "new plan and release.", "code": None, "after": ""})
    elif judged_file:
        steps.append({"text": "Some criteria could not be checked on the release (the release "
                      "verdict above says why and what to give); give the page what each names.",
                      "code": None, "after": ""})
    elif plan_file and release_status == "fails":
        steps.append({"text": "The plan given here does not meet the policy by its own figures: "
                      "protect again with stricter criteria, coarser hierarchy levels or a larger "
                      "suppression limit, then give this page the new plan and its release.",
                      "code": None, "after": ""})
    elif plan_file:
        cmd = (shlex.join(["gpurisk", "protect", data, "--from-plan", plan_file, "-o",
                           "release.csv"]) if has_file else None)
        steps.append({"text": "This page was given the protect run's plan but not its release: "
                      "write the release from the plan and give it to this page (--release "
                      "release.csv), which then judges the policy on the released file itself:",
                      "code": cmd, "after": ""})
    elif policy_status == "fails":
        steps.append({"text": "The release does not meet the policy: protect it (recode the key "
                      "variables named above, gpurisk protect) and write this page again with "
                      "the protect run's plan (--plan) and its release (--release).", "code": None,
                      "after": ""})
    steps.append({"text": "After recoding, scan again and write a new report: the numbers here are "
                  "for the file and keys of this scan only.", "code": None, "after": ""})
    return steps


def fmt(v, col: str = "") -> str:
    """A number for a table: counts as whole numbers with thin-space thousands, other values with
    four significant digits (never in e-notation below 10^15), "—" where there is none."""
    from gpurisk.report.plots import COUNT_COLUMNS
    if v is None or (isinstance(v, (float, np.floating)) and not math.isfinite(float(v))):
        return "—"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)) or (col in COUNT_COLUMNS and isinstance(v, (float, np.floating))):
        return f"{int(round(float(v))):,}".replace(",", "\u202f")
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if abs(v) >= 1e4:
            return f"{v:,.0f}".replace(",", "\u202f")
        return f"{v:.4g}"
    return str(v)
