"""Issue 21, "estimates an office can trust": the README's assess example is what assess prints;
scan, compare and report rank by θ̂·n1 and say what it is (a lower estimate of E)."""
from __future__ import annotations

import json
import re

from conftest import ROOT, data_path, run_cli


def _readme_example():
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```text\n\$ gpurisk assess (.*?)\n(.*?)```", text, re.S)
    return block.group(1).split(), block.group(2)


def test_readme_assess_example_is_what_assess_prints():
    args, shown = _readme_example()
    out = run_cli("assess", *args, check=True).stdout
    rows = {ln.split()[0]: ln for ln in out.splitlines() if ln.startswith("│")
            for ln in [ln.strip("│ ").replace("│", " ")]}
    lines = shown.splitlines()
    assert lines[0] in out and lines[1] in out                    # n, π; keys, cells, n1, n2, n3
    # the table, then the line naming what "upper" is (issue 41), then what did not apply
    legend = next(ln for ln in lines if ln.startswith("upper: the one-sided"))
    assert legend in out
    table = lines[lines.index(next(ln for ln in lines if ln.startswith(" measure"))) + 1:
                  lines.index(legend)]
    assert table
    for ln in table:
        name, *fields = ln.split(None, 4)
        assert name in rows, name
        assert rows[name].split(None, 4)[:4] == [name, *fields][:4], (ln, rows[name])
    assert lines[2] in out and lines[2].startswith("headline expected correct matches E")
    head = lines.index(next(ln for ln in lines if ln.startswith(" measure")))
    assert all(ln in out for ln in lines[3:head])     # τ1 beside it; the scenario; the model
    assert any(ln.startswith("  model: log-linear") for ln in lines[3:head])
    # how each estimate's interval is made: both from the model alone, no fitted factor
    assert "  matches_ll's interval: the fitted model's own variance" in "\n".join(lines[3:head])
    assert "  tau1_ll's interval: the fitted model's own variance" in "\n".join(lines[3:head])
    answers = lines.index("what each figure answers")
    for ln in lines[answers + 1:]:
        assert ln in out, ln                                       # the scenario of each figure
    for ln in lines[lines.index("not applicable here") + 1:answers]:
        name, why = ln.strip().split(": ", 1)
        if name.endswith("..."):
            assert why in out
        else:
            assert f"  {name}: {why}" in out, ln
    assert "-53852" not in out and "−53 852" not in out


def test_scan_ranks_by_estimated_correct_matches(tmp_path):
    # issue 27: a scan ranks by Ê (matches_ll), the estimate of the expected correct matches E, not
    # by θ̂·n1, which is a lower estimate of E; θ̂·n1 is kept beside it, labelled as such
    p = run_cli("scan", data_path("arx/adult.csv"), "--keys", "sex,age,race,marital-status,education",
                "--max-size", "3", "--fraction", "0.01", "--top", "5", "-o", tmp_path / "s.parquet",
                check=True)
    assert "ranked by Ê (matches_ll), the expected number of correct matches E" in p.stdout
    assert "θ̂·n1 (lower est.)" in p.stdout
    assert "theta_hat" in p.stdout and "matches_ll" in p.stdout        # θ̂ beside the ranking
    doc = json.loads(run_cli("scan", data_path("arx/adult.csv"), "--keys",
                             "sex,age,race,marital-status,education", "--max-size", "3",
                             "--fraction", "0.01", "--top", "5", "--json", check=True).stdout)
    assert doc["rank_by"] == "matches_ll" and "expected number of correct matches" in doc["ranked_by"]
    top = doc["top"]
    vals = [r["matches_ll"] for r in top]
    assert vals == sorted(vals, reverse=True) and all("theta_hat" in r for r in top)
    assert all("matches_hat" in r for r in top)       # θ̂·n1, a lower estimate of E, beside it
    assert top[0]["n2"] > 0                        # not a combination with no sample pair
    from gpurisk.report import write_report
    page = write_report(tmp_path / "s.parquet", tmp_path / "r.html").read_text()
    assert "Combinations are ranked by <b>matches_ll</b>" in page and "with θ̂ beside it" in page


def test_compare_ranks_rows_and_says_so():
    p = run_cli("compare", data_path("arx/adult.csv"), "--keys", "sex,age,race,marital-status",
                "--fraction", "0.05", "--alt", "age=bands:5", "--json", check=True)
    doc = json.loads(p.stdout)
    # issue 27: compare ranks as scan does, by Ê (matches_ll); θ̂·n1 stays a column
    assert doc["rank_by"] == "matches_ll" and "expected number of correct matches" in doc["ranked_by"]
    vals = [r["matches_ll"]["original"] for r in doc["rows"]]
    assert vals == sorted(vals, reverse=True)
    assert all("matches_hat" in r for r in doc["rows"])       # kept, as a lower estimate of E
    text = run_cli("compare", data_path("arx/adult.csv"), "--keys", "sex,age,race",
                   "--fraction", "0.05", "--alt", "age=bands:5", check=True).stdout
    assert text.startswith("rows ranked by matches_ll [original]")
