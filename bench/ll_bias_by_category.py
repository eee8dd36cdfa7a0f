"""Which sample uniques carry matches_ll's (or tau1_ll's) bias? (issue 43) Ê or τ̂1 split by the kind of
unique.

For each (population, key set, π) named, Bernoulli samples of the population (bench/validate_trust.py's
populations and key sets); per sample, each sample unique's term of the default Ê (``model=eb``, its
rooted form, ``root_prior=eb``: :func:`gpurisk.models.table_fits.eb_means`, the leave-one-out prior
:func:`gpurisk.models.prior.loo_prior`, :func:`gpurisk.models.terms.unique_terms`) beside its truth
1/F (F counted in the population, a missing value a category of its own, as gpurisk counts it); with
``--measure tau1``, τ̂1's term beside I(F = 1). The terms' sum is checked against ``matches_ll``'s
(``tau1_ll``'s) value on the same table (to 10⁻⁹ relative), so the split is of the default estimate
itself. The uniques are split three ways:

- ``missing``: some key of the unique is missing (NaN);
- ``rare``: none missing, and some key's category is held by at most ``--rare`` sample records;
- ``other``: the rest.

Per kind, the mean over samples of the number of uniques, of Σ terms (Ê's part), of Σ 1/F (E's
part) and of their difference (the kind's part of Ê's bias); the kinds' parts add up to Ê − E.

    python bench/ll_bias_by_category.py --reps 20 --cells star:0:0.05,gssvocab:0:0.05
    python bench/ll_bias_by_category.py --reps 40 --measure tau1 --cells fars:0:0.01
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validate_trust import POPULATIONS, find_data, load  # noqa: E402

from gpurisk.freq.engine import build_table  # noqa: E402
from gpurisk.measure import Context  # noqa: E402
from gpurisk.measures.matches_ll import MatchesLL  # noqa: E402
from gpurisk.measures.tau1_ll import Tau1LL  # noqa: E402
from gpurisk.models.prior import loo_prior  # noqa: E402
from gpurisk.models.table_fits import eb_means  # noqa: E402
from gpurisk.models.terms import unique_terms  # noqa: E402

#: the kinds of sample unique, in the order printed
KINDS = ("missing", "rare", "other")
#: the study's cells where Ê was furthest from E (issue 43's stop 65, 200 samples a cell), and two
#: where it was close
CELLS = ("star:0:0.05,star:0:0.1,gssvocab:0:0.05,gssvocab:0:0.1,mortgages:1:0.05,"
         "mortgages:1:0.1,vietnam:0:0.05,testdata:0:0.05,covid:0:0.05,fars:0:0.05,adult:1:0.05")


#: --measure: the kind of term (gpurisk.models.terms), its measure, the truth per unique (from F)
MEASURES = {"matches": ("inverse", MatchesLL, lambda F: 1.0 / F),
            "tau1": ("tau1", Tau1LL, lambda F: (F == 1).astype(float))}


def unique_terms_of(table, pi: float, kind: str = "inverse") -> np.ndarray:
    """Each sample unique's term of the default Ê (``kind="tau1"``: τ̂1), in the order of the
    table's cells with f = 1."""
    mu, alpha, _, counts, _, _, _ = eb_means(table, None, "truncated", smoothing="rooted",
                                             root_prior="eb")
    mu_prior, alpha_prior = loo_prior(float(table.n), counts, alpha)
    return unique_terms(mu_prior, alpha_prior, pi, kind, variance=False)[0]


