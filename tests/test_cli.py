"""The command line (through gpurisk.cli.main in-process, a real process where that matters): the
README's command, JSON contract, bad input."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from conftest import ROOT, data_path, run_cli

TESTDATA_KEYS = "urbrur,water,sex,age"


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S).group(1)
    return [ln.strip() for ln in block.splitlines() if ln.strip()]


def test_readme_example_command_runs():
    first = readme_commands()[0]
    # "pip install . && gpurisk assess ..." — run the gpurisk part as a user would
    cmd = first.split("&&", 1)[1].split()
    assert cmd[0] == "gpurisk"
    out = run_cli(*cmd[1:], check=True, subprocess=True)     # a real process, as a user runs it
    assert "theta_hat" in out.stdout and "n = 48842" in out.stdout


def test_readme_test_command_is_what_ci_runs():
    second = readme_commands()[1]
    assert second in (ROOT / ".ci" / "run").read_text()


def test_assess_json_contract():
    out = run_cli("assess", data_path("sdcmicro/testdata.csv"), "--keys", TESTDATA_KEYS,
                  "--fraction", "0.01", "--json", check=True)
    doc = json.loads(out.stdout)
    assert doc["n"] == 4580 and doc["N"] is None and doc["fraction"] == 0.01
    assert doc["keys"] == ["urbrur", "water", "sex", "age"] and doc["cells"] == 993
    assert doc["freq_of_freq"]["1"] == 330 and doc["freq_of_freq"]["2"] == 172
    for name in ("theta_hat", "theta", "pr_pu", "pr_pu_su", "match_prob_a", "theta_hat_dis"):
        assert set(doc["measures"][name]) >= {"value", "se", "upper", "reason"}
    assert doc["measures"]["theta"]["value"] is None and doc["measures"]["theta"]["reason"]
    assert doc["measures"]["theta_hat"]["value"] == pytest.approx(3.3 / 343.86)


def test_assess_population_and_sample_flag_agree(tmp_path):
    reg = pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")
    flag = (pd.Series(range(len(reg))) % 20 == 3)
    reg["insample"] = flag.to_numpy()
    reg.to_csv(tmp_path / "reg.csv", index=False)
    reg[flag.to_numpy()].drop(columns="insample").to_parquet(tmp_path / "s.parquet")
    keys = "iage,isex,irace,istatenum"
    a = json.loads(run_cli("assess", tmp_path / "reg.csv", "--keys", keys, "--sample-flag", "insample",
                           "--json", check=True).stdout)
    b = json.loads(run_cli("assess", tmp_path / "s.parquet", "--keys", keys, "--population",
                           data_path("arx_genetic/fars_int.csv"), "--json", check=True).stdout)
    assert a["N"] == b["N"] == len(reg) and a["n"] == b["n"] == int(flag.sum())
    assert a["fraction"] == pytest.approx(b["fraction"]) and a["fraction_source"] == "n/N"
    for name in ("theta", "pr_pu", "pr_pu_su", "match_prob_a", "matches", "tau1"):
        assert a["measures"][name]["value"] == pytest.approx(b["measures"][name]["value"])
        assert a["measures"][name]["value"] is not None


def test_measures_lists_builtins():
    out = run_cli("measures", check=True)
    for name in ("theta_hat", "pr_pu_su", "theta_hat_dis"):
        assert name in out.stdout


def _bad(*args):
    out = run_cli(*args)
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpurisk: error:"), out.stderr
    assert "Traceback" not in out.stderr
    return lines[0]


def test_bad_unknown_key():
    msg = _bad("assess", data_path("sdcmicro/testdata.csv"), "--keys", "urbrur,nosuch", "--fraction", "0.1")
    assert "'nosuch'" in msg


def test_bad_empty_file(tmp_path):
    (tmp_path / "empty.csv").write_text("")
    assert "empty" in _bad("assess", tmp_path / "empty.csv", "--keys", "a", "--fraction", "0.1")
    (tmp_path / "header.csv").write_text("a,b\n")
    assert "no records" in _bad("assess", tmp_path / "header.csv", "--keys", "a", "--fraction", "0.1")


@pytest.mark.parametrize("pi", ["0", "1.5", "-0.2"])
def test_bad_fraction(pi):
    msg = _bad("assess", data_path("sdcmicro/testdata.csv"), "--keys", TESTDATA_KEYS, "--fraction", pi)
    assert "outside (0, 1]" in msg and pi.lstrip("-") in msg


def test_bad_f_over_F(tmp_path):
    pd.DataFrame({"a": [1, 1, 2], "b": ["x", "x", "y"]}).to_csv(tmp_path / "s.csv", index=False)
    pd.DataFrame({"a": [1, 2, 2], "b": ["x", "y", "y"]}).to_csv(tmp_path / "p.csv", index=False)
    msg = _bad("assess", tmp_path / "s.csv", "--keys", "a,b", "--population", tmp_path / "p.csv")
    assert "f_j > F_j" in msg and "a=<withheld" in msg and "'x'" not in msg   # issue 30: no values


def test_bad_sample_flag(tmp_path):
    pd.DataFrame({"a": [1, 1, 2], "s": ["yes", "no", "yes"]}).to_csv(tmp_path / "r.csv", index=False)
    msg = _bad("assess", tmp_path / "r.csv", "--keys", "a", "--sample-flag", "s")
    assert "'s' is not boolean" in msg and "yes" not in msg and "2 other value(s)" in msg   # issue 30


def test_bad_unreadable_files(tmp_path):
    (tmp_path / "x.parquet").write_bytes(b"PAR1 this is not parquet at all")
    assert "not a readable Parquet" in _bad("assess", tmp_path / "x.parquet", "--keys", "a", "--fraction", "0.1")
    assert "does not exist" in _bad("assess", tmp_path / "nope.csv", "--keys", "a", "--fraction", "0.1")
    (tmp_path / "latin1.csv").write_bytes("a,b\n\xe9t\xe9,1\n".encode("latin-1"))
    assert "encoding" in _bad("assess", tmp_path / "latin1.csv", "--keys", "a", "--fraction", "0.1")


def test_semicolon_separator_detected():
    out = run_cli("assess", data_path("arx/adult.csv"), "--keys", "sex,age,race", "--fraction", "0.01",
                  "--json", check=True)
    assert json.loads(out.stdout)["n"] == 30162


def test_bundled_data_is_declared_as_package_data():
    """Every file in gpurisk/data matches a package-data pattern, so a wheel install carries it."""
    import fnmatch
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = conf["tool"]["setuptools"]["package-data"]["gpurisk"]
    files = [p.relative_to(ROOT / "gpurisk").as_posix() for p in (ROOT / "gpurisk" / "data").iterdir()]
    assert "data/adult.csv.gz" in files
    for f in files:
        assert any(fnmatch.fnmatch(f, pat) for pat in patterns), f


def test_no_wrapping_at_80_columns_when_not_a_terminal():
    """Issue 20: piped output was folded at 80 columns (rich's default without a terminal)."""
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = str(ROOT)
    p = subprocess.run([sys.executable, "-m", "gpurisk", "assess", "example:adult", "--keys", "age,sex",
                        "--fraction", "0.01"], capture_output=True, text=True, env=env, check=True)
    lines = p.stdout.splitlines()
    long = [ln for ln in lines if "risk_fishing_subsample" in ln]
    assert long and "needs population counts F_j: give --population POP or --sample-flag COL" in long[0]
    assert max(len(ln) for ln in lines) > 80
