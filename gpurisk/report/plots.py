"""The report's plots (matplotlib, Agg), each returned as base64 PNG for a data: URI. Axes fit the
data: θ̂ uses a log axis when its values span more than two decades, legends sit outside the axes,
count axes carry whole numbers."""
from __future__ import annotations

import base64
import io

import numpy as np
import pandas as pd

from gpurisk.scan.runner import top_combinations


def png(fig) -> str:
    """``fig`` as base64 PNG; the figure is closed."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def label(row) -> str:
    """A combination's name: its scenario (when named) and its keys."""
    name = ", ".join(row["keys"])
    sc = row.get("scenario")
    return f"{sc}: {name}" if isinstance(sc, str) and sc and sc not in name else name


COUNT_COLUMNS = {"size", "cells", "pop_cells", "n", "N", "n1", "n2", "n3", "N1", "sample_uniques",
                 "pop_uniques"}


def _integer_axis(axis, col: str) -> None:
    if col in COUNT_COLUMNS:
        from matplotlib.ticker import MaxNLocator, StrMethodFormatter
        axis.set_major_locator(MaxNLocator(integer=True))
        axis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))


def by_size(df: pd.DataFrame, col: str) -> str:
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 3.8))
    sizes = sorted(int(s) for s in df["size"].unique())
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
    _integer_axis(ax.yaxis, col)
    ax.set_title(f"{col} by combination size")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    ax.grid(alpha=0.3)
    return png(fig)


def top(df: pd.DataFrame, col: str, k: int) -> str:
    import matplotlib.pyplot as plt
    t = top_combinations(df, k, col)
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(t) + 1.2))
    ax.barh(range(len(t)), t[col].to_numpy(dtype=float)[::-1], color="#ff7f0e")
    ax.set_yticks(range(len(t)))
    ax.set_yticklabels([label(r) for _, r in t.iterrows()][::-1], fontsize=8)
    ax.set_xlabel(col)
    _integer_axis(ax.xaxis, col)
    ax.set_title(f"top {len(t)} combinations by {col}")
    ax.grid(axis="x", alpha=0.3)
    return png(fig)


def theta(df: pd.DataFrame, threshold: float, k: int) -> str | None:
    """The PNG of :func:`theta_figure` (None when the scan has no θ̂)."""
    fig = theta_figure(df, threshold, k)
    return None if fig is None else png(fig)


def theta_figure(df: pd.DataFrame, threshold: float, k: int):
    """θ̂ and its upper bound for the ``k`` largest upper bounds, against ``threshold``."""
    if "theta_hat" not in df.columns or df["theta_hat"].notna().sum() == 0:
        return None
    import matplotlib.pyplot as plt
    d = df[df["theta_hat"].notna()].copy()
    up_col = d["theta_hat_upper"] if "theta_hat_upper" in d.columns else d["theta_hat"]
    d["_u"] = up_col.fillna(d["theta_hat"])
    d = d.sort_values(["_u", "theta_hat"], ascending=False, kind="stable").head(k)
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(d) + 1.4))
    y = np.arange(len(d))[::-1]
    th = d["theta_hat"].to_numpy(dtype=float)
    up = np.minimum(d["_u"].to_numpy(dtype=float), 1.0)
    over = up > threshold
    ax.hlines(y, th, up, color="#7f7f7f", lw=2, label="one-sided upper bound (capped at 1)")
    ax.scatter(th, y, color=np.where(over, "#d62728", "#2ca02c"), zorder=3, label="θ̂")
    ax.axvline(threshold, color="#d62728", ls="--", label=f"threshold {threshold:g}")
    ax.set_yticks(y)
    ax.set_yticklabels([label(r) for _, r in d.iterrows()], fontsize=8)
    values = np.concatenate([th, up, [threshold]])
    pos = values[values > 0]
    if pos.size and pos.max() / pos.min() > 100:       # many decades: a log axis shows them all
        ax.set_xscale("log")
        ax.set_xlim(pos.min() / 1.5, min(1.0, pos.max()) * 1.5)
        ax.set_xlabel("θ̂ = Pr(correct match | unique match), log scale")
    else:
        ax.set_xlim(0, min(1.02, values.max() * 1.1) or 1.0)
        ax.set_xlabel("θ̂ = Pr(correct match | unique match)")
    ax.set_title("θ̂ and its upper bound, largest upper bounds first")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))   # never over a point
    ax.grid(axis="x", alpha=0.3)
    return fig