def split(sample: pd.DataFrame, population_counts: pd.DataFrame, keys, pi: float,
          rare: int, measure: str = "matches") -> dict:
    """Per kind: [uniques, Σ terms, Σ truth] of one sample (module docstring)."""
    kind, cls, truth_of = MEASURES[measure]
    table = build_table(sample, keys)
    terms = unique_terms_of(table, pi, kind)
    got = cls().compute(table, Context(fraction=pi))
    if got.value is None:
        raise SystemExit(f"{cls.name} gives no value on a sample: {got.reason}")
    value = got.value
    if not np.isclose(float(terms.sum()), value, rtol=1e-9, atol=1e-12):
        raise SystemExit(f"the split's terms sum to {terms.sum()!r}, {cls.name} gives {value!r}")
    su = np.flatnonzero(np.asarray(table.f) == 1)
    labels = pd.DataFrame(table.cell_labels(su), columns=list(keys))
    labels = labels.astype(object).where(labels.notna(), None)
    F = labels.merge(population_counts, on=list(keys), how="left")["F"].to_numpy(float)
    if F.shape[0] != terms.shape[0] or not np.all(F >= 1):
        raise SystemExit("a sample unique's cell was not found in the population")
    truth = truth_of(F)
    missing = labels.isna().any(axis=1).to_numpy()
    small = np.zeros(su.shape[0], dtype=bool)
    for k in keys:
        held = sample[k].value_counts(dropna=False)
        count = {(None if pd.isna(c) else c): int(v) for c, v in held.items()}
        small |= labels[k].map(count).to_numpy(float) <= rare
    kinds = {"missing": missing, "rare": small & ~missing, "other": ~small & ~missing}
    return {kind: [int(m.sum()), float(terms[m].sum()), float(truth[m].sum())]
            for kind, m in kinds.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", default=CELLS,
                    help="comma-separated population:keyset:pi (keyset 0, 1, 2: S, M, L)")
    ap.add_argument("--reps", type=int, default=20, help="samples a cell")
    ap.add_argument("--rare", type=int, default=2,
                    help="a category held by at most this many sample records is rare")
    ap.add_argument("--seed", type=int, default=1000)
    ap.add_argument("--measure", default="matches", choices=list(MEASURES),
                    help="matches: Ê (matches_ll) against E; tau1: τ̂1 (tau1_ll) against τ1")
    a = ap.parse_args(argv)
    est, what = ("Ê", "E") if a.measure == "matches" else ("τ̂1", "τ1")
    print(f"{est}'s bias split by the kind of sample unique (mean over {a.reps} samples; missing: a "
          f"key missing; rare: a category held by ≤ {a.rare} sample records; {est}'s part − {what}'s "
          "part = the kind's part of the bias)")
    print(f"{'cell':<44} {what:>7} {est:>7} | " + " | ".join(
        f"{k + f': n, {est}, {what}, bias':<30}" for k in KINDS))
    for cell in a.cells.split(","):
        name, keyset, pi = cell.split(":")
        path, sep, sets, _ = POPULATIONS[name]
        keys = list(sets[int(keyset)])
        pi = float(pi)
        data = find_data()
        if data is None or not (data / path).exists():
            raise SystemExit(f"{name}: {path} is not under ../shared/data")
        frame = load(data / path, sep)[keys]
        counts = frame.groupby(keys, observed=True, dropna=False).size().rename("F").reset_index()
        counts = counts.astype(object).where(counts.notna(), None)
        counts["F"] = counts["F"].astype(float)
        total = {k: np.zeros(3) for k in KINDS}
        for r in range(a.reps):
            rng = np.random.default_rng(a.seed + r)
            got = split(frame[rng.random(len(frame)) < pi], counts, keys, pi, a.rare, a.measure)
            for k in KINDS:
                total[k] += got[k]
        mean = {k: v / a.reps for k, v in total.items()}
        e_hat = sum(v[1] for v in mean.values())
        e = sum(v[2] for v in mean.values())
        print(f"{name + ' ' + ','.join(keys) + f' π={pi:g}':<44.44} {e:>7.2f} {e_hat:>7.2f} | "
              + " | ".join(f"{v[0]:>5.1f} {v[1]:>6.2f} {v[2]:>6.2f} {v[1] - v[2]:>+7.2f}   "
                           for v in mean.values()), flush=True)


if __name__ == "__main__":
    main()
