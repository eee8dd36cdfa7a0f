"""A self-contained HTML page about a SUDA run (``gpurisk suda --report FILE.html``), rendered from the
Jinja2 template ``templates/suda.html.j2`` (the decision page's style): the file's identity, the
run's figures, each key's contribution, the distribution of the per-record SUDA scores and
DIS-SUDA probabilities. Plots inline as base64 PNG; key NAMES only, no key value of any record."""
from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.report.plots import png as _png
from gpurisk.report.text import fmt


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


def _identity(data, n, now: str) -> list[tuple[str, str]]:
    from gpurisk.io.provenance import command_line, file_identity, gpurisk_version
    f = file_identity(str(data)) if isinstance(data, (str, Path)) else None
    rows = []
    if f:
        rows += [("file", f["name"] + (f" ({f['files']} files)" if f.get("files", 1) > 1 else "")),
                 ("sha256", f["sha256"]), ("size", f"{fmt(f['bytes'], 'n')} bytes")]
    else:
        rows.append(("file", "a data frame in memory (no file, no checksum)"))
    rows += [("records (n)", fmt(n, "n")), ("written", now), ("gpurisk version", gpurisk_version()),
             ("command", command_line() or "the Python API (gpurisk.suda)")]
    return rows


def _rows(s: dict) -> list[tuple[str, str]]:
    """The run's figures in words; counts as whole numbers."""
    def count(v):
        return fmt(v, "n")
    dis = (f"{s['dis_fraction']:g} ({s.get('dis_fraction_from') or 'given'}), Q {s['dis_Q']:g}, "
           f"P {count(s['dis_P'])}" if s["dis_fraction"] is not None
           else s.get("dis_reason", "not applicable"))
    return [("key variables (M)", ", ".join(s["keys"])),
            ("MSUs searched up to", f"{s['max_msu']} keys"), ("scoring", s["scoring"]),
            ("missing key values", s.get("missing", "")), ("sample uniques", count(s["sample_uniques"])),
            ("records with a score > 0", count(s["records_scored"])),
            ("maximum score", fmt(s["max_score"])), ("total score", fmt(s["total_score"])),
            ("MSUs", count(s["msus"])),
            ("MSUs by size", ", ".join(f"size {k}: {count(v)}" for k, v in s["msus_by_size"].items())),
            ("DIS fraction f, Q, P", dis),
            ("sum of DIS-SUDA probabilities (expected correct matches)", fmt(s["dis_sum"])),
            ("largest DIS-SUDA probability of a record", fmt(s["dis_max"]))]


def write_suda_report(summary: dict, suda, dis_suda, html_path, title: str | None = None,
                      data=None) -> Path:
    """Write the page for ``summary`` (:func:`gpurisk.models.suda_table.summary` plus ``missing``)
    and the per-record ``suda`` and ``dis_suda`` arrays (numpy) to ``html_path``, atomically, from
    the template ``suda.html.j2``; ``data`` (the input file, optional) for the file's identity."""
    try:
        import matplotlib
    except ModuleNotFoundError:
        raise BadInput("the SUDA report draws its plots with matplotlib: pip install 'gpurisk[plot]'") from None
    matplotlib.use("Agg")
    from gpurisk.io.provenance import gpurisk_version
    from gpurisk.report.style import CSS, environment
    title = title or "gpurisk SUDA report"
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    scored = np.asarray(suda)[np.asarray(suda) > 0]
    dis = np.asarray(dis_suda)[np.asarray(suda) > 0]
    s = summary
    pct = s["contributions_pct"]
    names = list(pct)
    vals = [0.0 if not math.isfinite(v) else float(v) for v in pct.values()]
    has_dis = bool(scored.size) and s["dis_fraction"] is not None
    ctx = {"title": title, "css": CSS, "version": gpurisk_version(), "written": now,
           "identity": _identity(data, s["n"], now), "rows": _rows(s),
           "warnings": list(s.get("warnings", [])),
           "img_contrib": _bars(names, vals, "contribution (%)", "contribution of each key")
           if scored.size else None,
           "contributions": [[k, fmt(v)] for k, v in zip(names, vals)],
           "scored": fmt(int(scored.size), "n"),
           "img_scores": _hist(scored, f"SUDA score ({s['scoring']})", "records with a score > 0")
           if scored.size else None,
           "img_dis": _hist(dis, "DIS-SUDA probability of a correct match", "records with a score > 0")
           if has_dis else None,
           "no_score": not scored.size, "max_msu": s["max_msu"],
           "no_dis": (s.get("dis_reason") or "no sampling fraction") if scored.size and not has_dis
           else None}
    page = environment().get_template("suda.html.j2").render(**ctx)
    from gpurisk.io import write_text_atomic
    out = Path(html_path)
    write_text_atomic(out, page)
    return out
