"""theta_hat_misclass (Skinner & Elliot 2002, eq. 12) against the paper's DIS under misclassification."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from gpurisk.workflows.assess import assess
from gpurisk.errors import BadInput

from conftest import data_path, run_cli


def mc_dis_misclass(frame, keys, mats, pi, K, seed, chunk=50_000):
    """The paper's four steps, K times, on the records (pandas look-ups; not gpurisk's code):
    remove a record, draw its X̃ by M, copy it back with probability π, look up X̃ in the file."""
    rng = np.random.default_rng(seed)
    X = np.stack([pd.factorize(frame[k], sort=True)[0] for k in keys], axis=1)
    cards = [int(X[:, v].max()) + 1 for v in range(len(keys))]
    counts = pd.Series(np.ravel_multi_index(X.T, cards)).value_counts()
    ru_tot = rc_tot = 0
    acc = []
    for start in range(0, K, chunk):
        k = min(chunk, K - start)
        i = rng.integers(0, len(X), k)
        Xt = X[i].copy()
        for v, M in mats.items():
            C = np.cumsum(M, axis=1)
            u = rng.random(k)
            Xt[:, v] = np.minimum((u[:, None] >= C[X[i, v]]).sum(axis=1), M.shape[0] - 1)
        same = (Xt == X[i]).all(axis=1)
        back = rng.random(k) < pi
        fx = pd.Series(np.ravel_multi_index(Xt.T, cards)).map(counts).fillna(0).to_numpy()
        m = fx - same + (same & back)
        ru = m == 1
        rc = ru & same & back
        acc.append((ru, rc))
    ru = np.concatenate([a for a, _ in acc])
    rc = np.concatenate([b for _, b in acc])
    est = rc.sum() / ru.sum()
    se = math.sqrt(np.mean((rc - est * ru) ** 2) / K) / ru.mean()
    return est, se


def tridiagonal(K, q):
    """Misreport by one category either way with probability q each (at the ends: 2q inward)."""
    M = np.eye(K) * (1 - 2 * q)
    for j in range(K):
        if j == 0:
            M[0, 1] = 2 * q
        elif j == K - 1:
            M[j, j - 1] = 2 * q
        else:
            M[j, j - 1] = M[j, j + 1] = q
    return M


def keep(K, p):
    M = np.full((K, K), (1 - p) / (K - 1))
    np.fill_diagonal(M, p)
    return M


def _misclass(frame, keys, pi, matrices, **opt):
    a = assess(frame, keys, fraction=pi, measures=["theta_hat", "theta_hat_misclass"],
               options={"theta_hat_misclass": {"matrices": matrices, **opt}})
    return a.measures["theta_hat_misclass"], a.measures["theta_hat"]


def test_identity_matrices_give_theta_hat(tmp_path):
    d = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    keys = ["urbrur", "water", "sex", "age"]
    for method in ("dense", "sparse"):
        r, th = _misclass(d, keys, 0.01, {"age": 1.0, "water": np.eye(8).tolist()}, method=method)
        assert r.value == pytest.approx(th.value, rel=1e-14)
        assert r.extra["nA"] == pytest.approx(0, abs=1e-9)


def test_eq12_agrees_with_the_monte_carlo_dis_synthetic():
    rng = np.random.default_rng(21)
    n = 2500
    frame = pd.DataFrame({"a": rng.integers(0, 6, n), "b": rng.integers(0, 4, n),
                          "c": rng.integers(0, 9, n), "d": rng.integers(0, 3, n)})
    mats = {0: tridiagonal(6, 0.1), 2: keep(9, 0.8)}
    keys = ["a", "b", "c", "d"]
    r, th = _misclass(frame, keys, 0.3, {"a": mats[0].tolist(), "c": mats[2].tolist()})
    est, se = mc_dis_misclass(frame, keys, mats, 0.3, 300_000, seed=1)
    assert abs(est - r.value) < 4 * se, (est, r.value, se)
    assert r.value < th.value - 8 * se  # misclassification lowers the risk, visibly


def test_eq12_agrees_with_the_monte_carlo_dis_on_real_data():
    """sdcMicro testdata; age misreported by a year either way (10 % each), water kept w.p. 0.95."""
    d = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    keys = ["urbrur", "water", "sex", "age"]
    K_age = d["age"].nunique()
    mats = {3: tridiagonal(K_age, 0.1), 1: keep(d["water"].nunique(), 0.95)}
    pi = 0.2
    r, th = _misclass(d, keys, pi, {"age": mats[3].tolist(), "water": 0.95})
    est, se = mc_dis_misclass(d, keys, mats, pi, 300_000, seed=2)
    assert abs(est - r.value) < 4 * se, (est, r.value, se)
    assert r.value < th.value


def test_dense_and_sparse_mode_products_agree_on_fars():
    fars = pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")
    keys = ["iage", "isex", "istatenum", "irace"]
    m = {"iage": tridiagonal(99, 0.05).tolist(), "irace": 0.9, "istatenum": 0.97}
    dense, th = _misclass(fars, keys, 0.02, m, method="dense")
    sparse, _ = _misclass(fars, keys, 0.02, m, method="sparse")
    assert dense.extra["method"] == "dense" and sparse.extra["method"] == "sparse"
    assert sparse.value == pytest.approx(dense.value, rel=1e-10)
    assert sparse.extra["nA"] == pytest.approx(dense.extra["nA"], rel=1e-10)
    auto, _ = _misclass(fars, keys, 0.02, m, dense_limit=1000)
    assert auto.extra["method"] == "sparse" and auto.value == pytest.approx(dense.value, rel=1e-10)
    assert dense.value < th.value


def test_matrix_inputs_labelled_csv_and_json_file(tmp_path):
    d = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    keys = ["urbrur", "water", "sex"]
    W = keep(8, 0.9)
    W[2] = [0.1, 0.0, 0.6, 0.1, 0.1, 0.0, 0.0, 0.1]
    labels = sorted(d["water"].unique())
    plain, _ = _misclass(d, keys, 0.1, {"water": W.tolist()})
    perm = np.arange(8)[::-1]
    labelled, _ = _misclass(d, keys, 0.1, {"water": {"categories": [labels[i] for i in perm],
                                                     "matrix": W[np.ix_(perm, perm)].tolist()}})
    assert labelled.value == pytest.approx(plain.value, rel=1e-14)
    csv = tmp_path / "water.csv"
    pd.DataFrame(W, index=labels, columns=labels).to_csv(csv)
    from_csv, _ = _misclass(d, keys, 0.1, {"water": str(csv)})
    assert from_csv.value == pytest.approx(plain.value, rel=1e-14)
    js = tmp_path / "m.json"
    js.write_text(json.dumps({"water": W.tolist()}))
    proc = run_cli("assess", str(data_path("sdcmicro/testdata.csv")), "--keys", "urbrur,water,sex",
                   "--fraction", "0.1", "--measures", "theta_hat_misclass",
                   "--option", f"theta_hat_misclass.matrices={js}", "--json", check=True)
    assert json.loads(proc.stdout)["measures"]["theta_hat_misclass"]["value"] == pytest.approx(
        plain.value, rel=1e-14)


def test_bad_matrices_are_one_clear_line():
    d = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    keys = ["urbrur", "water", "sex"]
    with pytest.raises(BadInput, match="'age', which are not key variables"):
        _misclass(d, keys, 0.1, {"age": 0.9})
    with pytest.raises(BadInput, match="'sex' is 3 x 3, but the variable has 2 categories"):
        _misclass(d, keys, 0.1, {"sex": np.eye(3).tolist()})
    with pytest.raises(BadInput, match="row 1 sums to 0.9"):
        _misclass(d, keys, 0.1, {"sex": [[1, 0], [0.5, 0.4]]})
    with pytest.raises(BadInput, match="keep probability 1.2"):
        _misclass(d, keys, 0.1, {"sex": 1.2})
    with pytest.raises(BadInput, match=r"does not label 1 categories that occur in the file, "
                                       r"e.g. \['2'\]"):
        _misclass(d, keys, 0.1, {"sex": {"categories": [1, 3], "matrix": np.eye(2).tolist()}})
    one = d.assign(sex=d["sex"].where(d.index != 0, 9))           # sex 9: one record
    with pytest.raises(BadInput, match=r"'<withheld: a value of 1 record>'") as err:
        _misclass(one, keys, 0.1, {"sex": {"categories": [1, 2], "matrix": np.eye(2).tolist()}})
    assert "9" not in str(err.value)
    a = assess(d, keys, fraction=0.1, measures=["theta_hat_misclass"])
    assert a.measures["theta_hat_misclass"].value is None
    assert "matrices" in a.measures["theta_hat_misclass"].reason


def test_empty_integer_categories():
    """water takes 1..9 without 8: the table has nine categories, one empty. A matrix over the
    eight that occur, the 9 x 9 one with any row for the empty category, and a keep probability
    (spread over the eight) give the same value."""
    d = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    keys = ["urbrur", "water", "sex"]
    W8 = keep(8, 0.9)
    W9 = np.zeros((9, 9))
    idx = [0, 1, 2, 3, 4, 5, 6, 8]
    W9[np.ix_(idx, idx)] = W8
    W9[7] = 1.0 / 9                       # the empty category's row is never used
    a, _ = _misclass(d, keys, 0.1, {"water": W8.tolist()})
    b, _ = _misclass(d, keys, 0.1, {"water": W9.tolist()})
    c, _ = _misclass(d, keys, 0.1, {"water": 0.9})
    assert a.value == pytest.approx(b.value, rel=1e-14) and a.value == pytest.approx(c.value, rel=1e-14)
    # a labelled matrix may name a value outside the file: mass moved there matches nobody
    lab = {"categories": [1, 2, 3, 4, 5, 6, 7, 9, 99], "matrix": np.eye(9).tolist()}
    e, th = _misclass(d, keys, 0.1, {"water": lab})
    if th.value is None:          # no sample pair on these keys: both say not estimable
        assert th.reason.startswith("not estimable") and e.reason.startswith("not estimable")
    else:
        assert e.value == pytest.approx(th.value, rel=1e-14)
    with pytest.raises(BadInput, match="is 7 x 7, but the variable has 8 categories in the file "
                                       r"\(9 in its code range\)"):
        _misclass(d, keys, 0.1, {"water": np.eye(7).tolist()})
