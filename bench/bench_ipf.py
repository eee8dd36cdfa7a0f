"""Speed of the log-linear IPF fit and of record-level risk (SPEC §5).

1. Skinner's (2007) table: area 2 × sex 2 × age 18 × marital status 6 × ethnicity 17 × economic
   activity 10 = 73 440 cells; a population of 950 000 drawn from a random two-way log-linear model and
   a simple random sample of 4 750 (the paper's sizes).
2. 10^7-cell tables: 7 keys of 10 categories with n = 10^6 (IPF on the dense tensor), and
   100 × 50 × 40 × 50 with n = 20 000 (a sparse support: IPF on the support cells).
3. record-risk on 20 M synthetic records (5 keys, K = 201 600): counting, IPF, the file-level summary,
   and writing the sample uniques (and, with --all-records, every record) to Parquet.

Each IPF is compared in the same run with the obvious alternative: the same IPF cycles written with
np.bincount over a flat K-array (margin = bincount(pair index of every cell, weights = μ)), timed per
cycle. Prints a table; writes bench/out/ipf_convergence.png (discrepancy per cycle).

    PYTHONPATH=. python bench/bench_ipf.py [--records 20000000] [--quick]
"""
from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpurisk.models.loglinear import fit_two_way, observed_margins, two_way_margins  # noqa: E402

OUT = ROOT / "bench" / "out"


def two_way_model(cards, rng, scale=0.8):
    """Cell probabilities of a random log-linear model with all two-way interactions."""
    d = len(cards)
    logp = np.zeros(cards)
    for a in range(d):  # skewed main effects, like real categories
        shape = [1] * d
        shape[a] = cards[a]
        logp = logp + np.sort(rng.normal(0, 1.2, cards[a]))[::-1].reshape(shape)
    for a, b in itertools.combinations(range(d), 2):
        shape = [1] * d
        shape[a], shape[b] = cards[a], cards[b]
        logp = logp + rng.normal(0, scale, (cards[a], cards[b])).reshape(shape)
    p = np.exp(logp - logp.max()).ravel()
    return p / p.sum()


def srs_counts(p, N, n, rng):
    """Population counts F ~ Multinomial(N, p), then a simple random sample of n: sample counts f."""
    F = rng.multinomial(N, p)
    f = rng.multivariate_hypergeometric(F, n, method="marginals") if n < N else F
    return F, f


def ipf_bincount_cycle(codes_full, mu, obs, cards, margins):
    """One IPF cycle on a flat K-array with np.bincount (the obvious alternative)."""
    for axes, m_obs in zip(margins, obs):
        a, b = axes
        idx = codes_full[a] * cards[b] + codes_full[b]
        m_fit = np.bincount(idx, weights=mu, minlength=cards[a] * cards[b])
        ratio = np.where(m_fit > 0, m_obs.ravel() / np.where(m_fit > 0, m_fit, 1), 0.0)
        mu *= ratio[idx]


def time_bincount_cycles(cards, f_ids, f, cycles=3):
    K = math.prod(cards)
    codes_full = [c.astype(np.int64) for c in np.unravel_index(np.arange(K), cards)]
    margins = two_way_margins(len(cards))
    codes = np.unravel_index(f_ids, cards)
    obs = observed_margins(np, codes, f, cards, margins)
    mu = np.full(K, f.sum() / K)
    t = time.perf_counter()
    for _ in range(cycles):
        ipf_bincount_cycle(codes_full, mu, obs, cards, margins)
    return (time.perf_counter() - t) / cycles


def bench_table(name, cards, N, n, rng, rows, traces, bincount_cycles=3):
    p = two_way_model(cards, rng)
    F, f = srs_counts(p, N, n, rng)
    ids = np.flatnonzero(f)
    codes = np.unravel_index(ids, cards)
    for mode in (None, False):
        trace = []
        t = time.perf_counter()
        fit = fit_two_way(codes, f[ids], cards, sparse=mode, trace=trace)
        sec = time.perf_counter() - t
        label = "auto (sparse)" if fit.sparse else ("auto (dense)" if mode is None else "dense")
        if mode is False and fit.sparse is False and rows and rows[-1]["table"] == name \
                and rows[-1]["mode"] == "auto (dense)":
            continue  # auto already chose dense
        rows.append({"table": name, "K": math.prod(cards), "n": int(f.sum()), "mode": label,
                     "support": int(fit.support.size) if fit.sparse else int((fit.mu > 0).sum()),
                     "iterations": fit.iterations, "discrepancy": f"{fit.discrepancy:.2g}",
                     "sec": round(sec, 3), "ms/cycle": round(1000 * sec / fit.iterations, 2)})
        traces[f"{name}, {label}"] = trace
    sec_b = time_bincount_cycles(cards, ids, f[ids], bincount_cycles)
    rows.append({"table": name, "K": math.prod(cards), "n": int(f.sum()), "mode": "bincount flat-K",
                 "support": "", "iterations": f"({bincount_cycles} timed)", "discrepancy": "",
                 "sec": round(sec_b * rows[-1]["iterations"], 3) if isinstance(rows[-1]["iterations"], int) else "",
                 "ms/cycle": round(1000 * sec_b, 2)})
    return F, f


