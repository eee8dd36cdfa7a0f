"""What the headline Ê (matches_ll) and τ̂1 (tau1_ll) cost ``gpurisk.assess`` of a sample file, against
one pandas ``groupby().size()`` of the same keys (issue 43).

Data: N records of bench_backends' ``tied_register`` (8 int8 keys of 2-100 categories, KEYS[1] tied to
KEYS[0]: an interaction for the model choice to find), or with ``--data uniform`` the same keys drawn
independently (nearly every record a cell of its own), every record in the sample, π = 1 %. Each step
runs in a child process of its own, by this code and by ``--before REV``'s (``git archive`` of its
``gpurisk/`` into a temporary folder, imported by the child), the codes in turn:

- ``pandas groupby``: ``frame.groupby(KEYS, observed=True).size()``, the obvious alternative;
- ``count``: ``build_table`` of the frame (the frequency table every measure reads);
- ``Ê, τ̂1``: ``matches_ll`` and ``tau1_ll`` computed on that table (model choice, fits, terms),
  after both have run once on the first 2 000 records (the modules they import, 36 MiB once per
  process, are not the table's cost; issue 43's stops before 71 counted them in this step's peak);
- ``assess``: ``gpurisk.assess(frame, KEYS, fraction=0.01)``: the default measures, the headline
  among them, as a user runs it;
- ``floor``: the cheapest estimate of E that gives each sample unique a term of its own, on the
  counted table, in plain numpy (:func:`floor_estimate`): each key's margin over the cells, each
  unique's product of its keys' shares, Σ (1 − e^{−m})/m (main effects, plug-in, Poisson: what
  ``matches_ll`` gives with ``model=independence, prior=plugin, dispersion=none``), on the
  machine's CPUs as Ê's pass runs. Any Ê that reads every unique's categories costs at least
  about this; count + floor is what such an ``assess`` would cost with nothing else in it. Run by
  this code only, as the groupby; each code's ``Ê, τ̂1`` is also printed as a multiple of it
  (issue 43's stop 72 proposed at most 5 as the target).

Wall seconds (best of ``--repeat``), and the peak of the child's resident memory during the step over
its resident memory just before it (sampled every 20 ms); ``table MB`` is the size of the table's
arrays (cell ids, counts). Every figure of matches_ll and tau1_ll (value, s.e., bounds, extras) of
the two codes' ``assess`` is compared: the largest relative difference is printed (0: bit for bit).
The load average is printed beside the table (a shared machine: compare numbers of one run).

    python bench/bench_assess_headline.py --rows 2e6,2e7            # this code and BEFORE's
    python bench/bench_assess_headline.py --rows 2e6 --before none   # this code only
    python bench/bench_assess_headline.py --rows 6e7 --data uniform --steps count,assess --before none
    python bench/bench_assess_headline.py --rows 2e7 --before none --steps groupby,count,floor --repeat 3
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# a child for --before imports that revision's package from the folder it was extracted to
sys.path.insert(0, os.environ.get("GPURISK_BENCH_TREE", str(ROOT)))
sys.path.insert(1, str(ROOT / "bench"))
os.environ.setdefault("GPURISK_DISABLE_PLUGIN_AUTOLOAD", "1")

#: the code before issue 43's cheaper Ê (same values): --before's default
BEFORE = "1623eec"
#: step id -> the label printed
STEPS = {"groupby": "pandas groupby", "count": "count", "headline": "Ê, τ̂1", "assess": "assess",
         "floor": "floor"}
FRACTION = 0.01


def _rss() -> int:
    import psutil
    return psutil.Process().memory_info().rss


class Peak:
    """The peak resident memory of this process while the block runs, sampled every 20 ms."""

    def __enter__(self):
        self.start = self.peak = _rss()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self):
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, _rss())


def _figures(res) -> dict:
    """Every number and word of a Result, for the comparison of the two codes."""
    out = {"value": res.value, "se": res.se, "upper": res.upper}
    out |= {k: v for k, v in res.extra.items() if v is None or isinstance(v, (bool, int, float, str))}
    return out


def register(rows: int, data: str):
    """The sample: bench_backends' tied register, or (``uniform``) its 8 keys drawn uniformly and
    independently (seeded; nearly every record a cell of its own: 57 M cells at 6·10⁷ rows)."""
    import numpy as np
    import pandas as pd
    from bench_backends import CARDS, KEYS, tied_register
    if data == "tied":
        return tied_register(rows)[KEYS]
    rng = np.random.default_rng(0)
    return pd.DataFrame({k: rng.integers(0, c, rows).astype("int8") for k, c in zip(KEYS, CARDS)})


def floor_estimate(table, pi: float, threads: int | None = None) -> float:
    """Ê under main effects with the plug-in prior and Poisson cells, straight from the table's
    arrays: λ̂_j = (n/π) Π_v f_v(x_jv)/n over the sample uniques j, m = (1 − π) λ̂,
    Ê = Σ_j (1 − e^{−m_j})/m_j: the keys' codes decoded, their margins summed a key per thread,
    the uniques' products and terms a slice per thread (``threads``: the machine's CPUs)."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    from gpurisk.freq.rollup import cell_codes
    f = np.asarray(table.f)
    n = float(f.sum())
    unique = np.flatnonzero(f == 1)
    codes = cell_codes(table)
    workers = threads or os.cpu_count() or 1
    with ThreadPoolExecutor(workers) as pool:
        shares = list(pool.map(lambda c: np.bincount(c, weights=f) / n, codes))

        def part(rows):
            lam = np.full(rows.shape[0], n / pi)
            for c, s in zip(codes, shares):
                lam *= s[c[rows]]
            m = (1.0 - pi) * lam
            return float(np.sum(-np.expm1(-m) / m))
        return sum(pool.map(part, np.array_split(unique, 8 * workers)))


