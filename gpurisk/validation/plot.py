"""The picture of a validation: per estimator, truth and estimate (mean ± sd) against π."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input


def plot_validation(v, path) -> Path:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise bad_input("{arg:--plot|plot} needs matplotlib: pip install 'gpurisk[plot]'") from None
    s = v.summary
    est = [m for m in dict.fromkeys(s["measure"]) if m in v.info["pairs"]]
    if not est:
        raise BadInput("nothing to plot: no estimator with a true value among the measures")
    fig, axes = plt.subplots(1, len(est), figsize=(4.8 * len(est), 4.0), squeeze=False)
    for ax, m in zip(axes[0], est):
        g = s[s["measure"] == m].sort_values("fraction")
        x = g["fraction"].to_numpy(float)
        t_mean, t_sd = g["true_mean"].to_numpy(float), g["true_sd"].to_numpy(float)
        ax.plot(x, t_mean, "o-", color="k", label=f"{v.info['pairs'][m]} (true)")
        ax.fill_between(x, t_mean - t_sd, t_mean + t_sd, color="k", alpha=0.12)
        ax.errorbar(x, g["estimate_mean"], yerr=g["estimate_sd"], fmt="s--", capsize=3,
                    label=f"{m} (mean ± sd)")
        se = g["se_mean"].to_numpy(float)
        if np.isfinite(se).any():
            ax.errorbar(x * 1.03, g["estimate_mean"], yerr=se, fmt="none", ecolor="tab:red",
                        capsize=2, label="mean estimated s.e.")
        ax.set_xscale("log")
        ax.minorticks_off()
        ax.set_xticks(x)
        ax.set_xticklabels([f"{f:g}" for f in x])
        ax.set_xlabel("sampling fraction π")
        ax.set_title(f"{m} vs {v.info['pairs'][m]} ({v.info['design']})")
        ax.legend(fontsize=8)
    fig.suptitle(f"gpurisk validate: N = {v.info['N']}, keys {', '.join(v.info['keys'])}", fontsize=9)
    fig.tight_layout()
    p = Path(path)
    from gpurisk.io import atomic_path
    with atomic_path(p, suffix=p.suffix) as tmp:
        fig.savefig(tmp, dpi=110)
    plt.close(fig)
    return p
