"""The HTML report of ``protect`` (``--report FILE.html``): what was asked, the released node, each
criterion before -> after per scenario (``compare``'s view), the perturbation's pr(cm|um), the
optimum, the front and its plot, in one self-contained page."""
from __future__ import annotations

import base64
import html
import io

import numpy as np
import pandas as pd

from gpurisk.io.atomic import write_text_atomic


def _table(frame: pd.DataFrame) -> str:
    """A table that scrolls inside its box; counts as whole numbers, no e-notation."""
    from gpurisk.report.text import fmt

    def cell(v, c):
        if isinstance(v, (bool, np.bool_)):
            return "yes" if v else "no"
        if isinstance(v, (int, float, np.integer, np.floating)):
            return html.escape(fmt(v, "n" if isinstance(v, (int, np.integer)) else str(c)))
        return html.escape(str(v))
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = "".join("<tr>" + "".join(f"<td>{cell(v, c)}</td>" for v, c in zip(r, frame.columns))
                   + "</tr>" for r in frame.itertuples(index=False))
    return f"<div class='tbl'><table><tr>{head}</tr>{rows}</table></div>"


def _named_levels(frame: pd.DataFrame, plan: dict) -> pd.DataFrame:
    """The keys' level columns by the levels' names (``bands:5``, ``FILE, column 2``)."""
    from gpurisk.protect.hierarchy import level_name, level_names
    out = frame.copy()
    for k in plan.get("keys", []):
        if k in out.columns:
            names = level_names(k, list((plan.get("hierarchies") or {}).get(k, [])))
            out[k] = [level_name(names, v) for v in out[k]]
    return out


def _suppressed(p) -> str:
    """Suppressed records with their share of the release, and the values per key."""
    from gpurisk.report.text import fmt
    m, n = int(p.settings.get("suppressed_records", 0)), int(p.settings["n"])
    if not m:
        return "<p>No value is suppressed.</p>"
    per = ", ".join(f"{html.escape(k)} {fmt(v, 'n')}" for k, v in
                    p.settings.get("suppressed_values", {}).items() if v)
    return (f"<p>Suppressed: {fmt(m, 'n')} records ({m / n:.1%} of the release) have a key value "
            f"set missing" + (f"; values per key: {per}" if per else "") + ".</p>")


def write_protect_report(p, path, title: str = "gpurisk protect report") -> None:
    """Write the report of a :class:`gpurisk.protect.Protection` to ``path`` (atomically)."""
    from gpurisk.report import CSS
    res, plan = p.result, p.plan
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>"
             f"{html.escape(title)}</title><style>{CSS}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>",
             f"<p>{res.stats['nodes']} nodes of the lattice of {html.escape(', '.join(res.keys))}; "
             f"criteria: {html.escape('; '.join(c.text for c in res.criteria))} on "
             f"{len(res.scenarios)} scenario(s); loss {html.escape(res.loss_name)}; "
             f"n = {p.settings['n']}, π = {p.settings['fraction']}.</p>",
             "<h2>Released node</h2>",
             _table(_named_levels(pd.DataFrame([p.node]), plan)),
             _suppressed(p),
             "<h2>Before → after, per scenario</h2>", _table(p.before_after)]
    if p.perturbation is not None:
        spec = plan.get("perturb") or {}
        parts += [f"<h2>After perturbation ({html.escape(' then '.join(spec.get('specs', [])))}, "
                  f"seed {spec.get('seed')})</h2>", _table(p.perturbation)]
    parts += ["<h2>Optimum</h2>", _table(_named_levels(p.optimum, plan)),
              "<h2>Front</h2>", _table(_named_levels(p.front, plan))]
    try:
        from gpurisk.protect.plot import front_figure
        fig = front_figure(res)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
        img = base64.b64encode(buf.getvalue()).decode("ascii")
        parts.append(f"<p><img alt='front' src='data:image/png;base64,{img}'></p>")
    except Exception as exc:  # noqa: BLE001 - the page is still useful without the plot
        parts.append(f"<p>(no plot: {html.escape(type(exc).__name__)})</p>")
    parts.append("</body></html>")
    write_text_atomic(path, "\n".join(parts))
