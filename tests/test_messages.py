"""Messages phrased for where they appear (issue 28): a measure's reason names ``population=POP`` in
the Python API and ``--population POP`` on the command line; files store the neutral form
(``{population}``), which ``gpurisk.read_scan`` phrases for the API and ``gpurisk report`` for the
command line. And ``read_scan`` returns the ScanResult, with DataFrame-like access to its rows."""
from __future__ import annotations

import json
import pickle

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import gpurisk
from gpurisk.core.messages import Reason, bad_input, phrase, side, stored

from conftest import data_path, run_cli

KEYS = ["urbrur", "water", "sex", "age"]
POP_PY = "needs population counts F_j: give population=POP or sample_flag=COL"
POP_CLI = "needs population counts F_j: give --population POP or --sample-flag COL"
STORED = "needs population counts F_j: give {population} or {sample_flag}"


@pytest.fixture(scope="module")
def testdata():
    return pd.read_csv(data_path("sdcmicro/testdata.csv"))


def test_phrase_both_ways_and_plain_text_unchanged():
    t = ("{arg:--suppress-limit|suppress_limit} with {weights}; show it with "
         "{option:tau1_hat.show_unreliable=true}; {option:m.matrices=FILE.json}")
    assert phrase(t, "cli") == ("--suppress-limit with --weights COL; show it with --option "
                                "tau1_hat.show_unreliable=true; --option m.matrices=FILE.json")
    assert phrase(t, "python") == ("suppress_limit with weights=COL; show it with options="
                                   "{'tau1_hat': {'show_unreliable': True}}; options={'m': "
                                   "{'matrices': 'FILE.json'}}")
    assert phrase("a {set} of {braces} and {population_x}", "cli") == "a {set} of {braces} and {population_x}"
    assert phrase(None) is None and phrase(3.0) == 3.0
    r = Reason(STORED)
    assert r == POP_PY and r.cli == POP_CLI and stored(r) == STORED
    with side("cli"):
        assert Reason(STORED) == POP_CLI
        assert pickle.loads(pickle.dumps(r)) == POP_CLI      # re-phrased where it is read
    assert pickle.loads(pickle.dumps(r)) == POP_PY
    e = bad_input("{arg:--criterion|criteria} 'x': bad")
    assert str(e) == "criteria 'x': bad" and e.cli_message() == "--criterion 'x': bad"


def test_measure_reasons_in_the_api_name_parameters(testdata):
    a = gpurisk.assess(testdata, KEYS, measures=["pop_uniques", "theta_hat", "l_diversity"])
    m = a.measures
    assert m["pop_uniques"].reason == POP_PY
    assert m["theta_hat"].reason == ("needs the sampling fraction pi: give fraction=PI, "
                                     "population=POP or sample_flag=COL")
    assert m["l_diversity"].reason == ("needs a column: give options={'l_diversity': "
                                       "{'sensitive': COLUMN}}")
    assert "--" not in " ".join(a.to_frame()["reason"].dropna())
    assert "--" not in repr(a) and "--" not in a._repr_html_()


def test_measure_reasons_on_the_command_line_name_flags(testdata):
    path = data_path("sdcmicro/testdata.csv")
    out = run_cli("assess", path, "--keys", ",".join(KEYS), "--measures", "pop_uniques,theta_hat",
                  "--json", check=True).stdout
    doc = json.loads(out)
    assert doc["measures"]["pop_uniques"]["reason"] == POP_CLI
    text = run_cli("assess", path, "--keys", ",".join(KEYS), "--measures", "pop_uniques",
                   check=True).stdout
    assert "--population POP" in " ".join(text.split()) and "population=POP" not in text


