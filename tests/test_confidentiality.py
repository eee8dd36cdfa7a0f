"""Outputs never show the key values of a sample unique: a planted unique record with distinctive
values (region 'ZZUNIQUE', age 424242) is run through the main commands, and neither value may appear
in stdout, stderr or any file written, except where --show-records asks for it (record-risk)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conftest import run_cli

SECRETS = ("ZZUNIQUE", "424242")


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    d = tmp_path_factory.mktemp("conf")
    rng = np.random.default_rng(11)
    n = 2000
    df = pd.DataFrame({"age": rng.integers(20, 60, n), "sex": rng.choice(["m", "f"], n),
                       "region": rng.choice(["north", "south", "east", "west"], n)})
    df.loc[n - 1] = [424242, "f", "ZZUNIQUE"]          # the planted sample unique
    df.to_csv(d / "sample.csv", index=False)
    pop = pd.concat([df.iloc[:-1]] * 10)                # the unique is missing from the population
    pop.to_csv(d / "pop_without.csv", index=False)
    pd.concat([pop, df.iloc[[-1]]]).to_csv(d / "pop.csv", index=False)
    return d


def _text_of(path):
    """Everything a written file says: bytes for text, every cell as text for Parquet."""
    from pathlib import Path
    p = Path(path)
    files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file())
    out = []
    for f in files:
        if f.suffix == ".parquet":
            out.append(pd.read_parquet(f).to_string())
        else:
            out.append(f.read_bytes().decode("utf-8", "replace"))
    return "\n".join(out)


def _clean(text, what):
    for s in SECRETS:
        assert s not in text, f"{s!r} shown in {what}"


def test_main_commands_never_show_a_unique(planted):
    from _driver import run_many
    d = planted
    s, keys = d / "sample.csv", "age,sex,region"
    runs = [
        ["assess", s, "--keys", keys, "--population", d / "pop.csv", "--output", d / "a.json"],
        ["assess", s, "--keys", keys, "--population", d / "pop.csv", "--output", d / "a.csv"],
        ["assess", s, "--keys", keys, "--population", d / "pop.csv", "--output", d / "a.parquet"],
        ["assess", s, "--keys", keys, "--fraction", "0.1", "--json"],
        ["assess", s, "--keys", keys, "--fraction", "0.1"],
        ["scan", s, "--keys", keys, "--fraction", "0.1", "-o", d / "scan", "--no-progress"],
        ["scan", s, "--keys", keys, "--fraction", "0.1", "--json"],
        ["report", d / "scan", "-o", d / "r.html"],
        ["compare", s, "--keys", keys, "--fraction", "0.1", "--alt", "age=bands:10", "-o", d / "c.csv"],
        ["validate", d / "pop.csv", "--keys", keys, "--fractions", "0.1", "--replicates", "3",
         "--output", d / "v.csv", "--resume", d / "vck"],
        ["dis", s, "--keys", keys, "--fraction", "0.1", "--perturb", "pram:vars=sex,p=0.9",
         "--max-iter", "3", "--json", "--state", d / "dis.json"],
        ["record-risk", s, "--keys", keys, "--population-size", "20000", "--json",
         "--output", d / "rr.parquet"],
        ["record-risk", s, "--keys", keys, "--population-size", "20000"],
    ]
    for args, p in zip(runs, run_many(runs)):
        assert p.returncode == 0, (args, p.stderr)
        _clean(p.stdout, f"stdout of {args[0]}")
        _clean(p.stderr, f"stderr of {args[0]}")
    for out in ("a.json", "a.csv", "a.parquet", "scan", "r.html", "c.csv", "v.csv", "vck", "dis.json",
                "rr.parquet"):
        _clean(_text_of(d / out), out)


def test_f_over_F_message_withholds_a_unique(planted):
    """The unique's cell is missing from the population: the error names the cell, values withheld."""
    p = run_cli("assess", planted / "sample.csv", "--keys", "age,sex,region",
                "--population", planted / "pop_without.csv")
    assert p.returncode == 2 and "<withheld: f=1>" in p.stderr and "region=" in p.stderr
    _clean(p.stderr, "the f > F message")


def test_show_records_does_show_them(planted):
    """The check can fail: with --show-records record-risk prints key values of its Table 3 rows."""
    p = run_cli("record-risk", planted / "sample.csv", "--keys", "age,sex,region",
                "--population-size", "20000", "--json", "--show-records", check=True)
    assert "ZZUNIQUE" in p.stdout or "424242" in p.stdout


def test_recode_errors_withhold_a_value_of_one_record(planted):
    """A map that misses the unique's region names the problem, not the value."""
    m = planted / "map.csv"
    m.write_text("region,group\nnorth,N\nsouth,S\neast,E\n")     # 'west' (many) and 'ZZUNIQUE' missing
    p = run_cli("assess", planted / "sample.csv", "--keys", "age,sex,region", "--fraction", "0.1",
                "--recode", f"region=map:{m}")
    assert p.returncode == 2 and "is not in the mapping" in p.stderr
    _clean(p.stderr, "the recode error")
    p = run_cli("assess", planted / "sample.csv", "--keys", "region", "--fraction", "0.1",
                "--recode", "region=bands:5")
    assert p.returncode == 2 and "not a number" in p.stderr
    _clean(p.stderr, "the bands error")


def test_matrix_and_strata_errors_withhold_a_value_of_one_record(planted):
    """Issue 20: a misclassification or PRAM matrix that does not label the unique's region, and
    strata fractions that miss it, name the problem, not the value."""
    import json
    from _driver import run_many
    s = planted / "sample.csv"
    labels = ["north", "south", "east", "west"]                 # 'ZZUNIQUE' not labelled
    spec = json.dumps({"region": {"categories": labels, "matrix": np.eye(4).tolist()}})
    (planted / "m.json").write_text(spec)
    runs = run_many([
        ["assess", s, "--keys", "age,sex,region", "--fraction", "0.1", "--measures",
         "theta_hat_misclass", "--option", f"theta_hat_misclass.matrices={planted / 'm.json'}"],
        ["dis", s, "--keys", "age,sex,region", "--fraction", "0.1", "--perturb",
         f"pram:matrix={planted / 'm.json'}", "--max-iter", "2"],
        ["design", s, "--keys", "age,sex", "--strata", "region",
         "--fractions", "north=0.1,south=0.1,east=0.1,west=0.1"],
    ])
    for p in runs:
        text = p.stdout + p.stderr
        assert "withheld: a value of 1 record" in text, text
        _clean(text, "a matrix or strata error")
