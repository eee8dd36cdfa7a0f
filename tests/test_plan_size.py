"""A scan plan is counted before it is listed (issue 30): 40 keys up to size 40, or 3 000 keys up to
size 3, used to enumerate subsets until MemoryError after ~50 s; now the count (math.comb), the
memory and time it would take and the limit are one line, exit 2, before anything is read."""
from __future__ import annotations

import itertools
import time

import pytest

import gpurisk
from gpurisk.errors import BadInput
from gpurisk.scan import plan

from conftest import run_cli


@pytest.mark.parametrize("n,lo,hi", [(1, 1, 1), (5, 1, 5), (7, 2, 4), (9, 3, 3), (6, 4, 9), (6, 5, 2)])
def test_count_subsets_equals_listing_them(n, lo, hi):
    pool = [f"v{i}" for i in range(n)]
    listed = sum(1 for r in range(lo, min(hi, n) + 1) for _ in itertools.combinations(pool, r))
    assert plan.count_subsets(n, hi, lo) == listed


@pytest.mark.parametrize("n,max_size,count", [(40, 40, 2 ** 40 - 1), (3000, 3, 3000 + 4_498_500 + 4_495_501_000)])
def test_huge_plans_refused_at_once_with_their_numbers(n, max_size, count):
    pool = [f"v{i}" for i in range(n)]
    t0 = time.perf_counter()
    with pytest.raises(BadInput) as e:
        plan.build_plan(pool, max_size)
    assert time.perf_counter() - t0 < 5
    text = str(e.value)
    assert f"the plan has {count:,} combinations" in text
    assert "of memory and at least" in text and "the limit is 1,000,000" in text
    assert "raise it with max_combinations=N" in text and "\n" not in text     # the API's phrasing
    assert "raise it with --max-combinations N" in e.value.cli_message()       # the command line's


def test_the_limit_is_inclusive_and_can_be_raised():
    pool = [f"v{i}" for i in range(12)]
    n = plan.count_subsets(12, 3)                       # 12 + 66 + 220 = 298
    assert n == 298
    assert len(plan.build_plan(pool, 3, max_combinations=298)) == 298
    with pytest.raises(BadInput, match="the plan has 298 combinations .* the limit is 297"):
        plan.build_plan(pool, 3, max_combinations=297)
    for bad in (0, -1, 1.5, float("nan"), True, "many"):
        with pytest.raises(BadInput, match="^max_combinations must be a whole number"):
            plan.build_plan(pool, 3, max_combinations=bad)


def test_scenarios_and_plus_each_count_too(tmp_path):
    toml = tmp_path / "s.toml"
    toml.write_text("[scenarios]\n" + "".join(f's{i} = ["a", "b{i}"]\n' for i in range(30)))
    with pytest.raises(BadInput, match=r"the plan has 30 combinations \(scenarios"):
        plan.build_plan(scenarios=str(toml), max_combinations=29)
    pool = [f"v{i}" for i in range(50)]
    with pytest.raises(BadInput, match=r"the plan has 50 combinations \(scenarios and the "
                                       r"fundamental key plus each"):
        plan.build_plan(pool, fundamental=["v0"], plus_each_flag=True, max_combinations=49)
    # plus-each (50) and the subsets up to size 2 (50 + 1225) together
    with pytest.raises(BadInput, match=r"the plan has 1,325 combinations .* and 50 others"):
        plan.build_plan(pool, 2, fundamental=["v0"], plus_each_flag=True, max_combinations=1324)
    assert len(plan.build_plan(pool, 2, fundamental=["v0"], plus_each_flag=True,
                               max_combinations=1325)) == 1275   # the 50 plus-each ones are subsets too


def test_memory_estimate_is_smaller_with_an_output_folder():
    with pytest.raises(BadInput) as mem:
        plan.check_plan_size(2_000_000, "x")
    with pytest.raises(BadInput) as disk:
        plan.check_plan_size(2_000_000, "x", to_disk=True)
    gb = lambda e: float(str(e.value).split("about ")[1].split(" GB")[0])  # noqa: E731
    assert gb(mem) == pytest.approx(2e6 * (250 + 2100 + 11000) / 1e9, rel=0.01)
    assert gb(disk) == pytest.approx(2e6 * (250 + 2100) / 1e9, rel=0.01)


@pytest.mark.parametrize("args,needle", [
    (["--keys", ",".join(f"v{i}" for i in range(40)), "--max-size", "40"],
     "the plan has 1,099,511,627,775 combinations"),
    (["--keys", ",".join(f"v{i}" for i in range(3000)), "--max-size", "3"],
     "the plan has 4,500,002,500 combinations"),
    (["--keys", "a,b,c", "--max-size", "3", "--max-combinations", "6"], "the limit is 6"),
    (["--keys", "a,b,c", "--max-size", "3", "--max-combinations", "0"], "--max-combinations must be"),
])
def test_cli_refuses_before_reading(tmp_path, args, needle):
    """The data file is not even read: it lacks every key named."""
    (tmp_path / "d.csv").write_text("x\n1\n2\n")
    t0 = time.perf_counter()
    p = run_cli("scan", tmp_path / "d.csv", *args, "-o", tmp_path / "s.parquet")
    assert time.perf_counter() - t0 < 10
    assert p.returncode == 2, p.stderr
    [line] = p.stderr.strip().splitlines()
    assert line.startswith("gpurisk: error: ") and needle in line, line
    assert not (tmp_path / "s.parquet").exists()


def test_scan_api_takes_the_limit(tmp_path):
    import pandas as pd
    df = pd.DataFrame({"a": [1, 2, 2, 3], "b": [1, 1, 2, 2], "c": [0, 1, 0, 1]})
    assert len(gpurisk.scan(df, keys=["a", "b", "c"], max_size=3, fraction=0.5,
                            measures=["sample_uniques"], max_combinations=7).results) == 7
    with pytest.raises(BadInput, match="the plan has 7 combinations"):
        gpurisk.scan(df, keys=["a", "b", "c"], max_size=3, fraction=0.5, max_combinations=6)
