"""The fit's passes over the cells shared among threads (issue 43's speed: the margins, the pairs'
joint index, the streamed μ̂ and ℓ(α), the risk criterion's sums, the cells' codes decoded) give the
numbers one thread gives, bit for bit, and what the whole arrays give; both measures' terms at one
prior (nb_both) are nb_terms' own, bit for bit; the pass's slice memo gathers once and changes no
figure; the CPUs the threads use are the process's affinity."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from conftest import data_path
from gpurisk.freq import schedule
from gpurisk.models import dispersion, model_choice, risk_choice, table_fits, terms
from gpurisk.models.forest import CellMeans


def _threads(monkeypatch, n):
    monkeypatch.setattr(terms, "TERMS_THREADS", n)
    monkeypatch.setattr(terms, "THREADED_CHUNKS", 2)
    monkeypatch.setattr(schedule, "usable_cpus", lambda: 4)


def _fars_cells(frac=0.2, seed=3):
    """The cells of a sample of the real FARS file: codes per key, counts."""
    from gpurisk.freq.engine import build_table
    df = pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")
    table = build_table(df.sample(frac=frac, random_state=seed),
                        ["iage", "isex", "irace", "istatenum", "iinjury"])
    codes, f, cards, _, _ = table_fits.sample_margins(table)
    return codes, np.asarray(f, dtype=np.float64), cards


def test_nb_both_is_nb_terms_bit_for_bit():
    rng = np.random.default_rng(11)
    n = 4_000
    lam_m = np.concatenate([rng.gamma(0.5, 0.05, n // 2), rng.gamma(2.0, 5.0, n // 2)])
    lam_m[:7] = 0.0                                   # λ̂ = 0: F = 1 surely
    for alpha in (rng.gamma(1.0, 0.5, n), rng.gamma(1.0, 1e-9, n), 0.0, 0.4):
        for pi in (0.01, 0.3, 1.0):
            for slope in (False, True):
                both = terms.nb_both(lam_m, alpha, pi, slope=slope)
                for kind, (t, d) in zip(("tau1", "inverse"), both):
                    want = terms.nb_terms(lam_m, alpha, pi, kind, variance=False, slope=slope)
                    assert np.array_equal(t, want[0], equal_nan=True), (kind, pi, slope)
                    if slope:
                        assert np.array_equal(d, want[2], equal_nan=True), (kind, pi)
                    else:
                        assert d is None
    # and against the closed forms by hand at one point: α = ½, λ̂ = 4, π = 0.2
    (t_tau, d_tau), (t_e, _) = terms.nb_both(np.array([0.8 * 4.0]), 0.5, 0.2, slope=True)
    c = 0.8 / (1.0 / (0.5 * 4.0) + 0.2)
    assert t_tau[0] == pytest.approx((1 + c) ** -3.0, rel=1e-14)
    assert t_e[0] == pytest.approx(0.5 * (1 - (1 + c) ** -2.0) / c, rel=1e-14)
    assert d_tau[0] == pytest.approx(-3.0 * c * (1 + c) ** -4.0 / (1 + 0.2 * 0.5 * 4.0), rel=1e-13)


@pytest.mark.parametrize("threads", [1, 4])
def test_the_margins_are_bincounts_of_the_whole_arrays(monkeypatch, threads):
    _threads(monkeypatch, threads)
    monkeypatch.setattr(table_fits, "BINCOUNT_CHUNK", 97)
    codes, f, cards = _fars_cells()
    got = table_fits._chunked_bincounts(codes, f, cards)
    for c, k, g in zip(codes, cards, got):
        assert np.array_equal(g, np.bincount(c, weights=f, minlength=k))


@pytest.mark.parametrize("threads", [1, 4])
def test_the_pairs_joint_counts_are_each_pairs_own(monkeypatch, threads):
    _threads(monkeypatch, threads)
    monkeypatch.setattr(model_choice, "KEY_CHUNK", 53)
    codes, f, cards = _fars_cells()
    pairs = [(a, b) for a in range(len(codes)) for b in range(a + 1, len(codes))]
    got = model_choice.pair_counts(codes, cards, [f, np.floor(f / 2)], pairs)
    assert any(layout is None for layout, _ in got.values())
    for (a, b), (layout, sums) in got.items():
        inv, want = model_choice._pair_counts(codes, cards, a, b, f)
        want_half = np.bincount(inv, weights=np.floor(f / 2), minlength=want.shape[0])
        if layout is None:          # the dense index x_a·c_b + x_b: compare on the cells' slots
            ids = codes[a].astype(np.int64) * int(cards[b]) + codes[b]
            assert np.array_equal(sums[0][ids], want[inv])
            assert np.array_equal(sums[1][ids], want_half[inv])
            assert float(sums[0].sum()) == float(f.sum())
        else:
            assert np.array_equal(sums[0], want) and np.array_equal(sums[1], want_half)


def _streamed(monkeypatch, threads, f, mu, su):
    _threads(monkeypatch, threads)
    monkeypatch.setattr(dispersion, "GROUP_CHUNK", 211)
    monkeypatch.setattr(table_fits, "STREAM_WINDOW", 5 if threads > 1 else 10**6)
    cells = CellMeans(lambda rows, n: mu[rows], mu.shape[0])
    return table_fits._streamed(f, cells, su)


def test_the_streamed_fit_is_the_whole_arrays(monkeypatch):
    codes, f, cards = _fars_cells()
    rng = np.random.default_rng(2)
    mu = f * rng.gamma(2.0, 0.5, f.shape[0])
    su = np.flatnonzero(f == 1).astype(np.int32)
    one = _streamed(monkeypatch, 1, f, mu, su)
    four = _streamed(monkeypatch, 4, f, mu, su)          # in windows of five slices
    assert f.shape[0] > 20 * 211
    whole = dispersion.loglik(f, mu)
    for alpha in (1e-6, 0.1, 0.7, 3.0):
        assert one[1](alpha) == four[1](alpha) == whole(alpha)
    assert one[0].mean() == four[0].mean()
    total = 0.0                 # the slices' sums added in their order
    for start in range(0, f.shape[0], 211):
        total += float(np.sum(mu[su[(su >= start) & (su < start + 211)]]))
    assert four[0].mean() == total / su.shape[0]
    assert four[0].mean() == pytest.approx(float(mu[su].mean()), rel=1e-13)
    assert np.array_equal(np.asarray(four[0]), mu[su])


@pytest.mark.parametrize("less", [False, True])
def test_the_criterions_sums_are_the_same_in_threads(monkeypatch, less):
    codes, f, cards = _fars_cells()
    rng = np.random.default_rng(4)
    mu = f * rng.gamma(2.0, 0.5, f.shape[0])
    monkeypatch.setattr(risk_choice, "WEIGHTS_CHUNK", 101)
    got = {}
    for threads in (1, 4):
        _threads(monkeypatch, threads)
        got[threads] = risk_choice._observed_kinds(mu, f, 0.05, ("inverse", "tau1"), 0.3, less)
    assert got[1] == got[4]
    # each slice's sums added in the slices' order, as one slice after another adds them
    for kind, sums in zip(("inverse", "tau1"), got[4]):
        acc = [0.0, 0.0, 0.0]
        for start in range(0, f.shape[0], 101):
            m, ff = mu[start:start + 101], f[start:start + 101]
            w = risk_choice._weights(m, 0.05, kind)
            share, alone = w * ((ff - m) ** 2 - ff), w * m * m
            acc[0] += float(np.sum(share))
            acc[2] += float(np.sum(np.clip(share, -0.3, 0.3)))
            if less:
                acc[0] -= float(np.sum(alone))
                acc[2] -= float(np.sum(np.clip(alone, -0.3, 0.3)))
            else:
                acc[1] += float(np.sum((w * m) ** 2))
        assert tuple(acc) == sums
    for kind, sums in zip(("inverse", "tau1"), got[4]):
        w = risk_choice._weights(mu, 0.05, kind)
        share = w * ((f - mu) ** 2 - f)
        alone = w * mu * mu
        want0 = share.sum() - (alone.sum() if less else 0.0)
        want2 = np.clip(share, -0.3, 0.3).sum() - (np.clip(alone, -0.3, 0.3).sum() if less else 0.0)
        assert sums[0] == pytest.approx(want0, rel=1e-10)
        assert sums[2] == pytest.approx(want2, rel=1e-10)
        assert sums[1] == (0.0 if less else pytest.approx(float(((w * mu) ** 2).sum()), rel=1e-10))


def test_the_slice_memo_gathers_once_and_only_within_its_block():
    import threading

    from gpurisk.models import slice_memo as sm
    rng = np.random.default_rng(8)
    codes = [rng.integers(0, 7, 1000).astype(np.int8), rng.integers(0, 5, 1000).astype(np.int8)]
    rows = np.sort(rng.choice(1000, 300, replace=False))
    want_pair = codes[0][rows[10:90]].astype(np.int64) * 5 + codes[1][rows[10:90]]
    assert sm.rows_at(rows, slice(10, 90)) is not sm.rows_at(rows, slice(10, 90))
    with sm.SliceMemo():
        r = sm.rows_at(rows, slice(10, 90))
        assert r is sm.rows_at(rows, slice(10, 90))             # one view per slice
        assert sm.rows_at(rows, slice(10, 91)) is not r
        got = sm.take(codes[0], r)
        assert np.array_equal(got, codes[0][rows[10:90]]) and sm.take(codes[0], r) is got
        other = rows[10:90].copy()                  # the same cells, another array: its own
        assert sm.take(codes[0], other) is not got
        assert np.array_equal(sm.take(codes[1], r), codes[1][rows[10:90]])
        pair = sm.pair_take(codes, [7, 5], 0, 1, r)
        assert np.array_equal(pair, want_pair) and sm.pair_take(codes, [7, 5], 0, 1, r) is pair
        seen = []                                   # another thread: the plain gathers
        t = threading.Thread(target=lambda: seen.append(sm.take(codes[0], r) is got))
        t.start()
        t.join()
        assert seen == [False]
    assert sm.take(codes[0], r) is not got          # the block ended: no memo
    assert np.array_equal(sm.pair_take(codes, [7, 5], 0, 1, r), want_pair)


def test_the_pass_gives_the_same_numbers_without_the_slice_memo(monkeypatch):
    """Ê's and τ̂1's default on a sample of the real FARS file, with the root gammas' Taylor
    sums and the moved priors read in the pass: every figure the same with the slice memo as
    without it (each gather made afresh)."""
    import contextlib

    from gpurisk.freq.engine import build_table
    from gpurisk.measure import Context
    from gpurisk.measures.matches_ll import MatchesLL
    from gpurisk.measures.tau1_ll import Tau1LL
    from gpurisk.models import unique_sums
    df = pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")
    sample = df.sample(frac=0.05, random_state=9)
    keys = ["iage", "isex", "irace", "istatenum", "ihispanic", "iinjury"]
    _threads(monkeypatch, 4)
    monkeypatch.setattr(terms, "CHUNK", 64)

    def figures():
        table = build_table(sample, keys)
        return {m.name: (lambda r: (r.value, r.se, r.upper, r.extra))(
            m().compute(table, Context(fraction=0.05))) for m in (MatchesLL, Tau1LL)}
    with_memo = figures()
    monkeypatch.setattr(unique_sums, "SliceMemo", contextlib.nullcontext)
    without = figures()
    assert with_memo == without
    assert with_memo["matches_ll"][3].get("root_shapes")        # the roots' sums were read


@pytest.mark.parametrize("space", ["float32", "float64"])
def test_the_cells_codes_decoded_in_threads_are_the_radix_digits(monkeypatch, space):
    from gpurisk.freq import rollup
    from gpurisk.freq.cellid import decode_radix
    monkeypatch.setattr(schedule, "usable_cpus", lambda: 4)
    monkeypatch.setattr(rollup, "DECODE_PARALLEL", 1000)
    monkeypatch.setattr(rollup, "DECODE_CHUNK", 64)
    cards = [7, 3, 100, 2] if space == "float32" else [7, 3, 100, 2, 97, 250]
    rng = np.random.default_rng(6)
    ids = np.sort(rng.integers(0, int(np.prod(cards)), 50_001))
    got = rollup._decode(ids, cards, np)
    for g, w in zip(got, decode_radix(ids, cards)):
        assert np.array_equal(g, w)


@pytest.mark.skipif(not hasattr(__import__("os"), "sched_setaffinity"), reason="no CPU affinity here")
def test_the_usable_cpus_are_the_processs_affinity():
    """docs/environment.md: the threads run on the CPUs the process may use (its affinity, as
    taskset sets it), not the machine's count: a child bound to one CPU sees one."""
    import os
    import subprocess
    import sys
    code = ("import os; os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]}); "
            "from gpurisk.freq.schedule import usable_cpus; print(usable_cpus())")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert got.stdout.strip() == "1"
    quota = schedule.quota_cpus()
    assert schedule.usable_cpus() == min(len(os.sched_getaffinity(0)), quota or 10**6)


