"""The HTML report of ``protect`` (``--report FILE.html``), rendered from the Jinja2 template
``gpurisk/report/templates/protect.html.j2`` (the decision page's style): on its first screen
whether the release meets the criteria, the input file's identity, the released node by its
levels' names and what was suppressed; then each criterion before -> after per scenario
(``compare``'s view), the perturbation's pr(cm|um), the optimum, the front and its plot. One
self-contained page: no reference outside the file."""
from __future__ import annotations

import base64
import io
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from gpurisk.io.atomic import write_text_atomic


def _cell(v, c) -> str:
    """Counts as whole numbers, no e-notation; yes/no for flags; "—" for no value."""
    from gpurisk.report.text import fmt
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, float, np.integer, np.floating)):
        return fmt(v, "n" if isinstance(v, (int, np.integer)) else str(c))
    return "—" if v is None else str(v)


def _grid(frame: pd.DataFrame, text_columns=()) -> dict:
    """A frame as the template's grid: its columns (text columns left-aligned) and cell texts."""
    text = set(text_columns)
    cols = [{"name": str(c), "cls": "k" if (c in text or frame[c].dtype == object) else ""}
            for c in frame.columns]
    rows = [[_cell(v, c) for v, c in zip(r, frame.columns)] for r in frame.itertuples(index=False)]
    return {"columns": cols, "rows": rows}


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
        return "No value is suppressed."
    per = ", ".join(f"{k} {fmt(v, 'n')}" for k, v in p.settings.get("suppressed_values", {}).items() if v)
    return (f"Suppressed: {fmt(m, 'n')} records ({m / n:.1%} of the release) have a key value set "
            f"missing" + (f"; values per key: {per}" if per else "") + ".")


def _verdict(p) -> dict:
    crits = "; ".join(c.text for c in p.result.criteria)
    k = len(p.result.scenarios)
    where = f"on {k} scenario{'s' if k != 1 else ''} of key variables"
    if p.before_after is None:
        return {"status": "unchecked", "sentence": f"Criteria: {crits} {where} (not recomputed "
                "on the release)."}
    perturbed = "met perturbed" in p.before_after
    what = "The perturbed release" if perturbed else "The release"
    if p.released_meets:
        return {"status": "met", "sentence": f"{what} meets every criterion ({crits}) {where}."}
    col = "met perturbed" if perturbed else "met"
    bad = int((~p.before_after[col].astype(bool)).sum())
    return {"status": "fails", "sentence": f"{what} does NOT meet the criteria: {bad} of "
            f"{len(p.before_after)} criterion-scenario checks fail ({crits})."}


def _identity(p, now: str) -> list[tuple[str, str]]:
    from gpurisk.io.provenance import command_line, gpurisk_version
    from gpurisk.report.text import fmt
    plan = p.plan
    data = plan.get("data") or {}
    rows = []
    if data.get("path"):
        rows.append(("input file", Path(str(data["path"])).name))
    else:
        rows.append(("input file", "a data frame in memory (no file)"))
    if data.get("sha256"):
        rows.append(("input sha256", data["sha256"]))
    rows.append(("records (n)", fmt(p.settings.get("n"), "n")))
    pi = p.settings.get("fraction")
    rows.append(("sampling fraction π", "not given" if pi is None else f"{pi:.4g}"))
    if plan.get("release_sha256"):
        rows.append(("release sha256", plan["release_sha256"]))
    rows.append(("written", now))
    rows.append(("gpurisk version", gpurisk_version()))
    cmd = command_line()
    rows.append(("command", cmd or "the Python API (gpurisk.protect)"))
    return rows


def _figure(res) -> tuple[str | None, str | None]:
    try:
        from gpurisk.protect.plot import front_figure
        fig = front_figure(res)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
        import matplotlib.pyplot as plt
        plt.close(fig)
        return base64.b64encode(buf.getvalue()).decode("ascii"), None
    except Exception as exc:  # noqa: BLE001 - the page is still useful without the plot
        return None, type(exc).__name__


def write_protect_report(p, path, title: str = "gpurisk protect report") -> None:
    """Write the report of a :class:`gpurisk.protect.Protection` to ``path`` (atomically)."""
    from gpurisk.io.provenance import gpurisk_version
    from gpurisk.protect.hierarchy import level_name, level_names
    from gpurisk.report.style import CSS, environment
    from gpurisk.report.text import fmt
    res, plan = p.result, p.plan
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    hier = plan.get("hierarchies") or {}
    node_rows = []
    for k in res.keys:
        names = level_names(k, list(hier.get(k, [])))
        lvl = int(p.node.get(k, 0))
        node_rows.append([k, level_name(names, lvl), f"{lvl} of {len(names) - 1}"])
    crit = [c.text for c in res.criteria]
    summary = (f"{fmt(res.stats['nodes'], 'n')} nodes of the lattice of {', '.join(res.keys)} "
               f"searched; criteria: {'; '.join(crit)} on {len(res.scenarios)} scenario(s); loss "
               f"{res.loss_name}.")
    optimum = _named_levels(p.optimum, plan)
    opt_pairs = [[(str(c), _cell(v, c)) for c, v in zip(optimum.columns, r)]
                 for r in optimum.itertuples(index=False)]
    perturbation = None
    if p.perturbation is not None:
        spec = plan.get("perturb") or {}
        perturbation = {**_grid(p.perturbation, ["keys", "criterion"]),
                        "specs": " then ".join(spec.get("specs", [])), "seed": spec.get("seed")}
    img, no_plot = _figure(res)
    ctx = {"title": title, "css": CSS, "version": gpurisk_version(), "written": now,
           "verdict": _verdict(p), "identity": _identity(p, now), "summary": summary,
           "node_rows": node_rows, "suppressed": _suppressed(p),
           "before_after": _grid(p.before_after if p.before_after is not None else pd.DataFrame(),
                                 ["keys", "criterion"]),
           "perturbation": perturbation, "loss": res.loss_name,
           "optimum": opt_pairs, "optimum_count": len(opt_pairs),
           "front_by": crit[res.front_by] if crit else "the criterion",
           "front": _grid(_named_levels(p.front, plan), res.keys),
           "img": img, "no_plot": no_plot}
    page = environment().get_template("protect.html.j2").render(**ctx)
    write_text_atomic(path, page)
