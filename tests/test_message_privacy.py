"""No message quotes a value of one record (issue 30): a file whose every column (keys, weights, a
sample flag, an id, a sensitive column, a stratum, a household) holds a planted value that only one
record has is run through a catalogue of bad or awkward invocations on pandas and Dask; whatever
each prints (exit 0 or 2), none of the planted values may appear in it."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import run_cli

#: one planted value per column, each held by exactly one record
PLANTED = {"age": "919191", "sex": "Qxsexonly", "region": "Zzregiononly", "w": "77.7777",
           "flag": "Maybeunique", "hid": "HHonly4242", "disease": "Rareillness", "stratum": "Soloh"}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    d = tmp_path_factory.mktemp("privacy")
    rng = np.random.default_rng(30)
    n = 1500
    df = pd.DataFrame({
        "age": rng.integers(20, 60, n).astype(str), "sex": rng.choice(["m", "f"], n),
        "region": rng.choice(["north", "south", "east", "west"], n),
        "w": np.round(rng.uniform(80, 120, n), 1).astype(str),
        "flag": rng.choice(["true", "false"], n), "hid": [f"h{i // 3}" for i in range(n)],
        "disease": rng.choice(["flu", "cold", "none"], n), "stratum": rng.choice(["a", "b"], n)})
    for i, (col, value) in enumerate(PLANTED.items()):
        df.loc[n - 1 - i, col] = value          # a different record for each column
    df.to_csv(d / "s.csv", index=False)
    df.iloc[:-3].to_csv(d / "pop_missing.csv", index=False)   # planted records not in it
    (d / "map.csv").write_text("region,group\nnorth,N\nsouth,S\neast,E\nwest,W\n")
    return d


def cases(d):
    s = str(d / "s.csv")
    keys = "age,sex,region"
    return {
        "flag not boolean": ["assess", s, "--keys", keys, "--sample-flag", "flag"],
        "weights not numbers": ["assess", s, "--keys", keys, "--fraction", "0.1", "--weights", "disease"],
        "f > F": ["assess", s, "--keys", keys, "--population", str(d / "pop_missing.csv")],
        "map misses values": ["assess", s, "--keys", keys, "--fraction", "0.1",
                              "--recode", f"region=map:{d / 'map.csv'}"],
        "bands on text": ["assess", s, "--keys", "sex", "--fraction", "0.1", "--recode", "sex=bands:5"],
        "breaks on text": ["assess", s, "--keys", "region", "--fraction", "0.1",
                           "--recode", "region=breaks:1,2"],
        "strata fractions miss one": ["design", s, "--keys", "age,sex", "--strata", "stratum",
                                      "--fractions", "a=0.1,b=0.1"],
        "identifier as key": ["assess", s, "--keys", "hid,age", "--fraction", "0.1"],
        "l-diversity": ["assess", s, "--keys", keys, "--fraction", "0.1", "--measures", "l_diversity",
                        "--option", "l_diversity.sensitive=disease"],
        "household risk": ["assess", s, "--keys", keys, "--fraction", "0.1", "--measures",
                           "household_risk", "--option", "household_risk.household=hid"],
        "record risk": ["record-risk", s, "--keys", keys, "--fraction", "0.1", "--json"],
        "suda": ["suda", s, "--keys", keys, "--fraction", "0.1", "--max-msu", "2", "--json"],
        "scan": ["scan", s, "--keys", keys, "--max-size", "2", "--fraction", "0.1",
                 "-o", str(d / "scan.parquet")],
        "compare": ["compare", s, "--keys", keys, "--fraction", "0.1", "--alt", "age=bands:10"],
    }


NAMES = list(cases(Path(".")))

#: the error each bad case must reach (so that the grep reads the message that could leak)
REACHES = {"flag not boolean": "is not boolean", "weights not numbers": "is not numeric",
           "f > F": "<withheld: f=1>", "map misses values": "<withheld: a value of 1 record>",
           "bands on text": "<withheld: a value of 1 record>",
           "breaks on text": "<withheld: a value of 1 record>",
           "strata fractions miss one": "<withheld: a value of 1 record>"}


@pytest.fixture(scope="module")
def local_cluster_kept():
    """The local Dask cluster that ``--backend dask --workers 1`` starts, started by the first such
    command and kept for the later ones (as the commands of one process share it), closed after the
    module: one cluster start instead of one per case."""
    from gpurisk import backends
    yield
    backends._close_local()


@pytest.mark.parametrize("name", NAMES)
def test_no_message_quotes_a_value_of_one_record(planted, local_cluster_kept, name):
    args = cases(planted)[name]
    for backend in (["--backend", "pandas"], ["--backend", "dask", "--workers", "1"]) \
            if args[0] == "assess" else ([],):
        p = run_cli(*args, *backend, keep_clusters=True)
        if name in REACHES:
            assert p.returncode == 2 and REACHES[name] in p.stderr, (name, backend, p.stderr[-500:])
        else:
            assert p.returncode == 0, (name, backend, p.stderr[-500:])
        text = p.stdout + p.stderr
        leaked = [v for v in PLANTED.values() if v in text]
        assert not leaked, (name, backend, leaked, text[-800:])


def test_the_check_can_fail(planted):
    """--show-records is asked to print key values, and the grep sees them."""
    p = run_cli("record-risk", planted / "s.csv", "--keys", "age,sex,region", "--fraction", "0.1",
                "--json", "--show-records")
    assert p.returncode == 0
    assert any(v in p.stdout for v in (PLANTED["age"], PLANTED["sex"], PLANTED["region"]))
