"""The bad-input catalogue of docs/bad-input.md ("Bad input and faults"): every case through the
command line gives exit code 2 and exactly one line ``gpurisk: error: ...`` naming the problem (or a
documented warning), never a traceback or a silently wrong number."""
from __future__ import annotations

import json
import math
import os

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
    # issue 30
    put("zero.dta", data=b"")
    pyreadstat.write_xport(df, str(d / "full.xpt"))
    b = (d / "full.xpt").read_bytes()
    put("trunc.xpt", data=b[: len(b) // 2 - 3])          # cut inside a record
    import pyarrow as pa
    import pyarrow.parquet as pq
    for name, arr in [("list", pa.array([[1, 2]] * n)), ("struct", pa.array([{"a": 1}] * n)),
                      ("map", pa.array([[("k", 1)]] * n, type=pa.map_(pa.string(), pa.int64())))]:
        t = pa.table({"age": pa.array(df["age"]), "sex": pa.array(df["sex"]), "nest": arr})
        pq.write_table(t, d / f"nested_{name}.parquet")
        out[f"nested_{name}.parquet"] = d / f"nested_{name}.parquet"
    text = df.to_csv(index=False).encode()
    import bz2
    import lzma
    import zipfile
    put("ok.csv.bz2", data=bz2.compress(text))
    put("ok.csv.xz", data=lzma.compress(text))
    with zipfile.ZipFile(d / "ok.csv.zip", "w") as zf:
        zf.writestr("ok.csv", text)
    out["ok.csv.zip"] = d / "ok.csv.zip"
    put("OK.CSV.GZ", data=gzip.compress(text))
    put("age1.csv", text="age,age.1,sex\n" + "".join(f"{a},{a % 7},{s}\n" for a, s in
                                                     zip(df["age"], df["sex"])))
    put("tab.tsv", text=df.to_csv(index=False, sep="\t"))
    put("victim.csv", df)                 # inputs an output must never replace
    put("victim.parquet", df)
    os.symlink(d / "victim.csv", d / "link.csv")
    out["link.csv"] = d / "link.csv"
    os.symlink("/dev/null", d / "null.json")
    out["null.json"] = d / "null.json"
    # a protect plan cut short: every field apply_plan reads but "keys"
    json.dump({"gpurisk_protect_plan": 1, "format": {"format": "csv", "sep": ","},
               "encoding": "utf-8", "hierarchies": {"age": "bands:10"}, "missing": "category",
               "node": {"age": 1}, "scenarios": [["age"]]}, (d / "nokeys.json").open("w"))
    out["nokeys.json"] = d / "nokeys.json"
    (d / "scan").mkdir()
    (d / "scan" / "_scan.json").write_text("{}")
    out["scan"] = d / "scan"
    out["scan/x.json"] = d / "scan" / "x.json"
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
                                 "--memory-limit", "10MB"], ["'10MB'", "below 256 MiB"]),
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
    # issue 30: inputs read as written
    ("nested parquet list", ["assess", "{nested_list.parquet}", "--keys", "age,nest"], ["'nest'", "nested"]),
    ("nested parquet struct", ["scan", "{nested_struct.parquet}", "--keys", "age,nest"], ["'nest'", "nested"]),
    ("nested parquet map", ["record-risk", "{nested_map.parquet}", "--keys", "nest,sex",
                            "--population-size", "1000"], ["'nest'", "nested"]),
    ("0-byte dta", ["assess", "{zero.dta}", "--keys", "age"], ["empty"]),
    ("truncated xpt", ["assess", "{trunc.xpt}", "--keys", "age,sex"], ["not a readable SAS xport", "truncated"]),
    ("sep newline", ["assess", "{ok.csv}", "--keys", "age", "--sep", "\n"], ["cannot separate"]),
    ("sep two characters", ["assess", "{ok.csv}", "--keys", "age", "--sep", "::"], ["one character"]),
    ("encoding rot13", ["assess", "{ok.csv}", "--keys", "age", "--encoding", "rot13"], ["not a text encoding"]),
    ("utf-16 on utf-8", ["assess", "{ok.csv}", "--keys", "age", "--encoding", "utf-16"], ["not utf-16 text"]),
    ("recode breaks nan", ["assess", "{ok.csv}", "--keys", "age", "--recode", "age=breaks:nan"], ["finite"]),
    ("recode bands origin inf", ["assess", "{ok.csv}", "--keys", "age", "--recode", "age=bands:5:inf"], ["finite"]),
    ("recode map folder", ["assess", "{ok.csv}", "--keys", "age", "--recode", "age=map:{scan}"], ["not a file"]),
    # issue 30: outputs that cannot destroy
    ("assess -o input", ["assess", "{victim.csv}", "--keys", "age", "-o", "{victim.csv}"], ["an input of this run"]),
    ("assess -o link to input", ["assess", "{victim.csv}", "--keys", "age", "-o", "{link.csv}"], ["an input of this run"]),
    ("compare -o input", ["compare", "{victim.csv}", "--keys", "age,sex", "--alt", "age=bands:10",
                          "-o", "{victim.csv}"], ["an input of this run"]),
    ("validate -o input", ["validate", "{victim.csv}", "--keys", "age", "--fractions", "0.1",
                           "--replicates", "2", "-o", "{victim.csv}"], ["an input of this run"]),
    ("protect -o input", ["protect", "{victim.csv}", "--keys", "age,sex", "--hierarchy", "age=bands:10",
                          "--criterion", "theta_hat.upper<=0.5", "-o", "{victim.csv}"], ["an input of this run"]),
    ("record-risk -o input", ["record-risk", "{victim.parquet}", "--keys", "age,sex", "--population-size",
                              "10000", "-o", "{victim.parquet}"], ["an input of this run"]),
    ("suda -o input", ["suda", "{victim.parquet}", "--keys", "age,sex,reg", "-o", "{victim.parquet}"],
     ["an input of this run"]),
    ("-o a device", ["assess", "{ok.csv}", "--keys", "age", "-o", "{null.json}"], ["not a regular file"]),
    ("-o inside a scan folder", ["assess", "{ok.csv}", "--keys", "age", "-o", "{scan/x.json}"],
     ["inside a scan's result folder"]),
    # issue 30: internal errors in every command, options accepted out of range
    ("nested parquet in compare", ["compare", "{nested_list.parquet}", "--keys", "age,nest", "--alt",
                                   "age=bands:10"], ["'nest'", "nested"]),
    ("nested parquet in validate", ["validate", "{nested_struct.parquet}", "--keys", "age,nest",
                                    "--fractions", "0.1", "--replicates", "2"], ["'nest'", "nested"]),
    ("nested parquet in protect", ["protect", "{nested_map.parquet}", "--keys", "age,nest",
                                   "--hierarchy", "age=bands:10", "--criterion", "theta_hat.upper<=0.5",
                                   "-o", "p.parquet"], ["'nest'", "nested"]),
    ("nested parquet in suda", ["suda", "{nested_list.parquet}", "--keys", "age,nest"], ["'nest'", "nested"]),
    ("nested parquet in dis", ["dis", "{nested_struct.parquet}", "--keys", "age,nest", "--fraction",
                               "0.1", "--perturb", "pram:vars=age,p=0.9"], ["'nest'", "nested"]),
    ("nested parquet in design", ["design", "{nested_map.parquet}", "--keys", "age,nest", "--fraction",
                                  "0.1"], ["'nest'", "nested"]),
    ("protect --from-plan without keys", ["protect", "{ok.csv}", "--from-plan", "{nokeys.json}", "-o",
                                          "p.csv"], ["the plan has no 'keys'", "protect --plan"]),
    ("validate --seed -5", ["validate", "{ok.csv}", "--keys", "age", "--fractions", "0.1",
                            "--replicates", "2", "--seed", "-5"], ["--seed -5", ">= 0"]),
    ("record-risk --threshold 2", ["record-risk", "{ok.csv}", "--keys", "age,sex", "--population-size",
                                   "10000", "--threshold", "2"], ["--threshold 2", "outside [0, 1]"]),
    ("record-risk --threshold -1", ["record-risk", "{ok.csv}", "--keys", "age,sex", "--population-size",
                                    "10000", "--threshold", "0.1,-1"], ["--threshold -1", "outside [0, 1]"]),
    ("record-risk --max-cells nan", ["record-risk", "{ok.csv}", "--keys", "age,sex",
                                     "--population-size", "10000", "--max-cells", "nan"],
     ["--max-cells nan", "finite"]),
    ("protect --checkpoint-every nan", ["protect", "{ok.csv}", "--keys", "age,sex", "--hierarchy",
                                        "age=bands:10", "--criterion", "theta_hat.upper<=0.5",
                                        "--fraction", "0.1", "--checkpoint", "ck.json",
                                        "--checkpoint-every", "nan", "-o", "p.csv"],
     ["--checkpoint-every nan", "finite"]),
    ("scan of 40 keys up to size 40", ["scan", "{ok.csv}", "--keys", ",".join(f"v{i}" for i in range(40)),
                                       "--max-size", "40"],
     ["1,099,511,627,775 combinations", "--max-combinations"]),
    ("validate --resume into a scan folder", ["validate", "{ok.csv}", "--keys", "age", "--fractions", "0.1",
                                              "--replicates", "2", "--resume", "{scan}"], ["scan's result folder"]),
]


