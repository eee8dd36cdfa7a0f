"""The HTML report of ``protect`` (``--report FILE.html``): what was asked, the released node, each
criterion before -> after per scenario (``compare``'s view), the perturbation's pr(cm|um), the
optimum, the front and its plot, in one self-contained page."""
from __future__ import annotations

import base64
import html
import io

import pandas as pd

from gpurisk.io.atomic import write_text_atomic


def _table(frame: pd.DataFrame) -> str:
    def fmt(v):
        if isinstance(v, float):
            return "—" if v != v else f"{v:.4g}"
        return html.escape(str(v))
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = "".join("<tr>" + "".join(f"<td>{fmt(v)}</td>" for v in r) + "</tr>"
                   for r in frame.itertuples(index=False))
    return f"<table><tr>{head}</tr>{rows}</table>"


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
             _table(pd.DataFrame([{**p.node, "suppressed records":
                                   p.settings.get("suppressed_records", 0),
                                   **{f"{k}: values suppressed": v for k, v in
                                      p.settings.get("suppressed_values", {}).items()}}])),
             "<h2>Before → after, per scenario</h2>", _table(p.before_after)]
    if p.perturbation is not None:
        spec = plan.get("perturb") or {}
        parts += [f"<h2>After perturbation ({html.escape(' then '.join(spec.get('specs', [])))}, "
                  f"seed {spec.get('seed')})</h2>", _table(p.perturbation)]
    parts += ["<h2>Optimum</h2>", _table(p.optimum), "<h2>Front</h2>", _table(p.front)]
    try:
        from gpurisk.protect.plot import front_figure
        fig = front_figure(res)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
        img = base64.b64encode(buf.getvalue()).decode("ascii")
        parts.append(f"<img alt='front' src='data:image/png;base64,{img}'>")
    except Exception as exc:  # noqa: BLE001 - the page is still useful without the plot
        parts.append(f"<p>(no plot: {html.escape(type(exc).__name__)})</p>")
    parts.append("</body></html>")
    write_text_atomic(path, "\n".join(parts))
