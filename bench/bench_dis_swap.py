"""Elliot (2001) Tables 2-5 on a real file: pr(cm|um) after record swapping, by swap fraction and
pairing variables, as a ratio of the unperturbed value (SPEC §6, §8).

Data: ARX's FARS extract (arx_genetic/fars_int.csv, 100 937 records, ``;``), treated as a 2 % sample
(f = 0.02, the sampling fraction of the 1991 SAR that Elliot used). Geography: ``istatenum`` (51
codes: the 50 states and DC in alphabetical order; the text-labelled 10 % extract names code 10
"Guam", but its 4 086 records and its place between Florida and Hawaii make it Georgia). The higher
region is DERIVED here, not in the data: the nine US Census divisions, from the state names (the
analogue of the paper's 12 British regions). Swapping is stratified by state, partners come from the
same division.

Key sets (geography is always a key, as the SAR area is in Elliot's keys; swapping acts only on it):
- "basic keys" (Tables 2/3): Elliot's additional impact analyses, a fundamental key (age, sex,
  state) plus each other FARS variable in turn (race, hispanic, death month, death day, injury):
  five calculations, averaged.
- "scenario keys" (Tables 4/5): three intruder scenarios (age-sex-race-state; age-sex-hispanic-
  injury-state; age-sex-state-death month), averaged.
Pairing sets: random; age; age + sex; age + sex + race (the paper's age, sex, marital status: a
demographic key); injury and injury + hispanic (the paper's tenure and tenure/residents: non-
demographic variables). Swap fractions 1, 2, 5, 10 % (both records of a pair count).

Each calculation iterates perturb -> measure until its running mean is stable to the third decimal
over 10 iterations or 100 have run (``gpurisk.dis.stop_point``). The perturbed files are shared by
the key sets of one (pairing, fraction) cell (the swap does not depend on the keys), each key set
stopping by its own rule. Ratios are mean pr(cm|um) / mean unperturbed pr(cm|um) over the key
sets, as in the paper's Tables 3 and 5.

An orientation check prints the mean T, P, F of both matching orientations (``gpurisk.dis``'s
``orientation``) for three pairing sets. The obvious alternatives are timed in the same run: the same DIS drawing one perturbed file per
pass (batch = 1) and a plain-Python swap + match (a loop over the drawn records and over all
records with dictionaries) for one perturbed file.

    python bench/bench_dis_swap.py            # full run; writes bench/out/dis_swap.{csv,png}
    python bench/bench_dis_swap.py --quick    # fewer cells and iterations, for development
"""
from __future__ import annotations

import argparse
import random
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from gpurisk.dis import dis, pr_cm_um, stop_point, tpf_counts
from gpurisk.freq.encode import encode_keys
from gpurisk.dis.perturb.swap import RecordSwap

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
F = 0.02
FRACTIONS = (0.01, 0.02, 0.05, 0.10)
# codes 0..50 = states in alphabetical order (10 = Georgia, see the docstring) -> Census division
DIVISION = {
    "New England": [6, 19, 21, 29, 39, 45],
    "Middle Atlantic": [30, 32, 38],
    "East North Central": [13, 14, 22, 35, 49],
    "West North Central": [15, 16, 23, 25, 27, 34, 41],
    "South Atlantic": [7, 8, 9, 10, 20, 33, 40, 46, 48],
    "East South Central": [0, 17, 24, 42],
    "West South Central": [3, 18, 36, 43],
    "Mountain": [2, 5, 12, 26, 28, 31, 44, 50],
    "Pacific": [1, 4, 11, 37, 47],
}
FUNDAMENTAL = ["iage", "isex", "istatenum"]
BASIC = {f"+{v}": FUNDAMENTAL + [v] for v in ("irace", "ihispanic", "ideathmon", "ideathday", "iinjury")}
SCENARIO = {
    "age-sex-race-state": ["iage", "isex", "irace", "istatenum"],
    "age-sex-hisp-injury-state": ["iage", "isex", "ihispanic", "iinjury", "istatenum"],
    "age-sex-state-month": ["iage", "isex", "istatenum", "ideathmon"],
}
PAIRINGS = {
    "Random": [],
    "Age": ["iage"],
    "Age, Sex": ["iage", "isex"],
    "Age, Sex, Race": ["iage", "isex", "irace"],
    "Injury": ["iinjury"],
    "Injury, Hispanic": ["iinjury", "ihispanic"],
}
PAPER_PAIRING = {"Random": "Random", "Age": "Age", "Age, Sex": "Age, Sex",
                 "Age, Sex, Race": "Age, Sex, Marital Status", "Injury": "Tenure",
                 "Injury, Hispanic": "Tenure/number of residents"}