def _args(files, args):
    import re
    return [re.sub(r"\{([^}]+)\}", lambda m: str(files[m.group(1)]), a) for a in args]


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


# --- issue 30 ------------------------------------------------------------------------------------

def test_refused_outputs_left_their_inputs_alone(driven, files):
    """The -o cases above were refused before the work: the inputs are the bytes written."""
    df = pd.read_csv(files["ok.csv"])
    assert pd.read_csv(files["victim.csv"]).equals(df)
    assert pd.read_parquet(files["victim.parquet"]).equals(pd.read_parquet(files["ok.parquet"]))
    assert os.path.islink(files["null.json"]) and os.readlink(files["null.json"]) == "/dev/null"
    assert not files["scan/x.json"].exists()


def test_sample_flag_message_quotes_no_value(driven):
    line = _one_error(driven["sample flag not boolean"], "'s'", "boolean")
    assert "yes" not in line and "no'" not in line and "300 record(s) hold 2 other value(s)" in line


COMPRESSED = ["ok.csv.bz2", "ok.csv.xz", "ok.csv.zip", "OK.CSV.GZ"]


@pytest.fixture(scope="module")
def read_as_written(files):
    """The compressions pandas reads, any case; age and age.1; a tab given as \\t."""
    from _driver import run_many
    runs = [["assess", str(files[n]), "--keys", "age,sex", "--json"] for n in COMPRESSED]
    runs.append(["assess", str(files["age1.csv"]), "--keys", "age,age.1,sex", "--json"])
    runs.append(["assess", str(files["tab.tsv"]), "--keys", "age,sex", "--json", "--sep", "\\t"])
    runs.append(["assess", str(files["ok.csv"]), "--keys", "age,sex", "--json"])
    return run_many(runs)