def child(step: str, rows: int, data: str = "tied") -> dict:
    """One step on a fresh sample of ``rows`` records: wall s, peak MB over the start, table MB."""
    import gc

    import gpurisk
    from bench_backends import KEYS
    from gpurisk.freq.engine import build_table
    assert Path(gpurisk.__file__).resolve().is_relative_to(
        Path(os.environ.get("GPURISK_BENCH_TREE", str(ROOT))).resolve())
    frame = register(rows, data)
    out: dict = {}
    table = None
    if step in ("count", "headline", "floor"):
        gc.collect()
        with Peak() as pk:
            t = time.perf_counter()
            table = build_table(frame, KEYS)
            wall = time.perf_counter() - t
        out["table_mb"] = sum(a.nbytes for a in (table.cell_id, table.f, table.F, table.w)
                              if a is not None) / 2**20
    if step == "headline":
        from gpurisk.measure import Context
        from gpurisk.measures.matches_ll import MatchesLL
        from gpurisk.measures.tau1_ll import Tau1LL
        ctx = Context(fraction=FRACTION)
        # the modules the measures import when first run (scipy's optimisers and special
        # functions, gpurisk.models: 36 MiB once per process, whatever the table) are loaded
        # first, by both measures on the first 2 000 records, so the step's peak is its own
        small = build_table(frame.head(2000), KEYS)
        for m in (MatchesLL, Tau1LL):
            m().compute(small, ctx)
        del frame, small
        gc.collect()
        with Peak() as pk:
            t = time.perf_counter()
            res = {m.name: m().compute(table, ctx) for m in (MatchesLL, Tau1LL)}
            wall = time.perf_counter() - t
        out["figures"] = {k: _figures(v) for k, v in res.items()}
    elif step == "floor":
        del frame
        gc.collect()
        with Peak() as pk:
            t = time.perf_counter()
            out["value"] = floor_estimate(table, FRACTION)
            wall = time.perf_counter() - t
    elif step == "groupby":
        gc.collect()
        with Peak() as pk:
            t = time.perf_counter()
            g = frame.groupby(KEYS, observed=True).size()
            wall = time.perf_counter() - t
        out["cells"] = int(g.shape[0])
    elif step == "assess":
        gc.collect()
        with Peak() as pk:
            t = time.perf_counter()
            r = gpurisk.assess(frame, KEYS, fraction=FRACTION)
            wall = time.perf_counter() - t
        out["figures"] = {k: _figures(r.measures[k]) for k in ("matches_ll", "tau1_ll")}
    out |= {"wall": wall, "peak_mb": (pk.peak - pk.start) / 2**20}
    return out


def run_child(step: str, rows: int, tree: Path | None, data: str = "tied") -> dict:
    env = dict(os.environ)
    if tree is not None:
        env["GPURISK_BENCH_TREE"] = str(tree)
    got = subprocess.run([sys.executable, __file__, "--child", step, "--rows", str(rows),
                          "--data", data], env=env,
                         capture_output=True, text=True)
    if got.returncode != 0:
        raise SystemExit(f"the child for {step!r} at {rows} rows failed:\n{got.stderr[-3000:]}")
    return json.loads(got.stdout.strip().splitlines()[-1])


