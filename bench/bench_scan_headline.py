"""What Ê (matches_ll) and τ̂1 (tau1_ll) cost a scan: the default model against main effects.

A scan runs ``matches_ll`` and ``tau1_ll`` for every combination by default (the ranking is by Ê).
For FARS (8 keys, every one of the 255 combinations, π = 1 %) and Adult (8 keys, all 255, π = 1 %)
this times ``gpurisk.scan`` (one thread: ``threads=0``, ``processes=0``; no output file) with

- ``default``: the default measures and options: Ê and τ̂1 with the default ``model`` (``eb`` since
  issue 43: every pair of keys scored by its Bayes factor, the kept ones rooted and smoothed, a
  key's shares given its parent's shrunk towards its own; ``auto_cv`` before: every pair scored on
  held-out halves) and ``prior=loo``;
- ``main effects, plug-in``: the same with ``model=independence, prior=plugin`` (the default before
  issue 27's third stop; the obvious cheaper alternative, closed form);
- ``without Ê, τ̂1``: the default measures minus matches_ll and tau1_ll;
- ``floor (plug-in, numpy)``: no scan, but the cheapest estimate of E that gives each sample unique
  a term of its own (bench_assess_headline's :func:`floor_estimate`: main effects, plug-in,
  Poisson, plain numpy, one thread) on every combination's table of the sample, the tables counted
  beforehand: about the least any Ê that reads every sample unique's categories would cost the
  scan, beside what the scan costs without one;
- with ``--interval-model``, ``default, interval=model``: the default with Ê's and τ̂1's interval
  from the model alone (its variance, α̂'s profile, the risk criterion's misfit widening);
- with ``--option KEY=VALUE``: the default with those options of Ê and τ̂1;
- with ``--processes``: the default with its measure processes (``processes=None``: the CPUs
  usable, at most 8; :mod:`gpurisk.scan.processes`), every column checked equal to the default's
  exactly. Every other scan here runs ``processes=0``. Its CPU seconds include the processes'.

and checks that every column other than matches_ll's and tau1_ll's is equal in the first two. Best
of ``--repeat`` runs; the machine's load average is printed beside the table (a shared machine:
compare numbers of the same run).

With ``--before REV`` (default: BEFORE, the commit before Ê's model choice was made cheaper) the
default and the without-Ê scans are also run by that revision's code (``git archive`` of its
``gpurisk/`` into a temporary folder, imported by a child process that serves the scans one at a
time, in turn with this process's), every column of its default scan is checked equal to this
code's (floats exactly, but Ê's and τ̂1's to 1e-12 relative: :func:`same_scan`), and the table
gives what Ê and τ̂1 add to a scan under each code.
``--synthetic N`` adds a synthetic register of N records: the 8 int8 keys of bench_backends' CARDS,
KEYS[1] tied to KEYS[0] (an interaction), a 1 % Bernoulli sample flag (as bench/bench_scan_gpu.py).

    python bench/bench_scan_headline.py                 # FARS and Adult, best of 5, before/after
    python bench/bench_scan_headline.py --repeat 3 --datasets fars --synthetic 3e6,1e7
    python bench/bench_scan_headline.py --before none   # this code only
    python bench/bench_scan_headline.py --interval-model --repeat 3 --before c759e8c
    python bench/bench_scan_headline.py --before none --repeat 3 --option arc_target=neighbours
    python bench/bench_scan_headline.py --before none --repeat 3 --processes
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
# a child serving --before imports that revision's package from the folder it was extracted to
sys.path.insert(0, os.environ.get("GPURISK_BENCH_TREE", str(ROOT)))
sys.path.insert(1, str(ROOT / "bench"))
os.environ.setdefault("GPURISK_DISABLE_PLUGIN_AUTOLOAD", "1")

import gpurisk  # noqa: E402
from gpurisk.scan.runner import SCAN_HEADLINE, _measure_names  # noqa: E402

MAIN_PLUGIN = {"loglinear_risk": {"model": "independence", "prior": "plugin"}}
#: --interval-model: the default scan with interval=model for Ê and τ̂1
MODEL_INTERVAL = {"loglinear_risk": {"interval": "model"}}
#: the code before Ê's model choice was made cheaper (same values, fewer passes): --before's default
BEFORE = "275a65e"
SYNTHETIC = "synthetic:"


# --- data and timing --------------------------------------------------------------------------------
def data(name: str) -> tuple[pd.DataFrame, list[str]]:
    if name.startswith(SYNTHETIC):
        from bench_backends import KEYS, tied_register
        return tied_register(int(float(name[len(SYNTHETIC):]))), list(KEYS)
    from gpurisk.testing.data import find_shared_data
    d = find_shared_data(ROOT)
    if d is None:
        raise SystemExit("real data not found (../shared/data, or set GPURISK_SHARED_DATA)")
    if name == "fars":
        df = pd.read_csv(d / "arx_genetic" / "fars_int.csv", sep=";")
        return df, list(df.columns)
    df = pd.read_csv(d / "arx" / "adult.csv", sep=";")
    return df, ["sex", "age", "race", "marital-status", "education", "native-country", "workclass",
                "occupation"]


class Timed(tuple):
    """(value, wall s, CPU s) of a run timed elsewhere (the --before child)."""


def cpu_seconds() -> float:
    """This process's CPU seconds and those of its children that ended (a scan's measure processes
    end with it)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def timed(fn):
    w, c = time.perf_counter(), cpu_seconds()
    out = fn()
    if isinstance(out, Timed):
        return tuple(out)
    return out, time.perf_counter() - w, cpu_seconds() - c