def test_every_compression_any_case(read_as_written):
    ref = json.loads(read_as_written[-1].stdout)
    for name, p in zip(COMPRESSED + ["tab"], read_as_written[:4] + read_as_written[5:6]):
        assert p.returncode == 0, (name, p.stderr)
        doc = json.loads(p.stdout)
        assert doc["n"] == 300 and doc["freq_of_freq"] == ref["freq_of_freq"], name


def test_age_dot_1_is_a_column(read_as_written, files):
    p = read_as_written[4]
    assert p.returncode == 0, p.stderr
    df = pd.read_csv(files["age1.csv"])
    sizes = df.groupby(["age", "age.1", "sex"]).size()       # independent count
    assert json.loads(p.stdout)["freq_of_freq"] == {str(k): int(v) for k, v in
                                                     sorted(sizes.value_counts().items())}


def test_full_disk_is_one_line(tmp_path, monkeypatch):
    """A disk that fills while writing: one line, nothing under the final name, no temporary left."""
    import errno
    from gpurisk.io import write_results
    a = gpurisk.assess(pd.DataFrame({"k": [1, 1, 2]}), ["k"], measures=["sample_uniques"])
    real_dump = json.dump

    def full(*args, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(json, "dump", full)
    with pytest.raises(BadInput, match="No space left on device"):
        write_results(a, tmp_path / "r.json")
    monkeypatch.setattr(json, "dump", real_dump)
    assert list(tmp_path.iterdir()) == []


def test_read_only_folder_is_one_line(files, tmp_path, monkeypatch):
    """A read-only filesystem (EROFS) when writing, and at the lock of scan -o: one line."""
    import errno
    from gpurisk.io import write_text_atomic
    from gpurisk.io.lock import exclusive
    real_replace = os.replace

    def ro(*a, **k):
        raise OSError(errno.EROFS, "Read-only file system")
    monkeypatch.setattr(os, "replace", ro)
    with pytest.raises(BadInput, match="Read-only file system"):
        write_text_atomic(tmp_path / "x.txt", "x")
    monkeypatch.setattr(os, "replace", real_replace)
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda *a, **k: ro())
    with pytest.raises(BadInput, match="cannot write the scan output .*Read-only"):
        with exclusive(tmp_path / "s.parquet", "the scan output"):
            pass
    monkeypatch.setattr(os, "open", real_open)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_by_permissions(files, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        _one_error(run_cli("assess", files["ok.csv"], "--keys", "age", "-o", ro / "r.json"),
                   "not writable")
    finally:
        ro.chmod(0o755)


def test_stale_temporary_files_of_dead_runs_are_removed(tmp_path):
    """A killed run's .NAME.PID.tmp (its PID dead) goes when the output is next written; a live
    run's stays."""
    import subprocess
    import sys
    from gpurisk.io import write_text_atomic
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale = tmp_path / f".r.json.{dead}.tmp"
    stale.write_text("half")
    live = tmp_path / f".r.json.{os.getppid()}.tmp"
    live.write_text("someone else's")
    write_text_atomic(tmp_path / "r.json", "{}")
    assert not stale.exists() and live.exists()
    assert (tmp_path / "r.json").read_text() == "{}"


def test_lock_is_taken_on_the_resolved_path(tmp_path):
    """link.parquet -> s.parquet: a second writer through the link meets the first one's lock."""
    from gpurisk.io.lock import exclusive
    (tmp_path / "s.parquet").mkdir()
    os.symlink(tmp_path / "s.parquet", tmp_path / "link.parquet")
    with exclusive(tmp_path / "s.parquet", "the scan output"):
        with pytest.raises(BadInput, match="another gpurisk run is writing"):
            with exclusive(tmp_path / "link.parquet", "the scan output"):
                pass


def test_api_output_equal_to_input_refused(files, tmp_path):
    """In the Python API too: the run's inputs are known while it runs (Inputs), and atomic writes
    refuse to replace them."""
    import shutil
    from gpurisk.inputs import Inputs
    from gpurisk.io import check_output_file, write_text_atomic
    p = tmp_path / "in.csv"
    shutil.copy(files["ok.csv"], p)
    inp = Inputs(str(p), ["age"])
    with pytest.raises(BadInput, match="an input of this run"):
        check_output_file(p, (".csv",))
    with pytest.raises(BadInput, match="an input of this run"):
        write_text_atomic(p, "gone")
    del inp
    write_text_atomic(tmp_path / "other.csv", "fine")


# the same verdict on pandas and Dask: the cases of this issue that read data, on --backend dask
DASK_CASES = ["nested parquet list", "nested parquet struct", "sep newline", "sep two characters",
              "encoding rot13", "utf-16 on utf-8", "recode breaks nan", "assess -o input",
              "assess -o link to input", "-o a device", "truncated xpt", "0-byte dta",
              "all-missing key", "short row", "duplicated column in file", "unknown column",
              "recode map folder", "recode bands origin inf", "-o inside a scan folder",
              "truncated csv.gz", "csv.gz that is not gzip", "bad encoding", "long row",
              "nested parquet map", "truncated dta", "sample flag not boolean",
              "nested parquet in compare", "nested parquet in validate", "nested parquet in suda",
              "nested parquet in dis", "nested parquet in design", "validate --seed -5",
              "record-risk --threshold 2", "record-risk --max-cells nan",
              "scan of 40 keys up to size 40", "unknown column parquet", "key named twice",
              "header only", "continuous key", "negative weight", "missing weight", "text weight",
              "truncated parquet", "truncated sav", "empty file", "pi above 1",
              "sample cells missing from population", "record-risk -o input", "suda -o input",
              "compare -o input", "validate -o input", "dis truncated"]


def _without_port_warning(p):
    """distributed's "Port 8787 is already in use" warning (another cluster on this machine: the
    test machine runs several) is the dashboard's, not this case's: left out of the comparison."""
    lines = p.stderr.splitlines()
    if lines and "Port 8787 is already in use" in lines[0]:
        p.stderr = "\n".join(ln for ln in lines[4:])
    return p


@pytest.mark.slow
def test_same_verdict_on_dask(files, driven, dask_scheduler):
    """Each case that reads records, on ``--backend dask`` (the session's cluster): the same one
    line as on pandas, each within 30 s (no Dask case runs on without a result or an error)."""
    import time
    from _driver import run_many
    cases = [c for c in CASES if c[0] in DASK_CASES]
    assert len(cases) == len(DASK_CASES)
    for case in cases:
        t0 = time.perf_counter()
        [p] = run_many([_args(files, case[1]) + ["--backend", "dask", "--scheduler", dask_scheduler]],
                       timeout=120)
        took = time.perf_counter() - t0
        pandas_line = _one_error(driven[case[0]], *case[2])
        dask_line = _one_error(_without_port_warning(p), *case[2])
        assert dask_line == pandas_line, (case[0], pandas_line, dask_line)
        assert took < 30, (case[0], took)


@pytest.mark.slow
def test_compressed_and_age_dot_1_on_dask(files, read_as_written):
    from _driver import run_many
    runs = [["assess", str(files[n]), "--keys", "age,sex", "--json", "--backend", "dask",
             "--workers", "1"] for n in COMPRESSED]
    runs.append(["assess", str(files["age1.csv"]), "--keys", "age,age.1,sex", "--json",
                 "--backend", "dask", "--workers", "1"])
    for p, ref in zip(run_many(runs, timeout=600), read_as_written[:5]):
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["freq_of_freq"] == json.loads(ref.stdout)["freq_of_freq"]


def _umount(path) -> None:
    """Unmount a test's tmpfs; a mount still busy (a Dask worker or a child process holding a file
    in it) is detached lazily, so no mount outlives the test."""
    import subprocess
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _mount_tmpfs(path, opts) -> bool:
    """A small tmpfs at ``path`` (root only); False where it cannot be mounted."""
    import subprocess
    path.mkdir()
    if os.geteuid() != 0:
        return False
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True)
    return p.returncode == 0


