"""A self-contained HTML page about a scan: plots inline as base64 PNG, key NAMES only.

Plots (matplotlib, Agg): the chosen measure by combination size; the top combinations; θ̂ with its
upper bound against a threshold (when the scan has theta_hat). No key value of any record appears:
the scan rows hold none.
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
    if col not in df.columns:
        raise BadInput(f"--measure {col!r} is not a column of the scan")
    if df[col].notna().sum() == 0:
        raise BadInput(f"--measure {col!r} has no values in this scan (not applicable)")
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             f"<title>{html.escape(title or 'gpurisk scan report')}</title><style>{CSS}</style></head><body>",
             f"<h1>{html.escape(title or 'gpurisk scan report')}</h1>",
             f"<p class='note'>Scan: {html.escape(source)}. {len(df)} combinations of "
             f"{df['size'].min()}–{df['size'].max()} key variables. Only key <em>names</em> are shown; "
             "no key value of any record appears in this report.</p>"]
    if settings:
        items = [("records in the release (n)", settings.get("n")), ("population (N)", settings.get("N")),
                 ("sampling fraction π", settings.get("fraction")),
                 ("key variables", ", ".join(settings.get("keys", []))),
                 ("recodes", "; ".join(settings.get("recode", [])) or "none"),
                 ("seed", settings.get("seed"))]
        parts.append("<table>" + "".join(f"<tr><th>{html.escape(a)}</th><td class='k'>{_fmt(b)}</td></tr>"
                                         for a, b in items) + "</table>")
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
    parts.append("<p class='note'>Generated by gpurisk.</p></body></html>")
    out = Path(html_path)
    from gpurisk.io import write_text_atomic
    write_text_atomic(out, "\n".join(parts))
    return out
