"""One input path (issue 15): every command reads, checks and counts through gpurisk.inputs.Inputs,
so the common options, the key forms and the guards are the same everywhere."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk.inputs import Inputs, key_list

from _driver import run_many
from conftest import data_path

#: a command line per command that counts records, with the file as {data}
COMMANDS = {
    "assess": ["assess", "{data}", "--keys", "a,b", "--fraction", "0.1", "--json"],
    "scan": ["scan", "{data}", "--keys", "a,b,c", "--max-size", "2", "--fraction", "0.1", "--json"],
    "compare": ["compare", "{data}", "--keys", "a,b", "--alt", "b=bands:2", "--fraction", "0.1",
                "--json"],
    "record-risk": ["record-risk", "{data}", "--keys", "a,b", "--fraction", "0.1", "--json"],
    "dis": ["dis", "{data}", "--keys", "a,b", "--fraction", "0.1", "--perturb", "pram:vars=b,p=0.8",
            "--max-iter", "3", "--json"],
    "design": ["design", "{data}", "--keys", "a,b", "--fraction", "0.1", "--json"],
    "validate": ["validate", "{data}", "--keys", "a,b", "--fractions", "0.1", "--replicates", "3",
                 "--json"],
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    rng = np.random.default_rng(4)
    n = 3000
    df = pd.DataFrame({"a": rng.integers(0, 60, n), "b": rng.integers(0, 4, n),
                       "c": rng.integers(0, 3, n), "id": np.arange(n)})
    df.to_csv(d / "data.csv", index=False)
    recoded = df.assign(a=(df["a"] // 10) * 10)
    recoded.to_csv(d / "recoded.csv", index=False)
    return {"data": d / "data.csv", "recoded": d / "recoded.csv", "dir": d}


def _fill(args, files, name="data"):
    return [str(files[name]) if a == "{data}" else a for a in args]


def test_every_command_takes_the_common_options(files):
    """--backend, --missing, --recode, --allow-high-cardinality, --sep, --encoding on every command."""
    common = ["--backend", "pandas", "--missing", "category", "--sep", ",", "--encoding", "utf-8",
              "--allow-high-cardinality"]
    runs = run_many([_fill(a, files) + common for a in COMMANDS.values()])
    for name, p in zip(COMMANDS, runs):
        assert p.returncode == 0, (name, p.stderr)
        json.loads(p.stdout)


def test_every_command_refuses_a_bad_backend_and_empty_keys_in_one_line(files):
    lines = []
    for args in COMMANDS.values():
        lines.append(_fill(args, files) + ["--backend", "nosuch"])
        k = args.index("--keys")
        lines.append(_fill(args[:k + 1] + [""] + args[k + 2:], files))
    for args, p in zip(lines, run_many(lines)):
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.startswith("gpurisk: error: ") and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert ("backend 'nosuch'" in p.stderr) or ("keys are empty" in p.stderr), p.stderr


def test_every_command_refuses_an_identifier_as_a_key(files):
    lines = []
    for args in COMMANDS.values():
        k = args.index("--keys")
        lines.append(_fill(args[:k + 1] + ["id,b"] + args[k + 2:], files))
    for args, p in zip(lines, run_many(lines)):
        assert p.returncode == 2, (args[0], p.stderr)
        assert "'id' has 3000 distinct values" in p.stderr and "--allow-high-cardinality" in p.stderr


def test_recode_on_every_command_equals_recoding_the_file(files):
    """--recode a=bands:10 regroups the counts; the same as counting a file recoded beforehand."""
    names = [n for n in COMMANDS if n != "compare"]      # compare's recodes are its --alt
    lines = []
    for n in names:
        lines.append(_fill(COMMANDS[n], files) + ["--recode", "a=bands:10", "--seed", "1"]
                     if n in ("dis", "validate", "scan", "assess") else
                     _fill(COMMANDS[n], files) + ["--recode", "a=bands:10"])
        lines.append(_fill(COMMANDS[n], files, "recoded") + (["--seed", "1"] if n in ("dis", "validate", "scan", "assess") else []))
    runs = run_many(lines)
    for i, n in enumerate(names):
        a, b = runs[2 * i], runs[2 * i + 1]
        assert a.returncode == 0 and b.returncode == 0, (n, a.stderr, b.stderr)
        da, db = json.loads(a.stdout), json.loads(b.stdout)
        if n == "assess":
            assert da["freq_of_freq"] == db["freq_of_freq"]
            assert da["measures"]["theta_hat"] == db["measures"]["theta_hat"]
        elif n == "scan":
            assert [r["n1"] for r in da["top"]] == [r["n1"] for r in db["top"]]
        elif n == "record-risk":
            assert da["methods"] == db["methods"]
        elif n == "dis":
            assert (da["pr_cm_um"], da["theta_hat"]) == (db["pr_cm_um"], db["theta_hat"])
        elif n == "design":
            assert (da["n1"], da["n2"], da["theta_hat"]) == (db["n1"], db["n2"], db["theta_hat"])
        elif n == "validate":
            assert da["summary"] == db["summary"]


def test_keys_as_a_string_or_a_list_everywhere():
    path = data_path("sdcmicro/testdata.csv")
    keys = ["urbrur", "water", "sex"]
    text = "urbrur, water,sex"
    frame = pd.read_csv(path)
    assert key_list(text) == keys
    a, b = gpurisk.assess(frame, text, fraction=0.1), gpurisk.assess(frame, keys, fraction=0.1)
    assert a.to_dict()["measures"] == b.to_dict()["measures"]
    from gpurisk.workflows.design import design_report
    from gpurisk.dis import dis
    from gpurisk.models.record_risk import record_risk
    from gpurisk.scan.compare import compare
    assert design_report(frame, text, fraction=0.1) == design_report(frame, keys, fraction=0.1)
    assert record_risk(frame, text, fraction=0.1) == record_risk(frame, keys, fraction=0.1)
    d1 = dis(frame, text, 0.1, ["pram:vars=sex,p=0.8"], max_iter=2).to_dict()
    d2 = dis(frame, keys, 0.1, ["pram:vars=sex,p=0.8"], max_iter=2).to_dict()
    assert d1 == d2
    v1 = gpurisk.validate(frame, text, fractions=[0.1], replicates=2).summary
    v2 = gpurisk.validate(frame, keys, fractions=[0.1], replicates=2).summary
    pd.testing.assert_frame_equal(v1, v2)
    c1 = compare(frame, text, ["urbrur=bands:2"], fraction=0.1)
    c2 = compare(frame, keys, ["urbrur=bands:2"], fraction=0.1)
    pd.testing.assert_frame_equal(c1.table, c2.table)


@pytest.mark.parametrize("kw, expect", [
    (dict(keys=""), "keys are empty"),
    (dict(keys=["a", "a"]), "'a' more than once"),
    (dict(keys="a", fraction=1.5), "outside (0, 1]"),
    (dict(keys="a", fraction="x"), "is not a number"),
    (dict(keys="a", missing="drop"), "missing='drop'"),
    (dict(keys="a", recode=["b=bands:5"]), "'b': not one of the key variables"),
    (dict(keys="a", backend="gpu"), "backend 'gpu'"),
    (dict(keys="a", population=pd.DataFrame({"a": [1]}), sample_flag="s"), "not both"),
])
def test_inputs_checks_what_it_is_given_before_reading(kw, expect):
    with pytest.raises(gpurisk.BadInput, match=expect.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):
        Inputs("no/such/file.csv", **kw)


def test_output_paths_are_checked_before_the_work(files, tmp_path):
    lines = [
        _fill(COMMANDS["record-risk"], files) + ["--output", str(tmp_path / "r.csv")],
        _fill(COMMANDS["record-risk"], files) + ["--output", str(tmp_path / "nosuch" / "r.parquet")],
        _fill(COMMANDS["dis"], files) + ["--state", str(tmp_path / "nosuch" / "s.json")],
        _fill(COMMANDS["dis"], files) + ["--state", str(tmp_path)],
    ]
    expect = ["written as Parquet", "does not exist", "does not exist", "is a folder"]
    for p, e in zip(run_many(lines), expect):
        assert p.returncode == 2 and e in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_scan_output_is_checked_before_the_records_are_read(files, tmp_path):
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.txt").write_text("not a scan")
    (tmp_path / "afile").write_text("x")
    base = _fill(COMMANDS["scan"], files)[:-1]                   # without --json
    cases = {str(tmp_path / "s.csv"): "Parquet dataset", str(tmp_path / "afile"): "is a file",
             str(tmp_path / "nosuch" / "s.parquet"): "does not exist",
             str(tmp_path / "other"): "not a scan"}
    runs = run_many([base + ["--output", o] for o in cases])
    for (o, e), p in zip(cases.items(), runs):
        assert p.returncode == 2 and e in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_recodes_in_every_form_give_the_same_inputs():
    forms = ["a=bands:10", ["a=bands:10"], {"a": "bands:10"}, ("a=bands:10",)]
    got = {str(Inputs("x.csv", "a,b", recode=f).recode) for f in forms}
    assert len(got) == 1 and "bands" in got.pop()


def test_assessment_repr_and_frame(tmp_path):
    """Issue 20: an Assessment printed dumped every array; it had no DataFrame export."""
    a = gpurisk.assess(data_path("sdcmicro/testdata.csv"), "urbrur,water,sex,age", fraction=0.01)
    text = repr(a)
    assert text.startswith("<Assessment n=4580") and "theta_hat=" in text and "array" not in text
    assert len(text) < 400
    frame = a.to_frame()
    assert list(frame["measure"]) == list(a.measures)
    assert frame.loc[frame["measure"] == "theta_hat", "value"].item() == a.measures["theta_hat"].value
    gpurisk.write_results(a.to_dict(), tmp_path / "r.csv")
    back = pd.read_csv(tmp_path / "r.csv")
    assert list(back["measure"]) == list(frame["measure"])


@pytest.mark.parametrize("args, needle", [
    (["dis", "{data}", "--keys", "a,b", "--fraction", "0.1", "--perturb", "pram:vars=b,p=0.8",
      "--max-iter", "2", "--recode", "a=bands:2"], "--backend pandas"),
    (["record-risk", "{data}", "--keys", "a,b", "--fraction", "0.1", "--recode", "a=bands:2"],
     "--backend pandas"),
    (["validate", "{data}", "--keys", "a,b", "--fractions", "0.1", "--replicates", "2",
      "--design", "systematic"], "--backend pandas"),
])
def test_commands_that_read_records_say_so_on_a_backend_that_keeps_none(files, args, needle):
    """What Dask cannot do says so in one line naming the backend to use, not an internal error:
    dis and record-risk with a recode (the records' cells are found before recoding) and a validate
    design that draws records by their order (dis, record-risk and validate by cells run there:
    test_dis_dask, test_record_risk_dask, test_validate_cells)."""
    pytest.importorskip("distributed")
    (p,) = run_many([_fill(args, files) + ["--backend", "dask", "--workers", "1"]])
    assert p.returncode == 2 and needle in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