@pytest.fixture
def full_and_read_only(tmp_path):
    """A full filesystem (64 KiB tmpfs with a 62 000-byte filler) and a read-only one."""
    full, ro = tmp_path / "full", tmp_path / "ro"
    if not (_mount_tmpfs(full, "size=64k") and _mount_tmpfs(ro, "ro,size=64k")):
        _umount(full)
        pytest.skip("cannot mount a tmpfs here (needs root)")
    (full / "filler").write_bytes(b"\0" * 62_000)
    try:
        yield full, ro
    finally:
        for p in (full, ro):
            _umount(p)


def _each_fails_in_one_line_and_leaves_nothing(cmds, full, ro) -> None:
    """Every command of ``cmds(folder)`` on the full and on the read-only filesystem: one line
    naming the cause, and nothing (temporary or final) left on the full one but its filler."""
    from _driver import run_many
    for d, words in ((full, "No space left on device"), (ro, "")):
        for args, p in zip(cmds(d), run_many(cmds(d))):
            line = _one_error(p)
            assert words in line or "not writable" in line or "Read-only" in line, (args, line)
    left = [str(f.relative_to(full)) for f in full.rglob("*") if f.is_file()]
    assert left == ["filler"], left


def test_real_full_and_read_only_filesystems(files, full_and_read_only):
    """Every writing command on a full and on a read-only filesystem: one line, exit 2, and no
    file (temporary or final) left on the full one but the filler and empty folders."""
    full, ro = full_and_read_only
    s, pq_ = str(files["ok.csv"]), str(files["ok.parquet"])
    cmds = lambda d: [  # noqa: E731
        ["assess", s, "--keys", "age,sex", "-o", f"{d}/a.json"],
        ["scan", s, "--keys", "age,sex,reg", "-o", f"{d}/s.parquet"],
        ["validate", s, "--keys", "age,sex", "--fractions", "0.1", "--replicates", "2",
         "--resume", f"{d}/v"],
        ["record-risk", pq_, "--keys", "age,sex", "--population-size", "10000", "-o", f"{d}/r.parquet"],
        ["suda", pq_, "--keys", "age,sex,reg", "-o", f"{d}/u.parquet"],
        ["compare", s, "--keys", "age,sex", "--alt", "age=bands:10", "-o", f"{d}/c.csv"],
        ["protect", s, "--keys", "age,sex", "--hierarchy", "age=bands:10", "--criterion",
         "theta_hat.upper<=0.9", "--fraction", "0.1", "-o", f"{d}/p.csv"],
    ]
    _each_fails_in_one_line_and_leaves_nothing(cmds, full, ro)


