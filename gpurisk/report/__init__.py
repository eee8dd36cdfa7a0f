"""A self-contained HTML page about a scan: plots inline as base64 PNG, key NAMES only.

Plots (matplotlib, Agg): the chosen measure by combination size; the top combinations; θ̂ with its
upper bound against a threshold (when the scan has theta_hat). Text: what each number means in one
sentence, which key variables drive the risk (:func:`key_contributions`: the drop when a key is left
out of a scanned combination), what to do next, and which combinations the plots leave out and why.
No key value of any record appears: the scan rows hold none.
"""
from __future__ import annotations

import base64
import html
import io
import math
from pathlib import Path

import numpy as np
import pandas as pd

from gpurisk.errors import BadInput
from gpurisk.scan.runner import rank_column, top_combinations
from gpurisk.scan.sink import read_manifest, read_scan


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _label(row) -> str:
    name = ", ".join(row["keys"])
    return f"{row['scenario']}: {name}" if isinstance(row.get("scenario"), str) and row["scenario"] not in name else name


def _by_size(df: pd.DataFrame, col: str) -> str:
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 3.8))
    sizes = sorted(df["size"].unique())
    data = [df.loc[df["size"] == s, col].dropna().to_numpy(dtype=float) for s in sizes]
    rng = np.random.default_rng(0)
    for s, d in zip(sizes, data):
        if d.size:
            ax.scatter(s + rng.uniform(-0.15, 0.15, d.size), d, s=12, alpha=0.6, color="#1f77b4")
    ax.plot(sizes, [d.max() if d.size else np.nan for d in data], "-o", color="#d62728", label="maximum")
    ax.plot(sizes, [np.median(d) if d.size else np.nan for d in data], "-s", color="#2ca02c", label="median")
    ax.set_xlabel("number of key variables in the combination")
    ax.set_ylabel(col)
    ax.set_xticks(sizes)
    ax.set_title(f"{col} by combination size")
    ax.legend()
    ax.grid(alpha=0.3)
    return _png(fig)


def _top(df: pd.DataFrame, col: str, k: int) -> str:
    import matplotlib.pyplot as plt
    top = top_combinations(df, k, col)
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(top) + 1.2))
    labels = [_label(r) for _, r in top.iterrows()][::-1]
    ax.barh(range(len(top)), top[col].to_numpy(dtype=float)[::-1], color="#ff7f0e")
    ax.set_yticks(range(len(top)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel(col)
    ax.set_title(f"top {len(top)} combinations by {col}")
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def _theta(df: pd.DataFrame, threshold: float, k: int) -> str | None:
    if "theta_hat" not in df.columns or df["theta_hat"].notna().sum() == 0:
        return None
    import matplotlib.pyplot as plt
    d = df[df["theta_hat"].notna()].copy()
    d["_u"] = d["theta_hat_upper"].fillna(d["theta_hat"])
    d = d.sort_values(["_u", "theta_hat"], ascending=False).head(k)
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(d) + 1.4))
    y = np.arange(len(d))[::-1]
    th = d["theta_hat"].to_numpy(dtype=float)
    up = np.minimum(d["_u"].to_numpy(dtype=float), 1.0)
    over = up > threshold
    ax.hlines(y, th, up, color="#7f7f7f", lw=2, label="one-sided upper bound (capped at 1)")
    ax.scatter(th, y, color=np.where(over, "#d62728", "#2ca02c"), zorder=3, label="θ̂")
    ax.axvline(threshold, color="#d62728", ls="--", label=f"threshold {threshold:g}")
    ax.set_yticks(y)
    ax.set_yticklabels([_label(r) for _, r in d.iterrows()], fontsize=8)
    ax.set_xlim(0, 1.02)
    ax.set_xlabel("θ̂ = Pr(correct match | unique match)")
    ax.set_title("θ̂ and its upper bound, largest upper bounds first")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


#: one sentence per column a scan can hold, in words a statistician reads to a manager; measures
#: not listed here use the description they register (``gpurisk measures``)
MEANINGS = {
    "size": "the number of key variables an intruder is assumed to know and match on",
    "cells": "the number of distinct combinations of key values that occur in the release",
    "n1": "sample uniques: records that are the only one in the release with their key values",
    "n2": "records that share their key values with exactly one other record of the release",
    "N1": "population uniques: people who are the only one in the population with their key values",
    "matches_hat": "the estimated number of records an intruder would correctly re-identify by a "
                   "unique match, θ̂·n1 (the default ranking: it found the combinations with the "
                   "most population uniques among sample uniques on real populations, where θ̂ alone "
                   "put combinations with a single sample unique on top); where the sample has no "
                   "pair it is estimated with half a pair and flagged",
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
    "k_anonymity": "records in cells with fewer than k records (k-anonymity violations)",
}


