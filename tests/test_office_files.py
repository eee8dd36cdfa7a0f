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
    headline = {line.split("\t")[0] for line in listing
                if "(runs by default: the headline without population counts)" in line}
    assert headline == {"matches_ll", "tau1_ll"}
    data = data_path("sdcmicro/testdata.csv")
    ran = set(json.loads(run_cli("assess", str(data), "--keys", KEYS, "--fraction", "0.01",
                                 "--json").stdout)["measures"])
    listed = {line.split("\t")[0] for line in listing}
    assert headline <= ran
    assert named == listed - ran, (named ^ (listed - ran))
    # with population counts the headline is counted: the log-linear fits run only when named
    reg = json.loads(run_cli("assess", str(data_path("sdcmicro/testdata2.csv")), "--keys", KEYS,
                             "--population", str(data), "--json").stdout)
    assert {"matches", "tau1"} <= set(reg["measures"]) and not headline & set(reg["measures"])


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
    assert f"headline expected correct matches E ≈ {a.measures['matches_ll'].value:.3g}" in text
    assert "two-sided 99 % interval" in text and "one-sided 99 % upper bound" in text
    assert "scenario:" in text
    idle = [n for n, r in a.measures.items() if r.value is None]
    rows = html.count("<tr>")
    assert rows <= len(a.measures) - len(idle) + 3, rows   # not applicable: one line, not a row each
    assert f"not applicable here ({len(idle)})" in text


# --- item 3: protection that makes a figure look worse; what to do next ------------------------
def _page_text(path) -> str:
    import html as _html
    t = path.read_text(encoding="utf-8")
    t = re.sub(r"<img[^>]*>", "", t)
    t = re.sub(r"<style.*?</style>", "", t, flags=re.S)
    return " ".join(_html.unescape(re.sub(r"<[^>]+>", " ", t)).split())


@pytest.fixture(scope="module")
def scanned(tmp_path_factory):
    root = tmp_path_factory.mktemp("page3")
    data = data_path("sdcmicro/testdata.csv")
    r = run_cli("scan", str(data), "--keys", "water,sex,age,relat", "--max-size", "3",
                "--fraction", "0.01", "-o", str(root / "scan"))
    assert r.returncode == 0, r.stderr
    return root, data


