"""Issue 41: files an office really holds, driven through the command line.

Each test names the numbered item of the issue it covers. References are independent of the code
under test: eq. 7 of Skinner & Elliot (2002) by hand, sums of the weights by pandas.
"""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from conftest import data_path, run_cli

KEYS = "urbrur,water,sex,age"


@pytest.fixture(scope="module")
def weighted(tmp_path_factory):
    """sdcMicro's testdata (design weights 100, π = 0.01) as an office holds it three ways:
    design weights, calibrated weights (13 of them between 0.75 and 0.99, as the crash file's) and
    normalised weights (Σw = n)."""
    d = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    root = tmp_path_factory.mktemp("weights")
    rng = np.random.default_rng(41)
    calib = d.assign(w=d["sampling_weight"].astype(float))
    idx = rng.choice(len(d), 13, replace=False)
    calib.loc[idx, "w"] = rng.uniform(0.75, 0.99, 13)
    # one sample unique of its own cell with a weight below 1: its cell sums below its count
    lone = calib.iloc[[0]].assign(urbrur=9, w=0.8)
    calib = pd.concat([calib, lone], ignore_index=True)
    norm = d.assign(w=d["sampling_weight"] * len(d) / d["sampling_weight"].sum())
    paths = {}
    for name, frame in (("design", d.assign(w=d["sampling_weight"].astype(float))),
                        ("calibrated", calib), ("normalised", norm)):
        paths[name] = root / f"{name}.csv"
        frame.to_csv(paths[name], index=False)
    return paths, d


def _eq7(d: pd.DataFrame, keys: list[str], pi: float) -> float:
    """θ̂ of eq. 7 by hand from pandas' cell counts."""
    f = d.groupby(keys).size()
    n1, n2 = int((f == 1).sum()), int((f == 2).sum())
    return pi * n1 / (pi * n1 + 2 * (1 - pi) * n2)


# --- item 5: every message names the flag the user gave -----------------------------------------
@pytest.mark.parametrize("flag", ["--alt", "--hierarchy", "--recode"])
def test_item5_a_missing_map_file_is_named_by_its_own_flag(flag, tmp_path):
    data = data_path("sdcmicro/testdata.csv")
    spec = f"water=map:{tmp_path / 'water_map.csv'}"
    cmd = {"--alt": ["compare", data, "--keys", KEYS, "--fraction", "0.01", "--alt", spec],
           "--hierarchy": ["protect", data, "--keys", KEYS, "--fraction", "0.01", "--hierarchy", spec,
                           "--criterion", "theta_hat.upper<=0.1"],
           "--recode": ["assess", data, "--keys", KEYS, "--fraction", "0.01", "--recode", spec]}[flag]
    r = run_cli(*map(str, cmd))
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip()
    assert line.count("\n") == 0 and line.startswith(f"gpurisk: error: {flag} water=map:")
    assert "file does not exist" in line
    others = {"--alt", "--hierarchy", "--recode"} - {flag}
    assert not any(o in line for o in others), line


@pytest.mark.parametrize("flag,spec,words", [
    ("--alt", "water=bands:x", "width: 'x' is not a number"),
    ("--hierarchy", "water=breaks:3,1", "give increasing numbers"),
    ("--alt", "water=hierarchy:nofile.csv:1", "does not exist"),
])
def test_item5_other_spec_errors_name_the_flag_too(flag, spec, words):
    data = data_path("sdcmicro/testdata.csv")
    cmd = (["compare", data, "--keys", KEYS, "--fraction", "0.01", "--alt", spec] if flag == "--alt"
           else ["protect", data, "--keys", KEYS, "--fraction", "0.01", "--hierarchy", spec,
                 "--criterion", "theta_hat.upper<=0.1"])
    r = run_cli(*map(str, cmd))
    assert r.returncode == 2 and r.stderr.startswith(f"gpurisk: error: {flag} "), r.stderr
    assert words in r.stderr and "--recode" not in r.stderr