def test_output_inside_an_input_dataset_folder_or_glob_refused(files, tmp_path):
    """An output written into a Parquet dataset folder that is an input would join the dataset; a
    file of an input glob is an input too."""
    import shutil
    from gpurisk.io import check_output_file
    ds = tmp_path / "ds.parquet"
    ds.mkdir()
    shutil.copy(files["ok.parquet"], ds / "part-0.parquet")
    with pytest.raises(BadInput, match="inside .*an input of this run"):
        check_output_file(ds / "part-1.parquet", (".parquet",), inputs=[ds])
    shutil.copy(files["ok.csv"], tmp_path / "a1.csv")
    with pytest.raises(BadInput, match="an input of this run"):
        check_output_file(tmp_path / "a1.csv", (".csv",), inputs=[str(tmp_path / "a*.csv")])
    check_output_file(tmp_path / "b.csv", (".csv",), inputs=[str(tmp_path / "a*.csv"), ds])


# --- issue 30: the rest of the list, each kind on pandas and (where the command reads records on
# Dask) on the session's Dask cluster ---------------------------------------------------------------

def _changed_in_place(path):
    """The same file, the same number of records, other values (one age moved by one year)."""
    df = pd.read_csv(path)
    df.loc[0, "age"] = int(df.loc[0, "age"]) + 1
    df.to_csv(path, index=False)


