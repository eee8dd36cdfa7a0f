"""Speed of the gpurisk-classic measures on FARS (100 937 records, 8 integer keys), against the obvious
alternatives in the same run: pandas groupby + the formula (individual risk), pycanon (k-anonymity,
l-diversity), and, quoted not measured, sdcMicro's freqCalc + measure_risk (about 400 ms there).

    PYTHONPATH=. python bench/bench_classic.py [--repeat 5] [--scale 1,10] [--data PATH]

Each row: median wall time of ``--repeat`` runs after a warm-up run (pycanon above 100 000 records:
one run, no warm-up), and a
check that the competitor's answer equals gpurisk's. ``--scale k`` repeats the file k times (counts
times k). Needs the plugin installed (``pip install -e plugins/gpurisk-classic``); pycanon is
optional (``pip install pycanon``; its pins may clash with this environment, so install it into a
separate environment that sees this one's packages). Writes bench/out/bench_classic.png.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import pandas as pd

import gpurisk
from gpurisk_classic import IndividualRisk, KAnonymity, LDiversity, cell_risk, record_risk

ROOT = Path(__file__).resolve().parents[1]
KEYS = ["iage", "irace", "ideathmon", "ideathday", "isex", "ihispanic", "istatenum", "iinjury"]
FRACTION = 0.1          # FARS is treated as a 10 % sample: F̂_k = 10 f_k (weights 10)
SDCMICRO_MS = 400.0     # freqCalc + measure_risk on FARS with sdcMicro 5.8.1, as reported to us


def data_file(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    from gpurisk.testing.data import find_shared_data
    data = find_shared_data(ROOT)
    if data is not None and (data / "arx_genetic" / "fars_int.csv").exists():
        return data / "arx_genetic" / "fars_int.csv"
    raise SystemExit("FARS not found: give --data PATH to fars_int.csv")


def timed(fn, repeat: int, warmup: bool = True):
    """(median seconds, last result) over ``repeat`` runs, after one untimed warm-up run."""
    if warmup:
        fn()
    times, out = [], None
    for _ in range(max(repeat, 1)):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def gpurisk_indiv(df, method):
    """File level: global risk and expected re-identifications (counts only)."""
    table = gpurisk.build_table(df, KEYS, backend="pandas")
    ctx = gpurisk.Context(fraction=FRACTION, options={"indiv_risk": {"method": method}})
    return IndividualRisk().compute(table, ctx)


def gpurisk_records(df, method):
    """Record level: each record's risk (sdcMicro's measure_risk()$Res[, "risk"])."""
    table = gpurisk.build_table(df, KEYS, backend="pandas")
    return record_risk(table, method=method, fraction=FRACTION)


def pandas_indiv(df):
    """The obvious pandas way: group sizes per record, then sdcMicro's approx formula per record."""
    fk = df.groupby(KEYS, sort=False, dropna=False)[KEYS[0]].transform("size").to_numpy()
    p = fk / (fk / FRACTION)
    q = 1 - p
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(fk == 1, p / q * np.log(1 / p),
                     np.where(fk == 2, p / q - (p / q) ** 2 * np.log(1 / p), p / (fk - q)))
    return r


def gpurisk_kanon(df, k):
    table = gpurisk.build_table(df, KEYS, backend="pandas")
    return KAnonymity().compute(table, gpurisk.Context(options={"k_anonymity": {"k": k}}))