def extract(rev: str, tmp: Path) -> Path:
    import io
    import tarfile
    tree = tmp / "before"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "gpurisk"], check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(tree, filter="data")
        else:
            tar.extractall(tree)
    return tree


def largest_difference(a: dict, b: dict) -> float:
    """The largest relative difference of the figures (inf where a word or a None differs)."""
    worst = 0.0
    for m in a:
        for k, x in a[m].items():
            y = b[m].get(k)
            if isinstance(x, float) and isinstance(y, float):
                if x != y:
                    worst = max(worst, abs(x - y) / max(abs(x), abs(y)))
            elif x != y:
                return float("inf")
    return worst


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="2e6", help="comma-separated record counts")
    ap.add_argument("--repeat", type=int, default=1, help="best of N")
    ap.add_argument("--before", default=BEFORE, help="a git revision whose code runs the same "
                    "steps ('none': skip)")
    ap.add_argument("--steps", default=",".join(STEPS), help="comma-separated: " + ", ".join(STEPS))
    ap.add_argument("--data", default="tied", choices=("tied", "uniform"),
                    help="tied: bench_backends' tied register; uniform: its keys independent")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, int(float(args.rows)), args.data)))
        return
    steps = [s for s in STEPS if s in args.steps.split(",")]
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        codes = {"this": None}
        if args.before != "none":
            codes[args.before] = extract(args.before, Path(tmp))
        for rows in [int(float(r)) for r in args.rows.split(",") if r]:
            for step in steps:
                for code, tree in codes.items():
                    if step in ("groupby", "floor") and code != "this":
                        continue
                    runs = [run_child(step, rows, tree, args.data) for _ in range(args.repeat)]
                    best = min(runs, key=lambda r: r["wall"])
                    best["peak_mb"] = max(r["peak_mb"] for r in runs)
                    results[(rows, step, code)] = best
                    print(f"[{rows:,} rows] {STEPS[step]:15s} {code:8s} {best['wall']:8.2f} s  peak "
                          f"+{best['peak_mb']:7.0f} MB", flush=True)
    load = os.getloadavg()
    print(f"\ngpurisk.assess of a sample of N records x 8 keys ({args.data}: bench_backends' keys), "
          f"pi = {FRACTION:g}; each step in a child process, wall best of {args.repeat}, peak: the "
          f"child's resident memory over its start; load average {load[0]:.1f} {load[1]:.1f} "
          f"{load[2]:.1f} on {os.cpu_count()} CPUs")
    hdr = (f"{'rows':>11s} {'step':15s} {'code':8s} {'wall s':>7s} {'peak MB':>8s} "
           f"{'table MB':>8s} {'x groupby':>9s}")
    print(hdr + "\n" + "-" * len(hdr))
    for (rows, step, code), r in results.items():
        pd_s = results.get((rows, "groupby", "this"), {}).get("wall")
        ratio = f"{pd_s / r['wall']:>9.2f}" if pd_s else " " * 9
        table = f"{r['table_mb']:>8.0f}" if "table_mb" in r else " " * 8
        print(f"{rows:>11,} {STEPS[step]:15s} {code:8s} {r['wall']:>7.2f} {r['peak_mb']:>8.0f} {table} "
              f"{ratio}")
    print("('x groupby': the pandas groupby's wall time over the step's: above 1, the step is faster)")
    for rows in dict.fromkeys(k[0] for k in results):
        parts = [results.get((rows, s, "this"), {}).get("wall") for s in ("groupby", "count", "floor")]
        if all(parts):
            print(f"[{rows:,} rows] count + floor: {parts[1] + parts[2]:.2f} s, "
                  f"{parts[0] / (parts[1] + parts[2]):.2f} times as fast as the groupby: the most an "
                  f"assess whose Ê reads every sample unique can be, with nothing else in it")
        for code in dict.fromkeys(k[2] for k in results if k[0] == rows):
            head = results.get((rows, "headline", code), {}).get("wall")
            if head and parts[2]:     # issue 43's stop 72 proposed at most 5 times the floor
                print(f"[{rows:,} rows] Ê, τ̂1 ({code}): {head / parts[2]:.2f} times the floor "
                      f"(this code's floor, the same run)")
        for step in ("headline", "assess"):
            a = results.get((rows, step, "this"))
            b = results.get((rows, step, args.before))
            if a and b and "figures" in a and "figures" in b:
                d = largest_difference(b["figures"], a["figures"])
                print(f"[{rows:,} rows] {STEPS[step]}: every matches_ll and tau1_ll figure of this code "
                      f"against {args.before}'s: largest relative difference {d:.3g}")


if __name__ == "__main__":
    main()
