"""A scan's rows keep what each measure says about its figure (``extra["note"]``: the uniques alone
in a category, where Ê's bound holds less often; the risk criterion's misfit), and the scan's
summary and the decision page show it beside the figure (issue 43)."""
from __future__ import annotations

import html
import re

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import gpurisk
from conftest import data_path, run_cli
from gpurisk.core.display import note_lines

KEYS = ["col_rec_tat", "gender", "age"]


@pytest.fixture(scope="module")
def covid(tmp_path_factory):
    """A 10 % Bernoulli sample of the COVID testing population: its collection-to-receipt times
    have many values held by one record, so most of the uniques of some combinations are alone
    in a category (the lone-uniques note), and others have none."""
    frame = pd.read_csv(data_path("populations/covid_testing.csv.gz"))
    sample = frame[np.random.default_rng(3).random(len(frame)) < 0.1][KEYS].reset_index(drop=True)
    path = tmp_path_factory.mktemp("covid") / "covid10.csv"
    sample.to_csv(path, index=False)
    return sample, path


def _text(path) -> str:
    t = re.sub(r"<img[^>]*>|<style.*?</style>", "", path.read_text(encoding="utf-8"), flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", t)).split())


def test_note_lines_give_each_kind_of_note_once_with_its_rows():
    notes = [(1, None), (2, "12 of the 40 uniques (30 %) are alone"), (3, ""),
             (4, "7 of the 9 uniques (78 %) are alone"), (5, "IPF stopped after 3 cycles"),
             (6, "12 of the 40 uniques (30 %) are alone, and more")]
    assert note_lines("m", notes) == [
        "† m's note, rows 2, 4 (the figures are row 2's): 12 of the 40 uniques (30 %) are alone",
        "† m's note, row 5: IPF stopped after 3 cycles",
        "† m's note, row 6: 12 of the 40 uniques (30 %) are alone, and more"]
    assert note_lines("m", [(1, None), (2, float("nan"))]) == []


def test_scan_rows_carry_the_notes_assess_gives(covid):
    """Each row's matches_ll_note and tau1_ll_note is the note ``assess`` gives on the same keys
    (None where it gives none); some rows have the lone-uniques note and some have no note."""
    sample, _ = covid
    res = gpurisk.scan(sample, KEYS, fraction=0.1, measures=["matches_ll", "tau1_ll"])
    seen = set()
    for _, row in res.results.iterrows():
        got = gpurisk.assess(sample, list(row["keys"]), fraction=0.1,
                             measures=["matches_ll", "tau1_ll"]).measures
        for m in ("matches_ll", "tau1_ll"):
            want = got[m].extra.get("note") or None
            note = row[f"{m}_note"]            # a missing note: None or NaN, as pandas reads it
            assert (note if isinstance(note, str) else None) == want, (row["combo"], m)
            seen.add("alone in a category" in (want or ""))
    assert seen == {True, False}


def test_summary_and_page_show_the_note_beside_the_figure(covid, tmp_path):
    """The summary marks Ê with † where it carries a note and prints the note under the table; the
    page gives the headline's note on its first screen and the top table's notes under it."""
    sample, path = covid
    out = tmp_path / "s"
    r = run_cli("scan", str(path), "--keys", "col_rec_tat,gender", "--fraction", "0.1",
                "-o", str(out), env={"COLUMNS": "250"})
    assert r.returncode == 0, r.stderr
    rows = gpurisk.read_scan(out).top(10)
    noted = [i for i, (_, x) in enumerate(rows.iterrows(), 1)
             if isinstance(x["matches_ll_note"], str)]
    assert noted and len(noted) < len(rows)
    first = rows.iloc[noted[0] - 1]
    text = " ".join(r.stdout.split())
    assert f"{first['matches_ll']:.4g} †" in text
    assert " ".join(note_lines("matches_ll", [(noted[0], first["matches_ll_note"])])[0]
                    .split()).split(": ", 1)[1] in text
    assert run_cli("report", str(out), "-o", str(tmp_path / "p.html")).returncode == 0
    page = _text(tmp_path / "p.html")
    full = rows[rows["keys"].map(frozenset) == frozenset(["col_rec_tat", "gender"])].iloc[0]
    assert full["matches_ll_note"] and "alone in a category" in full["matches_ll_note"]
    assert f"matches_ll's note: {full['matches_ll_note']}" in page       # the first screen
    for line in note_lines("matches_ll", [(i, rows.iloc[i - 1]["matches_ll_note"])
                                          for i in range(1, len(rows) + 1)]):
        assert line in page


def test_a_scan_written_before_rows_kept_notes_still_reads_and_reports(covid, tmp_path):
    """A scan whose part files have no *_note columns (written before them) reads back, and its page
    has no note and no † line."""
    sample, _ = covid
    out = tmp_path / "old"
    gpurisk.scan(sample, ["col_rec_tat", "gender"], fraction=0.1, output=out)
    for part in out.glob("part-*.parquet"):
        t = pq.read_table(part)
        pq.write_table(t.drop([c for c in t.column_names if c.endswith("_note")]), part)
    res = gpurisk.read_scan(out)
    assert not [c for c in res.columns if c.endswith("_note")] and len(res) == 3
    assert run_cli("report", str(out), "-o", str(tmp_path / "p.html")).returncode == 0
    page = _text(tmp_path / "p.html")
    assert "'s note" not in page and "†" not in page
