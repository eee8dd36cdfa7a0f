"""Benchmark of ``protect``'s local suppression on ARX's adult data: the whole 12 960-node lattice
of the nine hierarchies for ``k_anonymity>=5`` on the 8-key scenario with ``--suppress-limit
0.01``, once with single values suppressed (``values``) and once with whole records (``records``):
time, nodes that suppress, the optimum's node, its precision loss and the values suppressed per key.

    python bench/bench_suppress.py            # both modes
    python bench/bench_suppress.py records    # one
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpurisk.protect import protect  # noqa: E402

KEYS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass",
        "occupation", "salary-class"]


def main(modes) -> None:
    from gpurisk.testing.data import find_shared_data
    arx = (find_shared_data(ROOT) or ROOT.parent / "shared" / "data") / "arx"
    hier = {k: str(arx / f"adult_hierarchy_{k}.csv") for k in KEYS}
    for mode in modes:
        t = time.perf_counter()
        p = protect(str(arx / "adult.csv"), KEYS, hier, ["k_anonymity>=5"], scenarios=[KEYS[:8]],
                    suppress_limit=0.01, suppress=mode)
        r = p.result
        print(f"{mode}: {time.perf_counter() - t:.1f} s, {r.stats['nodes']} nodes, "
              f"{r.stats['suppressing']} suppress; optimum {p.node}, precision "
              f"{r.loss[r.optimum[0]]:.4f}; values suppressed {p.settings['suppressed_values']} "
              f"in {p.settings['suppressed_records']} records", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["values", "records"])
