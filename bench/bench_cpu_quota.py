"""What reading the CPU quota saves a scan (gpurisk.freq.schedule.quota_cpus): the scan of every
combination of DATA's 8 keys (FARS, Adult: 255) at π = 1 %, its CPUs taken from the process's
affinity alone ("affinity only": gpurisk before the quota was read) and from the affinity and the
quota of its control group ("with quota": the default), in turn, best of ``--repeat``, wall and
CPU seconds (the measure processes' included). Every column of the two scans is checked equal,
exactly. Without a quota the two are the same code: run it in a group that has one, e.g. as root
on cgroup v1 (one CPU of the machine's)::

    mkdir /sys/fs/cgroup/cpu/quota1
    echo 100000 > /sys/fs/cgroup/cpu/quota1/cpu.cfs_quota_us      # per 100 000 µs: 1 CPU
    bash -c 'echo $$ > /sys/fs/cgroup/cpu/quota1/cgroup.procs; python bench/bench_cpu_quota.py'

or in ``docker run --cpus 1``, or ``systemd-run -p CPUQuota=100% --scope``.
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "bench"))

import gpurisk  # noqa: E402
from bench_processes import _data, timed  # noqa: E402
from gpurisk.freq import schedule  # noqa: E402

VARIANTS = ("affinity only", "with quota")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="fars,adult", help="comma-separated data sets")
    ap.add_argument("--repeat", type=int, default=3, help="best of N")
    args = ap.parse_args(argv)
    data = _data()
    quota = schedule.quota_cpus()
    rows = []
    kept = list(schedule._QUOTA)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name in args.data.split(","):
                df, keys = data(name)
                gpurisk.scan(df, keys=keys[:3], fraction=0.01)             # warm: imports
                best, got, cpus = {}, {}, {}
                for r in range(args.repeat):
                    for v in (VARIANTS if r % 2 == 0 else VARIANTS[::-1]):
                        schedule._QUOTA[:] = [None] if v == VARIANTS[0] else [quota]
                        cpus[v] = schedule.usable_cpus()
                        got[v], wall, cpu = timed(
                            lambda: gpurisk.scan(df, keys=keys, fraction=0.01).to_frame())
                        if wall < best.get(v, (float("inf"),))[0]:
                            best[v] = (wall, cpu)
                pd.testing.assert_frame_equal(got[VARIANTS[0]], got[VARIANTS[1]], check_exact=True)
                print(f"[{name}] every column equal, exactly", flush=True)
                rows.append((name, cpus, best))
    finally:
        schedule._QUOTA[:] = kept
    print(f"\nquota {quota if quota is not None else 'none'}; best of "
          f"{args.repeat}; load average {os.getloadavg()[0]:.1f}")
    hdr = f"{'scan':8s} {'variant':14s} {'CPUs used':>9s} {'wall s':>7s} {'CPU s':>6s}"
    print(hdr + "\n" + "-" * len(hdr))
    for name, cpus, best in rows:
        for v in VARIANTS:
            print(f"{name:8s} {v:14s} {cpus[v]:>9d} {best[v][0]:>7.2f} {best[v][1]:>6.2f}")
    return rows


if __name__ == "__main__":
    main()
