"""The PNG of a ``protect`` search: every evaluated node's loss (scaled by the top node's) against
its worst risk over the scenarios, the nodes meeting every criterion, the front and the optimum."""
from __future__ import annotations

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input
from gpurisk.io.atomic import atomic_path
from gpurisk.protect.search import SearchResult


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise bad_input("{arg:--plot|plot} needs matplotlib: pip install 'gpurisk[plot]'") from None


def plot_front(res: SearchResult, path) -> None:
    """Write the PNG of ``res`` to ``path`` (atomically)."""
    fig = front_figure(res)
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")


def front_figure(res: SearchResult):
    """The matplotlib Figure of ``res`` (no pyplot state)."""
    require_matplotlib()
    from matplotlib.figure import Figure
    crit = res.criteria[res.front_by]
    x, y = res.scaled_loss, res.worst()
    ok = ~np.isnan(y)
    feas = res.feasible & ok
    fig = Figure(figsize=(7.5, 4.8))
    ax = fig.add_subplot()
    ax.scatter(x[ok & ~feas], y[ok & ~feas], s=8, color="#9e9e9e", alpha=0.5,
               label="fails a criterion")
    ax.scatter(x[feas], y[feas], s=8, color="#2ca02c", alpha=0.6, label="meets every criterion")
    front = res.front
    if front:
        ax.step(x[front], y[front], where="post", color="#d62728", lw=1.5, label="front")
        ax.scatter(x[front], y[front], s=18, color="#d62728")
    best = res.optimum
    if best:
        ax.scatter(x[best[:1]], y[best[:1]], s=140, marker="*", color="#1f77b4", zorder=5,
                   label="optimum")
    ax.axhline(crit.bound, ls="--", color="#555555", lw=1, label=f"bound {crit.bound:g}")
    # the front and the bound set the scale; far-off nodes (a tiny n1 gives a huge upper bound) are
    # counted, not drawn
    top = max([abs(crit.bound) * 2] + [float(y[i]) for i in front]) * 1.1 or 1.0
    lo = min([0.0] + [float(v) for v in y[ok]]) if crit.lower_is_better else None
    above = int((y[ok] > top).sum())
    if above:
        ax.set_ylim(lo, top)
        ax.text(0.99, 0.98, f"{above} nodes above the plot", transform=ax.transAxes, ha="right",
                va="top", fontsize=8, color="#555555")
    ax.set_xlabel(f"{res.loss_name} (scaled: 1 at the top node)")
    ax.set_ylabel(f"worst {crit.measure}.{crit.field} over the scenarios")
    ax.set_title(f"{len(res.loss)} nodes: {res.loss_name} against {crit.text}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig
