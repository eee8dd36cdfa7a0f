"""dis and design write their document with -o FILE.json like every other command (issue 28):
the same JSON as --json, the name checked before the work, an input never overwritten."""
from __future__ import annotations

import json
import shutil

import pytest

from conftest import data_path, run_cli

CASES = {
    "design": (["design", "sdcmicro/testdata.csv", "--keys", "urbrur,water,sex,age", "--fraction",
                "0.01", "--cluster", "ori_hid"]),
    "dis": (["dis", "sdcmicro/testdata.csv", "--keys", "urbrur,water,sex,age", "--fraction", "0.01",
             "--perturb", "pram:p=0.9,vars=age", "--seed", "3", "--max-iter", "4"]),
}


@pytest.mark.parametrize("cmd", CASES)
def test_output_file_is_the_json_document(cmd, tmp_path):
    src = tmp_path / "data.csv"
    shutil.copy(data_path("sdcmicro/testdata.csv"), src)
    args = [str(src) if a == "sdcmicro/testdata.csv" else a for a in CASES[cmd]]
    out = tmp_path / "doc.json"
    printed = json.loads(run_cli(*args, "--json", "-o", out, check=True).stdout)
    assert json.loads(out.read_text()) == printed and printed["n"] == 4580
    before = src.read_bytes()
    for bad, why in ((tmp_path / "doc.csv", "name it with one of .json"), (src, "--output")):
        p = run_cli(*args, "-o", bad)
        assert p.returncode == 2 and why in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert src.read_bytes() == before and not (tmp_path / "doc.csv").exists()