# --- item 6: weights as offices hold them, one rule in every command ----------------------------
def _assess(path, *extra):
    r = run_cli("assess", str(path), "--keys", KEYS, "--weights", "w",
                "--measures", "theta_hat_weighted,indiv_risk", "--json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_item6_assess_reads_design_calibrated_and_normalised_weights_alike(weighted):
    paths, d = weighted
    ref = _eq7(d, KEYS.split(","), 0.01)           # equal weights 100: θ̂_w is eq. 7 at π = 0.01
    design = _assess(paths["design"])
    assert design["measures"]["theta_hat_weighted"]["value"] == pytest.approx(ref, rel=1e-12)
    # normalised weights with the population size given as π = n/N: scaled by N/n, the same figures
    norm = _assess(paths["normalised"], "--fraction", "0.01")
    for m in ("theta_hat_weighted", "indiv_risk"):
        assert norm["measures"][m]["value"] == pytest.approx(design["measures"][m]["value"], rel=1e-9)
    assert any("normalised weights" in w and "scaled by N/n = 100" in w for w in norm["warnings"])
    # normalised weights without it: not applicable, one line saying how to give it
    bare = _assess(paths["normalised"])
    for m in ("theta_hat_weighted", "indiv_risk"):
        reason = bare["measures"][m]["reason"]
        assert bare["measures"][m]["value"] is None and "normalised weights" in reason
        assert "--fraction PI" in reason and "\n" not in reason
    # calibrated weights, some below 1: accepted; the lone cell is taken at its count
    cal = _assess(paths["calibrated"])
    assert cal["measures"]["theta_hat_weighted"]["value"] is not None
    assert cal["measures"]["indiv_risk"]["value"] is not None
    assert any("1 cell(s) whose weights sum below their sample count" in w for w in cal["warnings"])


def test_item6_theta_hat_weighted_says_why_it_has_no_se(weighted):
    paths, _ = weighted
    doc = _assess(paths["design"])["measures"]["theta_hat_weighted"]
    assert doc["se"] is None and "no variance estimator" in doc["se_reason"]
    r = run_cli("assess", str(paths["design"]), "--keys", KEYS, "--weights", "w", "--measures",
                "theta_hat_weighted")
    assert "no s.e.: Skinner & Elliot (2002, §5.3)" in " ".join(r.stdout.split())
    r = run_cli("design", str(paths["design"]), "--keys", KEYS, "--weights", "w")
    assert r.returncode == 0 and "no s.e.:" in r.stdout


@pytest.mark.parametrize("cluster", [False, True])
def test_item6_design_accepts_calibrated_weights_with_or_without_clusters(weighted, cluster):
    paths, d = weighted
    extra = ["--cluster", "ori_hid"] if cluster else []
    r = run_cli("design", str(paths["calibrated"]), "--keys", KEYS, "--weights", "w", "--json", *extra)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    doc = out["theta_hat_weighted"]
    assert doc["value"] is not None
    assert any("1 cell(s) whose weights sum below their sample count" in w for w in out["warnings"])
    # the same figure as assess's
    a = _assess(paths["calibrated"])["measures"]["theta_hat_weighted"]["value"]
    assert doc["value"] == pytest.approx(a, rel=1e-12)


def test_item6_design_and_record_risk_refuse_normalised_weights_in_one_line(weighted):
    paths, d = weighted
    for cmd, how in (("design", "--fraction PI"), ("record-risk", "--population-size N")):
        r = run_cli(cmd, str(paths["normalised"]), "--keys", KEYS, "--weights", "w")
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert r.stderr.startswith("gpurisk: error: --weights w: the weights sum to n")
        assert how in r.stderr
    # given the population size they run: design by π, record-risk by N
    r = run_cli("design", str(paths["normalised"]), "--keys", KEYS, "--weights", "w",
                "--fraction", "0.01", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["theta_hat_weighted"]["value"] == pytest.approx(
        _eq7(d, KEYS.split(","), 0.01), rel=1e-12)


def test_item6_record_risk_takes_weights(weighted):
    paths, d = weighted
    by_w = run_cli("record-risk", str(paths["design"]), "--keys", KEYS, "--weights", "w", "--json")
    assert by_w.returncode == 0, by_w.stderr
    doc = json.loads(by_w.stdout)
    assert doc["N"] == pytest.approx(d["sampling_weight"].sum())          # N = Σw
    by_pi = json.loads(run_cli("record-risk", str(paths["design"]), "--keys", KEYS, "--fraction",
                               "0.01", "--json").stdout)
    assert doc["methods"] == by_pi["methods"]                              # Σw = n/π here
    norm = run_cli("record-risk", str(paths["normalised"]), "--keys", KEYS, "--weights", "w",
                   "--population-size", str(d["sampling_weight"].sum()), "--json")
    assert norm.returncode == 0 and json.loads(norm.stdout)["methods"] == by_pi["methods"]


# --- item 8: the test command's prerequisites ----------------------------------------------------
def test_item8_readme_lists_chromium_as_ci_installs_it():
    import re

    from conftest import ROOT
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    start = readme.index("## Start here")
    setup = readme[start:readme.index("\n## ", start + 1)]
    assert "Chromium" in setup and "apt-get install -y chromium" in setup
    # .ci/run installs the same package with the same tool (quieter flags aside)
    installed = re.findall(r"apt-get install -y(?: -qq)? (\S+?)\)", ci)
    assert installed == ["chromium"], installed
    # and the page tests' skip reason gives the same command
    for name in ("test_decision_page.py", "test_report.py"):
        assert "(apt-get install -y chromium)" in (ROOT / "tests" / name).read_text()


# --- item 7: small untruths and frictions --------------------------------------------------------
def test_item7_measures_says_right_what_runs_by_default():
    """`gpurisk measures` marks "(runs when named)" exactly the measures assess leaves out by
    default (matches_ll and tau1_ll run: the headline)."""
    listing = run_cli("measures").stdout.splitlines()[1:]
    named = {line.split("\t")[0] for line in listing if "(runs when named)" in line}
    headline = {line.split("\t")[0] for line in listing if "(runs by default: the headline)" in line}
    assert headline == {"matches_ll", "tau1_ll"}
    data = data_path("sdcmicro/testdata.csv")
    ran = set(json.loads(run_cli("assess", str(data), "--keys", KEYS, "--fraction", "0.01",
                                 "--json").stdout)["measures"])
    listed = {line.split("\t")[0] for line in listing}
    assert headline <= ran
    assert named == listed - ran, (named ^ (listed - ran))


def test_item7_a_withheld_tau1_hat_has_no_se_beside_its_missing_value():
    import gpurisk
    a = gpurisk.assess("example:adult", ["age", "sex", "race", "marital-status"], fraction=0.01,
                       measures=["tau1_hat"])
    r = a.measures["tau1_hat"]
    assert r.value is None and r.reason.startswith("withheld") and r.se is None
    assert r.extra["raw_se"] > 0                          # kept, by name, for validation
    row = a.to_frame().set_index("measure").loc["tau1_hat"]
    assert pd.isna(row["value"]) and pd.isna(row["se"])
    r = run_cli("assess", "example:adult", "--keys", "age,sex,race,marital-status", "--fraction",
                "0.01", "--measures", "tau1_hat", "--json")
    assert json.loads(r.stdout)["measures"]["tau1_hat"]["se"] is None


def test_item7_suda_header_says_the_shares_overlap():
    r = run_cli("suda", str(data_path("sdcmicro/testdata.csv")), "--keys", "urbrur,water,sex,age",
                "--max-msu", "2", env={"COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "add up to more than 100 %" in text
    doc = json.loads(run_cli("suda", str(data_path("sdcmicro/testdata.csv")), "--keys",
                             "urbrur,water,sex,age", "--max-msu", "2", "--json").stdout)
    assert sum(v for v in doc["contributions_pct"].values() if v) > 100     # what the header says


def test_item7_compare_prints_one_short_table():
    data = data_path("sdcmicro/testdata.csv")
    args = ["compare", str(data), "--keys", "urbrur,water,sex,age,relat,roof", "--fraction", "0.01",
            "--alt", "age=bands:5", "--max-size", "3", "--all"]
    r = run_cli(*args, env={"COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) <= 40, len(lines)                 # was 4 tables, 180 lines, for 41 rows
    assert sum(1 for x in lines if x.startswith("┏")) == 1
    assert "the first 20 of 41 rows; --top 0 prints every row" in r.stdout
    head = next(x for x in lines if "combination" in x)
    for col in ("n1", "matches_ll", "matches_hat", "theta_hat"):
        assert f" {col} " in head
    every = run_cli(*args, "--top", "0", env={"COLUMNS": "200"}).stdout
    assert "water, age, relat" in every and "the first" not in every


def test_item7_protect_headers_whole_and_infeasible_names_suppress_limit():
    data = data_path("sdcmicro/testdata.csv")
    crits = ["matches_ll.upper<=3", "theta_hat.upper<=0.05", "tau1_ll.upper<=2"]
    args = ["protect", str(data), "--keys", "urbrur,water,sex,age,relat", "--fraction", "0.01",
            "--hierarchy", "age=bands:5", "--hierarchy", "age=bands:10", "--suppress-limit", "0.02"]
    for c in crits:
        args += ["--criterion", c]
    for width in ("200", "120"):
        r = run_cli(*args, env={"COLUMNS": width})
        assert r.returncode == 0, r.stderr
        assert "…" not in r.stdout                         # no header cut
        assert "[1] matches_ll.upper<=3   [2] theta_hat.upper<=0.05   [3] tau1_ll.upper<=2" in r.stdout
    r = run_cli("protect", str(data), "--keys", "urbrur,water,sex,age", "--fraction", "0.01",
                "--hierarchy", "age=bands:5", "--criterion", "matches_ll<=0.0001")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "--suppress-limit 0.01" in r.stderr and "--hierarchy" in r.stderr


def test_item7_notebook_view_shows_the_headline_both_levels_and_few_idle_rows():
    import gpurisk
    a = gpurisk.assess("example:adult", ["age", "sex", "race", "marital-status"], fraction=0.01)
    html = a._repr_html_()
    text = " ".join(re.sub(r"<[^>]+>", " ", html).split())
    assert "headline expected correct matches E ≈ 19.8" in text
    assert "two-sided 99 % interval" in text and "one-sided 99 % upper bound" in text
    assert "scenario:" in text
    idle = [n for n, r in a.measures.items() if r.value is None]
    rows = html.count("<tr>")
    assert rows <= len(a.measures) - len(idle) + 3, rows   # not applicable: one line, not a row each
    assert f"not applicable here ({len(idle)})" in text
