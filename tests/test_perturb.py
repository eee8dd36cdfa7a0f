"""Perturbations (record swapping, PRAM) and the plugin hook that registers them. SPEC §6."""
from __future__ import annotations

import json
import types

import numpy as np
import pandas as pd
import pytest

from gpurisk import plugins
from gpurisk.dis import record_codes
from gpurisk.errors import BadInput, PluginError
from gpurisk.freq.engine import build_table
from gpurisk.hookspecs import hookimpl
from gpurisk.dis.perturb import Perturbation, parse_spec
from gpurisk.plugins import make_perturbation
from gpurisk.dis.perturb.pram import Pram, invariant_matrix
from gpurisk.dis.perturb.swap import RecordSwap

from conftest import data_path

FARS_KEYS = ["iage", "isex", "istatenum", "irace"]


@pytest.fixture(scope="module")
def fars():
    return pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")


def _codes(frame, keys):
    t = build_table(frame, keys)
    return t, record_codes(t)


# --- registry and specs --------------------------------------------------------------------------
def test_builtins_registered_and_listed():
    reg = plugins.perturbation_registry()
    assert {"swap", "pram"} <= set(reg)
    assert reg["swap"].package == "gpurisk"


def test_parse_spec():
    assert parse_spec("swap:fraction=0.10,geo=region,pairing=age+sex") == (
        "swap", {"fraction": "0.10", "geo": "region", "pairing": "age+sex"})
    assert parse_spec("pram") == ("pram", {})
    with pytest.raises(BadInput, match="not OPTION=VALUE"):
        parse_spec("swap:fraction")
    with pytest.raises(BadInput, match="unknown perturbation 'shuffle'"):
        make_perturbation("shuffle:x=1")
    with pytest.raises(BadInput, match="unknown option"):
        make_perturbation("swap:fraction=0.1,geo=g,colour=red")
    with pytest.raises(BadInput, match=r"fraction='1.5' is outside"):
        make_perturbation("swap:fraction=1.5,geo=g")
    with pytest.raises(BadInput, match="give geo=COL"):
        make_perturbation("swap:fraction=0.1")


class _Reverse(Perturbation):
    """A third-party perturbation implementing only ``perturb`` (one file at a time)."""
    name = "reverse_test"
    description = "reverses the order of the first key's values"

    def perturb(self, codes, categories, rng, *, keys, extra=None):
        return [codes[0][::-1].copy()] + [c.copy() for c in codes[1:]]


def test_third_party_perturbation_through_the_hook():
    mod = types.SimpleNamespace(gpurisk_register_perturbations=hookimpl(lambda: [_Reverse]))
    plugins.register(mod, name="test_reverse_plugin")
    try:
        p = make_perturbation("reverse_test")
        codes = [np.array([0, 1, 2, 3]), np.array([1, 1, 0, 0])]
        out = p.perturb_batch(codes, [[0, 1, 2, 3], [0, 1]], np.random.default_rng(0),
                              keys=["a", "b"], size=3)
        assert out[0].shape == (3, 4)
        assert (out[0] == [3, 2, 1, 0]).all() and (out[1] == [1, 1, 0, 0]).all()
        dup = types.SimpleNamespace(gpurisk_register_perturbations=hookimpl(lambda: [_Reverse]))
        plugins.register(dup, name="test_reverse_dup")
        try:
            with pytest.raises(PluginError, match="registered twice"):
                plugins.perturbation_registry()
        finally:
            plugins.unregister("test_reverse_dup")
    finally:
        plugins.unregister("test_reverse_plugin")
    assert "reverse_test" not in plugins.perturbation_registry()


# --- PRAM ----------------------------------------------------------------------------------------
def test_identity_pram_changes_nothing(fars, tmp_path):
    t, codes = _codes(fars, FARS_KEYS)
    rng = np.random.default_rng(3)
    out = Pram(vars="iage+irace", p=1.0).perturb_batch(codes, t.categories, rng, keys=FARS_KEYS, size=4)
    for a, c in zip(out, codes):
        assert (a == c[None, :]).all()
    # an explicit identity matrix, from a JSON file with labelled categories
    cats = t.categories[1]
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"isex": {"categories": [str(c) for c in cats[::-1]],
                                         "matrix": np.eye(len(cats)).tolist()}}))
    out = make_perturbation(f"pram:matrix={path}").perturb_batch(codes, t.categories, rng,
                                                                  keys=FARS_KEYS, size=2)
    assert all((a == c[None, :]).all() for a, c in zip(out, codes))


