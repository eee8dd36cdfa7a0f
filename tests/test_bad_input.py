"""The bad-input catalogue of docs/bad-input.md ("Bad input and faults"): every case through the
command line gives exit code 2 and exactly one line ``gpurisk: error: ...`` naming the problem (or a
documented warning), never a traceback or a silently wrong number."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk.errors import BadInput
from conftest import run_cli


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    rng = np.random.default_rng(1)
    n = 300
    df = pd.DataFrame({"age": rng.integers(18, 80, n), "sex": rng.choice(["m", "f"], n),
                       "reg": rng.integers(1, 6, n), "w": rng.uniform(1, 5, n)})
    out = {}

    def put(name, frame=None, text=None, data=None):
        p = d / name
        if frame is not None:
            (frame.to_parquet if name.endswith(".parquet") else
             lambda q: frame.to_csv(q, index=False))(p)
        elif text is not None:
            p.write_text(text)
        else:
            p.write_bytes(data)
        out[name] = p

    put("ok.csv", df)
    put("ok.parquet", df)
    put("empty.csv", text="")
    put("header.csv", text="age,sex\n")
    put("one.csv", df.head(1))
    put("dup.csv", text="age,age,sex\n1,2,m\n3,4,f\n")
    put("allna.csv", df.assign(blank=np.nan))
    put("negw.csv", df.assign(w=np.where(np.arange(n) == 3, -1.0, df["w"])))
    put("zerow.csv", df.assign(w=np.where(np.arange(n) == 5, 0.0, df["w"])))
    put("naw.csv", df.assign(w=np.where(np.arange(n) == 7, np.nan, df["w"])))
    put("textw.csv", df.assign(w="heavy"))
    b = out["ok.parquet"].read_bytes()
    put("trunc.parquet", data=b[: len(b) // 2])
    put("latin.csv", data="age,sex\n1,é\n2,f\n".encode("latin-1"))
    put("ragged_short.csv", text="age,sex,reg\n1,m,1\n2,f\n3,m,2\n")
    put("ragged_long.csv", text="age,sex,reg\n1,m,1\n2,f,3,4\n3,m,2\n")
    put("pop.csv", pd.concat([df] * 5))
    put("pop_missing.csv", pd.concat([df] * 5).query("age != @df.age.iloc[0]"))
    m = 3000
    put("cont.csv", pd.DataFrame({"inc": rng.normal(3e4, 1e4, m).round(2),
                                  "sex": rng.choice(["m", "f"], m)}))
    put("ids.csv", df.assign(pid=np.arange(n)))
    put("floats.csv", df.assign(x=rng.normal(size=n).round(3)))
    put("flag.csv", df.assign(s=np.where(np.arange(n) % 2 == 0, "yes", "no"), none=False))
    put("quoted.csv", text='age,sex,note\n1,m,"a, b"\n2,f,"line\nbreak"\n3,m,x\n')
    import gzip
    gz = gzip.compress(df.to_csv(index=False).encode())
    put("trunc.csv.gz", data=gz[: len(gz) // 2])
    put("notgzip.csv.gz", data=b"age,sex\n1,m\n")
    import pyreadstat
    pyreadstat.write_sav(df, str(d / "full.sav"))
    b = (d / "full.sav").read_bytes()
    put("trunc.sav", data=b[: len(b) // 2])
    df.to_stata(d / "full.dta", write_index=False)
    b = (d / "full.dta").read_bytes()
    put("trunc.dta", data=b[: len(b) // 2])
    return out


def _one_error(p, *needles):
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("gpurisk: error: "), p.stderr
    assert "Traceback" not in p.stderr
    for s in needles:
        assert s in lines[0], (s, lines[0])
    return lines[0]


CASES = [
    # (id, args, words the one line must contain)
    ("unknown column", ["assess", "{ok.csv}", "--keys", "age,nope"], ["'nope'", "its columns"]),
    ("unknown column parquet", ["assess", "{ok.parquet}", "--keys", "age,nope"], ["'nope'"]),
    ("key named twice", ["assess", "{ok.csv}", "--keys", "age,age"], ["'age'", "more than once"]),
    ("duplicated column in file", ["assess", "{dup.csv}", "--keys", "age,sex"], ["'age'", "more than once"]),
    ("missing file", ["assess", "/nonexistent/x.csv", "--keys", "age"], ["does not exist"]),
    ("empty file", ["assess", "{empty.csv}", "--keys", "age"], ["empty"]),
    ("header only", ["assess", "{header.csv}", "--keys", "age"], ["no records"]),
    ("all-missing key", ["assess", "{allna.csv}", "--keys", "blank,sex"], ["'blank'", "missing in all"]),
    ("continuous key", ["assess", "{cont.csv}", "--keys", "inc,sex"],
     ["'inc'", "distinct values", "--allow-high-cardinality"]),
    ("continuous key in scan", ["scan", "{cont.csv}", "--keys", "inc,sex"], ["'inc'"]),
    ("pi above 1", ["assess", "{ok.csv}", "--keys", "age", "--fraction", "1.5"], ["outside (0, 1]"]),
    ("pi zero", ["assess", "{ok.csv}", "--keys", "age", "--fraction", "0"], ["outside (0, 1]"]),
    ("pi negative", ["assess", "{ok.csv}", "--keys", "age", "--fraction", "-0.1"], ["outside (0, 1]"]),
    ("pi nan", ["assess", "{ok.csv}", "--keys", "age", "--fraction", "nan"], ["outside (0, 1]"]),
    ("sample cells missing from population",
     ["assess", "{ok.csv}", "--keys", "age,sex", "--population", "{pop_missing.csv}"], ["f_j > F_j"]),
    ("negative weight", ["assess", "{negw.csv}", "--keys", "age", "--weights", "w"], ["'w'", "> 0"]),
    ("zero weight", ["assess", "{zerow.csv}", "--keys", "age", "--weights", "w"], ["'w'", "> 0"]),
    ("missing weight", ["assess", "{naw.csv}", "--keys", "age", "--weights", "w"], ["'w'", "missing"]),
    ("text weight", ["assess", "{textw.csv}", "--keys", "age", "--weights", "w"], ["'w'", "not numeric"]),
    ("truncated parquet", ["assess", "{trunc.parquet}", "--keys", "age"], ["not a readable Parquet"]),
    ("bad encoding", ["assess", "{latin.csv}", "--keys", "age,sex"], ["not utf-8", "--encoding"]),
    ("short row", ["assess", "{ragged_short.csv}", "--keys", "age,sex"], ["malformed CSV", "has 2"]),
    ("long row", ["assess", "{ragged_long.csv}", "--keys", "age,sex"], ["malformed CSV", "has 4"]),
    ("sample flag not boolean", ["assess", "{flag.csv}", "--keys", "age", "--sample-flag", "s"], ["'s'", "boolean"]),
    ("sample flag marks no record", ["assess", "{flag.csv}", "--keys", "age", "--sample-flag", "none"],
     ["marks no record"]),
    ("missing=error", ["assess", "{allna.csv}", "--keys", "age,blank", "--missing", "error"], ["'blank'"]),
    ("unknown measure", ["assess", "{ok.csv}", "--keys", "age", "--measures", "nope"], ["'nope'"]),
    ("alpha", ["assess", "{ok.csv}", "--keys", "age", "--alpha", "0.7"], ["alpha"]),
    ("measure timeout <= 0", ["assess", "{ok.csv}", "--keys", "age", "--measure-timeout", "0"], ["time limit"]),
    ("worker memory not a size", ["assess", "{ok.csv}", "--keys", "age", "--backend", "dask",
                                  "--memory-limit", "lots"], ["'lots'", "not a size"]),
    ("worker memory too small", ["assess", "{ok.csv}", "--keys", "age", "--backend", "dask",
                                 "--memory-limit", "10MB"], ["'10MB'", "below 64 MiB"]),
    ("bad output name", ["assess", "{ok.csv}", "--keys", "age", "--output", "x.docx"], []),
    ("validate unknown column", ["validate", "{ok.csv}", "--keys", "age,nope"], ["'nope'"]),
    ("validate pi", ["validate", "{ok.csv}", "--keys", "age", "--fractions", "1.2"], ["outside"]),
    ("scan ragged", ["scan", "{ragged_long.csv}", "--keys", "age,sex"], ["malformed CSV"]),
    ("log-linear table too large", ["record-risk", "{ok.csv}", "--keys", "age,sex,reg",
                                    "--population-size", "10000", "--max-cells", "10"],
     ["K = 61 (age) × 2 (sex) × 5 (reg) = 610 cells", "max_cells"]),
    ("record-risk no N", ["record-risk", "{ok.csv}", "--keys", "age,sex"], ["population size"]),
    ("dis truncated", ["dis", "{trunc.parquet}", "--keys", "age", "--fraction", "0.1",
                       "--perturb", "pram:vars=age,p=0.9"], ["not a readable Parquet"]),
    # issue 20: what used to give no clear line
    ("empty keys", ["assess", "{ok.csv}", "--keys", ""], ["keys are empty"]),
    ("fraction not a number", ["assess", "{ok.csv}", "--keys", "age", "--fraction", "abc"],
     ["'abc' is not a valid float", "gpurisk assess --help"]),
    ("unknown command", ["asses", "{ok.csv}"], ["No such command 'asses'"]),
    ("unknown encoding", ["assess", "{ok.csv}", "--keys", "age", "--encoding", "nosuch"],
     ["unknown text encoding 'nosuch'"]),
    ("identifier key, small file", ["assess", "{ids.csv}", "--keys", "pid,sex"],
     ["'pid' has 300 distinct values in 300 records", "identifier"]),
    ("continuous key, small file", ["assess", "{floats.csv}", "--keys", "x,sex"],
     ["'x'", "not whole numbers"]),
    ("identifier key in record-risk", ["record-risk", "{ids.csv}", "--keys", "pid,sex",
                                       "--population-size", "1000"], ["'pid'"]),
    ("scan output named .csv", ["scan", "{ok.csv}", "--keys", "age,sex", "-o", "s.csv"],
     ["Parquet dataset"]),
    ("scan output folder missing", ["scan", "{ok.csv}", "--keys", "age,sex", "-o",
                                    "/nonexistent/dir/s.parquet"], ["does not exist"]),
    ("record-risk output .csv", ["record-risk", "{ok.csv}", "--keys", "age,sex", "--population-size",
                                 "10000", "--output", "r.csv"], ["written as Parquet"]),
    ("report output folder missing", ["report", "{ok.csv}", "-o", "/nonexistent/r.html"],
     ["does not exist"]),
    ("report output not html", ["report", "{ok.csv}", "-o", "r.txt"], [".html"]),
    ("validate output folder missing", ["validate", "{ok.csv}", "--keys", "age", "--output",
                                        "/nonexistent/v.csv"], ["does not exist"]),
    ("validate plot name", ["validate", "{ok.csv}", "--keys", "age", "--plot", "p.txt"], [".png"]),
    ("compare output folder missing", ["compare", "{ok.csv}", "--keys", "age,sex", "--alt",
                                       "age=bands:10", "-o", "/nonexistent/c.csv"], ["does not exist"]),
    ("dis state folder missing", ["dis", "{ok.csv}", "--keys", "age", "--fraction", "0.1", "--perturb",
                                  "pram:vars=age,p=0.9", "--state", "/nonexistent/s.json"],
     ["does not exist"]),
    ("truncated csv.gz", ["assess", "{trunc.csv.gz}", "--keys", "age,sex"],
     ["truncated or corrupt compressed file", "ends before the end"]),
    ("csv.gz that is not gzip", ["assess", "{notgzip.csv.gz}", "--keys", "age"], ["not gzip data"]),
    ("truncated sav", ["assess", "{trunc.sav}", "--keys", "age,sex"], ["not a readable SPSS file"]),
    ("truncated dta", ["assess", "{trunc.dta}", "--keys", "age,sex"], ["not a readable Stata file"]),
    ("record-risk --id unknown column", ["record-risk", "{ok.csv}", "--keys", "age,sex",
                                         "--population-size", "10000", "--id", "nope", "-o", "r.parquet"],
     ["'nope' not in"]),
    ("record-risk --id without -o", ["record-risk", "{ok.csv}", "--keys", "age,sex",
                                     "--population-size", "10000", "--id", "reg"], ["give -o"]),
    ("unknown option of a measure", ["assess", "{ok.csv}", "--keys", "age", "--option",
                                     "theta_hat_dis.KK=5"], ["KK"]),
    ("option of an unknown measure", ["assess", "{ok.csv}", "--keys", "age", "--option", "nosuch.K=3"],
     ["'nosuch'"]),
    ("option of the wrong type", ["assess", "{ok.csv}", "--keys", "age", "--option",
                                  "theta_hat_dis.K=abc"], ["theta_hat_dis.K", "int"]),
]


def _args(files, args):
    return [str(files[a[1:-1]]) if a.startswith("{") else a for a in args]


@pytest.fixture(scope="module")
def driven(files):
    """Every case through gpurisk.cli.main, in this process (see tests/_driver.py)."""
    from _driver import run_many
    return dict(zip([c[0] for c in CASES], run_many([_args(files, c[1]) for c in CASES])))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_cli_bad_input_one_line_exit_2(driven, case):
    _one_error(driven[case[0]], *case[2])


@pytest.mark.parametrize("name", ["continuous key", "short row", "all-missing key", "truncated parquet",
                                  "truncated csv.gz", "truncated sav"])
def test_cli_bad_input_in_its_own_process(files, name):
    case = next(c for c in CASES if c[0] == name)
    _one_error(run_cli(*_args(files, case[1]), subprocess=True), *case[2])   # the process's exit code


def test_catalogue_count():
    """The catalogue of docs/bad-input.md and this test list the same number of CLI cases."""
    assert len(CASES) >= 30


OK_RUNS = {
    "one row": ["assess", "{one.csv}", "--keys", "age,sex", "--json"],
    "quoted": ["assess", "{quoted.csv}", "--keys", "age,sex,note", "--json", "--allow-high-cardinality"],
    "allowed": ["assess", "{cont.csv}", "--keys", "inc,sex", "--json", "--allow-high-cardinality"],
    "recoded": ["assess", "{cont.csv}", "--keys", "inc,sex", "--json", "--recode", "inc=bands:5000"],
    "pi json": ["assess", "{ok.csv}", "--keys", "age,sex", "--population", "{pop.csv}",
                "--fraction", "0.9", "--json"],
    "pi text": ["assess", "{ok.csv}", "--keys", "age,sex", "--population", "{pop.csv}",
                "--fraction", "0.9"],
}


@pytest.fixture(scope="module")
def ok(files):
    """The cases that must work, through gpurisk.cli.main, in this process."""
    from _driver import run_many
    runs = run_many([_args(files, a) for a in OK_RUNS.values()])
    for name, p in zip(OK_RUNS, runs):
        assert p.returncode == 0, (name, p.stderr)
    return {name: p.stdout for name, p in zip(OK_RUNS, runs)}


def test_one_row_works(ok):
    doc = json.loads(ok["one row"])
    assert doc["n"] == 1 and doc["cells"] == 1 and doc["freq_of_freq"] == {"1": 1}


def test_quoted_separators_and_newlines_are_not_ragged(ok):
    assert json.loads(ok["quoted"])["n"] == 3


def test_high_cardinality_allowed_or_recoded(ok):
    assert json.loads(ok["allowed"])["categories"]["inc"] > 2000
    assert json.loads(ok["recoded"])["categories"]["inc"] < 50


def test_cardinality_rule_boundaries():
    """More than 1000 categories AND more than n/2; below 1000, the share and the type (issue 20:
    an id of 800 values in 800 records used to pass)."""
    rng = np.random.default_rng(3)
    few = pd.DataFrame({"k": np.arange(1000) % 800})               # 800 values, 80 % of records
    gpurisk.assess(few, ["k"], measures=["sample_uniques"])
    with pytest.raises(BadInput, match="800 distinct values in 800 records.*identifier"):
        gpurisk.assess(pd.DataFrame({"k": np.arange(800)}), ["k"], measures=["sample_uniques"])
    small = pd.DataFrame({"k": np.arange(49)})                     # fewer than 50 values: passes
    gpurisk.assess(small, ["k"], measures=["sample_uniques"])
    halves = pd.DataFrame({"k": (np.arange(100) // 2) + 0.5})      # 50 non-integral in 100: passes
    gpurisk.assess(halves, ["k"], measures=["sample_uniques"])
    cont = pd.DataFrame({"k": np.arange(100) / 7})                 # 100 non-integral in 100
    with pytest.raises(BadInput, match="not whole numbers"):
        gpurisk.assess(cont, ["k"], measures=["sample_uniques"])
    many = pd.DataFrame({"k": rng.integers(0, 1500, 10_000)})      # 1500 > 1000 but < n/2
    gpurisk.assess(many, ["k"], measures=["sample_uniques"])
    ids = pd.DataFrame({"k": np.arange(1500)})                     # 1500 > 1000 and > n/2
    with pytest.raises(BadInput, match="1500 distinct values in 1500 records"):
        gpurisk.assess(ids, ["k"], measures=["sample_uniques"])
    gpurisk.assess(ids, ["k"], measures=["sample_uniques"], allow_high_cardinality=True)


def test_inconsistent_fraction_is_a_documented_warning(ok):
    doc = json.loads(ok["pi json"])
    assert doc["fraction"] == 0.9
    assert any("differs from n/N=0.2" in w for w in doc["warnings"])
    assert "warning:" in ok["pi text"] and "differs from n/N" in ok["pi text"]


def test_mixed_types_in_a_key():
    """Python objects of several types in one key column: refused (1 and '1' would be two cells)."""
    df = pd.DataFrame({"k": pd.array([1, "1", 2.5, "x"] * 10, dtype=object), "s": ["a", "b"] * 20})
    with pytest.raises(BadInput, match="'k' mixes value types"):
        gpurisk.assess(df, ["k", "s"])


def test_mixed_types_in_a_csv_key_read_as_text(tmp_path):
    """In a CSV a column with numbers and words is text: each distinct text is one category."""
    p = tmp_path / "m.csv"
    p.write_text("k,s\n" + "1,a\nx,b\n01,a\n1,a\n")
    doc = gpurisk.assess(str(p), ["k"]).to_dict()
    assert doc["n"] == 4 and doc["categories"]["k"] == 3   # "1", "x", "01"


def test_key_space_overflowing_int64_counts_right():
    """Six keys of 5000 categories: 5000**6 > 2**63, so the engine falls back to surrogate ids; the
    counts must equal pandas' groupby (an independent count)."""
    rng = np.random.default_rng(7)
    n = 12_000
    df = pd.DataFrame({f"k{i}": rng.integers(0, 5000, n) for i in range(6)})
    df.iloc[n // 2:, :] = df.iloc[: n - n // 2, :].to_numpy()       # duplicates: cells of size 2
    keys = list(df.columns)
    cards = [df[k].nunique() for k in keys]
    assert math.prod(cards) > 2**63
    a = gpurisk.assess(df, keys, fraction=0.1, measures=["sample_uniques"])
    assert not a.table.radix
    sizes = df.groupby(keys).size()
    ref = sizes.value_counts().to_dict()
    assert a.table.freq_of_freq() == {int(k): int(v) for k, v in ref.items()}
    assert a.measures["sample_uniques"].value == int((sizes == 1).sum())
    # a population over the same keys: f <= F is checked cell by cell with surrogate ids
    pop = pd.concat([df, df.iloc[:100]])
    b = gpurisk.assess(df, keys, population=pop, measures=["sample_uniques"])
    assert int(np.asarray(b.table.F).sum()) == len(pop)
    assert b.table.freq_of_freq() == a.table.freq_of_freq()


def _fifo_writer(path, data: bytes):
    import threading

    def write():
        with open(path, "wb") as fh:     # blocks until gpurisk opens the pipe
            fh.write(data)
    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="no named pipes here")