#: Elliot (2001) Tables 3 and 5: ratios at 1, 2, 5, 10 % swapping
PAPER3 = {"Random": (0.989, 0.977, 0.943, 0.871), "Age": (0.977, 0.955, 0.921, 0.841),
          "Age, Sex": (0.974, 0.947, 0.924, 0.833),
          "Age, Sex, Marital Status": (0.959, 0.940, 0.902, 0.807),
          "Tenure": (0.985, 0.964, 0.941, 0.860), "Tenure/number of residents": (0.980, 0.960, 0.933, 0.852)}
PAPER5 = {"Random": (0.991, 0.974, 0.944, 0.898), "Age": (0.989, 0.975, 0.941, 0.894),
          "Age, Sex": (0.987, 0.961, 0.922, 0.873),
          "Age, Sex, Marital Status": (0.980, 0.964, 0.928, 0.867),
          "Tenure": (0.992, 0.967, 0.942, 0.880), "Tenure/number of residents": (0.993, 0.973, 0.942, 0.874)}


def find_data() -> Path:
    from gpurisk.testing.data import find_shared_data
    data = find_shared_data(ROOT)
    if data is None:
        raise SystemExit("real data not found: put shared/data beside the repository or set "
                         "GPURISK_SHARED_DATA")
    return data


def load():
    frame = pd.read_csv(find_data() / "arx_genetic" / "fars_int.csv", sep=";")
    div = np.empty(51, np.int64)
    for i, states in enumerate(DIVISION.values()):
        div[states] = i
    assert sorted(s for v in DIVISION.values() for s in v) == list(range(51))
    frame["division"] = div[frame["istatenum"].to_numpy()]
    cols = sorted({c for ks in list(BASIC.values()) + list(SCENARIO.values()) for c in ks}
                  | {c for p in PAIRINGS.values() for c in p} | {"division"})
    enc = {e.name: e for e in encode_keys(frame, cols)}
    return frame, enc


def run_cell(enc, keysets, pairing, frac, seed, max_iter, stable, batch):
    """One (pairing, fraction) cell: shared swapped files, each key set stopping by its own rule."""
    geo = enc["istatenum"]
    sw = RecordSwap(fraction=frac, geo="istatenum", region="division", pairing="+".join(pairing))
    others = [c for c in pairing if c != "istatenum"]
    base_codes = [geo.sample] + [enc[c].sample for c in others]
    base_keys = ["istatenum"] + others
    cats = [geo.categories] + [enc[c].categories for c in others]
    tpf = {name: ([], [], []) for name in keysets}
    stops = {}
    k = 0
    info = Counter()
    while len(stops) < len(keysets):
        rng = np.random.default_rng([seed, k])
        new_geo = sw.perturb_batch(base_codes, cats, rng, keys=base_keys,
                                   extra={"division": enc["division"].sample}, size=batch)[0]
        info.update(sw.last_info)
        for name, keys in keysets.items():
            if name in stops:
                continue
            orig = [enc[c].sample for c in keys]
            pert = [new_geo if c == "istatenum" else np.broadcast_to(enc[c].sample, new_geo.shape)
                    for c in keys]
            T, P, Fc = tpf_counts(orig, pert, [enc[c].cardinality for c in keys])
            for lst, x in zip(tpf[name], (T, P, Fc)):
                lst.extend(x.tolist())
            st = stop_point(pr_cm_um(*tpf[name], F), max_iter, stable, 3)
            if st is not None:
                stops[name] = st
        k += 1
    out = {}
    for name, (T, P, Fc) in tpf.items():
        it, conv = stops[name]
        v = pr_cm_um(T[:it], P[:it], Fc[:it], F)
        out[name] = {"mean": float(v.mean()), "se": float(v.std(ddof=1) / np.sqrt(it)),
                     "iterations": it, "converged": conv}
    return out, info


def unperturbed(enc, keys):
    orig = [enc[c].sample for c in keys]
    T, P, Fc = tpf_counts(orig, [o[None, :] for o in orig], [enc[c].cardinality for c in keys])
    return float(pr_cm_um(T, P, Fc, F)[0])