def rounds(variants: dict, repeat: int) -> dict:
    """name -> (last result, best wall s, median wall s, best CPU s); the variants run in turn
    (round robin, the order rotated each round) so that a change of load hits them alike."""
    names = list(variants)
    runs: dict = {k: [] for k in names}
    for r in range(repeat):
        for k in names[r % len(names):] + names[:r % len(names)]:
            runs[k].append(timed(variants[k]))
    return {k: (v[-1][0], min(x[1] for x in v), float(np.median([x[1] for x in v])),
                min(x[2] for x in v)) for k, v in runs.items()}


def scanner(name: str, fraction: float, options: dict | None = None):
    """(variant -> a function running that scan, the variants' measure lists); ``options``: Ê's and
    τ̂1's options of the variant "options" (--option)."""
    df, keys = data(name)
    names = _measure_names(None)
    without = [m for m in names if m not in SCAN_HEADLINE]
    synth = name.startswith(SYNTHETIC)

    def run(ms, options=None, processes=0):
        how = {"sample_flag": "s"} if synth else {"fraction": fraction}
        if "processes" in inspect.signature(gpurisk.scan).parameters:   # not in a --before tree
            how["processes"] = processes                                 # that predates it
        return gpurisk.scan(df, keys=keys, measures=ms, threads=0, options=options, **how)

    def floor():
        """The floor's run over every combination's table of the sample (counted here, once)."""
        from itertools import combinations

        from bench_assess_headline import floor_estimate
        from gpurisk.freq.engine import build_table
        sample = df[df["s"]] if synth else df
        pi = 0.01 if synth else fraction
        tables = {c: build_table(sample[list(c)], list(c))
                  for k in range(1, len(keys) + 1) for c in combinations(keys, k)}
        return lambda: {c: floor_estimate(t, pi, threads=1) for c, t in tables.items()}
    return {"default": lambda: run(names), "main": lambda: run(names, MAIN_PLUGIN),
            "floor": floor,
            "without": lambda: run(without), "model": lambda: run(names, MODEL_INTERVAL),
            "processes": lambda: run(names, processes=None),
            "options": lambda: run(names, {"loglinear_risk": dict(options or {})})}


