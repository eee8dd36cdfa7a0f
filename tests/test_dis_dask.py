"""dis on Dask: the keys and the columns the perturbations read are counted on the workers, each
record's codes are encoded there with that count's plan and come back as narrow integers, and the
perturbation loop runs here. Reference: the pandas backend with the same seed (its numbers are checked
against Elliot's procedure and θ̂ in test_dis.py): the codes are the same, so every number is."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from conftest import data_path, run_cli
from gpurisk.dis import dis
from gpurisk.errors import BadInput

dd = pytest.importorskip("dask.dataframe")
pytest.importorskip("distributed")

KEYS = ["iage", "isex", "irace", "istatenum"]


@pytest.fixture(scope="module")
def fars():
    return pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";").iloc[:30000]


@pytest.mark.parametrize("spec", [["pram:vars=irace,p=0.9"],
                                  ["swap:fraction=0.1,geo=istatenum,pairing=iage"],
                                  ["swap:fraction=0.1,geo=istatenum,pairing=iinjury"],
                                  ["pram:vars=isex,p=0.95", "swap:fraction=0.05,geo=istatenum"]])
def test_dask_dis_equals_pandas(client, fars, spec):
    a = dis(fars, KEYS, 0.05, spec, max_iter=12, seed=3)
    b = dis(dd.from_pandas(fars, npartitions=4), KEYS, 0.05, spec, max_iter=12, seed=3,
            backend="dask")
    assert a.iterations == b.iterations and a.values == b.values
    assert a.to_dict() == b.to_dict() and 0 < b.value < 1


def test_dask_dis_refuses_a_recode(client, fars):
    with pytest.raises(BadInput, match="dis with recode on the dask backend"):
        dis(dd.from_pandas(fars, npartitions=2), KEYS, 0.05, ["pram:vars=irace,p=0.9"],
            backend="dask", recode=["iage=bands:10"], max_iter=2)


def test_cli_dis_on_a_local_cluster(tmp_path):
    path = data_path("arx_genetic/fars_int.csv")
    args = ["dis", str(path), "--keys", ",".join(KEYS), "--fraction", "0.05",
            "--perturb", "swap:fraction=0.1,geo=istatenum,pairing=iinjury", "--max-iter", "5",
            "--seed", "2", "--json"]
    a = json.loads(run_cli(*args, check=True).stdout)
    b = json.loads(run_cli(*args, "--backend", "dask", "--workers", "2", check=True).stdout)
    assert a == b and a["n"] > 0