def _meaning(col: str) -> str:
    if col in MEANINGS:
        return MEANINGS[col]
    try:
        from gpurisk.plugins import measure_registry
        reg = measure_registry()
        if col in reg:
            return reg[col].cls.description
    except Exception:  # a report must not fail on a plugin that does not load
        pass
    return "a column of the scan"


def key_contributions(df: pd.DataFrame, col: str) -> pd.DataFrame:
    """How much each key variable drives ``col``, from the scan's own rows: for a scanned combination
    C holding the key whose subset C without the key was scanned too, the drop
    value(C) − value(C without the key).

    One row per key: ``drop_from_largest``, the drop when the key is left out of the largest scanned
    combination holding it (the release's whole key set when the scan went that far; ``largest``
    names it), ``median_drop`` and ``pairs`` over every such C, and ``n1_from_largest``, the sample
    uniques that leaving the key out of that combination removes (when the scan has n1). Sorted by
    ``drop_from_largest``, largest first (then the median drop). Pairs where either value is
    undefined are left out.
    """
    def values(c):
        return {frozenset(k): float(v) for k, v in zip(df["keys"], df[c].astype(float))
                if math.isfinite(float(v))}
    value = values(col)
    n1 = values("n1") if "n1" in df.columns else {}
    keys = sorted({k for ks in df["keys"] for k in ks})
    out = []
    for key in keys:
        drops, best = [], None
        for combo, v in value.items():
            if key in combo and len(combo) > 1 and combo - {key} in value:
                drops.append(v - value[combo - {key}])
                if best is None or len(combo) > len(best[0]):
                    best = (combo, drops[-1])
        if not drops:
            continue
        rest = best[0] - {key}
        out.append({"key": key, "drop_from_largest": best[1], "largest": ", ".join(sorted(best[0])),
                    "n1_from_largest": (n1[best[0]] - n1[rest]) if best[0] in n1 and rest in n1
                    else math.nan,
                    "median_drop": float(np.median(drops)), "pairs": len(drops)})
    cols = ["key", "drop_from_largest", "largest", "n1_from_largest", "median_drop", "pairs"]
    if not out:
        return pd.DataFrame(columns=cols)
    return (pd.DataFrame(out, columns=cols)
            .sort_values(["drop_from_largest", "median_drop", "key"], ascending=[False, False, True],
                         kind="stable", na_position="last")
            .reset_index(drop=True))


def _not_plotted(df: pd.DataFrame, col: str, top: int) -> list[str]:
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
        lines.append(f"The top plot and table show the {top} highest of {shown} combinations with a "
                     f"value (--top {top}); the plot by size shows all {shown}.")
    if col != "theta_hat" and "theta_hat" in df.columns:
        none = int(df["theta_hat"].isna().sum())
        if none:
            lines.append(f"The θ̂ plot leaves out {none} combination(s) without θ̂ (no sample pair, "
                         "so θ̂ is not estimable, or no sample cell with one or two records).")
    return lines