def bench_records(n_rec, all_records, rows):
    from gpurisk.models.record_risk import record_risk
    rng = np.random.default_rng(7)
    cards = (90, 2, 10, 7, 16)
    p = two_way_model(cards, rng, scale=0.6)
    cols = [np.empty(n_rec, np.int8) for _ in cards]
    cum = np.cumsum(p)
    for start in range(0, n_rec, 1 << 22):  # drawn in chunks: int8 columns only
        stop = min(n_rec, start + (1 << 22))
        cells = np.minimum(np.searchsorted(cum, rng.random(stop - start) * cum[-1]), p.size - 1)
        for col, c in zip(cols, np.unravel_index(cells, cards)):
            col[start:stop] = c
    frame = pd.DataFrame({f"k{i}": c for i, c in enumerate(cols)})
    del cols
    keys = list(frame.columns)
    N = n_rec * 10  # a 10 % sample
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        out = Path(tmp) / "risks.parquet"
        t = time.perf_counter()
        doc = record_risk(frame, keys, population_size=N, output=out)
        sec = time.perf_counter() - t
        rows.append({"what": f"record-risk, {n_rec:,} records, sample uniques written",
                     "K": doc["K"], "records out": doc["output"]["rows"],
                     "ipf iterations": doc["ipf"]["iterations"], "sec": round(sec, 2),
                     "parquet MiB": round(out.stat().st_size / 2**20, 1)})
        if all_records:
            t = time.perf_counter()
            doc = record_risk(frame, keys, population_size=N, output=out, all_records=True)
            sec = time.perf_counter() - t
            rows.append({"what": f"record-risk, {n_rec:,} records, every record written",
                         "K": doc["K"], "records out": doc["output"]["rows"],
                         "ipf iterations": doc["ipf"]["iterations"], "sec": round(sec, 2),
                         "parquet MiB": round(out.stat().st_size / 2**20, 1)})
    t = time.perf_counter()
    frame.groupby(keys, sort=False)[keys[0]].transform("size")
    rows.append({"what": f"pandas groupby(keys).transform('size'), {n_rec:,} records (f only)",
                 "K": "", "records out": "", "ipf iterations": "", "sec": round(time.perf_counter() - t, 2),
                 "parquet MiB": ""})


def plot(traces):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover
        return None
    OUT.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, tr in traces.items():
        if tr:
            ax.semilogy(np.arange(1, len(tr) + 1), tr, label=label)
    ax.set_xlabel("IPF cycle")
    ax.set_ylabel("largest |fitted − observed| two-way margin (records)")
    ax.set_xscale("log")
    ax.axhline(0.01, color="grey", lw=0.8, ls="--")
    ax.legend(fontsize=7)
    ax.set_title("IPF convergence (tol 0.01 dashed)")
    fig.tight_layout()
    path = OUT / "ipf_convergence.png"
    fig.savefig(path, dpi=120)
    return path


def real_traces(traces):
    """Convergence on real samples (FARS, adult as populations; 5 % / 10 % samples)."""
    from gpurisk.freq.cellid import decode_radix
    from gpurisk.freq.engine import build_table
    from gpurisk.testing.data import find_shared_data
    data = find_shared_data(ROOT) or ROOT.parent / "shared" / "data"
    cases = [("FARS 5 keys", "arx_genetic/fars_int.csv", ";", ["iage", "isex", "irace", "ihispanic", "iinjury"], 0.05),
             ("adult 5 keys", "uci_adult/adult_full_48842.csv", ",",
              ["age", "sex", "race", "marital-status", "education"], 0.10)]
    rows = []
    for name, rel, sep, keys, pi in cases:
        if not (data / rel).exists():
            continue
        fr = pd.read_csv(data / rel, sep=sep, usecols=keys)
        fr["_s"] = np.random.default_rng(0).random(len(fr)) < pi
        t = build_table(fr, keys, sample_flag="_s")
        s = t.f > 0
        trace = []
        t0 = time.perf_counter()
        fit = fit_two_way(decode_radix(t.cell_id[s], t.cards), t.f[s], t.cards, trace=trace)
        rows.append({"table": f"real: {name}", "K": fit.K, "n": t.n,
                     "mode": "auto (sparse)" if fit.sparse else "auto (dense)",
                     "support": int(fit.support.size) if fit.sparse else int((fit.mu > 0).sum()),
                     "iterations": fit.iterations, "discrepancy": f"{fit.discrepancy:.2g}",
                     "sec": round(time.perf_counter() - t0, 3),
                     "ms/cycle": round(1000 * (time.perf_counter() - t0) / fit.iterations, 2)})
        traces[f"real: {name}"] = trace
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=20_000_000)
    ap.add_argument("--all-records", action="store_true", help="also write every record (large file)")
    ap.add_argument("--quick", action="store_true", help="small sizes, for trying the script")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(2007)
    rows, traces = [], {}
    bench_table("Skinner 73 440", (2, 2, 18, 6, 17, 10), 950_000, 4_750, rng, rows, traces)
    if args.quick:
        bench_table("10^5 dense", (10,) * 5, 2_000_000, 100_000, rng, rows, traces, 1)
        n_rec = 200_000
    else:
        bench_table("10^7 dense n=1e6", (10,) * 7, 20_000_000, 1_000_000, rng, rows, traces, 1)
        bench_table("10^7 4 keys n=2e4", (100, 50, 40, 50), 20_000_000, 20_000, rng, rows, traces, 1)
        n_rec = args.records
    rows += real_traces(traces)
    rec_rows = []
    bench_records(n_rec, args.all_records, rec_rows)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print("IPF fits (tol 0.01 records, the default); 'bincount flat-K' = same cycles via np.bincount "
              "over all K cells, sec = its time per cycle × our iterations")
        print(pd.DataFrame(rows).to_string(index=False))
        print()
        print(pd.DataFrame(rec_rows).to_string(index=False))
    path = plot(traces)
    if path:
        print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