# --- the obvious alternative: plain Python, one perturbed file ------------------------------------
def naive_swap_and_match(frame, keys, pairing, frac, seed):
    rnd = random.Random(seed)
    n = len(frame)
    geo = frame["istatenum"].tolist()
    div = frame["division"].tolist()
    pv = list(zip(*(frame[c].tolist() for c in pairing))) if pairing else [()] * n
    by_state = defaultdict(list)
    for i, g in enumerate(geo):
        by_state[g].append(i)
    drawn = set()
    for g, rows in by_state.items():
        m = int(len(rows) * frac / 2) + (rnd.random() < (len(rows) * frac / 2) % 1)
        drawn.update(rnd.sample(rows, m))
    pool = defaultdict(list)
    pool_div = defaultdict(list)
    for i in range(n):
        if i not in drawn:
            pool[(div[i], pv[i])].append(i)
            pool_div[div[i]].append(i)
    for lst in list(pool.values()) + list(pool_div.values()):
        rnd.shuffle(lst)                      # a random partner: the first unused one
    used = set()
    new = list(geo)
    for i in drawn:
        cand = [j for j in pool[(div[i], pv[i])] if j not in used][:1]
        if not cand:
            cand = [j for j in pool_div[div[i]] if j not in used][:1]
        if cand:
            j = cand[0]
            used.add(j)
            new[i], new[j] = geo[j], geo[i]
    rows = list(zip(*(frame[c].tolist() for c in keys)))
    gi = keys.index("istatenum")
    rel = [r[:gi] + (g,) + r[gi + 1:] for r, g in zip(rows, new)]
    cnt = Counter(rel)
    T = P = Fc = 0
    for r, x in zip(rows, rel):
        fb = cnt.get(r, 0)
        if r == x:
            T += fb == 1
            P += fb == 2
        else:
            Fc += fb == 1
    return T * F / (T * F + P * (1 - F) + Fc)


def timings(frame, seed):
    keys = SCENARIO["age-sex-race-state"]
    spec = ["swap:fraction=0.10,geo=istatenum,region=division,pairing=iage+isex"]
    rows = []
    for batch in (10, 2, 1):
        t0 = time.perf_counter()
        r = dis(frame, keys, F, spec, max_iter=20, stable=10, decimals=9, batch=batch, seed=seed)
        rows.append((f"gpurisk dis, batch={batch}", time.perf_counter() - t0, r.iterations, r.value))
    t0 = time.perf_counter()
    v = naive_swap_and_match(frame, keys, ["iage", "isex"], 0.10, seed)
    dt = time.perf_counter() - t0
    rows.append(("plain Python swap + match", dt, 1, v))
    print("\nTiming: 20 perturbed files (10 % swap, age+sex pairing), scenario key age-sex-race-state, "
          f"n = {len(frame)}")
    print(f"{'method':<30} {'seconds':>9} {'files':>6} {'s / file':>9} {'pr(cm|um)':>10}")
    for name, s, it, val in rows:
        print(f"{name:<30} {s:9.2f} {it:6d} {s / it:9.3f} {val:10.5f}")
    return rows


