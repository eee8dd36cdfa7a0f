"""Issue 29's spine: the shared settings (Design, Run) checked once in one error format, the CLI's
option groups declared once, one measure runner for every command, and DIS-SUDA taking π."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk import plugins
from gpurisk.errors import BadInput
from gpurisk.core.settings import Design, Run, SettingError

from conftest import ROOT, run_cli
from _suda_oracle import brute_force


# --- settings ------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw,python,flag", [
    (dict(alpha=7), "alpha=7 is outside (0, 0.5)", "--alpha 7 is outside (0, 0.5)"),
    (dict(alpha=0.5), "alpha=0.5 is outside (0, 0.5)", "--alpha 0.5 is outside"),
    (dict(alpha=0), "alpha=0 is outside (0, 0.5)", "--alpha 0 is outside"),
    (dict(alpha="x"), "alpha='x' is not a number", "--alpha 'x' is not a number"),
    (dict(seed=-1), "seed=-1 must be >= 0", "--seed -1 must be >= 0"),
    (dict(seed=1.5), "seed=1.5 is not a whole number", "--seed 1.5"),
    (dict(seed=True), "seed=True is not a whole number", "--seed True"),
    (dict(measure_timeout=0), "measure_timeout=0 must be > 0", "--measure-timeout 0 must be > 0"),
    (dict(measure_timeout=math.inf), "measure_timeout=inf must be > 0 and finite",
     "--measure-timeout inf"),
])
def test_run_checks_each_setting_once_in_one_format(kw, python, flag):
    with pytest.raises(SettingError) as err:
        Run(**kw)
    assert isinstance(err.value, BadInput)
    assert str(err.value).startswith(python) and "--" not in str(err.value)
    assert err.value.cli_message().startswith(flag)


@pytest.mark.parametrize("kw,python", [
    (dict(fraction=1.5), "fraction=1.5 is outside (0, 1]"),
    (dict(fraction=0), "fraction=0 is outside (0, 1]"),
    (dict(fraction=math.nan), "fraction=nan is outside (0, 1]"),
    (dict(fraction="abc"), "fraction='abc' is not a number"),
    (dict(weights=""), "weights='' is not a column name"),
    (dict(sample_flag=3), "sample_flag=3 is not a column name"),
])
def test_design_checks(kw, python):
    with pytest.raises(SettingError, match=re.escape(python)):
        Design(**kw)


def test_settings_convert_and_keep_good_values():
    r = Run(measures="theta_hat, pr_pu", alpha=np.float64(0.05), seed=np.int64(3),
            measure_timeout=2, options={"theta_hat_dis": {"K": 10.0}})
    assert r.measures == ("theta_hat", "pr_pu") and r.alpha == 0.05 and type(r.seed) is int
    assert r.measure_timeout == 2.0 and r.options == {"theta_hat_dis": {"K": 10}}
    assert type(r.options["theta_hat_dis"]["K"]) is int           # the option's declared type
    assert r.kwargs("alpha", "seed") == {"alpha": 0.05, "seed": 3}
    assert Design(fraction=1).fraction == 1.0 and Design(fraction="0.25").fraction == 0.25
    assert Design().kwargs() == {"fraction": None, "population": None, "sample_flag": None,
                                 "weights": None}
    with pytest.raises(BadInput, match="theta_hat_dis.K"):
        Run(options={"theta_hat_dis": {"K": "many"}})


def test_python_api_names_parameters_before_reading(tmp_path):
    missing = tmp_path / "nope.csv"          # never read: the setting is refused first
    with pytest.raises(BadInput, match=r"^alpha=7 is outside \(0, 0.5\)$"):
        gpurisk.assess(missing, "a", alpha=7)
    with pytest.raises(BadInput, match=r"^seed=-2 must be >= 0$"):
        gpurisk.scan(missing, keys="a,b", seed=-2)
    with pytest.raises(BadInput, match=r"^alpha=7 is outside"):
        gpurisk.validate(missing, "a", alpha=7)
    from gpurisk.protect import protect
    with pytest.raises(BadInput, match=r"^alpha=7 is outside"):
        protect(missing, ["a", "b"], {}, ["theta_hat.upper<=0.9"], fraction=0.5, alpha=7)
    from gpurisk.scan.compare import compare
    with pytest.raises(BadInput, match=r"^fraction=2 is outside"):
        compare(missing, ["a", "b"], ["a=bands:2"], fraction=2)


def test_one_command_settings_use_the_same_format(tmp_path):
    missing = tmp_path / "nope.csv"
    with pytest.raises(SettingError, match=r"^fractions=1.2 is outside \(0, 1\)$") as err:
        gpurisk.validate(missing, "a", fractions=["0.1", "1.2"])
    assert err.value.cli_message() == "--fractions 1.2 is outside (0, 1)"
    with pytest.raises(SettingError, match=r"^threads=-1 must be >= 0$"):
        gpurisk.scan(missing, keys="a,b", threads=-1)
    from gpurisk.protect import protect
    with pytest.raises(SettingError, match=r"^suppress_limit=1.5 is outside \[0, 1\) \(a share "
                                           r"of the records\)$"):
        protect(missing, ["a", "b"], {}, ["k_anonymity>=2"], suppress="records", suppress_limit=1.5)


def test_cli_alpha_7_in_protect_is_one_line_exit_2(tmp_path):
    """Issue 29: this ended in 'internal error: StatisticsError', exit 1."""
    src = tmp_path / "d.csv"
    pd.DataFrame({"a": [1, 1, 2, 3], "b": [1, 2, 2, 1]}).to_csv(src, index=False)
    p = run_cli("protect", src, "--keys", "a,b", "--criterion", "theta_hat.upper<=0.9",
                "--fraction", "0.5", "--alpha", "7")
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert lines == ["gpurisk: error: --alpha 7 is outside (0, 0.5)"]
    p = run_cli("scan", src, "--keys", "a,b", "--seed", "-1")
    assert p.returncode == 2 and p.stderr.strip() == "gpurisk: error: --seed -1 must be >= 0"


# --- the option groups, declared once ---------------------------------------------------------------

SHARED = ["--fraction", "--alpha", "--seed", "--option", "--json", "--population", "--sample-flag",
          "--weights", "--measures", "--measure-timeout"]


def test_shared_flags_are_declared_once():
    text = "\n".join(p.read_text() for p in (ROOT / "gpurisk" / "cli").glob("*.py"))
    for flag in SHARED:
        assert len(re.findall(rf'"{flag}"', text)) == 1, flag


def test_every_command_keeps_its_flags():
    from click.testing import CliRunner
    from gpurisk.cli import cli
    cli.load_plugin_commands()           # every command comes from the gpurisk_register_commands hook
    want = {"assess": SHARED, "scan": SHARED,
            "compare": [f for f in SHARED if f != "--measure-timeout"],
            "protect": ["--fraction", "--population", "--sample-flag", "--weights", "--alpha",
                        "--seed", "--option", "--json", "--output"],
            "validate": ["--measures", "--seed", "--alpha", "--option", "--json", "--output"],
            "dis": ["--fraction", "--seed", "--json"], "design": ["--fraction", "--weights", "--json"],
            "record-risk": ["--fraction", "--population", "--sample-flag", "--json", "--output"],
            "suda": ["--fraction", "--population", "--sample-flag", "--weights", "--json",
                     "--output", "--dis-fraction"],
            "measures": ["--json"], "losses": ["--json"], "perturbations": ["--json"]}
    for cmd, flags in want.items():
        params = {o for p in cli.commands[cmd].params for o in p.opts}
        assert set(flags) <= params, (cmd, set(flags) - params)
    assert "required" in str([p.required for p in cli.commands["dis"].params
                              if "--fraction" in p.opts]).replace("True", "required")


# --- one measure runner ----------------------------------------------------------------------------

def test_no_measure_compute_outside_the_runner():
    hits = []
    for p in (ROOT / "gpurisk").rglob("*.py"):
        if p.name == "evaluate.py" and p.parent.name == "core":
            continue
        for i, line in enumerate(p.read_text().splitlines(), 1):
            for m in re.finditer(r"([\w\]\)]+)\.compute\(", line):
                if m.group(1) not in ("loss", "client"):       # a loss, Dask's client
                    hits.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not hits, hits


def test_the_runner_is_one_object_under_every_name():
    from gpurisk.core import evaluate
    from gpurisk.workflows import assess
    assert gpurisk.run_measures is evaluate.run_measures is assess.run_measures
    assert assess.option_columns is evaluate.option_columns


class _Boom(gpurisk.Measure):
    """Raises on the one-cell table (protect's top node); 0 elsewhere."""
    name = "boom_on_top"
    description = "raises on a table of one cell"

    def compute(self, table, ctx):
        if table.sample_cells == 1:
            raise ZeroDivisionError("no")
        return gpurisk.Result(value=0.0)


class _BoomPlugin:
    @gpurisk.hookimpl
    def gpurisk_register_measures(self):
        return [_Boom]


@pytest.fixture
def boom():
    plugins.reset()
    plugins.register(_BoomPlugin(), name="boom-plugin")
    yield
    plugins.reset()


def test_evaluate_isolates_and_marks_failures(boom):
    from gpurisk.core.evaluate import evaluate
    one = gpurisk.build_table(pd.DataFrame({"a": [1, 1]}), ["a"])
    two = gpurisk.build_table(pd.DataFrame({"a": [1, 2]}), ["a"])
    r = evaluate(_Boom, one, gpurisk.Context())
    assert r.value is None and r.failed and r.reason == "measure raised ZeroDivisionError: no"
    ok = evaluate(_Boom(), two, gpurisk.Context())
    assert ok.value == 0.0 and not ok.failed
    with pytest.raises(ZeroDivisionError):              # the conformance kit sees the exception
        evaluate(_Boom, one, gpurisk.Context(), isolate=False)
    na = gpurisk.Result.not_applicable("no pair")
    assert not na.failed and na == gpurisk.Result(value=None, reason="no pair")


def test_protect_criterion_on_a_raising_measure_fails(boom, tmp_path):
    """A criterion measure that raises makes the criterion fail on that node (even with
    --undefined meets, which lets a measure's reasoned no-value pass), never an internal error."""
    from gpurisk.protect import protect
    df = pd.DataFrame({"a": [1, 1, 2, 3, 4, 4], "b": list("xxxyyy")})
    data = tmp_path / "tiny.csv"
    df.to_csv(data, index=False)
    (tmp_path / "ha.csv").write_text("1;lo;*\n2;lo;*\n3;hi;*\n4;hi;*\n")
    (tmp_path / "hb.csv").write_text("x;*\ny;*\n")
    h = {"a": str(tmp_path / "ha.csv"), "b": str(tmp_path / "hb.csv")}
    for undefined in ("fails", "meets"):
        p = protect(data, ["a", "b"], h, ["boom_on_top<=1"], undefined=undefined, loss="discernibility")
        r = p.result
        top = [i for i, lv in enumerate(r.levels.tolist()) if lv == [2, 1]][0]
        assert not r.met[top, 0] and math.isnan(r.values[top, 0, 0])
        assert r.met[[i for i in range(len(r.levels)) if i != top], 0].all()


# --- suda takes π -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = tmp_path_factory.mktemp("suda")
    rng = np.random.default_rng(5)
    n = 40
    df = pd.DataFrame({"a": rng.integers(0, 3, n), "b": rng.integers(0, 3, n),
                       "c": rng.integers(0, 2, n), "w": rng.uniform(5, 15, n).round(2)})
    df.to_csv(d / "s.csv", index=False)
    pop = pd.concat([df, df.sample(160, replace=True, random_state=1)], ignore_index=True)
    pop.to_csv(d / "pop.csv", index=False)
    ref = {f: sum(brute_force(list(df[["a", "b", "c"]].itertuples(index=False, name=None)),
                              dis_fraction=f)["dis"]) for f in (0.1, n / 200, n / df["w"].sum())}
    return d, df, ref


def test_suda_without_pi_has_no_dis_figure(small):
    d, df, _ = small
    res = gpurisk.suda(d / "s.csv", "a,b,c")
    s = res.summary
    assert s["dis_sum"] is None and s["dis_max"] is None and s["dis_fraction"] is None
    assert "not applicable" in s["dis_reason"] and "fraction=PI" in s["dis_reason"] and "--" not in s["dis_reason"]
    assert res.records["dis_suda"].isna().all() and res.records["suda"].notna().all()


def test_suda_takes_pi_from_the_design(small):
    d, df, ref = small
    given = gpurisk.suda(d / "s.csv", "a,b,c", fraction=0.1).summary
    assert given["dis_fraction"] == 0.1 and given["dis_sum"] == pytest.approx(ref[0.1], rel=1e-12)
    pop = gpurisk.suda(d / "s.csv", "a,b,c", population=d / "pop.csv").summary
    assert pop["dis_fraction_from"] == "n/N" and pop["dis_fraction"] == pytest.approx(40 / 200)
    assert pop["dis_sum"] == pytest.approx(ref[40 / 200], rel=1e-12)
    w = gpurisk.suda(d / "s.csv", "a,b,c", weights="w").summary
    f = 40 / df["w"].sum()
    assert w["dis_fraction"] == pytest.approx(f) and w["dis_sum"] == pytest.approx(ref[f], rel=1e-9)
    whole = gpurisk.suda(d / "s.csv", "a,b,c", fraction=1).summary
    assert whole["dis_sum"] is None and "π = 1" in whole["dis_reason"]


def test_suda_cli_design_group(small):
    d, _, ref = small
    doc = json.loads(run_cli("suda", d / "s.csv", "--keys", "a,b,c", "--fraction", "0.1", "--json",
                             check=True).stdout)
    assert doc["dis_sum"] == pytest.approx(ref[0.1], rel=1e-12)
    out = run_cli("suda", d / "s.csv", "--keys", "a,b,c", check=True).stdout
    assert "DIS-SUDA: not applicable" in out and "expected correct matches" not in out


# --- workflows on the settings objects ------------------------------------------------------------

def test_assess_and_scan_take_the_settings_objects():
    from gpurisk.workflows.scan import scan_with
    from gpurisk.workflows.assess import assess_with
    rng = np.random.default_rng(2)
    df = pd.DataFrame({"a": rng.integers(0, 30, 800), "b": rng.integers(0, 4, 800)})
    design, run = Design(fraction=0.1), Run(measures="theta_hat,theta_hat_dis", alpha=0.05, seed=4,
                                            options={"theta_hat_dis": {"K": 2000}})
    kw = dict(fraction=0.1, measures=["theta_hat", "theta_hat_dis"], alpha=0.05, seed=4,
              options={"theta_hat_dis": {"K": 2000}})
    a, b = assess_with(df, "a,b", design, run), gpurisk.assess(df, "a,b", **kw)
    assert a.to_dict() == b.to_dict() and a.measures["theta_hat"].extra["alpha"] == 0.05
    s = scan_with(df, design, run, keys="a,b", max_size=2).results
    t = gpurisk.scan(df, keys="a,b", max_size=2, **kw).results
    pd.testing.assert_frame_equal(s, t)
    assert s["theta_hat_dis"].notna().any() and len(s) == 3