@pytest.mark.parametrize("backend", ["pandas", "dask"])
def test_resume_after_the_input_changed_is_refused(files, tmp_path, backend, request):
    """Every command that resumes (scan --resume, validate --resume, protect --checkpoint) refuses
    a data file changed in place since the interrupted run began; record-risk, suda and report have
    no resume (a rerun starts over). Before, scan --resume kept 192 of 2 516 rows of the old data."""
    import shutil
    from _driver import run_many
    data = tmp_path / "d.csv"
    shutil.copy(files["ok.csv"], data)
    dask = ["--backend", "dask", "--scheduler", request.getfixturevalue("dask_scheduler")] \
        if backend == "dask" else []
    scan = ["scan", data, "--keys", "age,sex,reg", "--measures", "sample_uniques", "-o",
            tmp_path / "s.parquet", "--no-progress", *dask]
    val = ["validate", data, "--keys", "age,sex", "--fractions", "0.1", "--replicates", "2",
           "--resume", tmp_path / "v", *dask]
    runs = run_many([scan, val])
    assert [p.returncode for p in runs] == [0, 0], [p.stderr for p in runs]
    _changed_in_place(data)
    scan_again, val_again = run_many([scan + ["--resume"], val])
    _one_error(scan_again, "the data file 'd.csv' changed since the scan")
    _one_error(val_again, "resume folder")
    if backend == "pandas":          # protect reads on pandas or cuDF only
        from gpurisk.protect import protect
        shutil.copy(files["ok.csv"], data)
        state = tmp_path / "state.json"
        protect(data, ["age", "sex"], {"age": "bands:10"}, ["theta_hat.upper<=0.5"],
                fraction=0.1, checkpoint=state)
        _changed_in_place(data)
        with pytest.raises(BadInput, match="written for other data or settings"):
            protect(data, ["age", "sex"], {"age": "bands:10"}, ["theta_hat.upper<=0.5"],
                    fraction=0.1, checkpoint=state)