def _groups(tmp_path, files: dict, proc: str = "0::/\n"):
    for name, text in files.items():
        path = tmp_path / "cg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "proc").write_text(proc)
    return str(tmp_path / "cg"), str(tmp_path / "proc")


@pytest.mark.parametrize("files, proc, cpus", [
    ({"cpu.max": "200000 100000\n"}, "0::/\n", 2),                 # docker --cpus 2 (v2)
    ({"cpu.max": "150000 100000\n"}, "0::/\n", 2),                 # 1.5 CPUs: 2 threads
    ({"cpu.max": "50000 100000\n"}, "0::/\n", 1),
    ({"cpu.max": "max 100000\n"}, "0::/\n", None),                 # no quota
    ({"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"}, "", 3),  # v1
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, "", None),
    # a systemd unit's CPUQuota=, on its group and the slice above it: the smallest holds
    ({"cpu.max": "max 100000\n", "a.slice/cpu.max": "400000 100000\n",
      "a.slice/b.service/cpu.max": "100000 100000\n"}, "0::/a.slice/b.service\n", 1),
    ({"a.slice/cpu.max": "400000 100000\n", "a.slice/b.service/cpu.max": "max 100000\n"},
     "0::/a.slice/b.service\n", 4),
    # v1: a batch job's group, the quota on the job's group above the process's
    ({"cpu/job/cpu.cfs_quota_us": "200000\n", "cpu/job/cpu.cfs_period_us": "100000\n",
      "cpu/job/step/cpu.cfs_quota_us": "-1\n", "cpu/job/step/cpu.cfs_period_us": "100000\n"},
     "4:cpu,cpuacct:/job/step\n3:memory:/job\n", 2),
    ({"cpu.max": "garbage\n"}, "0::/\n", None),
    ({}, "", None),                                                  # nothing to read
])
def test_a_cpu_quota_bounds_the_usable_cpus(tmp_path, monkeypatch, files, proc, cpus):
    """docs/environment.md: a CPU quota (docker --cpus, a Kubernetes limit, systemd's CPUQuota=)
    bounds the CPUs the threads and processes use, rounded up; none where there is no quota."""
    root, proc_file = _groups(tmp_path, files, proc)
    assert schedule.quota_cpus(root, proc_file) == cpus
    monkeypatch.setattr(schedule, "_QUOTA", [cpus])
    monkeypatch.setattr(schedule, "CPU_LIMIT", [None])
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert schedule.usable_cpus() == (8 if cpus is None else min(8, cpus))


