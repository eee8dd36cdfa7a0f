"""pr(cm|um) of perturbed files: T, P, F, the iterate-until-stable loop, the dis CLI. SPEC §6."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from gpurisk.workflows.assess import assess
from gpurisk.dis import dis, pr_cm_um, record_codes, run_dis, stop_point, tpf_counts
from gpurisk.errors import BadInput
from gpurisk.freq.engine import build_table
from gpurisk.dis.perturb.swap import RecordSwap

from conftest import data_path, run_cli

FARS_KEYS = ["iage", "isex", "istatenum", "irace"]


@pytest.fixture(scope="module")
def fars():
    return pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")


@pytest.fixture(scope="module")
def fars30k(fars):
    return fars.sample(30_000, random_state=1).reset_index(drop=True)


# --- T, P, F -------------------------------------------------------------------------------------
def test_tpf_hand_examples():
    # original A A B C D, released A A B D D: f^B = A:2 B:1 D:2 C:0
    orig = [np.array([0, 0, 1, 2, 3])]
    rel = [np.array([[0, 0, 1, 3, 3]])]
    T, P, F = tpf_counts(orig, rel, [4])
    assert (T[0], P[0], F[0]) == (1, 3, 0)
    # original A B C C, released A C B C: r0 T; r1 (B -> C, f^B(B) = 1) F; r2 nothing; r3 P
    T, P, F = tpf_counts([np.array([0, 1, 2, 2])], [np.array([[0, 2, 1, 2]])], [3])
    assert (T[0], P[0], F[0]) == (1, 1, 1)
    assert pr_cm_um(T, P, F, 0.3)[0] == pytest.approx(0.3 / (0.3 + 0.7 + 1))


def test_release_orientation_hand_example_and_no_perturbation():
    # original A B C C, released A C B C, matched against the ORIGINAL counts f^A = A1 B1 C2:
    # r0 A=A, f^A(A)=1: T; r1 released C != B, f^A(C)=2: -; r2 released B != C, f^A(B)=1: F;
    # r3 C=C, f^A(C)=2: P
    T, P, F = tpf_counts([np.array([0, 1, 2, 2])], [np.array([[0, 2, 1, 2]])], [3], "release")
    assert (T[0], P[0], F[0]) == (1, 1, 1)
    T, P, F = tpf_counts([np.array([0, 0, 1, 2, 3])], [np.array([[0, 0, 1, 3, 3]])], [4], "release")
    # f^A = A2 B1 C1 D1: r0, r1 P; r2 T; r3 released D != C, f^A(D) = 1: F; r4 D=D, f^A(D)=1: T
    assert (T[0], P[0], F[0]) == (2, 2, 1)
    rng = np.random.default_rng(0)
    codes = [rng.integers(0, 15, 500), rng.integers(0, 9, 500)]
    a = tpf_counts(codes, [c[None, :] for c in codes], [15, 9], "intruder")
    b = tpf_counts(codes, [c[None, :] for c in codes], [15, 9], "release")
    assert [int(x[0]) for x in a] == [int(x[0]) for x in b]
    with pytest.raises(BadInput, match="orientation='sideways'"):
        tpf_counts(codes, [c[None, :] for c in codes], [15, 9], "sideways")


def test_tpf_formula_against_a_simulation_of_the_intrusion(fars30k):
    """Elliot's procedure simulated record by record on one swapped file (pandas look-ups, not
    our counting code): remove r, copy back with prob. f, look up r's true key in the released
    file. The share of correct among unique matches agrees with T f / (T f + P (1 − f) + F)."""
    keys = FARS_KEYS
    t = build_table(fars30k, keys)
    codes = record_codes(t)
    rel = RecordSwap(fraction=0.3, geo="istatenum").perturb_batch(
        codes, t.categories, np.random.default_rng(2), keys=keys, size=1)
    f = 0.2
    T, P, F = tpf_counts(codes, rel, t.cards)
    expect = float(pr_cm_um(T, P, F, f)[0])

    true = pd.Series(list(zip(*codes)))
    released = pd.Series(list(zip(*(r[0] for r in rel))))
    fB = true.map(released.value_counts()).fillna(0).to_numpy().astype(int)
    same = (true == released).to_numpy()
    rng = np.random.default_rng(8)
    K = 400_000
    r = rng.integers(0, len(true), K)
    back = rng.random(K) < f
    others = fB[r] - same[r]                       # released records other than r with key x_r
    matches = others + (same[r] & back)
    ru = matches == 1
    rc = ru & same[r] & back
    est = rc.sum() / ru.sum()
    se = math.sqrt(np.mean((rc - est * ru) ** 2) / K) / ru.mean()
    assert abs(est - expect) < 4 * se, (est, expect, se)
    assert F[0] > 0


def test_no_perturbation_gives_theta_hat_exactly(fars):
    for frame, keys, pi in ((fars, FARS_KEYS, 0.02),
                            (pd.read_csv(data_path("sdcmicro/testdata.csv")),
                             ["urbrur", "water", "sex", "age"], 0.01)):
        a = assess(frame, keys, fraction=pi, measures=["theta_hat", "pr_cm_um"])
        th = a.measures["theta_hat"].value
        assert a.measures["pr_cm_um"].value == th
        assert a.measures["pr_cm_um"].extra["F"] == 0
        r = run_dis(record_codes(a.table), a.table.categories, keys, pi, [], max_iter=3, stable=1)
        assert r.theta_hat == th and r.value == th and r.se == 0.0
    rng = np.random.default_rng(0)
    syn = pd.DataFrame({"a": rng.integers(0, 30, 3000), "b": rng.integers(0, 20, 3000)})
    a = assess(syn, ["a", "b"], fraction=0.37, measures=["theta_hat", "pr_cm_um"])
    assert a.measures["pr_cm_um"].value == a.measures["theta_hat"].value


def test_risk_falls_as_the_swap_fraction_grows(fars30k):
    keys = ["iage", "isex", "istatenum"]
    t = build_table(fars30k, keys)
    codes = record_codes(t)
    means = []
    for frac in (0.02, 0.10, 0.30):
        r = run_dis(codes, t.categories, keys, 0.05, [f"swap:fraction={frac},geo=istatenum"],
                    max_iter=10, stable=10, batch=10, seed=4)
        means.append(r.value)
        assert r.value < r.theta_hat
    assert means[0] > means[1] > means[2]
    # the mean risk reduction grows with the fraction much faster than its noise
    assert means[0] - means[2] > 10 * r.se


# --- the loop ------------------------------------------------------------------------------------
def test_stop_rule():
    assert stop_point(np.full(11, 0.25), 100, 10, 3) == (11, True)
    assert stop_point(np.full(10, 0.25), 100, 10, 3) is None
    assert stop_point(np.full(5, 0.25), 5, 10, 3) == (5, False)
    # running means 0, .5, .333, ...: they settle to within 0.0005 only late
    v = np.array([0.0, 1.0] * 1500)
    k, ok = stop_point(v, 5000, 10, 3)
    assert 900 < k < 1100  # spread of the window ~ 1/(2k)
    m = np.cumsum(v) / np.arange(1, v.size + 1)
    assert ok and np.ptp(m[k - 11:k]) < 0.0005 and np.ptp(m[k - 12:k - 1]) >= 0.0005


def test_dis_is_deterministic_by_seed_and_resumes(fars30k, tmp_path):
    keys = ["iage", "isex", "istatenum"]
    spec = ["swap:fraction=0.1,geo=istatenum,pairing=iage"]
    kw = dict(max_iter=12, stable=10, decimals=6, batch=4)
    a = dis(fars30k, keys, 0.05, spec, seed=5, **kw)
    b = dis(fars30k, keys, 0.05, spec, seed=5, **kw)
    c = dis(fars30k, keys, 0.05, spec, seed=6, **kw)
    assert a.values == b.values and a.values != c.values
    assert a.iterations == 12 and not a.converged
    # interrupted after 8 iterations, then resumed to 12: the same values as one run
    state = tmp_path / "s.json"
    part = dis(fars30k, keys, 0.05, spec, seed=5, state=state, **{**kw, "max_iter": 8})
    assert part.values == a.values[:8]
    assert len(json.loads(state.read_text())["T"]) == 8
    full = dis(fars30k, keys, 0.05, spec, seed=5, state=state, **kw)
    assert full.values == a.values
    with pytest.raises(BadInput, match="written for another run"):
        dis(fars30k, keys, 0.05, spec, seed=7, state=state, **kw)


def test_pr_cm_um_measure_runs_key_only_perturbations(fars30k):
    opts = {"pr_cm_um": {"perturb": "pram:vars=irace,p=0.9", "max_iter": 20}}
    a = assess(fars30k, FARS_KEYS, fraction=0.05, measures=["pr_cm_um"], options=opts, seed=1)
    r = a.measures["pr_cm_um"]
    assert r.value < r.extra["theta_hat"] and 0 < r.extra["ratio"] < 1
    assert r.extra["iterations"] <= 20
    # a perturbation that reads a column outside the keys is left to ``gpurisk dis``
    opts = {"pr_cm_um": {"perturb": "swap:fraction=0.1,geo=istatenum,pairing=iinjury"}}
    r = assess(fars30k, FARS_KEYS, fraction=0.05, measures=["pr_cm_um"], options=opts).measures["pr_cm_um"]
    assert r.value is None and "gpurisk dis" in r.reason


def test_chained_perturbations(fars30k):
    keys = FARS_KEYS
    swap = dis(fars30k, keys, 0.05, ["swap:fraction=0.1,geo=istatenum"], max_iter=10, seed=3)
    both = dis(fars30k, keys, 0.05, ["pram:vars=irace,p=0.9", "swap:fraction=0.1,geo=istatenum"],
               max_iter=10, seed=3)
    assert both.value < swap.value < swap.theta_hat


# --- command line --------------------------------------------------------------------------------
def test_dis_cli_matches_python(fars30k, tmp_path):
    frame = fars30k.assign(zone=fars30k["istatenum"] // 10)  # a coarser geography
    path = tmp_path / "fars.csv"
    frame.to_csv(path, sep=";", index=False)
    spec = "swap:fraction=0.10,geo=istatenum,pairing=iage+isex,region=zone"
    args = ["dis", str(path), "--keys", "iage,isex,istatenum", "--fraction", "0.05",
            "--perturb", spec, "--max-iter", "15", "--seed", "9"]
    proc = run_cli(*args, "--json", check=True)
    doc = json.loads(proc.stdout)
    ref = dis(frame, ["iage", "isex", "istatenum"], 0.05, [spec], max_iter=15, seed=9)
    assert doc["pr_cm_um"] == pytest.approx(ref.value, abs=0, rel=1e-15)
    assert doc["theta_hat"] == ref.theta_hat and doc["iterations"] == ref.iterations
    assert doc["ratio"] < 1


@pytest.mark.parametrize("extra, msg", [
    (["--perturb", "shuffle:x=1"], "unknown perturbation 'shuffle'"),
    (["--perturb", "swap:fraction=0.1,geo=ideathmon"], "geo='ideathmon' is not a key variable"),
    (["--perturb", "swap:fraction=0.1,geo=istatenum,pairing=nosuch"], "'nosuch' not in"),
    ([], "give at least one --perturb"),
])
def test_dis_cli_bad_input(extra, msg):
    path = data_path("arx_bench/fars_subset.csv")
    args = ["dis", str(path), "--keys", "iage,isex,istatenum", "--fraction", "0.05"]
    proc = run_cli(*args, *extra)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpurisk: error:") and msg in lines[0], lines


def test_perturbations_cli_lists_builtins():
    doc = json.loads(run_cli("perturbations", "--json", check=True, subprocess=True).stdout)
    names = {d["name"] for d in doc}
    assert {"swap", "pram"} <= names


def test_dis_cli_on_text_labels():
    """The 10 % FARS extract with text labels (states by name)."""
    path = data_path("arx_bench/fars_subset.csv")
    proc = run_cli("dis", str(path), "--keys", "iage,isex,istatenum,irace", "--fraction", "0.02",
                   "--perturb", "swap:fraction=0.10,geo=istatenum,pairing=iage+isex",
                   "--max-iter", "20", check=True)
    assert "n = 10093" in proc.stdout and "theta_hat (unperturbed)" in proc.stdout
    ratio = float(proc.stdout.split("ratio")[1].split()[0])
    assert 0 < ratio < 1


def test_dis_bad_arguments(fars30k):
    keys = ["iage", "isex", "istatenum"]
    spec = ["swap:fraction=0.1,geo=istatenum"]
    with pytest.raises(BadInput, match=r"f=1.5 is outside \(0, 1\]"):
        dis(fars30k, keys, 1.5, spec)
    with pytest.raises(BadInput, match="max_iter=0 must be an integer >= 1"):
        dis(fars30k, keys, 0.1, spec, max_iter=0)