def gpurisk_ldiv(df, sensitive):
    keys = [k for k in KEYS if k != sensitive]
    table = gpurisk.build_table(df, keys, backend="pandas")
    ctx = gpurisk.Context(options={"l_diversity": {"sensitive": sensitive}},
                          columns={sensitive: df[sensitive].to_numpy()})
    return LDiversity().compute(table, ctx)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--scale", default="1,10")
    ap.add_argument("--data", default=None)
    ap.add_argument("--no-png", action="store_true")
    ap.add_argument("--no-pycanon-l", action="store_true", help="skip pycanon's l-diversity (slow)")
    args = ap.parse_args(argv)
    base = pd.read_csv(data_file(args.data), sep=";")
    try:
        from pycanon import anonymity as pycanon
    except ImportError:
        pycanon = None
    rows = []
    for scale in [int(s) for s in args.scale.split(",")]:
        df = pd.concat([base] * scale, ignore_index=True) if scale > 1 else base
        n = len(df)
        t_a, res_a = timed(lambda: gpurisk_indiv(df, "approx"), args.repeat)
        t_e, res_e = timed(lambda: gpurisk_indiv(df, "exact"), args.repeat)
        t_ra, rec_a = timed(lambda: gpurisk_records(df, "approx"), args.repeat)
        t_re, _ = timed(lambda: gpurisk_records(df, "exact"), args.repeat)
        t_p, rec_p = timed(lambda: pandas_indiv(df), args.repeat)
        same = np.allclose(rec_a, rec_p, rtol=1e-10, atol=0)
        rows += [(n, "indiv_risk approx: build_table + measure (global risk, ER)", t_a,
                  f"global risk {res_a.value:.6g}, ER {res_a.extra['expected_reidentifications']:.6g}"),
                 (n, "indiv_risk exact: build_table + measure", t_e, f"global risk {res_e.value:.6g}"),
                 (n, "record_risk approx: build_table + per-record risks", t_ra, ""),
                 (n, "record_risk exact: build_table + per-record risks", t_re, ""),
                 (n, "pandas groupby transform + approx formula, per record", t_p,
                  f"equal to record_risk: {same}")]
        if scale == 1:
            rows.append((n, "sdcMicro 5.8.1 freqCalc + measure_risk (quoted, not run here)",
                         SDCMICRO_MS / 1000, "reference timing"))
        t_k, res_k = timed(lambda: gpurisk_kanon(df, 5), args.repeat)
        rows.append((n, "k_anonymity k=5: build_table + measure", t_k,
                     f"{res_k.extra['records_violating']} records / {res_k.extra['cells_violating']} cells below 5, "
                     f"k achieved {res_k.extra['k_achieved']}"))
        t_l, res_l = timed(lambda: gpurisk_ldiv(df, "iinjury"), args.repeat)
        rows.append((n, "l_diversity (sensitive iinjury, 7 keys)", t_l,
                     f"distinct l {res_l.value}, entropy l {res_l.extra['entropy_l']:.4g}"))
        if pycanon is not None:
            rep, warm = (args.repeat, True) if n <= 100_000 else (1, False)  # slow: one run
            t_c, k_c = timed(lambda: pycanon.k_anonymity(df, KEYS), rep, warm)
            rows.append((n, "pycanon k_anonymity", t_c,
                         f"k = {k_c}; equals gpurisk's k achieved: {k_c == res_k.extra['k_achieved']}"))
            if n <= 200_000 and not args.no_pycanon_l:  # pycanon's l-diversity loops over classes in Python: minutes beyond
                keys7 = [k for k in KEYS if k != "iinjury"]
                t_cl, l_c = timed(lambda: pycanon.l_diversity(df, keys7, ["iinjury"]), 1, False)
                rows.append((n, "pycanon l_diversity (one run)", t_cl,
                             f"l = {l_c}; equals gpurisk's: {l_c == res_l.value}"))
        else:
            rows.append((n, "pycanon", float("nan"), "not installed: pip install pycanon"))
    # cell_risk alone on many distinct (f, F) pairs: the exact method's series and recurrence
    rng = np.random.default_rng(0)
    f = rng.zipf(1.5, 1_000_000).clip(max=10_000)
    Fk = f / rng.uniform(0.001, 0.999, f.size)
    t_ca, _ = timed(lambda: cell_risk(f, Fk, "approx"), args.repeat)
    t_ce, _ = timed(lambda: cell_risk(f, Fk, "exact"), args.repeat)
    rows += [(f.size, "cell_risk approx, 1e6 cells (f Zipf, p uniform)", t_ca, ""),
             (f.size, "cell_risk exact, same cells", t_ce, "")]

    w = max(len(r[1]) for r in rows)
    print(f"{'records':>9}  {'what':<{w}}  {'ms':>9}  note")
    for n, what, t, note in rows:
        print(f"{n:>9}  {what:<{w}}  {t * 1000:>9.1f}  {note}")
    if not args.no_png:
        plot(rows)


def plot(rows):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    sel = [r for r in rows if not np.isnan(r[2]) and not r[1].startswith("cell_risk")]
    labels = [f"{r[1][:56]} (n={r[0]:,})" for r in sel]
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(sel) + 1.2))
    ax.barh(range(len(sel)), [r[2] * 1000 for r in sel],
            color=["tab:gray" if r[1].startswith(("pandas", "pycanon", "sdcMicro")) else "tab:blue"
                   for r in sel])
    ax.set_yticks(range(len(sel)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("milliseconds (median), log scale")
    ax.set_title("gpurisk-classic on FARS vs pandas, pycanon, sdcMicro (quoted)")
    fig.tight_layout()
    fig.savefig(out / "bench_classic.png", dpi=120)
    print(f"wrote {out / 'bench_classic.png'}")


if __name__ == "__main__":
    main()