def test_second_writer_through_a_symlink_meets_the_lock(files, tmp_path):
    """scan --overwrite (and --resume) through link.parquet -> s.parquet while another run holds
    s.parquet: one line, and the first run's folder is left alone (before: both wrote, 2 532 rows
    for 2 516; with --resume the first run crashed on a part file the second deleted)."""
    from gpurisk.io.lock import exclusive
    from _driver import run_many
    target = tmp_path / "s.parquet"
    first = run_many([["scan", files["ok.csv"], "--keys", "age,sex", "-o", target, "--no-progress"]])[0]
    assert first.returncode == 0, first.stderr
    before = sorted(p.name for p in target.iterdir())
    os.symlink(target, tmp_path / "link.parquet")
    with exclusive(target, "the scan output"):
        for extra in (["--overwrite"], ["--resume"]):
            [p] = run_many([["scan", files["ok.csv"], "--keys", "age,sex", "-o",
                             tmp_path / "link.parquet", "--no-progress", *extra]])
            _one_error(p, "another gpurisk run is writing")
    assert sorted(p.name for p in target.iterdir()) == before


@pytest.mark.parametrize("backend", ["pandas", "dask"])
def test_register_weights_blank_outside_the_sample(files, tmp_path, backend, request):
    """--sample-flag with --weights: a record outside the sample needs no weight (refused before
    as "missing"); the answer is the one with any weight written there."""
    from _driver import run_many
    df = pd.read_csv(files["ok.csv"])
    flag = np.arange(len(df)) % 3 == 0
    df.assign(s=flag, w=np.where(flag, df["w"], np.nan)).to_csv(tmp_path / "blank.csv", index=False)
    df.assign(s=flag, w=np.where(flag, df["w"], 7.0)).to_csv(tmp_path / "filled.csv", index=False)
    dask = ["--backend", "dask", "--scheduler", request.getfixturevalue("dask_scheduler")] \
        if backend == "dask" else []
    common = ["--keys", "age,sex", "--sample-flag", "s", "--weights", "w", "--json",
              "--measures", "sample_uniques,theta_hat_weighted", *dask]
    blank, filled = run_many([["assess", tmp_path / "blank.csv", *common],
                              ["assess", tmp_path / "filled.csv", *common]])
    assert blank.returncode == 0, blank.stderr
    a, b = json.loads(blank.stdout), json.loads(filled.stdout)
    assert a["n"] == int(flag.sum()) and a["N"] == len(df)
    assert a["measures"] == b["measures"]
    assert a["measures"]["theta_hat_weighted"]["value"] is not None
    # a blank weight inside the sample is still refused
    df.assign(s=flag, w=np.where(np.arange(len(df)) == 3, np.nan, df["w"])).to_csv(
        tmp_path / "hole.csv", index=False)
    [p] = run_many([["assess", tmp_path / "hole.csv", *common]])
    _one_error(p, "'w'", "missing")


@pytest.mark.parametrize("backend", ["pandas", "dask"])
def test_glob_of_files_with_different_separators(files, tmp_path, backend, request):
    """A glob of a comma- and a semicolon-separated file: each read with its own separator, the
    same counts on pandas and Dask (Dask said "Usecols do not match columns")."""
    from _driver import run_many
    df = pd.read_csv(files["ok.csv"])
    (tmp_path / "g").mkdir()
    df.head(120).to_csv(tmp_path / "g" / "a1.csv", index=False)
    df.iloc[120:].to_csv(tmp_path / "g" / "a2.csv", index=False, sep=";")
    dask = ["--backend", "dask", "--scheduler", request.getfixturevalue("dask_scheduler")] \
        if backend == "dask" else []
    [p] = run_many([["assess", str(tmp_path / "g" / "a*.csv"), "--keys", "age,sex,reg", "--json",
                     "--measures", "sample_uniques", *dask]])
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    counts = df.value_counts(["age", "sex", "reg"])
    assert doc["n"] == len(df) and doc["cells"] == len(counts)
    assert doc["measures"]["sample_uniques"]["value"] == int((counts == 1).sum())