def test_the_jeffreys_move_by_category_is_the_move_by_unique():
    """Jeffreys' prior in the pass (Moved.at: each root's factors per category, looked up) gives
    each unique the number Moved's per-unique formula gives, bit for bit, on a FARS sample whose
    fit keeps root keys' gammas; with and without the slice memo."""
    from gpurisk.freq.engine import build_table
    from gpurisk.models.prior import LooPrior, Moved
    from gpurisk.models.root_prior import JEFFREYS, Root
    from gpurisk.models.slice_memo import SliceMemo
    df = pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")
    table = build_table(df.sample(frac=0.05, random_state=9),
                        ["iage", "isex", "irace", "istatenum", "ihispanic", "iinjury"])
    _, alpha, _, counts, *_ = table_fits.eb_means(table, dispersion="truncated", root_prior="eb")
    roots = [m for m in counts if isinstance(m, Root)]
    assert roots
    move = Moved([(r, JEFFREYS, 0.0) for r in roots])
    prior = LooPrior(float(table.n), counts, alpha)
    for start, stop in ((0, prior.size), (3, 40), (prior.size // 2, prior.size)):
        m, a = prior.at(slice(start, stop))
        want = move(m, a, [r.counts[start:stop] for r in roots])
        for memo in (False, True):
            with (SliceMemo() if memo else __import__("contextlib").nullcontext()):
                got = move.at(m, a, start, stop)
            assert all(np.array_equal(x, y) for x, y in zip(got, want)), (start, stop, memo)
    assert not np.array_equal(want[0], m)                # the move moved something
