"""Which interaction does model=auto_cv choose? (issue 27) Per (population, key set, π), Bernoulli
samples, the share of samples in which the split-sample criterion of gpurisk.models.model_choice
picks each pair of keys (or none: main effects).

    python bench/model_choice_picks.py --reps 20
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validate_trust import DEFAULT, POPULATIONS, find_data  # noqa: E402

from gpurisk.models.forest import choose_pair  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--only", default=",".join(DEFAULT))
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args(argv)
    data = find_data()
    for pop in a.only.split(","):
        path, sep, sets, _ = POPULATIONS[pop]
        d = pd.read_csv(data / path, sep=sep)
        for label, keys in zip("SML", sets):
            codes = [pd.factorize(d[k], use_na_sentinel=False)[0] for k in keys]
            cards = [int(c.max()) + 1 for c in codes]
            for pi in (0.01, 0.05, 0.1):
                rng = np.random.default_rng(a.seed)
                picks = Counter()
                for r in range(a.reps):
                    m = rng.random(len(d)) < pi
                    cid, f = np.unique(np.ravel_multi_index([c[m] for c in codes], cards),
                                       return_counts=True)
                    pair = choose_pair(list(np.unravel_index(cid, cards)), f, cards, seed=0)[0]
                    picks["main effects" if pair is None else
                          f"{keys[pair[0]]}×{keys[pair[1]]}"] += 1
                top = ", ".join(f"{k} {100 * v / a.reps:.0f} %" for k, v in picks.most_common(3))
                print(f"{pop:9} {label} π={pi:<5} {top}", flush=True)


if __name__ == "__main__":
    main()
