"""``gpurisk scan``'s closing table (issue 28): each column once (ranked by n1, one n1 column), and
a column that holds no value in any row (N1 without a population) left out, with a line naming it."""
from __future__ import annotations

import re

from conftest import data_path, run_cli

KEYS = "urbrur,water,sex,age"


def _header(out: str) -> list[str]:
    line = next(ln for ln in out.splitlines() if "combination" in ln and "#" in ln)
    return [c.strip() for c in re.split(r"[┃│|]", line) if c.strip()]


def _rows(out: str) -> list[list[str]]:
    return [[c.strip() for c in ln.split("│") if c.strip()] for ln in out.splitlines()
            if ln.startswith("│")]


def test_ranked_by_n1_without_a_population(tmp_path):
    out = run_cli("scan", data_path("sdcmicro/testdata.csv"), "--keys", KEYS, "--max-size", "2",
                  "--rank-by", "n1", "--top", "3", "-o", tmp_path / "s.parquet",
                  env={"COLUMNS": "250"}, check=True).stdout
    head = _header(out)
    assert head == ["#", "combination", "size", "cells", "n1", "n2"]
    # the n1 of water, age counted by hand: sample uniques of the two keys in testdata
    import pandas as pd
    df = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    sizes = df.groupby(["water", "age"], dropna=False).size()
    rows = _rows(out)
    assert rows[0][1] == "water, age" and rows[0][4] == str(int((sizes == 1).sum()))
    assert "no value in any row, left out: N1, theta_hat, theta_hat upper" in out


def test_with_a_fraction_theta_hat_shown_and_n1_once(tmp_path):
    out = run_cli("scan", data_path("sdcmicro/testdata.csv"), "--keys", KEYS, "--max-size", "2",
                  "--fraction", "0.01", "--rank-by", "n1", "--top", "3",
                  env={"COLUMNS": "250"}, check=True).stdout
    head = _header(out)
    assert head.count("n1") == 1 and "N1" not in head
    assert head[-2:] == ["theta_hat", "theta_hat upper"]
    assert all(len(r) == len(head) for r in _rows(out))
    assert "left out: N1" in out


def test_a_column_with_values_is_kept_and_the_ranking_always_shown():
    import io
    from rich.console import Console
    from gpurisk.cli import scan as cli_scan
    doc = {"n": 10, "N": 100, "fraction": 0.1, "combinations": 2, "skipped": 0, "output": None,
           "timings": {"total_s": 0.1}, "rank_by": "pr_pu", "ranked_by": "pr_pu", "warnings": [],
           "top": [{"keys": ["a"], "size": 1, "cells": 3, "n1": 2, "n2": 1, "N1": 5, "pr_pu": None},
                   {"keys": ["b"], "size": 1, "cells": 4, "n1": 1, "n2": 0, "N1": None, "pr_pu": None}]}
    buf = io.StringIO()
    orig = cli_scan.console
    cli_scan.console = lambda: Console(file=buf, width=200)
    try:
        cli_scan.print_summary(doc)
    finally:
        cli_scan.console = orig
    out = buf.getvalue()
    assert _header(out) == ["#", "combination", "size", "cells", "n1", "n2", "N1", "pr_pu"]
    assert "left out" not in out