def test_named_pipe_is_read_whole(files, tmp_path):
    """A FIFO (``mkfifo``, ``<(zcat data.csv.gz)``) used to be reported as an empty file; it is read
    once into a private temporary file and assessed like the file it carries (issue 20)."""
    import os
    fifo = tmp_path / "data.csv"
    os.mkfifo(fifo)
    writer = _fifo_writer(fifo, files["ok.csv"].read_bytes())
    p = run_cli("assess", str(fifo), "--keys", "age,sex", "--json", timeout=120)
    writer.join(5)
    assert p.returncode == 0, p.stderr
    direct = json.loads(run_cli("assess", str(files["ok.csv"]), "--keys", "age,sex", "--json").stdout)
    assert json.loads(p.stdout)["freq_of_freq"] == direct["freq_of_freq"]
    assert json.loads(p.stdout)["n"] == 300


def test_a_socket_is_refused_in_one_line(tmp_path):
    import socket
    path = tmp_path / "s.csv"
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(path))
        _one_error(run_cli("assess", str(path), "--keys", "age"), "not a regular file")
    finally:
        s.close()


@pytest.mark.parametrize("args", [["--json"], []], ids=["json", "table"])
def test_output_into_a_closed_pipe_exits_0_quietly(files, args):
    """``gpurisk assess ... | head -1``: the reader goes away; gpurisk exits 0 without a word (click
    turned the BrokenPipeError into exit code 1)."""
    import os
    import subprocess
    import sys
    from conftest import ROOT
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = (f"{sys.executable} -m gpurisk assess {files['ok.csv']} --keys age,sex "
           + " ".join(args) + " | head -c 1 >/dev/null; echo rc=${PIPESTATUS[0]}")
    for _ in range(3):      # the reader closes at different moments
        p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env, timeout=120)
        assert p.stdout.strip() == "rc=0", (p.stdout, p.stderr)
        assert p.stderr == "", p.stderr