def test_files_store_the_neutral_form_each_reader_phrases_it(testdata, tmp_path):
    path = data_path("sdcmicro/testdata.csv")
    run_cli("scan", path, "--keys", ",".join(KEYS[:3]), "--max-size", "2", "--measures",
            "pop_uniques", "-o", tmp_path / "cli.parquet", check=True)
    api = gpurisk.scan(testdata, keys=KEYS[:3], max_size=2, measures=["pop_uniques"],
                       output=tmp_path / "api.parquet")
    assert set(api.results["pop_uniques_reason"]) == {POP_PY}        # what the API returned
    for name in ("cli.parquet", "api.parquet"):
        raw = pq.read_table(tmp_path / name).to_pandas()
        assert set(raw["pop_uniques_reason"]) == {STORED}           # same bytes whoever wrote it
        back = gpurisk.read_scan(tmp_path / name)
        assert set(back["pop_uniques_reason"]) == {POP_PY}
    # a reader inside a command (gpurisk report reads through the same phrasing) names the flags
    with side("cli"):
        assert set(gpurisk.read_scan(tmp_path / "api.parquet")["pop_uniques_reason"]) == {POP_CLI}
    # assess -o: the file keeps the neutral form; to_frame() the API's
    a = gpurisk.assess(testdata, KEYS, measures=["pop_uniques"])
    gpurisk.write_results(a, tmp_path / "a.csv")
    gpurisk.write_results(a, tmp_path / "a.json")
    assert pd.read_csv(tmp_path / "a.csv")["reason"].tolist() == [STORED]
    assert json.loads((tmp_path / "a.json").read_text())["measures"]["pop_uniques"]["reason"] == STORED
    assert a.to_frame()["reason"].tolist() == [POP_PY]


def test_read_scan_returns_the_scan_result(testdata, tmp_path):
    out = tmp_path / "s.parquet"
    res = gpurisk.scan(testdata, keys=KEYS, max_size=2, fraction=0.01, output=out)
    back = gpurisk.read_scan(out)
    assert isinstance(back, gpurisk.ScanResult)
    assert back.settings["keys"] == res.settings["keys"] and back.measures == res.measures
    assert back.path == out
    # the short repr, the notebook view and top() of the scan that wrote it
    assert repr(back).startswith("<ScanResult 10 combination(s) of 4 key(s), n=4580")
    assert "\n" not in repr(back) and "riskiest: " in repr(back)
    if not res.warnings:          # the run's notes (a slow measure...) are not in the files
        assert back._repr_html_() == res._repr_html_()
    pd.testing.assert_frame_equal(back.top(3), res.top(3))
    # DataFrame-like access as callers used the frame, and a DataFrame on request
    assert len(back) == 10 and back["n1"].tolist() == res.results["n1"].tolist()
    assert list(back.columns) == list(res.results.columns)
    assert len(back[back["size"] == 2]) == 6
    frame = back.to_frame()
    assert isinstance(frame, pd.DataFrame) and frame is not back.results
    pd.testing.assert_frame_equal(frame, res.results)
    with pytest.raises(AttributeError):
        back.no_such_thing
    # a lone Parquet file of rows: no manifest, the measures from its columns
    one = tmp_path / "rows.parquet"
    pq.write_table(pq.read_table(next(out.glob("part-*.parquet"))), one)
    lone = gpurisk.read_scan(one)
    assert lone.settings == {} and "theta_hat" in lone.measures and len(lone) == 10


def test_reasons_from_dask_workers_are_phrased_for_the_reader():
    """A reason made on a worker process comes back phrased for the client (its __reduce__)."""
    pytest.importorskip("dask.dataframe")
    df = pd.DataFrame({"a": np.arange(400) % 13, "b": np.arange(400) % 3})
    a = gpurisk.assess(df, ["a", "b"], measures=["pop_uniques"], backend="dask")
    assert a.measures["pop_uniques"].reason == "needs population counts F_j: give population=POP or sample_flag=COL"


def test_setting_errors_name_the_parameter_in_the_api_and_the_flag_on_the_command_line(testdata, tmp_path):
    from gpurisk.report import write_report
    with pytest.raises(gpurisk.BadInput) as err:
        gpurisk.assess(testdata, KEYS, recode=["age=bands:x"])
    assert str(err.value) == "recode age=bands: width: 'x' is not a number"
    assert err.value.cli_message() == "--recode age=bands: width: 'x' is not a number"
    p = run_cli("assess", data_path("sdcmicro/testdata.csv"), "--keys", ",".join(KEYS), "--recode",
                "age=bands:x")
    assert p.returncode == 2 and "--recode age=bands: width: 'x' is not a number" in p.stderr
    scan = gpurisk.scan(testdata, keys=KEYS[:2], max_size=2, fraction=0.01)
    with pytest.raises(gpurisk.BadInput, match=r"^suda '.*nope.json': no such file"):
        write_report(scan, tmp_path / "p.html", suda=tmp_path / "nope.json")