def test_pram_transition_frequencies_match_the_matrix():
    """Empirical transitions against the matrix: each cell within 4.5 binomial s.d."""
    M = np.array([[0.7, 0.2, 0.1, 0.0],
                  [0.05, 0.9, 0.05, 0.0],
                  [0.0, 0.0, 0.5, 0.5],
                  [0.25, 0.25, 0.25, 0.25]])
    n = 40_000
    codes = [np.repeat(np.arange(4), n // 4).astype(np.int8)]
    out = Pram(matrix={"v": M.tolist()}).perturb_batch(codes, [list("abcd")],
                                                      np.random.default_rng(11), keys=["v"], size=5)
    new = out[0]
    assert new.dtype == np.int8
    counts = np.zeros((4, 4))
    np.add.at(counts, (np.broadcast_to(codes[0], new.shape).ravel(), new.ravel().astype(int)), 1)
    m = counts.sum(axis=1, keepdims=True)
    sd = np.sqrt(m * M * (1 - M))
    assert (np.abs(counts - m * M) <= 4.5 * sd + 1e-9).all()
    assert counts[0, 3] == 0 and counts[2, 0] == 0  # zero-probability moves never happen


def test_invariant_pram_hand_value_and_invariance():
    # symmetric P, uniform pi: Q = P' = P and R = P @ P, by hand
    P = np.array([[0.9, 0.1], [0.1, 0.9]])
    R = invariant_matrix(P, np.array([50, 50]))
    assert np.allclose(R, [[0.82, 0.18], [0.18, 0.82]], atol=1e-15)
    # a skewed case: pi R = pi (the defining property, Gouweleeuw et al. 1998)
    P = np.array([[0.8, 0.15, 0.05], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])
    pi = np.array([700.0, 250.0, 50.0])
    R = invariant_matrix(P, pi)
    assert np.allclose(R.sum(axis=1), 1.0)
    assert np.allclose((pi / pi.sum()) @ R, pi / pi.sum(), atol=1e-12)
    assert not np.allclose((pi / pi.sum()) @ P, pi / pi.sum(), atol=1e-3)


def test_invariant_pram_keeps_marginals_on_average(fars):
    t, codes = _codes(fars, FARS_KEYS)
    v = FARS_KEYS.index("irace")
    before = np.bincount(codes[v], minlength=t.cards[v])
    rng = np.random.default_rng(5)
    inv = Pram(vars="irace", p=0.8, invariant=True).perturb_batch(codes, t.categories, rng,
                                                                keys=FARS_KEYS, size=8)[v]
    plain = Pram(vars="irace", p=0.8).perturb_batch(codes, t.categories, rng, keys=FARS_KEYS,
                                                    size=8)[v]
    mean_inv = np.mean([np.bincount(r, minlength=t.cards[v]) for r in inv], axis=0)
    mean_plain = np.mean([np.bincount(r, minlength=t.cards[v]) for r in plain], axis=0)
    # largest category (57 752 records): invariant PRAM keeps it within sampling noise,
    # plain PRAM with p = 0.8 moves 20 % of it to the other 19 categories
    big = int(np.argmax(before))
    assert abs(mean_inv[big] - before[big]) < 0.01 * before[big]
    assert mean_plain[big] < 0.85 * before[big]
    assert (inv != codes[v][None, :]).mean() > 0.05  # it did perturb


def test_pram_never_draws_an_empty_category():
    d = pd.read_csv(data_path("sdcmicro/testdata.csv"))  # water: 1..9 without 8
    keys = ["water", "sex"]
    t, codes = _codes(d, keys)
    assert t.categories[0][7] == 8 and not (codes[0] == 7).any()
    out = Pram(vars="water", p=0.5).perturb_batch(codes, t.categories, np.random.default_rng(1),
                                                  keys=keys, size=20)
    assert not (out[0] == 7).any() and (out[0] != codes[0]).mean() > 0.4
    with pytest.raises(BadInput, match="labels \\['99'\\], which are not categories"):
        Pram(matrix={"water": {"categories": [1, 2, 3, 4, 5, 6, 7, 9, 99],
                               "matrix": np.eye(9).tolist()}}).check(keys, t.categories, codes)


def test_pram_bad_matrix_is_one_clear_line(fars):
    t, codes = _codes(fars, FARS_KEYS)
    bad = Pram(matrix={"isex": [[0.5, 0.4, 0.0], [0, 1, 0], [0, 0, 1]]})
    with pytest.raises(BadInput, match=r"rows of the matrix of 'isex' must sum to 1; row 0"):
        bad.perturb_batch(codes, t.categories, np.random.default_rng(0), keys=FARS_KEYS)
    with pytest.raises(BadInput, match="is 2 x 2, but the variable has 3 categories in the file$"):
        Pram(matrix={"isex": [[1, 0], [0, 1]]}).check(FARS_KEYS, t.categories)
    with pytest.raises(BadInput, match="not key variables"):
        Pram(vars="tenure", p=0.9).check(FARS_KEYS, t.categories)


# --- record swapping -----------------------------------------------------------------------------
def test_swap_keeps_geography_counts_and_swaps_the_fraction(fars):
    t, codes = _codes(fars, FARS_KEYS)
    g = FARS_KEYS.index("istatenum")
    sw = RecordSwap(fraction=0.10, geo="istatenum", pairing="iage+isex")
    out = sw.perturb_batch(codes, t.categories, np.random.default_rng(7), keys=FARS_KEYS, size=4)
    before = np.bincount(codes[g], minlength=t.cards[g])
    for b in range(4):
        assert (np.bincount(out[g][b], minlength=t.cards[g]) == before).all()
    for v in range(len(FARS_KEYS)):
        if v != g:
            assert (out[v] == codes[v][None, :]).all()
    n = codes[0].size
    info = sw.last_info
    # fraction/2 drawn per state (floor + random remainder), each paired with one other record
    assert abs(info["pairs"] / 4 - 0.05 * n) < 0.002 * n
    assert info["unpaired"] == 0
    changed = (out[g] != codes[g][None, :]).sum(axis=1)
    assert (changed <= 2 * info["pairs"] / 4 + 0.002 * n).all()
    assert (changed > 0.08 * n).all()  # most partners live in another state


def test_swap_with_pairing_variables_keeps_their_joint_table(fars):
    """Pairs matched on (age, sex) exchange states: counts of (state, age, sex) are unchanged;
    random pairing changes them."""
    t, codes = _codes(fars, FARS_KEYS)
    g, a, s = (FARS_KEYS.index(k) for k in ("istatenum", "iage", "isex"))
    rng = np.random.default_rng(9)

    def joint(geo):
        return pd.Series(zip(geo, codes[a], codes[s])).value_counts()

    base = joint(codes[g])
    sw = RecordSwap(fraction=0.10, geo="istatenum", pairing="iage+isex")
    out = sw.perturb_batch(codes, t.categories, rng, keys=FARS_KEYS, size=2)
    # a few drawn records have no free partner of the same (age, sex): the fall-back
    assert sw.last_info["fallback"] < 0.002 * sw.last_info["pairs"]
    diff = (joint(out[g][0]) - base).abs().sum()
    assert diff <= 4 * sw.last_info["fallback"]
    rnd = RecordSwap(fraction=0.10, geo="istatenum").perturb_batch(codes, t.categories, rng,
                                                                  keys=FARS_KEYS, size=1)
    assert (joint(rnd[g][0]) - base).abs().sum() > 1000


def test_swap_stays_in_the_higher_region():
    rng = np.random.default_rng(1)
    n = 20_000
    geo = rng.integers(0, 12, n)
    region = geo // 4                       # three regions of four areas
    sex = rng.integers(0, 2, n)
    codes = [geo, sex]
    out = RecordSwap(fraction=0.2, geo="geo", region="region").perturb_batch(
        codes, [list(range(12)), [0, 1]], rng, keys=["geo", "sex"], extra={"region": region},
        size=3)
    assert ((out[0] // 4) == region[None, :]).all()
    assert (out[0] != geo[None, :]).mean() > 0.1


def test_swap_is_seeded_and_checks_geo_is_a_key(fars):
    t, codes = _codes(fars, FARS_KEYS)
    sw = RecordSwap(fraction=0.05, geo="istatenum")
    a = sw.perturb_batch(codes, t.categories, np.random.default_rng(42), keys=FARS_KEYS, size=2)
    b = sw.perturb_batch(codes, t.categories, np.random.default_rng(42), keys=FARS_KEYS, size=2)
    c = sw.perturb_batch(codes, t.categories, np.random.default_rng(43), keys=FARS_KEYS, size=2)
    g = FARS_KEYS.index("istatenum")
    assert (a[g] == b[g]).all() and not (a[g] == c[g]).all()
    with pytest.raises(BadInput, match="geo='ideathmon' is not a key variable"):
        RecordSwap(fraction=0.05, geo="ideathmon").check(FARS_KEYS, t.categories)