class Before:
    """The scans of ``--before``'s revision, run by a child process (:func:`serve`) on request."""

    def __init__(self, rev: str, fraction: float, tmp: Path):
        import subprocess
        import tarfile
        tree = tmp / "before"
        tree.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "gpurisk"],
                                 check=True, capture_output=True).stdout
        import io
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            if hasattr(tarfile, "data_filter"):        # Python >= 3.10.12 / 3.11.4
                tar.extractall(tree, filter="data")
            else:
                tar.extractall(tree)
        env = dict(os.environ, GPURISK_BENCH_TREE=str(tree))
        self.tmp, self.rev = tmp, rev
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", "--fraction",
                                      str(fraction)], env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.calls = 0

    def __call__(self, name: str, variant: str):
        self.calls += 1
        out = self.tmp / f"before_{self.calls}.pkl"
        self.proc.stdin.write(json.dumps([name, variant, str(out)]) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("the --before child ended")
        wall, cpu = json.loads(line)
        return Timed((pd.read_pickle(out), wall, cpu))

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def serve(fraction: float):
    """The child of ``--before``: for each line [data, variant, path] on stdin, run that scan, write
    its rows to path and answer [wall s, CPU s]."""
    import gpurisk as code
    assert Path(code.__file__).resolve().is_relative_to(Path(os.environ["GPURISK_BENCH_TREE"]))
    runs: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for line in sys.stdin:
            name, variant, path = json.loads(line)
            if name not in runs:
                runs = {name: scanner(name, fraction)}
                runs[name]["default"]()                       # warm: imports, scipy
            res, wall, cpu = timed(runs[name][variant])
            res.results.to_pickle(path)
            print(json.dumps([wall, cpu]), flush=True)


#: Ê's and τ̂1's columns may differ from the code before by the order of a sum (issue 43: the
#: held-out scores summed over pairs of categories, not cells, move the model choice's spread in the
#: s.e. by ~1e-16 relative); every other column must be equal exactly
HEADLINE_RTOL = 1e-12


#: matches_ll's interval changed default at issue 43's sixth stop (calibrated -> model, whose
#: misfit widening became bounded then too): a default scan by a revision before it differs there by
#: design, so those columns are not compared (the interval=model scans are timed, not compared);
#: tau1_ll's changed the same way at issue 43's seventh stop
INTERVAL_COLUMNS = tuple(f"{m}_{c}" for m in ("matches_ll", "tau1_ll")
                         for c in ("se", "upper", "interval_lower", "interval_upper"))


def same_scan(before: pd.DataFrame, now: pd.DataFrame, skip=()) -> float:
    """Check the two scans' rows equal (Ê's and τ̂1's floats to HEADLINE_RTOL; ``skip``: columns
    not compared): the largest relative difference of those."""
    before = before.drop(columns=list(skip), errors="ignore")
    now = now.drop(columns=list(skip), errors="ignore")
    # the two-sided interval's columns (issue 43's eighth stop) and the notes (stop 68) only in
    # scans written since
    now = now.drop(columns=[c for c in now.columns if c.endswith(("_interval_lower",
                                                                  "_interval_upper", "_note"))
                            and c not in before.columns])
    assert list(before.columns) == list(now.columns)
    near = [c for c in now.columns if c.startswith(tuple(SCAN_HEADLINE))
            and pd.api.types.is_float_dtype(now[c])]
    other = [c for c in now.columns if c not in near]
    pd.testing.assert_frame_equal(before[other], now[other], check_exact=True)
    pd.testing.assert_frame_equal(before[near], now[near], check_exact=False, rtol=HEADLINE_RTOL,
                                  atol=0.0)
    x, y = before[near].to_numpy(dtype=float), now[near].to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.abs(x - y) / np.maximum(np.abs(x), np.abs(y))
    rel = rel[np.isfinite(rel)]
    return float(rel.max()) if rel.size else 0.0


def bench(name: str, repeat: int, fraction: float, before=None, model: bool = False,
          options: dict | None = None, processes: bool = False) -> list:
    runs = scanner(name, fraction, options)
    variants = {"new": runs["default"], "main": runs["main"], "without": runs["without"],
                "floor": runs["floor"]()}
    if model:
        variants["model"] = runs["model"]
    if options:
        variants["options"] = runs["options"]
    if processes:
        variants["processes"] = runs["processes"]
    if before is not None:
        variants |= {"before": lambda: before(name, "default"),
                     "before without": lambda: before(name, "without")}
        if model:
            variants["before model"] = lambda: before(name, "model")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs["default"]()                                     # warm: imports, scipy
        got = rounds(variants, repeat)
    result = {k: (getattr(v[0], "results", v[0]),) + v[1:] for k, v in got.items()}
    a, b = result["new"][0], result["main"][0]
    same = [c for c in a.columns if not c.startswith(tuple(SCAN_HEADLINE))]
    pd.testing.assert_frame_equal(a[same], b[same], check_exact=True)
    combos = len(a)
    picked = int(a["matches_ll"].notna().sum())
    print(f"[{name}] {combos} combinations, Ê given in {picked}; other columns equal to the main "
          "effects' scan", flush=True)
    rows = [(name, combos, "default model", "new") + result["new"][1:],
            (name, combos, "main effects, plug-in", "new") + result["main"][1:]]
    if model:
        rows.append((name, combos, "default, interval=model", "new") + result["model"][1:])
    if options:
        label = "default, " + ", ".join(f"{k}={v}" for k, v in options.items())
        rows.append((name, combos, label[:28], "new") + result["options"][1:])
    if processes:
        from gpurisk.core.forked import how_many
        pd.testing.assert_frame_equal(a, result["processes"][0], check_exact=True)
        count = how_many(None, combos)
        print(f"[{name}] the scan with {count} measure processes: every column equal to the scan "
              "without, exactly", flush=True)
        rows.append((name, combos, f"default, {count} processes", "new")
                    + result["processes"][1:])
    rows.append((name, combos, "floor (plug-in, numpy)", "new") + result["floor"][1:])
    rows.append((name, combos, "without matches_ll, tau1_ll", "new") + result["without"][1:])
    if before is not None:
        worst = same_scan(result["before"][0], a, INTERVAL_COLUMNS)
        print(f"[{name}] every column of the default scan but Ê's and τ̂1's s.e. and bounds equal to "
              f"{before.rev}'s (other columns exactly; Ê's and τ̂1's to {worst:.3g} relative at "
              "most)", flush=True)

        rows.append((name, combos, "default model", before.rev) + result["before"][1:])
        if model:
            rows.append((name, combos, "default, interval=model", before.rev)
                        + result["before model"][1:])
        rows.append((name, combos, "without matches_ll, tau1_ll", before.rev)
                    + result["before without"][1:])
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="fars,adult")
    ap.add_argument("--synthetic", default="", help="comma-separated record counts (e.g. 3e6,1e7) "
                    "of synthetic registers to add")
    ap.add_argument("--repeat", type=int, default=5, help="best of N")
    ap.add_argument("--fraction", type=float, default=0.01, help="sampling fraction π (real data)")
    ap.add_argument("--before", default=BEFORE, help="a git revision whose code runs the default "
                    "and without-Ê scans too ('none': skip)")
    ap.add_argument("--interval-model", action="store_true",
                    help="also time the default scan with Ê's and τ̂1's interval=model (the model's "
                         "own variance, α̂'s profile, the risk criterion's misfit widening)")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="also time the default scan with this option of Ê and τ̂1 (repeatable; "
                         "e.g. arc_target=neighbours)")
    ap.add_argument("--processes", action="store_true",
                    help="also time the default scan with its default measure processes (the "
                         "CPUs usable, at most 8) and check every column equal")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    options = {}
    for spec in args.option:
        key, eq, value = spec.partition("=")
        if not eq or not key:
            raise SystemExit(f"--option {spec!r}: write KEY=VALUE")
        options[key] = value
    if args.serve:
        return serve(args.fraction)
    print("default measures:", ", ".join(_measure_names(None)))
    names = [n for n in args.datasets.split(",") if n]
    names += [SYNTHETIC + n for n in args.synthetic.split(",") if n]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        before = None if args.before == "none" else Before(args.before, args.fraction, Path(tmp))
        try:
            for name in names:
                rows += bench(name, args.repeat, args.fraction, before, args.interval_model,
                              options, args.processes)
        finally:
            if before is not None:
                before.close()
    load = os.getloadavg()
    hdr = (f"{'data':16s} {'combos':>6s} {'measures':28s} {'code':8s} {'best s':>7s} "
           f"{'median s':>8s} {'CPU s':>6s} {'x without':>9s} {'Ê,τ̂1 add s':>11s}")
    print(f"\nscan, one thread, π = {args.fraction:g} (synthetic: its 1 % flag); wall: best and median "
          f"of {args.repeat} (the variants in turn), CPU: best; 'x without': best wall over the same "
          f"code's scan without Ê, τ̂1, 'Ê,τ̂1 add': the difference; load average {load[0]:.1f} "
          f"{load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} CPUs")
    print(hdr + "\n" + "-" * len(hdr))
    for name in dict.fromkeys(r[0] for r in rows):
        for code in dict.fromkeys(r[3] for r in rows if r[0] == name):
            mine = [r for r in rows if r[0] == name and r[3] == code]
            wo = mine[-1][4]
            for _, combos, lab, _, w, med, cpu in mine:
                add = f"{w - wo:>11.2f}" if lab.startswith("default") else " " * 11
                print(f"{name:16s} {combos:>6d} {lab:28s} {code:8s} {w:>7.2f} {med:>8.2f} "
                      f"{cpu:>6.2f} {w / wo:>9.2f} {add}")
    adds = {}
    for name in dict.fromkeys(r[0] for r in rows):
        got = {(r[2], r[3]): r[4] for r in rows if r[0] == name}
        if before is not None:
            new = got[("default model", "new")] - got[("without matches_ll, tau1_ll", "new")]
            old = (got[("default model", args.before)]
                   - got[("without matches_ll, tau1_ll", args.before)])
            adds[name] = (old, new)
    for name, (old, new) in adds.items():
        print(f"{name}: Ê, τ̂1 add {old:.2f} s with {args.before}'s code, {new:.2f} s now "
              f"({new / old if old > 0 else float('nan'):.2f}x)")


if __name__ == "__main__":
    main()