def test_resume_on_a_read_only_filesystem_is_one_line(files, tmp_path):
    """scan --resume and validate --resume where the folder's filesystem turned read-only after
    the first run (a real tmpfs remounted read-only): one line each, the folders unchanged."""
    import subprocess
    from _driver import run_many
    d = tmp_path / "fs"
    if not _mount_tmpfs(d, "size=4m"):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        s = str(files["ok.csv"])
        scan = ["scan", s, "--keys", "age,sex,reg", "--measures", "sample_uniques", "-o",
                d / "s.parquet", "--no-progress"]
        val = ["validate", s, "--keys", "age,sex", "--fractions", "0.1", "--replicates", "2",
               "--resume", d / "v"]
        assert [p.returncode for p in run_many([scan, val])] == [0, 0]
        before = sorted(str(p) for p in d.rglob("*"))
        subprocess.run(["mount", "-o", "remount,ro", str(d)], check=True)
        for p in run_many([scan + ["--resume"], val]):
            line = _one_error(p)
            assert "Read-only" in line or "not writable" in line, line
        assert sorted(str(p) for p in d.rglob("*")) == before
    finally:
        _umount(d)


def test_killed_runs_temporary_files_go_with_the_next_run_of_each_command(files, tmp_path):
    """record-risk, suda and protect: a .NAME.PID.tmp that a killed run (its PID dead) left beside
    the output is removed when the command next writes it (they stayed for ever)."""
    import subprocess
    import sys
    from _driver import run_many
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    outs = {"r.parquet": ["record-risk", files["ok.parquet"], "--keys", "age,sex",
                          "--population-size", "10000"],
            "u.parquet": ["suda", files["ok.parquet"], "--keys", "age,sex,reg"],
            "p.csv": ["protect", files["ok.csv"], "--keys", "age,sex", "--hierarchy", "age=bands:10",
                      "--criterion", "theta_hat.upper<=0.9", "--fraction", "0.1"]}
    stale = {name: tmp_path / f".{name}.{dead}.tmp" for name in outs}
    for p in stale.values():
        p.write_bytes(b"half a file")
    runs = run_many([args + ["-o", tmp_path / name] for name, args in outs.items()])
    for (name, _), p in zip(outs.items(), runs):
        assert p.returncode == 0, (name, p.stderr)
        assert (tmp_path / name).is_file() and not stale[name].exists(), name


def test_full_and_read_only_filesystems_on_dask(files, full_and_read_only, dask_scheduler):
    """The commands that read records on Dask, writing to a full and to a read-only filesystem
    (real tmpfs): one line, exit 2, nothing left on the full one but the filler (record-risk's
    rows are written by the workers, one file per partition)."""
    full, ro = full_and_read_only
    s, pq_ = str(files["ok.csv"]), str(files["ok.parquet"])
    dask = ["--backend", "dask", "--scheduler", dask_scheduler]
    cmds = lambda d: [  # noqa: E731
        ["assess", s, "--keys", "age,sex", "-o", f"{d}/a.json", *dask],
        ["scan", s, "--keys", "age,sex,reg", "-o", f"{d}/s.parquet", *dask],
        ["validate", s, "--keys", "age,sex", "--fractions", "0.1", "--replicates", "2",
         "--resume", f"{d}/v", *dask],
        ["record-risk", pq_, "--keys", "age,sex", "--population-size", "10000", "-o",
         f"{d}/r.parquet", *dask],
    ]                      # suda -o on Dask is refused before the work (it needs records' cells)
    _each_fails_in_one_line_and_leaves_nothing(cmds, full, ro)