def orientations(frame, seed):
    """The paper's literal orientation (released records against the original file) next to the
    intruder's (SPEC §6), with the mean T, P, F: where the pairing effect comes from."""
    keys = SCENARIO["age-sex-race-state"]
    print("\nOrientation check: 10 % swap, key age-sex-race-state, 11 iterations "
          "(mean T, P, F; ratio to unperturbed)")
    print(f"{'pairing':<18} {'orientation':<10} {'T':>8} {'P':>8} {'F':>7} {'ratio':>7}")
    for pname in ("Random", "Age", "Age, Sex, Race"):
        pairing = "+".join(PAIRINGS[pname])
        spec = "swap:fraction=0.10,geo=istatenum,region=division" + (f",pairing={pairing}" if pairing else "")
        for o in ("intruder", "release"):
            r = dis(frame, keys, F, [spec], max_iter=11, stable=10, seed=seed, orientation=o)
            print(f"{pname:<18} {o:<10} {np.mean(r.T):8.1f} {np.mean(r.P):8.1f} {np.mean(r.F):7.1f} "
                  f"{r.ratio:7.3f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two pairing sets, 20 iterations at most")
    ap.add_argument("--seed", type=int, default=2001)
    ap.add_argument("--max-iter", type=int, default=100)
    ap.add_argument("--stable", type=int, default=10)
    ap.add_argument("--batch", type=int, default=10)
    args = ap.parse_args(argv)
    frame, enc = load()
    pairings = dict(list(PAIRINGS.items())[:2]) if args.quick else PAIRINGS
    max_iter = min(args.max_iter, 20) if args.quick else args.max_iter
    base = {**{("basic", k): unperturbed(enc, v) for k, v in BASIC.items()},
            **{("scenario", k): unperturbed(enc, v) for k, v in SCENARIO.items()}}
    print(f"FARS n = {len(frame)}, f = {F}, geography istatenum (51), region = 9 Census divisions")
    print("unperturbed pr(cm|um) = θ̂ (eq. 7): "
          + ", ".join(f"{k[1]} {v:.4f}" for k, v in base.items()))
    rows = []
    t_all = time.perf_counter()
    for pname, pairing in pairings.items():
        for frac in FRACTIONS:
            t0 = time.perf_counter()
            allsets = {("basic", k): v for k, v in BASIC.items()}
            allsets.update({("scenario", k): v for k, v in SCENARIO.items()})
            res, info = run_cell(enc, allsets, pairing, frac, args.seed, max_iter, args.stable,
                                 args.batch)
            for (group, kname), r in res.items():
                rows.append({"group": group, "keys": kname, "pairing": pname, "fraction": frac,
                             "theta_hat": base[(group, kname)], **r})
            print(f"  {pname:<18} {frac:>5.0%}: {time.perf_counter() - t0:6.1f} s, iterations "
                  f"{min(r['iterations'] for r in res.values())}-{max(r['iterations'] for r in res.values())}"
                  + (f", fall-back pairs {info['fallback'] / max(info['pairs'], 1):.2%}" if pairing
                     else ", random pairs"), flush=True)
    total = time.perf_counter() - t_all
    df = pd.DataFrame(rows)
    OUT.mkdir(parents=True, exist_ok=True)
    df.to_csv(OUT / "dis_swap.csv", index=False)
    agg = df.groupby(["group", "pairing", "fraction"], sort=False).agg(
        mean=("mean", "mean"), theta_hat=("theta_hat", "mean"), iters=("iterations", "max"),
        conv=("converged", "all")).reset_index()
    agg["ratio"] = agg["mean"] / agg["theta_hat"]
    for group, title, paper in (("basic", "Tables 2/3 (basic keys: age, sex, state + one)", PAPER3),
                                ("scenario", "Tables 4/5 (scenario keys)", PAPER5)):
        g = agg[agg.group == group]
        th = g["theta_hat"].iloc[0]
        print(f"\n{title}: mean pr(cm|um), unperturbed {th:.4f}")
        print(f"{'pairing variable set':<20}" + "".join(f"{f:>9.0%}" for f in FRACTIONS))
        for p in pairings:
            s = g[g.pairing == p].set_index("fraction")
            print(f"{p:<20}" + "".join(f"{s.loc[f, 'mean']:9.4f}" for f in FRACTIONS))
        print(f"\n... as a ratio of unperturbed  (paper's {group} table in brackets, its pairing set)")
        for p in pairings:
            s = g[g.pairing == p].set_index("fraction")
            pp = paper[PAPER_PAIRING[p]]
            print(f"{p:<20}" + "".join(f"{s.loc[f, 'ratio']:7.3f} ({q:.3f})" for f, q in zip(FRACTIONS, pp))
                  + f"   [{PAPER_PAIRING[p]}]")
    conv = df["converged"].mean()
    print(f"\n{len(df)} calculations, {conv:.0%} stable before --max-iter; DIS total {total:.0f} s")
    orientations(frame, args.seed)
    rows_t = timings(frame, args.seed)
    plot(agg, pairings)
    return agg, rows_t


def plot(agg, pairings):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (group, title, paper) in zip(axes, (("basic", "basic keys (Tables 2/3)", PAPER3),
                                                ("scenario", "scenario keys (Tables 4/5)", PAPER5))):
        g = agg[agg.group == group]
        for c, p in zip(colors, pairings):
            s = g[g.pairing == p]
            ax.plot([0] + list(100 * s.fraction), [1] + list(s.ratio), "o-", color=c, label=f"FARS: {p}")
            ax.plot([0] + [100 * f for f in FRACTIONS], [1] + list(paper[PAPER_PAIRING[p]]), ":",
                    color=c, alpha=0.6)
        ax.set_title(title)
        ax.set_xlabel("swapping fraction (%)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("pr(cm|um) / unperturbed")
    axes[1].plot([], [], "k:", alpha=0.6, label="Elliot (2001), 1991 SAR")
    axes[1].legend(fontsize=7, loc="lower left")
    fig.suptitle("Record swapping: risk relative to the unperturbed file (FARS, f = 0.02)")
    fig.tight_layout()
    fig.savefig(OUT / "dis_swap.png", dpi=120)
    print(f"wrote {OUT / 'dis_swap.png'} and {OUT / 'dis_swap.csv'}")


if __name__ == "__main__":
    main()
