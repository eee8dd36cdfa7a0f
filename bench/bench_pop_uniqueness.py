"""How the fits of ARX's population-uniqueness models grow with the number of sample classes J.

A register with many keys has nearly as many sample classes as records (bench_backends' 30 M-row,
8-key register: J = 29.3 M). Pitman's Newton equations sum 1/(θ + iα) over i = 1 .. J−1 at every
step. This script fits each model (Pitman, Zayatz, SNB, Dankar's rule) on frequencies of frequencies
of two shapes for growing J and compares, in the same run, Pitman's step with the sums in closed form
(gpurisk-arx: digamma/trigamma differences, or a power series far from the poles) against the same
step with the sums added term by term, as ARX adds them (the obvious alternative). Term-by-term fits
run whole up to --full-terms classes; above that one step is timed and multiplied by the number of
steps the closed-form fit took (marked "est."). "mle s" is gpurisk's rule (rule=gpurisk, the default):
Pitman's likelihood maximised over its whole parameter space (grid, Nelder-Mead, Newton polish; every
evaluation O(1)) and E[N1 | sample] with its interval; "mle N1" its estimate, "arx N1" ARX's Pitman's.

    python bench/bench_pop_uniqueness.py [--classes 1e4,1e5,1e6,1e7,2.93e7] [--full-terms 1e6]
                                         [--register PATH] [--png out.png]

``--register`` also times ``gpurisk.assess(PATH, k0..k7, fraction=0.01, measures=["pop_uniqueness"])``
end to end (bench_backends.py --rows 3e7 --layout onefile writes such a register).
Needs plugins/gpurisk-arx installed.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from gpurisk_arx import uniqueness as U

# shares of classes of size 1, 2, ...: "register" is bench_backends' 30 M-row, 8-key register
# (ARX's Pitman start lies outside the model there: the fit stops with its reason); "skewed" has
# larger classes, and Pitman's Newton iteration runs to convergence (6 steps)
SHAPES = {"register": [28_564_864, 700_174, 11_399, 144, 3],
          "skewed": [6, 2, 1, 0.5, 0.3, 0.2]}


def fof(shape: str, J: float) -> np.ndarray:
    sh = np.asarray(SHAPES[shape], dtype=float)
    Z = np.zeros(sh.size + 1, np.int64)
    Z[1:] = np.round(sh / sh.sum() * J).astype(np.int64)
    Z[1:3] = np.maximum(Z[1:3], 1)
    return Z


def timed(fn, *a):
    t = time.perf_counter()
    out = fn(*a)
    return time.perf_counter() - t, out


def term_step_seconds(sm: U.Sample) -> float:
    """The term-by-term sums of one Newton step of Pitman's equations (ARX's way): the step's bulk."""
    theta, alpha = U._pitman_start(sm)
    i = np.arange(1, sm.J, dtype=float)
    t = time.perf_counter()
    U._term_sums(theta, alpha, i)
    return time.perf_counter() - t


def pitman_terms(sm: U.Sample):
    """Pitman's fit with every step's sums added term by term."""
    old = U.CLOSED_FORM_MIN_J
    U.CLOSED_FORM_MIN_J = sm.J + 2
    try:
        return U.pitman(sm)
    finally:
        U.CLOSED_FORM_MIN_J = old


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--classes", default="1e4,1e5,1e6,1e7,2.93e7")
    ap.add_argument("--full-terms", type=float, default=1e6)
    ap.add_argument("--shapes", default="register,skewed")
    ap.add_argument("--fraction", type=float, default=0.01)
    ap.add_argument("--register", default=None)
    ap.add_argument("--png", default=None)
    a = ap.parse_args()
    rows = []
    print(f"{'shape':>9} {'J':>12} {'pitman s':>9} {'steps':>6} {'terms s':>12} {'x':>8} {'zayatz s':>9} "
          f"{'snb s':>7} {'dankar s':>9} {'mle s':>7} {'mle N1':>11} {'arx N1':>11}  dankar's choice")
    for shape, J in [(sh, float(x)) for sh in a.shapes.split(",") for x in a.classes.split(",")]:
        Z = fof(shape, J)
        n = int((np.arange(Z.size) * Z).sum())
        sm = U.sample(Z, n / a.fraction)
        tp, fit = timed(U.pitman, sm)
        steps = max(fit.iterations, 1)
        if sm.J <= a.full_terms:
            tt, fit_t = timed(pitman_terms, sm)
            same = (fit.value is None and fit_t.value is None) or (
                fit.value is not None and fit_t.value is not None
                and abs(fit.value - fit_t.value) <= 1e-6 * abs(fit_t.value))
            terms = f"{tt:.3f}" + ("" if same else " DIFF")
        else:
            tt = term_step_seconds(sm) * steps
            terms = f"{tt:.2f} est."
        tz, _ = timed(U.zayatz, sm)
        ts, _ = timed(U.snb, sm, "sh3")
        td, (chosen, _) = timed(U.estimate, sm, "dankar", "sh3", a.fraction)
        tm, (mle, _) = timed(U.estimate, sm, "pitman", "sh3", a.fraction, "gpurisk")
        show = lambda v: "—" if v is None else f"{v:.4g}"      # noqa: E731
        print(f"{shape:>9} {sm.J:>12,} {tp:>9.4f} {steps:>6} {terms:>12} {tt / max(tp, 1e-9):>7.0f}× {tz:>9.4f} "
              f"{ts:>7.4f} {td:>9.4f} {tm:>7.3f} {show(mle.value):>11} {show(fit.value):>11}  {chosen.model}")
        rows.append((shape, sm.J, tp, tt, tz, ts, td))
    if a.register:
        import gpurisk
        t, res = timed(lambda: gpurisk.assess(a.register, [f"k{i}" for i in range(8)],
                                             fraction=a.fraction, measures=["pop_uniqueness"]))
        r = res.measures["pop_uniqueness"]
        print(f"assess {a.register} (8 keys, pop_uniqueness): {t:.1f} s end to end, "
              f"model {r.extra.get('model')}, {r.value:.4g} population uniques")
    if a.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        for shape in a.shapes.split(","):
            R = np.array([r[1:] for r in rows if r[0] == shape], dtype=float)
            ax.loglog(R[:, 0], R[:, 1], "o-", label=f"Pitman, closed-form sums ({shape})")
            ax.loglog(R[:, 0], R[:, 2], "s--", label=f"Pitman, terms, ARX's way ({shape})")
        ax.loglog(R[:, 0], R[:, 3], "^-", label=f"Zayatz ({shape})")
        ax.loglog(R[:, 0], R[:, 4], "v-", label=f"SNB ({shape})")
        ax.set_xlabel("sample classes J")
        ax.set_ylabel("seconds per fit")
        ax.legend()
        fig.tight_layout()
        fig.savefig(a.png, dpi=120)
        print("wrote", a.png)


if __name__ == "__main__":
    main()