def _next_steps(df: pd.DataFrame, col: str, threshold: float, contrib: pd.DataFrame,
                settings: dict) -> list[str]:
    steps = []
    top = top_combinations(df, 1, col)
    keys = settings.get("keys") or sorted({k for ks in df["keys"] for k in ks})
    over = 0
    if "theta_hat" in df.columns and df["theta_hat"].notna().any():
        over = int((df["theta_hat_upper"].fillna(df["theta_hat"]) > threshold).sum())
        if over:
            steps.append(f"{over} combination(s) have θ̂'s upper bound above the threshold "
                         f"{threshold:g}: the release is not safe against an intruder who knows those "
                         "keys; act on the key variables named next before releasing.")
        else:
            steps.append(f"No combination has θ̂'s upper bound above {threshold:g}: for these key "
                         "variables the release meets the threshold. Check that the scanned keys "
                         "are all an intruder could know (other scenarios: gpurisk scan --scenarios).")
    pi = settings.get("fraction")
    frac = f"--fraction {pi:.4g}" if isinstance(pi, (int, float)) and pi else "--fraction PI"
    if len(contrib) and contrib["drop_from_largest"].iloc[0] > 0:
        r = contrib.iloc[0]
        k = r["key"]
        gone = (f" and makes {int(r['n1_from_largest'])} fewer records unique"
                if math.isfinite(r["n1_from_largest"]) and r["n1_from_largest"] > 0 else "")
        steps.append(f"Start with <b>{html.escape(k)}</b>: leaving it out of "
                     f"({html.escape(r['largest'])}) lowers {html.escape(col)} by "
                     f"{r['drop_from_largest']:.4g}{gone}, more than any other key. Coarsen it and "
                     f"compare before → after: <code>gpurisk compare DATA --keys "
                     f"{html.escape(','.join(keys))} {frac} --alt {html.escape(k)}=bands:WIDTH</code> "
                     "(numbers) or "
                     f"<code>--alt {html.escape(k)}=map:FILE.csv</code> (categories), or drop it "
                     "from the release.")
    if len(top):
        combo = ",".join(top["keys"].iloc[0])
        steps.append("Look at the riskiest combination with every measure: "
                     f"<code>gpurisk assess DATA --keys {html.escape(combo)} {frac}</code> "
                     "(k-anonymity, individual risk and the expected number of re-identifications).")
    steps.append("After recoding, scan again and write a new report: the numbers here are for the "
                 "file and keys of this scan only.")
    return steps


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:960px;
color:#222;background:#fff}h1{font-size:1.6em}h2{font-size:1.2em;margin-top:1.6em}
table{border-collapse:collapse;font-size:.85em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f0f0f0}td.k{text-align:left}.note{color:#555;font-size:.9em}img{max-width:100%}
.flag{color:#b00;font-weight:bold}
"""


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.4g}"
    return html.escape(str(v))


def write_report(scan, html_path, measure: str | None = None, threshold: float = 0.1,
                 top: int = 20, title: str | None = None) -> Path:
    """Write the report of ``scan`` (an output path or a DataFrame of scan rows) to ``html_path``."""
    try:
        import matplotlib
    except ModuleNotFoundError:
        raise BadInput("gpurisk report draws its plots with matplotlib: pip install 'gpurisk[plot]'") from None
    matplotlib.use("Agg")
    settings = {}
    if isinstance(scan, (str, Path)):
        df = read_scan(scan)
        settings = read_manifest(scan).get("settings", {}) if Path(scan).is_dir() else {}
        source = str(scan)
    else:
        df = scan
        source = "(in memory)"
    if df.empty:
        raise BadInput("the scan has no rows to report")
    if not 0.0 < float(threshold) <= 1.0:
        raise BadInput(f"--threshold {threshold!r} must lie in (0, 1]")
    col = measure or rank_column(df)
    from gpurisk.scan.runner import rank_meaning
    if col not in df.columns:
        raise BadInput(f"--measure {col!r} is not a column of the scan")
    if df[col].notna().sum() == 0:
        raise BadInput(f"--measure {col!r} has no values in this scan (not applicable)")
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             f"<title>{html.escape(title or 'gpurisk scan report')}</title><style>{CSS}</style></head><body>",
             f"<h1>{html.escape(title or 'gpurisk scan report')}</h1>",
             f"<p class='note'>Scan: {html.escape(source)}. {len(df)} combinations of "
             f"{df['size'].min()}–{df['size'].max()} key variables. Only key <em>names</em> are shown; "
             "no key value of any record appears in this report.</p>",
             f"<p class='ranked'>Combinations are ranked by <b>{html.escape(col)}</b>: "
             f"{html.escape(rank_meaning(col))}"
             + (", with θ̂ beside it" if col != "theta_hat" and "theta_hat" in df.columns else "")
             + ".</p>"]
    if settings:
        items = [("records in the release (n)", settings.get("n")), ("population (N)", settings.get("N")),
                 ("sampling fraction π", settings.get("fraction")),
                 ("key variables", ", ".join(settings.get("keys", []))),
                 ("recodes", "; ".join(settings.get("recode", [])) or "none"),
                 ("seed", settings.get("seed"))]
        parts.append("<table>" + "".join(f"<tr><th>{html.escape(a)}</th><td class='k'>{_fmt(b)}</td></tr>"
                                         for a, b in items) + "</table>")
    present = [c for c in dict.fromkeys(["size", "cells", "n1", "n2", "N1", col, "theta_hat",
                                          "pr_pu"]) if c in df.columns and df[c].notna().any()]
    parts.append("<h2>What the numbers mean</h2><dl>" + "".join(
        f"<dt><b>{html.escape(c)}</b></dt><dd>{html.escape(_meaning(c))}.</dd>" for c in present)
        + "</dl>")
    contrib = key_contributions(df, col)
    parts.append(f"<h2>Which key variables drive the risk</h2>"
                 f"<p class='note'>For each key: how much {html.escape(col)} drops when the key is "
                 "left out of the largest scanned combination that holds it (both were scanned), "
                 "and the sample uniques that this removes; the median is over every scanned "
                 "combination with and without the key. A large drop means the key makes records "
                 "identifiable.</p>")
    if len(contrib):
        crow = [f"<tr><th>key</th><th>{html.escape(col)} drop when left out</th><th>of the "
                "combination</th><th>fewer sample uniques</th><th>median drop</th>"
                "<th>combinations compared</th></tr>"]
        for _, r in contrib.iterrows():
            crow.append(f"<tr><td class='k'>{html.escape(r['key'])}</td>"
                        f"<td>{_fmt(r['drop_from_largest'])}</td>"
                        f"<td class='k'>{html.escape(r['largest'])}</td>"
                        f"<td>{_fmt(r['n1_from_largest'])}</td><td>{_fmt(r['median_drop'])}</td>"
                        f"<td>{int(r['pairs'])}</td></tr>")
        parts.append(f"<table class='contrib'>{''.join(crow)}</table>")
    else:
        parts.append("<p>Not available: the scan holds no combination together with the same "
                     "combination less one key (scan with --max-size 2 or more).</p>")
    parts.append("<h2>What to do next</h2><ol class='next'>" + "".join(
        f"<li>{s}</li>" for s in _next_steps(df, col, float(threshold), contrib, settings)) + "</ol>")
    left_out = _not_plotted(df, col, top)
    parts.append(f"<h2>{html.escape(col)} by combination size</h2>"
                 f"<img alt='{html.escape(col)} by size' src='data:image/png;base64,{_by_size(df, col)}'>")
    parts.append(f"<h2>Top combinations by {html.escape(col)}</h2>"
                 f"<img alt='top combinations' src='data:image/png;base64,{_top(df, col, top)}'>")
    img = _theta(df, float(threshold), top)
    if img:
        over = int((df["theta_hat_upper"].fillna(df["theta_hat"]) > threshold).sum())
        parts.append(f"<h2>θ̂ with its upper bound against {threshold:g}</h2>"
                     f"<p>{over} of {int(df['theta_hat'].notna().sum())} combinations have an upper "
                     f"bound above {threshold:g}.</p>"
                     f"<img alt='theta hat and upper bounds' src='data:image/png;base64,{img}'>")
    t = top_combinations(df, top, col)
    cols = [c for c in ["size", "cells", "n1", "n2", "N1", col, f"{col}_upper", "theta_hat",
                        "theta_hat_upper", "pr_pu", "bethlehem_flag"] if c in t.columns]
    cols = list(dict.fromkeys(cols))
    rows = ["<tr><th>#</th><th>combination</th>" + "".join(f"<th>{html.escape(c)}</th>" for c in cols) + "</tr>"]
    for i, (_, r) in enumerate(t.iterrows(), 1):
        cells = "".join(f"<td>{_fmt(r[c])}</td>" for c in cols)
        rows.append(f"<tr><td>{i}</td><td class='k'>{html.escape(_label(r))}</td>{cells}</tr>")
    parts.append(f"<h2>Table of the top {len(t)}</h2><table>{''.join(rows)}</table>")
    parts.append("<h2>Not plotted</h2>" + ("<ul class='left-out'>" + "".join(
        f"<li>{html.escape(x)}</li>" for x in left_out) + "</ul>" if left_out else
        "<p>Every combination of the scan is in the plots.</p>"))
    parts.append("<p class='note'>Generated by gpurisk.</p></body></html>")
    out = Path(html_path)
    from gpurisk.io import write_text_atomic
    write_text_atomic(out, "\n".join(parts))
    return out