def test_item3_a_higher_theta_bound_after_protection_is_explained(scanned):
    root, data = scanned
    d = pd.read_csv(data)
    rel = d.assign(age=(d["age"] // 40) * 40)               # age coarsened, relat suppressed in 5
    idx = np.random.default_rng(0).choice(len(d), 5, replace=False)
    rel.loc[idx, "relat"] = np.nan
    rel.to_csv(root / "release.csv", index=False)
    out = root / "page.html"
    r = run_cli("report", str(root / "scan"), "-o", str(out), "--release", str(root / "release.csv"),
                "--max-theta", "0.5")
    assert r.returncode == 0, r.stderr
    text = _page_text(out)
    # the pandas oracle: (age, relat) before and after, missing as a category of its own
    def n_r(frame):
        f = frame.groupby(["age", "relat"], dropna=False).size()
        return int((f == 1).sum()), int((f == 2).sum())
    (b1, b2), (a1, a2) = n_r(d), n_r(rel)
    assert (a1, a2) == (4, 1)
    assert "Higher than on the file as it is (0.809;" in text
    assert (f"protection left n1 = {a1} sample uniques (was {b1}) and n2 = {a2} sample pairs "
            f"(was {b2}) in (age, relat)") in text
    assert "while the expected correct matches there fell from" in text
    assert "counted as a category of their own" in text and "sdcMicro counts a missing value as a "
    "wildcard" in text and "ARX sets every key of a suppressed record to *" in text
    # what to do next follows from the release it judged: it still fails
    steps = text[text.index("What to do next"):]
    assert "The release after protection still fails the policy" in steps
    assert "write this page again with the protect run's plan" not in steps


def test_item3_next_steps_follow_the_plan_the_page_was_given(scanned):
    root, data = scanned
    plan = root / "plan.json"
    r = run_cli("protect", str(data), "--keys", "water,sex,age,relat", "--fraction", "0.01",
                "--hierarchy", "age=bands:10", "--hierarchy", "age=bands:20", "--criterion",
                "matches_ll<=4", "--plan", str(plan), "-o", str(root / "protected.csv"))
    assert r.returncode == 0, r.stderr
    out = root / "page-plan.html"
    r = run_cli("report", str(root / "scan"), "-o", str(out), "--plan", str(plan),
                "--max-matches", "4")
    assert r.returncode == 0, r.stderr
    steps = _page_text(out)
    steps = steps[steps.index("What to do next"):]
    assert "given the protect run's plan but not its release" in steps
    assert "write this page again with the protect run's plan" not in steps
    assert "gpurisk protect" in steps and "--from-plan" in steps
    cmd = re.search(r"(gpurisk protect \S+ --from-plan \S+ -o release\.csv)", steps).group(1)
    import shlex
    args = shlex.split(cmd)[1:]
    args[-1] = str(root / "from-plan.csv")
    r = run_cli(*args)                                     # the command it prints runs
    assert r.returncode == 0, r.stderr
    assert (root / "from-plan.csv").read_bytes() == (root / "protected.csv").read_bytes()
    # a plan that fails by its own figures: protect again, not "write the page with the plan"
    out1 = root / "page-plan-fails.html"
    assert run_cli("report", str(root / "scan"), "-o", str(out1), "--plan", str(plan),
                   "--max-matches", "1").returncode == 0
    steps = _page_text(out1)
    steps = steps[steps.index("What to do next"):]
    assert "The plan given here does not meet the policy by its own figures" in steps
    # given the release too, and it meets the policy on a scan of every key set: release it
    full = root / "scan-all-sizes"
    assert run_cli("scan", str(data), "--keys", "water,sex,age,relat", "--fraction", "0.01",
                   "-o", str(full)).returncode == 0
    out2 = root / "page-met.html"
    r = run_cli("report", str(full), "-o", str(out2), "--plan", str(plan), "--release",
                str(root / "protected.csv"), "--max-matches", "4")
    assert r.returncode == 0, r.stderr
    steps = _page_text(out2)
    steps = steps[steps.index("What to do next"):]
    assert "The release after protection meets the policy: release the file" in steps


# --- item 4: one meaning per level --------------------------------------------------------------
def test_item4_assess_names_the_two_sided_interval_and_the_one_sided_bound():
    args = ["assess", "example:adult", "--keys", "age,sex,race,marital-status", "--fraction", "0.01"]
    for alpha, words in (("0.01", "99 %"), ("0.05", "95 %")):
        doc = json.loads(run_cli(*args, "--alpha", alpha, "--json").stdout)
        m, h = doc["measures"]["matches_ll"], doc["headline"]
        assert doc["levels"]["bound_words"] == f"one-sided {words} upper bound"
        assert doc["levels"]["interval_words"] == f"two-sided {words} interval"
        assert h["measure"] == "matches_ll" and h["upper"] == m["upper"]
        assert h["interval"] == [m["interval_lower"], m["interval_upper"]]
        # the interval is two-sided at 1 − α: its upper end lies above the one-sided bound
        z1, z2 = (2.3263478740408408, 2.5758293035489004) if alpha == "0.01" else \
            (1.6448536269514722, 1.959963984540054)
        # ... each allowing for the sum's skewness (Cornish-Fisher, never below the normal end)
        g = m.get("skewness", 0.0)
        assert g > 0

        def end(z):
            return m["value"] + m["se"] * max(z, z + (z * z - 1) * g / 6)
        # where a root key's gamma is used (root_prior=eb, here age's) the upper ends are taken
        # from the larger of the gamma's and Jeffreys' prior's estimates
        assert m["root_shapes"].startswith("age: ")
        above = max(m["estimate_jeffreys"] - m["value"], 0.0)
        assert m["upper"] == pytest.approx(min(end(z1) + above, doc["freq_of_freq"]["1"]))
        assert m["interval_upper"] == pytest.approx(end(z2) + above)
        text = " ".join(run_cli(*args, "--alpha", alpha).stdout.split())
        assert (f"two-sided {words} interval {m['interval_lower']:.3g} to {m['interval_upper']:.3g}; "
                f"one-sided {words} upper bound {m['upper']:.4g} (matches_ll)") in text
        assert f"upper: the one-sided {words} upper bound (--alpha {float(alpha):g})" in text
        assert f"{words} interval" not in text.replace(f"two-sided {words} interval", "")


def test_item4_scan_protect_and_the_arx_plugin_use_the_same_words(tmp_path):
    data = str(data_path("sdcmicro/testdata.csv"))
    r = run_cli("scan", data, "--keys", "urbrur,water,sex,age", "--max-size", "2", "--fraction",
                "0.01", "-o", str(tmp_path / "s"), env={"COLUMNS": "200"})
    assert "upper: the one-sided 99 % upper bound (--alpha 0.01)" in r.stdout
    assert run_cli("report", str(tmp_path / "s"), "-o", str(tmp_path / "p.html"),
                   "--max-theta", "0.5").returncode == 0
    page = _page_text(tmp_path / "p.html")
    assert "*_upper: the one-sided 99 % upper bound (--alpha 0.01)" in page
    assert "two-sided 99 % interval" in page and "have a one-sided 99 % upper bound above 0.5" in page
    r = run_cli("protect", data, "--keys", "urbrur,water,sex,age", "--fraction", "0.01",
                "--hierarchy", "age=bands:10", "--criterion", "matches_ll.upper<=30",
                env={"COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    assert "MEASURE.upper: the one-sided 99 % upper bound (--alpha 0.01)" in r.stdout
    # pop_uniqueness: its interval from --alpha (was 95 % whatever --alpha said)
    doc = json.loads(run_cli("assess", data, "--keys", "urbrur,water,sex,age,relat", "--fraction",
                             "0.01", "--measures", "pop_uniqueness", "--json").stdout)
    p = doc["measures"]["pop_uniqueness"]
    assert p["interval_level"] == 0.99 and p["bound_level"] == 0.99
    assert p["interval_lower"] <= p["value"] <= p["upper"] <= p["interval_upper"]
    r = run_cli("assess", data, "--keys", "urbrur,water,sex,age,relat", "--fraction", "0.01",
                "--measures", "pop_uniqueness", env={"COLUMNS": "250"})
    text = " ".join(r.stdout.split())
    assert f"two-sided 99 % interval {p['interval_lower']} to {p['interval_upper']}" in text
    assert "95 %" not in text


# --- items 1 and 2: the decision page, read in headless Chromium at 1 400 and 800 px ------------
PAGE_CHECK = """<script>
window.addEventListener('load', function () {
  var out = {page: {scroll: document.documentElement.scrollWidth,
                    width: document.documentElement.clientWidth, height: window.innerHeight}};
  ['verdict', 'headline', 'identity', 'release-verdict'].forEach(function (id) {
    var e = document.getElementById(id);
    out[id] = e ? {bottom: e.getBoundingClientRect().bottom, text: e.innerText} : null;
  });
  out.verdicts = Array.from(document.querySelectorAll('table.verdicts tr')).slice(1).map(
    function (tr) { return Array.from(tr.cells).map(function (c) {
      return {text: c.innerText, cls: c.className, color: getComputedStyle(c).color}; }); });
  var pre = document.createElement('pre'); pre.id = 'page-check';
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
});
</script>"""


def _in_chromium(page_html, width, tmp_path) -> dict:
    import shutil
    import subprocess

    from test_decision_page import FLAGS
    browser = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                    if shutil.which(n)), None)
    if browser is None:
        pytest.skip("no chromium in PATH (apt-get install -y chromium)")
    checked = tmp_path / f"checked-{page_html.stem}-{width}.html"
    checked.write_text(page_html.read_text(encoding="utf-8").replace("</body>", PAGE_CHECK + "</body>"),
                       encoding="utf-8")
    proc = subprocess.run([browser, *FLAGS, f"--user-data-dir={tmp_path / f'profile-{width}'}",
                           f"--window-size={width},900", "--dump-dom", checked.resolve().as_uri()],
                          capture_output=True, text=True, timeout=180)
    found = re.search(r'<pre id="page-check">(.*?)</pre>', proc.stdout, re.S)
    assert found, proc.stderr[-2000:]
    import html as _html
    res = json.loads(_html.unescape(found.group(1)))
    assert res["page"]["scroll"] <= res["page"]["width"]          # no page-wide scroll bar
    return res


@pytest.fixture(scope="module")
def partial_and_full(scanned):
    """Pages of a scan up to size 3 of 4 keys and of one holding all 4, same policy."""
    root, data = scanned
    full = root / "scan-full"
    r = run_cli("scan", str(data), "--keys", "water,sex,age,relat", "--max-size", "4",
                "--fraction", "0.01", "-o", str(full))
    assert r.returncode == 0, r.stderr
    pages = {}
    for name, scan in (("partial", root / "scan"), ("full", full)):
        pages[name] = root / f"board-{name}.html"
        r = run_cli("report", str(scan), "-o", str(pages[name]), "--max-matches", "100",
                    "--max-theta", "0.9", "--min-k", "2")
        assert r.returncode == 0, r.stderr
    return pages, data


@pytest.mark.parametrize("width", [1400, 800])
def test_item1_a_partial_scan_page_cannot_say_met_for_the_full_key_set(partial_and_full, tmp_path,
                                                                        width):
    pages, data = partial_and_full
    res = _in_chromium(pages["partial"], width, tmp_path)
    rows = {r[0]["text"]: r for r in res["verdicts"]}
    for crit in ("expected correct matches at most 100 in every combination",
                 "θ̂'s upper bound at most 0.9 in every combination"):
        status, words = rows[crit][1], rows[crit][2]["text"]
        assert status["text"] == "not checked" and status["cls"] == "not-checked"
        assert status["color"] == "rgb(107, 82, 0)"                 # the verdict colour of "not checked"
        assert "not all 4 (age, relat, sex, water)" in words
        assert f"gpurisk assess {data} --keys age,relat,sex,water --fraction 0.01" in words
    assert not any(r[1]["text"] == "met" for r in res["verdicts"])
    assert "meets every criterion" not in res["verdict"]["text"]
    # the same policy on a scan that holds the full key set: met where it holds
    full = _in_chromium(pages["full"], width, tmp_path)
    rows = {r[0]["text"]: r for r in full["verdicts"]}
    assert rows["expected correct matches at most 100 in every combination"][1]["text"] == "met"
    assert rows["θ̂'s upper bound at most 0.9 in every combination"][1]["text"] == "met"


@pytest.mark.parametrize("width", [1400, 800])
def test_item2_the_first_screen_shows_the_headline_with_interval_and_scenario(partial_and_full,
                                                                              tmp_path, width):
    pages, data = partial_and_full
    ref = json.loads(run_cli("assess", str(data), "--keys", "water,sex,age,relat", "--fraction",
                             "0.01", "--json").stdout)["headline"]
    res = _in_chromium(pages["full"], width, tmp_path)
    h = res["headline"]
    assert h is not None and h["bottom"] <= res["page"]["height"]       # on the first screen
    assert res["verdict"]["bottom"] <= res["page"]["height"]
    assert res["identity"]["bottom"] <= res["page"]["height"]
    text = " ".join(h["text"].split())
    lo, hi = ref["interval"]
    assert (f"headline expected correct matches E ≈ {ref['value']:.3g}, two-sided 99 % interval "
            f"{lo:.3g} to {hi:.3g}; one-sided 99 % upper bound {ref['upper']:.4g} (matches_ll)") in text
    assert "scenario: expected correct matches if an intruder matches each sample unique" in text
    assert "on the full key set: water, sex, age, relat" in text
    # a scan without the full key set: the headline says on which combination it stands
    part = " ".join(_in_chromium(pages["partial"], width, tmp_path)["headline"]["text"].split())
    assert "on the riskiest combination scanned (by matches_ll): water, age, relat" in part


@pytest.mark.parametrize("width", [1400, 800])
def test_item2_with_a_population_the_first_screen_headline_is_the_exact_e(tmp_path, width):
    sample, pop = data_path("sdcmicro/testdata2.csv"), data_path("sdcmicro/testdata.csv")
    assert run_cli("scan", str(sample), "--keys", KEYS, "--population", str(pop), "-o",
                   str(tmp_path / "s")).returncode == 0
    page = tmp_path / "register.html"
    assert run_cli("report", str(tmp_path / "s"), "-o", str(page), "--max-matches", "100"
                   ).returncode == 0
    # the pandas oracle: E = Σ over sample uniques of 1/F
    s, p = pd.read_csv(sample), pd.read_csv(pop)
    keys = KEYS.split(",")
    f = s.groupby(keys).size().rename("f")
    F = p.groupby(keys).size().rename("F")
    cells = pd.concat([f, F], axis=1, join="inner")
    e = float((1.0 / cells.loc[cells["f"] == 1, "F"]).sum())
    res = _in_chromium(page, width, tmp_path)
    assert res["headline"]["bottom"] <= res["page"]["height"]
    text = " ".join(res["headline"]["text"].split())
    assert f"headline expected correct matches E = {e:.6g}, exact: counted from the population counts (matches)" in text
    assert "interval" not in text and "(true value, from the population)" in text
