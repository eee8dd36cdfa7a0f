"""A self-contained HTML page about a SUDA run (``gpurisk suda --report FILE.html``): the distribution
of the per-record SUDA scores and DIS-SUDA probabilities, each key's contribution, the MSUs by size.
Plots inline as base64 PNG; key NAMES only, no key value of any record."""
from __future__ import annotations

import html
import math
from pathlib import Path

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.report import CSS, _png


def _hist(values: np.ndarray, xlabel: str, title: str) -> str:
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 3.6))
    if values.size:
        ax.hist(values, bins=min(60, max(5, int(np.unique(values).size))), color="#1f77b4")
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("records (log scale)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return _png(fig)


def _bars(names: list[str], values: list[float], xlabel: str, title: str) -> str:
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 0.4 * len(names) + 1.2))
    ax.barh(names[::-1], values[::-1], color="#d62728")
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.grid(alpha=0.3, axis="x")
    return _png(fig)


def _fmt(v) -> str:
    if isinstance(v, float):
        return "—" if not math.isfinite(v) else f"{v:.6g}"
    return html.escape(str(v))


def write_suda_report(summary: dict, suda, dis_suda, html_path, title: str | None = None) -> Path:
    """Write the page for ``summary`` (:func:`gpurisk.models.suda_table.summary` plus ``missing``)
    and the per-record ``suda`` and ``dis_suda`` arrays (numpy) to ``html_path``, atomically."""
    try:
        import matplotlib
    except ModuleNotFoundError:
        raise BadInput("the SUDA report draws its plots with matplotlib: pip install 'gpurisk[plot]'") from None
    matplotlib.use("Agg")
    title = title or "gpurisk SUDA report"
    scored = np.asarray(suda)[np.asarray(suda) > 0]
    dis = np.asarray(dis_suda)[np.asarray(suda) > 0]
    s = summary
    rows = [("records (n)", s["n"]), ("key variables (M)", ", ".join(s["keys"])),
            ("MSUs searched up to", f"{s['max_msu']} keys"), ("scoring", s["scoring"]),
            ("missing key values", s.get("missing", "")), ("sample uniques", s["sample_uniques"]),
            ("records with a score > 0", s["records_scored"]), ("maximum score", s["max_score"]),
            ("total score", s["total_score"]), ("MSUs", s["msus"]),
            ("MSUs by size", ", ".join(f"{k}: {v}" for k, v in s["msus_by_size"].items())),
            ("DIS fraction f, Q, P", f"{s['dis_fraction']:g}, {s['dis_Q']:g}, {s['dis_P']}"
             if s["dis_fraction"] is not None else s.get("dis_reason", "not applicable")),
            ("sum of DIS-SUDA probabilities (expected correct matches)", s["dis_sum"]),
            ("maximum DIS-SUDA probability", s["dis_max"])]
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}"
             f"</title><style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>",
             "<p class='note'>SUDA scores each record by its minimal sample uniques (MSUs): the smallest "
             "sets of key values that no other record shares; small MSUs weigh most. DIS-SUDA turns the "
             "scores into probabilities of a correct match. Only key <em>names</em> are shown; no key "
             "value of any record appears in this report.</p>",
             "<div class='tbl'><table>" + "".join(f"<tr><th>{html.escape(a)}</th><td class='k'>{_fmt(b)}</td></tr>"
                                 for a, b in rows) + "</table></div>"]
    pct = s["contributions_pct"]
    names = list(pct)
    vals = [0.0 if not math.isfinite(v) else float(v) for v in pct.values()]
    parts.append("<h2>Contribution of each key</h2><p class='note'>The share of all MSU score weight "
                 "whose MSU contains the key, in percent (MSUs of several keys count for each, so the "
                 "shares add up to more than 100 %).</p>")
    if scored.size:
        parts.append(f"<img alt='contributions' src='data:image/png;base64,"
                     f"{_bars(names, vals, 'contribution (%)', 'contribution of each key')}'>")
        label = f"SUDA score ({s['scoring']})"
        parts.append(f"<h2>Distribution of the SUDA scores</h2><p>{scored.size} records with a score "
                     "&gt; 0 (the others score 0).</p>"
                     f"<img alt='scores' src='data:image/png;base64,"
                     f"{_hist(scored, label, 'records with a score > 0')}'>")
    if scored.size and s["dis_fraction"] is not None:       # no π: no DIS-SUDA figure
        parts.append("<h2>Distribution of the DIS-SUDA probabilities</h2>"
                     f"<img alt='dis-suda' src='data:image/png;base64,"
                     f"{_hist(dis, 'DIS-SUDA probability of a correct match', 'records with a score > 0')}'>")
    else:
        parts.append("<p>No record has a score: no record has a minimal sample unique of at most "
                     f"{s['max_msu']} keys.</p>")
    for w in s.get("warnings", []):
        parts.append(f"<p class='note'><b>Warning:</b> {html.escape(w)}</p>")
    parts.append("<p class='note'>Generated by gpurisk.</p></body></html>")
    from gpurisk.io import write_text_atomic
    out = Path(html_path)
    write_text_atomic(out, "\n".join(parts))
    return out
